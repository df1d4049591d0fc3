// SPDX-License-Identifier: Apache-2.0
// The retrier as an executor: operation shapes, end reasons, the result's error list, hooks,
// cancellation and deadlines, and a property test over random policies and outcomes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "counting_budget.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_context;
using stormguard::attempt_report;
using stormguard::attempt_status;
using stormguard::backoff_options;
using stormguard::call_options;
using stormguard::classification;
using stormguard::done;
using stormguard::done_t;
using stormguard::duration;
using stormguard::end_reason;
using stormguard::failure;
using stormguard::jitter;
using stormguard::outcome;
using stormguard::random_generator;
using stormguard::retrier;
using stormguard::retry_options;
using stormguard::retry_policy;
using stormguard::time_point;
using stormguard::test_util::counting_budget;
using stormguard::testing::manual_clock;

std::error_code err(std::errc c) { return std::make_error_code(c); }

retry_policy fixed_delays(int max_retries, duration delay) {
  return retry_policy(retry_options{
      .max_retries = max_retries,
      .backoff = backoff_options{.base = delay, .cap = delay, .jitter = jitter::none}});
}

// A stateless hook that is not no_hook.
struct empty_hook {
  void operator()(auto&&...) const {}
};

// ---------------------------------------------------------------------------------------------
// Operation shapes.
// ---------------------------------------------------------------------------------------------

TEST(OperationShape, ErrorCodeSuccessIsDoneAndFailureIsClassifiedByDefault) {
  manual_clock clock;
  random_generator rng(1);
  retrier retry(fixed_delays(3, 10ms), clock, rng);
  int calls = 0;
  const auto ok = retry([&](const attempt_context&) {
    return ++calls < 3 ? err(std::errc::connection_reset) : std::error_code{};
  });
  static_assert(std::same_as<decltype(ok.value), std::optional<done_t>>);
  static_assert(std::same_as<decltype(ok.last_error), std::optional<std::error_code>>);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok.value, done);
  EXPECT_EQ(ok.attempts, 3);

  const auto denied =
      retry([](const attempt_context&) { return err(std::errc::permission_denied); });
  EXPECT_EQ(denied.reason, end_reason::not_retryable);
  EXPECT_EQ(denied.attempts, 1);
  EXPECT_EQ(denied.last_error, err(std::errc::permission_denied));

  const auto cancelled =
      retry([](const attempt_context&) { return err(std::errc::operation_canceled); });
  EXPECT_EQ(cancelled.reason, end_reason::not_retryable);
  EXPECT_EQ(cancelled.attempts, 1);
}

TEST(OperationShape, ValueErrorCodePair) {
  manual_clock clock;
  random_generator rng(2);
  retrier retry(fixed_delays(3, 10ms), clock, rng);
  int calls = 0;
  const auto result = retry([&](const attempt_context&) -> std::pair<std::string, std::error_code> {
    if (++calls == 1) return {"", err(std::errc::timed_out)};
    return {"body", {}};
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result.value, "body");
  EXPECT_EQ(result.attempts, 2);
  ASSERT_EQ(result.previous_errors.size(), 1U);
  EXPECT_EQ(result.previous_errors[0], err(std::errc::timed_out));
}

TEST(OperationShape, ThrowingOperationRetriesTransientSystemErrors) {
  manual_clock clock;
  random_generator rng(3);
  retrier retry(fixed_delays(3, 10ms), clock, rng);
  int calls = 0;
  const auto result = retry([&](const attempt_context&) {
    if (++calls < 3) throw std::system_error(err(std::errc::connection_refused), "connect");
    return 5;
  });
  static_assert(std::same_as<decltype(result.last_error), std::optional<std::exception_ptr>>);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result.value, 5);
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(result.error_count(), 2U);
}

