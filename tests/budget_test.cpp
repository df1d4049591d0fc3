// SPDX-License-Identifier: Apache-2.0
#include "stormguard/budget.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/budget_protocol.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "stormguard/testing/scripted_random.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::adaptive_throttle;
using stormguard::adaptive_throttle_options;
using stormguard::attempt_report;
using stormguard::attempt_status;
using stormguard::duration;
using stormguard::random_generator;
using stormguard::ratio_budget;
using stormguard::ratio_budget_options;
using stormguard::retry_quota;
using stormguard::retry_quota_options;
using stormguard::time_point;
using stormguard::token_bucket_throttle;
using stormguard::token_bucket_throttle_options;
using stormguard::testing::fraction;
using stormguard::testing::scripted_random;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr time_point t0{};

using stormguard::test_util::invalid_argument_message;

double seconds(duration d) { return std::chrono::duration<double>(d).count(); }

// The reserve in whole retries: min_retries_per_second · window.
std::int64_t reserve_of(const ratio_budget_options& o) {
  return static_cast<std::int64_t>(
      std::floor(static_cast<double>(o.min_retries_per_second) * seconds(o.window)));
}

// Withdraws until denied; returns how many were granted.
int drain(ratio_budget& b, time_point now) {
  int granted = 0;
  while (b.try_withdraw(now)) ++granted;
  return granted;
}

static_assert(stormguard::retry_budget<ratio_budget>);
static_assert(stormguard::retry_budget<stormguard::no_budget>);

// ---------------------------------------------------------------------------------------------
// Validation.
// ---------------------------------------------------------------------------------------------

TEST(RatioBudgetValidation, RejectsBadRatioNamingFieldAndValue) {
  EXPECT_THAT(invalid_argument_message(
                  [] { ratio_budget b({.ratio = std::numeric_limits<double>::quiet_NaN()}); }),
              AllOf(HasSubstr("ratio"), HasSubstr("nan")));
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.ratio = -0.1}); }),
              AllOf(HasSubstr("ratio"), HasSubstr("-0.1")));
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.ratio = 1000.5}); }),
              AllOf(HasSubstr("ratio"), HasSubstr("1000.5")));
  EXPECT_THAT(invalid_argument_message(
                  [] { ratio_budget b({.ratio = std::numeric_limits<double>::infinity()}); }),
              AllOf(HasSubstr("ratio"), HasSubstr("inf")));
}

TEST(RatioBudgetValidation, RejectsTtlOutsideOneToSixtySeconds) {
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.window = 500ms}); }),
              AllOf(HasSubstr("window"), HasSubstr("500ms")));
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.window = 61s}); }),
              AllOf(HasSubstr("window"), HasSubstr("61s")));
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.window = -10s}); }),
              AllOf(HasSubstr("window"), HasSubstr("-10s")));
}

TEST(RatioBudgetValidation, RejectsBadMinRetriesPerSecond) {
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.min_retries_per_second = -1}); }),
              AllOf(HasSubstr("min_retries_per_second"), HasSubstr("-1")));
  EXPECT_THAT(
      invalid_argument_message([] { ratio_budget b({.min_retries_per_second = 2'000'000}); }),
      AllOf(HasSubstr("min_retries_per_second"), HasSubstr("2000000")));
}

TEST(RatioBudgetValidation, AcceptsTheBoundaries) {
  EXPECT_NO_THROW(ratio_budget({.ratio = 0.0, .window = 1s, .min_retries_per_second = 0}));
  EXPECT_NO_THROW(
      ratio_budget({.ratio = 1000.0, .window = 60s, .min_retries_per_second = 1'000'000}));
  EXPECT_EQ(ratio_budget().options(), ratio_budget_options{});
}

// ---------------------------------------------------------------------------------------------
// The reserve (floor) and expiry.
// ---------------------------------------------------------------------------------------------

TEST(RatioBudget, ReserveGrantsExactlyFloorTimesTtlThenDenies) {
  for (const ratio_budget_options o :
       {ratio_budget_options{}, ratio_budget_options{.window = 1s, .min_retries_per_second = 3},
        ratio_budget_options{.window = 60s, .min_retries_per_second = 7},
        ratio_budget_options{.window = 2500ms, .min_retries_per_second = 2}}) {
    ratio_budget b(o);
    const time_point now = t0 + 1234ms;
    EXPECT_EQ(b.balance(now), reserve_of(o));
    EXPECT_EQ(drain(b, now), reserve_of(o)) << "window " << seconds(o.window);
    EXPECT_FALSE(b.try_withdraw(now));
    EXPECT_EQ(b.balance(now), 0);
  }
}

TEST(RatioBudget, NoFloorAndNoDepositsDeniesEverything) {
  ratio_budget b({.ratio = 0.5, .min_retries_per_second = 0});
  EXPECT_EQ(b.balance(t0), 0);
  EXPECT_FALSE(b.try_withdraw(t0));
}

TEST(RatioBudget, WithdrawalsExpireAfterTtlAndTheBalanceRecovers) {
  const ratio_budget_options o{.ratio = 0.1, .window = 10s, .min_retries_per_second = 10};
  const duration slice = o.window / ratio_budget::k_slices;
  // Spend the reserve at an instant in the middle of a slice, then watch it come back.
  for (const time_point spent_at : {t0 + 500ms, t0 + 3s, t0 + 3s + 999ms, t0 - 7250ms}) {
    ratio_budget b(o);
    ASSERT_EQ(drain(b, spent_at), reserve_of(o));
    // Still spent for a whole window: a retry counts against every window of window it falls in.
    EXPECT_EQ(b.balance(spent_at + o.window - 1ns), 0);
    EXPECT_FALSE(b.try_withdraw(spent_at + o.window - 1ns));
    // Back in full no later than one slice after that.
    EXPECT_EQ(b.balance(spent_at + o.window + slice), reserve_of(o));
    EXPECT_EQ(drain(b, spent_at + o.window + slice), reserve_of(o));
  }
}

