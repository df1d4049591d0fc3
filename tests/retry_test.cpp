// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "counting_budget.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/random.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "stormguard/testing/scripted_random.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_context;
using stormguard::backoff_options;
using stormguard::classification;
using stormguard::duration;
using stormguard::end_reason;
using stormguard::failure;
using stormguard::jitter;
using stormguard::outcome;
using stormguard::random_generator;
using stormguard::retrier;
using stormguard::retry_decision;
using stormguard::retry_options;
using stormguard::retry_policy;
using stormguard::time_point;
using stormguard::test_util::counting_budget;
using stormguard::testing::fraction;
using stormguard::testing::manual_clock;
using stormguard::testing::scripted_random;
using ::testing::AllOf;
using ::testing::HasSubstr;

using stormguard::test_util::invalid_argument_message;

retry_policy policy_with(int max_retries, jitter j = jitter::full, duration base = 100ms,
                         duration cap = 3s) {
  return retry_policy(retry_options{
      .max_retries = max_retries,
      .backoff = backoff_options{.base = base, .cap = cap, .multiplier = 2.0, .jitter = j}});
}

// An operation that fails `failures` times (errors 1, 2, …), then returns `value`.
struct flaky {
  explicit flaky(int failures_before_success, int success_value = 42)
      : failures(failures_before_success), value(success_value) {}

  int failures;
  int value;
  int calls = 0;
  std::vector<int> attempts_seen;

  outcome<int, int> operator()(const attempt_context& ctx) {
    ++calls;
    attempts_seen.push_back(ctx.attempt);
    if (calls <= failures) return failure{calls};
    return value;
  }
};

// ---------------------------------------------------------------------------------------------
// Attempts and end reasons.
// ---------------------------------------------------------------------------------------------

TEST(Retrier, NeverMoreThanMaxRetriesPlusOneAttempts) {
  for (int max_retries : {0, 1, 2, 3, 7, 50}) {
    manual_clock clock;
    random_generator rng(1);
    retrier retry(policy_with(max_retries), clock, rng);
    flaky op{1'000'000};
    const auto result = retry(op);
    EXPECT_FALSE(result.ok());
    EXPECT_EQ(result.reason, end_reason::attempts_exhausted) << max_retries;
    EXPECT_EQ(result.attempts, max_retries + 1);
    EXPECT_EQ(op.calls, max_retries + 1);
    EXPECT_EQ(clock.sleeps().size(), static_cast<std::size_t>(max_retries));
    std::vector<int> numbered(static_cast<std::size_t>(max_retries + 1));
    std::iota(numbered.begin(), numbered.end(), 1);
    EXPECT_EQ(op.attempts_seen, numbered);  // attempts are numbered from 1
  }
}

TEST(Retrier, SuccessAfterKFailuresReturnsTheValue) {
  for (int k : {0, 1, 2, 3}) {
    manual_clock clock;
    random_generator rng(2);
    retrier retry(policy_with(3), clock, rng);
    flaky op{k, 7};
    const auto result = retry(op);
    ASSERT_TRUE(result.ok()) << k;
    EXPECT_TRUE(static_cast<bool>(result));
    EXPECT_EQ(result.reason, end_reason::success);
    ASSERT_TRUE(result.value.has_value());
    EXPECT_EQ(*result.value, 7);
    EXPECT_EQ(result.attempts, k + 1);
    EXPECT_FALSE(result.last_error.has_value());
    EXPECT_EQ(clock.sleeps().size(), static_cast<std::size_t>(k));
  }
}

TEST(Retrier, LastErrorHoldsTheLastAttemptsError) {
  manual_clock clock;
  random_generator rng(3);
  retrier retry(policy_with(2), clock, rng);
  flaky op{100};
  const auto result = retry(op);
  EXPECT_EQ(result.reason, end_reason::attempts_exhausted);
  ASSERT_TRUE(result.last_error.has_value());
  EXPECT_EQ(*result.last_error, 3);  // errors 1, 2, 3: the third attempt's
  EXPECT_FALSE(result.value.has_value());
}

