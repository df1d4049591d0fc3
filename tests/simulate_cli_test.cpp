// SPDX-License-Identifier: Apache-2.0
// Tests of `stormguard simulate` as a user runs it: the built executable, its output and its exit
// codes. Skipped when the CLI is not built (STORMGUARD_CLI_PATH undefined).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "stormguard/sim/scenario.hpp"
#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

const std::string k_cli = std::string("'") + STORMGUARD_CLI_PATH + "'";

// Runs the CLI with `args` (already shell-quoted) and captures stdout and stderr.
run_result run_cli(const std::string& args, bool with_stderr = true) {
  return run_shell(k_cli + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

// A scratch directory per test, removed afterwards.
class SimulateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("stormguard-cli-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A small, fast storm (a few seconds of simulated time), written in the file format.
    stormguard::sim::scenario s = stormguard::sim::friday_night();
    s.name = "cli-storm";
    s.length = 6s;
    s.requests_per_second = 400;
    s.clients = 4;
    s.workers = 20;
    s.queue_limit = 1000;
    s.incident = stormguard::sim::incident{1s, 3s, 1500ms};
    write("storm.json", stormguard::sim::to_json(s));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string path(const std::string& name) const { return "'" + (dir_ / name).string() + "'"; }

  fs::path dir_;
};

TEST_F(SimulateCli, SameSeedGivesByteIdenticalJson) {
  const auto first = run_cli("simulate " + path("storm.json") + " --json --seed 5", false);
  const auto second = run_cli("simulate " + path("storm.json") + " --json --seed 5", false);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output, second.output);
  EXPECT_EQ(first.output.rfind("{\"scenario\":\"cli-storm\",\"seed\":5,\"strategies\":[", 0), 0u)
      << first.output;
  const auto other = run_cli("simulate " + path("storm.json") + " --json --seed 6", false);
  EXPECT_NE(first.output, other.output);
}

TEST_F(SimulateCli, PrintsOneTableRowPerChosenStrategy) {
  const auto r = run_cli("simulate " + path("storm.json") + " --strategy naive -s full+budget");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("cli-storm: 400 logical req/s", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("\nnaive "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nfull+budget "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\nexponential "), std::string::npos) << r.output;
}

TEST_F(SimulateCli, UnknownStrategyIsAUsageErrorListingTheValidOnes) {
  const auto r = run_cli("simulate " + path("storm.json") + " --strategy fancy");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("fancy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("none, naive, exponential, equal, full, decorrelated, full+budget"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("hedged, hedged+fleet, hedged-unbudgeted"), std::string::npos)
      << r.output;
}

// `hedged+fleet` is a built-in by name, on the command line as in the library: friday-night
// from 2,000 clients holds the incident under 1.15x with it and not with `hedged` (per-client
// budgets).
TEST_F(SimulateCli, HedgedFleetRunsByNameAndHoldsTheIncidentAt2000Clients) {
  const auto r =
      run_cli("simulate friday-night --clients 2000 -s hedged,hedged+fleet --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  ASSERT_EQ(doc.at("strategies").size(), 2u) << r.output;
  const auto& per_client = doc.at("strategies").at(0);
  const auto& fleet = doc.at("strategies").at(1);
  EXPECT_EQ(fleet.at("name"), "hedged+fleet");
  EXPECT_GT(per_client.at("incident_amplification").get<double>(), 1.15) << r.output;
  EXPECT_LE(fleet.at("incident_amplification").get<double>(), 1.15) << r.output;
  EXPECT_GT(fleet.at("hedges_sent").get<std::int64_t>(), 0) << r.output;
  EXPECT_FALSE(fleet.at("recovery_s").is_null()) << r.output;
}

TEST_F(SimulateCli, NegativeOrNonNumericSeedIsAUsageError) {
  for (const char* seed :
       {"--seed=-1", "--seed abc", "--seed 1.5", "--seed ''", "--seed 18446744073709551616"}) {
    const auto r = run_cli("simulate " + path("storm.json") + " " + seed);
    EXPECT_EQ(r.exit_code, 2) << seed << ": " << r.output;
  }
  EXPECT_EQ(
      run_cli("simulate " + path("storm.json") + " --seed 18446744073709551615 --json").exit_code,
      0);
}

TEST_F(SimulateCli, UnknownOptionIsAUsageError) {
  EXPECT_EQ(run_cli("simulate --frobnicate").exit_code, 2);
}

// A bad file that an argument names is a usage error (2), as `http -d @missing` (docs/cli.md).
TEST_F(SimulateCli, BrokenScenarioFileExitsTwoNamingTheField) {
  const std::string good = stormguard::sim::to_json(stormguard::sim::friday_night());
  std::string bad = good;
  bad.replace(bad.find("\"workers\": 100"), 14, "\"workers\": -3");
  const auto r = run_cli("simulate '" + write("bad.json", bad) + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("server.workers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-3"), std::string::npos) << r.output;

  const auto missing = run_cli("simulate " + path("missing.json"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("missing.json"), std::string::npos) << missing.output;

  const auto syntax = run_cli("simulate '" + write("syntax.json", "{\n\"name\": \"x\"\n") + "'");
  EXPECT_EQ(syntax.exit_code, 2);
  EXPECT_NE(syntax.output.find("line"), std::string::npos) << syntax.output;
}

TEST_F(SimulateCli, ScenarioAboveTheWorkBoundExitsTwoWithTheEstimateBeforeAnyWork) {
  // A thousand retries for an hour: ~10^10 attempts, which used to run for minutes.
  stormguard::sim::scenario s = stormguard::sim::friday_night();
  s.length = 1h;
  s.requests_per_second = 2777;
  s.max_retries = 1000;
  s.incident = stormguard::sim::incident{0s, 1h, std::nullopt, 1.0, 0.0};
  const auto r = run_cli("simulate '" + write("work.json", stormguard::sim::to_json(s)) + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("stormguard simulate: error: max_retries: the run of \"naive\" would "
                          "make up to 10,007,197,200 attempts"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("at most 50,000,000 are allowed"), std::string::npos) << r.output;
  // A sweep is checked at its largest load.
  s.length = 10s;
  s.incident = stormguard::sim::incident{1s, 2s, std::nullopt, 1.0, 0.0};
  const auto sweep = run_cli("simulate '" + write("sweep.json", stormguard::sim::to_json(s)) +
                             "' --sweep load=10:9000:4495");
  EXPECT_EQ(sweep.exit_code, 2) << sweep.output;
  EXPECT_NE(sweep.output.find("at most 50,000,000 are allowed"), std::string::npos) << sweep.output;
}

TEST_F(SimulateCli, CsvWritesOneTimeSeriesPerStrategyCreatingTheDirectory) {
  const auto r = run_cli("simulate " + path("storm.json") + " -s none -s full+budget --csv " +
                         path("out/series"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"none.csv", "full+budget.csv"}) {
    std::ifstream in(dir_ / "out" / "series" / name);
    ASSERT_TRUE(in) << name;
    std::string header;
    std::getline(in, header);
    EXPECT_EQ(header, "t,logical_requests,attempts,successes,failures,timeouts,queue_length");
    int rows = 0;
    for (std::string line; std::getline(in, line);) ++rows;
    EXPECT_EQ(rows, 6) << name;
  }
}

TEST_F(SimulateCli, CsvIntoAnUncreatableDirectoryIsAClearError) {
  write("file", "not a directory");
  const auto r = run_cli("simulate " + path("storm.json") + " -s none --csv " + path("file/sub"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("CSV directory"), std::string::npos) << r.output;
}

TEST_F(SimulateCli, UnknownSubcommandIsAUsageErrorNamingIt) {
  for (const char* word : {"frobnicate", "help"}) {
    const auto r = run_cli(word);
    EXPECT_EQ(r.exit_code, 2) << word;
    EXPECT_NE(r.output.find(std::string("unknown subcommand \"") + word + "\""), std::string::npos)
        << r.output;
  }
  const auto none = run_cli("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.output.find("a subcommand is required"), std::string::npos) << none.output;
}

TEST_F(SimulateCli, WriteErrorOnStandardOutputExitsOne) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const auto r = run_shell(k_cli + " simulate " + path("storm.json") + " -s none 2>&1 >/dev/full");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot write to standard output"), std::string::npos) << r.output;
}

TEST_F(SimulateCli, EmptyCsvDirectoryIsAUsageError) {
  const auto r = run_cli("simulate " + path("storm.json") + " -s none --csv ''");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--csv"), std::string::npos) << r.output;
}

TEST_F(SimulateCli, CsvWriteErrorIncludesTheSystemReason) {
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc";
  const auto r = run_cli("simulate " + path("storm.json") + " -s none --csv /proc/self");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot write \"/proc/self/none.csv\": "), std::string::npos) << r.output;
}

TEST_F(SimulateCli, DuplicateStrategyIsAUsageErrorNamingIt) {
  for (const char* args : {"-s none,none", "-s none -s none", "-s full,naive,full"}) {
    const auto r = run_cli("simulate " + path("storm.json") + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find("is given more than once"), std::string::npos) << r.output;
  }
}

TEST_F(SimulateCli, EmptyStrategyNameIsAClearUsageError) {
  for (const char* args : {"-s ,", "-s ''", "-s none,"}) {
    const auto r = run_cli("simulate " + path("storm.json") + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find("empty strategy name"), std::string::npos) << r.output;
  }
}

TEST_F(SimulateCli, OversizedScenarioFileIsRejectedNamingTheLimit) {
  const auto r =
      run_cli("simulate '" + write("big.json", std::string(2 * 1024 * 1024, ' ') + "{}") + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("big.json: the scenario file is larger than 1048576 bytes (1 MiB)"),
            std::string::npos)
      << r.output;
}

TEST_F(SimulateCli, DurationErrorsQuoteTheTextAsWritten) {
  std::string text = stormguard::sim::to_json(stormguard::sim::friday_night());
  text.replace(text.find("\"timeout\": \"1s\""), 15, "\"timeout\": \"0ms\"");
  const auto r = run_cli("simulate '" + write("zero.json", text) + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("timeout: must be in (0, 1h], got \"0ms\""), std::string::npos)
      << r.output;
}

TEST_F(SimulateCli, SingleStrategyProseDoesNotCompareItWithItself) {
  const auto r = run_cli("simulate " + path("storm.json") + " -s none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("ranged from"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Every strategy"), std::string::npos) << r.output;
}

TEST_F(SimulateCli, OutOfMemoryIsACleanErrorNotAnAbort) {
#ifdef STORMGUARD_TEST_SANITIZED
  GTEST_SKIP() << "sanitizers reserve more address space than the limit below";
#else
  // The largest valid scenario (10,000,000 requests) under a 200 MB address-space limit.
  stormguard::sim::scenario s = stormguard::sim::friday_night();
  s.length = 1h;
  s.requests_per_second = 2777;
  const std::string file = write("huge.json", stormguard::sim::to_json(s));
  const auto r =
      run_shell("ulimit -v 200000 && " + k_cli + " simulate '" + file + "' -s none 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("out of memory"), std::string::npos) << r.output;
#endif
}

TEST_F(SimulateCli, ShippedScenarioFilesRun) {
  // no-incident.json is the full-size scenario; one strategy keeps this fast.
  const auto r = run_cli(std::string("simulate '") + STORMGUARD_SOURCE_DIR +
                         "/scenarios/no-incident.json' -s none --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"amplification\":1.0000"), std::string::npos) << r.output;
}

TEST_F(SimulateCli, BuiltInScenariosRunByName) {
  const auto r = run_cli("simulate outage-80 -s none --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("{\"scenario\":\"outage-80\",\"seed\":42,\"strategies\":[", 0), 0u)
      << r.output;
  EXPECT_NE(r.output.find("\"incident_amplification\":1.0000"), std::string::npos) << r.output;
}

TEST_F(SimulateCli, BrookerOccSweepIsTheSameForOneAndTwoThreads) {
  const std::string args = "simulate brooker-occ --trials 3 --sweep clients=10:20:10 --json";
  const auto one = run_cli(args + " --threads 1", false);
  const auto two = run_cli(args + " --threads 2", false);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(one.output, two.output);
  EXPECT_EQ(one.output.rfind("{\"scenario\":\"brooker-occ\",\"seed\":42,\"trials\":3,\"sweep\":[{"
                             "\"clients\":10,\"algorithm\":\"none\",\"calls\":",
                             0),
            0u)
      << one.output;
  EXPECT_NE(one.output.find("{\"clients\":20,\"algorithm\":\"decorrelated\""), std::string::npos);
}

TEST_F(SimulateCli, OptionsThatDoNotApplyAreUsageErrors) {
  for (const char* args : {"brooker-occ -s full",
                           "brooker-occ --sweep load=1:2:1",
                           "brooker-occ --trials 0",
                           "brooker-occ --layers 2",
                           "--trials 5",
                           "layers --sweep load=1:2:1",
                           "layers --layers 7",
                           "--sweep clients=0:2:1",
                           "--sweep clients=20,20",
                           "--clients 0",
                           "layers --clients 5",
                           "brooker-occ --scale 0.5",
                           "--scale 2",
                           "--store-rtt 11s",
                           "--store-outage 5s:2s",
                           "--store-capacity 0",
                           "--store-capacity 0.5",
                           "--store-capacity 2000000000",
                           "--store-capacity nan",
                           "--store-capacity lots",
                           "layers --store-capacity 100",
                           "--fleet-sync 5ms",
                           "--fleet-shards 0",
                           "--fleet-shards 1025",
                           "--fleet-shards many",
                           "friday-night-fleet --store-capacity 1 --fleet-shards auto",
                           "layers --fleet-shards 2",
                           "friday-night -s full --fleet-shards 2",
                           "friday-night -s none -s full+budget --store-capacity 100",
                           "--sweep load=1:2:0",
                           "--sweep load=5",
                           "--threads 0",
                           "--plot out.pdf"}) {
    const auto r = run_cli(std::string("simulate ") + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find("error:"), std::string::npos) << args << ": " << r.output;
  }
}

// The store's flags change only fleet budgets: with no such strategy selected they are refused,
// naming the flag, rather than changing nothing.
TEST_F(SimulateCli, StoreFlagsWithoutAFleetStrategyAreRefusedNamingTheFlag) {
  for (const std::string flag : {"--store-rtt 1ms", "--store-outage 10s:12s",
                                 "--store-capacity 1000", "--fleet-sync 1s", "--fleet-shards 2"}) {
    const auto r = run_cli("simulate friday-night -s full -s full+budget " + flag);
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.output;
    EXPECT_NE(r.output.find(flag.substr(0, flag.find(' ')) +
                            " applies to strategies with a fleet budget, and none of the 2 "
                            "selected has one"),
              std::string::npos)
        << r.output;
  }
  EXPECT_EQ(
      run_cli("simulate friday-night -s full -s full+fleet --fleet-shards 2", false).exit_code, 0);
}

// --store-capacity: a bad value names the flag, its range and the value; a store far below what
// the fleet asks saturates (syncs wait past the syncer's timeout), an unlimited one never does.
TEST_F(SimulateCli, StoreCapacityQueuesTheSyncsBeyondIt) {
  const auto bad = run_cli("simulate friday-night-fleet -s full+fleet --store-capacity 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--store-capacity must be a number of syncs per second in [1, "
                            "1000000000] or unlimited, got \"0\""),
            std::string::npos)
      << bad.output;
  const auto small =
      run_cli("simulate friday-night-fleet -s full+fleet --store-capacity 500 --json", false);
  ASSERT_EQ(small.exit_code, 0) << small.output;
  const auto row = nlohmann::json::parse(small.output).at("strategies").at(0);
  EXPECT_LE(row.at("store_busiest_second").get<int>(), 500) << row.dump();
  EXPECT_GT(row.at("store_sync_timeouts").get<int>(), 0) << row.dump();
  const auto unlimited =
      run_cli("simulate friday-night-fleet -s full+fleet --store-capacity unlimited --json", false);
  ASSERT_EQ(unlimited.exit_code, 0) << unlimited.output;
  const auto free_row = nlohmann::json::parse(unlimited.output).at("strategies").at(0);
  EXPECT_GT(free_row.at("store_busiest_second").get<int>(), 500) << free_row.dump();
  EXPECT_EQ(free_row.at("store_sync_timeouts").get<int>(), 0) << free_row.dump();
}

// --fleet-shards keeps each fleet budget in K shards, each a store of --store-capacity: a store
// that one key saturates serves every sync in time over eight.
TEST_F(SimulateCli, FleetShardsSpreadTheSyncsOverStores) {
  const auto bad = run_cli("simulate friday-night-fleet -s full+fleet --fleet-shards 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--fleet-shards must be an integer in [1, 1024] or auto, got \"0\""),
            std::string::npos)
      << bad.output;
  for (const char* shards : {"8", "auto"}) {
    const auto r = run_cli(std::string("simulate friday-night-fleet -s full+fleet "
                                       "--store-capacity 1000 --json --fleet-shards ") +
                               shards,
                           false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto row = nlohmann::json::parse(r.output).at("strategies").at(0);
    EXPECT_LE(row.at("store_busiest_second").get<int>(), 500) << shards << row.dump();
    EXPECT_EQ(row.at("store_sync_timeouts").get<int>(), 0) << shards << row.dump();
  }
}

// --clients beside a clients sweep would be ignored (the sweep sets the fleet size): refused.
TEST_F(SimulateCli, ClientsSweepWithClientsIsRefused) {
  const auto r = run_cli("simulate --sweep clients=20,200 --clients 5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--clients and --sweep clients=... both set the fleet size"),
            std::string::npos)
      << r.output;
  const auto bad = run_cli("simulate --sweep foo=1");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("load=LO:HI:STEP or clients=LIST|LO:HI:STEP"), std::string::npos)
      << bad.output;
}

