// SPDX-License-Identifier: Apache-2.0
// The rules of `stormguard tune` (app/tune.hpp): what follows from a service's description before
// any simulation, and the scenarios it builds.
#include "app/tune.hpp"

#include <gtest/gtest.h>

#include <utility>
#include <variant>
#include <vector>

#include "app/tune_internal.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::sim::service_description;

TEST(TuneRules, RetriesAndBackoffFitTheDeadline) {
  service_description d;  // p50 = p99 = 20 ms, deadline 10 s
  for (const stormguard::duration deadline : {300ms, 1000ms, 2000ms, 10000ms}) {
    d.deadline = deadline;
    for (const auto timeout : stormguard::sim::timeout_candidates(d)) {
      const auto r = stormguard::sim::rules_for(d, timeout);
      const auto worst = stormguard::sim::tune_detail::worst_schedule(timeout, r.base, r.retries);
      EXPECT_LE(worst.total, deadline) << stormguard::format_duration(deadline);
      EXPECT_LE(r.retries, 3);
      EXPECT_GE(r.cap, r.base);
      EXPECT_LE(timeout, deadline / 2);
    }
  }
}

TEST(TuneRules, TimeoutNeverCutsAHealthyAttempt) {
  service_description d;
  d.p50 = 20ms;
  d.p99 = 300ms;
  const auto timeouts = stormguard::sim::timeout_candidates(d);
  ASSERT_FALSE(timeouts.empty());
  EXPECT_EQ(timeouts.front(), 600ms);  // max(2 x p99, 10 x p50)
  for (const auto t : timeouts) EXPECT_GT(t, d.p99);
}

TEST(TuneRules, WindowHoldsTheLongestScheduleAndIsAtLeastTenSeconds) {
  service_description d;
  d.deadline = 10s;
  const auto r = stormguard::sim::rules_for(d, 1s);
  EXPECT_GE(r.window, 10s);
  EXPECT_LE(r.window, 60s);
  d.deadline = 50min;
  const auto wide = stormguard::sim::rules_for(d, 10min);
  EXPECT_EQ(wide.window, 60s);  // the budget's range ends at 60 s
}

TEST(TuneRules, FleetFloorsAreSharesOfTheIncidentCapacity) {
  const auto storm = stormguard::sim::service_scenario(service_description{});
  EXPECT_NEAR(stormguard::sim::incident_capacity(storm), 100 / 1.5, 1e-9);
  const auto fleet = stormguard::sim::tune_detail::floor_candidates(storm, true);
  EXPECT_EQ(fleet, (std::vector<std::int64_t>{7, 17, 33}));
  const auto per_process = stormguard::sim::tune_detail::floor_candidates(storm, false);
  EXPECT_EQ(per_process, (std::vector<std::int64_t>{0, 1, 10}));
}

TEST(TuneScenario, DescriptionOfFridayNightIsFridayNight) {
  auto s = stormguard::sim::service_scenario(service_description{});
  const auto friday = stormguard::sim::friday_night();
  EXPECT_EQ(s.requests_per_second, friday.requests_per_second);
  EXPECT_EQ(s.clients, friday.clients);
  EXPECT_EQ(s.workers, friday.workers);
  EXPECT_EQ(s.queue_limit, friday.queue_limit);
  EXPECT_EQ(s.service_time, friday.service_time);
  EXPECT_EQ(s.incident, friday.incident);
  EXPECT_EQ(s.length, friday.length);
  EXPECT_EQ(s.timeout, friday.timeout);
  EXPECT_FALSE(stormguard::sim::validate(s).has_value());
}

TEST(TuneScenario, ATailIsAStallOfTwoPercent) {
  service_description d;
  d.p99 = 200ms;
  const auto s = stormguard::sim::service_scenario(d);
  ASSERT_TRUE(s.stall.has_value());
  EXPECT_EQ(s.stall->length, 180ms);
  EXPECT_DOUBLE_EQ(s.stall->probability, 0.02);
  EXPECT_EQ(stormguard::sim::description_of(s, 10s, 0.01).p99, 200ms);
}

