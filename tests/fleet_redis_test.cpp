// SPDX-License-Identifier: Apache-2.0
// Tests of the fleet budget's Redis syncer (stormguard/fleet/redis_sync.hpp) against a real
// redis-server (tests/support/redis_server.hpp), each test on its own fleet key. The syncers run
// without their thread (start_thread = false): each test drives sync_once() itself, on a manual
// clock, so nothing sleeps; only the SIGSTOP test waits, for one command timeout.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "stormguard/fleet/redis_sync.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/random.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_status;
using stormguard::fleet_budget;
using stormguard::fleet_budget_options;
using stormguard::random_generator;
using stormguard::ratio_budget_options;
using stormguard::fleet::redis_sync;
using stormguard::fleet::redis_sync_options;
using stormguard::test_support::redis_server;
using stormguard::testing::manual_clock;

std::string unique_key(const char* name) {
  static std::atomic<int> run{0};
  return std::string("fleet-test-") + name + "-" + std::to_string(getpid()) + "-" +
         std::to_string(run.fetch_add(1));
}

fleet_budget_options fleet_options() {
  fleet_budget_options o;
  o.ratio = ratio_budget_options{.ratio = 0.1, .min_retries_per_second = 10};
  return o;
}

redis_sync_options sync_options(const std::string& key, std::string client) {
  return redis_sync_options{.url = redis_server::shared().url(),
                            .key = key,
                            .client_id = std::move(client),
                            .start_thread = false};
}

// Runs one Redis command on the shared server (test set-up only).
void redis_command(const std::vector<std::string>& args) {
  redisContext* c = redisConnect("127.0.0.1", redis_server::shared().port());
  ASSERT_TRUE(c != nullptr && c->err == 0);
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
}

TEST(RedisFleetSync, ThreeProcessesSeeOneFleet) {
  const std::string key = unique_key("three");
  manual_clock clock;
  random_generator g(1);
  std::vector<std::unique_ptr<fleet_budget>> budgets;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  for (int i = 0; i < 3; ++i) {
    budgets.push_back(std::make_unique<fleet_budget>(fleet_options()));
    syncs.push_back(std::make_unique<redis_sync>(
        *budgets.back(), sync_options(key, "client-" + std::to_string(i)), clock));
  }
  for (int i = 0; i < 3; ++i) {
    for (int r = 0; r < 100 * (i + 1); ++r)
      (void)budgets[static_cast<std::size_t>(i)]->try_admit(clock.now(), g);
    ASSERT_TRUE(syncs[static_cast<std::size_t>(i)]->sync_once(true));
  }
  // The last to sync sees the whole fleet: 600 requests, 3 live clients.
  ASSERT_TRUE(syncs[0]->sync_once(true));
  EXPECT_EQ(syncs[0]->stats().live_clients, 3);
  EXPECT_EQ(budgets[0]->live_clients(), 3);
  EXPECT_EQ(budgets[0]->current_mode(clock.now()), fleet_budget::mode::joined);
  // Client 0 made 100 of the 600 requests: a sixth of the allowance (0.1 · 600 + 100 = 160).
  EXPECT_EQ(budgets[0]->share_ppm(), 166'666);
  EXPECT_EQ(budgets[0]->credit_micro(), 26'666'560);
  EXPECT_TRUE(syncs[0]->stats().store_up);
}

TEST(RedisFleetSync, AStoreThatIsDownFallsBackAndSaysSoOnce) {
  manual_clock clock;
  fleet_budget budget(fleet_options());
  std::vector<std::string> lines;
  auto o = sync_options(unique_key("down"), "c");
  o.url = "redis://user:hunter2@127.0.0.1:" + std::to_string(redis_server::unused_port()) + "/0";
  redis_sync sync(budget, o, clock, [&](std::string_view l) { lines.emplace_back(l); });
  EXPECT_FALSE(sync.sync_once(true));
  EXPECT_FALSE(sync.sync_once(true));
  EXPECT_EQ(sync.stats().errors, 2);
  EXPECT_EQ(budget.current_mode(clock.now()), fleet_budget::mode::fallback);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("falling back to local counts"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("user:***@"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("hunter2"), std::string::npos);
}

TEST(RedisFleetSync, AuthenticatesWithAPasswordFromTheOptions) {
  manual_clock clock;
  fleet_budget budget(fleet_options());
  redis_command({"CONFIG", "SET", "requirepass", "pw-fleet"});
  auto o = sync_options(unique_key("auth"), "c");
  redis_sync without(budget, o, clock);
  EXPECT_FALSE(without.sync_once(true));  // NOAUTH
  o.password = "pw-fleet";
  redis_sync with(budget, o, clock);
  EXPECT_TRUE(with.sync_once(true));
  // Back to no password for the other tests (AUTH on this connection first).
  redisContext* c = redisConnect("127.0.0.1", redis_server::shared().port());
  ASSERT_TRUE(c != nullptr && c->err == 0);
  freeReplyObject(redisCommand(c, "AUTH pw-fleet"));
  freeReplyObject(redisCommand(c, "CONFIG SET requirepass %s", ""));
  redisFree(c);
}

TEST(RedisFleetSync, AHungStoreCostsOneTimeoutAndTheBudgetRejoinsAfter) {
  manual_clock clock;
  fleet_budget budget(fleet_options());
  auto o = sync_options(unique_key("hung"), "c");
  o.timeout = 200ms;
  std::vector<std::string> lines;
  redis_sync sync(budget, o, clock, [&](std::string_view l) { lines.emplace_back(l); });
  ASSERT_TRUE(sync.sync_once(true));
  ASSERT_EQ(kill(redis_server::shared().pid(), SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const bool ok = sync.sync_once(true);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(kill(redis_server::shared().pid(), SIGCONT), 0);
  EXPECT_FALSE(ok);
  EXPECT_LT(waited, 2s);  // bounded by the command timeout, never the store's mood
  EXPECT_EQ(budget.current_mode(clock.now()), fleet_budget::mode::fallback);
  random_generator g(1);
  EXPECT_TRUE(budget.try_admit(clock.now(), g));  // requests go on meanwhile
  ASSERT_TRUE(sync.sync_once(true));
  EXPECT_EQ(budget.current_mode(clock.now()), fleet_budget::mode::joined);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_NE(lines[1].find("rejoined"), std::string::npos);
}

TEST(RedisFleetSync, BadOptionsNameTheField) {
  manual_clock clock;
  fleet_budget budget(fleet_options());
  auto o = sync_options("", "c");
  EXPECT_THROW(redis_sync(budget, o, clock), std::invalid_argument);
  o = sync_options("a{b}", "c");
  EXPECT_THROW(redis_sync(budget, o, clock), std::invalid_argument);
  o = sync_options("k", "c");
  o.url = "rediss://x:pw@h";
  try {
    redis_sync s(budget, o, clock);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("budget.fleet.store"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("pw"), std::string::npos) << e.what();
  }
}

TEST(RedisFleetSync, TheThreadSyncsOnItsOwnAndStopsOnDestruction) {
  stormguard::real_clock clock;
  fleet_budget budget(fleet_options());
  auto o = sync_options(unique_key("thread"), "c");
  o.start_thread = true;
  {
    redis_sync sync(budget, o, clock);
    for (int i = 0; i < 200 && sync.stats().syncs == 0; ++i) {
      std::this_thread::sleep_for(5ms);  // integration test: a real thread on a real clock
    }
    EXPECT_GE(sync.stats().syncs, 1);
  }
  EXPECT_EQ(budget.current_mode(clock.now()), fleet_budget::mode::joined);
}

}  // namespace
