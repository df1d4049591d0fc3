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

#include "stormguard/random.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::duration;
using stormguard::ratio_budget;
using stormguard::ratio_budget_options;
using stormguard::time_point;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr time_point t0{};

using stormguard::test_util::invalid_argument_message;

double seconds(duration d) { return std::chrono::duration<double>(d).count(); }

// The reserve in whole retries: min_retries_per_second · ttl.
std::int64_t reserve_of(const ratio_budget_options& o) {
  return static_cast<std::int64_t>(
      std::floor(static_cast<double>(o.min_retries_per_second) * seconds(o.ttl)));
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
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.ttl = 500ms}); }),
              AllOf(HasSubstr("ttl"), HasSubstr("500ms")));
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.ttl = 61s}); }),
              AllOf(HasSubstr("ttl"), HasSubstr("61s")));
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.ttl = -10s}); }),
              AllOf(HasSubstr("ttl"), HasSubstr("-10s")));
}

TEST(RatioBudgetValidation, RejectsBadMinRetriesPerSecond) {
  EXPECT_THAT(invalid_argument_message([] { ratio_budget b({.min_retries_per_second = -1}); }),
              AllOf(HasSubstr("min_retries_per_second"), HasSubstr("-1")));
  EXPECT_THAT(
      invalid_argument_message([] { ratio_budget b({.min_retries_per_second = 2'000'000}); }),
      AllOf(HasSubstr("min_retries_per_second"), HasSubstr("2000000")));
}

TEST(RatioBudgetValidation, AcceptsTheBoundaries) {
  EXPECT_NO_THROW(ratio_budget({.ratio = 0.0, .ttl = 1s, .min_retries_per_second = 0}));
  EXPECT_NO_THROW(ratio_budget({.ratio = 1000.0, .ttl = 60s, .min_retries_per_second = 1'000'000}));
  EXPECT_EQ(ratio_budget().options(), ratio_budget_options{});
}

// ---------------------------------------------------------------------------------------------
// The reserve (floor) and expiry.
// ---------------------------------------------------------------------------------------------