TEST(OperationShape, ThrowingOperationStopsOnOtherExceptionsAndKeepsThem) {
  manual_clock clock;
  random_generator rng(4);
  retrier retry(fixed_delays(3, 10ms), clock, rng);
  const auto result =
      retry([](const attempt_context&) -> int { throw std::invalid_argument("bad request"); });
  EXPECT_EQ(result.reason, end_reason::not_retryable);
  EXPECT_EQ(result.attempts, 1);
  ASSERT_TRUE(result.last_error.has_value());
  EXPECT_THROW(std::rethrow_exception(*result.last_error), std::invalid_argument);
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(OperationShape, VoidOperationThatThrows) {
  manual_clock clock;
  random_generator rng(5);
  retrier retry(fixed_delays(1, 10ms), clock, rng);
  int calls = 0;
  const auto result = retry([&](const attempt_context&) {
    if (++calls == 1) throw std::system_error(err(std::errc::interrupted));
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result.value, done);
  EXPECT_EQ(result.attempts, 2);
}

TEST(OperationShape, ExpectedLikeOfVoidGivesDone) {
  struct void_expected {
    std::error_code ec;
    bool has_value() const { return !ec; }
    void operator*() && {}
    std::error_code error() && { return ec; }
  };
  manual_clock clock;
  random_generator rng(6);
  retrier retry(fixed_delays(1, 10ms), clock, rng);
  int calls = 0;
  const auto result = retry([&](const attempt_context&) {
    return void_expected{++calls == 1 ? err(std::errc::timed_out) : std::error_code{}};
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result.value, done);
}

TEST(AttemptContext, CarriesAttemptStopTokenAndTimeLeft) {
  manual_clock clock;
  random_generator rng(7);
  retrier retry(fixed_delays(2, 100ms), clock, rng);
  std::stop_source stop;
  std::vector<attempt_context> seen;
  const auto result = retry(
      [&](const attempt_context& ctx) -> outcome<int, int> {
        seen.push_back(ctx);
        return failure{1};
      },
      {}, call_options{.stop = stop.get_token(), .deadline = time_point{} + 1s});
  EXPECT_EQ(result.reason, end_reason::attempts_exhausted);
  ASSERT_EQ(seen.size(), 3U);
  EXPECT_EQ(seen[0].attempt, 1);
  EXPECT_EQ(seen[2].attempt, 3);
  EXPECT_EQ(seen[0].time_left, 1s);
  EXPECT_EQ(seen[1].time_left, 900ms);
  EXPECT_EQ(seen[2].time_left, 800ms);
  EXPECT_FALSE(seen[0].stop.stop_requested());
  stop.request_stop();
  EXPECT_TRUE(seen[0].stop.stop_requested());  // the call's own token

  std::vector<duration> no_deadline;
  (void)retry([&](const attempt_context& ctx) -> outcome<int, int> {
    no_deadline.push_back(ctx.time_left);
    return 1;
  });
  EXPECT_EQ(no_deadline, (std::vector<duration>{duration::max()}));
}

// ---------------------------------------------------------------------------------------------
// End reasons.
// ---------------------------------------------------------------------------------------------

TEST(EndReasons, CancelledBeforeTheFirstAttemptMakesNone) {
  manual_clock clock;
  random_generator rng(8);
  retrier retry(fixed_delays(3, 10ms), clock, rng);
  std::stop_source stop;
  stop.request_stop();
  int calls = 0;
  const auto result = retry([&](const attempt_context&) { return ++calls, std::error_code{}; }, {},
                            {.stop = stop.get_token()});
  EXPECT_EQ(result.reason, end_reason::cancelled);
  EXPECT_EQ(result.attempts, 0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(result.error_count(), 0U);
}

TEST(EndReasons, CancelledDuringTheSleepEndsWithoutAnotherAttempt) {
  manual_clock clock;
  random_generator rng(9);
  std::stop_source stop;
  // The hook runs just before the sleep: a stop requested there interrupts the sleep.
  auto retry = retrier(fixed_delays(5, 10ms), clock, rng).on_retry([&](int attempt, auto&&, auto) {
    if (attempt == 2) stop.request_stop();
  });
  int calls = 0;
  const auto result =
      retry([&](const attempt_context&) { return ++calls, err(std::errc::timed_out); }, {},
            {.stop = stop.get_token()});
  EXPECT_EQ(result.reason, end_reason::cancelled);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(result.slept, 10ms);  // the interrupted sleep took no virtual time
  EXPECT_EQ(result.error_count(), 2U);
}

TEST(EndReasons, StopRequestedByTheOperationPreventsTheNextAttempt) {
  manual_clock clock;
  random_generator rng(10);
  retrier retry(fixed_delays(5, 10ms), clock, rng);
  std::stop_source stop;
  int calls = 0;
  const auto result = retry(
      [&](const attempt_context&) {
        if (++calls == 3) stop.request_stop();
        return err(std::errc::timed_out);
      },
      {}, {.stop = stop.get_token()});
  EXPECT_EQ(result.reason, end_reason::cancelled);
  EXPECT_EQ(calls, 3);
}

TEST(EndReasons, StopDuringAnAttemptFiresNoRetryHookAndSpendsNoBudget) {
  manual_clock clock;
  random_generator rng(12);
  stormguard::ratio_budget budget({.ratio = 0.0, .min_retries_per_second = 1});
  std::stop_source stop;
  int retry_hooks = 0;
  auto retry = retrier(fixed_delays(5, 10ms), clock, rng, budget).on_retry([&](int, auto&&, auto) {
    ++retry_hooks;
  });
  const auto result = retry(
      [&](const attempt_context&) {
        stop.request_stop();  // e.g. SIGINT arrives while the attempt runs
        return err(std::errc::timed_out);
      },
      {}, {.stop = stop.get_token()});
  EXPECT_EQ(result.reason, end_reason::cancelled);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(retry_hooks, 0);
  EXPECT_EQ(budget.balance(clock.now()), 10);  // the reserve (1/s · 10 s) is untouched
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(EndReasons, DeadlinePassedAtTheStartMakesNoAttempt) {
  manual_clock clock(time_point{} + 5s);
  random_generator rng(11);
  retrier retry(fixed_delays(3, 10ms), clock, rng);
  int calls = 0;
  const auto result = retry([&](const attempt_context&) { return ++calls, std::error_code{}; }, {},
                            {.deadline = time_point{} + 5s});
  EXPECT_EQ(result.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(result.attempts, 0);
  EXPECT_EQ(calls, 0);
}

TEST(EndReasons, DeadlineEndsAtOnceWithoutAPointlessLastSleep) {
  manual_clock clock;
  random_generator rng(12);
  counting_budget budget;
  retrier retry(fixed_delays(10, 400ms), clock, rng, budget);
  const auto result = retry([](const attempt_context&) { return err(std::errc::timed_out); }, {},
                            {.deadline = time_point{} + 1s});
  // Attempts at 0 and 400 ms; a third at 800 ms; a sleep to 1.2 s would pass the deadline.
  EXPECT_EQ(result.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{400ms, 400ms}));
  EXPECT_EQ(clock.now(), time_point{} + 800ms);
  EXPECT_EQ(budget.withdrawals, 2);  // no retry is charged for the sleep not taken
}

TEST(EndReasons, DelayEndingExactlyAtTheDeadlineIsNotMade) {
  manual_clock clock;
  random_generator rng(13);
  retrier retry(fixed_delays(10, 500ms), clock, rng);
  const auto result = retry([](const attempt_context&) { return err(std::errc::timed_out); }, {},
                            {.deadline = time_point{} + 1s});
  EXPECT_EQ(result.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{500ms}));
}

TEST(EndReasons, RetryAfterPastTheDeadlineEndsAtOnce) {
  manual_clock clock;
  random_generator rng(14);
  retrier retry(fixed_delays(3, 1ms), clock, rng);
  const auto result =
      retry([](const attempt_context&) -> outcome<int, int> { return failure{503}; },
            [](int) { return classification::retry_after(5s); }, {.deadline = time_point{} + 4s});
  EXPECT_EQ(result.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(EndReasons, RetryAfterTooLong) {
  manual_clock clock;
  random_generator rng(15);
  retrier retry(retry_policy(retry_options{.max_retry_after = 10s}), clock, rng);
  const auto result =
      retry([](const attempt_context&) -> outcome<int, int> { return failure{429}; },
            [](int) { return classification::retry_after(11s); });
  EXPECT_EQ(result.reason, end_reason::retry_after_too_long);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(EndReasons, BudgetExhaustedAndAttemptsExhausted) {
  manual_clock clock;
  random_generator rng(16);
  counting_budget budget(1);
  retrier with_budget(fixed_delays(5, 1ms), clock, rng, budget);
  const auto denied = with_budget([](const attempt_context&) { return err(std::errc::timed_out); });
  EXPECT_EQ(denied.reason, end_reason::budget_exhausted);
  EXPECT_EQ(denied.attempts, 2);

  retrier retry(fixed_delays(2, 1ms), clock, rng);
  const auto exhausted = retry([](const attempt_context&) { return err(std::errc::timed_out); });
  EXPECT_EQ(exhausted.reason, end_reason::attempts_exhausted);
  EXPECT_EQ(exhausted.attempts, 3);
}

// ---------------------------------------------------------------------------------------------
// What the budget is told: admission, every attempt's outcome, every retry's cause.
// ---------------------------------------------------------------------------------------------

TEST(BudgetCalls, RejectedAdmissionEndsThrottledWithoutAnAttempt) {
  manual_clock clock;
  random_generator rng(31);
  counting_budget budget;
  budget.admit = false;
  int calls = 0;
  int give_ups = 0;
  auto retry = retrier(fixed_delays(3, 1ms), clock, rng, budget).on_give_up([&](const auto& r) {
    ++give_ups;
    EXPECT_EQ(r.reason, end_reason::throttled);
  });
  const auto result = retry([&](const attempt_context&) {
    ++calls;
    return std::error_code{};
  });
  EXPECT_EQ(result.reason, end_reason::throttled);
  EXPECT_EQ(stormguard::to_string(result.reason), "throttled");
  EXPECT_EQ(result.attempts, 0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(give_ups, 1);
  EXPECT_FALSE(result.last_error);
  EXPECT_TRUE(budget.records.empty());
}

TEST(BudgetCalls, EveryAttemptIsRecordedWithItsStatusAndTheCauseOfItsRetry) {
  manual_clock clock;
  random_generator rng(32);
  counting_budget budget;
  retrier retry(fixed_delays(5, 1ms), clock, rng, budget);
  int calls = 0;
  const auto result = retry([&](const attempt_context&) {
    switch (++calls) {
      case 1:
        return err(std::errc::timed_out);
      case 2:
        return err(std::errc::connection_reset);
      default:
        return std::error_code{};
    }
  });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(budget.admits, 1);
  EXPECT_EQ(budget.records,
            (std::vector<attempt_report>{{attempt_status::timeout, 1, attempt_status::success},
                                         {attempt_status::failure, 2, attempt_status::timeout},
                                         {attempt_status::success, 3, attempt_status::failure}}));
  EXPECT_EQ(budget.withdrawal_statuses,
            (std::vector<attempt_status>{attempt_status::timeout, attempt_status::failure}));
}

TEST(BudgetCalls, ANotRetryableFailureIsRecordedAndWithdrawsNothing) {
  manual_clock clock;
  random_generator rng(33);
  counting_budget budget;
  retrier retry(fixed_delays(5, 1ms), clock, rng, budget);
  const auto result =
      retry([](const attempt_context&) { return err(std::errc::permission_denied); });
  EXPECT_EQ(result.reason, end_reason::not_retryable);
  EXPECT_EQ(
      budget.records,
      (std::vector<attempt_report>{{attempt_status::not_retryable, 1, attempt_status::success}}));
  EXPECT_EQ(budget.withdrawals, 0);
}

TEST(BudgetCalls, AStopDuringAnAttemptIsNotRecorded) {
  manual_clock clock;
  random_generator rng(34);
  counting_budget budget;
  retrier retry(fixed_delays(5, 1ms), clock, rng, budget);
  std::stop_source stop;
  const auto result = retry(
      [&](const attempt_context&) {
        stop.request_stop();
        return err(std::errc::timed_out);
      },
      {}, {.stop = stop.get_token()});
  EXPECT_EQ(result.reason, end_reason::cancelled);
  EXPECT_EQ(budget.admits, 1);
  EXPECT_TRUE(budget.records.empty());
}

TEST(BudgetCalls, RetryQuotaChargesTimeoutsDoubleThroughTheRetrier) {
  manual_clock clock;
  random_generator rng(35);
  stormguard::retry_quota quota({.max_tokens = 30});  // 5 per retry, 10 after a timeout
  retrier retry(fixed_delays(100, 1ms), clock, rng, quota);
  const auto timeouts = retry([](const attempt_context&) { return err(std::errc::timed_out); });
  EXPECT_EQ(timeouts.reason, end_reason::budget_exhausted);
  EXPECT_EQ(timeouts.attempts, 4);  // 3 retries of 10
  EXPECT_EQ(quota.available(), 0);
  int calls = 0;
  const auto recovered = retry([&](const attempt_context&) {
    return ++calls == 1 ? err(std::errc::connection_reset) : std::error_code{};
  });
  EXPECT_EQ(recovered.reason, end_reason::budget_exhausted);  // 0 < 5: no retry to recover with
  EXPECT_EQ(quota.available(), 0);
}

TEST(BudgetCalls, TokenBucketStopsRetriesOnceHalfEmpty) {
  manual_clock clock;
  random_generator rng(36);
  stormguard::token_bucket_throttle bucket({.max_tokens = 10, .token_ratio = 0.1});
  retrier retry(fixed_delays(100, 1ms), clock, rng, bucket);
  const auto result =
      retry([](const attempt_context&) { return err(std::errc::connection_reset); });
  EXPECT_EQ(result.reason, end_reason::budget_exhausted);
  EXPECT_EQ(result.attempts, 5);  // 4 retries: after the 5th failure 5 tokens are not > 10 / 2
  EXPECT_EQ(bucket.milli_tokens(), 5000);
}

TEST(BudgetCalls, AdaptiveThrottleEventuallyRejectsFirstAttemptsLocally) {
  manual_clock clock;
  random_generator rng(37);
  stormguard::adaptive_throttle throttle;
  retrier retry(fixed_delays(0, 1ms), clock, rng, throttle);
  int sent = 0;
  int throttled = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto r = retry([&](const attempt_context&) {
      ++sent;
      return err(std::errc::connection_refused);
    });
    if (r.reason == end_reason::throttled) {
      ++throttled;
      EXPECT_EQ(r.attempts, 0);
    }
  }
  EXPECT_EQ(sent + throttled, 1000);
  EXPECT_GT(throttled, 900);  // p = i / (i + 1) with no accepts: ~ all but a few dozen
  EXPECT_EQ(throttle.requests(clock.now()), 1000);
}

// ---------------------------------------------------------------------------------------------
// The result: every attempt's error.
// ---------------------------------------------------------------------------------------------

TEST(RetryResult, KeepsEveryAttemptsErrorInOrder) {
  manual_clock clock;
  random_generator rng(17);
  retrier retry(fixed_delays(3, 1ms), clock, rng);
  int calls = 0;
  const auto result =
      retry([&](const attempt_context&) -> outcome<int, int> { return failure{++calls}; });
  EXPECT_EQ(result.previous_errors, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(result.last_error, 4);
  EXPECT_EQ(result.error_count(), 4U);
  std::vector<int> all;
  result.for_each_error([&](int e) { all.push_back(e); });
  EXPECT_EQ(all, (std::vector<int>{1, 2, 3, 4}));
}

TEST(RetryResult, SingleFailureIsInlineOnly) {
  manual_clock clock;
  random_generator rng(18);
  retrier retry(fixed_delays(0, 1ms), clock, rng);
  const auto result = retry([](const attempt_context&) -> outcome<int, int> { return failure{9}; });
  EXPECT_EQ(result.last_error, 9);
  EXPECT_TRUE(result.previous_errors.empty());
  EXPECT_EQ(result.previous_errors.capacity(), 0U);  // nothing was allocated
}

TEST(RetryResult, SuccessAfterFailuresKeepsTheirErrors) {
  manual_clock clock;
  random_generator rng(19);
  retrier retry(fixed_delays(3, 1ms), clock, rng);
  int calls = 0;
  const auto result = retry([&](const attempt_context&) -> outcome<int, int> {
    if (++calls < 3) return failure{calls};
    return 30;
  });
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result.last_error.has_value());
  EXPECT_EQ(result.previous_errors, (std::vector<int>{1, 2}));
}

// ---------------------------------------------------------------------------------------------
// Hooks.
// ---------------------------------------------------------------------------------------------

TEST(Hooks, OnRetrySeesEachRetriedFailureAndItsDelay) {
  manual_clock clock;
  random_generator rng(20);
  struct call {
    int attempt;
    std::error_code error;
    duration delay;
  };
  std::vector<call> calls;
  int gave_up = 0;
  auto retry = retrier(retry_policy{}, clock, rng)
                   .on_give_up([&](const auto&) { ++gave_up; })
                   .on_retry([&](int attempt, const std::error_code& ec, duration d) {
                     calls.push_back({attempt, ec, d});
                   });
  int n = 0;
  const auto result = retry([&](const attempt_context&) {
    return ++n < 3 ? err(std::errc::timed_out) : std::error_code{};
  });
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(calls.size(), 2U);
  EXPECT_EQ(calls[0].attempt, 1);
  EXPECT_EQ(calls[1].attempt, 2);
  EXPECT_EQ(calls[0].error, err(std::errc::timed_out));
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{calls[0].delay, calls[1].delay}));
  EXPECT_EQ(gave_up, 0);  // not called on success
}

TEST(Hooks, OnGiveUpSeesTheFinalResultOnceForEveryFailure) {
  manual_clock clock;
  random_generator rng(21);
  std::vector<end_reason> reasons;
  std::vector<int> attempts;
  auto retry = retrier(fixed_delays(2, 1ms), clock, rng).on_give_up([&](const auto& result) {
    reasons.push_back(result.reason);
    attempts.push_back(result.attempts);
  });
  (void)retry([](const attempt_context&) { return err(std::errc::timed_out); });
  (void)retry([](const attempt_context&) { return err(std::errc::permission_denied); });
  std::stop_source stop;
  stop.request_stop();
  (void)retry([](const attempt_context&) { return std::error_code{}; }, {},
              {.stop = stop.get_token()});
  EXPECT_EQ(reasons, (std::vector<end_reason>{end_reason::attempts_exhausted,
                                              end_reason::not_retryable, end_reason::cancelled}));
  EXPECT_EQ(attempts, (std::vector<int>{3, 1, 0}));
}

TEST(Hooks, OnAttemptSeesEveryAttemptAfterItsDecisionAndOnEndEveryCallOnce) {
  manual_clock clock;
  random_generator rng(23);
  std::vector<std::string> order;
  std::vector<stormguard::attempt_event> events;
  std::vector<end_reason> ends;
  auto retry = retrier(fixed_delays(2, 5ms), clock, rng)
                   .on_attempt([&](const stormguard::attempt_event& e) {
                     events.push_back(e);
                     order.push_back("attempt");
                   })
                   .on_retry([&](int, const auto&, duration) { order.push_back("retry"); })
                   .on_give_up([&](const auto&) { order.push_back("give_up"); })
                   .on_end([&](const auto& result) {
                     ends.push_back(result.reason);
                     order.push_back("end");
                   });
  int n = 0;
  const auto ok = retry([&](const attempt_context&) {
    return ++n < 2 ? err(std::errc::timed_out) : std::error_code{};
  });
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(order, (std::vector<std::string>{"attempt", "retry", "attempt", "end"}));
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0].attempt, 1);
  EXPECT_EQ(events[0].status, attempt_status::timeout);
  EXPECT_EQ(events[0].delay, 5ms);
  EXPECT_FALSE(events[0].reason);
  EXPECT_EQ(events[1].attempt, 2);
  EXPECT_EQ(events[1].status, attempt_status::success);
  EXPECT_EQ(events[1].reason, end_reason::success);
  EXPECT_FALSE(events[1].delay);

  order.clear();
  events.clear();
  (void)retry([](const attempt_context&) { return err(std::errc::permission_denied); });
  EXPECT_EQ(order, (std::vector<std::string>{"attempt", "give_up", "end"}));
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].status, attempt_status::not_retryable);
  EXPECT_EQ(events[0].reason, end_reason::not_retryable);

  order.clear();
  std::stop_source stop;
  stop.request_stop();
  (void)retry([](const attempt_context&) { return std::error_code{}; }, {},
              {.stop = stop.get_token()});
  EXPECT_EQ(order, (std::vector<std::string>{"give_up", "end"})) << "no attempt, no on_attempt";
  EXPECT_EQ(ends, (std::vector<end_reason>{end_reason::success, end_reason::not_retryable,
                                           end_reason::cancelled}));
}

TEST(Hooks, OnAttemptReportsTheRetryAfterVerdict) {
  manual_clock clock;
  random_generator rng(24);
  std::vector<stormguard::attempt_event> events;
  auto retry =
      retrier(fixed_delays(1, 5ms), clock, rng).on_attempt([&](const stormguard::attempt_event& e) {
        events.push_back(e);
      });
  (void)retry([](const attempt_context&) { return err(std::errc::timed_out); },
              [](const std::error_code&) { return classification::retry_after(2s); });
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0].retry_after, 2s);
  EXPECT_GE(events[0].delay, 2s);
  EXPECT_EQ(events[1].reason, end_reason::attempts_exhausted);
}

