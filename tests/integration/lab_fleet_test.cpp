// SPDX-License-Identifier: Apache-2.0
// stormguard::lab::run_lab end to end on 127.0.0.1: a 3-second scenario (100 req/s, an incident
// of 1 s at a service time far above the timeout) run by the fleet over real sockets against a
// real lab::server, next to the simulator. Real time: about 6 s for the two strategies.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "stormguard/lab/fleet.hpp"
#include "stormguard/sim/report.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"

namespace {

using namespace std::chrono_literals;
namespace lab = stormguard::lab;
namespace sim = stormguard::sim;

// 3 s at 100 req/s; 4 workers x 10 ms (400 req/s of capacity); in [1 s, 2 s) the service time is
// 1 s against a timeout of 200 ms: every attempt sent then times out.
sim::scenario tiny_storm() {
  sim::scenario s = sim::friday_night();
  s.name = "tiny-storm";
  s.length = 3s;
  s.requests_per_second = 100;
  s.clients = 2;
  s.timeout = 200ms;
  s.workers = 4;
  s.queue_limit = 100;
  s.service_time = 10ms;
  s.incident = sim::incident{1s, 2s, 1s};
  return s;
}

TEST(LabFleet, MeasuresNoneAndNaiveNextToTheSimulator) {
  const sim::scenario s = tiny_storm();
  const std::vector<sim::strategy> strategies{*sim::find_strategy("none"),
                                              *sim::find_strategy("naive")};
  std::size_t last_done = 0;
  std::size_t calls = 0;
  lab::fleet_options options;
  options.progress = [&](std::size_t done, std::size_t total) {
    EXPECT_LE(done, total);
    last_done = done;
    ++calls;
  };
  const auto report = lab::run_lab(s, strategies, options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_FALSE((*report).interrupted);
  ASSERT_EQ((*report).strategies.size(), 2U);
  EXPECT_GT(calls, 10U);
  EXPECT_EQ(last_done, 60U);  // 2 strategies x 30 ticks of 100 ms, the last call at the end

  const lab::lab_comparison& none = (*report).strategies[0];
  EXPECT_EQ(none.name, "none");
  EXPECT_TRUE(none.completed);
  // About 300 arrivals (the simulator's arrival stream: the same count).
  EXPECT_EQ(none.lab.logical_requests, none.sim.logical_requests);
  ASSERT_TRUE(none.lab.amplification);
  EXPECT_NEAR(*none.lab.amplification, 1.0, 0.01);
  // Outside the incident everything succeeds: at least the 2 s of normal traffic.
  ASSERT_TRUE(none.lab.success_ratio);
  EXPECT_GT(*none.lab.success_ratio, 0.5);
  EXPECT_GT(none.lab.timeouts, 0);  // the incident's attempts

  const lab::lab_comparison& naive = (*report).strategies[1];
  EXPECT_EQ(naive.name, "naive");
  ASSERT_TRUE(naive.lab.incident_amplification);
  ASSERT_TRUE(naive.sim.incident_amplification);
  EXPECT_GT(*naive.lab.incident_amplification, 1.5);
  EXPECT_GT(*naive.sim.incident_amplification, 1.5);

  const std::string json = lab::to_json(*report);
  EXPECT_NE(json.find("\"lab\":{\"name\":\"none\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"sim\":{\"name\":\"naive\""), std::string::npos) << json;
  EXPECT_NE(lab::format_table(*report).find("naive"), std::string::npos);
}

TEST(LabFleet, StopsEarlyWithAPartialReport) {
  const sim::scenario s = tiny_storm();
  const std::vector<sim::strategy> strategies{*sim::find_strategy("none"),
                                              *sim::find_strategy("naive")};
  std::atomic<bool> stop{false};
  lab::fleet_options options;
  options.stop = &stop;
  options.progress = [&](std::size_t done, std::size_t) {
    if (done >= 5) stop.store(true);  // after about 0.5 s
  };
  const auto started = std::chrono::steady_clock::now();
  const auto report = lab::run_lab(s, strategies, options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  EXPECT_TRUE((*report).interrupted);
  ASSERT_EQ((*report).strategies.size(), 1U);
  EXPECT_FALSE((*report).strategies[0].completed);
  EXPECT_GT((*report).strategies[0].lab.logical_requests, 0);
  EXPECT_NE(lab::format_table(*report).find("stopped early"), std::string::npos);
}

}  // namespace
