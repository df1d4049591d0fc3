// SPDX-License-Identifier: Apache-2.0
#include "stormguard/budget_protocol.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "counting_budget.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "stormguard/testing/scripted_random.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_context;
using stormguard::attempt_report;
using stormguard::attempt_status;
using stormguard::classification;
using stormguard::duration;
using stormguard::end_reason;
using stormguard::request_budget;
using stormguard::retrier;
using stormguard::retry_options;
using stormguard::retry_policy;
using stormguard::time_point;
using stormguard::testing::manual_clock;
using stormguard::testing::scripted_random;

// A counting budget that also hears the ends of retries and requests, and checks the
// protocol's guarantees as they happen: never more ends than grants, never an end of a request
// that was not admitted.
struct ending_budget : stormguard::test_util::counting_budget {
  using counting_budget::counting_budget;
  int granted = 0;
  int retries_ended = 0;
  int admitted = 0;
  int requests_ended = 0;
  int retries_in_flight_at_record = 0;  // retries in flight seen by the last record()
  std::vector<time_point> end_times;

  template <class G>
  bool try_admit(time_point now, G& g) {
    const bool ok = counting_budget::try_admit(now, g);
    if (ok) ++admitted;
    return ok;
  }
  template <class G>
  bool try_withdraw(time_point now, attempt_status s, G& g) {
    const bool ok = counting_budget::try_withdraw(now, s, g);
    if (ok) ++granted;
    return ok;
  }
  void record(time_point now, const attempt_report& r) {
    retries_in_flight_at_record = granted - retries_ended;
    counting_budget::record(now, r);
  }
  void retry_ended(time_point now) {
    ++retries_ended;
    end_times.push_back(now);
    EXPECT_LE(retries_ended, granted);
  }
  void request_ended(time_point now) {
    ++requests_ended;
    end_times.push_back(now);
    EXPECT_LE(requests_ended, admitted);
  }
};
static_assert(stormguard::hears_retry_end<ending_budget>);
static_assert(stormguard::hears_request_end<ending_budget>);
static_assert(!stormguard::hears_retry_end<stormguard::ratio_budget>);
static_assert(!stormguard::hears_request_end<stormguard::no_budget>);

struct fails_n {
  int failures;
  int calls = 0;
  stormguard::outcome<int, int> operator()(const attempt_context&) {
    ++calls;
    if (calls <= failures) return stormguard::failure{calls};
    return 7;
  }
};

retry_policy policy(int retries) {
  return retry_policy(
      retry_options{.max_retries = retries, .backoff = {.base = 10ms, .cap = 10ms}});
}

TEST(BudgetProtocol, RecordsEveryAttemptWithTheStatusOfTheAttemptItRetries) {
  ending_budget budget;
  stormguard::random_generator rng(1);
  request_budget ticket;
  ASSERT_TRUE(ticket.admit(budget, {}, rng));
  const retry_policy p = policy(3);
  auto next = ticket.failed(p, budget, 1, classification::retry().as_timeout(), 0ns, rng, {});
  ASSERT_TRUE(next.retry);
  next = ticket.failed(p, budget, 2, classification::retry(), next.delay, rng, {});
  ASSERT_TRUE(next.retry);
  ticket.succeeded(budget, {}, 3);
  ticket.end(budget, {});
  ASSERT_EQ(budget.records.size(), 3U);
  EXPECT_EQ(budget.records[0],
            (attempt_report{attempt_status::timeout, 1, attempt_status::success}));
  EXPECT_EQ(budget.records[1],
            (attempt_report{attempt_status::failure, 2, attempt_status::timeout}));
  EXPECT_EQ(budget.records[2],
            (attempt_report{attempt_status::success, 3, attempt_status::failure}));
  EXPECT_EQ(budget.granted, 2);
  EXPECT_EQ(budget.retries_ended, 2);
  EXPECT_EQ(budget.requests_ended, 1);
}

TEST(BudgetProtocol, ARetryIsInFlightFromItsGrantUntilItsAttemptEnds) {
  ending_budget budget;
  stormguard::random_generator rng(1);
  request_budget ticket;
  ASSERT_TRUE(ticket.admit(budget, {}, rng));
  const retry_policy p = policy(3);
  ASSERT_TRUE(ticket.failed(p, budget, 1, classification::retry(), 0ns, rng, {}).retry);
  EXPECT_EQ(budget.granted - budget.retries_ended, 1);  // held during the backoff
  ticket.succeeded(budget, {}, 2);
  EXPECT_EQ(budget.retries_in_flight_at_record, 1);  // still held while its attempt is recorded
  EXPECT_EQ(budget.retries_ended, 1);                // released once it ended
  EXPECT_EQ(budget.requests_ended, 0);               // the request is not over until end()
  ticket.end(budget, {});
  EXPECT_EQ(budget.requests_ended, 1);
}