TEST(Retrier, StopVerdictMeansExactlyOneAttempt) {
  manual_clock clock;
  random_generator rng(4);
  retrier retry(policy_with(5), clock, rng);
  flaky op{100};
  const auto result = retry(op, [](int) { return classification::stop(); });
  EXPECT_EQ(result.reason, end_reason::not_retryable);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(op.calls, 1);
  EXPECT_EQ(result.last_error, 1);
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(Retrier, BoolClassifierTrueRetriesFalseStops) {
  manual_clock clock;
  random_generator rng(5);
  retrier retry(policy_with(5), clock, rng);
  // Errors 1 and 2 are transient, 3 is not.
  flaky op{100};
  const auto result = retry(op, [](int error) { return error < 3; });
  EXPECT_EQ(result.reason, end_reason::not_retryable);
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(result.last_error, 3);
  EXPECT_EQ(clock.sleeps().size(), 2U);
}

TEST(Retrier, ClassifierSeesEachError) {
  manual_clock clock;
  random_generator rng(6);
  retrier retry(policy_with(3), clock, rng);
  std::vector<int> seen;
  flaky op{2};
  const auto result = retry(op, [&](const int& error) {
    seen.push_back(error);
    return classification::retry();
  });
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
}

// ---------------------------------------------------------------------------------------------
// Sleeps: exactly the backoff's delays.
// ---------------------------------------------------------------------------------------------

TEST(Retrier, SleepsAreExactlyTheBackoffDelays) {
  manual_clock clock;
  // Full jitter, base 100 ms ×2: ceilings 100, 200, 400 ms.
  scripted_random rng{fraction(0.5), fraction(0.25), fraction(1.0)};
  retrier retry(policy_with(3), clock, rng);
  flaky op{100};
  const auto result = retry(op);
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{50ms, 50ms, 400ms}));
  EXPECT_EQ(result.slept, 500ms);
  EXPECT_EQ(clock.now(), time_point{} + 500ms);
  EXPECT_EQ(rng.drawn(), 3U);  // one draw per retry, none for the last failure
}

TEST(Retrier, SleepsMatchTheBackoffForEveryJitter) {
  const std::vector<std::uint64_t> script{fraction(0.9), fraction(0.1), fraction(0.33),
                                          fraction(0.7), fraction(0.0), fraction(1.0)};
  for (jitter j : {jitter::none, jitter::equal, jitter::full, jitter::decorrelated}) {
    const retry_policy policy = policy_with(6, j, 10ms, 2s);
    manual_clock clock;
    scripted_random rng(script);
    retrier retry(policy, clock, rng);
    flaky op{100};
    const auto result = retry(op);

    // The same draws through the backoff directly, each delay fed back in as `previous`.
    scripted_random expected_rng(script);
    std::vector<duration> expected;
    duration previous{};
    for (int n = 1; n <= 6; ++n) {
      previous = policy.backoff().delay(n, expected_rng, previous);
      expected.push_back(previous);
    }
    EXPECT_EQ(clock.sleeps(), expected) << to_string(j);
    EXPECT_EQ(result.slept, std::accumulate(expected.begin(), expected.end(), duration{}));
  }
}

TEST(Retrier, DecorrelatedJitterIsGivenThePreviousDelay) {
  manual_clock clock;
  scripted_random rng{fraction(0.5), fraction(0.5), fraction(1.0)};
  retrier retry(policy_with(3, jitter::decorrelated), clock, rng);
  flaky op{100};
  (void)retry(op);
  // U(100, 300) → 200; U(100, 600) → 350; U(100, 1050) → 1050 (ms).
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{200ms, 350ms, 1050ms}));
}

// ---------------------------------------------------------------------------------------------
// Retry-After.
// ---------------------------------------------------------------------------------------------

