// SPDX-License-Identifier: Apache-2.0
// What server-side admission costs per request, against a bare atomic counter measured in the same
// run (1 and 2 threads sharing one instance):
//
//   BM_Baseline_AtomicCounter     one relaxed fetch_add (the least a server can do per request)
//   BM_RetryAdmission             parse x-envoy-attempt-count and grpc-timeout, compute the
//                                 deadline and check it, then retry_admission::admit (a first
//                                 attempt deposits; every 10th request is a retry that withdraws)
//   BM_RetryAdmission_FirstAttemptsOnly, BM_HeadersAndDeadlineOnly: its breakdown
//   BM_ConcurrencyLimit           try_acquire + release with a latency sample (mutex; a percentile
//                                 every 100 ms of virtual time)
//
// Each row reports allocs/op (counted by the replaced operator new).
//
// Reproduce (docs/performance.md): the median of 5 repetitions and its spread, each row against
// the bare counter of the same run and the same thread count, in CPU time:
//   build/bench/admission_benchmark --benchmark_repetitions=5 --benchmark_min_time=0.3
//       --benchmark_out=admission.json --benchmark_out_format=json
//   bench/tools/summarize.py admission.json --time cpu --filter threads:1
//       --baseline 'Atomic.*threads:1'      (and likewise with threads:2)
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "allocations_per_op.hpp"
#include "stormguard/admission/concurrency_limit.hpp"
#include "stormguard/admission/deadline.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_headers.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard_bench::run_counting_allocations;

void BM_Baseline_AtomicCounter(benchmark::State& state) {
  static std::atomic<std::int64_t> counter{0};
  run_counting_allocations(
      state, [&] { benchmark::DoNotOptimize(counter.fetch_add(1, std::memory_order_relaxed)); });
}
BENCHMARK(BM_Baseline_AtomicCounter)->Threads(1)->Threads(2)->UseRealTime();

void BM_RetryAdmission(benchmark::State& state) {
  static stormguard::admission::retry_admission admission;
  stormguard::time_point now{};
  std::int64_t i = 0;
  run_counting_allocations(state, [&] {
    now += 1us;
    const std::string_view attempt_header = (++i % 10 == 0) ? "2" : "1";
    std::string_view timeout_header = "250m";
    benchmark::DoNotOptimize(timeout_header);
    const auto attempt = stormguard::parse_attempt(attempt_header, std::nullopt);
    const auto deadline =
        stormguard::admission::deadline_of(now, stormguard::parse_grpc_timeout(timeout_header));
    const bool admitted =
        !stormguard::admission::expired(now, deadline) && admission.admit(now, attempt);
    benchmark::DoNotOptimize(admitted);
  });
}
BENCHMARK(BM_RetryAdmission)->Threads(1)->Threads(2)->UseRealTime();

// The breakdown of BM_RetryAdmission: the same request without its retries (every request a
// first attempt: the lock-free path only), and the header parsing + deadline check alone.
void BM_RetryAdmission_FirstAttemptsOnly(benchmark::State& state) {
  static stormguard::admission::retry_admission admission;
  stormguard::time_point now{};
  run_counting_allocations(state, [&] {
    now += 1us;
    std::string_view attempt_header = "1";
    std::string_view timeout_header = "250m";
    benchmark::DoNotOptimize(attempt_header);
    benchmark::DoNotOptimize(timeout_header);
    const auto attempt = stormguard::parse_attempt(attempt_header, std::nullopt);
    const auto deadline =
        stormguard::admission::deadline_of(now, stormguard::parse_grpc_timeout(timeout_header));
    const bool admitted =
        !stormguard::admission::expired(now, deadline) && admission.admit(now, attempt);
    benchmark::DoNotOptimize(admitted);
  });
}
BENCHMARK(BM_RetryAdmission_FirstAttemptsOnly)->Threads(1)->Threads(2)->UseRealTime();

void BM_HeadersAndDeadlineOnly(benchmark::State& state) {
  stormguard::time_point now{};
  std::int64_t i = 0;
  run_counting_allocations(state, [&] {
    now += 1us;
    std::string_view attempt_header = (++i % 10 == 0) ? "2" : "1";
    std::string_view timeout_header = "250m";
    benchmark::DoNotOptimize(attempt_header);
    benchmark::DoNotOptimize(timeout_header);
    const auto attempt = stormguard::parse_attempt(attempt_header, std::nullopt);
    const auto deadline =
        stormguard::admission::deadline_of(now, stormguard::parse_grpc_timeout(timeout_header));
    const bool pass = !stormguard::admission::expired(now, deadline) && !attempt.malformed;
    benchmark::DoNotOptimize(pass);
  });
}
BENCHMARK(BM_HeadersAndDeadlineOnly)->Threads(1)->UseRealTime();

void BM_ConcurrencyLimit(benchmark::State& state) {
  static stormguard::admission::concurrency_limit limit({.initial_limit = 1000},
                                                        stormguard::time_point{});
  stormguard::random_generator g(static_cast<std::uint64_t>(state.thread_index()) + 1);
  stormguard::time_point now{};
  run_counting_allocations(state, [&] {
    now += 1us;
    if (limit.try_acquire(now)) limit.release(now + 5ms, now, g);
  });
}
BENCHMARK(BM_ConcurrencyLimit)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