TEST(RatioBudget, DepositsExpireToo) {
  ratio_budget b({.ratio = 1.0, .window = 1s, .min_retries_per_second = 0});
  for (int i = 0; i < 5; ++i) b.deposit(t0);
  EXPECT_EQ(b.balance(t0 + 500ms), 5);
  EXPECT_EQ(b.balance(t0 + 5s), 0);
  EXPECT_FALSE(b.try_withdraw(t0 + 5s));
}

// ---------------------------------------------------------------------------------------------
// Deposits.
// ---------------------------------------------------------------------------------------------

TEST(RatioBudget, RatioZeroDepositsNothing) {
  ratio_budget b({.ratio = 0.0, .min_retries_per_second = 0});
  for (int i = 0; i < 1000; ++i) b.deposit(t0);
  EXPECT_EQ(b.balance(t0), 0);
  EXPECT_FALSE(b.try_withdraw(t0));
}

TEST(RatioBudget, RatioThousandGrantsAThousandRetriesPerRequest) {
  ratio_budget b({.ratio = 1000.0, .min_retries_per_second = 0});
  b.deposit(t0);
  EXPECT_EQ(b.balance(t0), 1000);
  EXPECT_EQ(drain(b, t0), 1000);
  b.deposit(t0);
  b.deposit(t0);
  EXPECT_EQ(drain(b, t0), 2000);
}

