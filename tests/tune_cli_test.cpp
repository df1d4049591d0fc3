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
      {"--rate -5", "--rate must be a number in (0, 166666], got \"-5\""},
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
