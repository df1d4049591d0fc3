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
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "stormguard/fleet/attach.hpp"
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
  redis_sync_options o;
  o.url = redis_server::shared().url();
  o.key = key;
  o.client_id = std::move(client);
  o.start_thread = false;
  return o;
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
std::string redis_text(const std::vector<std::string>& args, std::uint16_t port = 0) {
  redisContext* c = redisConnect("127.0.0.1", port != 0 ? port : redis_server::shared().port());
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

// The fields of a hash as the store holds them (HGETALL).
std::map<std::string, std::string> hash_fields(std::uint16_t port, const std::string& hash) {
  std::map<std::string, std::string> fields;
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return fields;
  }
  auto* r = static_cast<redisReply*>(redisCommand(c, "HGETALL %s", hash.c_str()));
  if (r != nullptr && r->type == REDIS_REPLY_ARRAY) {
    for (std::size_t i = 0; i + 1 < r->elements; i += 2) {
      fields[std::string(r->element[i]->str, r->element[i]->len)] =
          std::string(r->element[i + 1]->str, r->element[i + 1]->len);
    }
  }
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  return fields;
}

// The numbers of the fleet's state as the store holds them ({KEY}:version: "3 " and 49
// little-endian doubles), numbered from 1 as the script numbers them (element 0 unused).
std::vector<double> state_numbers(std::uint16_t port, const std::string& key) {
  static_assert(std::endian::native == std::endian::little);
  std::vector<double> v(1);
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return v;
  }
  const std::string name = "{" + key + "}:version";
  auto* r = static_cast<redisReply*>(redisCommand(c, "GET %s", name.c_str()));
  if (r != nullptr && r->type == REDIS_REPLY_STRING) {
    const std::string raw(r->str, r->len);
    for (std::size_t at = raw.find(' ') + 1; at + 8 <= raw.size(); at += 8) {
      double d = 0;
      std::memcpy(&d, raw.data() + at, 8);
      v.push_back(d);
    }
  }
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  return v;
}

// Sets number `index` (from 1) of the fleet's state to `value`, keeping the key's expiry: how
// the tests stand for time passing on Redis's clock, which they do not wait on.
void set_state_number(std::uint16_t port, const std::string& key, int index, double value) {
  redisContext* c = redisConnect("127.0.0.1", port);
  ASSERT_TRUE(c != nullptr && c->err == 0);
  const std::string name = "{" + key + "}:version";
  const std::string script =
      "local raw = redis.call('GET', KEYS[1]) local sp = string.find(raw, ' ', 1, true) "
      "local f = '<' .. string.rep('d', 49) local v = {struct.unpack(f, raw, sp + 1)} "
      "v[tonumber(ARGV[1])] = tonumber(ARGV[2]) redis.call('SET', KEYS[1], string.sub(raw, 1, "
      "sp) .. struct.pack(f, unpack(v, 1, 49)), 'KEEPTTL') return 1";
  const std::string i = std::to_string(index);
  const std::string x = std::to_string(static_cast<long long>(value));
  auto* r = static_cast<redisReply*>(
      redisCommand(c, "EVAL %s 1 %s %s %s", script.c_str(), name.c_str(), i.c_str(), x.c_str()));
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_INTEGER)
      << (r != nullptr && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
  freeReplyObject(r);
  redisFree(c);
}

// The fleet's window totals as the store holds them: {requests, retries} (numbers 8-18 and
// 19-29 of the state: the slots of the window).
std::pair<long long, long long> window_totals(std::uint16_t port, const std::string& key) {
  const std::vector<double> v = state_numbers(port, key);
  if (v.size() != 50) return {-1, -1};
  std::pair<long long, long long> totals{0, 0};
  for (int i = 0; i <= stormguard::ratio_budget::k_slices; ++i) {
    totals.first += static_cast<long long>(v[static_cast<std::size_t>(8 + i)]);
    totals.second += static_cast<long long>(v[static_cast<std::size_t>(19 + i)]);
  }
  return totals;
}