TEST(Hooks, UnsetHooksTakeNoSpace) {
  using plain = retrier<random_generator>;
  static_assert(
      std::same_as<plain, retrier<random_generator, stormguard::no_budget, stormguard::no_hook,
                                  stormguard::no_hook, stormguard::no_hook, stormguard::no_hook>>);
  EXPECT_EQ(sizeof(plain), sizeof(retrier<random_generator, stormguard::no_budget, empty_hook,
                                          empty_hook, empty_hook, empty_hook>));
}

// ---------------------------------------------------------------------------------------------
// Real time: the one real sleep in the unit tests.
// ---------------------------------------------------------------------------------------------

TEST(RealClock, StopRequestWakesASleepingRetrierWithin50Ms) {
  stormguard::real_clock clock;
  random_generator rng(22);
  retrier retry(fixed_delays(1, 10s), clock, rng);
  std::stop_source stop;
  std::atomic<bool> sleeping{false};
  auto hooked = retry.on_retry([&](int, const auto&, duration) { sleeping = true; });
  std::chrono::steady_clock::time_point requested;
  std::thread stopper([&] {
    while (!sleeping) std::this_thread::yield();
    std::this_thread::sleep_for(5ms);  // let the retrier reach the wait
    requested = std::chrono::steady_clock::now();
    stop.request_stop();
  });
  const auto result = hooked([](const attempt_context&) { return err(std::errc::timed_out); }, {},
                             {.stop = stop.get_token()});
  const auto woke = std::chrono::steady_clock::now();
  stopper.join();
  EXPECT_EQ(result.reason, end_reason::cancelled);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_LT(woke - requested, 50ms);
  EXPECT_LT(result.slept, 1s);
}