TEST(Retrier, RetryAfterRaisesTheDelayToAtLeastIt) {
  manual_clock clock;
  // Retry-After 2 s: the backoff draws 0, the spread U(0, 1 s) draws its middle (500 ms).
  // Retry-After 10 ms: the backoff draws its ceiling (200 ms), the spread U(0, 5 ms) draws 0.
  scripted_random rng{fraction(0.0), fraction(0.5), fraction(1.0), fraction(0.0)};
  retrier retry(policy_with(2), clock, rng);
  flaky op{2};
  int call = 0;
  const auto result = retry(op, [&](int) {
    return ++call == 1 ? classification::retry_after(2s) : classification::retry_after(10ms);
  });
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{2500ms, 200ms}));
  EXPECT_EQ(result.slept, 2700ms);
}

TEST(Retrier, RetryAfterAboveMaximumEndsWithoutSleeping) {
  manual_clock clock;
  scripted_random rng{};  // nothing may be drawn either
  counting_budget budget;
  retrier retry(retry_policy(retry_options{.max_retries = 3, .max_retry_after = 30s}), clock, rng,
                budget);
  flaky op{100};
  const auto result = retry(op, [](int) { return classification::retry_after(31s); });
  EXPECT_EQ(result.reason, end_reason::retry_after_too_long);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_TRUE(clock.sleeps().empty());
  EXPECT_EQ(budget.withdrawals, 0);  // the budget is not charged for a retry never made
}

TEST(Retrier, RetryAfterEqualToMaximumIsHonouredWithoutSpread) {
  manual_clock clock;
  // The backoff draws 0; the spread has no room left under max_retry_after: exactly 30 s.
  scripted_random rng{fraction(0.0), fraction(1.0)};
  retrier retry(retry_policy(retry_options{.max_retries = 1, .max_retry_after = 30s}), clock, rng);
  flaky op{1};
  const auto result = retry(op, [](int) { return classification::retry_after(30s); });
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{30s}));
}

TEST(RetryPolicy, MaxRetryAfterBoundsTheSleepIncludingTheSpread) {
  // The reported case: --max-retry-after 2s with Retry-After: 2 waited 2.94 s. Now the spread
  // only uses the room left below max_retry_after.
  const retry_policy policy(retry_options{.max_retries = 1, .max_retry_after = 2s});
  stormguard::random_generator rng(7);
  stormguard::no_budget none;
  for (const duration d : {duration(2s), duration(1500ms), duration(1s), duration(0ns)}) {
    duration longest{};
    for (int i = 0; i < 20'000; ++i) {
      const auto next = policy.decide(1, classification::retry_after(d), 0ns, rng, none, {});
      ASSERT_TRUE(next.retry);
      ASSERT_GE(next.delay, d);
      ASSERT_LE(next.delay, 2s) << "Retry-After " << d.count();
      longest = std::max(longest, next.delay);
    }
    // The spread is still used where there is room: up to min(d/2, 2 s - d) above d.
    const duration room = std::min(d / 2, duration(2s) - d);
    EXPECT_GE(longest, d + room * 99 / 100) << "Retry-After " << d.count();
  }
}

TEST(RetryPolicy, RetryAfterSpreadKeepsItsFullRangeBelowTheMaximum) {
  // Retry-After 2 s, max 60 s: the sleep is spread over [2 s, 3 s] as before.
  scripted_random rng{fraction(0.0), fraction(1.0)};
  const retry_policy policy(retry_options{.max_retries = 1});
  stormguard::no_budget none;
  const auto next = policy.decide(1, classification::retry_after(2s), 0ns, rng, none, {});
  EXPECT_EQ(next.delay, 3s);
}

TEST(RetryPolicy, ABackoffLongerThanMaxRetryAfterIsKeptWithoutSpread) {
  // Backoff none with base = cap = 5 s, Retry-After 1 s, max_retry_after 2 s: the policy's own
  // backoff (5 s) is longer than both; the Retry-After adds nothing above it.
  scripted_random rng{fraction(1.0), fraction(1.0)};
  const retry_policy policy(
      retry_options{.max_retries = 1,
                    .backoff = {.base = 5s, .cap = 5s, .jitter = stormguard::jitter::none},
                    .max_retry_after = 2s});
  stormguard::no_budget none;
  const auto next = policy.decide(1, classification::retry_after(1s), 0ns, rng, none, {});
  EXPECT_EQ(next.delay, 5s);
}