TEST(RatioBudget, FractionalRatioAccumulatesExactly) {
  // 0.001 = 1000 micro-retries per request: 999 requests are not one retry, 1000 are.
  ratio_budget b({.ratio = 0.001, .min_retries_per_second = 0});
  for (int i = 0; i < 999; ++i) b.deposit(t0);
  EXPECT_FALSE(b.try_withdraw(t0));
  b.deposit(t0);
  EXPECT_TRUE(b.try_withdraw(t0));
  EXPECT_FALSE(b.try_withdraw(t0));
  // 0.1 over 10^4 requests: exactly 1000 retries, no drift from a binary fraction.
  ratio_budget tenth({.ratio = 0.1, .min_retries_per_second = 0});
  for (int i = 0; i < 10'000; ++i) tenth.deposit(t0);
  EXPECT_EQ(drain(tenth, t0), 1000);
}

// ---------------------------------------------------------------------------------------------
// The bound, with every request failing and retries taken greedily.
// ---------------------------------------------------------------------------------------------

struct greedy_run {
  std::vector<time_point> requests;
  std::vector<time_point> grants;
};

// A client whose every request fails: each request deposits, then takes every retry the budget
// grants. Requests arrive every `interval` from `start` for `length`.
greedy_run run_greedy(const ratio_budget_options& o, time_point start, duration interval,
                      duration length) {
  ratio_budget b(o);
  greedy_run run;
  for (time_point now = start; now < start + length; now += interval) {
    b.deposit(now);
    run.requests.push_back(now);
    while (b.try_withdraw(now)) run.grants.push_back(now);
  }
  return run;
}

std::int64_t count_in(const std::vector<time_point>& sorted, time_point from, time_point to) {
  return std::lower_bound(sorted.begin(), sorted.end(), to) -
         std::lower_bound(sorted.begin(), sorted.end(), from);
}

struct bound_check {
  double worst_excess = -1e300;  // max over windows of granted − bound (must be <= 0)
  double closest = 0;            // max over windows of granted / bound (should be near 1)
  double steady_mean = 0;        // mean of granted / bound over windows inside the traffic
};

// For every window [w, w + window) (w stepping by `step` over the run), compares the retries
// granted in it with ratio × requests(in the window plus the slice before it) + floor × window.
bound_check check_bound(const ratio_budget_options& o, const greedy_run& run, duration step) {
  const duration slice = o.window / ratio_budget::k_slices;
  bound_check result;
  const time_point first = run.requests.front() - o.window;
  const time_point last = run.requests.back() + o.window;
  double steady_sum = 0;
  int steady_windows = 0;
  for (time_point w = first; w <= last; w += step) {
    const auto granted = static_cast<double>(count_in(run.grants, w, w + o.window));
    const double bound =
        o.ratio * static_cast<double>(count_in(run.requests, w - slice, w + o.window)) +
        static_cast<double>(o.min_retries_per_second) * seconds(o.window);
    result.worst_excess = std::max(result.worst_excess, granted - bound);
    if (bound > 0) result.closest = std::max(result.closest, granted / bound);
    // Steady state: a full slice of traffic before the window, and traffic to its end.
    if (w - slice >= run.requests.front() + o.window && w + o.window <= run.requests.back()) {
      steady_sum += granted / bound;
      ++steady_windows;
    }
  }
  result.steady_mean = steady_windows > 0 ? steady_sum / steady_windows : 1.0;
  return result;
}

struct greedy_case {
  ratio_budget_options options;
  duration start;  // unaligned with the slices on purpose
  duration interval;
  duration length;
};

TEST(RatioBudget, RetriesInAnyWindowOfTtlStayWithinRatioTimesRequestsPlusFloor) {
  const std::vector<greedy_case> cases{
      // The defaults (10 %, 10 s, 10/s) at 200 requests/s.
      {{}, 3370ms, 5ms, 60s},
      // A reserve that dominates: 50 requests/s, 20 %, floor 30/s over 4 s.
      {{.ratio = 0.2, .window = 4s, .min_retries_per_second = 30}, 1250ms, 20ms, 30s},
      // No floor, ratio 0.5, short window, starting before the epoch.
      {{.ratio = 0.5, .window = 1s, .min_retries_per_second = 0}, -2730ms, 1ms, 8s},
      // A window that ten slices do not divide evenly, ratio above 1.
      {{.ratio = 2.5, .window = 3s + 7ns, .min_retries_per_second = 1}, 777ms, 10ms, 20s},
  };
  for (const greedy_case& c : cases) {
    const greedy_run run = run_greedy(c.options, t0 + c.start, c.interval, c.length);
    ASSERT_FALSE(run.grants.empty());
    const bound_check check = check_bound(c.options, run, 10ms);
    SCOPED_TRACE("ratio " + std::to_string(c.options.ratio) + ", window " +
                 std::to_string(seconds(c.options.window)) + " s, floor " +
                 std::to_string(c.options.min_retries_per_second) + "/s");
    // Never above the bound ...
    EXPECT_LE(check.worst_excess, 1e-9);
    // ... and not overly stingy: some window reaches it (to within 10 %), and in steady traffic
    // windows average near 10/11 of it (the ideal, as the bound counts 11 slices of requests
    // while the window holds 10).
    EXPECT_GE(check.closest, 0.9);
    EXPECT_GE(check.steady_mean, 0.88);
  }
}

TEST(RatioBudget, LongRunRetryRateApproachesRatioPlusFloor) {
  // 100 requests/s for 100 s, all failing, 10 % + 10/s: the budget should grant close to
  // 10 retries/s from deposits plus up to 10/s from the reserve, and never more.
  const ratio_budget_options o{};
  const duration length = 100s;
  const greedy_run run = run_greedy(o, t0 + 450ms, 10ms, length);
  const double upper = o.ratio * static_cast<double>(run.requests.size()) +
                       static_cast<double>(o.min_retries_per_second) * seconds(length + o.window);
  const auto granted = static_cast<double>(run.grants.size());
  EXPECT_LE(granted, upper);
  EXPECT_GE(granted, 0.85 * upper);
}

// ---------------------------------------------------------------------------------------------
// Invariants: balance never negative, try_withdraw agrees with balance.
// ---------------------------------------------------------------------------------------------

TEST(RatioBudget, BalanceNeverNegativeAndWithdrawAgreesWithIt) {
  ratio_budget b({.ratio = 0.3, .window = 2s, .min_retries_per_second = 1});
  stormguard::random_generator g(77);
  time_point now = t0 - 3s;
  for (int i = 0; i < 100'000; ++i) {
    now += duration(stormguard::uniform_int(g, 2'000'000));  // 0 .. 2 ms
    if (stormguard::uniform_int(g, 2) == 0) {
      b.deposit(now);
    } else {
      const std::int64_t before = b.balance(now);
      ASSERT_GE(before, 0);
      ASSERT_EQ(b.try_withdraw(now), before >= 1) << "step " << i;
      ASSERT_GE(b.balance(now), 0);
    }
  }
}

TEST(RatioBudget, DepositAndTryWithdrawDecidesAsTheTwoCallsDo) {
  // Two budgets fed the same random sequence: one through deposit(at, n) + try_withdraw(now),
  // the other through the combined call. Every decision and balance must agree.
  const ratio_budget_options options{.ratio = 0.1, .window = 2s, .min_retries_per_second = 1};
  ratio_budget separate(options);
  ratio_budget combined(options);
  stormguard::random_generator g(2026);
  time_point now = t0;
  int granted = 0;
  int refused = 0;
  for (int i = 0; i < 50'000; ++i) {
    now += duration(stormguard::uniform_int(g, 5'000'000));                       // 0 .. 5 ms
    const auto count = static_cast<std::int64_t>(stormguard::uniform_int(g, 4));  // 0 .. 3
    const time_point at = now - duration(stormguard::uniform_int(g, 200'000'000));
    separate.deposit(at, count);
    const bool expected = separate.try_withdraw(now);
    ASSERT_EQ(combined.deposit_and_try_withdraw(at, count, now), expected) << "step " << i;
    ASSERT_EQ(combined.balance(now), separate.balance(now)) << "step " << i;
    (expected ? granted : refused) += 1;
  }
  // The sequence exercises both answers.
  EXPECT_GT(granted, 1000);
  EXPECT_GT(refused, 1000);
}

// ---------------------------------------------------------------------------------------------
// Time: before the epoch, out of order, extremes.
// ---------------------------------------------------------------------------------------------

TEST(RatioBudget, WorksAcrossTheEpoch) {
  ratio_budget b({.ratio = 1.0, .window = 1s, .min_retries_per_second = 0});
  b.deposit(t0 - 50ms);
  b.deposit(t0 - 50ms);
  EXPECT_EQ(b.balance(t0 + 20ms), 2);  // the slice boundary at 0 is not a reset
  EXPECT_TRUE(b.try_withdraw(t0 + 30ms));
  EXPECT_EQ(b.balance(t0 + 30ms), 1);
  EXPECT_EQ(b.balance(t0 + 5s), 0);
}

TEST(RatioBudget, OutOfOrderTimesCountInTheNewestSlice) {
  ratio_budget b({.ratio = 1.0, .window = 1s, .min_retries_per_second = 0});
  b.deposit(t0 + 20s);
  b.deposit(t0 + 5s);  // older than the newest seen: counted now, not lost
  EXPECT_EQ(b.balance(t0 + 20s), 2);
  EXPECT_TRUE(b.try_withdraw(t0 + 3s));
  EXPECT_EQ(b.balance(t0 + 20s), 1);
  EXPECT_EQ(b.balance(t0 - 1h), 1);  // a query from the past sees the current window
  EXPECT_EQ(b.balance(t0 + 25s), 0);
}

TEST(RatioBudget, ExtremeInstantsDoNotBreakIt) {
  ratio_budget b({.ratio = 1.0, .window = 1s, .min_retries_per_second = 2});
  for (const time_point now : {time_point::min(), time_point::min() + 1s, t0,
                               time_point::max() - 1s, time_point::max(), time_point::min()}) {
    b.deposit(now);
    const std::int64_t balance = b.balance(now);
    EXPECT_GE(balance, 0);
    EXPECT_LE(balance, 2 + 6);
    (void)b.try_withdraw(now);
  }
}

// ---------------------------------------------------------------------------------------------
// Threads (CI also runs this under ThreadSanitizer).
// ---------------------------------------------------------------------------------------------

TEST(RatioBudget, ConcurrentDepositsAndWithdrawalsAddUp) {
  const ratio_budget_options o{.ratio = 0.1, .window = 10s, .min_retries_per_second = 10};
  ratio_budget b(o);
  constexpr int k_threads = 4;
  constexpr int k_iterations = 20'000;
  const time_point now = t0 + 1s;  // one instant: nothing expires, so totals are exact
  std::atomic<std::int64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&] {
      std::int64_t mine = 0;
      for (int i = 0; i < k_iterations; ++i) {
        b.deposit(now);
        if (b.try_withdraw(now)) ++mine;
      }
      granted += mine;
    });
  }
  for (auto& thread : threads) thread.join();
  // Everything deposited plus the reserve, minus everything granted, is what is left.
  const std::int64_t deposited =
      std::int64_t{k_threads} * k_iterations * std::llround(o.ratio * ratio_budget::k_scale);
  const std::int64_t total = deposited + reserve_of(o) * ratio_budget::k_scale;
  EXPECT_LE(granted.load() * ratio_budget::k_scale, total);
  EXPECT_EQ(b.balance(now),
            (total - granted.load() * ratio_budget::k_scale) / ratio_budget::k_scale);
  // Greedy withdrawals leave less than one retry per thread behind.
  EXPECT_LT(b.balance(now), k_threads);
}

