// SPDX-License-Identifier: Apache-2.0
// Tests of the computation behind `stormguard plan` (cli/plan_stats.hpp, header-only).
#include "../cli/plan_stats.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace {

using namespace std::chrono_literals;
using stormguard::backoff;
using stormguard::backoff_options;
using stormguard::duration;
using stormguard::jitter;
namespace cli = stormguard::cli;

TEST(Summarize, NearestRankPercentilesMinMaxMean) {
  std::vector<duration> values;
  for (int i = 100; i >= 1; --i) values.push_back(duration(i));  // 1..100 ns, reversed
  const cli::delay_summary s = cli::summarize(values);
  EXPECT_EQ(s.min, duration(1));
  EXPECT_EQ(s.max, duration(100));
  EXPECT_EQ(s.p50, duration(50));
  EXPECT_EQ(s.p99, duration(99));
  EXPECT_DOUBLE_EQ(s.mean_ns, 50.5);
}

TEST(Summarize, OneSampleIsEveryStatistic) {
  std::vector<duration> values{7ms};
  const cli::delay_summary s = cli::summarize(values);
  EXPECT_EQ(s.min, 7ms);
  EXPECT_EQ(s.p50, 7ms);
  EXPECT_EQ(s.p99, 7ms);
  EXPECT_EQ(s.max, 7ms);
  EXPECT_DOUBLE_EQ(s.mean_ns, 7e6);
}

TEST(Summarize, MeanDoesNotOverflowAtTheMaximum) {
  std::vector<duration> values(4, duration::max());
  EXPECT_DOUBLE_EQ(cli::summarize(values).mean_ns, static_cast<double>(duration::max().count()));
  std::vector<duration> empty;
  EXPECT_THROW((void)cli::summarize(empty), std::invalid_argument);
}

TEST(MakePlan, NoJitterIsExactlyTheCeilings) {
  const backoff b(backoff_options{.jitter = jitter::none});
  const auto rows = cli::make_plan(b, 7, 3, 1);
  const std::vector<duration> expected{100ms, 200ms, 400ms, 800ms, 1600ms, 3s, 3s};
  duration total{};
  ASSERT_EQ(rows.size(), expected.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    total += expected[i];
    EXPECT_EQ(rows[i].retry, static_cast<int>(i) + 1);
    EXPECT_EQ(rows[i].ceiling, expected[i]);
    EXPECT_EQ(rows[i].lowest, expected[i]);
    EXPECT_EQ(rows[i].sampled.min, expected[i]);
    EXPECT_EQ(rows[i].sampled.max, expected[i]);
    EXPECT_EQ(rows[i].cumulative_max, total);
    EXPECT_DOUBLE_EQ(rows[i].cumulative_mean_ns, static_cast<double>(total.count()));
  }
}

TEST(MakePlan, SampledDelaysNeverLeaveTheExactRange) {
  for (const jitter j : {jitter::none, jitter::equal, jitter::full, jitter::decorrelated}) {
    const backoff b(backoff_options{.base = 10ms, .cap = 1s, .multiplier = 1.5, .jitter = j});
    for (const cli::plan_row& r : cli::make_plan(b, 20, 2000, 42)) {
      EXPECT_LE(r.lowest, r.sampled.min) << to_string(j) << " retry " << r.retry;
      EXPECT_LE(r.sampled.min, r.sampled.p50);
      EXPECT_LE(r.sampled.p50, r.sampled.p99);
      EXPECT_LE(r.sampled.p99, r.sampled.max);
      EXPECT_LE(r.sampled.max, r.ceiling) << to_string(j) << " retry " << r.retry;
      EXPECT_LE(r.ceiling, 1s);
    }
  }
}

TEST(MakePlan, FullJitterMeanIsHalfTheCeiling) {
  const auto rows = cli::make_plan(backoff{}, 5, 200'000, 7);
  for (const cli::plan_row& r : rows) {
    const double half = static_cast<double>(r.ceiling.count()) / 2;
    // U(0, c) has sd c/sqrt(12): 0.5% of c/2 is about 4 sd of the mean of 200,000 draws (and
    // the seed is fixed, so the test is deterministic).
    EXPECT_NEAR(r.sampled.mean_ns, half, half * 0.005) << "retry " << r.retry;
  }
}

TEST(MakePlan, DecorrelatedBoundsGrowByThreeUpToTheCap) {
  const backoff b(backoff_options{.base = 100ms, .cap = 3s, .jitter = jitter::decorrelated});
  const auto bounds = cli::delay_bounds(b, 5);
  const std::vector<duration> highs{300ms, 900ms, 2700ms, 3s, 3s};
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    EXPECT_EQ(bounds[i].first, 100ms);
    EXPECT_EQ(bounds[i].second, highs[i]);
  }
}

TEST(MakePlan, WorstTotalSaturatesAtTheMaximum) {
  const backoff b(backoff_options{.base = 1h, .cap = duration::max(), .jitter = jitter::none});
  const auto rows = cli::make_plan(b, 80, 1, 1);
  EXPECT_EQ(rows.back().ceiling, duration::max());
  EXPECT_EQ(rows.back().cumulative_max, duration::max());
  EXPECT_TRUE(rows.back().saturated);
  EXPECT_FALSE(rows.front().saturated);
}

// Found by trying the tool: the worst total saturated at ~292 years while the mean total went
// on growing past it, so the "guarantee" printed below the mean.
TEST(MakePlan, MeanTotalNeverExceedsTheSaturatedWorstTotal) {
  const backoff b(backoff_options{.base = 2'000'000h, .cap = 2'500'000h, .jitter = jitter::none});
  const auto rows = cli::make_plan(b, 3, 1, 1);
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_FALSE(rows[0].saturated);
  for (const auto& row : rows) {
    EXPECT_LE(row.cumulative_mean_ns, static_cast<double>(row.cumulative_max.count()))
        << "retry " << row.retry;
  }
  EXPECT_TRUE(rows[1].saturated);
  EXPECT_TRUE(rows[2].saturated);
  EXPECT_EQ(rows[2].cumulative_max, duration::max());
}

TEST(MakePlan, SameSeedSamePlan) {
  const backoff b(backoff_options{.jitter = jitter::decorrelated});
  const auto a = cli::make_plan(b, 6, 1000, 99);
  const auto c = cli::make_plan(b, 6, 1000, 99);
  ASSERT_EQ(a.size(), c.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].sampled.p50, c[i].sampled.p50);
    EXPECT_EQ(a[i].sampled.mean_ns, c[i].sampled.mean_ns);
  }
  EXPECT_TRUE(cli::make_plan(b, 0, 10, 1).empty());
}

}  // namespace
