// SPDX-License-Identifier: Apache-2.0
// stormguard::lab::run_lab end to end on 127.0.0.1: a 3-second scenario (100 req/s, an incident
// of 1 s at a service time far above the timeout) run by the fleet over real sockets against a
// real lab::server, next to the simulator. Real time: about 6 s for the two strategies. And the
// parts of a fleet spread over processes: their reports and the run's validity (no sockets).
#include "app/lab_fleet.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/report.hpp"
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

// A worker's report (lab::part_report) reads back whole; a line of part_to_json reads with its
// added counts 0.
// The parts add up to the scenario's clients and rate, every client at the simulator's rate
// (clients ÷ parts rounded up ran 21 clients for 20 over 3 parts, and 64 for 20 over 64).
TEST(LabFleetParts, ThePartsAddUpToTheScenariosClientsAndRate) {
  sim::scenario s = sim::friday_night();
  s.clients = 20;
  s.requests_per_second = 100;
  int clients = 0;
  double rate = 0;
  for (std::size_t k = 0; k < 3; ++k) {
    const sim::scenario part = lab::fleet_part(s, k, 3);
    EXPECT_EQ(part.clients, k < 2 ? 7 : 6) << k;
    EXPECT_DOUBLE_EQ(part.requests_per_second / part.clients, 5.0) << k;
    clients += part.clients;
    rate += part.requests_per_second;
  }
  EXPECT_EQ(clients, 20);
  EXPECT_DOUBLE_EQ(rate, 100.0);
  EXPECT_THROW((void)lab::fleet_part(s, 0, 21), std::invalid_argument);
}

TEST(LabFleetParts, APartReportReadsBack) {
  lab::part_report r;
  r.result.name = "full+fleet";
  r.result.logical_requests = 40;
  r.result.attempts = 44;
  r.result.series = {sim::time_bin{10, 11, 9, 1, 1, 0}};
  r.transport_failures = 3;
  r.first_transport_failure = "Couldn't connect to server";
  r.fleet_syncs = 120;
  r.fleet_sync_errors = 7;
  r.fleet_rejoins = 2;
  r.fleet_syncers = 7;
  r.fleet_never_synced = 1;
  r.fleet_fallback_s = 2.5;
  const lab::part_report back = lab::part_report_from_json(lab::part_report_to_json(r));
  EXPECT_EQ(back.result.name, "full+fleet");
  EXPECT_EQ(back.result.attempts, 44);
  ASSERT_EQ(back.result.series.size(), 1U);
  EXPECT_EQ(back.result.series[0].attempts, 11);
  EXPECT_EQ(back.transport_failures, 3);
  EXPECT_EQ(back.first_transport_failure, "Couldn't connect to server");
  EXPECT_EQ(back.fleet_syncs, 120);
  EXPECT_EQ(back.fleet_sync_errors, 7);
  EXPECT_EQ(back.fleet_rejoins, 2);
  EXPECT_EQ(back.fleet_syncers, 7);
  EXPECT_EQ(back.fleet_never_synced, 1);
  EXPECT_DOUBLE_EQ(back.fleet_fallback_s, 2.5);
  const lab::part_report plain = lab::part_report_from_json(lab::part_to_json(r.result));
  EXPECT_EQ(plain.transport_failures, 0);
  EXPECT_EQ(plain.result.attempts, 44);
  EXPECT_THROW((void)lab::part_report_from_json("{\"name\": 1}"), std::invalid_argument);
}

// A fleet spread over processes is invalid when any worker's sockets failed, even when the
// server's counters are clean (the server never sees a connect that failed), as in run_lab.
TEST(LabFleetParts, AWorkersTransportFailuresMakeTheRunInvalid) {
  std::vector<lab::part_report> parts(3);
  const lab::server_stats clean{};
  EXPECT_EQ(lab::parts_invalid_reason(parts, clean), "");
  parts[1].transport_failures = 2;
  parts[1].first_transport_failure = "Couldn't connect to server";
  parts[2].transport_failures = 1;
  const std::string reason = lab::parts_invalid_reason(parts, clean);
  EXPECT_NE(reason.find("the lab's own sockets failed: 3 attempts of the worker processes"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("(first: Couldn't connect to server)"), std::string::npos) << reason;
  // The server's own failures alone make it invalid too.
  parts[1].transport_failures = parts[2].transport_failures = 0;
  lab::server_stats refused{};
  refused.connections_refused = 4;
  EXPECT_NE(lab::parts_invalid_reason(parts, refused).find("closed 4 new connections"),
            std::string::npos);
}

// A fleet on a real store that did not serve the run (a syncer that never synced, or the budgets
// in their fallback for more than a tenth of the syncers' time) is invalid, the store named; a
// store that served it, or parts that used no store, are not.
TEST(LabFleetParts, AStoreThatDidNotServeTheRunMakesItInvalid) {
  using namespace std::chrono_literals;
  std::vector<lab::part_report> parts(2);
  EXPECT_EQ(lab::parts_store_reason(parts, "redis://h:1/0", 10s), "");  // no store used
  parts[0].fleet_syncers = parts[1].fleet_syncers = 5;
  parts[0].fleet_syncs = 100;
  parts[0].fleet_fallback_s = 4.0;  // 4 of 100 syncer-seconds: served
  EXPECT_EQ(lab::parts_store_reason(parts, "redis://h:1/0", 10s), "");
  parts[1].fleet_fallback_s = 7.0;  // 11 of 100: mostly yes, but over a tenth
  const std::string slow = lab::parts_store_reason(parts, "redis://h:1/0", 10s);
  EXPECT_NE(slow.find("the fleet store redis://h:1/0 did not serve the run"), std::string::npos)
      << slow;
  EXPECT_NE(slow.find("for 11 % of the run"), std::string::npos) << slow;
  parts[1].fleet_fallback_s = 0;
  parts[1].fleet_never_synced = 1;  // one syncer never joined
  EXPECT_NE(lab::parts_store_reason(parts, "redis://h:1/0", 10s).find("1 of 10 syncers never"),
            std::string::npos);
}

}  // namespace
