// SPDX-License-Identifier: Apache-2.0
// Tests of the fleet budget's Redis syncer (stormguard/fleet/redis_sync.hpp) against a real
// redis-server (tests/support/redis_server.hpp), each test on its own fleet key. The syncers run
// without their thread (start_thread = false): each test drives sync_once() itself, on a manual
// clock, so nothing sleeps; only the SIGSTOP test waits, for one command timeout. The restart
// test runs a redis-server of its own, killed and restarted on the same port.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stormguard/fleet/redis_sync.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/random.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "stormguard/version.hpp"
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

// One Redis command's reply as text on the shared server: a string, an integer in decimal,
// "(nil)" or "(error) ..." (test checks only).
std::string redis_text(const std::vector<std::string>& args) {
  redisContext* c = redisConnect("127.0.0.1", redis_server::shared().port());
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return "(no connection)";
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  std::string text = "(no reply)";
  if (r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)) {
    text.assign(r->str, r->len);
  } else if (r != nullptr && r->type == REDIS_REPLY_INTEGER) {
    text = std::to_string(r->integer);
  } else if (r != nullptr && r->type == REDIS_REPLY_NIL) {
    text = "(nil)";
  } else if (r != nullptr && r->type == REDIS_REPLY_ERROR) {
    text = "(error) " + std::string(r->str, r->len);
  }
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  return text;
}

// The fleet's window totals as the store holds them: {requests, retries} (HGETALL {KEY}:window).
std::pair<long long, long long> window_totals(std::uint16_t port, const std::string& key) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return {-1, -1};
  }
  const std::string hash = "{" + key + "}:window";
  auto* r = static_cast<redisReply*>(redisCommand(c, "HGETALL %s", hash.c_str()));
  std::pair<long long, long long> totals{0, 0};
  if (r != nullptr && r->type == REDIS_REPLY_ARRAY) {
    for (std::size_t i = 0; i + 1 < r->elements; i += 2) {
      const std::string field(r->element[i]->str, r->element[i]->len);
      const long long v = std::stoll(std::string(r->element[i + 1]->str, r->element[i + 1]->len));
      (field[0] == 'r' ? totals.first : totals.second) += v;
    }
  }
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  return totals;
}

// Retries `b` grants at `now` until it refuses one (at most 1,000).
int grants_until_refused(fleet_budget& b, stormguard::time_point now, random_generator& g) {
  int granted = 0;
  while (granted < 1000 && b.try_withdraw(now, attempt_status::failure, g)) ++granted;
  return granted;
}