TEST(TuneScenario, BadDescriptionsNameTheField) {
  const auto problem = [](auto edit) {
    service_description d;
    edit(d);
    return stormguard::sim::check_description(d).value_or("");
  };
  EXPECT_EQ(problem([](auto& d) { d.requests_per_second = -5; }).rfind("rate:", 0), 0u);
  EXPECT_EQ(problem([](auto& d) { d.clients = 0; }).rfind("clients:", 0), 0u);
  EXPECT_EQ(problem([](auto& d) { d.workers = 0; }).rfind("workers:", 0), 0u);
  EXPECT_EQ(problem([](auto& d) { d.p99 = 1ms; }).rfind("p99:", 0), 0u);
  EXPECT_EQ(problem([](auto& d) { d.deadline = 10ms; }).rfind("deadline:", 0), 0u);
  EXPECT_EQ(problem([](auto& d) { d.error_rate = 0.9; }).rfind("error-rate:", 0), 0u);
  EXPECT_EQ(problem([](auto&) {}), "");
  EXPECT_FALSE(stormguard::sim::workers_for(0.0, 20ms).has_value());
  EXPECT_EQ(stormguard::sim::workers_for(5000, 20ms), 100);
}

TEST(TuneScenario, DemandAboveCapacityIsInfeasible) {
  service_description d;
  d.requests_per_second = 6000;  // 100 workers x 20 ms = 5,000 req/s
  const auto why = stormguard::sim::infeasible(stormguard::sim::service_scenario(d), d);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("above the server's healthy capacity"), std::string::npos) << *why;
  // A capacity below 1 req/s is printed as it is, not rounded down to 0.
  d.requests_per_second = 2000;
  d.p50 = d.p99 = 12min;
  d.deadline = 1h;
  const auto slow = stormguard::sim::infeasible(stormguard::sim::service_scenario(d), d);
  ASSERT_TRUE(slow.has_value());
  EXPECT_NE(slow->find("= 0.139 req/s"), std::string::npos) << *slow;
}

TEST(TuneScenario, DerivedLimitsNameTheFieldGiven) {
  const auto problem = [](auto edit) {
    service_description d;
    edit(d);
    return stormguard::sim::check_description(d).value_or("");
  };
  // The rules' backoff base, max(5 x p50, 2 x p99), is held by a policy up to 1 h.
  EXPECT_EQ(problem([](auto& d) { d.p99 = 1h; }).rfind("p99: must be at most 30m", 0), 0u);
  EXPECT_EQ(problem([](auto& d) {
              d.p50 = d.p99 = 13min;
              d.deadline = 1h;
            }).rfind("p50: must be at most 12m", 0),
            0u);
  EXPECT_EQ(problem([](auto& d) { d.requests_per_second = 0.001; }).rfind("rate:", 0), 0u);
}

TEST(TuneRules, FleetFloorsStayWithinTheBudgetsLimit) {
  service_description d;
  d.workers = 1'000'000;
  d.p50 = d.p99 = 5ms;  // 200,000,000 req/s; 2,666,667 req/s in the incident
  const auto storm = stormguard::sim::service_scenario(d);
  for (const auto floor : stormguard::sim::tune_detail::floor_candidates(storm, true)) {
    EXPECT_LE(floor, stormguard::sim::tune_detail::k_max_floor);
  }
}

// No retry fits a deadline of 100 ms after an attempt of 40 ms and a backoff of 100 ms: the
// policy has no budget, and the reasons say why without a ratio, a floor or a window.
TEST(TuneRules, WithoutRetriesThereIsNothingToBudget) {
  service_description d;
  d.deadline = 100ms;
  const auto timeouts = stormguard::sim::timeout_candidates(d);
  ASSERT_EQ(timeouts, std::vector<stormguard::duration>{40ms});
  const auto r = stormguard::sim::rules_for(d, 40ms);
  EXPECT_EQ(r.retries, 0);
  EXPECT_NE(r.reasons.front().reason.find("40ms is shorter than the rule's"), std::string::npos)
      << r.reasons.front().reason;
  stormguard::sim::tune_detail::candidate c{false, 0.1, 0, r.window, 0, r.base, r.cap, 40ms, 0, {}};
  const auto policy = stormguard::sim::tune_detail::make_policy("tuned", d, c);
  EXPECT_TRUE(std::holds_alternative<stormguard::no_budget>(policy.budget));
  const auto storm = stormguard::sim::service_scenario(d);
  for (const auto& reason : stormguard::sim::tune_detail::explain(d, storm, c)) {
    EXPECT_NE(reason.field, "budget.window");
    EXPECT_EQ(reason.reason.find("ratio"), std::string::npos) << reason.reason;
  }
}

