// SPDX-License-Identifier: Apache-2.0
// `stormguard lab` with the tail-at-scale scenario (shortened to 8 s at 200 req/s) and the built-in
// `hedged` strategy, on real sockets: the lab's p99.9 is within 25 % or 5 ms (whichever is larger)
// of the simulator's for the same scenario and seed, and its attempts within 10 %. The full-size
// run is a documented command (docs/hedging.md), not a CI test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

TEST(LabHedging, TailAtScaleHedgedMatchesTheSimulator) {
  const fs::path dir =
      fs::temp_directory_path() / ("stormguard-lab-hedging-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json scenario;
  std::ifstream(STORMGUARD_SCENARIOS_DIR "/tail-at-scale.json") >> scenario;
  scenario["name"] = "tail-at-scale-short";
  scenario["duration"] = "8s";
  const fs::path file = dir / "tail.json";
  std::ofstream(file) << scenario.dump();
  const run_result r = run_shell(std::string("'") + STORMGUARD_CLI_PATH + "' lab '" +
                                 file.string() + "' --scale 0.2 --strategy hedged --json");
  fs::remove_all(dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json report = nlohmann::json::parse(r.output);
  const nlohmann::json& run = report.at("strategies").at(0);
  ASSERT_TRUE(run.at("completed").get<bool>());
  const nlohmann::json& lab = run.at("lab");
  const nlohmann::json& sim = run.at("sim");
  const double lab_attempts = lab.at("attempts").get<double>();
  const double sim_attempts = sim.at("attempts").get<double>();
  EXPECT_LE(std::abs(lab_attempts - sim_attempts), 0.10 * sim_attempts)
      << "lab " << lab_attempts << ", sim " << sim_attempts;
  const double lab_p999 = lab.at("p999_latency_ms").get<double>();
  const double sim_p999 = sim.at("p999_latency_ms").get<double>();
  EXPECT_LE(std::abs(lab_p999 - sim_p999), std::max(0.25 * sim_p999, 5.0))
      << "lab " << lab_p999 << " ms, sim " << sim_p999 << " ms";
  // The hedges did their work: far below the 1 s stall.
  EXPECT_LT(lab_p999, 200.0);
  EXPECT_GT(lab.at("hedges_sent").get<double>(), 0.0);
}

#endif

}  // namespace