TEST_F(SimulateCli, ClientsSweepSpreadsTheLoadOverEachFleetSize) {
  const auto r = run_cli("simulate --sweep clients=1,2000 -s full+budget,full+fleet --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("{\"scenario\":\"friday-night\",\"seed\":42,\"sweep\":[{\"clients\":1,"
                           "\"strategy\":\"full+budget\",\"amplification\":1.0386",
                           0),
            0u)
      << r.output;
  // At 2,000 clients of 1 req/s the per-client budgets let the storm through; the fleet's does not.
  EXPECT_NE(r.output.find("{\"clients\":2000,\"strategy\":\"full+budget\","
                          "\"amplification\":3.4299"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("{\"clients\":2000,\"strategy\":\"full+fleet\","
                          "\"amplification\":1.0428"),
            std::string::npos)
      << r.output;
  // Every member of every row, in order; figures as the table rounds them.
  const auto doc = nlohmann::json::parse(r.output);
  ASSERT_EQ(doc.at("sweep").size(), 4u) << r.output;
  for (const auto& row : doc.at("sweep")) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : row.items()) keys.push_back(k);
    EXPECT_EQ(keys.size(), 7u) << row.dump();
    EXPECT_TRUE(row.contains("incident_amplification") && row.contains("success_ratio") &&
                row.contains("recovery_s") && row.contains("store_load"))
        << row.dump();
    // The store's load only where a fleet budget has a store: a share of its 29,000 syncs/s.
    if (row.at("strategy") == "full+fleet") {
      EXPECT_GT(row.at("store_load").get<double>(), 0.0) << row.dump();
      EXPECT_LT(row.at("store_load").get<double>(), 1.0) << row.dump();
    } else {
      EXPECT_TRUE(row.at("store_load").is_null()) << row.dump();
    }
  }
  const auto same = run_cli("simulate friday-night-fleet -s full+budget --clients 1 --json", false);
  EXPECT_NE(same.output.find("\"amplification\":1.0386"), std::string::npos) << same.output;
}