TEST(RetryPolicy, EmptyBracesMeanTheDefaults) {
  const retry_policy policy({});
  EXPECT_EQ(policy.options(), retry_options{});
  const stormguard::backoff b({});
  EXPECT_EQ(b.options(), stormguard::backoff_options{});
  const retry_policy designated({.max_retries = 5});
  EXPECT_EQ(designated.max_retries(), 5);
}

TEST(Classification, NegativeRetryAfterCountsAsZero) {
  EXPECT_EQ(classification::retry_after(-5s).delay(), 0ns);
  EXPECT_EQ(classification::retry_after(-5s).action(), classification::kind::retry_after);
  EXPECT_EQ(classification::retry().delay(), 0ns);
  EXPECT_NE(classification::retry(), classification::stop());
}

// ---------------------------------------------------------------------------------------------
// Budget.
// ---------------------------------------------------------------------------------------------

TEST(Retrier, BudgetDenialEndsTheCallWithoutSleeping) {
  manual_clock clock;
  random_generator rng(7);
  counting_budget budget(2);
  retrier retry(policy_with(5), clock, rng, budget);
  flaky op{100};
  const auto result = retry(op);
  EXPECT_EQ(result.reason, end_reason::budget_exhausted);
  EXPECT_EQ(result.attempts, 3);  // two granted retries, the third denied
  EXPECT_EQ(clock.sleeps().size(), 2U);
  EXPECT_EQ(result.last_error, 3);
}

TEST(Retrier, RatioBudgetDenialIsFailFast) {
  manual_clock clock;
  random_generator rng(8);
  // One retry per second of reserve over 1 s, nothing from the ratio.
  stormguard::ratio_budget budget({.ratio = 0.0, .window = 1s, .min_retries_per_second = 1});
  retrier retry(policy_with(3), clock, rng, budget);
  flaky first{100};
  const auto a = retry(first);
  EXPECT_EQ(a.reason, end_reason::budget_exhausted);
  EXPECT_EQ(a.attempts, 2);
  EXPECT_EQ(clock.sleeps().size(), 1U);
  // The next call within the window is denied its first retry: one attempt, no sleep.
  flaky second{100};
  const auto b = retry(second);
  EXPECT_EQ(b.reason, end_reason::budget_exhausted);
  EXPECT_EQ(b.attempts, 1);
  EXPECT_EQ(clock.sleeps().size(), 1U);
}

TEST(Retrier, DepositsOncePerCallAndWithdrawsOncePerRetry) {
  manual_clock clock(time_point{} + 5s);
  random_generator rng(9);
  counting_budget budget;
  retrier retry(policy_with(3), clock, rng, budget);

  flaky succeeds{0};
  EXPECT_TRUE(retry(succeeds).ok());
  EXPECT_EQ(budget.admits, 1);
  EXPECT_EQ(budget.withdrawals, 0);

  flaky fails{100};
  EXPECT_EQ(retry(fails).reason, end_reason::attempts_exhausted);
  EXPECT_EQ(budget.admits, 2);
  EXPECT_EQ(budget.withdrawals, 3);

  flaky stops{100};
  (void)retry(stops, [](int) { return false; });
  EXPECT_EQ(budget.admits, 3);
  EXPECT_EQ(budget.withdrawals, 3);
  EXPECT_EQ(budget.admit_times.front(), time_point{} + 5s);  // at the clock's now
}

// ---------------------------------------------------------------------------------------------
// Value and result types.
// ---------------------------------------------------------------------------------------------

