// SPDX-License-Identifier: Apache-2.0
// The examples of the API reference's class pages (Doxygen `\snippet`s between `//! [name]`
// markers), for the core library: the retrier, the retry policy, each budget kind (the retry
// breaker and the fleet budget included) and the hedging policy. Each example runs here on a manual
// clock (virtual time, no real sleep) with a seeded generator, and the assertions after it check
// what its comments say.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <system_error>

#include "stormguard/budget.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/retry_breaker.hpp"
#include "stormguard/retry_policy.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;

// A backend that is down: every attempt is refused (a transient error the default classifier
// retries).
std::error_code backend_down(const stormguard::attempt_context&) {
  return std::make_error_code(std::errc::connection_refused);
}

// Sends `calls` logical requests through `retry` to a backend that is down; returns the retries
// made (attempts beyond the first).
template <class Retrier>
int retries_against_a_down_backend(Retrier& retry, int calls) {
  int retries = 0;
  for (int i = 0; i < calls; ++i) {
    const auto result = retry(backend_down);
    if (result.attempts > 1) retries += result.attempts - 1;
  }
  return retries;
}

TEST(ReferenceExamples, Retrier) {
  //! [retrier]
  stormguard::retry_policy policy;          // 3 retries, 100 ms .. 3 s, full jitter
  stormguard::testing::manual_clock clock;  // in production: stormguard::real_clock
  stormguard::random_generator rng(42);     // in production: seeded from the OS
  stormguard::ratio_budget budget;          // shared by every call of this client
  stormguard::retrier retry(policy, clock, rng, budget);

  int calls = 0;
  auto result =
      retry([&](const stormguard::attempt_context& ctx) -> std::pair<int, std::error_code> {
        ++calls;  // ctx.attempt: 1, then 2, 3; ctx.time_left: the deadline's time left
        if (ctx.attempt < 3) return {0, std::make_error_code(std::errc::connection_reset)};
        return {42, {}};
      });
  // result.ok(), *result.value == 42, result.attempts == 3, result.previous_errors holds the two
  // resets, result.slept the two backoff delays (each within [0, 100 ms] and [0, 200 ms]).
  //! [retrier]
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result.value, 42);
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(result.previous_errors.size(), 2u);
  EXPECT_LE(result.slept, 300ms);
}

TEST(ReferenceExamples, RetryPolicy) {
  //! [retry_policy]
  // 2 retries; exponential backoff from 50 ms, capped at 1 s, with full jitter.
  const stormguard::retry_policy policy(
      {.max_retries = 2, .backoff = {.base = 50ms, .cap = 1s}, .max_retry_after = 10s});
  stormguard::random_generator rng(7);
  stormguard::no_budget budget;
  const stormguard::time_point now{};

  // decide() is a pure function of the attempt's state: the retrier, async_retry and the
  // simulator all call it after a failed attempt.
  const auto after_1 = policy.decide(1, stormguard::classification::retry(), 0ns, rng, budget, now);
  // after_1.retry, after_1.delay in [0, 50 ms]
  const auto after_3 = policy.decide(3, stormguard::classification::retry(), 0ns, rng, budget, now);
  // !after_3.retry: after_3.reason == end_reason::attempts_exhausted (2 retries were allowed)
  const auto told =
      policy.decide(1, stormguard::classification::retry_after(30s), 0ns, rng, budget, now);
  // a Retry-After above max_retry_after ends the call at once: retry_after_too_long
  //! [retry_policy]
  EXPECT_TRUE(after_1.retry);
  EXPECT_LE(after_1.delay, 50ms);
  EXPECT_FALSE(after_3.retry);
  EXPECT_EQ(after_3.reason, stormguard::end_reason::attempts_exhausted);
  EXPECT_FALSE(told.retry);
  EXPECT_EQ(told.reason, stormguard::end_reason::retry_after_too_long);
}

TEST(ReferenceExamples, RatioBudget) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator rng(1);
  //! [ratio_budget]
  // Retries at most 10 % of the requests over 10 s; no floor, to show the ratio alone.
  stormguard::ratio_budget budget({.ratio = 0.1, .window = 10s, .min_retries_per_second = 0});
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng, budget);

  // 100 calls to a backend that is down: 3 retries each would be 300 retries (4x the load);
  // the budget grants one retry per 10 requests, and every other call fails fast
  // (end_reason::budget_exhausted).
  const int retries = retries_against_a_down_backend(retry, 100);  // 10
  //! [ratio_budget]
  EXPECT_LE(retries, 10);
  EXPECT_GE(retries, 9);
}

TEST(ReferenceExamples, TokenBucketThrottle) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator rng(1);
  //! [token_bucket_throttle]
  // gRPC's retry throttling: 10 tokens, a failure costs 1, a success refills 0.1; no retry while
  // the bucket is half empty or less.
  stormguard::token_bucket_throttle budget({.max_tokens = 10, .token_ratio = 0.1});
  stormguard::retrier retry(stormguard::retry_policy({.max_retries = 10}), clock, rng, budget);

  // Against a backend that is down, the failures drain the bucket: 4 retries in all
  // (ceil(10 / 2) - 1, all in the first call), then none until successes refill it above half.
  const int retries = retries_against_a_down_backend(retry, 100);  // 4
  //! [token_bucket_throttle]
  EXPECT_EQ(retries, 4);
  EXPECT_LE(budget.tokens(), 5.0);
}

