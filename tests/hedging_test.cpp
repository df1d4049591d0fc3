// SPDX-License-Identifier: Apache-2.0
#include "stormguard/hedging.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "stormguard/random.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::duration;
using stormguard::hedge_plan;
using stormguard::hedge_stop;
using stormguard::hedging_options;
using stormguard::hedging_policy;
using stormguard::latency_tracker;
using stormguard::pushback;
using stormguard::random_generator;
using stormguard::time_point;

constexpr time_point t0{};
constexpr time_point no_deadline = time_point::max();

std::string error_of(const hedging_options& o) {
  try {
    hedging_policy p(o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(HedgingPolicy, BadOptionsNameTheField) {
  EXPECT_NE(
      error_of({.max_attempts = 6}).find("hedging.max_attempts must be in [2, 5] (gRFC A6), got 6"),
      std::string::npos);
  EXPECT_NE(error_of({.max_attempts = 1}).find("hedging.max_attempts"), std::string::npos);
  EXPECT_NE(error_of({.delay = -1ms}).find("hedging.delay must be in [0s, 1h], got -1ms"),
            std::string::npos)
      << error_of({.delay = -1ms});
  EXPECT_NE(error_of({.delay_quantile = 1.0}).find("hedging.delay_quantile"), std::string::npos);
  EXPECT_NE(error_of({.max_retry_after = 0s}).find("hedging.max_retry_after"), std::string::npos);
  EXPECT_EQ(error_of({}), "");
}

TEST(HedgingPolicy, NextCopyAfterTheDelayUpToMaxAttempts) {
  hedging_policy p({.max_attempts = 3, .delay = 20ms});
  EXPECT_EQ(p.plan_next(1, t0, t0, std::nullopt, no_deadline, p.delay()),
            (hedge_plan{true, t0 + 20ms, hedge_stop::none}));
  EXPECT_EQ(p.plan_next(2, t0 + 20ms, t0 + 20ms, std::nullopt, no_deadline, p.delay()),
            (hedge_plan{true, t0 + 40ms, hedge_stop::none}));
  EXPECT_EQ(p.plan_next(3, t0 + 40ms, t0 + 40ms, std::nullopt, no_deadline, p.delay()).reason,
            hedge_stop::max_attempts);
}

TEST(HedgingPolicy, ZeroDelaySendsEveryCopyAtOnce) {
  hedging_policy p({.max_attempts = 5, .delay = 0ms});
  for (int sent = 1; sent < 5; ++sent) {
    EXPECT_EQ(p.plan_next(sent, t0, t0, std::nullopt, no_deadline, p.delay()).at, t0);
  }
}

TEST(HedgingPolicy, ANonFatalAnswerSendsTheNextCopyAtOnce) {
  hedging_policy p({.max_attempts = 3, .delay = 50ms});
  EXPECT_EQ(p.plan_next(1, t0, t0 + 5ms, std::nullopt, no_deadline, p.delay(), true).at, t0 + 5ms);
}

TEST(HedgingPolicy, PushbackPostponesOrStops) {
  hedging_policy p({.max_attempts = 3, .delay = 20ms, .max_retry_after = 10s});
  // A 300 ms pushback at 5 ms: the next copy at 305 ms, not at 20 ms.
  EXPECT_EQ(p.plan_next(1, t0, t0 + 5ms, pushback{false, 300ms}, no_deadline, p.delay()).at,
            t0 + 305ms);
  // A pushback shorter than what is left of the delay changes nothing.
  EXPECT_EQ(p.plan_next(1, t0, t0 + 5ms, pushback{false, 1ms}, no_deadline, p.delay()).at,
            t0 + 20ms);
  EXPECT_EQ(p.plan_next(1, t0, t0, pushback{true, {}}, no_deadline, p.delay()).reason,
            hedge_stop::server_refused);
  EXPECT_EQ(p.plan_next(1, t0, t0, pushback{false, 11s}, no_deadline, p.delay()).reason,
            hedge_stop::retry_after_too_long);
}

TEST(HedgingPolicy, NoCopyAtOrPastTheDeadline) {
  hedging_policy p({.max_attempts = 3, .delay = 20ms});
  EXPECT_EQ(p.plan_next(1, t0, t0, std::nullopt, t0 + 20ms, p.delay()).reason,
            hedge_stop::deadline_exceeded);
  EXPECT_TRUE(p.plan_next(1, t0, t0, std::nullopt, t0 + 21ms, p.delay()).send);
  // Saturating: a last copy near the end of time does not wrap round to an early copy.
  EXPECT_EQ(p.plan_next(1, time_point::max() - 1ms, time_point::max() - 1ms, std::nullopt,
                        no_deadline, p.delay())
                .reason,
            hedge_stop::deadline_exceeded);
}

TEST(LatencyTracker, GivesNoQuantileBeforeEnoughLatencies) {
  latency_tracker t(0.95);
  for (std::size_t i = 0; i + 1 < latency_tracker::k_min_samples; ++i) t.record(10ms);
  EXPECT_EQ(t.quantile(), std::nullopt);
  t.record(10ms);
  EXPECT_EQ(t.quantile(), duration(10ms));
  EXPECT_THROW(latency_tracker(0.0), std::invalid_argument);
  EXPECT_THROW(latency_tracker(1.0), std::invalid_argument);
}

TEST(LatencyTracker, TracksTheQuantileOfRecentLatencies) {
  latency_tracker t(0.95);
  random_generator g(5);
  // Uniform latencies in [0, 100] ms: the p95 is 95 ms (±2 ms with 1,024 samples).
  for (int i = 0; i < 4096; ++i) t.record(stormguard::uniform_duration(g, duration(100ms)));
  ASSERT_TRUE(t.quantile().has_value());
  const double p95_ms = std::chrono::duration<double, std::milli>(*t.quantile()).count();
  EXPECT_NEAR(p95_ms, 95.0, 2.5);
  // The latencies change: the window forgets the old ones.
  for (std::size_t i = 0; i < latency_tracker::k_window; ++i) t.record(5ms);
  EXPECT_EQ(t.quantile(), duration(5ms));
  hedging_policy adaptive({.delay = 20ms, .delay_quantile = 0.95});
  EXPECT_EQ(adaptive.delay(&t), duration(5ms));
  EXPECT_EQ(adaptive.delay(nullptr), duration(20ms));
  hedging_policy fixed({.delay = 20ms});
  EXPECT_EQ(fixed.delay(&t), duration(20ms));
}

}  // namespace
