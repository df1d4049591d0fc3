// SPDX-License-Identifier: Apache-2.0
// `--policy` and `stormguard policy check` as a user runs them: the built executable, its output
// and exit codes. Skipped when the CLI is not built (STORMGUARD_CLI_PATH undefined).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli_scratch.hpp"
#include "support/http_test_server.hpp"
#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

// A scratch directory for the files of one test, removed afterwards.
class PolicyCli : public stormguard::test_support::cli_scratch {};

// A short time-series scenario so that simulate runs take milliseconds.
const char* const k_scenario = R"({
  "name": "short", "seed": 7, "duration": "4s", "requests_per_second": 200, "clients": 4,
  "timeout": "1s",
  "server": {"workers": 10, "queue_limit": 100, "service_time": "20ms"},
  "incident": {"start": "1s", "end": "2s", "error_rate": 0.5}
})";

const char* const k_ours = R"({"policies": [{"name": "ours", "retries": 2,
  "backoff": {"base": "50ms", "cap": "1s", "jitter": "equal"}, "budget": "concurrency"}]})";

TEST_F(PolicyCli, SimulateRunsAFilePolicyBesideTheBuiltIns) {
  const std::string scenario = write("s.json", k_scenario);
  const std::string policy = write("ours.json", k_ours);
  const run_result r = run("simulate " + scenario + " --json --policy " + policy, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  std::vector<std::string> names;
  for (const auto& s : doc.at("strategies")) names.push_back(s.at("name"));
  ASSERT_EQ(names.size(), 17u);  // the 16 built-ins and "ours"
  EXPECT_EQ(names.front(), "none");
  EXPECT_EQ(names.back(), "ours");
  // Alone with --strategy, also in the table.
  const run_result alone = run("simulate " + scenario + " --policy " + policy + " -s ours");
  EXPECT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_NE(alone.output.find("\nours "), std::string::npos) << alone.output;
  EXPECT_EQ(alone.output.find("\nfull "), std::string::npos) << alone.output;
}

TEST_F(PolicyCli, AFileFullBudgetWithTheBuiltInValuesGivesByteIdenticalJson) {
  const std::string scenario = write("s.json", k_scenario);
  const std::string policy = write("fb.json", R"({"policies": [{"name": "full+budget",
    "retries": 3, "backoff": {"base": "100ms", "cap": "3s", "multiplier": 2, "jitter": "full"},
    "budget": {"kind": "ratio", "ratio": 0.1, "window": "10s", "min_retries_per_second": 10}}]})");
  const run_result builtin = run("simulate " + scenario + " --json", false);
  const run_result file = run("simulate " + scenario + " --json --policy " + policy, false);
  ASSERT_EQ(builtin.exit_code, 0);
  ASSERT_EQ(file.exit_code, 0);
  EXPECT_EQ(file.output, builtin.output);
  const run_result note = run_shell(std::string("'") + STORMGUARD_CLI_PATH + "' simulate " +
                                    scenario + " --policy " + policy + " 2>&1 >/dev/null");
  EXPECT_NE(note.output.find("replaces the built-in strategy"), std::string::npos) << note.output;
}

TEST_F(PolicyCli, ScenarioStrategiesReplaceTheDefaultSet) {
  std::string text = k_scenario;
  text.insert(text.rfind('}'), R"(, "strategies": ["none", {"name": "mine", "retries": 1}])");
  const run_result r = run("simulate " + write("s.json", text) + " --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  ASSERT_EQ(doc.at("strategies").size(), 2u);
  EXPECT_EQ(doc["strategies"][1]["name"], "mine");
}

// --strategy names a scenario's own policy, in simulate and in lab; lab runs the scenario's list
// when --strategy is not given, as simulate does.
TEST_F(PolicyCli, StrategyNamesAScenariosOwnPolicyInSimulateAndLab) {
  std::string text = k_scenario;
  text.replace(text.find("\"4s\""), 4, "\"2s\"");
  text.insert(text.rfind('}'), R"(, "strategies": ["none", {"name": "mine", "retries": 1}])");
  const std::string file = write("s.json", text);
  const auto names = [](const run_result& r) {
    std::vector<std::string> out;
    const auto doc = nlohmann::json::parse(r.output);
    for (const auto& s : doc.at("strategies")) out.push_back(s.at("name").get<std::string>());
    return out;
  };
  const run_result sim = run("simulate " + file + " -s mine --json", false);
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  EXPECT_EQ(names(sim), std::vector<std::string>{"mine"});
  const run_result lab = run("lab " + file + " --scale 0.25 --json", false);
  ASSERT_EQ(lab.exit_code, 0) << lab.output;
  EXPECT_EQ(names(lab), (std::vector<std::string>{"none", "mine"}));
  const run_result unknown = run("lab " + file + " -s nope");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("none, naive"), std::string::npos) << unknown.output;
  EXPECT_NE(unknown.output.find(", mine"), std::string::npos) << unknown.output;
}