TEST(ReferenceExamples, RetryQuota) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator rng(1);
  //! [retry_quota]
  // The AWS SDKs' "standard" retry quota: 500 tokens, a retry costs 5 (10 after a timeout), a
  // success pays back.
  stormguard::retry_quota budget;
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng, budget);

  // Against a backend that is down: floor(500 / 5) = 100 retries in all, then none.
  const int retries = retries_against_a_down_backend(retry, 1000);  // 100
  //! [retry_quota]
  EXPECT_EQ(retries, 100);
  EXPECT_EQ(budget.available(), 0);
}

TEST(ReferenceExamples, AdaptiveThrottle) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator rng(1);
  //! [adaptive_throttle]
  // The SRE book's client-side throttling: once the backend accepts too few requests, the client
  // rejects requests itself (first attempts too) with probability
  // max(0, (requests - k * accepts) / (requests + 1)) over the last 2 minutes.
  stormguard::adaptive_throttle budget;  // k = 2, window 2 min
  stormguard::retrier retry(stormguard::retry_policy({.max_retries = 0}), clock, rng, budget);

  int throttled = 0;
  for (int i = 0; i < 1000; ++i) {  // a backend that is down
    if (retry(backend_down).reason == stormguard::end_reason::throttled) ++throttled;
  }
  // Most calls now end locally (end_reason::throttled, no attempt sent): the backend is spared.
  //! [adaptive_throttle]
  EXPECT_GT(throttled, 900);
  EXPECT_GT(budget.rejection_probability(clock.now()), 0.99);
}

TEST(ReferenceExamples, ConcurrencyBudget) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator rng(1);
  //! [concurrency_budget]
  // Envoy's retry budget: retries in flight at most max(3, 20 % of the requests in flight).
  stormguard::concurrency_budget budget({.budget_percent = 20, .min_retry_concurrency = 3});
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng, budget);

  // One call at a time: its retries are always within the minimum of 3 in flight, so each call
  // makes its 3 retries. Many concurrent calls (threads sharing the budget) would be held to
  // 20 % of the calls in flight.
  const int retries = retries_against_a_down_backend(retry, 10);  // 30
  //! [concurrency_budget]
  EXPECT_EQ(retries, 30);
}

TEST(ReferenceExamples, RetryBreaker) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator rng(1);
  //! [retry_breaker]
  // Retries only while the failure rate over the last 10 s is below 10 % (Brooker 2022).
  stormguard::retry_breaker breaker({.threshold = 0.1, .window = 10s});
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng, breaker);

  for (int i = 0; i < 90; ++i) {  // a healthy backend: 90 calls succeed
    (void)retry([](const stormguard::attempt_context&) { return std::error_code(); });
  }
  // Then the backend goes down: the first failures, against a healthy record, are retried (7
  // retries, until 10 failures in 100 attempts), then no call retries until the rate falls.
  const int retries = retries_against_a_down_backend(retry, 100);  // 7
  //! [retry_breaker]
  EXPECT_EQ(retries, 7);
  EXPECT_GE(breaker.failure_rate(clock.now()), 0.1);
}

TEST(ReferenceExamples, FleetBudget) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator rng(1);
  //! [fleet_budget]
  // Two processes of one service share one ratio budget through a store (stormguard::fleet's
  // Redis store in production; here the in-memory model of it).
  stormguard::fleet_window_store store(10s, 3s);
  stormguard::fleet_budget_options options;  // sync every 100 ms, at most 2 s apart
  options.ratio = {.ratio = 0.1, .min_retries_per_second = 0};  // 10 % of the fleet's requests
  stormguard::fleet_budget a(options);
  stormguard::fleet_budget b(options);

  // Process a serves 100 requests; process b none.
  for (int i = 0; i < 100; ++i) (void)a.try_admit(clock.now(), rng);

  // Each process syncs off the request path (sync_due, begin_sync, one store round trip,
  // end_sync), here both at once.
  for (auto [budget, name] : {std::pair{&a, "a"}, std::pair{&b, "b"}}) {
    const stormguard::fleet_deltas out = budget->begin_sync(clock.now());
    budget->end_sync(clock.now(), store.sync(clock.now(), name, out, budget->terms()));
  }
  // Both joined the fleet: the fleet's allowance is 10 % of its 100 requests, 10 retries,
  // whichever process asks.
  int granted = 0;
  while (a.try_withdraw(clock.now(), stormguard::attempt_status::failure, rng)) ++granted;
  //! [fleet_budget]
  EXPECT_EQ(a.current_mode(clock.now()), stormguard::fleet_budget::mode::joined);
  EXPECT_EQ(b.current_mode(clock.now()), stormguard::fleet_budget::mode::joined);
  EXPECT_GE(granted, 9);
  EXPECT_LE(granted, 11);
}

TEST(ReferenceExamples, HedgingPolicy) {
  //! [hedging_policy]
  // Up to 2 copies of a request; the second 20 ms after the first if no answer came.
  const stormguard::hedging_policy hedging({.max_attempts = 2, .delay = 20ms});
  const stormguard::time_point sent{};  // the first copy went out at t = 0

  const auto next = hedging.plan_next(1, sent, sent, std::nullopt, stormguard::time_point::max(),
                                      hedging.delay());
  // next.send, next.at == sent + 20 ms: an executor arms a timer for it (asio's hedger,
  // http::async_client with client_options::hedging) and cancels the copies that lose.
  const auto none = hedging.plan_next(2, sent, sent + 20ms, std::nullopt,
                                      stormguard::time_point::max(), hedging.delay());
  // !none.send: 2 copies were sent already
  //! [hedging_policy]
  EXPECT_TRUE(next.send);
  EXPECT_EQ(next.at, sent + 20ms);
  EXPECT_FALSE(none.send);
}

}  // namespace
