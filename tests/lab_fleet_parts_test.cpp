// SPDX-License-Identifier: Apache-2.0
// The lab's multi-process wire (app/lab_fleet.hpp: part_to_json, part_from_json,
// part_report_to_json, part_report_from_json): a line carries its wire version, reads back, and
// a line of another version (stormguard 0.1's has none) is refused naming both versions.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "app/lab_fleet.hpp"
#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/version.hpp"

namespace {

using stormguard::lab::k_lab_wire_version;
using stormguard::lab::part_from_json;
using stormguard::lab::part_report;
using stormguard::lab::part_report_from_json;
using stormguard::lab::part_report_to_json;
using stormguard::lab::part_to_json;

stormguard::sim::strategy_result sample() {
  stormguard::sim::strategy_result r;
  r.name = "full+fleet";
  r.logical_requests = 120;
  r.series.push_back(stormguard::sim::time_bin{10, 12, 9, 2, 1, 0});
  return r;
}

// The message part_from_json throws for `line`, or "" when it reads.
std::string refusal_of(const std::string& line) {
  try {
    (void)part_from_json(line);
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

TEST(LabWire, ALineCarriesItsVersionAndReadsBack) {
  const std::string line = part_to_json(sample());
  EXPECT_NE(line.find("\"wire\":" + std::to_string(k_lab_wire_version)), std::string::npos) << line;
  const auto back = part_from_json(line);
  EXPECT_EQ(back.name, "full+fleet");
  EXPECT_EQ(back.logical_requests, 120);
  ASSERT_EQ(back.series.size(), 1U);
  EXPECT_EQ(back.series[0].attempts, 12);
  part_report report;
  report.result = sample();
  report.fleet_syncs = 7;
  EXPECT_EQ(part_report_from_json(part_report_to_json(report)).fleet_syncs, 7);
}

TEST(LabWire, AStormguard01LineWithoutAVersionIsRefusedNamingBothVersions) {
  std::string line = part_to_json(sample());
  const std::string field = "\"wire\":" + std::to_string(k_lab_wire_version);
  // As a 0.1 worker wrote it: the field and the comma that separates it, wherever it is.
  std::size_t at = line.find("," + field);
  if (at == std::string::npos) at = line.find(field + ",");
  ASSERT_NE(at, std::string::npos) << line;
  line.erase(at, field.size() + 1);
  ASSERT_EQ(line.find("wire"), std::string::npos) << line;
  const std::string message = refusal_of(line);
  EXPECT_NE(message.find("lab wire 1 (stormguard 0.1)"), std::string::npos) << message;
  EXPECT_NE(message.find("lab wire " + std::to_string(k_lab_wire_version) + " (stormguard " +
                         std::string(stormguard::version()) + ")"),
            std::string::npos)
      << message;
  EXPECT_THROW((void)part_report_from_json(line), std::invalid_argument);
}

TEST(LabWire, ALineOfAnotherVersionIsRefusedNamingIt) {
  std::string line = part_to_json(sample());
  const std::string field = "\"wire\":" + std::to_string(k_lab_wire_version);
  line.replace(line.find(field), field.size(), "\"wire\":99");
  const std::string message = refusal_of(line);
  EXPECT_NE(message.find("\"wire\" is 99"), std::string::npos) << message;
  EXPECT_NE(message.find("lab wire " + std::to_string(k_lab_wire_version)), std::string::npos)
      << message;
}

// The parts' counters add up; the store's busiest second is a peak: the largest part's.
TEST(LabParts, MergingAddsTheCountersAndTakesTheBusiestSecondsPeak) {
  stormguard::sim::strategy_result a;
  a.name = "full+fleet";
  a.store_syncs = 10;
  a.store_sync_timeouts = 1;
  a.store_busiest_second = 5;
  stormguard::sim::strategy_result b = a;
  b.store_syncs = 20;
  b.store_busiest_second = 7;
  const std::vector<stormguard::sim::strategy_result> parts{a, b};
  const auto m = stormguard::lab::merge_parts(stormguard::sim::friday_night(), parts,
                                              stormguard::lab::server_stats{});
  EXPECT_EQ(m.store_syncs, 30);
  EXPECT_EQ(m.store_sync_timeouts, 2);
  EXPECT_EQ(m.store_busiest_second, 7);
}

}  // namespace