TEST(Retrier, MoveOnlyValueAndErrorTypesWork) {
  manual_clock clock;
  random_generator rng(10);
  retrier retry(policy_with(3), clock, rng);
  int calls = 0;
  const auto result =
      retry([&](const attempt_context&) -> outcome<std::unique_ptr<int>, std::unique_ptr<int>> {
        if (++calls < 3) return failure{std::make_unique<int>(calls)};
        return std::make_unique<int>(99);
      });
  ASSERT_TRUE(result.ok());
  ASSERT_NE(*result.value, nullptr);
  EXPECT_EQ(**result.value, 99);

  const auto failed =
      retry([](const attempt_context& ctx) -> outcome<std::unique_ptr<int>, std::unique_ptr<int>> {
        return failure{std::make_unique<int>(ctx.attempt)};
      });
  ASSERT_TRUE(failed.last_error.has_value());
  EXPECT_EQ(**failed.last_error, 4);
}

// A user's own expected-like type (what std::expected looks like to the retrier).
template <class T, class E>
class my_expected {
 public:
  static my_expected ok(T v) { return my_expected(true, std::move(v), E{}); }
  static my_expected err(E e) { return my_expected(false, T{}, std::move(e)); }
  bool has_value() const { return ok_; }
  T& operator*() & { return value_; }
  T&& operator*() && { return std::move(value_); }
  E& error() & { return error_; }
  const E& error() const& { return error_; }
  E&& error() && { return std::move(error_); }

 private:
  my_expected(bool ok, T v, E e) : ok_(ok), value_(std::move(v)), error_(std::move(e)) {}
  bool ok_;
  T value_;
  E error_;
};
static_assert(stormguard::expected_like<my_expected<std::string, std::string>>);

TEST(Retrier, AcceptsAUserExpectedLikeType) {
  manual_clock clock;
  random_generator rng(11);
  retrier retry(policy_with(3), clock, rng);
  const auto result = retry(
      [](const attempt_context& ctx) {
        using result_type = my_expected<std::string, std::string>;
        if (ctx.attempt < 3) return result_type::err("busy " + std::to_string(ctx.attempt));
        return result_type::ok("payload");
      },
      [](const std::string& error) { return error.starts_with("busy"); });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result.value, "payload");
  EXPECT_EQ(result.attempts, 3);

  const auto failed = retry(
      [](const attempt_context&) { return my_expected<std::string, std::string>::err("fatal"); },
      [](const std::string& error) { return error.starts_with("busy"); });
  EXPECT_EQ(failed.reason, end_reason::not_retryable);
  EXPECT_EQ(failed.last_error, "fatal");
}

TEST(Retrier, ExceptionsFromTheOperationPropagate) {
  manual_clock clock;
  random_generator rng(12);
  retrier retry(policy_with(3), clock, rng);
  EXPECT_THROW((void)retry([](const attempt_context&) -> outcome<int, int> {
                 throw std::runtime_error("boom");
               }),
               std::runtime_error);
}

// ---------------------------------------------------------------------------------------------
// retry_policy::decide, the pure decision.
// ---------------------------------------------------------------------------------------------

TEST(RetryPolicyDecide, ChecksInTheDocumentedOrder) {
  const retry_policy policy(retry_options{.max_retries = 2, .max_retry_after = 10s});
  scripted_random g{fraction(1.0), fraction(0.0), fraction(0.0)};
  counting_budget budget;
  const time_point now{};

  // stop wins over everything, and touches neither the generator nor the budget.
  EXPECT_EQ(policy.decide(5, classification::stop(), 0ns, g, budget, now).reason,
            end_reason::not_retryable);
  // attempt > max_retries.
  EXPECT_EQ(policy.decide(3, classification::retry(), 0ns, g, budget, now).reason,
            end_reason::attempts_exhausted);
  EXPECT_EQ(policy.decide(3, classification::retry_after(1h), 0ns, g, budget, now).reason,
            end_reason::attempts_exhausted);
  // Retry-After too long.
  EXPECT_EQ(policy.decide(1, classification::retry_after(11s), 0ns, g, budget, now).reason,
            end_reason::retry_after_too_long);
  EXPECT_EQ(g.drawn(), 0U);
  EXPECT_EQ(budget.withdrawals, 0);

  // A retry: one draw (two with Retry-After: backoff and spread), one withdrawal.
  EXPECT_EQ(policy.decide(2, classification::retry(), 0ns, g, budget, now),
            (retry_decision{true, 200ms, end_reason::success}));
  EXPECT_EQ(policy.decide(1, classification::retry_after(3s), 0ns, g, budget, now),
            (retry_decision{true, 3s, end_reason::success}));
  EXPECT_EQ(g.drawn(), 3U);
  EXPECT_EQ(budget.withdrawals, 2);

  // Budget denial.
  budget.grants_left = 0;
  scripted_random g2{fraction(0.5)};
  const retry_decision denied = policy.decide(1, classification::retry(), 0ns, g2, budget, now);
  EXPECT_FALSE(denied.retry);
  EXPECT_EQ(denied.reason, end_reason::budget_exhausted);
  EXPECT_EQ(denied.delay, 0ns);
}