TEST_F(PolicyCli, CsvOfAGrpcMethodStaysInTheDirectory) {
  const std::string grpc = write("g.json", R"({"methodConfig": [{"name": [{"service": "a.B",
    "method": "C"}], "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.1s", "maxBackoff":
    "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  const std::string csv = (dir_ / "csv").string();
  const run_result r = run("simulate " + write("s.json", k_scenario) + " --policy grpc:" + grpc +
                           " -s a.B/C --csv " + csv);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ / "csv" / "a.B_C.csv"));
}

TEST_F(PolicyCli, PlanOfAGrpcServiceConfig) {
  const auto grpc = [&](int attempts) {
    return write(
        "g" + std::to_string(attempts) + ".json",
        R"({"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": {"maxAttempts": )" +
            std::to_string(attempts) +
            R"(, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                     "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  };
  const run_result r = run("plan --samples 10 --json --policy grpc:" + grpc(4), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  ASSERT_EQ(doc.at("retries").size(), 3u);
  EXPECT_EQ(doc["retries"][0]["ceiling_ms"], 100.0);
  EXPECT_EQ(doc["retries"][1]["ceiling_ms"], 200.0);
  EXPECT_EQ(doc["retries"][2]["ceiling_ms"], 400.0);
  const run_result capped = run("plan --samples 10 --json --policy grpc:" + grpc(7));
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_NE(capped.output.find("warning: "), std::string::npos);
  EXPECT_NE(capped.output.find("\"retry\": 4"), std::string::npos);
  EXPECT_EQ(capped.output.find("\"retry\": 5"), std::string::npos);
}

TEST_F(PolicyCli, PlanOfAnEnvoyRouteAndATypedFlagOverridesTheFile) {
  const std::string route = write("r.yaml",
                                  "retry_policy:\n  retry_on: 5xx\n  num_retries: 3\n"
                                  "  retry_back_off: {base_interval: 0.025s}\n");
  const run_result r = run("plan --samples 10 --json --policy envoy:" + route, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  ASSERT_EQ(doc.at("retries").size(), 3u);
  EXPECT_EQ(doc["retries"][2]["ceiling_ms"], 100.0);
  const run_result one = run("plan --samples 10 --json --retries 1 --policy envoy:" + route, false);
  EXPECT_EQ(nlohmann::json::parse(one.output).at("retries").size(), 1u);
  const run_result cap = run("plan --samples 10 --base 1s --policy envoy:" + route);
  EXPECT_EQ(cap.exit_code, 2);
  EXPECT_NE(cap.output.find("--base: \"1s\" is above the cap 250ms (the --policy file's)"),
            std::string::npos)
      << cap.output;
}

TEST_F(PolicyCli, ExecTakesTheAttemptsFromThePolicy) {
  const std::string policy = write("p.json", R"({"policies": [{"name": "p", "retries": 1,
    "backoff": {"base": "1ms", "cap": "1ms"}}]})");
  const run_result r = run("exec --policy " + policy + " -- sh -c 'exit 3'");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("attempt 2 exited with status 3; giving up"), std::string::npos)
      << r.output;
}

TEST_F(PolicyCli, PolicyCheckPrintsTheNormalizedPolicyAndItsDelays) {
  const run_result r = run("policy check " + write("p.json", k_ours), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"min_retry_concurrency\": 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"retryable_statuses\": [429, 502, 503, 504]"), std::string::npos);
  EXPECT_NE(r.output.find("retry 2: delay in [50ms, 100ms], worst total 150ms"), std::string::npos)
      << r.output;
  const run_result json = run("policy check --json " + write("p2.json", k_ours), false);
  EXPECT_TRUE(nlohmann::json::accept(json.output)) << json.output;
}

