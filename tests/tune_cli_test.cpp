// SPDX-License-Identifier: Apache-2.0
// `stormguard tune` as a user runs it: the built executable, its files and exit codes. Small
// scenarios (a few thousand requests) keep each search to a second or two. Skipped when the CLI
// is not built (STORMGUARD_CLI_PATH undefined).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_scratch.hpp"
#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

using stormguard::test_util::run_result;

class TuneCli : public stormguard::test_support::cli_scratch {
 protected:
  std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

// friday-night's shape at a tenth of its load: 200 req/s from 4 clients to 10 workers x 20 ms,
// the service time 1.5 s from 5 s to 10 s of 30 s.
const char* const k_storm = R"({
  "name": "small-storm", "seed": 7, "duration": "30s", "requests_per_second": 200, "clients": 4,
  "timeout": "1s",
  "server": {"workers": 10, "queue_limit": 2000, "service_time": "20ms"},
  "incident": {"start": "5s", "end": "10s", "service_time": "1.5s"}
})";

TEST_F(TuneCli, SameInputsAndSeedGiveTheSameBytes) {
  const std::string s = write("s.json", k_storm);
  const run_result a = run("tune " + s + " --seed 3 --out " + (dir_ / "a.json").string(), false);
  const run_result b =
      run("tune " + s + " --seed 3 --threads 1 --out " + (dir_ / "b.json").string(), false);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(read((dir_ / "a.json").string()), read((dir_ / "b.json").string()));
  EXPECT_NE(a.output.find(" policies ("), std::string::npos) << a.output;
}

TEST_F(TuneCli, TheOutFileIsReadBackBySimulate) {
  const std::string s = write("s.json", k_storm);
  const std::string out = (dir_ / "tuned.json").string();
  const run_result t = run("tune " + s + " --json --out " + out, false);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const auto report = nlohmann::json::parse(t.output);
  const run_result sim = run("simulate " + s + " --json -s none --policy " + out, false);
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  const auto doc = nlohmann::json::parse(sim.output);
  const auto& tuned = doc.at("strategies").back();
  EXPECT_EQ(tuned.at("name"), "tuned");
  // The same engine, scenario and client seeds: the same figures.
  EXPECT_EQ(tuned.at("success_ratio").dump(), report.at("at_fleet")[0].at("success_ratio").dump());
  EXPECT_EQ(tuned.at("incident_amplification").dump(),
            report.at("at_fleet")[0].at("incident_amplification").dump());
  EXPECT_TRUE(report.at("verdict").at("met").get<bool>());
}

TEST_F(TuneCli, ADescribedServiceWritesItsScenarioForSimulate) {
  const std::string scenario = (dir_ / "service.json").string();
  const std::string out = (dir_ / "tuned.json").string();
  const run_result t = run("tune --rate 200 --clients 4 --workers 10 --p50 20ms --json --out " +
                               out + " --write-scenario " + scenario,
                           false);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const auto report = nlohmann::json::parse(t.output);
  const run_result sim = run("simulate " + scenario + " --json -s none --policy " + out, false);
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  const auto doc = nlohmann::json::parse(sim.output);
  EXPECT_EQ(doc.at("strategies").back().at("success_ratio").dump(),
            report.at("at_fleet")[0].at("success_ratio").dump());
  EXPECT_EQ(doc.at("scenario"), "service");
}

TEST_F(TuneCli, ExportWritesAConfigThatPolicyCheckImports) {
  const std::string s = write("s.json", k_storm);
  const std::string grpc = (dir_ / "service-config.json").string();
  const std::string envoy = (dir_ / "route.json").string();
  const run_result t = run("tune " + s + " --name pkg.Service --export grpc:" + grpc);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const run_result check = run("policy check grpc:" + grpc);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  const run_result e = run("tune " + s + " --export envoy:" + envoy);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_EQ(run("policy check envoy:" + envoy).exit_code, 0);
}