TEST(RetryPolicyDecide, RetryAfterIsSpreadOverDToOneAndAHalfD) {
  const retry_policy policy(retry_options{.max_retries = 3});  // backoff ceiling 100 ms at n = 1
  stormguard::no_budget budget;
  // Backoff draws 0 (below d): the delay is d + U(0, d / 2), at both ends and in the middle.
  scripted_random g{fraction(0.0), fraction(0.0), fraction(0.0),
                    fraction(1.0), fraction(0.0), fraction(0.5)};
  EXPECT_EQ(policy.decide(1, classification::retry_after(2s), 0ns, g, budget, {}).delay, 2s);
  EXPECT_EQ(policy.decide(1, classification::retry_after(2s), 0ns, g, budget, {}).delay, 3s);
  EXPECT_EQ(policy.decide(1, classification::retry_after(2s), 0ns, g, budget, {}).delay, 2500ms);
  // A backoff above d is kept, and the spread is still added on top of it.
  scripted_random g2{fraction(1.0), fraction(1.0)};
  EXPECT_EQ(policy.decide(1, classification::retry_after(40ms), 0ns, g2, budget, {}).delay, 120ms);
  // Retry-After 0 (a date in the past) adds nothing but still draws once.
  scripted_random g3{fraction(1.0), fraction(1.0)};
  EXPECT_EQ(policy.decide(1, classification::retry_after(0ns), 0ns, g3, budget, {}).delay, 100ms);
  EXPECT_EQ(g3.drawn(), 2U);
}