TEST_F(PolicyCli, PolicyCheckSummaryNamesTheTimeLimitsAndTheClientProfile) {
  const run_result r =
      run("policy check " + std::string(STORMGUARD_SOURCE_DIR) + "/policies/clients.json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("go-retryablehttp: 4 retries, jitter none, budget none, attempt timeout "
                          "1s, played as the go-retryablehttp client\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  retry 4: delay in [8s, 8s], worst total 15s"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("browser-fetch: 0 retries, jitter full, budget none, played as the "
                          "browser-fetch client\n"),
            std::string::npos)
      << r.output;
  const run_result retrying = run(
      "policy check " +
          write(
              "b.json",
              R"({"policies": [{"name": "b", "retries": 5, "client_profile": "browser-fetch"}]})"),
      false);
  EXPECT_NE(retrying.output.find("played as the browser-fetch client (which never retries: one "
                                 "attempt per request)"),
            std::string::npos)
      << retrying.output;
}

// Every command that takes a policy file rejects a bad one with exit 2 and the field path.
TEST_F(PolicyCli, BadFilesExitTwoFromEveryCommand) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {R"({"policies": [{"name": "p", "retries": -1}]})", "policies[0].retries"},
      {R"({"policies": [{"name": "p", "backoff": {"jitter": "sometimes"}}]})",
       "policies[0].backoff.jitter"},
      {R"({"policies": [{"name": "p", "budget": {"kind": "ratio", "ratio": "10%"}}]})",
       "policies[0].budget.ratio"},
      {"{\"policies\": [", "invalid JSON"},
  };
  const std::string missing = (dir_ / "missing.json").string();
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string f = write("bad" + std::to_string(i) + ".json", files[i].first);
    for (const std::string& command :
         {"simulate " + write("s.json", k_scenario) + " --policy " + f, "plan --policy " + f,
          "exec --policy " + f + " -- true", "http --policy " + f + " http://127.0.0.1:1/",
          "policy check " + f}) {
      const run_result r = run(command);
      EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
      EXPECT_NE(r.output.find(files[i].second), std::string::npos) << command << "\n" << r.output;
    }
  }
  for (const std::string& command : {"plan --policy " + missing, "policy check " + missing,
                                     "plan --policy grpc:" + missing + ":nope"}) {
    const run_result r = run(command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("cannot open the policy file"), std::string::npos) << r.output;
  }
  const run_result big = run("plan --policy /dev/zero");
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_NE(big.output.find("larger than 1048576 bytes"), std::string::npos) << big.output;
}