TEST_F(SimulateCli, LayersPrintsTheBottomAmplification) {
  const auto r = run_cli("simulate layers --layers 2 -s full --json --csv " + path("out"), false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("{\"scenario\":\"layers\",\"seed\":42,\"layers\":2,", 0), 0u)
      << r.output;
  EXPECT_NE(r.output.find("\"retries_at\":\"every layer\""), std::string::npos);
  EXPECT_NE(r.output.find("\"bottom_amplification\":16.0000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"bottom_amplification\":4.0000"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "out" / "layers.csv"));
}

TEST_F(SimulateCli, LoadSweepReportsWhereEachStrategyStopsRecovering) {
  const auto r = run_cli("simulate metastable -s full,full+budget --sweep load=250:280:30 --csv " +
                         path("out"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("full: recovers up to 250 req/s; no longer recovers from 280 req/s."),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("full+budget widens the stable region of full"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "metastable-sweep.csv"));
  const auto calm = run_cli("simulate no-incident --sweep load=100:200:100");
  EXPECT_EQ(calm.exit_code, 2) << calm.output;  // --sweep does not suit the scenario
  EXPECT_NE(calm.output.find("incident"), std::string::npos) << calm.output;
}

TEST_F(SimulateCli, CsvFilesStayInTheDirectoryWhateverTheScenarioName) {
  // A scenario named "../../escape": its sweep CSV was written two directories above --csv.
  stormguard::sim::scenario s = stormguard::sim::friday_night();
  s.name = "../../escape";
  s.length = 6s;
  s.requests_per_second = 200;
  s.clients = 2;
  s.workers = 20;
  s.queue_limit = 1000;
  s.incident = stormguard::sim::incident{1s, 3s, 1500ms};
  write("hostile.json", stormguard::sim::to_json(s));
  const auto r = run_cli("simulate " + path("hostile.json") +
                         " -s none --sweep load=200:200:100 --csv " + path("out/deep"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "escape-sweep.csv"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "deep" / ".._.._escape-sweep.csv"));
}

bool have_gnuplot() { return run_shell("command -v gnuplot >/dev/null 2>&1").exit_code == 0; }

TEST_F(SimulateCli, PlotWritesAnImageAndSaysWhere) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (scripts/bootstrap)";
  const auto r =
      run_cli("simulate " + path("storm.json") + " -s naive,full --plot " + path("storm.svg"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote the plot " + (dir_ / "storm.svg").string()), std::string::npos)
      << r.output;
  std::ifstream in(dir_ / "storm.svg");
  std::stringstream svg;
  svg << in.rdbuf();
  EXPECT_NE(svg.str().find("<svg"), std::string::npos);
  const auto png = run_cli("simulate layers --layers 1 -s none --plot " + path("layers.png"));
  ASSERT_EQ(png.exit_code, 0) << png.output;
  std::ifstream image(dir_ / "layers.png", std::ios::binary);
  char magic[4] = {};
  image.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
}

TEST_F(SimulateCli, PlotIntoAMissingDirectoryFailsBeforeSimulating) {
  const auto r = run_cli("simulate -s none --plot " + path("missing/storm.png"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
}

TEST_F(SimulateCli, APlotThatCannotBeDrawnKeepsTheResults) {
  // Without gnuplot on the PATH the plot fails after the run: the table must still be printed.
  const auto r = run_shell("PATH=/nonexistent " + k_cli + " simulate " + path("storm.json") +
                           " -s none --plot " + path("storm.png") + " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("strategy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("none"), std::string::npos) << r.output;
}

TEST_F(SimulateCli, LayersBeyondSixAreRefusedAndWideTablesStaySeparated) {
  const auto refused = run_cli("simulate layers --layers 7");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--layers must be an integer in [1, 6], got \"7\""),
            std::string::npos)
      << refused.output;
  // Per-layer columns are 9 wide, so 6 layers' "1024.00x 4096.00x" keep a space between them.
  const auto table = run_cli("simulate layers --layers 2 -s naive", false);
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("    4.00x   16.00x"), std::string::npos) << table.output;
}

TEST_F(SimulateCli, ProgressBarOnlyWhenStderrIsATerminal) {
  const std::string args = "simulate brooker-occ --trials 2 --sweep clients=10:30:10";
  const auto piped = run_cli(args);  // stderr into the pipe: not a terminal
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find('\r'), std::string::npos);
  EXPECT_EQ(piped.output.find("%"), std::string::npos);
  if (run_shell("command -v script >/dev/null 2>&1").exit_code != 0) {
    GTEST_SKIP() << "no script(1) to provide a terminal";
  }
  // script(1) runs the command on a pseudo-terminal; stdout goes to a file, stderr to the
  // terminal, whose output script copies to our pipe.
  const auto tty = run_shell("script -qec \"" + k_cli + " " + args + " >" +
                             (dir_ / "table.txt").string() + "\" /dev/null");
  EXPECT_NE(tty.output.find("% brooker-occ"), std::string::npos) << tty.output;
  EXPECT_NE(tty.output.find('\r'), std::string::npos);
}

// Which model takes which option comes from the registry (stormguard/sim/models.hpp): an option
// for another model is a usage error naming the models that take it.
TEST(SimulateCliModels, AnOptionForAnotherModelIsAUsageErrorNamingTheModelsThatTakeIt) {
  const auto layers_on_scenario = run_cli("simulate --layers 3");
  EXPECT_EQ(layers_on_scenario.exit_code, 2);
  EXPECT_NE(layers_on_scenario.output.find("--layers applies only to layers"), std::string::npos)
      << layers_on_scenario.output;
  const auto sweep_on_layers = run_cli("simulate layers --sweep load=1:2:1");
  EXPECT_EQ(sweep_on_layers.exit_code, 2);
  EXPECT_NE(sweep_on_layers.output.find(
                "--sweep applies only to time-series scenarios and brooker-occ (not to layers)"),
            std::string::npos)
      << sweep_on_layers.output;
  const auto strategy_on_occ = run_cli("simulate brooker-occ --strategy full");
  EXPECT_EQ(strategy_on_occ.exit_code, 2);
}

#else

TEST(SimulateCli, SkippedWithoutTheCli) { GTEST_SKIP() << "STORMGUARD_CLI_PATH is not defined"; }

#endif

}  // namespace