// The base is max(5 x p50, 2 x p99) rounded up to a whole 10 ms: for a p50 of 1 ms, 10 ms, and
// the reason says the rounding (it said "max(5 x p50, 2 x p99) = 10ms").
TEST(TuneRules, TheBaseIsRoundedUpToTenMillisecondsAndTheReasonSaysSo) {
  service_description d;
  d.p50 = d.p99 = 1ms;
  EXPECT_EQ(stormguard::sim::tune_detail::base_rule(d), 10ms);
  const auto r = stormguard::sim::rules_for(d, 10ms);
  stormguard::sim::tune_detail::candidate c{false, 0.1, 0, r.window, 2, r.base, r.cap, 10ms, 0, {}};
  const auto storm = stormguard::sim::service_scenario(d);
  bool found = false;
  for (const auto& reason : stormguard::sim::tune_detail::explain(d, storm, c)) {
    if (reason.field != "backoff") continue;
    found = true;
    EXPECT_NE(reason.reason.find("rounded up to a whole 10 ms = 10ms"), std::string::npos)
        << reason.reason;
  }
  EXPECT_TRUE(found);
}

// The policy file carries the gRPC codes that `--export grpc` writes for it.
TEST(TuneRules, APolicyNamesItsGrpcCodes) {
  service_description d;
  const auto r = stormguard::sim::rules_for(d, 1s);
  stormguard::sim::tune_detail::candidate c{false, 0.1, 0, r.window, 2, r.base, r.cap, 1s, 0, {}};
  const auto retrying = stormguard::sim::tune_detail::make_policy("tuned", d, c);
  EXPECT_EQ(retrying.retryable_grpc_codes, stormguard::config::default_retryable_grpc_codes());
  c.hedge_attempts = 2;
  c.hedge_delay = 40ms;
  const auto hedged = stormguard::sim::tune_detail::make_policy("tuned", d, c);
  ASSERT_TRUE(hedged.hedging.has_value());
  EXPECT_FALSE(hedged.retryable_grpc_codes.has_value());
  EXPECT_EQ(hedged.hedging->non_fatal_grpc_codes,
            stormguard::config::default_retryable_grpc_codes());
}

// The progress moves as each simulation ends, not once per batch of candidates: a batch of a large
// fleet takes minutes.
TEST(TuneSearch, ProgressIsToldAsEachSimulationEnds) {
  service_description d;
  d.requests_per_second = 200;
  d.clients = 4;
  d.workers = 10;
  std::vector<std::pair<std::size_t, std::size_t>> told;
  stormguard::sim::tune_options options;
  options.max_candidates = 8;
  options.progress = [&told](std::size_t done, std::size_t total) {
    told.emplace_back(done, total);
  };
  const auto report = stormguard::sim::tune(stormguard::sim::service_scenario(d), d, {}, options);
  ASSERT_FALSE(told.empty());
  EXPECT_GE(told.size(), report.runs);
  EXPECT_LE(told.front().first, 1u);
  for (std::size_t i = 1; i < told.size(); ++i) {
    EXPECT_GE(told[i].first, told[i - 1].first);
    EXPECT_LE(told[i].first, told[i].second);
  }
  EXPECT_EQ(told.back().first, told.back().second);
}

TEST(TuneGoal, TheVerdictNamesEachMissedGoal) {
  stormguard::sim::tune_goal goal;
  goal.min_success = 0.8;
  goal.max_recovery_s = 5;
  stormguard::sim::tune_figures storm;
  storm.incident_amplification = 1.5;
  storm.success = 0.7;
  stormguard::sim::tune_figures healthy;
  healthy.success = 0.99;
  healthy.steady_success = 0.99;
  int missed = 0;
  const auto v = stormguard::sim::tune_detail::judge(goal, storm, healthy, &missed);
  EXPECT_FALSE(v.met);
  EXPECT_EQ(missed, 4);
  EXPECT_NE(v.reason.find("incident amplification 1.50x"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("never recovered"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("healthy day 99.00 %"), std::string::npos) << v.reason;
}

}  // namespace
