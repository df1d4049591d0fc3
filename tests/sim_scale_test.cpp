// SPDX-License-Identifier: Apache-2.0
// sim::scale_scenario (stormguard/sim/scenario.hpp): the load and the server scaled together,
// everything per client and per request unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "stormguard/sim/scenario.hpp"

namespace {

namespace sim = stormguard::sim;

TEST(ScaleScenario, MultipliesTheLoadAndTheServerOnly) {
  const sim::scenario full = sim::friday_night();
  const auto scaled = sim::scale_scenario(full, 0.1);
  ASSERT_TRUE(scaled) << scaled.error().message;
  EXPECT_DOUBLE_EQ((*scaled).requests_per_second, 200.0);
  EXPECT_EQ((*scaled).clients, 2);
  EXPECT_EQ((*scaled).workers, 10);
  EXPECT_EQ((*scaled).queue_limit, 2000);
  // The server budget's floor is per server: scaled too (10 retries/s -> 1).
  EXPECT_EQ((*scaled).defences.of<stormguard::sim::retry_budget_defence>().min_retries_per_second,
            1);
  // Unchanged: the clock, the timeout, the service times, the incident, the seed.
  sim::scenario rest = *scaled;
  rest.defences = full.defences;
  rest.requests_per_second = full.requests_per_second;
  rest.clients = full.clients;
  rest.workers = full.workers;
  rest.queue_limit = full.queue_limit;
  EXPECT_EQ(rest, full);
}

TEST(ScaleScenario, ScalesTheOverloadThreshold) {
  const auto scaled = sim::scale_scenario(sim::metastable(), 0.5);
  ASSERT_TRUE(scaled);
  ASSERT_TRUE((*scaled).overload);
  EXPECT_DOUBLE_EQ((*scaled).overload->above_rate, sim::metastable().overload->above_rate * 0.5);
  EXPECT_EQ((*scaled).overload->service_time, sim::metastable().overload->service_time);
}

TEST(ScaleScenario, RoundsClientsAndWorkersToAtLeastOne) {
  const auto scaled = sim::scale_scenario(sim::friday_night(), 0.001);
  ASSERT_TRUE(scaled);
  EXPECT_EQ((*scaled).clients, 1);  // 0.02
  EXPECT_EQ((*scaled).workers, 1);  // 0.1
  EXPECT_EQ((*scaled).queue_limit, 20);
  const auto half = sim::scale_scenario(sim::outage_80_fleet(), 0.0015);  // 1,000 clients
  ASSERT_TRUE(half);
  EXPECT_EQ((*half).clients, 2);  // 1.5 rounds up
}

TEST(ScaleScenario, OneIsTheIdentity) {
  const auto same = sim::scale_scenario(sim::metastable(), 1.0);
  ASSERT_TRUE(same);
  EXPECT_EQ(*same, sim::metastable());
}

TEST(ScaleScenario, RejectsAFactorOutsideZeroToOne) {
  for (double bad : {0.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    const auto r = sim::scale_scenario(sim::friday_night(), bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "scale");
    EXPECT_EQ(r.error().message.rfind("scale: must be a number in (0, 1], got ", 0), 0U)
        << r.error().message;
  }
}

}  // namespace