// The window totals a stormguard 0.1 or 0.2 process left in {KEY}:window ("r:N", "w:N").
std::pair<long long, long long> old_window_totals(const std::string& key) {
  std::pair<long long, long long> totals{0, 0};
  for (const auto& [field, value] :
       hash_fields(redis_server::shared().port(), "{" + key + "}:window")) {
    (field[0] == 'r' ? totals.first : totals.second) += std::stoll(value);
  }
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
    // Said once each way, and that the store came back empty (learning mode).
    ASSERT_EQ(lines[i].size(), 3U) << i;
    EXPECT_NE(lines[i][2].find("had forgotten the fleet"), std::string::npos) << lines[i][2];
    EXPECT_EQ(syncs[i]->stats().forgotten, 1) << i;
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

// A budget kept in shards: attach() puts each process's syncer on its shard's key, KEY#S/K, so
// the shards' states live apart (distinct hash tags: a Redis Cluster may put them on different
// masters); each shard counts only its processes and holds 1/K of the floor. The unsharded key
// is never written.
TEST(RedisFleetSync, AShardedBudgetKeepsEachShardUnderItsOwnKey) {
  const std::string key = unique_key("shards");
  fleet_budget_options o = fleet_options();
  o.shards = 2;
  o.store.url = redis_server::shared().url();
  o.store.key = key;
  stormguard::real_clock clock;  // attach() starts each syncer's thread: real time
  random_generator g(1);
  std::vector<std::unique_ptr<stormguard::any_budget>> budgets;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  for (std::int64_t shard : {0, 1, 1}) {
    budgets.push_back(std::make_unique<stormguard::any_budget>(stormguard::budget_options(o)));
    stormguard::fleet::attach_options a;
    a.shard = shard;
    syncs.push_back(stormguard::fleet::attach(*budgets.back(), std::move(a)));
    ASSERT_NE(syncs.back(), nullptr);
    for (int r = 0; r < 100; ++r) (void)budgets.back()->try_admit(clock.now(), g);
    ASSERT_TRUE(syncs.back()->sync_once(true));
  }
  ASSERT_TRUE(syncs[0]->sync_once(true));
  ASSERT_TRUE(syncs[1]->sync_once(true));
  EXPECT_EQ(syncs[0]->stats().live_clients, 1);  // shard 0: one process
  EXPECT_EQ(syncs[1]->stats().live_clients, 2);  // shard 1: two
  EXPECT_EQ(redis_text({"EXISTS", "{" + key + "#0/2}:version"}), "1");
  EXPECT_EQ(redis_text({"EXISTS", "{" + key + "#1/2}:version"}), "1");
  EXPECT_EQ(redis_text({"EXISTS", "{" + key + "}:version"}), "0");
  budgets[0]->visit([](auto& b) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(b)>, fleet_budget>) {
      EXPECT_EQ(b.terms().reserve, 50'000'000);  // half of 10/s over 10 s
    } else {
      ADD_FAILURE() << "not a fleet budget";
    }
  });
  stormguard::fleet::attach_options bad;
  bad.shard = 2;
  try {
    (void)stormguard::fleet::attach(*budgets[0], std::move(bad));
    ADD_FAILURE() << "shard 2 of 2 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("attach_options::shard"), std::string::npos) << e.what();
  }
  for (auto& sync : syncs) sync.reset();  // before their budgets
}

using stormguard::test_support::redis_cluster;