// --policy adds strategies: with --strategy naming only others (here `none`), the file's
// policies run after them, never silently dropped.
TEST_F(PolicyCli, APolicyRunsBesideTheStrategiesThatStrategyNames) {
  const std::string scenario = write("s.json", k_scenario);
  const std::string policy = write("ours.json", k_ours);
  const run_result r = run("simulate " + scenario + " --json -s none --policy " + policy, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  std::vector<std::string> names;
  for (const auto& s : doc.at("strategies")) names.push_back(s.at("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"none", "ours"}));
}

TEST_F(PolicyCli, AReplacedBuiltInIsNotedAlsoWhenStrategyChoosesIt) {
  const std::string scenario = write("s.json", k_scenario);
  const std::string policy =
      write("full.json", R"({"policies": [{"name": "full", "retries": 1}]})");
  const run_result chosen = run("simulate " + scenario + " --policy " + policy + " -s full");
  EXPECT_EQ(chosen.exit_code, 0) << chosen.output;
  EXPECT_NE(chosen.output.find("note: the policy \"full\" from --policy replaces the built-in"),
            std::string::npos)
      << chosen.output;
}

TEST_F(PolicyCli, PolicyCheckRefusesOutputThatWouldNotBeAValidPolicyFile) {
  const std::string policy = write("ours.json", k_ours);
  const run_result twice = run("policy check " + policy + " " + policy);
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_NE(twice.output.find("the policy \"ours\" is in"), std::string::npos) << twice.output;
}

// ---------------------------------------------------------------------------------------------
// The built-in strategies as policies, and every kind of budget on every command.
// ---------------------------------------------------------------------------------------------

TEST_F(PolicyCli, PolicyCheckBuiltinPrintsTheBuiltInStrategiesFile) {
  const run_result builtin = run("policy check --json builtin:", false);
  ASSERT_EQ(builtin.exit_code, 0) << builtin.output;
  const run_result file = run(std::string("policy check --json '") + STORMGUARD_SOURCE_DIR +
                                  "/policies/builtin-strategies.json'",
                              false);
  EXPECT_EQ(builtin.output, file.output);
  const auto doc = nlohmann::json::parse(builtin.output);
  ASSERT_EQ(doc["policies"].size(),
            16U);  // ... full+fleet, full+breaker, hedged, hedged+fleet, hedged-unbudgeted
  EXPECT_EQ(doc["policies"][6]["name"], "full+budget");
  EXPECT_EQ(doc["policies"][9]["budget"]["kind"], "adaptive");
  const run_result one = run("policy check --json builtin:full+envoy", false);
  EXPECT_EQ(nlohmann::json::parse(one.output)["policies"][0]["budget"]["kind"], "concurrency");
  const run_result unknown = run("policy check builtin:Full");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("no policy named \"Full\""), std::string::npos) << unknown.output;
}

TEST_F(PolicyCli, ExecSpendsThePolicysBudget) {
  // A quota of 10 tokens at 5 per retry: two retries, then the budget refuses the third.
  const std::string policy = write("q.json", R"({"policies": [{"name": "q", "retries": 9,
    "backoff": {"base": "0s", "cap": "0s", "jitter": "none"},
    "budget": {"kind": "quota", "max_tokens": 10}}]})");
  const run_result r = run("exec --stats --policy '" + policy + "' -- false");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("attempts 3, retries 2, reason budget_exhausted"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the --policy budget (quota) refused the retry"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("is not used"), std::string::npos) << r.output;
}

TEST_F(PolicyCli, HttpSpendsThePolicysBudgetOfAnyKind) {
  stormguard::test_support::http_test_server server;
  server.set_fallback({.status = 503});
  const std::string policy = write("t.json", R"({"policies": [{"name": "t", "retries": 9,
    "backoff": {"base": "1ms", "cap": "1ms"}, "budget": {"kind": "token_bucket", "max_tokens": 4}}]})");
  const run_result r = run("http --policy '" + policy + "' '" + server.url() + "'");
  EXPECT_EQ(r.exit_code, 5) << r.output;                // budget_exhausted
  EXPECT_EQ(server.requests().size(), 2U) << r.output;  // ceil(4 / 2) - 1 = 1 retry
  EXPECT_EQ(r.output.find("is not used"), std::string::npos) << r.output;
}

TEST_F(PolicyCli, AnUnknownPolicySubcommandIsNamed) {
  const run_result bogus = run("policy bogus");
  EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
  EXPECT_NE(bogus.output.find("unknown subcommand \"bogus\""), std::string::npos) << bogus.output;
  EXPECT_NE(bogus.output.find("check"), std::string::npos) << bogus.output;
  const run_result none = run("policy");
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("a subcommand is required (the subcommands of policy: check, export)"),
            std::string::npos)
      << none.output;
}

TEST_F(PolicyCli, PolicyCheckOfAFifoWithNoWriterEndsAtOnce) {
  const std::string fifo = (dir_ / "p.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // `timeout 10`: on a build that waits for a writer the test fails instead of hanging.
  const run_result r = run_shell("timeout 10 '" + std::string(STORMGUARD_CLI_PATH) +
                                 "' policy check '" + fifo + "' 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("a FIFO with no writer connected"), std::string::npos) << r.output;
  // A FIFO with a writer (a shell's process substitution does the same) is read to its end.
  const run_result written = run_shell("(printf '%s' '" + std::string(k_ours) + "' > '" + fifo +
                                       "' &) ; sleep 0.2; timeout 10 '" + STORMGUARD_CLI_PATH +
                                       "' policy check --json '" + fifo + "' 2>&1");
  EXPECT_EQ(written.exit_code, 0) << written.output;
  EXPECT_NE(written.output.find("\"ours\""), std::string::npos) << written.output;
}

// A flag given twice is a usage error like a valued option given twice, in every subcommand.
TEST_F(PolicyCli, EveryRepeatedFlagIsAUsageError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"policy check --json --json builtin:", "--json given twice"},
      {"plan --json --json", "--json given twice"},
      {"simulate no-incident --json --json", "--json given twice"},
      {"lab no-incident --json --json", "--json given twice"},
      {"http -i -i http://127.0.0.1:1/", "-i/--include given twice"},
      {"http --stats --stats http://127.0.0.1:1/", "--stats given twice"},
      {"exec --quiet --quiet -- true", "--quiet given twice"},
      {"serve no-incident --wait-start --wait-start", "--wait-start given twice"},
  };
  for (const auto& [args, message] : cases) {
    const run_result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << ": " << r.output;
  }
}