TEST(RatioBudget, ConcurrentUseWithAdvancingTimeStaysConsistent) {
  const ratio_budget_options o{.ratio = 0.1, .window = 1s, .min_retries_per_second = 5};
  ratio_budget b(o);
  constexpr int k_threads = 4;
  constexpr int k_iterations = 20'000;
  std::atomic<std::int64_t> tick{0};
  std::atomic<std::int64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&] {
      std::int64_t mine = 0;
      for (int i = 0; i < k_iterations; ++i) {
        // 80,000 requests 100 us apart: 8 s of virtual time, read slightly out of order.
        const time_point now = t0 + tick.fetch_add(1) * 100us;
        b.deposit(now);
        if (b.try_withdraw(now)) ++mine;
        if (b.balance(now) < 0) ADD_FAILURE() << "negative balance";
      }
      granted += mine;
    });
  }
  for (auto& thread : threads) thread.join();
  // 8 s of 10 % of 80,000 requests plus at most one reserve per window (+1 for the partial window).
  const double upper = o.ratio * k_threads * k_iterations +
                       static_cast<double>(reserve_of(o)) * (8.0 / seconds(o.window) + 1);
  EXPECT_LE(static_cast<double>(granted.load()), upper);
  EXPECT_GE(static_cast<double>(granted.load()), o.ratio * k_threads * k_iterations * 0.9);
}

}  // namespace

namespace {

TEST(RatioBudgetValidation, RejectsANonZeroRatioThatWouldRoundToZero) {
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.ratio = 1e-7}); }),
              AllOf(HasSubstr("ratio"), HasSubstr("1e-07")));
  ratio_budget smallest({.ratio = 1e-6, .min_retries_per_second = 0});  // representable: accepted
  for (int i = 0; i < 1'000'000; ++i) smallest.deposit(t0);
  EXPECT_EQ(smallest.balance(t0), 1);  // a million requests at 1e-6 earn exactly one retry
}

TEST(RatioBudgetValidation, MessagesPrintLargeRatiosInFull) {
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.ratio = 2000}); }),
              HasSubstr("got 2000"));
}

// ---------------------------------------------------------------------------------------------
// The retry_budget interface of ratio_budget.
// ---------------------------------------------------------------------------------------------

static_assert(stormguard::retry_budget<stormguard::no_budget>);
static_assert(stormguard::retry_budget<ratio_budget>);
static_assert(stormguard::retry_budget<token_bucket_throttle>);
static_assert(stormguard::retry_budget<retry_quota>);
static_assert(stormguard::retry_budget<adaptive_throttle>);
static_assert(stormguard::retry_budget<adaptive_throttle, scripted_random>);

constexpr attempt_report failed_first{attempt_status::failure, 1, attempt_status::success};
constexpr attempt_report succeeded_first{attempt_status::success, 1, attempt_status::success};

TEST(RatioBudget, TryAdmitDepositsAndRecordChangesNothing) {
  ratio_budget b({.ratio = 0.5, .min_retries_per_second = 0});
  random_generator g(1);
  EXPECT_TRUE(b.try_admit(t0, g));
  EXPECT_TRUE(b.try_admit(t0, g));
  b.record(t0, succeeded_first);
  b.record(t0, failed_first);
  EXPECT_EQ(b.balance(t0), 1);  // two deposits of 0.5
  EXPECT_TRUE(b.try_withdraw(t0, attempt_status::timeout, g));
  EXPECT_FALSE(b.try_withdraw(t0, attempt_status::failure, g));
}

// ---------------------------------------------------------------------------------------------
// token_bucket_throttle (gRFC A6).
// ---------------------------------------------------------------------------------------------

// Records failures from a full bucket, asking for a retry after each, until one is denied.
std::int64_t retries_while_everything_fails(token_bucket_throttle& b) {
  random_generator g(1);
  std::int64_t granted = 0;
  for (int i = 0; i < 10'000; ++i) {
    b.record(t0, failed_first);
    if (!b.try_withdraw(t0, attempt_status::failure, g)) break;
    ++granted;
  }
  return granted;
}

TEST(TokenBucketThrottle, AllFailingGrantsRetriesOnlyWhileAboveHalf) {
  for (const double max : {10.0, 3.0, 1.0, 0.5, 7.5, 100.0, 1000.0, 2.001}) {
    token_bucket_throttle b({.max_tokens = max, .token_ratio = 0.1});
    // After the n-th failure the bucket holds max - n; a retry needs max - n > max / 2.
    std::int64_t expected = 0;
    for (std::int64_t n = 1; static_cast<double>(n) < max / 2.0; ++n) expected = n;
    EXPECT_EQ(retries_while_everything_fails(b), expected) << "max_tokens " << max;
    EXPECT_FALSE(b.retry_allowed());
  }
}

