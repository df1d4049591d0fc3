// SPDX-License-Identifier: Apache-2.0
// `stormguard http --hedge DELAY [--hedges N]` and `stormguard http --policy` with a hedging
// policy, against loopback servers: the per-call report on stderr with --stats, a fatal status,
// the usage errors, and a first copy that stalls on a server that serves connections concurrently
// (the policy's hedging is used, and --hedge draws its copies from the policy's budget).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_runner.hpp"
#include "support/concurrent_http_server.hpp"
#include "support/http_requests.hpp"
#include "support/http_test_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::test_support::concurrent_server;
using stormguard::test_support::http_test_server;
using stormguard::test_support::program_run;
using stormguard::test_support::reply;
using stormguard::test_support::run_program;
using stormguard::test_support::status;
using stormguard::test_support::stderr_mode;

program_run http(std::vector<std::string> args) {
  args.insert(args.begin(), {STORMGUARD_CLI_PATH, "http"});
  return run_program(args, stderr_mode::capture);
}

TEST(HttpHedgeCli, AFastAnswerIsTheOnlyCopyAndStatsReportIt) {
  http_test_server server;
  server.script({status(200)});
  const program_run r = http({"--hedge", "2s", "--hedges", "3", "--stats", server.url("/x")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "status 200");
  EXPECT_NE(r.err.find("hedged: 1 sent, winner 1, 0 refused by the budget, 0 cancelled"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(server.requests().size(), 1U);
}

TEST(HttpHedgeCli, AFatalStatusEndsTheCallWithExit3) {
  http_test_server server;
  server.script({status(404)});
  const program_run r = http({"--hedge", "2s", server.url("/x")});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(server.requests().size(), 1U);
}

TEST(HttpHedgeCli, CopiesOutsideTwoToFiveAreAUsageError) {
  const program_run r = http({"--hedge", "20ms", "--hedges", "6", "http://127.0.0.1:1/"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--hedges"), std::string::npos) << r.err;
}

TEST(HttpHedgeCli, ABadDelayIsAUsageError) {
  const program_run r = http({"--hedge", "soon", "http://127.0.0.1:1/"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--hedge: not a duration"), std::string::npos) << r.err;
}

// A policy file in a temporary directory, removed with the object.
class policy_file {
 public:
  explicit policy_file(const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("stormguard-http-hedge-" + std::to_string(::getpid()) + "-" +
               std::to_string(counter_++) + ".json")) {
    std::ofstream(path_) << text;
  }
  ~policy_file() { std::filesystem::remove(path_); }
  policy_file(const policy_file&) = delete;
  policy_file& operator=(const policy_file&) = delete;
  [[nodiscard]] std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

// Runs `args` and returns the run with its wall time.
struct timed_run {
  program_run run;
  std::chrono::steady_clock::duration took;
};
timed_run timed_http(std::vector<std::string> args) {
  const auto start = std::chrono::steady_clock::now();
  program_run r = http(std::move(args));
  return {std::move(r), std::chrono::steady_clock::now() - start};
}

constexpr const char* k_won_by_copy_2 =
    "hedged: 2 sent, winner 2, 0 refused by the budget, 1 cancelled";

TEST(HttpHedgeCli, APolicyFilesHedgingBeatsAStalledFirstCopy) {
  concurrent_server server({{3000ms, 200, "slow"}, {0ms, 200, "fast"}});
  const policy_file file(R"({"policies": [{"name": "h", "hedging": {"max_attempts": 2,
      "delay": "50ms", "budget": {"kind": "token_bucket"}}}]})");
  const timed_run t = timed_http({"--policy", file.path(), "--stats", server.url()});
  EXPECT_EQ(t.run.exit_code, 0) << t.run.err;
  EXPECT_EQ(t.run.out, "fast");
  EXPECT_NE(t.run.err.find(k_won_by_copy_2), std::string::npos) << t.run.err;
  EXPECT_LT(t.took, 2500ms) << "the stalled copy was waited for";
  EXPECT_EQ(server.heads().size(), 2U);
}

TEST(HttpHedgeCli, BuiltinHedgedPolicyHedges) {
  // builtin:hedged: 2 copies 20 ms apart, a ratio budget with a floor of 10 copies per second.
  concurrent_server server({{3000ms, 200, "slow"}, {0ms, 200, "fast"}});
  const timed_run t = timed_http({"--policy", "builtin:hedged", "--stats", server.url()});
  EXPECT_EQ(t.run.exit_code, 0) << t.run.err;
  EXPECT_EQ(t.run.out, "fast");
  EXPECT_NE(t.run.err.find(k_won_by_copy_2), std::string::npos) << t.run.err;
  EXPECT_LT(t.took, 2500ms);
}

TEST(HttpHedgeCli, HedgeDrawsFromThePolicysBudgetAndARefusalCancelsNothing) {
  // A ratio budget of 0 with no floor refuses every hedge: the stalled first copy is not
  // cancelled, it is waited for and its answer returned.
  concurrent_server server({{400ms, 200, "slow"}, {0ms, 200, "fast"}});
  const policy_file file(R"({"policies": [{"name": "r", "retries": 0,
      "budget": {"kind": "ratio", "ratio": 0, "min_retries_per_second": 0}}]})");
  const program_run r = http({"--policy", file.path(), "--hedge", "20ms", "--stats", server.url()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "slow");
  EXPECT_NE(r.err.find("hedged: 1 sent, winner 1, 1 refused by the budget, 0 cancelled"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(server.heads().size(), 1U);
}

TEST(HttpHedgeCli, HedgeAndHedgesReplaceThePolicysDelayAndCopies) {
  // The policy would wait 10 s before a second copy; --hedge 0s sends all three at once.
  concurrent_server server({{3000ms, 200, "a"}, {3000ms, 200, "b"}, {0ms, 200, "c"}});
  const policy_file file(R"({"policies": [{"name": "h", "hedging": {"max_attempts": 2,
      "delay": "10s"}}]})");
  const timed_run t = timed_http(
      {"--policy", file.path(), "--hedge", "0s", "--hedges", "3", "--stats", server.url()});
  EXPECT_EQ(t.run.exit_code, 0) << t.run.err;
  EXPECT_EQ(t.run.out, "c");
  // Which copy reaches the server first (and gets the fast answer) is up to the connections.
  EXPECT_NE(t.run.err.find("hedged: 3 sent, winner "), std::string::npos) << t.run.err;
  EXPECT_NE(t.run.err.find(", 0 refused by the budget, 2 cancelled"), std::string::npos)
      << t.run.err;
  EXPECT_LT(t.took, 2500ms);
}

