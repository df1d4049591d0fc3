// SPDX-License-Identifier: Apache-2.0
// `stormguard exec` and `stormguard http` with a policy whose budget is a fleet budget on a real
// Redis (tests/support/redis_server.hpp): separate processes share one fleet's spend through the
// store, and a store that is down, refuses the password or hangs never holds a call up. The
// commands retry a failing `false` (or a loopback server's 503) with millisecond delays.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "support/http_test_server.hpp"
#include "support/redis_server.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using stormguard::test_support::http_test_server;
using stormguard::test_support::redis_server;
using stormguard::test_support::scripted_response;

struct run_result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
  steady::duration elapsed{};
};

run_result run_cli(const std::string& args) {
  run_result result;
  const auto start = steady::now();
  const std::string line = std::string("'") + STORMGUARD_CLI_PATH + "' " + args + " 2>&1";
  FILE* pipe = ::popen(line.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.elapsed = steady::now() - start;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The retries of the --stats line ("stats: attempts N, retries R, ..."), or -1.
int retries_of(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("retries ([0-9]+)"))) return -1;
  return std::stoi(m[1]);
}

// A policy file: 30 retries of 1-2 ms, a fleet budget of ratio 0.1 and a fleet floor of 1
// retry/s over 10 s (10 retries for the whole fleet), on `store` and `key`.
fs::path policy_file(const std::string& name, const std::string& store, const std::string& key) {
  const fs::path path =
      fs::temp_directory_path() / ("stormguard-fleet-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << R"({"policies": [{"name": "f", "retries": 30,
    "backoff": {"base": "1ms", "cap": "2ms"},
    "budget": {"kind": "ratio", "ratio": 0.1, "min_retries_per_second": 1,
               "fleet": {"store": ")"
                      << store << R"(", "key": ")" << key << R"("}}}]})";
  return path;
}

std::string unique_key(const char* name) {
  return std::string("cli-") + name + "-" + std::to_string(getpid());
}

TEST(FleetCli, TwoExecProcessesShareOneFleetBudget) {
  const std::string key = unique_key("exec");
  const fs::path policy = policy_file("exec.json", redis_server::shared().url(), key);
  // The first process spends the fleet's allowance (floor 1/s x 10 s = 10 retries).
  const run_result first = run_cli("exec --policy '" + policy.string() + "' --stats -- false");
  EXPECT_EQ(first.exit_code, 1) << first.output;
  EXPECT_GE(retries_of(first.output), 8) << first.output;
  EXPECT_LE(retries_of(first.output), 11) << first.output;
  // The second sees that spend in the store before its first attempt: at most a fractional draw.
  const run_result second = run_cli("exec --policy '" + policy.string() + "' --stats -- false");
  EXPECT_LE(retries_of(second.output), 1) << second.output;
  EXPECT_NE(second.output.find("reason budget_exhausted"), std::string::npos) << second.output;
  // Another fleet (another key) on the same store has its own allowance.
  const fs::path other = policy_file("other.json", redis_server::shared().url(), key + "-other");
  const run_result third = run_cli("exec --policy '" + other.string() + "' --stats -- false");
  EXPECT_GE(retries_of(third.output), 8) << third.output;
  fs::remove(policy);
  fs::remove(other);
}

TEST(FleetCli, HttpProcessesShareOneFleetBudgetPerHost) {
  http_test_server server;
  server.set_fallback({.status = 503});
  const std::string key = unique_key("http");
  const fs::path policy = policy_file("http.json", redis_server::shared().url(), key);
  const std::string args = "http --policy '" + policy.string() + "' --stats " + server.url("/x");
  const run_result first = run_cli(args);
  EXPECT_GE(retries_of(first.output), 8) << first.output;
  const run_result second = run_cli(args);
  EXPECT_LE(retries_of(second.output), 1) << second.output;
  fs::remove(policy);
}

TEST(FleetCli, StoreDownFallsBackAtOnceAndSaysSo) {
  const std::string url = "redis://127.0.0.1:" + std::to_string(redis_server::unused_port()) + "/0";
  const fs::path policy = policy_file("down.json", url, unique_key("down"));
  const run_result r = run_cli("exec --policy '" + policy.string() + "' --stats -- false");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("falling back to local counts"), std::string::npos) << r.output;
  EXPECT_LT(r.elapsed, 2s);
  // Said once, although the command synced twice (before the first attempt and after the last).
  EXPECT_EQ(r.output.find("falling back"), r.output.rfind("falling back")) << r.output;
  fs::remove(policy);
}

TEST(FleetCli, PasswordIsNeverPrinted) {
  // The test server has no password: AUTH is refused, and the message shows the URL redacted.
  const std::string url =
      "redis://app:s3cr3t-pw@127.0.0.1:" + std::to_string(redis_server::shared().port()) + "/0";
  const fs::path policy = policy_file("pw.json", url, unique_key("pw"));
  const run_result r = run_cli("exec --policy '" + policy.string() + "' -- false");
  EXPECT_EQ(r.output.find("s3cr3t"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("app:***@"), std::string::npos) << r.output;
  fs::remove(policy);
}

TEST(FleetCli, HungStoreDoesNotHoldTheCallUp) {
  redis_server redis;  // its own: stopped below
  const fs::path policy = policy_file("hung.json", redis.url(), unique_key("hung"));
  ASSERT_EQ(kill(redis.pid(), SIGSTOP), 0);
  const run_result r = run_cli("exec --policy '" + policy.string() + "' --stats -- false");
  ASSERT_EQ(kill(redis.pid(), SIGCONT), 0);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("falling back"), std::string::npos) << r.output;
  // Two round trips at most, each cut at the 100 ms timeout; the command itself takes ms.
  EXPECT_LT(r.elapsed, 2s) << r.output;
  fs::remove(policy);
}

#endif  // STORMGUARD_CLI_PATH

}  // namespace