// ---------------------------------------------------------------------------------------------
// Property test over random policies and outcomes.
// ---------------------------------------------------------------------------------------------

TEST(RetrierProperty, BoundsHoldForRandomPoliciesAndOutcomes) {
  random_generator g(20261130);
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + stormguard::uniform_int(g, hi - lo);
  };
  const jitter jitters[] = {jitter::none, jitter::equal, jitter::full, jitter::decorrelated};
  std::vector<int> reasons_seen(7);
  for (int run = 0; run < 3000; ++run) {
    const duration base = std::chrono::milliseconds(pick(1, 500));
    const duration cap = base + std::chrono::milliseconds(pick(0, 5000));
    const retry_policy policy(
        retry_options{.max_retries = static_cast<int>(pick(0, 8)),
                      .backoff = {.base = base, .cap = cap, .jitter = jitters[pick(0, 3)]},
                      .max_retry_after = std::chrono::seconds(pick(1, 60))});
    const bool has_deadline = pick(0, 1) == 1;
    const time_point deadline = has_deadline
                                    ? time_point{} + std::chrono::milliseconds(pick(0, 20'000))
                                    : time_point::max();
    const int stop_after = static_cast<int>(pick(1, 12));  // stop requested during this attempt
    const bool use_stop = pick(0, 3) == 0;

    manual_clock clock;
    random_generator rng(static_cast<std::uint64_t>(run));
    counting_budget budget(static_cast<int>(pick(0, 10)));
    retrier retry(policy, clock, rng, budget);
    std::stop_source stop;

    // Per attempt: 0 success, 1 retry, 2 stop, 3 retry_after(d).
    std::vector<classification> verdicts;
    std::vector<time_point> starts;
    bool succeeded = false;
    const auto result = retry(
        [&](const attempt_context& ctx) -> outcome<int, int> {
          starts.push_back(clock.now());
          EXPECT_FALSE(ctx.stop.stop_requested()) << "an attempt after a stop request";
          if (use_stop && ctx.attempt == stop_after) stop.request_stop();
          if (pick(0, 9) == 0) {
            succeeded = true;
            return ctx.attempt;
          }
          return failure{ctx.attempt};
        },
        [&](int) {
          const auto k = pick(0, 9);
          const classification v =
              k < 6   ? classification::retry()
              : k < 7 ? classification::stop()
                      : classification::retry_after(std::chrono::milliseconds(pick(0, 90'000)));
          verdicts.push_back(v);
          return v;
        },
        {.stop = stop.get_token(), .deadline = deadline});

    SCOPED_TRACE("run " + std::to_string(run));
    ++reasons_seen[static_cast<std::size_t>(result.reason)];
    // Never more attempts than allowed.
    ASSERT_LE(result.attempts, policy.max_retries() + 1);
    ASSERT_EQ(static_cast<int>(starts.size()), result.attempts);
    EXPECT_EQ(result.ok(), succeeded);
    // Every failed attempt is classified, except one that failed after a stop request in it.
    const bool failed_after_stop = use_stop && result.attempts == stop_after && !succeeded;
    EXPECT_EQ(result.error_count(), verdicts.size() + (failed_after_stop ? 1U : 0U));
    // Never an attempt after a stop verdict, a too-long Retry-After, or a stop request.
    for (std::size_t i = 0; i + 1 < verdicts.size(); ++i) {
      EXPECT_NE(verdicts[i].action(), classification::kind::stop);
      EXPECT_LE(verdicts[i].delay(), policy.options().max_retry_after);
    }
    if (use_stop && result.attempts >= stop_after) {
      EXPECT_EQ(result.attempts, stop_after);
    }
    // Never a delay above cap unless raised by Retry-After, then within [d, max(cap, d) + d/2].
    const std::vector<duration> sleeps = clock.sleeps();
    ASSERT_LE(sleeps.size(), verdicts.size());
    duration total{};
    for (std::size_t i = 0; i < sleeps.size(); ++i) {
      const classification& v = verdicts[i];
      if (v.action() == classification::kind::retry_after) {
        EXPECT_GE(sleeps[i], v.delay());
        EXPECT_LE(sleeps[i], std::max(cap, v.delay()) + v.delay() / 2);
      } else {
        EXPECT_LE(sleeps[i], cap);
      }
      total += sleeps[i];
    }
    if (result.reason != end_reason::cancelled) {
      EXPECT_EQ(result.slept, total);
    }
    // Never past the deadline: every attempt starts before it, and no sleep ends at or after it.
    for (const time_point t : starts) {
      EXPECT_LT(t, deadline);
    }
    if (has_deadline && result.attempts > 0) {
      EXPECT_LT(clock.now(), deadline);
    }
  }
  // The generator reached every end reason, so no invariant above held vacuously.
  for (std::size_t r = 0; r < reasons_seen.size(); ++r) {
    EXPECT_GT(reasons_seen[r], 0) << to_string(static_cast<end_reason>(r));
  }
}

}  // namespace