TEST(TokenBucketThrottle, ARequestOutOfRetriesGrantsFewerThanTheBound) {
  // max_retries 3: the first request takes 3 retries and its 4th failure drains a token without
  // asking; the next request's first failure leaves the bucket at half. 3 in all, not 4.
  token_bucket_throttle b({});
  random_generator g(1);
  const stormguard::retry_policy policy({.max_retries = 3});
  std::int64_t granted = 0;
  for (int request = 0; request < 3; ++request) {
    stormguard::request_budget ticket;
    ASSERT_TRUE(ticket.admit(b, t0, g));
    for (int attempt = 1;; ++attempt) {
      const auto next =
          ticket.failed(policy, b, attempt, stormguard::classification::retry(), 0ns, g, t0);
      if (!next.retry) break;
      ++granted;
    }
    ticket.end(b, t0);
  }
  EXPECT_EQ(granted, 3);
}

TEST(TokenBucketThrottle, FailuresRecordedBeforeAnyAskGrantFewer) {
  // Six threads' first failures recorded before any of them asks: the bucket is at 4 (below
  // half) when they do, so none is granted, where one thread alone would have had 4.
  token_bucket_throttle b({});
  random_generator g(1);
  for (int i = 0; i < 6; ++i) b.record(t0, failed_first);
  std::int64_t granted = 0;
  for (int i = 0; i < 6; ++i) granted += b.try_withdraw(t0, attempt_status::failure, g) ? 1 : 0;
  EXPECT_EQ(granted, 0);
  token_bucket_throttle alone({});
  EXPECT_EQ(retries_while_everything_fails(alone), 4);
}

TEST(TokenBucketThrottle, StartsFullAndFirstAttemptsAreNeverThrottled) {
  token_bucket_throttle b({.max_tokens = 4, .token_ratio = 0.5});
  EXPECT_EQ(b.milli_tokens(), 4000);
  EXPECT_DOUBLE_EQ(b.tokens(), 4.0);
  random_generator g(1);
  for (int i = 0; i < 10; ++i) b.record(t0, failed_first);
  EXPECT_EQ(b.milli_tokens(), 0);  // never below zero
  EXPECT_TRUE(b.try_admit(t0, g));
}

TEST(TokenBucketThrottle, SuccessesRefillAboveHalfThenRetriesResume) {
  const token_bucket_throttle_options o{.max_tokens = 10, .token_ratio = 0.3};
  token_bucket_throttle b(o);
  for (int i = 0; i < 20; ++i) b.record(t0, failed_first);
  ASSERT_EQ(b.milli_tokens(), 0);
  // Successes needed: the smallest k with k · ratio > max / 2.
  int needed = 0;
  while (static_cast<double>(needed) * o.token_ratio <= o.max_tokens / 2.0 + 1e-9) ++needed;
  for (int k = 1; k <= needed; ++k) {
    b.record(t0, succeeded_first);
    EXPECT_EQ(b.retry_allowed(), k == needed) << "after " << k << " successes";
  }
  EXPECT_EQ(b.milli_tokens(), needed * 300);
}

TEST(TokenBucketThrottle, NeverAboveMaxAndNotRetryableChangesNothing) {
  token_bucket_throttle b({.max_tokens = 2, .token_ratio = 0.7});
  b.record(t0, succeeded_first);
  EXPECT_EQ(b.milli_tokens(), 2000);
  b.record(t0, failed_first);
  b.record(t0, {attempt_status::timeout, 2, attempt_status::failure});
  EXPECT_EQ(b.milli_tokens(), 0);
  b.record(t0, {attempt_status::not_retryable, 1, attempt_status::success});
  EXPECT_EQ(b.milli_tokens(), 0);
}

TEST(TokenBucketThrottle, RandomSequencesKeepTokensInRange) {
  token_bucket_throttle b({.max_tokens = 5.5, .token_ratio = 0.25});
  random_generator g(7);
  std::int64_t model = 5500;  // the expected milli-tokens, computed independently
  for (int i = 0; i < 20'000; ++i) {
    const bool success = stormguard::uniform_unit(g) < 0.5;
    b.record(t0, success ? succeeded_first : failed_first);
    model = success ? std::min<std::int64_t>(5500, model + 250)
                    : std::max<std::int64_t>(0, model - 1000);
    ASSERT_EQ(b.milli_tokens(), model) << "step " << i;
    ASSERT_EQ(b.retry_allowed(), 2 * model > 5500);
  }
}

TEST(TokenBucketThrottle, ConcurrentRecordsAddUp) {
  // 1000 tokens; 4 threads record 200 failures each (800 tokens, never reaching 0), then 4
  // threads record 1000 successes of 0.2 each (800 tokens, never passing the maximum).
  token_bucket_throttle b({.max_tokens = 1000, .token_ratio = 0.2});
  const auto run = [&](const attempt_report& r, int n) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < n; ++i) b.record(t0, r);
      });
    }
    for (auto& th : threads) th.join();
  };
  run(failed_first, 200);
  EXPECT_EQ(b.milli_tokens(), 200'000);
  run(succeeded_first, 1000);
  EXPECT_EQ(b.milli_tokens(), 1'000'000);
}

