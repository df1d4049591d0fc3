// SPDX-License-Identifier: Apache-2.0
// Hedged requests in the storm simulator (stormguard_engine/hedging.hpp): the tail-at-scale
// scenario, the storm an unbudgeted hedge starts, and the budget that refuses copies without
// cancelling those in flight.
#include <gtest/gtest.h>

#include <string>

#include "stormguard/config/policy.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"
#include "support/policy_text.hpp"

namespace {

namespace sim = stormguard::sim;
namespace config = stormguard::config;

sim::scenario tail_at_scale() {
  auto s = sim::builtin_scenario("tail-at-scale");
  EXPECT_TRUE(s);
  return *s;
}

sim::strategy builtin(const char* name) {
  const sim::strategy* s = sim::find_strategy(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

sim::strategy hedging_policy(const std::string& hedging) {
  return sim::from_policy(stormguard::test_support::value_of(
      config::parse_policies(R"({"policies": [{"name": "h", "hedging": )" + hedging + "}]}"))[0]);
}

// Every copy is accounted for once.
void expect_balanced(const sim::strategy_result& r) {
  EXPECT_EQ(r.attempts,
            r.successes + r.failures + r.timeouts + r.in_flight_attempts + r.hedges_cancelled)
      << r.name;
  EXPECT_EQ(r.logical_requests, r.successes + r.attempts_exhausted + r.budget_exhausted +
                                    r.throttled + r.requests_in_flight)
      << r.name;
  EXPECT_EQ(r.attempts - r.logical_requests + r.throttled, r.hedges_sent) << r.name;
}

TEST(TailAtScale, TheScenarioStallsOnePercentOfAttempts) {
  const sim::scenario s = tail_at_scale();
  ASSERT_TRUE(s.stall);
  EXPECT_EQ(s.stall->probability, 0.01);
  EXPECT_EQ(s.stall->length, std::chrono::seconds(1));
  const auto none = sim::simulate(s, builtin("none"));
  // 1 % of requests take 10 ms + 1 s: p99.9 is a stall, p99 is not quite.
  ASSERT_TRUE(none.p999_latency_ms);
  EXPECT_NEAR(*none.p999_latency_ms, 1010.0, 1.0);
  EXPECT_EQ(none.hedges_sent, 0);
  const auto again = sim::parse_scenario(sim::to_json(s));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, s);
}

TEST(TailAtScale, HedgingCutsTheP999TenfoldForAFewPercentMoreAttempts) {
  const sim::scenario s = tail_at_scale();
  const auto none = sim::simulate(s, builtin("none"));
  const auto hedged = sim::simulate(s, builtin("hedged"));
  ASSERT_TRUE(hedged.p999_latency_ms);
  EXPECT_LE(*hedged.p999_latency_ms, 0.1 * *none.p999_latency_ms);
  EXPECT_LE(static_cast<double>(hedged.attempts), 1.05 * static_cast<double>(none.attempts));
  EXPECT_GT(hedged.hedges_sent, 0);
  EXPECT_GT(hedged.hedges_won, 0);
  EXPECT_LE(hedged.hedges_won, hedged.hedges_sent);
  // The losers were cancelled by the client but served by the server to the end.
  EXPECT_GT(hedged.hedges_cancelled, 0);
  EXPECT_GT(hedged.wasted_work, 0);
  expect_balanced(none);
  expect_balanced(hedged);
}

TEST(TailAtScale, RunsAreDeterministic) {
  const sim::scenario s = tail_at_scale();
  const auto a = sim::simulate(s, builtin("hedged"));
  const auto b = sim::simulate(s, builtin("hedged"));
  EXPECT_EQ(a.attempts, b.attempts);
  EXPECT_EQ(a.hedges_won, b.hedges_won);
  EXPECT_EQ(a.p999_latency_ms, b.p999_latency_ms);
}

TEST(HedgingBudget, ASpentBudgetRefusesCopiesButNeverCancelsOneInFlight) {
  // A ratio budget with no deposits and no floor: every copy after the first is refused.
  const auto r =
      sim::simulate(tail_at_scale(), hedging_policy(R"({"max_attempts": 3, "delay": "20ms",
                         "budget": {"kind": "ratio", "ratio": 0, "min_retries_per_second": 0}})"));
  EXPECT_EQ(r.hedges_sent, 0);
  EXPECT_GT(r.hedges_refused, 0);
  EXPECT_EQ(r.hedges_cancelled, 0);
  // Every first copy ran to its answer: the stalled ones too (they succeed after 1 s).
  EXPECT_EQ(r.successes + r.requests_in_flight, r.logical_requests);
  EXPECT_NEAR(*r.p999_latency_ms, 1010.0, 1.0);
  expect_balanced(r);
}

TEST(HedgingStorm, TheBudgetHoldsFridayNightAndNoBudgetShowsTheStorm) {
  const sim::scenario s = sim::friday_night();
  const auto hedged = sim::simulate(s, builtin("hedged"));
  const auto unbudgeted = sim::simulate(s, builtin("hedged-unbudgeted"));
  ASSERT_TRUE(hedged.incident_amplification);
  ASSERT_TRUE(unbudgeted.incident_amplification);
  EXPECT_LE(*hedged.incident_amplification, 1.25);
  EXPECT_GT(hedged.hedges_refused, 0);
  EXPECT_GE(*unbudgeted.incident_amplification, 1.5);
  EXPECT_FALSE(unbudgeted.recovery_s);  // the storm outlives the incident
  EXPECT_TRUE(hedged.recovery_s);
  EXPECT_EQ(unbudgeted.hedges_refused, 0);
  expect_balanced(hedged);
  expect_balanced(unbudgeted);
}

TEST(HedgingDelay, ZeroSendsEveryCopyAtOnce) {
  const auto r =
      sim::simulate(tail_at_scale(), hedging_policy(R"({"max_attempts": 3, "delay": "0s"})"));
  EXPECT_EQ(r.attempts, 3 * r.logical_requests);
  expect_balanced(r);
}

TEST(HedgingDelay, APercentileDelayAdaptsToTheLatencies) {
  // p50 of the latencies is the 10-ms service time: copies go after 10 ms, most lose.
  const auto r =
      sim::simulate(tail_at_scale(), hedging_policy(R"({"delay": "p50", "fallback_delay": "1s"})"));
  EXPECT_GT(r.hedges_sent, r.logical_requests / 200);
  EXPECT_LT(*r.p999_latency_ms, 100.0);
  expect_balanced(r);
}

TEST(HedgingNonFatal, ANonFatal503SendsTheNextCopyAtOnce) {
  sim::scenario s = tail_at_scale();
  s.stall.reset();
  s.incident =
      sim::incident{std::chrono::seconds(0), std::chrono::seconds(60), std::nullopt, 0.5, 0.0};
  const auto fatal = sim::simulate(s, hedging_policy(R"({"max_attempts": 3, "delay": "1s"})"));
  const auto non_fatal = sim::simulate(
      s, hedging_policy(R"({"max_attempts": 3, "delay": "1s", "non_fatal_statuses": [503]})"));
  // Fatal: a 503 ends the request (about half fail); non-fatal: up to 3 copies at once.
  EXPECT_NEAR(*fatal.success_ratio, 0.5, 0.02);
  EXPECT_NEAR(*non_fatal.success_ratio, 1.0 - 0.125, 0.02);
  EXPECT_GT(non_fatal.hedges_sent, 0);
  expect_balanced(fatal);
  expect_balanced(non_fatal);
}

}  // namespace