#endif  // STORMGUARD_CLI_PATH

TEST_F(PolicyCli, PolicyCheckEchoesTheFleetWithoutItsPasswordAndNamesBadFleetFields) {
  // The store is never contacted: port 1 on a name that does not resolve.
  const std::string good = write("f.json", R"({"policies": [{"name": "f", "budget": {"kind":
    "ratio", "fleet": {"store": "redis://app:hunter2@nowhere.invalid:1/0", "key": "checkout-api",
    "sync_interval": "100ms", "password_env": "FLEET_PW"}}}]})");
  const run_result r = run("policy check --json '" + good + "'", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto fleet = nlohmann::json::parse(r.output)["policies"][0]["budget"]["fleet"];
  EXPECT_EQ(fleet["store"], "redis://app:***@nowhere.invalid:1/0");
  EXPECT_EQ(fleet["key"], "checkout-api");
  EXPECT_EQ(fleet["sync_interval"], "100ms");
  EXPECT_EQ(r.output.find("hunter2"), std::string::npos);
  const std::string bad = write("b.json", R"({"policies": [{"name": "f", "budget": {"kind":
    "ratio", "fleet": {"store": "rediss://:hunter2@h", "key": "k"}}}]})");
  const run_result e = run("policy check '" + bad + "'");
  EXPECT_EQ(e.exit_code, 2) << e.output;
  EXPECT_NE(e.output.find("policies[0].budget.fleet.store"), std::string::npos) << e.output;
  EXPECT_NE(e.output.find("TLS"), std::string::npos) << e.output;
  EXPECT_EQ(e.output.find("hunter2"), std::string::npos) << e.output;
}

// ---------------------------------------------------------------------------------------------
// policy export
// ---------------------------------------------------------------------------------------------

class PolicyExportCli : public PolicyCli {};

TEST_F(PolicyExportCli, ExportsToEachTargetAndTheOutputImportsBack) {
  const std::string file = write("p.json", R"({"policies": [{"name": "pkg.Svc/Get", "retries": 2,
    "budget": {"kind": "token_bucket", "max_tokens": 10, "token_ratio": 0.1},
    "retryable_grpc_codes": ["UNAVAILABLE", "ABORTED"], "deadline": "5s"}]})");
  const run_result grpc = run("policy export --to grpc '" + file + "'", false);
  ASSERT_EQ(grpc.exit_code, 0) << grpc.output;
  const auto doc = nlohmann::json::parse(grpc.output);
  EXPECT_EQ(doc["methodConfig"][0]["retryPolicy"]["maxAttempts"], 3);
  EXPECT_EQ(doc["methodConfig"][0]["timeout"], "5s");
  EXPECT_EQ(doc["retryThrottling"]["maxTokens"], 10);
  // -o writes the file, which `policy check grpc:` reads back with both readings.
  const std::string out = (dir_ / "sc.json").string();
  const run_result written = run("policy export --to grpc -o '" + out + "' '" + file + "'");
  ASSERT_EQ(written.exit_code, 0) << written.output;
  EXPECT_EQ(written.output, "");  // nothing lost, nothing said
  const run_result back = run("policy check grpc:'" + out + "'", false);
  ASSERT_EQ(back.exit_code, 0) << back.output;
  EXPECT_NE(back.output.find("retried over HTTP: 429, 502, 503, 504; over gRPC: ABORTED, "
                             "UNAVAILABLE\n"),
            std::string::npos)
      << back.output;
  const run_result envoy = run("policy export --to envoy '" + file + "'", false);
  ASSERT_EQ(envoy.exit_code, 0) << envoy.output;
  EXPECT_TRUE(nlohmann::json::accept(envoy.output)) << envoy.output;
  const run_result linkerd = run("policy export --to linkerd '" + file + "'", false);
  ASSERT_EQ(linkerd.exit_code, 0) << linkerd.output;
  EXPECT_NE(linkerd.output.find("kind: ServiceProfile\n"), std::string::npos) << linkerd.output;
}