TEST(BudgetProtocol, EndReleasesARetryThatNeverRanAndIsIdempotent) {
  ending_budget budget;
  stormguard::random_generator rng(1);
  request_budget ticket;
  ASSERT_TRUE(ticket.admit(budget, {}, rng));
  ASSERT_TRUE(ticket.failed(policy(3), budget, 1, classification::retry(), 0ns, rng, {}).retry);
  EXPECT_TRUE(ticket.has_pending_end<ending_budget>());
  ticket.end(budget, time_point{} + 5ms);
  ticket.end(budget, time_point{} + 6ms);
  EXPECT_FALSE(ticket.has_pending_end<ending_budget>());
  EXPECT_EQ(budget.retries_ended, 1);
  EXPECT_EQ(budget.requests_ended, 1);
  EXPECT_EQ(budget.end_times, (std::vector<time_point>{time_point{} + 5ms, time_point{} + 5ms}));
}

TEST(BudgetProtocol, ARejectedRequestHasNothingToEnd) {
  ending_budget budget;
  budget.admit = false;
  stormguard::random_generator rng(1);
  request_budget ticket;
  EXPECT_FALSE(ticket.admit(budget, {}, rng));
  EXPECT_FALSE(ticket.has_pending_end<ending_budget>());
  ticket.end(budget, {});
  EXPECT_EQ(budget.requests_ended, 0);
}

TEST(BudgetProtocol, ADeniedRetryIsNotHeld) {
  ending_budget budget(0);  // grants nothing
  stormguard::random_generator rng(1);
  request_budget ticket;
  ASSERT_TRUE(ticket.admit(budget, {}, rng));
  const auto next = ticket.failed(policy(3), budget, 1, classification::retry(), 0ns, rng, {});
  EXPECT_EQ(next.reason, end_reason::budget_exhausted);
  ticket.end(budget, {});
  EXPECT_EQ(budget.retries_ended, 0);
  EXPECT_EQ(budget.requests_ended, 1);
}

// The retrier follows the protocol on every way a call can end.

TEST(RetrierBudgetProtocol, SuccessAfterRetriesEndsEveryRetryAndTheRequestOnce) {
  manual_clock clock;
  stormguard::random_generator rng(3);
  ending_budget budget;
  retrier retry(policy(3), clock, rng, budget);
  fails_n op{2};
  const auto result = retry(op, [](int) { return true; });
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(budget.granted, 2);
  EXPECT_EQ(budget.retries_ended, 2);
  EXPECT_EQ(budget.requests_ended, 1);
}

TEST(RetrierBudgetProtocol, GivingUpEndsTheRequest) {
  manual_clock clock;
  stormguard::random_generator rng(3);
  ending_budget budget;
  retrier retry(policy(1), clock, rng, budget);
  fails_n op{5};
  const auto result = retry(op, [](int) { return true; });
  EXPECT_EQ(result.reason, end_reason::attempts_exhausted);
  EXPECT_EQ(budget.retries_ended, budget.granted);
  EXPECT_EQ(budget.requests_ended, 1);
}

// A clock whose sleep requests a stop: the call is cancelled during the backoff.
class stopping_clock final : public stormguard::clock {
 public:
  explicit stopping_clock(std::stop_source& s) : stop_(s) {}
  time_point now() const noexcept override { return inner_.now(); }
  stormguard::wall_time_point wall_now() const noexcept override { return inner_.wall_now(); }
  bool sleep_for(duration, const std::stop_token&) override {
    stop_.request_stop();
    return false;
  }

 private:
  std::stop_source& stop_;
  manual_clock inner_;
};

TEST(RetrierBudgetProtocol, CancellationDuringTheBackoffEndsTheGrantedRetry) {
  std::stop_source stop;
  stopping_clock clock(stop);
  stormguard::random_generator rng(3);
  ending_budget budget;
  retrier retry(policy(3), clock, rng, budget);
  fails_n op{5};
  const auto result = retry(op, [](int) { return true; }, {.stop = stop.get_token()});
  EXPECT_EQ(result.reason, end_reason::cancelled);
  EXPECT_EQ(budget.granted, 1);
  EXPECT_EQ(budget.retries_ended, 1);
  EXPECT_EQ(budget.requests_ended, 1);
}

TEST(RetrierBudgetProtocol, AnExceptionFromTheOperationStillEndsTheRequest) {
  manual_clock clock;
  stormguard::random_generator rng(3);
  ending_budget budget;
  retrier retry(policy(3), clock, rng, budget);
  int calls = 0;
  const auto op = [&](const attempt_context&) -> stormguard::outcome<int, int> {
    if (++calls == 1) return stormguard::failure{1};
    throw std::runtime_error("boom");
  };
  EXPECT_THROW((void)retry(op, [](int) { return true; }), std::runtime_error);
  EXPECT_EQ(budget.granted, 1);
  EXPECT_EQ(budget.retries_ended, 1);
  EXPECT_EQ(budget.requests_ended, 1);
}

TEST(RetrierBudgetProtocol, AThrottledRequestEndsNothing) {
  manual_clock clock;
  stormguard::random_generator rng(3);
  ending_budget budget;
  budget.admit = false;
  retrier retry(policy(3), clock, rng, budget);
  fails_n op{0};
  const auto result = retry(op, [](int) { return true; });
  EXPECT_EQ(result.reason, end_reason::throttled);
  EXPECT_EQ(op.calls, 0);
  EXPECT_EQ(budget.requests_ended, 0);
}

}  // namespace
