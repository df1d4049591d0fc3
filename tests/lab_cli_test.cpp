// SPDX-License-Identifier: Apache-2.0
// `stormguard lab` end to end: a 2-second scenario file, the JSON's two objects per strategy, and
// the exit status of bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "stormguard/sim/scenario.hpp"
#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using stormguard::test_util::k_out_of_descriptors_env;
using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

const std::string k_cli = std::string("'") + STORMGUARD_CLI_PATH + "'";

run_result run_cli(const std::string& args) { return run_shell(k_cli + " " + args + " 2>&1"); }

class LabCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stormguard-lab-cli-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // 2 s at 50 req/s; the incident [0.5 s, 1.5 s) makes every attempt time out.
    stormguard::sim::scenario s = stormguard::sim::friday_night();
    s.name = "cli-lab";
    s.length = 2s;
    s.requests_per_second = 50;
    s.clients = 2;
    s.timeout = 200ms;
    s.workers = 4;
    s.queue_limit = 100;
    s.service_time = 10ms;
    s.incident = stormguard::sim::incident{500ms, 1500ms, 1s};
    file_ = (dir_ / "lab.json").string();
    std::ofstream(file_, std::ios::binary) << stormguard::sim::to_json(s);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string file_;
};

TEST_F(LabCli, JsonHasTheLabAndSimObjectsOfEachStrategy) {
  const bool gnuplot = run_shell("command -v gnuplot >/dev/null 2>&1").exit_code == 0;
  const run_result r = run_cli("lab '" + file_ + "' --scale 1 --strategy naive --json --csv '" +
                               (dir_ / "csv").string() + "'" +
                               (gnuplot ? " --plot '" + (dir_ / "lab.svg").string() + "'" : ""));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"strategies\":[{\"name\":\"naive\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"lab\":{\"name\":\"naive\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"sim\":{\"name\":\"naive\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"incident_amplification\":"), std::string::npos);
  // --plot: the lab's and the simulator's lines ("naive lab", "naive sim").
  if (gnuplot) {
    std::ifstream in(dir_ / "lab.svg");
    const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(svg.find("naive lab"), std::string::npos);
    EXPECT_NE(svg.find("naive sim"), std::string::npos);
  }
  // --csv: both time series, 2 one-second bins each after the header.
  for (const char* name : {"naive-lab.csv", "naive-sim.csv"}) {
    std::ifstream in(dir_ / "csv" / name);
    ASSERT_TRUE(in) << name;
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) ++lines;
    EXPECT_EQ(lines, 3) << name;
  }
}

TEST_F(LabCli, SigintEndsWithAPartialReportAnd130) {
  const run_result r = run_shell(k_cli + " lab '" + file_ +
                                 "' --scale 1 --json 2>/dev/null & pid=$!; sleep 0.7; kill -INT "
                                 "$pid; wait $pid; echo \"status=$?\"");
  EXPECT_NE(r.output.find("\"interrupted\":true"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"completed\":false"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("status=130"), std::string::npos) << r.output;
}

TEST_F(LabCli, AnInterruptedRunSaysItIsNotComparable) {
  const run_result r = run_shell(k_cli + " lab '" + file_ +
                                 "' --scale 1 2>/dev/null & pid=$!; sleep 0.7; kill -INT "
                                 "$pid; wait $pid");
  EXPECT_NE(r.output.find("(stopped early: not comparable)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("a run stopped early is not comparable"), std::string::npos) << r.output;
  const run_result json = run_shell(k_cli + " lab '" + file_ +
                                    "' --scale 1 --json 2>/dev/null & pid=$!; sleep 0.7; kill "
                                    "-INT $pid; wait $pid");
  EXPECT_NE(json.output.find("\"comparable\":false"), std::string::npos) << json.output;
}

// Out of descriptors (a limit of 64, soft and hard: the lab cannot raise it): the run is marked
// invalid, says why, and exits 3 (it exited 0 with figures that contradicted the simulator).
TEST_F(LabCli, ARunThatRunsOutOfDescriptorsIsInvalidAndExitsThree) {
  // 400 req/s, each held 500 ms by the server: ~200 connections in flight, 2 descriptors each.
  const std::string busy = (dir_ / "busy.json").string();
  std::ofstream(busy) << R"({"name": "many-connections", "seed": 7, "duration": "2s",
    "requests_per_second": 400, "clients": 8, "timeout": "2s",
    "server": {"workers": 1000, "queue_limit": 1000, "service_time": "500ms"},
    "incident": {"start": "1s", "end": "1500ms", "error_rate": 0.1}})";
  // k_out_of_descriptors_env: see its comment (UBSan's vptr check needs a pipe).
  const run_result r = run_shell(std::string("(ulimit -n 64 && exec env ") +
                                 k_out_of_descriptors_env + " " + k_cli + " lab '" + busy +
                                 "' --scale 1 --strategy none --json 2>/dev/null); echo "
                                 "\"status=$?\"");
  EXPECT_NE(r.output.find("status=3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"valid\":false"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the lab's own sockets failed"), std::string::npos) << r.output;
  // The same run with the descriptors it needs is valid.
  const run_result fine = run_cli("lab '" + busy + "' --scale 1 --strategy none --json");
  EXPECT_EQ(fine.exit_code, 0) << fine.output;
  EXPECT_NE(fine.output.find("\"valid\":true"), std::string::npos) << fine.output;
}

TEST_F(LabCli, BadInputExitsTwo) {
  EXPECT_EQ(run_cli("lab no-such-scenario").exit_code, 2);
  EXPECT_EQ(run_cli("lab '" + file_ + "' --scale 0").exit_code, 2);
  EXPECT_EQ(run_cli("lab '" + file_ + "' --scale abc").exit_code, 2);
  EXPECT_EQ(run_cli("lab '" + file_ + "' --strategy bogus").exit_code, 2);
  EXPECT_EQ(run_cli("lab '" + file_ + "' --policy /nonexistent.json").exit_code, 2);
  EXPECT_EQ(run_cli("lab '" + file_ + "' --csv ''").exit_code, 2);
  EXPECT_EQ(run_cli("lab '" + file_ + "' --plot out.pdf").exit_code, 2);
  EXPECT_EQ(run_cli("lab").exit_code, 2);
  const run_result transport = run_cli("lab '" + file_ + "' --transport quic");
  EXPECT_EQ(transport.exit_code, 2);
  EXPECT_NE(transport.output.find("--transport"), std::string::npos) << transport.output;
  EXPECT_NE(transport.output.find("quic"), std::string::npos) << transport.output;
  const run_result payments = run_cli("lab payments --transport grpc");
  EXPECT_EQ(payments.exit_code, 2);
  EXPECT_NE(payments.output.find("--transport does not apply to lab payments"), std::string::npos)
      << payments.output;
}

#if defined(STORMGUARD_APP_HAS_GRPC)
TEST_F(LabCli, OverGrpcTheJsonHasTheLabAndSimObjects) {
  const run_result r = run_cli("lab '" + file_ + "' --transport grpc -s none --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"lab\":{\"name\":\"none\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"sim\":{\"name\":\"none\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"transport\":\"grpc\""), std::string::npos) << r.output;
}
#else
TEST_F(LabCli, OverGrpcInABuildWithoutGrpcExitsOne) {
  const run_result r = run_cli("lab '" + file_ + "' --transport grpc -s none");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("built without gRPC"), std::string::npos) << r.output;
}
#endif

#endif  // STORMGUARD_CLI_PATH

}  // namespace