TEST(RatioBudget, ReserveGrantsExactlyFloorTimesTtlThenDenies) {
  for (const ratio_budget_options o :
       {ratio_budget_options{}, ratio_budget_options{.ttl = 1s, .min_retries_per_second = 3},
        ratio_budget_options{.ttl = 60s, .min_retries_per_second = 7},
        ratio_budget_options{.ttl = 2500ms, .min_retries_per_second = 2}}) {
    ratio_budget b(o);
    const time_point now = t0 + 1234ms;
    EXPECT_EQ(b.balance(now), reserve_of(o));
    EXPECT_EQ(drain(b, now), reserve_of(o)) << "ttl " << seconds(o.ttl);
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
  const ratio_budget_options o{.ratio = 0.1, .ttl = 10s, .min_retries_per_second = 10};
  const duration slice = o.ttl / ratio_budget::k_slices;
  // Spend the reserve at an instant in the middle of a slice, then watch it come back.
  for (const time_point spent_at : {t0 + 500ms, t0 + 3s, t0 + 3s + 999ms, t0 - 7250ms}) {
    ratio_budget b(o);
    ASSERT_EQ(drain(b, spent_at), reserve_of(o));
    // Still spent for a whole ttl: a retry counts against every window of ttl it falls in.
    EXPECT_EQ(b.balance(spent_at + o.ttl - 1ns), 0);
    EXPECT_FALSE(b.try_withdraw(spent_at + o.ttl - 1ns));
    // Back in full no later than one slice after that.
    EXPECT_EQ(b.balance(spent_at + o.ttl + slice), reserve_of(o));
    EXPECT_EQ(drain(b, spent_at + o.ttl + slice), reserve_of(o));
  }
}

TEST(RatioBudget, DepositsExpireToo) {
  ratio_budget b({.ratio = 1.0, .ttl = 1s, .min_retries_per_second = 0});
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

// For every window [w, w + ttl) (w stepping by `step` over the run), compares the retries granted
// in it with ratio × requests(in the window plus the slice before it) + floor × ttl.
bound_check check_bound(const ratio_budget_options& o, const greedy_run& run, duration step) {
  const duration slice = o.ttl / ratio_budget::k_slices;
  bound_check result;
  const time_point first = run.requests.front() - o.ttl;
  const time_point last = run.requests.back() + o.ttl;
  double steady_sum = 0;
  int steady_windows = 0;
  for (time_point w = first; w <= last; w += step) {
    const auto granted = static_cast<double>(count_in(run.grants, w, w + o.ttl));
    const double bound =
        o.ratio * static_cast<double>(count_in(run.requests, w - slice, w + o.ttl)) +
        static_cast<double>(o.min_retries_per_second) * seconds(o.ttl);
    result.worst_excess = std::max(result.worst_excess, granted - bound);
    if (bound > 0) result.closest = std::max(result.closest, granted / bound);
    // Steady state: a full slice of traffic before the window, and traffic to its end.
    if (w - slice >= run.requests.front() + o.ttl && w + o.ttl <= run.requests.back()) {
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
      {{.ratio = 0.2, .ttl = 4s, .min_retries_per_second = 30}, 1250ms, 20ms, 30s},
      // No floor, ratio 0.5, short window, starting before the epoch.
      {{.ratio = 0.5, .ttl = 1s, .min_retries_per_second = 0}, -2730ms, 1ms, 8s},
      // A ttl that ten slices do not divide evenly, ratio above 1.
      {{.ratio = 2.5, .ttl = 3s + 7ns, .min_retries_per_second = 1}, 777ms, 10ms, 20s},
  };
  for (const greedy_case& c : cases) {
    const greedy_run run = run_greedy(c.options, t0 + c.start, c.interval, c.length);
    ASSERT_FALSE(run.grants.empty());
    const bound_check check = check_bound(c.options, run, 10ms);
    SCOPED_TRACE("ratio " + std::to_string(c.options.ratio) + ", ttl " +
                 std::to_string(seconds(c.options.ttl)) + " s, floor " +
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
                       static_cast<double>(o.min_retries_per_second) * seconds(length + o.ttl);
  const auto granted = static_cast<double>(run.grants.size());
  EXPECT_LE(granted, upper);
  EXPECT_GE(granted, 0.85 * upper);
}

// ---------------------------------------------------------------------------------------------
// Invariants: balance never negative, try_withdraw agrees with balance.
// ---------------------------------------------------------------------------------------------

TEST(RatioBudget, BalanceNeverNegativeAndWithdrawAgreesWithIt) {
  ratio_budget b({.ratio = 0.3, .ttl = 2s, .min_retries_per_second = 1});
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

// ---------------------------------------------------------------------------------------------
// Time: before the epoch, out of order, extremes.
// ---------------------------------------------------------------------------------------------

TEST(RatioBudget, WorksAcrossTheEpoch) {
  ratio_budget b({.ratio = 1.0, .ttl = 1s, .min_retries_per_second = 0});
  b.deposit(t0 - 50ms);
  b.deposit(t0 - 50ms);
  EXPECT_EQ(b.balance(t0 + 20ms), 2);  // the slice boundary at 0 is not a reset
  EXPECT_TRUE(b.try_withdraw(t0 + 30ms));
  EXPECT_EQ(b.balance(t0 + 30ms), 1);
  EXPECT_EQ(b.balance(t0 + 5s), 0);
}

TEST(RatioBudget, OutOfOrderTimesCountInTheNewestSlice) {
  ratio_budget b({.ratio = 1.0, .ttl = 1s, .min_retries_per_second = 0});
  b.deposit(t0 + 20s);
  b.deposit(t0 + 5s);  // older than the newest seen: counted now, not lost
  EXPECT_EQ(b.balance(t0 + 20s), 2);
  EXPECT_TRUE(b.try_withdraw(t0 + 3s));
  EXPECT_EQ(b.balance(t0 + 20s), 1);
  EXPECT_EQ(b.balance(t0 - 1h), 1);  // a query from the past sees the current window
  EXPECT_EQ(b.balance(t0 + 25s), 0);
}

TEST(RatioBudget, ExtremeInstantsDoNotBreakIt) {
  ratio_budget b({.ratio = 1.0, .ttl = 1s, .min_retries_per_second = 2});
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
  const ratio_budget_options o{.ratio = 0.1, .ttl = 10s, .min_retries_per_second = 10};
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
  const ratio_budget_options o{.ratio = 0.1, .ttl = 1s, .min_retries_per_second = 5};
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
  // 8 s of 10 % of 80,000 requests plus at most one reserve per ttl (+1 for the partial window).
  const double upper = o.ratio * k_threads * k_iterations +
                       static_cast<double>(reserve_of(o)) * (8.0 / seconds(o.ttl) + 1);
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

}  // namespace
