// SPDX-License-Identifier: Apache-2.0
// The hedging policies on the command line: `policy check --json` prints the hedging object,
// `simulate` reports the hedges, and a bad hedging field exits 2 naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_scratch.hpp"
#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

class HedgingCli : public stormguard::test_support::cli_scratch {};

TEST_F(HedgingCli, PolicyCheckJsonPrintsTheHedgingObject) {
  const auto file = write("h.json", R"({"policies": [{"name": "h", "hedging": {"max_attempts": 3,
      "delay": "50ms", "non_fatal_statuses": [503], "budget": {"kind": "ratio"}}}]})");
  const run_result r = run("policy check --json '" + file + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  const auto& p = doc["policies"][0];
  EXPECT_EQ(p["retries"], 0);
  EXPECT_EQ(p["hedging"]["max_attempts"], 3);
  EXPECT_EQ(p["hedging"]["delay"], "50ms");
  EXPECT_EQ(p["hedging"]["non_fatal_statuses"], nlohmann::json::array({503}));
  EXPECT_EQ(p["hedging"]["budget"]["kind"], "ratio");
  // Its output is a policy file that reads back the same.
  const run_result again = run("policy check --json '" + write("again.json", r.output) + "'");
  EXPECT_EQ(again.output, r.output);
}

TEST_F(HedgingCli, SixAttemptsExitTwoNamingTheField) {
  const auto file =
      write("h.json", R"({"policies": [{"name": "h", "hedging": {"max_attempts": 6}}]})");
  const run_result r = run("policy check '" + file + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("hedging.max_attempts"), std::string::npos) << r.output;
}

TEST_F(HedgingCli, TailAtScaleHedgedCutsTheP999) {
  const run_result r = run("simulate tail-at-scale --strategy none,hedged --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  const auto& none = doc["strategies"][0];
  const auto& hedged = doc["strategies"][1];
  EXPECT_LE(hedged["p999_latency_ms"].get<double>(), 0.1 * none["p999_latency_ms"].get<double>());
  EXPECT_LE(hedged["attempts"].get<double>(), 1.05 * none["attempts"].get<double>());
  EXPECT_GT(hedged["hedges_won"].get<int>(), 0);
}

#endif

}  // namespace
