// SPDX-License-Identifier: Apache-2.0
// A broken stderr must not change what stormguard does: every command, with stderr on /dev/full
// (writes fail with ENOSPC), closed (`2>&-`, EBADF) or a pipe whose reader has gone (EPIPE and
// SIGPIPE), makes the same attempts and exits with the same status as with a working stderr.
// Diagnostics are a side effect (cli/output.hpp). Skipped when the CLI is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_runner.hpp"
#include "support/http_test_server.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using stormguard::test_support::program_run;
using stormguard::test_support::run_program;
using stormguard::test_support::scripted_response;
using stormguard::test_support::stderr_mode;

std::string mode_name(const ::testing::TestParamInfo<stderr_mode>& info) {
  switch (info.param) {
    case stderr_mode::capture:
      return "Captured";
    case stderr_mode::dev_full:
      return "DevFull";
    case stderr_mode::closed:
      return "Closed";
    case stderr_mode::broken_pipe:
      return "BrokenPipe";
  }
  return "Unknown";
}

class BrokenStderr : public ::testing::TestWithParam<stderr_mode> {
 protected:
  void SetUp() override {
    if (GetParam() == stderr_mode::dev_full && !fs::exists("/dev/full")) {
      GTEST_SKIP() << "no /dev/full";
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info->name();
    for (char& c : name) {
      if (c == '/') c = '-';
    }
    dir_ = fs::temp_directory_path() /
           ("stormguard-stderr-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  program_run run(std::vector<std::string> args) const {
    args.insert(args.begin(), STORMGUARD_CLI_PATH);
    return run_program(args, GetParam());
  }
  // A script that counts its runs in "count" and succeeds from run `succeed_at` on (never when 0),
  // exiting 3 before.
  std::string counting_script(int succeed_at) const {
    const fs::path path = dir_ / "script.sh";
    std::ofstream(path) << "echo run >> '" << (dir_ / "count").string() << "'\n"
                        << "n=$(wc -l < '" << (dir_ / "count").string() << "')\n"
                        << "[ " << succeed_at << " -gt 0 ] && [ \"$n\" -ge " << succeed_at
                        << " ] && exit 0\nexit 3\n";
    return path.string();
  }
  int runs() const {
    std::ifstream in(dir_ / "count");
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

  fs::path dir_;
};

TEST_P(BrokenStderr, ExecRetriesAsWithAWorkingStderr) {
  const auto r = run(
      {"exec", "--retries", "5", "--base", "1ms", "--cap", "1ms", "--", "sh", counting_script(3)});
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(runs(), 3);
}

TEST_P(BrokenStderr, ExecGivesUpWithTheCommandsStatus) {
  const auto r = run(
      {"exec", "--retries", "2", "--base", "1ms", "--cap", "1ms", "--", "sh", counting_script(0)});
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(runs(), 3);
}

TEST_P(BrokenStderr, ExecWarningsDoNotStopTheCommand) {
  const auto r = run({"exec", "--base", "0s", "--retries", "1", "--", "sh", counting_script(0)});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(runs(), 2);
}

TEST_P(BrokenStderr, HttpRetriesAsWithAWorkingStderr) {
  for (const bool verbose : {false, true}) {
    stormguard::test_support::http_test_server server;
    server.script(
        {{.status = 503}, {.status = 503}, {.status = 503}, {.status = 200, .body = "ok"}});
    std::vector<std::string> args{"http", "--base", "1ms", "--cap", "2ms"};
    if (verbose) args.emplace_back("-v");
    args.push_back(server.url("/x"));
    const auto r = run(args);
    EXPECT_EQ(r.exit_code, 0) << "verbose " << verbose;
    EXPECT_EQ(server.requests().size(), 4U) << "verbose " << verbose;
    EXPECT_EQ(r.out, "ok") << "verbose " << verbose;
  }
}

TEST_P(BrokenStderr, StatsSummaryNeverChangesTheOutcome) {
  const auto e = run({"exec", "--stats", "--retries", "5", "--base", "1ms", "--cap", "1ms", "--",
                      "sh", counting_script(3)});
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_EQ(runs(), 3);
  stormguard::test_support::http_test_server server;
  server.script({{.status = 503}, {.status = 200, .body = "ok"}});
  const auto h = run({"http", "--stats", "--base", "1ms", "--cap", "2ms", server.url("/x")});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_EQ(h.out, "ok");
  if (GetParam() == stderr_mode::capture) {
    EXPECT_NE(e.err.find("stormguard exec: stats: attempts 3, retries 2, reason success, slept "),
              std::string::npos)
        << e.err;
    EXPECT_NE(h.err.find("stormguard http: stats: attempts 2, retries 1, reason success, slept "),
              std::string::npos)
        << h.err;
  }
}

TEST_P(BrokenStderr, HttpTransportFailureStillExitsFour) {
  for (const bool verbose : {false, true}) {
    std::vector<std::string> args{"http", "--retries", "0"};
    if (verbose) args.emplace_back("-v");
    args.emplace_back("http://127.0.0.1:1/");
    const auto r = run(args);
    EXPECT_EQ(r.signal, 0);
    EXPECT_EQ(r.exit_code, 4) << "verbose " << verbose;
  }
}

TEST_P(BrokenStderr, HttpFinalErrorMakesEveryAttempt) {
  stormguard::test_support::http_test_server server;
  server.set_fallback({.status = 503});
  const auto r = run({"http", "-v", "--base", "1ms", "--cap", "2ms", server.url("/x")});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(server.requests().size(), 4U);
}

TEST_P(BrokenStderr, UsageErrorsStillExitTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"plan", "--base", "-1s"},
           {"plan", "--bogus"},
           {"exec", "--bogus", "--", "true"},
           {"exec", "--deadline", "0s", "--", "true"},
           {"http", "-H", "NoColon", "http://127.0.0.1:1/"},
           {"http", "-d", "@/nonexistent/stormguard", "http://127.0.0.1:1/"},
           {"simulate", "--seed", "x"},
           {"simulate", "/nonexistent/stormguard.json"},
           {"bogus"},
           {}}) {
    const auto r = run(args);
    EXPECT_EQ(r.signal, 0) << testing::PrintToString(args);
    EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(args);
  }
}

TEST_P(BrokenStderr, PlanStillPrintsThePlan) {
  const auto r = run({"plan", "--retries", "2", "--samples", "10", "--json"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("\"retry\": 2"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Modes, BrokenStderr,
                         ::testing::Values(stderr_mode::dev_full, stderr_mode::closed,
                                           stderr_mode::broken_pipe),
                         mode_name);

#else

TEST(BrokenStderr, SkippedWithoutTheCli) { GTEST_SKIP() << "STORMGUARD_CLI_PATH is not defined"; }

#endif  // STORMGUARD_CLI_PATH

}  // namespace