TEST(TokenBucketThrottleValidation, RejectsOutOfRangeAndOverPreciseSettings) {
  const auto message = [](token_bucket_throttle_options o) {
    return invalid_argument_message([&] { token_bucket_throttle b(o); });
  };
  EXPECT_THAT(message({.max_tokens = 0}), AllOf(HasSubstr("max_tokens"), HasSubstr("got 0")));
  EXPECT_THAT(message({.max_tokens = -1}), HasSubstr("got -1"));
  EXPECT_THAT(message({.max_tokens = 1000.5}), HasSubstr("got 1000.5"));
  EXPECT_THAT(message({.max_tokens = std::nan("")}), HasSubstr("max_tokens"));
  EXPECT_THAT(message({.max_tokens = 10.0005}),
              AllOf(HasSubstr("max_tokens"), HasSubstr("3 decimal places")));
  EXPECT_THAT(message({.token_ratio = 0}), AllOf(HasSubstr("token_ratio"), HasSubstr("got 0")));
  EXPECT_THAT(message({.token_ratio = 0.0001}),
              AllOf(HasSubstr("token_ratio"), HasSubstr("3 decimal places")));
  EXPECT_THAT(message({.token_ratio = std::numeric_limits<double>::infinity()}),
              HasSubstr("token_ratio"));
  EXPECT_NO_THROW(token_bucket_throttle({.max_tokens = 0.001, .token_ratio = 0.001}));
  EXPECT_NO_THROW(token_bucket_throttle({.max_tokens = 999.999, .token_ratio = 1000}));
  EXPECT_EQ(token_bucket_throttle({.max_tokens = 0.1, .token_ratio = 0.1}).max_milli_tokens(), 100);
}

// ---------------------------------------------------------------------------------------------
// retry_quota (AWS SDK standard retry mode).
// ---------------------------------------------------------------------------------------------

TEST(RetryQuota, AllFailingGrantsFloorOfCapacityOverCost) {
  for (const retry_quota_options o :
       {retry_quota_options{}, retry_quota_options{.max_tokens = 37, .retry_cost = 4},
        retry_quota_options{.max_tokens = 13, .retry_cost = 5, .timeout_cost = 6}}) {
    for (const attempt_status s : {attempt_status::failure, attempt_status::timeout}) {
      retry_quota q(o);
      random_generator g(1);
      std::int64_t granted = 0;
      while (granted < 100'000 && q.try_withdraw(t0, s, g)) ++granted;
      const std::int64_t cost = s == attempt_status::timeout ? o.timeout_cost : o.retry_cost;
      EXPECT_EQ(granted, o.max_tokens / cost) << o.max_tokens << " / " << cost;
      EXPECT_EQ(q.available(), o.max_tokens % cost);  // a denied retry costs nothing
    }
  }
}

TEST(RetryQuota, SuccessReturnsTheIncrementOrTheCostOfItsRetry) {
  retry_quota q;  // 500, 5, 10, 1
  random_generator g(1);
  ASSERT_TRUE(q.try_withdraw(t0, attempt_status::timeout, g));
  ASSERT_TRUE(q.try_withdraw(t0, attempt_status::failure, g));
  EXPECT_EQ(q.available(), 485);
  q.record(t0, {attempt_status::success, 2, attempt_status::timeout});
  EXPECT_EQ(q.available(), 495);
  q.record(t0, {attempt_status::success, 3, attempt_status::failure});
  EXPECT_EQ(q.available(), 500);
  q.record(t0, succeeded_first);  // capped at the maximum
  EXPECT_EQ(q.available(), 500);
  ASSERT_TRUE(q.try_withdraw(t0, attempt_status::failure, g));
  q.record(t0, succeeded_first);
  EXPECT_EQ(q.available(), 496);
  for (const attempt_status s :
       {attempt_status::failure, attempt_status::timeout, attempt_status::not_retryable}) {
    q.record(t0, {s, 2, attempt_status::failure});
  }
  EXPECT_EQ(q.available(), 496);  // failures return nothing
  EXPECT_TRUE(q.try_admit(t0, g));
}

TEST(RetryQuota, RandomSequencesKeepTokensInRange) {
  retry_quota q({.max_tokens = 60});
  random_generator g(11);
  std::int64_t model = 60;
  for (int i = 0; i < 20'000; ++i) {
    const double u = stormguard::uniform_unit(g);
    if (u < 0.4) {
      const attempt_status s = u < 0.1 ? attempt_status::timeout : attempt_status::failure;
      const std::int64_t cost = s == attempt_status::timeout ? 10 : 5;
      ASSERT_EQ(q.try_withdraw(t0, s, g), model >= cost);
      if (model >= cost) model -= cost;
    } else {
      const int attempt = u < 0.7 ? 1 : 2;
      q.record(t0, {attempt_status::success, attempt, attempt_status::failure});
      model = std::min<std::int64_t>(60, model + (attempt == 1 ? 1 : 5));
    }
    ASSERT_EQ(q.available(), model) << "step " << i;
  }
}

TEST(RetryQuota, ConcurrentWithdrawalsNeverOverspend) {
  retry_quota q;  // 500 tokens: exactly 100 retries of 5, however the threads interleave
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      random_generator g(static_cast<std::uint64_t>(t));
      for (int i = 0; i < 1000; ++i) {
        if (q.try_withdraw(t0, attempt_status::failure, g)) granted.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(granted.load(), 100);
  EXPECT_EQ(q.available(), 0);
}

TEST(RetryQuotaValidation, NamesTheFieldAndTheValue) {
  const auto message = [](retry_quota_options o) {
    return invalid_argument_message([&] { retry_quota q(o); });
  };
  EXPECT_THAT(message({.max_tokens = 0}), AllOf(HasSubstr("max_tokens"), HasSubstr("got 0")));
  EXPECT_THAT(message({.max_tokens = 2'000'000'000}), HasSubstr("got 2000000000"));
  EXPECT_THAT(message({.retry_cost = -1}), AllOf(HasSubstr("retry_cost"), HasSubstr("got -1")));
  EXPECT_THAT(message({.max_tokens = 8, .retry_cost = 5, .timeout_cost = 9}),
              AllOf(HasSubstr("timeout_cost"), HasSubstr("max_tokens = 8"), HasSubstr("got 9")));
  EXPECT_THAT(message({.no_retry_increment = 501}),
              AllOf(HasSubstr("no_retry_increment"), HasSubstr("got 501")));
}

// ---------------------------------------------------------------------------------------------
// adaptive_throttle (SRE book, "Handling Overload").
// ---------------------------------------------------------------------------------------------

TEST(AdaptiveThrottle, ProbabilityAtHandComputedPoints) {
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(0, 0, 2.0), 0.0);
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(10, 0, 2.0), 10.0 / 11.0);
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(10, 5, 2.0), 0.0);  // requests = K · accepts
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(100, 40, 2.0), 20.0 / 101.0);
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(100, 10, 1.1), 89.0 / 101.0);
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(100, 90, 1.0), 10.0 / 101.0);
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(5, 100, 2.0), 0.0);  // never negative
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(1, 0, 2.0), 0.5);    // the cold start
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(1, 0, 2.0, 8.0), 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(adaptive_throttle::probability(40, 10, 2.0, 8.0), 20.0 / 48.0);
}

