// SPDX-License-Identifier: Apache-2.0
// The README's example: retry a flaky operation with full-jitter backoff and a retry budget.
#include <chrono>
#include <cstdio>
#include <string_view>
#include <system_error>

#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"

using namespace std::chrono_literals;

// Stands in for a network call: times out twice, then answers.
stormguard::outcome<int, std::error_code> fetch_answer(const stormguard::attempt_context& ctx) {
  if (ctx.attempt < 3) return stormguard::failure{std::make_error_code(std::errc::timed_out)};
  return 42;
}

int main() {
  // 3 retries; delays drawn uniformly from [0, min(50 ms, 5 ms · 2^(n-1))] (full jitter).
  stormguard::retry_policy policy({.max_retries = 3, .backoff = {.base = 5ms, .cap = 50ms}});
  stormguard::ratio_budget budget;   // retries <= 10 % of requests over 10 s, + 10/s floor
  stormguard::real_clock clock;      // steady_clock; tests pass testing::manual_clock
  stormguard::random_generator rng;  // seeded from the OS: no two processes in lockstep
  stormguard::retrier retry(policy, clock, rng, budget);

  auto result = retry(fetch_answer, [](const std::error_code& ec) {
    return ec == std::errc::timed_out;  // true: worth another attempt
  });
  if (!result) {
    const std::string_view reason = to_string(result.reason);
    std::printf("gave up: %.*s after %d attempts\n", static_cast<int>(reason.size()), reason.data(),
                result.attempts);
    return 1;
  }
  std::printf("answer %d after %d attempts, %lld ms of backoff\n", *result.value, result.attempts,
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(result.slept).count()));
  return *result.value == 42 && result.attempts == 3 ? 0 : 1;
}