// A budget kept in three shards on a Redis Cluster: each shard's key hashes to its own slot;
// a syncer given any node follows the cluster's MOVED redirection to the master of its slot,
// and after that master is killed (its replica promoted, cluster-node-timeout 1 s) finds the new
// master through the nodes it learnt (CLUSTER SLOTS) and rejoins.
TEST(RedisFleetCluster, ShardsFollowMovedAndAFailover) {
  redis_cluster cluster;
  const std::string key = unique_key("cluster");
  manual_clock clock;
  random_generator g(1);
  fleet_budget_options o = fleet_options();
  o.shards = 3;
  const std::string shard0 = stormguard::fleet::shard_key(key, 0, 3);
  const std::size_t master0 = cluster.master_of("{" + shard0 + "}:version");
  ASSERT_LT(master0, cluster.size());
  // Point every syncer at a node other than shard 0's master: its first sync is redirected.
  const std::size_t seed = (master0 + 1) % cluster.size();
  std::vector<std::unique_ptr<fleet_budget>> budgets;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  for (std::int64_t s = 0; s < 3; ++s) {
    budgets.push_back(std::make_unique<fleet_budget>(o));
    redis_sync_options so =
        sync_options(stormguard::fleet::shard_key(key, s, 3), "p" + std::to_string(s));
    so.url = cluster.node(seed).url();
    syncs.push_back(std::make_unique<redis_sync>(*budgets.back(), so, clock));
    for (int r = 0; r < 100; ++r) (void)budgets.back()->try_admit(clock.now(), g);
    ASSERT_TRUE(syncs.back()->sync_once(true)) << "shard " << s;
    EXPECT_EQ(syncs.back()->stats().live_clients, 1) << "shard " << s;
  }
  EXPECT_EQ(redis_text({"EXISTS", "{" + shard0 + "}:version"}, cluster.node(master0).port()), "1");
  // Kill shard 0's master; its replica takes over its slots.
  cluster.node(master0).kill();
  ASSERT_TRUE(cluster.wait_until_ok());
  // A sync within 10 s (the failure detection takes cluster-node-timeout, the promotion a little
  // more; a syncer whose master died fails once, then finds the new one).
  const auto rejoins = [&clock](redis_sync& sync) {
    for (int tries = 0; tries < 100; ++tries) {
      clock.advance(100ms);
      if (sync.sync_once(true)) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  };
  ASSERT_TRUE(rejoins(*syncs[0])) << syncs[0]->stats().errors << " failed syncs";
  EXPECT_EQ(budgets[0]->current_mode(clock.now()), fleet_budget::mode::joined);
  const std::size_t promoted = cluster.master_of("{" + shard0 + "}:version");
  EXPECT_NE(promoted, master0);
  EXPECT_LT(promoted, cluster.size());
  for (std::size_t s = 1; s < 3; ++s) EXPECT_TRUE(rejoins(*syncs[s])) << "shard " << s;
}

// redis+sentinel://: the syncer asks the sentinels for the master, and after the master is
// killed (its replica promoted: down-after 1 s) asks again and rejoins on the new master, whose
// state the replica kept.
TEST(RedisFleetSentinel, TheSyncerFindsTheMasterAndFollowsAFailover) {
  stormguard::test_support::redis_sentinel_set set;
  const std::string key = unique_key("sentinel");
  manual_clock clock;
  random_generator g(1);
  fleet_budget budget(fleet_options());
  redis_sync_options so = sync_options(key, "p0");
  so.url = set.url();
  redis_sync sync(budget, so, clock);
  for (int r = 0; r < 100; ++r) (void)budget.try_admit(clock.now(), g);
  ASSERT_TRUE(sync.sync_once(true));
  EXPECT_EQ(
      stormguard::test_support::redis_cli(set.master().port(), "exists '{" + key + "}:version'"),
      "1");
  ASSERT_TRUE(set.kill_master_and_wait_for_failover());
  bool rejoined = false;
  for (int tries = 0; tries < 100 && !rejoined; ++tries) {
    clock.advance(100ms);
    rejoined = sync.sync_once(true);
    if (!rejoined) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(rejoined) << sync.stats().errors << " failed syncs";
  EXPECT_EQ(budget.current_mode(clock.now()), fleet_budget::mode::joined);
  EXPECT_EQ(
      stormguard::test_support::redis_cli(set.replica().port(), "exists '{" + key + "}:version'"),
      "1");
}

TEST(FleetShardKey, NamesEachShardApartAndKeepsTheUnshardedKey) {
  using stormguard::fleet::shard_key;
  EXPECT_EQ(shard_key("checkout-api", 0, 1), "checkout-api");
  EXPECT_EQ(shard_key("checkout-api", 2, 3), "checkout-api#2/3");
  EXPECT_NE(shard_key("k", 0, 2), shard_key("k", 0, 4));  // another K, another key
  for (const auto& [shard, shards] :
       {std::pair<std::int64_t, std::int64_t>{0, 0}, {3, 3}, {-1, 2}, {0, 1025}}) {
    EXPECT_THROW((void)shard_key("k", shard, shards), std::invalid_argument)
        << shard << " of " << shards;
  }
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
// The twin's asker (claims that follow need): the model, at the test's clock.
struct model_asker {
  stormguard::fleet_window_store* model = nullptr;
  manual_clock* clock = nullptr;
  std::string name;
  fleet_budget* budget = nullptr;
  static std::int64_t ask(void* context, stormguard::time_point, std::int64_t wanted) noexcept {
    auto& self = *static_cast<model_asker*>(context);
    return self.model->ask(self.clock->now(), self.name, wanted, self.budget->terms());
  }
};

// Three processes on Redis and their twins on the reference model, with the same traffic and
// draws: the same grants and the same credit after each sync. `ask`: claims that follow need.
// Returns the asks the store granted the real processes.
std::int64_t compare_script_and_model(bool ask) {
  const std::string key = unique_key("claims");
  manual_clock clock;
  stormguard::fleet_window_store model(10s, 6s);
  std::vector<std::unique_ptr<fleet_budget>> real;
  std::vector<std::unique_ptr<fleet_budget>> twin;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  std::vector<std::unique_ptr<model_asker>> askers;
  fleet_budget_options o = fleet_options();
  o.ask_for_credit = ask;
  for (int i = 0; i < 3; ++i) {
    real.push_back(std::make_unique<fleet_budget>(o));
    twin.push_back(std::make_unique<fleet_budget>(o));
    syncs.push_back(std::make_unique<redis_sync>(
        *real.back(), sync_options(key, "client-" + std::to_string(i)), clock));
    askers.push_back(std::make_unique<model_asker>(
        model_asker{&model, &clock, "client-" + std::to_string(i), twin.back().get()}));
    twin.back()->set_asker(&model_asker::ask, askers.back().get());
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
      EXPECT_TRUE(syncs[i]->sync_once(true));
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
  std::int64_t granted = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(real[i]->asks(), twin[i]->asks()) << "client " << i;
    granted += real[i]->asks().second;
  }
  return granted;
}

TEST(RedisFleetSync, TheScriptHandsOutWhatTheModelHandsOut) {
  EXPECT_EQ(compare_script_and_model(false), 0);
}

TEST(RedisFleetSync, TheScriptGrantsAsksAsTheModelGrantsThem) {
  // Whole-retry claims, and asks for the rest of one retry when a process has spent its claim.
  EXPECT_GT(compare_script_and_model(true), 0);
}

// Eight processes whose claims follow need, each spending on its own thread after one sync: the
// asks, serialised by Redis, hand out the fleet's allowance exactly, whole retries only, and
// never the same retry twice.
TEST(RedisFleetSync, AsksFromManyThreadsHandOutTheAllowanceExactly) {
  const std::string key = unique_key("asks");
  manual_clock clock;
  fleet_budget_options o = fleet_options();
  o.ratio.ratio = 0.0;  // the floor alone: 10/s over 10 s, 100 retries
  o.ask_for_credit = true;
  constexpr int k_processes = 8;
  std::vector<std::unique_ptr<fleet_budget>> budgets;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  random_generator g(3);
  for (int i = 0; i < k_processes; ++i) {
    budgets.push_back(std::make_unique<fleet_budget>(o));
    syncs.push_back(std::make_unique<redis_sync>(
        *budgets.back(), sync_options(key, "asker-" + std::to_string(i)), clock));
    for (int r = 0; r < 5; ++r) (void)budgets.back()->try_admit(clock.now(), g);
  }
  // Two rounds of syncs: in the second each process's share is 5 of 40 requests, 12.5 retries,
  // handed out as 12 (whole retries): 96 claimed, 4 left for asks.
  for (int round = 0; round < 2; ++round) {
    for (auto& sync : syncs) ASSERT_TRUE(sync->sync_once(true));
  }
  for (const auto& b : budgets) EXPECT_EQ(b->credit_micro(), 12'000'000);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < k_processes; ++i) {
    threads.emplace_back([&, i] {
      random_generator own(static_cast<std::uint64_t>(100 + i));
      for (int k = 0; k < 200; ++k) {
        if (budgets[static_cast<std::size_t>(i)]->try_withdraw(clock.now(), attempt_status::failure,
                                                               own)) {
          ++granted;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::int64_t asked = 0;
  for (const auto& b : budgets) asked += b->asks().second;
  EXPECT_EQ(asked, 4);
  EXPECT_EQ(granted.load(), 100);
  std::int64_t sent = 0;
  std::int64_t said_granted = 0;
  for (const auto& sync : syncs) {
    sent += sync->stats().asks;
    said_granted += sync->stats().asks_granted;
  }
  EXPECT_EQ(said_granted, 4);
  EXPECT_GE(sent, 4);  // each process asks until one is refused
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
  EXPECT_NE(lines[0].find("this process speaks fleet protocol " +
                          std::to_string(stormguard::fleet::k_fleet_protocol) + " (stormguard " +
                          std::string(stormguard::version()) + ")"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find(key), std::string::npos) << lines[0];
  // Nothing written: the 0.1 process's window is as it left it, no version was set.
  EXPECT_EQ(old_window_totals(key), std::make_pair(50LL, 2LL));
  EXPECT_EQ(redis_text({"GET", "{" + key + "}:version"}), "(nil)");
  EXPECT_EQ(redis_text({"EXISTS", "{" + key + "}:claims"}), "0");
}

// A 0.1 process that joins a key a current process already keeps: its keys are found at the
// next sync that looks for them (once per retention period; here made due at once by setting
// the state's time of the next look, number 3, to 0, as if that period had passed): refused.
TEST(RedisFleetSync, AStormguard01ProcessJoiningLaterIsRefused) {
  const std::string key = unique_key("v01-late");
  manual_clock clock;
  fleet_budget budget(fleet_options());
  std::vector<std::string> lines;
  redis_sync sync(budget, sync_options(key, "new"), clock,
                  [&lines](std::string_view l) { lines.emplace_back(l); });
  ASSERT_TRUE(sync.sync_once(true));
  ASSERT_TRUE(sync.sync_once(true));
  write_0_1_layout(key, "old-0.1-process");
  set_state_number(redis_server::shared().port(), key, 3, 0);
  EXPECT_FALSE(sync.sync_once(true));
  EXPECT_EQ(sync.stats().refusals, 1);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("fleet protocol \"1\""), std::string::npos) << lines[0];
}

// A key another protocol marked (a later release): refused, naming its protocol.
TEST(RedisFleetSync, AKeyOfAnotherProtocolIsRefused) {
  const std::string key = unique_key("v9");
  redis_command({"SET", "{" + key + "}:version", "9"});
  manual_clock clock;
  fleet_budget budget(fleet_options());
  std::vector<std::string> lines;
  redis_sync sync(budget, sync_options(key, "new"), clock,
                  [&lines](std::string_view l) { lines.emplace_back(l); });
  EXPECT_FALSE(sync.sync_once(true));
  EXPECT_EQ(sync.stats().refusals, 1);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("fleet protocol \"9\" (another stormguard release)"), std::string::npos)
      << lines[0];
  EXPECT_EQ(redis_text({"GET", "{" + key + "}:version"}), "9");
}

// A state of this layout written by another protocol (a later release): its protocol, before
// the space, is read before anything is written.
TEST(RedisFleetSync, AStateOfAnotherProtocolIsRefused) {
  const std::string key = unique_key("state-v9");
  redis_command({"SET", "{" + key + "}:version", "9 \x01\x02"});
  manual_clock clock;
  fleet_budget budget(fleet_options());
  std::vector<std::string> lines;
  redis_sync sync(budget, sync_options(key, "new"), clock,
                  [&lines](std::string_view l) { lines.emplace_back(l); });
  EXPECT_FALSE(sync.sync_once(true));
  EXPECT_EQ(sync.stats().refusals, 1);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("fleet protocol \"9\""), std::string::npos) << lines[0];
  EXPECT_EQ(redis_text({"GET", "{" + key + "}:version"}), "9 \x01\x02");
}

// What a stormguard 0.2 fleet (protocol 2) leaves: its three keys and {KEY}:version = "2". The
// current syncer refuses, naming protocol 2 and its release, and writes nothing.
TEST(RedisFleetSync, AKeyOfProtocol2IsRefusedNamingIt) {
  const std::string key = unique_key("v2");
  redis_command({"HSET", "{" + key + "}:window", "r:1", "50"});
  redis_command({"ZADD", "{" + key + "}:clients", "99999999999999", "old-0.2-process"});
  redis_command({"HSET", "{" + key + "}:claims", "c:old-0.2-process", "0", "t", "0"});
  redis_command({"SET", "{" + key + "}:version", "2"});
  manual_clock clock;
  fleet_budget budget(fleet_options());
  std::vector<std::string> lines;
  redis_sync sync(budget, sync_options(key, "new"), clock,
                  [&lines](std::string_view l) { lines.emplace_back(l); });
  EXPECT_FALSE(sync.sync_once(true));
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("fleet protocol \"2\" (stormguard 0.2, three keys without epochs)"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(redis_text({"GET", "{" + key + "}:version"}), "2");
}

// The state is {KEY}:version: its protocol first ("3 ", which a process of protocol 2 reads
// and refuses), set with an expiry of two retention periods (max(window + slice, ttl + ttl / 8)
// = 11 s) and 1 s at each sync.
TEST(RedisFleetSync, TheStateNamesItsProtocolAndExpires) {
  const std::string key = unique_key("v-ttl");
  manual_clock clock;
  fleet_budget budget(fleet_options());
  redis_sync sync(budget, sync_options(key, "new"), clock);
  random_generator g(9);
  (void)budget.try_admit(clock.now(), g);
  ASSERT_TRUE(sync.sync_once(true));
  EXPECT_TRUE(redis_text({"GET", "{" + key + "}:version"})
                  .starts_with(std::to_string(stormguard::fleet::k_fleet_protocol) + " "));
  EXPECT_EQ(state_numbers(redis_server::shared().port(), key).size(), 50U);
  const long long state = std::stoll(redis_text({"PTTL", "{" + key + "}:version"}));
  EXPECT_GT(state, 22'000);
  EXPECT_LE(state, 23'000);
  for (const char* suffix : {"}:window", "}:clients", "}:claims"}) {
    EXPECT_EQ(redis_text({"EXISTS", "{" + key + suffix}), "0") << suffix;
  }
}

}  // namespace

namespace {

// The Redis commands the shared server has run, by name (INFO commandstats' "calls").
std::map<std::string, long long> command_calls() {
  std::map<std::string, long long> calls;
  const std::string text = redis_text({"INFO", "commandstats"});
  std::size_t at = 0;
  while ((at = text.find("cmdstat_", at)) != std::string::npos) {
    const std::size_t colon = text.find(':', at);
    const std::size_t value = text.find("calls=", colon);
    if (colon == std::string::npos || value == std::string::npos) break;
    calls[text.substr(at + 8, colon - at - 8)] = std::stoll(text.substr(value + 6));
    at = value;
  }
  return calls;
}

// The commands the script ran between two command_calls(): every command but the EVALSHA /
// EVAL that ran it and the test's own INFO, SCRIPT, HELLO and AUTH.
long long script_calls(const std::map<std::string, long long>& before,
                       const std::map<std::string, long long>& after) {
  long long n = 0;
  for (const auto& [name, calls] : after) {
    // The round trip itself, and what a connection sends once (SCRIPT LOAD, AUTH, CLUSTER
    // SLOTS to learn a cluster's nodes).
    if (name == "evalsha" || name == "eval" || name == "info" || name.starts_with("script") ||
        name == "hello" || name == "auth" || name.starts_with("cluster")) {
      continue;
    }
    const auto it = before.find(name);
    n += calls - (it == before.end() ? 0 : it->second);
  }
  return n;
}

}  // namespace

// The store's cost per sync (docs/budgets.md, "Store load"): 3 Redis commands in the script
// (TIME, GET, SET) whatever the fleet size; 4 when the sync creates the fleet's state or looks
// for the older layouts (EXISTS, once per retention period, here made due by hand).
TEST(RedisFleetSync, OneSyncIsThreeRedisCommands) {
  const std::string key = unique_key("commands");
  manual_clock clock;
  random_generator g(4);
  std::vector<std::unique_ptr<fleet_budget>> budgets;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  for (int i = 0; i < 20; ++i) {
    budgets.push_back(std::make_unique<fleet_budget>(fleet_options()));
    syncs.push_back(std::make_unique<redis_sync>(
        *budgets.back(), sync_options(key, "client-" + std::to_string(i)), clock));
  }
  // Every syncer connects (SCRIPT LOAD) before counting starts.
  auto before = command_calls();
  ASSERT_TRUE(syncs[0]->sync_once(true));
  EXPECT_EQ(script_calls(before, command_calls()), 4);  // creates the state
  for (std::size_t i = 1; i < syncs.size(); ++i) ASSERT_TRUE(syncs[i]->sync_once(true));
  before = command_calls();
  int done = 0;
  for (int round = 0; round < 5; ++round) {
    clock.advance(100ms);
    for (std::size_t i = 0; i < syncs.size(); ++i) {
      for (int r = 0; r < 5; ++r) (void)budgets[i]->try_admit(clock.now(), g);
      (void)budgets[i]->try_withdraw(clock.now(), attempt_status::failure, g);
      ASSERT_TRUE(syncs[i]->sync_once(true));
      ++done;
    }
  }
  const auto after = command_calls();
  EXPECT_EQ(script_calls(before, after), 3 * done);
  EXPECT_EQ(after.at("evalsha") - before.at("evalsha"), done);  // one round trip per sync
  EXPECT_EQ(syncs[0]->stats().live_clients, 20);
  set_state_number(redis_server::shared().port(), key, 3, 0);
  before = command_calls();
  ASSERT_TRUE(syncs[0]->sync_once(true));
  EXPECT_EQ(script_calls(before, command_calls()), 4);  // looks for the older layouts
}

// A heartbeat that expires frees its claim and its place among the live clients, with its
// bucket: the dead client's claim comes back to the others. Driven by moving the store's newest
// bucket (number 6 of the state) ten buckets back, as ten bucket widths without a sync would
// (the script reads Redis TIME, which the test does not wait on).
TEST(RedisFleetSync, ADeadClientsClaimComesBackWithItsBucket) {
  const std::string key = unique_key("dead");
  manual_clock clock;
  random_generator g(6);
  fleet_budget alive_budget(fleet_options());
  fleet_budget dead_budget(fleet_options());
  redis_sync alive(alive_budget, sync_options(key, "alive"), clock);
  auto dead = std::make_unique<redis_sync>(dead_budget, sync_options(key, "dead"), clock);
  for (int r = 0; r < 100; ++r) {
    (void)alive_budget.try_admit(clock.now(), g);
    (void)dead_budget.try_admit(clock.now(), g);
  }
  // Each syncs twice: the second syncs see both, and each holds its half of the allowance.
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(alive.sync_once(true));
    ASSERT_TRUE(dead->sync_once(true));
  }
  EXPECT_EQ(dead->stats().live_clients, 2);
  // "alive" spends its claim: the fleet's allowance falls, and what is left is held by "dead".
  EXPECT_GT(grants_until_refused(alive_budget, clock.now(), g), 0);
  ASSERT_TRUE(alive.sync_once(true));
  const std::int64_t shared = alive_budget.credit_micro();
  dead.reset();  // the process dies without a word
  const auto port = redis_server::shared().port();
  set_state_number(port, key, 6, state_numbers(port, key)[6] - 10);
  ASSERT_TRUE(alive.sync_once(true));
  EXPECT_EQ(alive.stats().live_clients, 1);
  EXPECT_GT(alive_budget.credit_micro(), shared + 10 * fleet_budget::k_scale);
}

// Learning mode: a FLUSHALL while the fleet runs (a store that answers but forgot): every
// process finds another epoch at its next sync, each is handed no larger claim than it held for
// one window (the end of the window set by hand: the script reads Redis TIME, which the test
// does not wait on), and after it the claims follow the allowance again.
TEST(RedisFleetSync, AStoreThatForgotHandsNoMoreThanWasHeldForOneWindow) {
  redis_server own;  // not the shared one: this test flushes it
  const std::string key = unique_key("flush");
  manual_clock clock;
  random_generator g(8);
  std::vector<std::unique_ptr<fleet_budget>> budgets;
  std::vector<std::unique_ptr<redis_sync>> syncs;
  std::vector<std::vector<std::string>> lines(3);
  for (std::size_t i = 0; i < 3; ++i) {
    budgets.push_back(std::make_unique<fleet_budget>(fleet_options()));
    auto o = sync_options(key, "client-" + std::to_string(i));
    o.url = own.url();
    syncs.push_back(std::make_unique<redis_sync>(
        *budgets[i], o, clock, [&lines, i](auto l) { lines[i].emplace_back(l); }));
  }
  // An incident: 200 requests each, every retry the budget grants taken; the fleet's allowance
  // (0.1 · 600 + 100 = 160 retries) is spent down to the last claims.
  for (int round = 0; round < 4; ++round) {
    clock.advance(100ms);
    for (std::size_t i = 0; i < 3; ++i) {
      for (int r = 0; r < 50; ++r) (void)budgets[i]->try_admit(clock.now(), g);
      (void)grants_until_refused(*budgets[i], clock.now(), g);
      ASSERT_TRUE(syncs[i]->sync_once(true));
    }
  }
  std::vector<std::int64_t> held(3);
  for (std::size_t i = 0; i < 3; ++i)
    held[i] = std::max<std::int64_t>(budgets[i]->credit_micro(), 0);
  redisContext* c = redisConnect("127.0.0.1", own.port());
  ASSERT_TRUE(c != nullptr && c->err == 0);
  freeReplyObject(redisCommand(c, "FLUSHALL"));
  // The flushed store holds nothing: without learning mode each would be handed its share of a
  // whole new allowance (0.1 · its requests + the floor's 100 retries).
  clock.advance(100ms);
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(syncs[i]->sync_once(true));
    EXPECT_EQ(syncs[i]->stats().forgotten, 1) << i;
    EXPECT_TRUE(syncs[i]->stats().learning) << i;
    EXPECT_LE(budgets[i]->credit_micro(), held[i]) << i;
    ASSERT_FALSE(lines[i].empty());
    EXPECT_NE(lines[i].back().find("had forgotten the fleet"), std::string::npos);
  }
  // The learning window is one window from the first process that found the store empty.
  auto* t = static_cast<redisReply*>(redisCommand(c, "TIME"));
  const long long now_ms =
      std::stoll(t->element[0]->str) * 1000 + std::stoll(t->element[1]->str) / 1000;
  freeReplyObject(t);
  const auto until = static_cast<long long>(state_numbers(own.port(), key).at(2));
  EXPECT_GT(until, now_ms + 9'000);
  EXPECT_LE(until, now_ms + 10'000);
  // Within it, more syncs hand no more than the claim held (which only goes down).
  for (int round = 0; round < 3; ++round) {
    clock.advance(100ms);
    for (std::size_t i = 0; i < 3; ++i) {
      for (int r = 0; r < 50; ++r) (void)budgets[i]->try_admit(clock.now(), g);
      ASSERT_TRUE(syncs[i]->sync_once(true));
      EXPECT_LE(budgets[i]->credit_micro(), held[i]) << i;
      EXPECT_EQ(syncs[i]->stats().forgotten, 1) << i;  // found once
    }
  }
  // The window is over (set by hand): the claims follow the allowance again.
  redisFree(c);
  set_state_number(own.port(), key, 2, 0);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(syncs[i]->sync_once(true));
    EXPECT_FALSE(syncs[i]->stats().learning) << i;
    total += budgets[i]->credit_micro();
  }
  std::int64_t most = 0;
  for (const auto h : held) most += h;
  EXPECT_GT(total, most + 50 * 1'000'000);  // the floor's new allowance, no longer capped
}

// A Redis that lost its script cache (SCRIPT FLUSH; a restart that keeps the data) answers
// NOSCRIPT to the EVALSHA: the syncer sends the script itself (EVAL) in the same sync, which
// succeeds, and the next sync's EVALSHA finds the script cached by that EVAL.
TEST(RedisFleetSync, ALostScriptCacheIsAnsweredWithEvalInTheSameSync) {
  const std::string key = unique_key("noscript");
  manual_clock clock;
  fleet_budget budget(fleet_options());
  redis_sync sync(budget, sync_options(key, "c"), clock);
  ASSERT_TRUE(sync.sync_once(true));
  redis_command({"SCRIPT", "FLUSH"});
  auto before = command_calls();
  ASSERT_TRUE(sync.sync_once(true));
  auto after = command_calls();
  EXPECT_EQ(after["evalsha"] - before["evalsha"], 1);
  EXPECT_EQ(after["eval"] - before["eval"], 1);
  before = after;
  ASSERT_TRUE(sync.sync_once(true));
  after = command_calls();
  EXPECT_EQ(after["evalsha"] - before["evalsha"], 1);
  EXPECT_EQ(after["eval"] - before["eval"], 0);
  EXPECT_EQ(sync.stats().errors, 0);
  EXPECT_EQ(sync.stats().forgotten, 0);  // the data stayed
}