TEST(AdaptiveThrottle, PaddingDampsTheColdStart) {
  adaptive_throttle book;
  adaptive_throttle padded({.requests_padding = 8});
  random_generator g(4);
  (void)book.try_admit(t0, g);
  (void)padded.try_admit(t0, g);
  EXPECT_DOUBLE_EQ(book.rejection_probability(t0), 0.5);
  EXPECT_DOUBLE_EQ(padded.rejection_probability(t0), 1.0 / 9.0);
}

TEST(AdaptiveThrottle, CountsEveryRequestAndOnlyAcceptedOutcomes) {
  adaptive_throttle a;
  random_generator g(3);
  for (int i = 0; i < 30; ++i) (void)a.try_admit(t0, g);
  (void)a.try_withdraw(t0, attempt_status::failure, g);  // a retry is a request too
  a.record(t0, succeeded_first);
  a.record(t0, {attempt_status::not_retryable, 1, attempt_status::success});
  a.record(t0, failed_first);
  a.record(t0, {attempt_status::timeout, 2, attempt_status::failure});
  EXPECT_EQ(a.requests(t0), 31);  // including any it rejected
  EXPECT_EQ(a.accepts(t0), 2);
  EXPECT_DOUBLE_EQ(a.rejection_probability(t0), (31.0 - 2.0 * 2.0) / 32.0);
}

TEST(AdaptiveThrottle, RejectsExactlyWhenTheDrawFallsBelowTheProbability) {
  adaptive_throttle a;
  random_generator g(5);
  for (int i = 0; i < 9; ++i) (void)a.try_admit(t0, g);
  a.record(t0, succeeded_first);
  // Before the next request: p = (9 − 2) / 10 = 0.7.
  ASSERT_DOUBLE_EQ(a.rejection_probability(t0), 0.7);
  scripted_random below{fraction(0.69)};
  EXPECT_FALSE(a.try_admit(t0, below));
  // Now requests = 10: p = (10 − 2) / 11.
  scripted_random above{fraction(8.0 / 11.0 + 0.01)};
  EXPECT_TRUE(a.try_admit(t0, above));
}

TEST(AdaptiveThrottle, DrawsNothingWhileTheProbabilityIsZero) {
  adaptive_throttle a;
  scripted_random none{};  // throws if drawn
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(a.try_admit(t0, none));
    a.record(t0, succeeded_first);
  }
  EXPECT_EQ(none.drawn(), 0U);
}

TEST(AdaptiveThrottle, RejectionRateMatchesTheFormulaWhenEverythingFails) {
  // With no accepts, request i (counted from 0) is rejected with probability i / (i + 1). The
  // expected number of rejections and its variance come from the formula; a rejection rule that
  // ignored p, inverted it, or dropped the +1 lands far outside 5 standard deviations.
  adaptive_throttle a;
  random_generator g(2024);
  const int n = 20'000;
  int rejected = 0;
  double mean = 0.0;
  double variance = 0.0;
  for (int i = 0; i < n; ++i) {
    const double p = adaptive_throttle::probability(i, 0, 2.0);
    mean += p;
    variance += p * (1.0 - p);
    if (!a.try_admit(t0, g)) ++rejected;
  }
  EXPECT_NEAR(rejected, mean, 5.0 * std::sqrt(variance));
  EXPECT_GT(rejected, n - 200);  // sanity: almost all rejected once the window is full of failures
}

TEST(AdaptiveThrottle, ForgetsRequestsAfterTheWindow) {
  adaptive_throttle a({.window = 60s});
  random_generator g(1);
  for (int i = 0; i < 100; ++i) (void)a.try_admit(t0, g);
  EXPECT_GT(a.rejection_probability(t0 + 59s), 0.9);
  // A request counts for at least the window and at most one slice (1 s) more.
  EXPECT_EQ(a.requests(t0 + 60s), 100);
  EXPECT_EQ(a.requests(t0 + 61s), 0);
  EXPECT_DOUBLE_EQ(a.rejection_probability(t0 + 61s), 0.0);
}

TEST(AdaptiveThrottle, ConcurrentCountsAddUp) {
  adaptive_throttle a;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      random_generator g(static_cast<std::uint64_t>(t));
      for (int i = 0; i < 2000; ++i) {
        (void)a.try_admit(t0 + std::chrono::milliseconds(i), g);
        a.record(t0 + std::chrono::milliseconds(i), succeeded_first);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(a.requests(t0 + 2s), 8000);
  EXPECT_EQ(a.accepts(t0 + 2s), 8000);
}

TEST(AdaptiveThrottleValidation, NamesTheFieldAndTheValue) {
  const auto message = [](adaptive_throttle_options o) {
    return invalid_argument_message([&] { adaptive_throttle a(o); });
  };
  EXPECT_THAT(message({.window = 0s}), AllOf(HasSubstr("window"), HasSubstr("got 0")));
  EXPECT_THAT(message({.window = 2h}), AllOf(HasSubstr("window"), HasSubstr("[1s, 1h]")));
  EXPECT_THAT(message({.k = 0.5}), AllOf(HasSubstr("k must be"), HasSubstr("got 0.5")));
  EXPECT_THAT(message({.k = std::nan("")}), HasSubstr("k must be"));
  EXPECT_THAT(message({.requests_padding = 0}),
              AllOf(HasSubstr("requests_padding"), HasSubstr("got 0")));
}

}  // namespace

