// SPDX-License-Identifier: Apache-2.0
// The HTTP rules of the core, against baselines measured in the same run:
//   BM_Baseline_FromChars_DelaySeconds    std::from_chars of the same digits (no validation of
//                                         the whole field, no saturation): the floor
//   BM_ParseRetryAfter_DelaySeconds       stormguard::parse_retry_after("120", now)
//   BM_Baseline_StrptimeTimegm_ImfFixdate strptime("%a, %d %b %Y %H:%M:%S GMT") + timegm: the
//                                         usual POSIX way (locale-dependent, not portable,
//                                         accepts what RFC 9110 does not)
//   BM_ParseRetryAfter_ImfFixdate         stormguard::parse_retry_after of the same date
//   BM_ParseRetryAfter_Rfc850 / _Asctime  the two obsolete forms
//   BM_ParseRetryAfter_Invalid            a rejected value (trailing junk after a date)
//   BM_ClassifyHttpStatus                 classify_http_status(503, "POST", key, Retry-After)
//   BM_Baseline_RandomDeviceDefault4      four calls of a std::random_device with the default
//                                         token (RDRAND on this machine), constructed each time
//   BM_MakeIdempotencyKey                 make_idempotency_key(): getentropy + formatting
//
// Reproduce: build/bench/http_rules_benchmark (see docs/performance.md).
#include <benchmark/benchmark.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <random>
#include <string>
#include <string_view>

#include "stormguard/http_classify.hpp"
#include "stormguard/idempotency.hpp"
#include "stormguard/retry_after.hpp"

namespace {

using namespace std::chrono;

// A fixed "now" (2025-06-15 12:00:00 UTC) so that every date parses to a positive delay.
const system_clock::time_point k_now = sys_days{2025y / June / 15} + 12h;

void BM_Baseline_FromChars_DelaySeconds(benchmark::State& state) {
  std::string_view text = "120";
  for (auto _ : state) {
    benchmark::DoNotOptimize(text);
    std::int64_t value = 0;
    const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool ok = result.ec == std::errc{} && result.ptr == text.data() + text.size();
    const auto delay = ok ? duration_cast<nanoseconds>(seconds(value)) : nanoseconds::zero();
    benchmark::DoNotOptimize(delay);
  }
}
BENCHMARK(BM_Baseline_FromChars_DelaySeconds);

void BM_ParseRetryAfter_DelaySeconds(benchmark::State& state) {
  std::string_view text = "120";
  for (auto _ : state) {
    benchmark::DoNotOptimize(text);
    benchmark::DoNotOptimize(stormguard::parse_retry_after(text, k_now));
  }
}
BENCHMARK(BM_ParseRetryAfter_DelaySeconds);

void BM_Baseline_StrptimeTimegm_ImfFixdate(benchmark::State& state) {
  const std::string text = "Sun, 15 Jun 2025 12:01:40 GMT";
  const auto now_seconds = system_clock::to_time_t(k_now);
  for (auto _ : state) {
    benchmark::DoNotOptimize(text.data());
    std::tm tm{};
    const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    const bool ok = end != nullptr && *end == '\0';
    const std::time_t t = ok ? ::timegm(&tm) : 0;
    const auto delay = ok && t > now_seconds ? duration_cast<nanoseconds>(seconds(t - now_seconds))
                                             : nanoseconds::zero();
    benchmark::DoNotOptimize(delay);
  }
}
BENCHMARK(BM_Baseline_StrptimeTimegm_ImfFixdate);

void parse_loop(benchmark::State& state, std::string_view text) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(text);
    benchmark::DoNotOptimize(stormguard::parse_retry_after(text, k_now));
  }
}

void BM_ParseRetryAfter_ImfFixdate(benchmark::State& state) {
  parse_loop(state, "Sun, 15 Jun 2025 12:01:40 GMT");
}
BENCHMARK(BM_ParseRetryAfter_ImfFixdate);

void BM_ParseRetryAfter_Rfc850(benchmark::State& state) {
  parse_loop(state, "Sunday, 15-Jun-25 12:01:40 GMT");
}
BENCHMARK(BM_ParseRetryAfter_Rfc850);

void BM_ParseRetryAfter_Asctime(benchmark::State& state) {
  parse_loop(state, "Sun Jun 15 12:01:40 2025");
}
BENCHMARK(BM_ParseRetryAfter_Asctime);

void BM_ParseRetryAfter_Invalid(benchmark::State& state) {
  parse_loop(state, "Sun, 15 Jun 2025 12:01:40 GMT; junk");
}
BENCHMARK(BM_ParseRetryAfter_Invalid);

void BM_ClassifyHttpStatus(benchmark::State& state) {
  const stormguard::retryable_statuses statuses;
  std::optional<stormguard::duration> retry_after = seconds(2);
  for (auto _ : state) {
    benchmark::DoNotOptimize(retry_after);
    benchmark::DoNotOptimize(
        stormguard::classify_http_status(503, "POST", true, retry_after, statuses));
  }
}
BENCHMARK(BM_ClassifyHttpStatus);

void BM_Baseline_RandomDeviceDefault4(benchmark::State& state) {
  for (auto _ : state) {
    std::random_device device;
    std::uint32_t x = 0;
    for (int i = 0; i < 4; ++i) x ^= device();
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_Baseline_RandomDeviceDefault4);

void BM_MakeIdempotencyKey(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(stormguard::make_idempotency_key());
}
BENCHMARK(BM_MakeIdempotencyKey);

}  // namespace
