// SPDX-License-Identifier: Apache-2.0
// What recognising a request's retry signals costs `serve` (src/lab/retry_signal_reader.hpp: the
// labels of every ecosystem, the Idempotency-Key, and the request's fingerprint, a SHA-256 of
// who, method, target and body cut to 64 bits, looked up among the fingerprints whose answer
// failed), against the same admission without them, measured in the same run:
//
//   BM_Admission_WithoutSignals    parse x-envoy-attempt-count and grpc-timeout, check the
//                                  deadline, retry_admission::admit (a bodiless GET)
//   BM_Admission_WithSignals/N     the same, after recognise() on that GET (four header fields:
//                                  Host, User-Agent, Accept, Authorization), with N fingerprints
//                                  held in the failed-fingerprint table (capacity 2^20 entries)
//   BM_Fingerprint/KiB             the fingerprint alone of a request with a body of KiB KiB:
//                                  the body digest's cost per KiB is the slope
//   BM_Sha256_92Bytes              the SHA-256 of 92 bytes (what the first fingerprint format
//                                  hashed for this GET: two blocks), with OpenSSL's low-level
//                                  SHA256_Init/Update/Final (no EVP layer)
//
// The requests are built with evhttp_request_new (no connection): the principal comes from the
// Authorization field ("Bearer client-0001", 18 bytes) and the target is empty: the digest after
// the domain block is one block, as for any target of up to 24 bytes (who and target together at
// most 42). Counters: allocs/op, and table_bytes, the memory of the recognizer's two tables.
//
// Reproduce (docs/performance.md, "Retry signals"):
//   cmake --build --preset release --target retry_signals_benchmark
//   build/bench/retry_signals_benchmark --benchmark_repetitions=5 --benchmark_min_time=0.3
//       --benchmark_out=signals.json --benchmark_out_format=json
//   bench/tools/summarize.py signals.json --time cpu --baseline 'Admission_WithoutSignals'
// The low-level SHA256_* functions are deprecated in OpenSSL 3 (the EVP layer replaces it); it is
// used here only to measure the digest without that layer.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <benchmark/benchmark.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <openssl/sha.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "allocations_per_op.hpp"
#include "lab/retry_signal_reader.hpp"
#include "stormguard/admission/deadline.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_headers.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard_bench::run_counting_allocations;

struct request_deleter {
  void operator()(evhttp_request* r) const noexcept { evhttp_request_free(r); }
};
using request_ptr = std::unique_ptr<evhttp_request, request_deleter>;

// A bodiless GET as curl sends it, with a principal; `body_bytes` of body when asked.
request_ptr make_get(std::size_t body_bytes = 0) {
  request_ptr req(evhttp_request_new(nullptr, nullptr));
  evkeyvalq* in = evhttp_request_get_input_headers(req.get());
  evhttp_add_header(in, "Host", "127.0.0.1:8080");
  evhttp_add_header(in, "User-Agent", "curl/7.88.1");
  evhttp_add_header(in, "Accept", "*/*");
  evhttp_add_header(in, "Authorization", "Bearer client-0001");
  if (body_bytes > 0) {
    const std::string body(body_bytes, 'x');
    evbuffer_add(evhttp_request_get_input_buffer(req.get()), body.data(), body.size());
  }
  return req;
}

// The admission both rows run: the attempt label, the deadline, the server's retry budget.
bool admit(stormguard::admission::retry_admission& admission, stormguard::time_point now) {
  std::string_view attempt_header = "1";
  std::string_view timeout_header = "250m";
  benchmark::DoNotOptimize(attempt_header);
  benchmark::DoNotOptimize(timeout_header);
  const auto attempt = stormguard::parse_attempt(attempt_header, std::nullopt);
  const auto deadline =
      stormguard::admission::deadline_of(now, stormguard::parse_grpc_timeout(timeout_header));
  return !stormguard::admission::expired(now, deadline) && admission.admit(now, attempt);
}

void BM_Admission_WithoutSignals(benchmark::State& state) {
  stormguard::admission::retry_admission admission;
  stormguard::time_point now{};
  run_counting_allocations(state, [&] {
    now += 1us;
    benchmark::DoNotOptimize(admit(admission, now));
  });
}
BENCHMARK(BM_Admission_WithoutSignals);

void BM_Admission_WithSignals(benchmark::State& state) {
  const auto held = static_cast<std::uint64_t>(state.range(0));
  stormguard::admission::retry_signals_options options;
  options.failed_fingerprints.capacity = std::size_t{1} << 20;
  stormguard::lab::detail::retry_signal_reader reader(options);
  // N other requests' answers failed within the window.
  stormguard::random_generator rng(7);
  const stormguard::time_point start{};
  for (std::uint64_t i = 0; i < held; ++i) reader.failed(rng(), start);
  stormguard::admission::retry_admission admission;
  const request_ptr req = make_get();
  stormguard::time_point now = start + 1s;
  run_counting_allocations(state, [&] {
    now += 1us;
    const auto seen = reader.recognise(req.get(), now);
    benchmark::DoNotOptimize(seen);
    benchmark::DoNotOptimize(admit(admission, now));
  });
  state.counters["table_bytes"] = static_cast<double>(reader.memory_bytes());
}
BENCHMARK(BM_Admission_WithSignals)->Arg(0)->Arg(1'000'000);

void BM_Fingerprint(benchmark::State& state) {
  stormguard::lab::detail::retry_signal_reader reader;
  const request_ptr req = make_get(static_cast<std::size_t>(state.range(0)) * 1024);
  run_counting_allocations(state, [&] { benchmark::DoNotOptimize(reader.fingerprint(req.get())); });
  state.SetBytesProcessed(state.iterations() * state.range(0) * 1024);
}
BENCHMARK(BM_Fingerprint)->Arg(0)->Arg(1)->Arg(16)->Arg(64);

void BM_Sha256_92Bytes(benchmark::State& state) {
  std::array<unsigned char, 92> input{};
  std::array<unsigned char, SHA256_DIGEST_LENGTH> out{};
  std::uint8_t i = 0;
  run_counting_allocations(state, [&] {
    input[0] = ++i;
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, input.data(), input.size());
    SHA256_Final(out.data(), &ctx);
    benchmark::DoNotOptimize(out);
  });
}
BENCHMARK(BM_Sha256_92Bytes);

}  // namespace
