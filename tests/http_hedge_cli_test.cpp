// SPDX-License-Identifier: Apache-2.0
// `stormguard http --hedge DELAY [--hedges N]` against the loopback test server: the per-call
// report on stderr with --stats, a fatal status, and the usage errors. (The slow-first-copy race
// itself is tested on the library, tests/integration/async_hedge_http_test.cpp, against a server
// that answers connections concurrently.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/cli_runner.hpp"
#include "support/http_requests.hpp"
#include "support/http_test_server.hpp"

namespace {

using stormguard::test_support::http_test_server;
using stormguard::test_support::program_run;
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

}  // namespace
