// Tests of `stormguard simulate` as a user runs it: the built executable, its output and its exit
// codes. Skipped when the CLI is not built (STORMGUARD_CLI_PATH undefined).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "stormguard/sim/scenario.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct run_result {
  int exit_code = -1;
  std::string output;  // stdout, then stderr
};

// Runs the CLI with `args` (already shell-quoted) and captures stdout and stderr.
run_result run_cli(const std::string& args, bool with_stderr = true) {
  const std::string command = std::string("'") + STORMGUARD_CLI_PATH + "' " + args +
                              (with_stderr ? " 2>&1" : " 2>/dev/null");
  run_result result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
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

TEST_F(SimulateCli, BrokenScenarioFileExitsOneNamingTheField) {
  const std::string good = stormguard::sim::to_json(stormguard::sim::friday_night());
  std::string bad = good;
  bad.replace(bad.find("\"workers\": 100"), 14, "\"workers\": -3");
  const auto r = run_cli("simulate '" + write("bad.json", bad) + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("server.workers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-3"), std::string::npos) << r.output;

  const auto missing = run_cli("simulate " + path("missing.json"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("missing.json"), std::string::npos) << missing.output;

  const auto syntax = run_cli("simulate '" + write("syntax.json", "{\n\"name\": \"x\"\n") + "'");
  EXPECT_EQ(syntax.exit_code, 1);
  EXPECT_NE(syntax.output.find("line"), std::string::npos) << syntax.output;
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

TEST_F(SimulateCli, ShippedScenarioFilesRun) {
  // no-incident.json is the full-size scenario; one strategy keeps this fast.
  const auto r = run_cli(std::string("simulate '") + STORMGUARD_SOURCE_DIR +
                         "/scenarios/no-incident.json' -s none --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"amplification\":1.0000"), std::string::npos) << r.output;
}

#else

TEST(SimulateCli, SkippedWithoutTheCli) { GTEST_SKIP() << "STORMGUARD_CLI_PATH is not defined"; }

#endif

}  // namespace