// -v gives each copy its own number, the one its x-envoy-attempt-count says (copy 1 sends none):
// the stalled first copy is cancelled when the second answers. Every copy's line said "attempt 1"
// (each copy is the client's first attempt) before the lines came from the hedged call itself.
TEST(HttpHedgeCli, VerboseNumbersEachCopy) {
  concurrent_server server({{3000ms, 200, "slow"}, {0ms, 200, "fast"}});
  const timed_run t = timed_http({"-v", "--hedge", "50ms", server.url()});
  EXPECT_EQ(t.run.exit_code, 0) << t.run.err;
  EXPECT_EQ(t.run.out, "fast");
  EXPECT_NE(t.run.err.find("stormguard http: copy 2: HTTP 200\n"), std::string::npos) << t.run.err;
  EXPECT_NE(t.run.err.find("stormguard http: copy 1: cancelled"), std::string::npos) << t.run.err;
  EXPECT_EQ(t.run.err.find("attempt 1"), std::string::npos) << t.run.err;
  EXPECT_NE(t.run.err.find(k_won_by_copy_2), std::string::npos) << t.run.err;
  ASSERT_EQ(server.heads().size(), 2U);
  EXPECT_NE(server.heads()[1].find("x-envoy-attempt-count: 2"), std::string::npos)
      << server.heads()[1];
  EXPECT_LT(t.took, 2500ms);
}

// When no copy wins (the second copy's 503 is fatal: not a non-fatal status), -v says so instead
// of naming a copy 0 the winner.
TEST(HttpHedgeCli, VerboseSaysNoCopyWonWhenNoneDid) {
  concurrent_server server({{3000ms, 200, "slow"}, {0ms, 503, "no"}});
  const timed_run t = timed_http({"-v", "--hedge", "50ms", server.url()});
  EXPECT_EQ(t.run.exit_code, 3) << t.run.err;
  EXPECT_NE(t.run.err.find("stormguard http: copy 2: HTTP 503\n"), std::string::npos) << t.run.err;
  EXPECT_NE(t.run.err.find("stormguard http: copy 1: cancelled"), std::string::npos) << t.run.err;
  EXPECT_NE(t.run.err.find("hedged: 2 sent, no copy won, 0 refused by the budget, 1 cancelled"),
            std::string::npos)
      << t.run.err;
  EXPECT_EQ(t.run.err.find("winner"), std::string::npos) << t.run.err;
  EXPECT_LT(t.took, 2500ms);
}

TEST(HttpHedgeCli, HedgesWithoutHedgingIsAUsageError) {
  const program_run r = http({"--hedges", "3", "http://127.0.0.1:1/"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--hedges"), std::string::npos) << r.err;
}

}  // namespace
