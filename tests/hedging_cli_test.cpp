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

// The text summary of a hedging policy is its copies and their delay (it said "0 retries").
TEST_F(HedgingCli, PolicyCheckSummarisesTheCopiesAndTheirDelay) {
  const auto file = write("h.json", R"({"policies": [{"name": "h", "hedging": {"max_attempts": 3,
      "delay": "50ms"}}]})");
  const run_result r = run("policy check '" + file + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("h: hedged, 3 copies in all, the next one 50ms after the last"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("0 retries"), std::string::npos) << r.output;
}

// exec and plan cannot honour a hedging policy: a usage error naming the policy (exec ran the
// command once and blamed "--retries 0", which nobody had typed).
TEST_F(HedgingCli, ExecAndPlanRefuseAHedgingPolicy) {
  const auto file =
      write("h.json", R"({"policies": [{"name": "h", "hedging": {"max_attempts": 3}}]})");
  const run_result exec = run("exec --policy '" + file + "' -- true");
  EXPECT_EQ(exec.exit_code, 2) << exec.output;
  EXPECT_NE(exec.output.find("the policy \"h\" hedges"), std::string::npos) << exec.output;
  const run_result plan = run("plan --policy '" + file + "'");
  EXPECT_EQ(plan.exit_code, 2) << plan.output;
  EXPECT_NE(plan.output.find("the policy \"h\" hedges"), std::string::npos) << plan.output;
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