TEST(BudgetConstruction, EmptyBracesMeanTheDefaults) {
  EXPECT_EQ(ratio_budget({}).options(), ratio_budget_options{});
  EXPECT_EQ(token_bucket_throttle({}).options(), token_bucket_throttle_options{});
  EXPECT_EQ(retry_quota({}).options(), retry_quota_options{});
  EXPECT_EQ(adaptive_throttle({}).options(), adaptive_throttle_options{});
}

// ---------------------------------------------------------------------------------------------
// concurrency_budget (Envoy's retry budget)
// ---------------------------------------------------------------------------------------------

using stormguard::concurrency_budget;
using stormguard::concurrency_budget_options;

TEST(ConcurrencyBudget, LimitIsTheFloorOrTheShareOfActiveRequests) {
  concurrency_budget b({});
  EXPECT_EQ(b.limit_for(0), 3);
  EXPECT_EQ(b.limit_for(19), 3);  // 20 % of 19 = 3.8 -> 3 (truncated, as Envoy)
  EXPECT_EQ(b.limit_for(20), 4);
  EXPECT_EQ(b.limit_for(1000), 200);
  concurrency_budget none({.budget_percent = 0, .min_retry_concurrency = 0});
  EXPECT_EQ(none.limit_for(1'000'000), 0);
  concurrency_budget all({.budget_percent = 100, .min_retry_concurrency = 0});
  EXPECT_EQ(all.limit_for(7), 7);
}

TEST(ConcurrencyBudget, GrantsOnlyWhileRetriesInFlightAreBelowTheLimit) {
  concurrency_budget b({});
  random_generator g(1);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b.try_admit(t0, g));
  EXPECT_EQ(b.active(), 10);
  int granted = 0;
  for (int i = 0; i < 10; ++i) granted += b.try_withdraw(t0, attempt_status::failure, g) ? 1 : 0;
  EXPECT_EQ(granted, 3);  // max(3, 20 % of 10 = 2)
  EXPECT_EQ(b.retries_in_flight(), 3);
  b.retry_ended(t0);  // one retry's attempt ended: a slot is free at once
  EXPECT_TRUE(b.try_withdraw(t0, attempt_status::timeout, g));
  EXPECT_FALSE(b.try_withdraw(t0, attempt_status::timeout, g));
  b.record(t0, attempt_report{attempt_status::success, 2, attempt_status::failure});
  EXPECT_EQ(b.retries_in_flight(), 3);  // record alone frees nothing
}

TEST(ConcurrencyBudget, TheShareGrowsWithActiveRequests) {
  concurrency_budget b({.budget_percent = 20, .min_retry_concurrency = 1});
  random_generator g(1);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(b.try_admit(t0, g));
  int granted = 0;
  for (int i = 0; i < 50; ++i) granted += b.try_withdraw(t0, attempt_status::failure, g) ? 1 : 0;
  EXPECT_EQ(granted, 10);
  for (int i = 0; i < 50; ++i) b.request_ended(t0);
  EXPECT_EQ(b.active(), 0);
  EXPECT_EQ(b.limit(), 1);
}

TEST(ConcurrencyBudget, ThroughTheProtocolEveryGrantAndAdmissionIsReleased) {
  // 1,000 logical requests through the retrier, all failing: whatever the interleaving of grants
  // and ends, the budget is back to zero in flight once every call ended.
  concurrency_budget b({});
  stormguard::testing::manual_clock clock;
  random_generator g(5);
  stormguard::retrier retry(stormguard::retry_policy({.max_retries = 3}), clock, g, b);
  for (int i = 0; i < 1000; ++i) {
    const auto r = retry([](const stormguard::attempt_context&) {
      return std::make_error_code(std::errc::connection_refused);
    });
    ASSERT_EQ(r.reason, stormguard::end_reason::attempts_exhausted);
    ASSERT_EQ(b.retries_in_flight(), 0);
    ASSERT_EQ(b.active(), 0);
  }
}

TEST(ConcurrencyBudget, NeverMoreRetriesInFlightThanTheLimitUnderThreads) {
  // The active count is fixed (200 admitted, limit 40); 8 threads grant and end retries as fast
  // as they can. A grant is counted in `in_flight` before its slot is released, so a grant beyond
  // the limit would show as in_flight > 40.
  concurrency_budget b({});
  random_generator g0(1);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(b.try_admit(t0, g0));
  ASSERT_EQ(b.limit(), 40);
  std::atomic<std::int64_t> in_flight{0};
  std::atomic<std::int64_t> highest{0};
  std::atomic<std::int64_t> grants{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      random_generator g(static_cast<std::uint64_t>(t));
      for (int i = 0; i < 20'000; ++i) {
        if (!b.try_withdraw(t0, attempt_status::failure, g)) continue;
        ++grants;
        const std::int64_t now = ++in_flight;
        std::int64_t seen = highest.load();
        while (now > seen && !highest.compare_exchange_weak(seen, now)) {
        }
        --in_flight;
        b.retry_ended(t0);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(highest.load(), 40);
  EXPECT_GT(grants.load(), 0);
  EXPECT_EQ(b.retries_in_flight(), 0);
}

TEST(ConcurrencyBudgetValidation, RejectsOutOfRangeSettingsNamingTheField) {
  const auto message = [](concurrency_budget_options o) {
    try {
      concurrency_budget b(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({.budget_percent = -1}),
              testing::HasSubstr("budget_percent must be in [0, 100], got -1"));
  EXPECT_THAT(message({.budget_percent = 100.5}), testing::HasSubstr("budget_percent"));
  EXPECT_THAT(message({.budget_percent = std::nan("")}), testing::HasSubstr("got nan"));
  EXPECT_THAT(message({.min_retry_concurrency = -3}),
              testing::HasSubstr("min_retry_concurrency must be in [0, 1000000], got -3"));
  EXPECT_EQ(message({.budget_percent = 0, .min_retry_concurrency = 0}), "no error");
  EXPECT_EQ(message({.budget_percent = 100, .min_retry_concurrency = 1'000'000}), "no error");
}