// docs/tune.md's gRPC service with a tail: with a goal that leaves room for it, a hedged policy
// wins on the healthy day's p99, and its gRPC service config has a hedgingPolicy.
TEST_F(TuneCli, ATailIsHedgedWhenTheGoalAllowsIt) {
  const std::string grpc = (dir_ / "service-config.json").string();
  const run_result r =
      run("tune --rate 1000 --clients 10 --workers 100 --p50 10ms --p99 200ms --deadline 2s "
          "--min-success 0.815 --name pkg.Service --json --export grpc:" +
              grpc,
          false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  ASSERT_TRUE(doc.at("policy").contains("hedging")) << doc.at("policy").dump();
  EXPECT_LT(doc.at("baseline")[0].at("p99_latency_ms").get<double>(),
            doc.at("baseline")[1].at("p99_latency_ms").get<double>());
  const auto config = nlohmann::json::parse(read(grpc));
  EXPECT_TRUE(config.at("methodConfig")[0].contains("hedgingPolicy")) << config.dump();
}

TEST_F(TuneCli, BadInputsNameTheFlagAndTheValue) {
  const struct {
    std::string args;
    std::string expected;
  } cases[] = {
      {"--rate -5", "--rate must be a number in [1, 166666], got \"-5\""},
      {"--capacity 0", "--capacity must be a number"},
      {"--clients 0", "--clients must be an integer in [1, 100000], got \"0\""},
      {"--p50 20ms --deadline 10ms", "--deadline must be longer than one healthy attempt"},
      {"--p50 20parsecs",
       "--p50 must be a duration in (0, 1h] such as 20ms or 1.5s, got \"20parsecs\""},
      {"--p50 20ms --p99 5ms", "--p99 must be a duration in [p50"},
      {"--error-rate 0.7", "--error-rate must be a number in [0, 0.5], got \"0.7\""},
      {"--export istio:x.yaml", "--export must be TARGET:FILE"},
      {"friday-nite", "friday-nite"},
      {"friday-night --rate 100", "--rate describes a service"},
      {"--plot x.gif", "--plot must name a .png or .svg file"},
  };
  for (const auto& c : cases) {
    const run_result r = run("tune " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.args << ": " << r.output;
  }
}

// A limit the search would meet deep inside (a policy's backoff and attempt timeout of at most
// 1 h) is refused up front, naming the flag the user typed, its value and the limit; a healthy
// attempt no shorter than the default deadline blames the latency given, with both values; a rate
// too small to simulate and an empty SCENARIO are usage errors too.
TEST_F(TuneCli, DerivedLimitsNameTheFlagTheUserTyped) {
  const struct {
    std::string args;
    std::vector<std::string> expected;
  } cases[] = {
      {"--p99 1h", {"--p99 must be at most 30m", "2 x p99 = 2h", "got \"1h\""}},
      {"--p50 13m --deadline 1h", {"--p50 must be at most 12m", "5 x p50 = 1h5m", "got \"13m\""}},
      {"--p50 1h", {"--p50 1h is no shorter than the callers' deadline (10s, the default"}},
      {"--rate 0.001", {"--rate must be at least 1 req/s", "got \"0.001\""}},
      {"''", {"SCENARIO must be a built-in scenario", "got \"\""}},
  };
  for (const auto& c : cases) {
    const run_result r = run("tune " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.output;
    for (const std::string& e : c.expected) {
      EXPECT_NE(r.output.find(e), std::string::npos) << c.args << ": " << r.output;
    }
    EXPECT_EQ(r.output.find("min_retries_per_second"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("attempt_timeout"), std::string::npos) << r.output;
  }
}

// A server so large that half its incident capacity is above a budget's largest floor (1,000,000
// retries/s): the search keeps its fleet floors within the limit instead of failing on them.
TEST_F(TuneCli, AHugeServerKeepsTheFleetFloorWithinTheBudgetsLimit) {
  const run_result r = run(
      "tune --rate 200 --clients 4 --workers 1000000 --p50 5ms --max-candidates 18 --json", false);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;  // was 2: a floor of 1333333
  const auto doc = nlohmann::json::parse(r.output);
  bool fleet = false;
  for (const auto& c : doc.at("tried")) {
    const auto summary = c.at("summary").get<std::string>();
    fleet = fleet || summary.rfind("fleet ", 0) == 0;
    EXPECT_EQ(summary.find("floor 1333333"), std::string::npos) << summary;
  }
  EXPECT_TRUE(fleet) << "no fleet budget tried";
}

// With a deadline that leaves room for no retry, the policy has none and no budget, and every
// reason printed is true of it: the timeout is said to be shorter than the rule's, nothing about
// a ratio or a window.
TEST_F(TuneCli, WithoutRoomForARetryTheReasonsSayNoRetryAndNoBudget) {
  const run_result r =
      run("tune --rate 200 --clients 4 --workers 10 --deadline 100ms --min-healthy-success 0.9 "
          "--min-success 0.5 --max-recovery 30s --json",
          false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  const auto& policy = doc.at("policy");
  EXPECT_EQ(policy.value("retries", 0), 0) << policy.dump();
  EXPECT_EQ(policy.at("budget").at("kind"), "none") << policy.dump();
  std::string all;
  for (const auto& reason : doc.at("reasons")) {
    all += reason.at("field").get<std::string>() + ": " + reason.at("reason").get<std::string>();
    EXPECT_NE(reason.at("field"), "budget.window") << reason.dump();
  }
  EXPECT_NE(all.find("40ms is shorter than the rule's max(2 x p99, 10 x p50) = 200ms"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("is at least max"), std::string::npos) << all;
  EXPECT_NE(all.find("nothing to budget"), std::string::npos) << all;
  EXPECT_EQ(all.find("ratio"), std::string::npos) << all;
}

// A tail with no room for a retry: the search hedges or makes one attempt; the budget of the other
// scope shown beside the tuned policy is a budget (an unhedged candidate without retries has none).
TEST_F(TuneCli, TheOtherScopeShownIsABudget) {
  const run_result r =
      run("tune --rate 200 --clients 4 --workers 10 --p50 20ms --p99 100ms --deadline 250ms --json",
          false);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  if (!doc.at("other_scope").is_null()) {
    EXPECT_NE(doc.at("other_scope").at("policy").at("budget").at("kind"), "none")
        << doc.at("other_scope").dump();
  }
}

// A capacity that is not a whole number of workers of --p50 is said, with what is simulated.
TEST_F(TuneCli, ACapacityRoundedToWholeWorkersIsSaid) {
  const run_result r = run("tune --rate 20 --clients 2 --capacity 49 --max-candidates 4");
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;
  EXPECT_NE(r.output.find("--capacity 49: 0.98 workers of --p50 20ms each"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1 worker, 50 req/s"), std::string::npos) << r.output;
}

// Output files: "-" and two flags naming one file are refused before anything runs; a file that
// cannot be written is found before the search, and then no other file is written either.
TEST_F(TuneCli, OutputFilesAreCheckedBeforeAnyIsWritten) {
  const std::string s = write("s.json", k_storm);
  const std::string x = (dir_ / "x.json").string();
  const run_result same = run("tune " + s + " --out " + x + " --export grpc:" + x);
  EXPECT_EQ(same.exit_code, 2) << same.output;
  EXPECT_NE(same.output.find("--out and --export name the same file"), std::string::npos)
      << same.output;
  EXPECT_FALSE(std::filesystem::exists(x));
  // In the scratch folder, where a file named "-" would be written.
  const run_result dash = stormguard::test_util::run_shell(
      "cd '" + dir_.string() + "' && '" + STORMGUARD_CLI_PATH + "' tune " + s + " --out - 2>&1");
  EXPECT_EQ(dash.exit_code, 2) << dash.output;
  EXPECT_NE(dash.output.find("--out -: standard output carries the report"), std::string::npos)
      << dash.output;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "-"));
  const run_result half =
      run("tune " + s + " --out " + x + " --export grpc:" + (dir_ / "no/such/dir/c.json").string());
  EXPECT_EQ(half.exit_code, 1) << half.output;
  EXPECT_NE(half.output.find("--export: cannot write"), std::string::npos) << half.output;
  EXPECT_EQ(half.output.find("recommended policy"), std::string::npos) << half.output;
  EXPECT_FALSE(std::filesystem::exists(x));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);  // s.json alone
}

// The policy file names the gRPC codes its service config retries (UNAVAILABLE, for 503 and the
// other statuses), so that a gRPC client reading the file retries what the export does.
TEST_F(TuneCli, ThePolicyFileHasTheGrpcCodesOfItsExport) {
  const std::string s = write("s.json", k_storm);
  const std::string out = (dir_ / "tuned.json").string();
  const std::string grpc = (dir_ / "service-config.json").string();
  const run_result t = run("tune " + s + " --out " + out + " --export grpc:" + grpc);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const auto policy = nlohmann::json::parse(read(out)).at("policies")[0];
  const auto method = nlohmann::json::parse(read(grpc)).at("methodConfig")[0];
  ASSERT_TRUE(method.contains("retryPolicy")) << method.dump();
  EXPECT_EQ(policy.at("retryable_grpc_codes"), method.at("retryPolicy").at("retryableStatusCodes"))
      << policy.dump() << method.dump();
  // No temporary file is left beside them: s.json, tuned.json, service-config.json.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 3);
}

TEST_F(TuneCli, AnImpossibleGoalExitsThreeWithItsReason) {
  const run_result over = run("tune --rate 6000 --workers 100 --p50 20ms");
  EXPECT_EQ(over.exit_code, 3) << over.output;
  EXPECT_NE(over.output.find("above the server's healthy capacity"), std::string::npos)
      << over.output;
  const std::string s = write("s.json", k_storm);
  const std::string out = (dir_ / "never.json").string();
  const run_result strict =
      run("tune " + s + " --max-candidates 8 --min-success 0.999 --out " + out);
  EXPECT_EQ(strict.exit_code, 3) << strict.output;
  EXPECT_NE(strict.output.find("no policy tried meets the goal"), std::string::npos)
      << strict.output;
  EXPECT_NE(strict.output.find("below 99.90 %"), std::string::npos) << strict.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// 20,000 clients of 0.1 req/s each, at a tenth of the load (2,000 clients, 200 req/s): a floor per
// process multiplies by the clients, a ratio per process never reaches one retry; the policy the
// search keeps is a fleet budget, and the report shows the per-process budget failing beside it.
// (Whether any policy meets the whole goal at this rate per process is the fleet budget's matter:
// docs/tune.md, "20,000 clients".)
TEST_F(TuneCli, ManySmallClientsGetAFleetBudget) {
  const run_result r = run("tune --rate 200 --clients 2000 --workers 10 --p50 20ms --json", false);
  ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  EXPECT_TRUE(doc.at("policy").at("budget").contains("fleet")) << doc.at("policy").dump();
  ASSERT_FALSE(doc.at("other_scope").is_null());
  EXPECT_FALSE(doc.at("other_scope").at("met").get<bool>()) << doc.at("other_scope").dump();
  EXPECT_FALSE(doc.at("other_scope").at("policy").at("budget").contains("fleet"));
}

#endif  // STORMGUARD_CLI_PATH

}  // namespace
