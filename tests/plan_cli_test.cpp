// SPDX-License-Identifier: Apache-2.0
// Tests of `stormguard plan` as a user runs it: the built executable, its output and its exit
// codes. Skipped when the CLI is not built (STORMGUARD_CLI_PATH undefined).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

// Runs `stormguard plan` with `args` (already shell-quoted); stdout only unless with_stderr.
run_result run_plan(const std::string& args, bool with_stderr = false) {
  return run_shell(std::string("'") + STORMGUARD_CLI_PATH + "' plan " + args +
                   (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

nlohmann::json plan_json(const std::string& args) {
  const run_result r = run_plan(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(PlanCli, JsonHasOneObjectPerRetryWithEveryField) {
  const nlohmann::json doc = plan_json("--retries 4 --samples 1000");
  ASSERT_TRUE(doc.is_object());
  ASSERT_EQ(doc.size(), 1u);
  const nlohmann::json& retries = doc.at("retries");
  ASSERT_EQ(retries.size(), 4u);
  for (std::size_t i = 0; i < retries.size(); ++i) {
    const nlohmann::json& r = retries[i];
    EXPECT_EQ(r.at("retry"), i + 1);
    for (const char* key : {"ceiling_ms", "min_ms", "max_ms", "mean_ms", "p50_ms", "p99_ms",
                            "cumulative_max_ms", "cumulative_mean_ms"}) {
      ASSERT_TRUE(r.contains(key)) << key;
      EXPECT_TRUE(r.at(key).is_number()) << key;
    }
    EXPECT_EQ(r.size(), 9u);
    EXPECT_LE(r.at("min_ms").get<double>(), r.at("p50_ms").get<double>());
    EXPECT_LE(r.at("p99_ms").get<double>(), r.at("max_ms").get<double>());
    EXPECT_LE(r.at("max_ms").get<double>(), r.at("ceiling_ms").get<double>());
  }
}

TEST(PlanCli, SameSeedSameBytesOtherSeedOtherSamples) {
  const std::string args = "--jitter decorrelated --retries 5 --samples 5000 --json";
  const run_result a = run_plan(args + " --seed 42");
  const run_result b = run_plan(args + " --seed 42");
  const run_result c = run_plan(args + " --seed 43");
  ASSERT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output, c.output);
  const run_result table_a = run_plan("--seed 7");
  const run_result table_b = run_plan("--seed 7");
  EXPECT_EQ(table_a.output, table_b.output);
}

TEST(PlanCli, NoJitterPrintsTheExactCeilings) {
  const nlohmann::json doc = plan_json("--jitter none --retries 7 --samples 3");
  const std::vector<double> ceilings{100, 200, 400, 800, 1600, 3000, 3000};
  double total = 0;
  ASSERT_EQ(doc.at("retries").size(), ceilings.size());
  for (std::size_t i = 0; i < ceilings.size(); ++i) {
    const nlohmann::json& r = doc.at("retries")[i];
    total += ceilings[i];
    for (const char* key : {"ceiling_ms", "min_ms", "max_ms", "mean_ms", "p50_ms", "p99_ms"}) {
      EXPECT_EQ(r.at(key).get<double>(), ceilings[i]) << key << " retry " << i + 1;
    }
    EXPECT_EQ(r.at("cumulative_max_ms").get<double>(), total);
    EXPECT_EQ(r.at("cumulative_mean_ms").get<double>(), total);
  }
}

TEST(PlanCli, FullJitterMeanIsHalfTheCeiling) {
  const nlohmann::json doc = plan_json("--jitter full --retries 4 --samples 200000 --seed 3");
  for (const nlohmann::json& r : doc.at("retries")) {
    const double half = r.at("ceiling_ms").get<double>() / 2;
    EXPECT_NEAR(r.at("mean_ms").get<double>(), half, half * 0.005) << r.dump();
    EXPECT_NEAR(r.at("p50_ms").get<double>(), half, half * 0.02) << r.dump();
  }
}

TEST(PlanCli, DurationsAcceptEveryUnit) {
  const nlohmann::json doc =
      plan_json("--jitter none --base 0.25s --cap 1m --multiplier 1.5 --retries 2 --samples 1");
  EXPECT_EQ(doc.at("retries")[0].at("ceiling_ms").get<double>(), 250);
  EXPECT_EQ(doc.at("retries")[1].at("ceiling_ms").get<double>(), 375);
}

TEST(PlanCli, TableShowsRangesAndTotals) {
  const run_result r = run_plan("--jitter equal --retries 2 --samples 100");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("[50ms, 100ms]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[100ms, 200ms]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("worst total"), std::string::npos) << r.output;
}

// Found by trying the tool: "worst total" stopped at 2562047.79h (duration::max()) while the
// "mean total" went on to 7000000h, above the guarantee.
TEST(PlanCli, SaturatedTotalsPrintAsAboveTheLargestDuration) {
  const run_result r =
      run_plan("--base 2000000h --cap 2500000h --retries 3 --jitter none --samples 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("4500000.00h"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("7000000.00h"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("> 292 years  > 292 years"), std::string::npos) << r.output;
  const nlohmann::json doc = plan_json(
      "--base 2000000h --cap 2500000h --retries 3 --jitter none "
      "--samples 1");
  for (const auto& row : doc.at("retries")) {
    EXPECT_LE(row.at("cumulative_mean_ms").get<double>(),
              row.at("cumulative_max_ms").get<double>());
  }
}

TEST(PlanCli, ZeroRetriesIsAnEmptyPlanWithANote) {
  const run_result table = run_plan("--retries 0");
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.output.find("No retries"), std::string::npos) << table.output;
  EXPECT_EQ(plan_json("--retries 0"), nlohmann::json::parse(R"({"retries": []})"));
}

// Every usage error: exit code 2, and a message that names the flag and quotes the text.
void expect_usage_error(const std::string& args, const std::vector<std::string>& needles) {
  const run_result r = run_plan(args, true);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  for (const std::string& needle : needles) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
  }
}

TEST(PlanCli, BadDurationsNameTheFlagAndTheText) {
  expect_usage_error("--base '5 ms'", {"--base", "\"5 ms\"", "no spaces"});
  expect_usage_error("--cap 3", {"--cap", "\"3\"", "no unit", "ns us ms s m min h"});
  expect_usage_error("--cap 1e3ms", {"--cap", "\"1e3ms\"", "no exponents: write 1000ms"});
  expect_usage_error("--cap 99999999999999999999s", {"--cap", "\"99999999999999999999s\""});
}

// Found by trying the tool: "-1s", "1e9h" and "0.5ns" all said only "not a duration".
TEST(PlanCli, BadDurationsSayWhy) {
  expect_usage_error("--base -1s", {"--base", "\"-1s\"", "negative"});
  expect_usage_error("--cap 1e9h", {"--cap", "\"1e9h\"", "no exponents", "about 292 years"});
  expect_usage_error("--cap 2562048h", {"--cap", "\"2562048h\"", "above the largest duration"});
  expect_usage_error("--base 0.5ns", {"--base", "\"0.5ns\"", "not a whole number of nanoseconds"});
}

TEST(PlanCli, InvalidPolicyNamesTheField) {
  expect_usage_error("--base 1s --cap 500ms", {"--cap: \"500ms\" is below --base \"1s\""});
  expect_usage_error("--multiplier 0.5", {"--multiplier", "0.5"});
  expect_usage_error("--jitter wobbly", {"--jitter", "\"wobbly\"", "decorrelated"});
  expect_usage_error("--jitter decorrelated --base 0s", {"--base", "base > 0"});
}

// Found by trying the tool: `plan --base 5s` blamed --cap, a flag that was not typed.
TEST(PlanCli, BaseAboveTheDefaultCapBlamesTheFlagTyped) {
  const run_result r = run_plan("--base 5s", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--base: \"5s\" is above the cap 3s (the default --cap)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("--cap:"), std::string::npos) << r.output;
  const run_result cap = run_plan("--cap 50ms", true);
  EXPECT_EQ(cap.exit_code, 2);
  EXPECT_NE(cap.output.find("--cap: \"50ms\" is below the base 100ms (the default --base)"),
            std::string::npos)
      << cap.output;
}

TEST(PlanCli, BoundsOnRetriesSamplesAndSeed) {
  expect_usage_error("--retries 1001", {"--retries", "[0, 1000]", "1001"});
  expect_usage_error("--retries -1", {"--retries", "-1"});
  expect_usage_error("--samples 0", {"--samples", "[1, 10000000]", "got 0"});
  expect_usage_error("--samples 10000001", {"--samples", "10000001"});
  expect_usage_error("--samples 10000000 --retries 1000", {"--samples", "draws"});
  expect_usage_error("--seed -1", {"--seed", "\"-1\""});
  expect_usage_error("--seed 18446744073709551616", {"--seed", "\"18446744073709551616\""});
  expect_usage_error("--bogus", {"--bogus"});
}

#else
TEST(PlanCli, SkippedWithoutTheCli) { GTEST_SKIP() << "the CLI is not built"; }
#endif

}  // namespace
