// SPDX-License-Identifier: Apache-2.0
// The fleet budget in the simulator: the library's fleet_budget on virtual time with the store
// model, on the Friday-night incident spread over 2,000 and 20,000 clients.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"

namespace {

using namespace std::chrono_literals;
namespace sim = stormguard::sim;

sim::scenario fleet_night(int clients) {
  auto s = sim::builtin_scenario("friday-night-fleet");
  EXPECT_TRUE(s.has_value());
  s->clients = clients;
  return *s;
}

sim::strategy_result run(const sim::scenario& s, const char* name,
                         std::optional<sim::fleet_store_outage> outage = std::nullopt) {
  sim::strategy strat = *sim::find_strategy(name);
  strat.fleet_store.outage = outage;
  return sim::simulate(s, strat);
}

TEST(SimFleet, TheBuiltInScenarioIsFridayNightFrom2000Clients) {
  sim::scenario s = fleet_night(2000);
  EXPECT_EQ(s.clients, 2000);
  sim::scenario friday = sim::friday_night();
  friday.name = s.name;
  friday.description = s.description;
  friday.clients = s.clients;
  EXPECT_EQ(friday, s);
}

TEST(SimFleet, OneBudgetForTheFleetHoldsTheStormWherePerClientBudgetsDoNot) {
  const sim::scenario s = fleet_night(2000);
  const auto none = run(s, "none");
  const auto budget = run(s, "full+budget");
  const auto fleet = run(s, "full+fleet");
  // Per-client budgets at 2,000 clients of 1 req/s: the storm (3.43x, never recovers).
  EXPECT_GT(*budget.amplification, 3.0);
  EXPECT_FALSE(budget.recovery_s.has_value());
  // One budget for the fleet: measured 1.04x overall, 1.12x during the incident, 7 s.
  EXPECT_LE(*fleet.amplification, 1.10);
  EXPECT_LE(*fleet.incident_amplification, 1.20);
  ASSERT_TRUE(fleet.recovery_s && none.recovery_s);
  EXPECT_LE(*fleet.recovery_s, *none.recovery_s + 1.0);
}

// Hedges are extra load like retries: `hedged` charges each copy to a ratio budget per client,
// whose floors (10/s each) add up at 2,000 clients of 1 req/s, so nearly every request is copied
// during the incident (measured 1.43x overall, 1.52x during the incident). `hedged+fleet` charges
// them to one budget for the whole fleet and holds the incident under the 1.15x target (as
// full+fleet does).
TEST(SimFleet, HedgesChargedToTheFleetBudgetHoldTheIncidentWhereAPerClientBudgetDoesNot) {
  const sim::scenario s = fleet_night(2000);
  const auto none = run(s, "none");
  const auto per_client = run(s, "hedged");
  const auto fleet = run(s, "hedged+fleet");
  // The per-client budget misses the target: this test fails for `hedged`.
  EXPECT_GT(*per_client.incident_amplification, 1.15);
  EXPECT_GT(*per_client.amplification, 1.20);
  // The fleet's budget: measured 1.04x overall, 1.11x during the incident, recovery as none's.
  EXPECT_LE(*fleet.incident_amplification, 1.15);
  EXPECT_LE(*fleet.amplification, 1.10);
  ASSERT_TRUE(fleet.recovery_s && none.recovery_s);
  EXPECT_LE(*fleet.recovery_s, *none.recovery_s + 1.0);
  // It still hedges (copies sent, and the budget refused others): not a strategy of no copies.
  EXPECT_GT(fleet.hedges_sent, 0);
  EXPECT_GT(fleet.hedges_refused, 0);
  EXPECT_EQ(fleet.attempts - fleet.logical_requests, fleet.hedges_sent);
}

TEST(SimFleet, TwentyThousandClientsOfATenthOfARequestPerSecondHoldToo) {
  const sim::scenario s = fleet_night(20000);
  const auto fleet = run(s, "full+fleet");
  // Shares of about 0.1 retry per client, never rounded up: measured 1.03x, 1.12x.
  EXPECT_LE(*fleet.amplification, 1.10);
  EXPECT_LE(*fleet.incident_amplification, 1.20);
  EXPECT_TRUE(fleet.recovery_s.has_value());
}

// Claims that follow need in the simulator: 20,000 clients of 0.1 req/s on a healthy day with
// 1 % of attempts failing. With shares a failure mostly lands on a client holding a tenth of a
// retry; with asks the store hands it a whole one from the pool (measured over the whole run,
// the first syncs included: 99.15 % against 99.80 %; no retries: 98.97 %). The asks are store
// round trips (store_syncs) and delay their retries by one round trip.
TEST(SimFleet, ClaimsThatFollowNeedRetryTheRareFailuresOfTwentyThousandClients) {
  sim::scenario s = fleet_night(20000);
  s.incident = sim::incident{.start = 0s, .end = 61s, .service_time = {}, .error_rate = 0.01};
  sim::strategy shares = *sim::find_strategy("full+fleet");
  auto& o = std::get<stormguard::fleet_budget_options>(shares.budget);
  o.ratio.ratio = 0.125;
  o.ratio.min_retries_per_second = 1;
  sim::strategy asks = shares;
  asks.name = "full+fleet+asks";
  std::get<stormguard::fleet_budget_options>(asks.budget).ask_for_credit = true;
  const auto with_shares = sim::simulate(s, shares);
  const auto with_asks = sim::simulate(s, asks);
  EXPECT_LT(with_shares.success_ratio.value_or(1.0), 0.993);
  EXPECT_GT(with_asks.success_ratio.value_or(0.0), 0.997);
  EXPECT_GT(with_asks.store_syncs, with_shares.store_syncs);
  // Never more than the budget allows: a healthy day's 1 % and their retries.
  EXPECT_LE(*with_asks.amplification, 1.02);
}

// Every attempt failing for the whole run at 20,000 clients of 0.1 req/s: a fleet whose claims
// follow need grants about what one budget shared by the fleet would. The model runs the
// background syncers of such budgets on time; when it replayed them lazily (a client reported a
// retry only at its next request, 10 s later), the pool handed the same allowance out again and
// the fleet granted 14 % more (8.7 % with this test's policy: 5,023 against 4,623). With the
// syncers on time, docs/budgets.md measures 4,784 against 4,622 for the policy tune recommends.
TEST(SimFleet, ClaimsThatFollowNeedGrantAboutWhatOneSharedBudgetWould) {
  sim::scenario s = fleet_night(20000);
  s.incident = sim::incident{.start = 0s, .end = 61s, .service_time = {}, .error_rate = 1.0};
  sim::strategy asks = *sim::find_strategy("full+fleet");
  asks.retry.max_retries = 1;
  auto& o = std::get<stormguard::fleet_budget_options>(asks.budget);
  o.ratio.ratio = 0.038;
  o.ratio.min_retries_per_second = 1;
  o.ask_for_credit = true;
  sim::strategy shared = asks;
  shared.budget = o.ratio;  // one ratio budget, for the one client below
  sim::scenario one = s;
  one.clients = 1;
  const auto fleet = sim::simulate(s, asks);
  const auto single = sim::simulate(one, shared);
  const auto retries = [](const sim::strategy_result& r) {
    return static_cast<double>(r.attempts - r.logical_requests);
  };
  EXPECT_GT(retries(single), 4000.0);
  EXPECT_LE(retries(fleet), 1.06 * retries(single)) << retries(fleet) << " vs " << retries(single);
  EXPECT_GE(retries(fleet), 0.9 * retries(single)) << retries(fleet) << " vs " << retries(single);
}

TEST(SimFleet, WithinAFewPercentOfOneSharedBudget) {
  const auto shared = run(fleet_night(1), "full+budget");
  const auto fleet = run(fleet_night(2000), "full+fleet");
  EXPECT_LE(*fleet.amplification, *shared.amplification * 1.05);
  EXPECT_LE(*fleet.incident_amplification, *shared.incident_amplification * 1.08);
}

TEST(SimFleet, AStoreOutageDuringTheIncidentFallsBackToTheLocalRatio) {
  // The store is away from 5 s to 25 s, the whole incident: every client falls back to a local
  // ratio budget with floor 10/s / 2,000 clients. Its bound: 10 % of each client's own window
  // plus its part of the floor, so about the fleet's ratio again — never 2,000 floors.
  const sim::scenario s = fleet_night(2000);
  const auto out = run(s, "full+fleet", sim::fleet_store_outage{5s, 25s});
  EXPECT_LE(*out.amplification, 1.15);
  EXPECT_LE(*out.incident_amplification, 1.30);
  EXPECT_TRUE(out.recovery_s.has_value());
}

// The store serves its capacity and no more: at a quarter of what the fleet asks of it (its busiest
// second without a limit), no second of store time serves more than the capacity, syncs queue
// past the syncer's 100 ms timeout (the store saturated), and the budgets, falling back to local
// counts, still hold the storm as in an outage.
// full+fleet on friday-night-fleet at 2,000 clients with a store without a limit, and a capacity
// of a quarter of that store's busiest second.
struct saturating_case {
  sim::scenario scenario = fleet_night(2000);
  sim::strategy strategy = *sim::find_strategy("full+fleet");
  sim::strategy_result unlimited;
  double capacity = 0;
  saturating_case() {
    strategy.fleet_store.capacity = std::numeric_limits<double>::infinity();
    unlimited = sim::simulate(scenario, strategy);
    capacity = std::floor(static_cast<double>(unlimited.store_busiest_second) / 4.0);
    strategy.fleet_store.capacity = capacity;
  }
};

TEST(SimFleet, AStoreServesItsCapacityAndSyncsBeyondWaitPastTheTimeout) {
  saturating_case c;
  const auto& unlimited = c.unlimited;
  const double capacity = c.capacity;
  EXPECT_EQ(unlimited.store_sync_timeouts, 0);
  ASSERT_GT(unlimited.store_busiest_second, 400);
  const auto saturated = sim::simulate(c.scenario, c.strategy);
  EXPECT_LE(static_cast<double>(saturated.store_busiest_second), capacity);
  EXPECT_GE(static_cast<double>(saturated.store_busiest_second), 0.98 * capacity);
  EXPECT_GT(saturated.store_sync_timeouts, 0);
  EXPECT_LE(saturated.store_sync_timeouts, saturated.store_syncs);
  EXPECT_LE(*saturated.amplification, 1.15);
  EXPECT_LE(*saturated.incident_amplification, 1.30);
}

// Shards (fleet_budget_options::shards): the store saturated above, kept in eight shards of the
// same capacity each, serves every sync in time (no shard's busiest second above its capacity,
// no timeout), and the budgets decide as with one unlimited store.
TEST(SimFleet, ShardsSpreadASaturatedStoreSoEverySyncIsServedInTime) {
  saturating_case c;
  const sim::scenario& s = c.scenario;
  sim::strategy& strat = c.strategy;
  const auto& unlimited = c.unlimited;
  const double capacity = c.capacity;
  ASSERT_GT(unlimited.store_busiest_second, 400);
  std::get<stormguard::fleet_budget_options>(strat.budget).shards = 8;
  const auto sharded = sim::simulate(s, strat);
  EXPECT_EQ(sharded.store_syncs, unlimited.store_syncs);
  EXPECT_EQ(sharded.store_sync_timeouts, 0);
  EXPECT_LE(static_cast<double>(sharded.store_busiest_second), capacity);
  EXPECT_NEAR(*sharded.amplification, *unlimited.amplification, 0.01);
  EXPECT_NEAR(*sharded.incident_amplification, *unlimited.incident_amplification, 0.03);
  EXPECT_EQ(sharded.recovery_s, unlimited.recovery_s);
  // One store of that capacity, unsharded, is saturated (the test above).
  std::get<stormguard::fleet_budget_options>(strat.budget).shards = 1;
  EXPECT_GT(sim::simulate(s, strat).store_sync_timeouts, 0);
}

// friday-night-fleet asks far less of one Redis than it serves (29,000 syncs/s by default): the
// default store never makes a sync wait past its timeout, and serves every sync it is sent.
TEST(SimFleet, TheDefaultStoreIsFarFromSaturatedAt2000Clients) {
  const sim::scenario s = fleet_night(2000);
  const sim::strategy strat = *sim::find_strategy("full+fleet");
  EXPECT_EQ(strat.fleet_store.capacity, 29'000.0);
  const auto r = sim::simulate(s, strat);
  EXPECT_GT(r.store_syncs, 0);
  EXPECT_EQ(r.store_sync_timeouts, 0);
  EXPECT_LT(r.store_busiest_second, 29'000);
}

TEST(SimFleet, AStoreCapacityOutsideItsRangeIsRefusedNamingTheField) {
  const sim::scenario s = fleet_night(20);
  for (const double bad :
       {0.0, 0.5, -1.0, 2e9, std::nan(""), -std::numeric_limits<double>::infinity()}) {
    sim::strategy strat = *sim::find_strategy("full+fleet");
    strat.fleet_store.capacity = bad;
    try {
      (void)sim::simulate(s, strat);
      ADD_FAILURE() << "capacity " << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("fleet_store.capacity"), std::string::npos) << e.what();
    }
  }
}

TEST(SimFleet, TheRunIsDeterministic) {
  const sim::scenario s = fleet_night(2000);
  const auto a = run(s, "full+fleet");
  const auto b = run(s, "full+fleet");
  EXPECT_EQ(a.attempts, b.attempts);
  EXPECT_EQ(a.amplification, b.amplification);
  EXPECT_EQ(a.incident_amplification, b.incident_amplification);
}

// The targets over eight seeds (42 and 1 to 7), at 2,000 and 20,000 clients: incident
// amplification at most 1.15x and within 1.05x of one budget shared by the whole fleet
// (friday-night from one client, 1.115x), overall at most 1.05x of the shared budget's, recovery
// at most one second behind not retrying. A store that only counted reached 1.16-1.18x at 2,000
// clients (each client of 1 req/s saw the fleet's retries about a second late and spent its
// share of credit the others had already spent).
TEST(SimFleet, EightSeedsMeetTheIncidentTargetAt2000And20000Clients) {
  sim::scenario one = fleet_night(1);
  for (const int clients : {2000, 20000}) {
    for (const std::uint64_t seed : {42, 1, 2, 3, 4, 5, 6, 7}) {
      sim::scenario s = fleet_night(clients);
      s.seed = seed;
      one.seed = seed;
      const auto shared = run(one, "full+budget");
      const auto none = run(s, "none");
      const auto fleet = run(s, "full+fleet");
      EXPECT_LE(*fleet.incident_amplification, 1.15) << clients << " clients, seed " << seed;
      EXPECT_LE(*fleet.incident_amplification, *shared.incident_amplification * 1.05)
          << clients << " clients, seed " << seed;
      EXPECT_LE(*fleet.amplification, *shared.amplification * 1.05)
          << clients << " clients, seed " << seed;
      ASSERT_TRUE(fleet.recovery_s && none.recovery_s);
      EXPECT_LE(*fleet.recovery_s, *none.recovery_s + 1.0) << clients << " clients, seed " << seed;
    }
  }
}

}  // namespace