// Three processes' syncers on a Redis of their own: Redis is killed (SIGKILL) while they run,
// they fall back to local budgets whose floor is the fleet floor / 3 and back off their
// reconnects; Redis restarts on the same port (empty) and every syncer rejoins within
// max_sync_interval, carrying the counts of the outage to the new store.
TEST(RedisFleetSync, RedisKilledAndRestartedOnTheSamePortIsRejoined) {
  redis_server own;  // not the shared one: this test kills it
  const std::string key = unique_key("restart");
  manual_clock clock;
  random_generator g(3);
  std::vector<std::unique_ptr<fleet_budget>> budgets;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  std::vector<std::vector<std::string>> lines(3);
  for (std::size_t i = 0; i < 3; ++i) {
    // A 60-s window: the test's manual clock (about 20 s with the backoff's waits) stays in it.
    fleet_budget_options fo = fleet_options();
    fo.ratio.window = 60s;
    budgets.push_back(std::make_unique<fleet_budget>(fo));
    auto o = sync_options(key, "client-" + std::to_string(i));
    o.url = own.url();
    syncs.push_back(std::make_unique<redis_sync>(
        *budgets[i], o, clock, [&lines, i](auto l) { lines[i].emplace_back(l); }));
  }
  const auto requests = [&](int n) {
    for (auto& b : budgets) {
      for (int r = 0; r < n; ++r) (void)b->try_admit(clock.now(), g);
    }
  };
  // Joined: 100 requests each, everyone synced twice (the last sync of each sees the three).
  requests(100);
  for (int round = 0; round < 2; ++round) {
    for (auto& s : syncs) ASSERT_TRUE(s->sync_once(true));
  }
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(budgets[i]->current_mode(clock.now()), fleet_budget::mode::joined);
    EXPECT_EQ(budgets[i]->live_clients(), 3);
  }
  EXPECT_EQ(window_totals(own.port(), key), std::make_pair(300LL, 0LL));

  own.kill();
  clock.advance(200ms);
  requests(100);
  for (auto& s : syncs) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(s->sync_once(false));
    // A refused connect: no wait on the store (its timeout is 100 ms).
    EXPECT_LT(std::chrono::steady_clock::now() - start, 100ms);
    EXPECT_EQ(s->stats().errors, 1);
    EXPECT_FALSE(s->stats().store_up);
  }
  // Fallback: a local ratio budget whose floor is the fleet floor / the 3 live clients last
  // seen: 0.1 x 200 own requests + 10/s x 60 s / 3 = 20 + 200 retries in the window.
  std::vector<int> granted(3);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(budgets[i]->current_mode(clock.now()), fleet_budget::mode::fallback);
    granted[i] = grants_until_refused(*budgets[i], clock.now(), g);
    EXPECT_EQ(granted[i], 220);
  }
  // Backoff: no reconnect before half a sync interval; with failures in a row the wait doubles
  // up to max_sync_interval (2 s) and no further.
  clock.advance(40ms);
  for (auto& s : syncs) {
    EXPECT_FALSE(s->sync_once(false));
    EXPECT_EQ(s->stats().errors, 1) << "tried again during its backoff";
  }
  for (int k = 0; k < 8; ++k) {
    clock.advance(2s);
    for (auto& s : syncs) EXPECT_FALSE(s->sync_once(false));
  }
  for (auto& s : syncs) EXPECT_EQ(s->stats().errors, 9);
  clock.advance(1s);  // within 2 s of the last try: at most one more try each
  for (auto& s : syncs) (void)s->sync_once(false);
  for (auto& s : syncs) EXPECT_LE(s->stats().errors, 10);

  own.restart();
  clock.advance(2s);  // the longest backoff has passed
  for (auto& s : syncs) {
    EXPECT_TRUE(s->sync_once(false));
    EXPECT_EQ(s->stats().rejoins, 1);
  }
  for (auto& s : syncs) ASSERT_TRUE(s->sync_once(true));  // each sees the other two
  for (std::size_t i = 0; i < 3; ++i) {
    // Its share counts only what the restarted store holds of it (its 100 requests of the
    // outage, not its whole window of 200): a third each, not two thirds.
    EXPECT_EQ(budgets[i]->share_ppm(), 333'333) << i;
    EXPECT_EQ(budgets[i]->current_mode(clock.now()), fleet_budget::mode::joined) << i;
    EXPECT_EQ(budgets[i]->live_clients(), 3) << i;
    EXPECT_TRUE(syncs[i]->stats().store_up);
    // Said once each way.
    ASSERT_EQ(lines[i].size(), 2U) << i;
    EXPECT_NE(lines[i][0].find("falling back to local counts"), std::string::npos) << lines[i][0];
    // The restarted store is empty: the first to rejoin sees itself, the third all three.
    EXPECT_NE(lines[i][1].find("rejoined the fleet (" + std::to_string(i + 1) + " live clients)"),
              std::string::npos)
        << lines[i][1];
  }
  // The restarted store lost the window; the outage's counts (100 requests and the retries of
  // each process) reached it with the rejoining syncs.
  const long long retries = granted[0] + granted[1] + granted[2];
  EXPECT_EQ(window_totals(own.port(), key), std::make_pair(300LL, retries));
  // And the fleet counts go on: 10 more requests each reach the store at the next syncs.
  clock.advance(200ms);
  requests(10);
  for (auto& s : syncs) ASSERT_TRUE(s->sync_once(false));
  EXPECT_EQ(window_totals(own.port(), key), std::make_pair(330LL, retries));
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

// The Lua script hands out the same credit as the in-memory store (fleet_window_store, the
// reference model the simulator's store follows): three processes synced through Redis, and
// three twins doing the same synced through the model, hold the same credit after every sync,
// while they spend, overspend through a fractional draw, and take each other's unclaimed credit.
TEST(RedisFleetSync, TheScriptHandsOutWhatTheModelHandsOut) {
  const std::string key = unique_key("claims");
  manual_clock clock;
  stormguard::fleet_window_store model(10s, 6s);
  std::vector<std::unique_ptr<fleet_budget>> real;
  std::vector<std::unique_ptr<fleet_budget>> twin;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  for (int i = 0; i < 3; ++i) {
    real.push_back(std::make_unique<fleet_budget>(fleet_options()));
    twin.push_back(std::make_unique<fleet_budget>(fleet_options()));
    syncs.push_back(std::make_unique<redis_sync>(
        *real.back(), sync_options(key, "client-" + std::to_string(i)), clock));
  }
  random_generator gr(5);
  random_generator gt(5);
  int checked = 0;
  for (int round = 0; round < 6; ++round) {
    for (std::size_t i = 0; i < 3; ++i) {
      clock.advance(10ms);
      const int requests = static_cast<int>(7 + 31 * i + 13 * round);
      for (int r = 0; r < requests; ++r) {
        (void)real[i]->try_admit(clock.now(), gr);
        (void)twin[i]->try_admit(clock.now(), gt);
      }
      // Spend some of the credit (process 1 all of it) on both sides with the same draws.
      const int wanted = i == 1 ? 1000 : round + static_cast<int>(i);
      int granted_real = 0;
      int granted_twin = 0;
      for (int k = 0; k < wanted; ++k) {
        if (real[i]->try_withdraw(clock.now(), attempt_status::failure, gr)) ++granted_real;
        if (twin[i]->try_withdraw(clock.now(), attempt_status::failure, gt)) ++granted_twin;
      }
      EXPECT_EQ(granted_real, granted_twin) << "round " << round << ", client " << i;
      ASSERT_TRUE(syncs[i]->sync_once(true));
      const stormguard::fleet_deltas out = twin[i]->begin_sync(clock.now());
      const stormguard::fleet_answer answer =
          model.sync(clock.now(), "client-" + std::to_string(i), out, twin[i]->terms());
      twin[i]->end_sync(clock.now(), answer);
      EXPECT_NEAR(static_cast<double>(real[i]->credit_micro()),
                  static_cast<double>(twin[i]->credit_micro()), 1.0)
          << "round " << round << ", client " << i;
      EXPECT_EQ(real[i]->share_ppm(), twin[i]->share_ppm());
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
  EXPECT_EQ(window_totals(redis_server::shared().port(), key).first,
            model.sync(clock.now(), "probe", {}).requests);
}

// What a stormguard 0.1 process leaves in Redis: the window and the live clients, no
// {KEY}:version (and, for 0.1.0, no {KEY}:claims). Written by hand, as its script would.
void write_0_1_layout(const std::string& key, const std::string& client) {
  redis_command({"HSET", "{" + key + "}:window", "r:1", "50", "w:1", "2"});
  // A heartbeat far in the future (Redis TIME in ms): the client is live.
  redis_command({"ZADD", "{" + key + "}:clients", "99999999999999", client});
}

// A 0.1 process's keys: the current syncer refuses them, naming both protocols and releases,
// writes nothing, counts the refusal, and its budget keeps to local counts.
TEST(RedisFleetSync, AKeyWrittenByStormguard01IsRefusedNamingBothVersions) {
  const std::string key = unique_key("v01");
  write_0_1_layout(key, "old-0.1-process");
  manual_clock clock;
  random_generator g(5);
  fleet_budget budget(fleet_options());
  std::vector<std::string> lines;
  redis_sync sync(budget, sync_options(key, "new"), clock,
                  [&lines](std::string_view l) { lines.emplace_back(l); });
  for (int r = 0; r < 10; ++r) (void)budget.try_admit(clock.now(), g);
  EXPECT_FALSE(sync.sync_once(true));
  EXPECT_FALSE(sync.sync_once(true));
  const auto stats = sync.stats();
  EXPECT_EQ(stats.refusals, 2);
  EXPECT_EQ(stats.errors, 2);
  EXPECT_TRUE(stats.refused);
  EXPECT_EQ(stats.syncs, 0);
  EXPECT_EQ(budget.current_mode(clock.now()), fleet_budget::mode::fallback);
  ASSERT_EQ(lines.size(), 1U);  // said once
  EXPECT_NE(lines[0].find("fleet protocol \"1\" (stormguard 0.1, which writes no version)"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("this process speaks fleet protocol 2 (stormguard " +
                          std::string(stormguard::version()) + ")"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find(key), std::string::npos) << lines[0];
  // Nothing written: the 0.1 process's window is as it left it, no version was set.
  EXPECT_EQ(window_totals(redis_server::shared().port(), key), std::make_pair(50LL, 2LL));
  EXPECT_EQ(redis_text({"GET", "{" + key + "}:version"}), "(nil)");
  EXPECT_EQ(redis_text({"EXISTS", "{" + key + "}:claims"}), "0");
}

// A 0.1 process that joins a key a current process already keeps: its heartbeat has no claim,
// so the next sync of the current process refuses.
TEST(RedisFleetSync, AStormguard01ProcessJoiningLaterIsRefused) {
  const std::string key = unique_key("v01-late");
  manual_clock clock;
  fleet_budget budget(fleet_options());
  std::vector<std::string> lines;
  redis_sync sync(budget, sync_options(key, "new"), clock,
                  [&lines](std::string_view l) { lines.emplace_back(l); });
  ASSERT_TRUE(sync.sync_once(true));
  EXPECT_EQ(redis_text({"GET", "{" + key + "}:version"}),
            std::to_string(stormguard::fleet::k_fleet_protocol));
  ASSERT_TRUE(sync.sync_once(true));  // its own claim is no foreign client
  write_0_1_layout(key, "old-0.1-process");
  EXPECT_FALSE(sync.sync_once(true));
  EXPECT_EQ(sync.stats().refusals, 1);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("fleet protocol \"1\""), std::string::npos) << lines[0];
}

// A key another protocol marked (a later release): refused, naming its protocol.
TEST(RedisFleetSync, AKeyOfAnotherProtocolIsRefused) {
  const std::string key = unique_key("v3");
  redis_command({"SET", "{" + key + "}:version", "3"});
  manual_clock clock;
  fleet_budget budget(fleet_options());
  std::vector<std::string> lines;
  redis_sync sync(budget, sync_options(key, "new"), clock,
                  [&lines](std::string_view l) { lines.emplace_back(l); });
  EXPECT_FALSE(sync.sync_once(true));
  EXPECT_EQ(sync.stats().refusals, 1);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("fleet protocol \"3\" (another stormguard release)"), std::string::npos)
      << lines[0];
  EXPECT_EQ(redis_text({"GET", "{" + key + "}:version"}), "3");
}

// The version is set with an expiry no earlier than the other keys': a key of this protocol is
// never read as one of 0.1 (data without a version).
TEST(RedisFleetSync, TheVersionOutlivesTheKeysItDescribes) {
  const std::string key = unique_key("v-ttl");
  manual_clock clock;
  fleet_budget budget(fleet_options());
  redis_sync sync(budget, sync_options(key, "new"), clock);
  random_generator g(9);
  (void)budget.try_admit(clock.now(), g);
  ASSERT_TRUE(sync.sync_once(true));
  const long long version = std::stoll(redis_text({"PTTL", "{" + key + "}:version"}));
  EXPECT_GT(version, 0);
  for (const char* suffix : {"}:window", "}:clients", "}:claims"}) {
    const long long other = std::stoll(redis_text({"PTTL", "{" + key + suffix}));
    EXPECT_GT(other, 0) << suffix;
    EXPECT_GE(version, other) << suffix;
  }
}

}  // namespace