TEST_F(PolicyExportCli, WhatTheTargetCannotExpressIsWarnedOnStderr) {
  const std::string cli = std::string("'") + STORMGUARD_CLI_PATH + "' ";
  const run_result r =
      run_shell(cli + "policy export --to grpc builtin:full+budget 2>&1 >/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stormguard policy export: warning: --to grpc: budget: ratio: gRPC has "
                          "no ratio budget"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("warning: --to grpc: name: \"full+budget\""), std::string::npos)
      << r.output;
  const run_result linkerd =
      run_shell(cli + "policy export --to linkerd builtin:hedged 2>&1 >/dev/null");
  EXPECT_EQ(linkerd.exit_code, 0) << linkerd.output;
  EXPECT_NE(linkerd.output.find("--to linkerd: hedging: Linkerd 2 does not hedge"),
            std::string::npos)
      << linkerd.output;
}

TEST_F(PolicyExportCli, BadInputIsAUsageErrorNamingTheFlagAndTheValue) {
  const std::string file = write("p.json", k_ours);
  const run_result target = run("policy export --to istio '" + file + "'");
  EXPECT_EQ(target.exit_code, 2) << target.output;
  EXPECT_NE(target.output.find("stormguard policy export: error: --to: unknown target \"istio\" "
                               "(the targets are envoy, grpc, linkerd)"),
            std::string::npos)
      << target.output;
  const run_result missing_to = run("policy export '" + file + "'");
  EXPECT_EQ(missing_to.exit_code, 2) << missing_to.output;
  EXPECT_NE(missing_to.output.find("--to"), std::string::npos) << missing_to.output;
  const run_result unknown = run("policy export --to envoy builtin:nope");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("POLICY: builtin: no policy named \"nope\""), std::string::npos)
      << unknown.output;
  const run_result name = run("policy export --to envoy '" + file + ":nope'");
  EXPECT_EQ(name.exit_code, 2) << name.output;
  EXPECT_NE(name.output.find("no policy named \"nope\""), std::string::npos) << name.output;
  const run_result absent =
      run("policy export --to envoy '" + (dir_ / "absent.json").string() + "'");
  EXPECT_EQ(absent.exit_code, 2) << absent.output;
  EXPECT_NE(absent.output.find("POLICY: "), std::string::npos) << absent.output;
  const std::string codes =
      write("b.json", R"({"policies": [{"name": "b", "retryable_grpc_codes": ["NOPE"]}]})");
  const run_result bad = run("policy export --to grpc '" + codes + "'");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("policies[0].retryable_grpc_codes[0]: unknown gRPC status code "
                            "\"NOPE\""),
            std::string::npos)
      << bad.output;
}

TEST_F(PolicyExportCli, AnUnwritableOutputIsARunTimeFailureNamingTheFlagAndThePath) {
  const std::string file = write("p.json", k_ours);
  const std::string out = "/nonexistent-stormguard-dir/x.json";  // short: echoed whole
  const run_result r = run("policy export --to envoy -o '" + out + "' '" + file + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // docs/cli.md: an output file that cannot be written
  EXPECT_NE(r.output.find("stormguard policy export: error: -o/--output: cannot write \"" + out +
                          "\": No such file or directory"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
  const run_result empty = run("policy export --to envoy -o '' '" + file + "'");
  EXPECT_EQ(empty.exit_code, 1) << empty.output;  // not stdout
  EXPECT_NE(empty.output.find("-o/--output: cannot write \"\""), std::string::npos) << empty.output;
  const run_result full = run("policy export --to envoy -o /dev/full '" + file + "'");
  EXPECT_EQ(full.exit_code, 1) << full.output;
  EXPECT_NE(full.output.find("-o/--output: cannot write \"/dev/full\""), std::string::npos)
      << full.output;
}

}  // namespace