TEST(RetryPolicyDecide, RetryAfterSpreadNeverBelowDNorAboveOneAndAHalfD) {
  const retry_policy policy(retry_options{.backoff = {.base = 1ms, .cap = 1ms}});
  stormguard::no_budget budget;
  random_generator g(99);
  for (int i = 0; i < 10'000; ++i) {
    const duration d = std::chrono::milliseconds(1 + i % 60'000);
    const duration delay =
        policy.decide(1, classification::retry_after(d), 0ns, g, budget, {}).delay;
    ASSERT_GE(delay, d);
    ASSERT_LE(delay, d + d / 2);
  }
}

TEST(RetryPolicyDecide, DeadlineExceededWhenTheDelayWouldEndAtOrPastIt) {
  const retry_policy policy(
      retry_options{.max_retries = 3, .backoff = {.base = 1s, .cap = 1s, .jitter = jitter::none}});
  counting_budget budget;
  random_generator g(1);
  const time_point now = time_point{} + 10s;
  EXPECT_EQ(policy.decide(1, classification::retry(), 0ns, g, budget, now, now + 1s).reason,
            end_reason::deadline_exceeded);
  EXPECT_EQ(policy.decide(1, classification::retry(), 0ns, g, budget, now, now + 1s + 1ns),
            (retry_decision{true, 1s, end_reason::success}));
  // A Retry-After that fits but whose spread does not: the whole delay must fit.
  scripted_random top{fraction(1.0), fraction(1.0)};  // the spread draws its top: 3 s
  EXPECT_EQ(
      policy.decide(1, classification::retry_after(2s), 0ns, top, budget, now, now + 2500ms).reason,
      end_reason::deadline_exceeded);
  EXPECT_EQ(budget.withdrawals, 1);  // only the retry that was made was charged
}

// ---------------------------------------------------------------------------------------------
// retry_policy validation.
// ---------------------------------------------------------------------------------------------

TEST(RetryPolicyValidation, RejectsMaxRetriesOutOfRange) {
  EXPECT_THAT(invalid_argument_message([] { retry_policy p(retry_options{.max_retries = -1}); }),
              AllOf(HasSubstr("max_retries"), HasSubstr("-1")));
  EXPECT_THAT(
      invalid_argument_message([] { retry_policy p(retry_options{.max_retries = 1'000'001}); }),
      AllOf(HasSubstr("max_retries"), HasSubstr("1000001")));
  EXPECT_NO_THROW(retry_policy(retry_options{.max_retries = 0}));
  EXPECT_NO_THROW(retry_policy(retry_options{.max_retries = 1'000'000}));
}

TEST(RetryPolicyValidation, RejectsNonPositiveMaxRetryAfter) {
  EXPECT_THAT(
      invalid_argument_message([] { retry_policy p(retry_options{.max_retry_after = 0ns}); }),
      AllOf(HasSubstr("max_retry_after"), HasSubstr("0s")));
  EXPECT_THAT(
      invalid_argument_message([] { retry_policy p(retry_options{.max_retry_after = -2s}); }),
      AllOf(HasSubstr("max_retry_after"), HasSubstr("-2s")));
}

TEST(RetryPolicyValidation, RejectsAnInvalidBackoff) {
  EXPECT_THAT(invalid_argument_message(
                  [] { retry_policy p(retry_options{.backoff = {.base = 5s, .cap = 1s}}); }),
              AllOf(HasSubstr("cap"), HasSubstr("1s")));
}

TEST(RetryPolicy, DefaultsAreTheSeeds) {
  const retry_policy policy;
  EXPECT_EQ(policy.max_retries(), 3);
  EXPECT_EQ(policy.options().backoff.base, 100ms);
  EXPECT_EQ(policy.options().backoff.cap, 3s);
  EXPECT_EQ(policy.options().backoff.jitter, jitter::full);
  EXPECT_EQ(policy.options().max_retry_after, 60s);
}

TEST(EndReason, Names) {
  EXPECT_EQ(to_string(end_reason::success), "success");
  EXPECT_EQ(to_string(end_reason::not_retryable), "not_retryable");
  EXPECT_EQ(to_string(end_reason::attempts_exhausted), "attempts_exhausted");
  EXPECT_EQ(to_string(end_reason::budget_exhausted), "budget_exhausted");
  EXPECT_EQ(to_string(end_reason::retry_after_too_long), "retry_after_too_long");
  EXPECT_EQ(to_string(end_reason::deadline_exceeded), "deadline_exceeded");
  EXPECT_EQ(to_string(end_reason::cancelled), "cancelled");
  EXPECT_EQ(to_string(static_cast<end_reason>(77)), "unknown");
}

}  // namespace

namespace {

TEST(Retrier, SleptTotalSaturatesInsteadOfOverflowing) {
  // Delays of duration::max() / 4 .. duration::max(): their sum is far past duration::max().
  const retry_policy policy(retry_options{
      .max_retries = 8,
      .backoff = backoff_options{
          .base = duration::max() / 4, .cap = duration::max(), .jitter = jitter::none}});
  manual_clock clock;
  random_generator rng{1};
  retrier retry(policy, clock, rng);
  const auto result = retry([](const attempt_context&) -> outcome<int, int> { return failure{1}; });
  EXPECT_EQ(result.attempts, 9);
  EXPECT_EQ(result.slept, duration::max());
  EXPECT_EQ(clock.now(), time_point::max());
}

}  // namespace
