// SPDX-License-Identifier: Apache-2.0
// `stormguard lab` with the tail-at-scale scenario (shortened to 8 s at 200 req/s) and the built-in
// `hedged` strategy, on real sockets: the lab's p99.9 is within 25 % or 5 ms (whichever is larger)
// of the simulator's for the same scenario and seed, and its attempts within 10 %. The same
// strategy over worker processes (--fleet-store auto --processes 4): every hedges_* key of the
// merged parts within 15 % of the simulator's column. The full-size run is a documented command
// (docs/hedging.md), not a CI test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

// Runs `lab FILE ARGS --json` and returns its one strategy's object (lab, sim, completed).
nlohmann::json lab_run(const fs::path& file, const std::string& args) {
  const run_result r = run_shell(std::string("'") + STORMGUARD_CLI_PATH + "' lab '" +
                                 file.string() + "' " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return nlohmann::json::object();
  const nlohmann::json run = nlohmann::json::parse(r.output).at("strategies").at(0);
  EXPECT_TRUE(run.at("completed").get<bool>());
  return run;
}

// A real-time comparison on a shared 2-core machine: a host that stalls the VM for part of a run
// stretches the lab's tail and its hedge counts. Each test measures once more when the first
// run misses, and fails when both do (a wrong formula or counter misses every time); the first
// miss is printed.
template <class Measure>
void expect_within_twice(Measure measure) {
  const std::string first = measure();
  if (first.empty()) return;
  std::cout << "first run missed (measuring again): " << first << std::endl;
  const std::string second = measure();
  EXPECT_EQ(second, "") << "missed twice; the first run: " << first;
}

// "" when `l` is within `bound` of `m`, else what missed.
std::string off_by(const char* what, double l, double m, double bound) {
  if (std::abs(l - m) <= bound) return "";
  return std::string(what) + ": lab " + std::to_string(l) + ", sim " + std::to_string(m) +
         " (bound " + std::to_string(bound) + "); ";
}

TEST(LabHedging, TailAtScaleHedgedMatchesTheSimulator) {
#ifdef STORMGUARD_TEST_SANITIZED
  // A p99.9 of real time within 25 % (or 5 ms) of the simulator's 30 ms: a sanitized build's
  // slower event loop on a loaded machine adds tens of ms to the tail (62 ms seen in one run).
  GTEST_SKIP() << "a real-time p99.9 comparison needs the release build's speed";
#endif
  const fs::path dir =
      fs::temp_directory_path() / ("stormguard-lab-hedging-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json scenario;
  std::ifstream(STORMGUARD_SCENARIOS_DIR "/tail-at-scale.json") >> scenario;
  scenario["name"] = "tail-at-scale-short";
  scenario["duration"] = "8s";
  const fs::path file = dir / "tail.json";
  std::ofstream(file) << scenario.dump();
  expect_within_twice([&]() -> std::string {
    const nlohmann::json run = lab_run(file, "--scale 0.2 --strategy hedged");
    if (!run.contains("lab")) return "no lab column";
    const nlohmann::json& lab = run.at("lab");
    const nlohmann::json& sim = run.at("sim");
    const double sim_attempts = sim.at("attempts").get<double>();
    const double lab_p999 = lab.at("p999_latency_ms").get<double>();
    const double sim_p999 = sim.at("p999_latency_ms").get<double>();
    std::string missed =
        off_by("attempts", lab.at("attempts").get<double>(), sim_attempts, 0.10 * sim_attempts) +
        off_by("p999_latency_ms", lab_p999, sim_p999, std::max(0.25 * sim_p999, 5.0));
    // The hedges did their work: far below the 1 s stall.
    if (lab_p999 >= 200.0) missed += "lab p99.9 " + std::to_string(lab_p999) + " ms; ";
    if (lab.at("hedges_sent").get<double>() <= 0.0) missed += "no hedge sent; ";
    return missed;
  });
  fs::remove_all(dir);
}

// Four worker processes each run part of the fleet and report their counters to the parent,
// which merges them (src/lab/fleet_parts.cpp): the hedges the parts counted must reach the
// report, next to the simulator's. 12 s at 500 req/s from 10 clients; an attempt takes 2 ms, far
// below the policy's 60-ms hedge delay even on a loaded 2-core machine (with the built-in
// strategy's 20 ms, scheduling delays of the four workers hedged up to 24 % more attempts than
// the model), but 15 % of attempts stall 300 ms and are hedged (the copy wins), so both columns
// count about 930 hedges: two independent counts of that size differ by more than 15 % with a
// probability near 0.1 %. Each client's budget (10 % + 10/s) covers its 7.5 stalls per second:
// neither column refuses a copy.
TEST(LabHedging, HedgeCountersOfWorkerProcessesReachTheReport) {
#ifdef STORMGUARD_TEST_SANITIZED
  GTEST_SKIP() << "four worker processes at 500 req/s outrun a sanitized build's real time";
#endif
  const fs::path dir =
      fs::temp_directory_path() / ("stormguard-lab-hedging-parts-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "stalls.json";
  std::ofstream(file) << R"({"name": "stalls", "seed": 11, "duration": "12s",
    "requests_per_second": 500, "clients": 10, "timeout": "3s",
    "server": {"workers": 50, "queue_limit": 5000, "service_time": "2ms",
               "service_distribution": "fixed",
               "stall": {"probability": 0.15, "duration": "300ms"}},
    "incident": null})";
  const fs::path policy = dir / "hedged-60ms.json";
  std::ofstream(policy) << R"({"policies": [{"name": "hedged-60ms",
    "hedging": {"max_attempts": 2, "delay": "60ms", "budget": "ratio"}}]})";
  expect_within_twice([&]() -> std::string {
    const nlohmann::json run =
        lab_run(file, "--scale 1 --policy '" + policy.string() +
                          "' --strategy hedged-60ms --fleet-store auto --processes 4");
    if (!run.contains("lab")) return "no lab column";
    const nlohmann::json& lab = run.at("lab");
    const nlohmann::json& sim = run.at("sim");
    std::string missed;
    for (const char* key : {"hedges_sent", "hedges_won", "hedges_cancelled"}) {
      const double m = sim.at(key).get<double>();
      if (m <= 600.0) {
        missed += std::string(key) + ": the scenario no longer makes enough hedges to compare; ";
      }
      missed += off_by(key, lab.at(key).get<double>(), m, 0.15 * m);
    }
    missed += off_by("hedges_refused", lab.at("hedges_refused").get<double>(),
                     sim.at("hedges_refused").get<double>(), 0.0);
    return missed;
  });
  fs::remove_all(dir);
}

#endif

}  // namespace
