// SPDX-License-Identifier: Apache-2.0
// Tests of the Redis idempotency store (make_redis_store, stores.hpp) against a real redis-server
// (tests/support/redis_server.hpp: one per test process, each test under its own key prefix).
// Time is the `now` the tests pass: leases and expiries move by arithmetic, never by sleeping.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "guard_store_suite.hpp"
#include "stormguard/guard/guard.hpp"
#include "stormguard/guard/store.hpp"
#include "stormguard/guard/stores.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

namespace stormguard_test {

std::unique_ptr<sg::store> make_redis_for_suite(const std::string& prefix) {
  return sg::make_redis_store(
      {.url = stormguard::test_support::redis_server::shared().url(), .prefix = prefix});
}

STORMGUARD_INSTANTIATE_STORE_SUITE(Redis, (store_factory{"redis", make_redis_for_suite}));

}  // namespace stormguard_test

namespace {

using namespace std::chrono_literals;
using stormguard::duration;
using stormguard::wall_time_point;
using stormguard::guard::begin_outcome;
using stormguard::guard::complete_outcome;
using stormguard::guard::fingerprint;
using stormguard::guard::make_redis_store;
using stormguard::guard::record_key;
using stormguard::guard::redis_options;
using stormguard::guard::row;
using stormguard::guard::store;
using stormguard::guard::store_error;
using stormguard::guard::stored_response;
using stormguard::guard::transaction;
using stormguard::test_support::redis_server;
using stormguard::test_util::invalid_argument_message;

const wall_time_point t0 = stormguard::testing::manual_clock::default_wall_start;
constexpr duration k_lease = 30s;
constexpr duration k_ttl = 24h;

fingerprint fp_of(std::uint8_t seed) {
  fingerprint f{};
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<std::uint8_t>(seed + i);
  return f;
}

/// The key prefix of the running test (set by redis_test::SetUp): its name and a run number,
/// so that tests share one server without seeing each other's keys, also under --gtest_repeat.
std::string current_prefix;  // NOLINT: written by SetUp only, on the main thread

const std::string& test_prefix() { return current_prefix; }

/// The fixture of every test below that writes: gives the test its own key prefix.
class redis_test : public ::testing::Test {
 protected:
  void SetUp() override {
    static int runs = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "." + info->name();
    if (name.size() > 54) {  // redis_options::prefix: at most 63 characters
      char hash[16];
      std::snprintf(hash, sizeof hash, ".%08zx", std::hash<std::string>{}(name)&0xffffffffU);
      name = name.substr(0, 45) + hash;
    }
    current_prefix = name + "#" + std::to_string(++runs);
  }
};
using RedisStore = redis_test;
using GuardOnRedis = redis_test;

/// A store on the shared server (database `db`) with the test's prefix.
std::unique_ptr<store> open_store_for_test(std::size_t max_connections = 8,
                                           std::chrono::milliseconds timeout = 2s, int db = 0) {
  return make_redis_store({.url = redis_server::shared().url(db),
                           .prefix = test_prefix(),
                           .timeout = timeout,
                           .max_connections = max_connections});
}

/// A store used only to inspect the server with query().
store& admin() {
  static const std::unique_ptr<store> s =
      make_redis_store({.url = redis_server::shared().url(), .prefix = "admin"});
  return *s;
}

std::optional<std::string> single(const std::vector<row>& rows) {
  EXPECT_EQ(rows.size(), 1U);
  if (rows.size() != 1 || rows[0].size() != 1) return std::nullopt;
  return rows[0][0];
}

/// The ids (CLIENT LIST) of the connections of this test's stores: a store names its
/// connections with its prefix (CLIENT SETNAME).
std::vector<std::string> store_client_ids() {
  std::vector<std::string> ids;
  const auto list = single(admin().query("CLIENT", {"LIST"})).value_or("");
  std::size_t pos = 0;
  while ((pos = list.find("id=", pos)) != std::string::npos) {
    const auto end = list.find('\n', pos);
    const std::string line = list.substr(pos, end - pos);
    if (line.find(" name=" + test_prefix() + " ") != std::string::npos) {
      ids.push_back(line.substr(3, line.find(' ') - 3));
    }
    pos = end;
  }
  return ids;
}

/// The key under which a store with `prefix` keeps (principal, key).
std::string record_key_text(const std::string& prefix, std::string_view principal,
                            std::string_view key) {
  return prefix + ":" + std::to_string(principal.size()) + ":" + std::string(principal) + ":" +
         std::string(key);
}

std::string store_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const store_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected store_error";
  return {};
}

stored_response respond(std::string body) {
  return stored_response{201, {{"Content-Type", "application/json"}}, std::move(body)};
}

// --- options ---------------------------------------------------------------------------------

TEST(RedisOptions, BadUrlIsRejectedNamingTheFieldAndQuotingTheValue) {
  for (const std::string url :
       {"", "127.0.0.1:6379", "http://h:1", "redis:/h", "redis://", "redis://:6379",
        "redis://h:", "redis://h:0", "redis://h:65536", "redis://h:12ab", "redis://h:-1",
        "redis://h/", "redis://h/x", "redis://h/-1", "redis://h/99999999999", "redis://h:1?db=2",
        "redis://[::1", "redis://[::1]x", "redis://[]:1"}) {
    SCOPED_TRACE(url);
    const std::string message =
        invalid_argument_message([&] { (void)make_redis_store({.url = url}); });
    EXPECT_NE(message.find("redis_options.url \"" + url + "\""), std::string::npos) << message;
  }
}

// One parser of Redis URLs (stormguard/detail/redis_url.hpp): user info is accepted and sent
// with AUTH (the password alone, or the ACL user and password); a wrong password is a store
// error that never shows it.
TEST(RedisOptions, UserInfoIsSentWithAuthAndAWrongPasswordIsNeverShown) {
  stormguard::test_support::redis_server server;  // its own: its password is changed
  const std::string port = std::to_string(server.port());
  ASSERT_EQ(stormguard::test_util::run_shell("redis-cli -p " + port +
                                             " CONFIG SET requirepass s3cret-pw >/dev/null")
                .exit_code,
            0);
  auto store = make_redis_store({.url = "redis://:s3cret-pw@127.0.0.1:" + port + "/0"});
  EXPECT_NO_THROW((void)store->query("PING", {}));
  auto acl = make_redis_store({.url = "redis://default:s3cret-pw@127.0.0.1:" + port + "/0"});
  EXPECT_NO_THROW((void)acl->query("PING", {}));
  const std::string message = store_error_message([&] {
    auto wrong = make_redis_store({.url = "redis://:not-it-pw@127.0.0.1:" + port + "/0"});
    (void)wrong->query("PING", {});
  });
  EXPECT_EQ(message.find("not-it-pw"), std::string::npos) << message;
  EXPECT_NE(message.find("AUTH"), std::string::npos) << message;
}

// redis+sentinel://: each new connection goes to the master the sentinels name; after the
// master is killed and its replica promoted, the store's broken connections are replaced by
// connections to the new master (a write within 10 s lands on the former replica).
TEST(RedisOptions, ASentinelUrlFollowsTheMasterThroughAFailover) {
  stormguard::test_support::redis_sentinel_set set;
  auto store = make_redis_store({.url = set.url(), .prefix = "sentinel", .timeout = 500ms});
  store->query("SET", {"sentinel:before", "1"});
  EXPECT_EQ(stormguard::test_support::redis_cli(set.master().port(), "get sentinel:before"), "1");
  ASSERT_TRUE(set.kill_master_and_wait_for_failover());
  bool written = false;
  for (int tries = 0; tries < 100 && !written; ++tries) {
    try {
      store->query("SET", {"sentinel:after", "2"});
      written = true;
    } catch (const stormguard::guard::store_error&) {
      std::this_thread::sleep_for(100ms);  // a pooled connection to the dead master, discarded
    }
  }
  ASSERT_TRUE(written);
  EXPECT_EQ(stormguard::test_support::redis_cli(set.replica().port(), "get sentinel:after"), "2");
  // Asked about a master they do not monitor, the sentinels say so, and the store names them.
  std::string url = set.url();
  url.replace(url.rfind('/'), std::string::npos, "/no-such-master");
  const std::string message = store_error_message([&] { (void)make_redis_store({.url = url}); });
  EXPECT_NE(message.find("monitors no master named \"no-such-master\""), std::string::npos)
      << message;
}

// The sum of `rejected_calls` of the store's record commands (EVALSHA, HMGET) in every live
// node's INFO commandstats: a command sent to a node that does not serve its slot is rejected
// with MOVED and counted there. (The test's own GETs through redis-cli are not counted.)
long long rejected_calls(stormguard::test_support::redis_cluster& cluster) {
  long long total = 0;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (cluster.node(i).pid() <= 0) continue;
    std::istringstream stats(
        stormguard::test_support::redis_cli(cluster.node(i).port(), "info commandstats"));
    for (std::string line; std::getline(stats, line);) {
      if (!line.starts_with("cmdstat_evalsha:") && !line.starts_with("cmdstat_hmget:")) continue;
      const std::size_t at = line.find("rejected_calls=");
      if (at != std::string::npos) total += std::stoll(line.substr(at + 15));
    }
  }
  return total;
}

// A redis:// URL naming one node of a Redis Cluster (3 masters, 3 replicas): the store reads the
// slot map and sends each record's commands straight to the master of its slot — no node ever
// rejects one (MOVED), so the store's slot arithmetic (CRC16, hash tags) agrees with the
// servers' on keys with and without braces — and every record is on that master.
TEST(RedisCluster, EachRecordGoesStraightToTheMasterOfItsSlot) {
  stormguard::test_support::redis_cluster cluster;
  const std::size_t seed = 3;  // a replica after --cluster create: it redirects everything
  auto store = make_redis_store({.url = cluster.node(seed).url(), .prefix = "c"});
  const long long before = rejected_calls(cluster);
  const std::vector<std::string> principals = {"p", "{p}", "a{b}c", "{}x", "x{", "}{y}", "{{z}}"};
  std::size_t n = 0;
  for (const auto& principal : principals) {
    for (int k = 0; k < 12; ++k, ++n) {
      const std::string key = "key-" + std::to_string(k) + (k % 3 == 0 ? "{t" : "}");
      ASSERT_EQ(store->begin({principal, key}, fp_of(1), "t", t0, k_lease, k_ttl).outcome,
                begin_outcome::acquired);
      ASSERT_EQ(store->complete({principal, key}, "t", t0, k_ttl,
                                [](transaction&) {
                                  return stored_response{201, {}, "ok"};
                                }),
                complete_outcome::completed);
      const auto found = store->find({principal, key}, t0);
      ASSERT_TRUE(found.has_value());
      ASSERT_TRUE(found->response.has_value());
      EXPECT_EQ(found->response->status, 201);
      const std::string record = record_key_text("c", principal, key);
      const std::size_t master = cluster.master_of(record);
      ASSERT_LT(master, cluster.size()) << record;
      EXPECT_EQ(stormguard::test_support::redis_cli(cluster.node(master).port(),
                                                    "exists '" + record + "'"),
                "1")
          << record;
    }
  }
  EXPECT_EQ(rejected_calls(cluster), before) << "commands sent to a node not serving the slot";
  // The records spread over the three masters.
  std::size_t on_first_master = 0;
  for (std::size_t k = 0; k < 12; ++k) {
    on_first_master += cluster.master_of(record_key_text(
                           "c", "p", "key-" + std::to_string(k) + (k % 3 == 0 ? "{t" : "}"))) ==
                       cluster.master_of(record_key_text("c", "p", "key-0{t"));
  }
  EXPECT_LT(on_first_master, 12U);
  // A query of a key on another master is redirected (MOVED) and answered.
  // Eight threads at once, each with its own records and all with one shared key: the pools of
  // the three masters are shared, and the shared key is acquired exactly once.
  std::atomic<int> acquired{0};
  std::atomic<int> completed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string token = "t" + std::to_string(t);
      if (store->begin({"p", "shared"}, fp_of(2), token, t0, k_lease, k_ttl).outcome ==
          begin_outcome::acquired) {
        ++acquired;
      }
      for (int k = 0; k < 10; ++k) {
        const std::string key = token + "-" + std::to_string(k);  // record_key holds views
        const record_key id{"q", key};
        const auto b = store->begin(id, fp_of(3), token, t0, k_lease, k_ttl).outcome;
        const auto c = store->complete(id, token, t0, k_ttl, [](transaction&) {
          return stored_response{200, {}, "ok"};
        });
        if (b == begin_outcome::acquired && c == complete_outcome::completed) ++completed;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(acquired.load(), 1);
  EXPECT_EQ(completed.load(), 80);
  EXPECT_EQ(rejected_calls(cluster), before);
  const std::string record = record_key_text("c", "p", "key-1}");
  EXPECT_EQ(single(store->query("HGET", {record, "status"})), "201");
}

// On a Cluster, complete()'s queued writes must share the record's hash slot: keys with the
// record's hash tag are committed with it; one key of another slot refuses the whole step before
// anything is written, naming the key, both slots and the tag to use, and the record stays in
// progress.
TEST(RedisCluster, QueuedWritesOfAnotherSlotAreRefusedBeforeAnythingIsWritten) {
  stormguard::test_support::redis_cluster cluster;
  auto store = make_redis_store({.url = cluster.node(0).url(), .prefix = "c"});
  const std::string tag = "{" + record_key_text("c", "p", "k1") + "}";
  ASSERT_EQ(store->begin({"p", "k1"}, fp_of(1), "t", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  ASSERT_EQ(store->complete({"p", "k1"}, "t", t0, k_ttl,
                            [&](transaction& tx) {
                              tx.execute("SET", {tag + ":balance", "5"});
                              tx.execute("RPUSH", {tag + ":ledger", "charge-1"});
                              tx.execute("PING", {});  // no key at all
                              return stored_response{200, {}, "ok"};
                            }),
            complete_outcome::completed);
  EXPECT_EQ(single(store->query("GET", {tag + ":balance"})), "5");

  ASSERT_EQ(store->begin({"p", "k2"}, fp_of(1), "t", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  const std::string tag2 = "{" + record_key_text("c", "p", "k2") + "}";
  std::string message;
  try {
    (void)store->complete({"p", "k2"}, "t", t0, k_ttl, [&](transaction& tx) {
      tx.execute("SET", {tag2 + ":a", "1"});
      tx.execute("MSET", {tag2 + ":b", "2", "elsewhere", "3"});
      return stored_response{200, {}, "ok"};
    });
  } catch (const stormguard::guard::statement_error& e) {  // deterministic: the guard releases
    message = e.what();
  }
  EXPECT_NE(message.find("queued command 2 (MSET) names key \"elsewhere\" of hash slot"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("must share the record's slot"), std::string::npos) << message;
  EXPECT_NE(message.find("nothing was written"), std::string::npos) << message;
  EXPECT_EQ(single(store->query("EXISTS", {tag2 + ":a"})), "0");
  EXPECT_EQ(single(store->query("EXISTS", {"elsewhere"})), "0");
  // The record's own key (a DEL would leave a record no begin can read) and a command the
  // script refuses before running any: statement_error too, nothing written.
  const std::string own = record_key_text("c", "p", "k2");
  for (const auto& [name, arg] : {std::pair<std::string, std::string>{"DEL", own},
                                  std::pair<std::string, std::string>{"NOSUCHCOMMAND", tag2}}) {
    EXPECT_THROW((void)store->complete({"p", "k2"}, "t", t0, k_ttl,
                                       [&](transaction& tx) {
                                         tx.execute("SET", {tag2 + ":a", "1"});
                                         tx.execute(name, {arg});
                                         return stored_response{200, {}, "ok"};
                                       }),
                 stormguard::guard::statement_error)
        << name;
  }
  EXPECT_EQ(single(store->query("EXISTS", {tag2 + ":a"})), "0");
  const auto found = store->find({"p", "k2"}, t0);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->outcome, begin_outcome::in_progress);
}

// A slot being migrated (CLUSTER SETSLOT MIGRATING/IMPORTING, keys moved one at a time with
// MIGRATE, as a reshard does): with the record moved and the handler's counter not yet, the
// completing script is never run on either node (the queued command's key is declared with it:
// the source answers TRYAGAIN), so the counter is neither incremented on the source nor created
// on the target; once the migration ends, the same complete() commits on the target.
TEST(RedisCluster, ASlotBeingMigratedNeverRunsTheHandlersWritesOnTheWrongNode) {
  using stormguard::test_support::redis_cli;
  stormguard::test_support::redis_cluster cluster;
  auto store = make_redis_store({.url = cluster.node(0).url(), .prefix = "c", .timeout = 500ms});
  const std::string record = record_key_text("c", "p", "k");
  const std::string counter = "{" + record + "}:count";
  store->query("SET", {counter, "5"});
  ASSERT_EQ(store->begin({"p", "k"}, fp_of(1), "t", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  const std::size_t source = cluster.master_of(record);
  ASSERT_LT(source, cluster.size());
  std::size_t target = cluster.size();
  for (std::size_t i = 0; i < cluster.size() && target == cluster.size(); ++i) {
    if (i != source && redis_cli(cluster.node(i).port(), "role").starts_with("master")) target = i;
  }
  ASSERT_LT(target, cluster.size());
  const auto port = [&](std::size_t i) { return cluster.node(i).port(); };
  const std::string slot = redis_cli(port(source), "cluster keyslot '" + record + "'");
  const std::string source_id = redis_cli(port(source), "cluster myid");
  const std::string target_id = redis_cli(port(target), "cluster myid");
  ASSERT_EQ(redis_cli(port(target), "cluster setslot " + slot + " importing " + source_id), "OK");
  ASSERT_EQ(redis_cli(port(source), "cluster setslot " + slot + " migrating " + target_id), "OK");
  const auto migrate = [&](const std::string& key) {
    return redis_cli(port(source),
                     "migrate 127.0.0.1 " + std::to_string(port(target)) + " '" + key + "' 0 5000");
  };
  ASSERT_EQ(migrate(record), "OK");
  const auto complete = [&] {
    return store->complete({"p", "k"}, "t", t0, k_ttl, [&](transaction& tx) {
      tx.execute("INCR", {counter});
      return stored_response{200, {}, "ok"};
    });
  };
  std::string message;
  try {
    (void)complete();
  } catch (const store_error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("TRYAGAIN"), std::string::npos) << message;
  EXPECT_EQ(redis_cli(port(source), "get '" + counter + "'"), "5");
  // The target holds the record alone (it answers MOVED to a plain EXISTS while importing).
  EXPECT_EQ(redis_cli(port(target), "cluster countkeysinslot " + slot), "1");
  // The migration ends: the counter moves, and the slot is the target's.
  ASSERT_EQ(migrate(counter), "OK");
  for (const std::size_t i : {target, source}) {
    ASSERT_EQ(redis_cli(port(i), "cluster setslot " + slot + " node " + target_id), "OK");
  }
  EXPECT_EQ(complete(), complete_outcome::completed);
  EXPECT_EQ(redis_cli(port(target), "get '" + counter + "'"), "6");
  EXPECT_EQ(redis_cli(port(target), "hget '" + record + "' state"), "completed");
}

// The master of a record's slot killed: its replica is promoted (cluster-node-timeout 1 s); the
// store's next steps fail (store_error, never a hang) until it reads the new map, then reach the
// promoted replica, which holds the record.
TEST(RedisCluster, TheStoreFollowsAFailoverOfARecordsMaster) {
  stormguard::test_support::redis_cluster cluster;
  auto store = make_redis_store({.url = cluster.node(0).url(), .prefix = "c", .timeout = 500ms});
  ASSERT_EQ(store->begin({"p", "k"}, fp_of(1), "t", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  const std::string record = record_key_text("c", "p", "k");
  const std::size_t master = cluster.master_of(record);
  ASSERT_LT(master, cluster.size());
  // The replica has the record before its master dies (WAIT: replicated to one replica).
  EXPECT_EQ(stormguard::test_support::redis_cli(cluster.node(master).port(), "wait 1 2000"), "1");
  cluster.node(master).kill();
  ASSERT_TRUE(cluster.wait_until_ok());
  std::optional<complete_outcome> done;
  int failures = 0;
  for (int tries = 0; tries < 100 && !done; ++tries) {
    try {
      done = store->complete({"p", "k"}, "t", t0, k_ttl, [](transaction&) {
        return stored_response{200, {}, "ok"};
      });
    } catch (const store_error&) {
      ++failures;
      std::this_thread::sleep_for(100ms);
    }
  }
  ASSERT_TRUE(done.has_value()) << failures << " failures";
  EXPECT_EQ(*done, complete_outcome::completed);
  const std::size_t promoted = cluster.master_of(record);
  ASSERT_LT(promoted, cluster.size());
  EXPECT_NE(promoted, master);
  EXPECT_EQ(stormguard::test_support::redis_cli(cluster.node(promoted).port(),
                                                "hget '" + record + "' state"),
            "completed");
}

TEST(RedisOptions, BadPrefixTimeoutOrMaxConnectionsIsRejectedNamingTheField) {
  const std::string url = "redis://127.0.0.1:1/0";  // never reached: options are checked first
  for (const std::string& prefix :
       std::vector<std::string>{"", "has space", "tab\there", std::string(64, 'p'), "é"}) {
    const std::string message =
        invalid_argument_message([&] { (void)make_redis_store({.url = url, .prefix = prefix}); });
    EXPECT_NE(message.find("redis_options.prefix"), std::string::npos) << message;
  }
  EXPECT_NE(invalid_argument_message([&] {
              (void)make_redis_store({.url = url, .timeout = 0ms});
            }).find("redis_options.timeout 0ms"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              (void)make_redis_store({.url = url, .max_connections = 0});
            }).find("redis_options.max_connections 0"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              (void)make_redis_store({.url = url, .max_connections = 1025});
            }).find("redis_options.max_connections 1025"),
            std::string::npos);
}

TEST(RedisOptions, OpenStoreTakesARedisSpec) {
  const auto s = stormguard::guard::open_store("redis:" + redis_server::shared().url());
  EXPECT_EQ(s->kind(), stormguard::guard::store_kind::redis);
}

// --- reaching the server ---------------------------------------------------------------------

TEST_F(RedisStore, ServerThatIsDownThrowsStoreErrorWithTheReason) {
  const std::string url = "redis://127.0.0.1:" + std::to_string(redis_server::unused_port());
  const std::string message = store_error_message([&] { (void)make_redis_store({.url = url}); });
  EXPECT_NE(message.find("redis store " + url + ": connect: "), std::string::npos) << message;
  EXPECT_NE(message.find("refused"), std::string::npos) << message;
}

TEST_F(RedisStore, AnEvictingMaxmemoryPolicyIsRefusedNamingTheSettingAndItsValue) {
  struct restore_policy {
    ~restore_policy() { admin().query("CONFIG", {"SET", "maxmemory-policy", "noeviction"}); }
  } restore;
  admin().query("CONFIG", {"SET", "maxmemory-policy", "allkeys-lru"});
  const std::string message = store_error_message([&] {
    (void)make_redis_store({.url = redis_server::shared().url(), .prefix = test_prefix()});
  });
  EXPECT_NE(message.find("maxmemory-policy is \"allkeys-lru\""), std::string::npos) << message;
  EXPECT_NE(message.find("noeviction"), std::string::npos) << message;
  // Opted out: opens (for a server that hides CONFIG and is known to be noeviction).
  EXPECT_NO_THROW((void)make_redis_store(
      {.url = redis_server::shared().url(), .prefix = test_prefix(), .require_noeviction = false}));
  admin().query("CONFIG", {"SET", "maxmemory-policy", "noeviction"});
  EXPECT_NO_THROW(
      (void)make_redis_store({.url = redis_server::shared().url(), .prefix = test_prefix()}));
}

TEST_F(RedisStore, DatabaseOutOfRangeThrowsStoreErrorAtConnect) {
  const std::string message = store_error_message(
      [&] { (void)make_redis_store({.url = redis_server::shared().url(999)}); });
  EXPECT_NE(message.find("SELECT"), std::string::npos) << message;
  EXPECT_NE(message.find("out of range"), std::string::npos) << message;
}

TEST_F(RedisStore, SelectsTheDatabaseOfTheUrl) {
  const auto in_db3 = open_store_for_test(8, 2s, 3);
  in_db3->query("SET", {test_prefix() + ":x", "3"});
  const auto other_db3 = open_store_for_test(8, 2s, 3);
  EXPECT_EQ(single(other_db3->query("GET", {test_prefix() + ":x"})), "3");
  EXPECT_EQ(single(admin().query("GET", {test_prefix() + ":x"})), std::nullopt);  // db 0
}

TEST_F(RedisStore, KilledConnectionIsDiscardedFromThePool) {
  const auto s = open_store_for_test(1);
  const record_key id{"p", "k"};
  ASSERT_EQ(s->begin(id, fp_of(1), "t1", t0, k_lease, k_ttl).outcome, begin_outcome::acquired);

  // The store names its connections with its prefix (CLIENT SETNAME): kill the only one.
  const auto before = store_client_ids();
  ASSERT_EQ(before.size(), 1U);
  EXPECT_EQ(single(admin().query("CLIENT", {"KILL", "ID", before[0]})), "1");

  const std::string message =
      store_error_message([&] { (void)s->begin(id, fp_of(1), "t2", t0, k_lease, k_ttl); });
  EXPECT_NE(message.find("redis store " + redis_server::shared().url() + ": EVALSHA: "),
            std::string::npos)
      << message;
  // The broken connection was closed, not returned: the next call opens a new one and works.
  EXPECT_EQ(s->begin(id, fp_of(1), "t3", t0, k_lease, k_ttl).outcome, begin_outcome::in_progress);
  const auto after = store_client_ids();
  ASSERT_EQ(after.size(), 1U);
  EXPECT_NE(after[0], before[0]);
}

TEST_F(RedisStore, WritingToAKilledConnectionNeitherRaisesNorLeavesSigpipe) {
  const auto s = open_store_for_test(1);
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  const auto ids = store_client_ids();
  ASSERT_EQ(ids.size(), 1U);
  admin().query("CLIENT", {"KILL", "ID", ids[0]});
  // 16 MiB: more than the socket buffers take, so hiredis writes again after the server's RST
  // (EPIPE). Without the store blocking SIGPIPE, its default action would end this process.
  const std::string body(std::size_t{16} << 20U, 'x');
  const std::string message = store_error_message([&] {
    (void)s->complete({"p", "k"}, "t1", t0, k_ttl, [&](transaction&) { return respond(body); });
  });
  EXPECT_NE(message.find("EVALSHA"), std::string::npos) << message;
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
  EXPECT_EQ(s->complete({"p", "k"}, "t1", t0, k_ttl, [](transaction&) { return respond("ok"); }),
            complete_outcome::completed);
}

TEST_F(RedisStore, CommandThatOutlivesTheTimeoutThrowsStoreErrorAndIsDiscarded) {
  const auto s = open_store_for_test(1, 100ms);
  const std::string message = store_error_message([&] {
    (void)s->query("BLPOP", {test_prefix() + ":never", "0"});
  });
  EXPECT_NE(message.find("timeout of 100ms"), std::string::npos) << message;
  EXPECT_EQ(single(s->query("PING", {})), "PONG");
}

TEST_F(RedisStore, ScriptsAreLoadedAgainAfterScriptFlush) {
  const auto s = open_store_for_test();
  ASSERT_EQ(s->begin({"p", "a"}, fp_of(1), "t", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  admin().query("SCRIPT", {"FLUSH"});
  EXPECT_EQ(s->complete({"p", "a"}, "t", t0, k_ttl, [](transaction&) { return respond("{}"); }),
            complete_outcome::completed);
  admin().query("SCRIPT", {"FLUSH"});
  EXPECT_EQ(s->begin({"p", "a"}, fp_of(1), "u", t0, k_lease, k_ttl).outcome,
            begin_outcome::completed);
}

// --- begin -----------------------------------------------------------------------------------

TEST_F(RedisStore, KindIsRedis) {
  EXPECT_EQ(open_store_for_test()->kind(), stormguard::guard::store_kind::redis);
}

TEST_F(RedisStore, BeginAcquiresOnceThenReportsTheLeaseHolder) {
  const auto s = open_store_for_test();
  const auto first = s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl);
  EXPECT_EQ(first.outcome, begin_outcome::acquired);
  EXPECT_FALSE(first.took_over);
  const auto second = s->begin({"p", "k"}, fp_of(2), "t2", t0 + 1s, k_lease, k_ttl);
  EXPECT_EQ(second.outcome, begin_outcome::in_progress);
  EXPECT_EQ(second.fingerprint, fp_of(1));
  EXPECT_EQ(second.lease_expires, t0 + k_lease);
  EXPECT_FALSE(second.response.has_value());
}

TEST_F(RedisStore, RecordIsOneHashWithAPexpireOfTheTtl) {
  const auto s = open_store_for_test();
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, 1h).outcome, begin_outcome::acquired);
  const std::string key = record_key_text(test_prefix(), "p", "k");
  const auto rows = admin().query("HGETALL", {key});
  std::vector<std::string> fields;
  for (std::size_t i = 0; i + 1 < rows.size(); i += 2) fields.push_back(rows[i][0].value_or(""));
  std::sort(fields.begin(), fields.end());
  EXPECT_EQ(fields, (std::vector<std::string>{"expires", "fingerprint", "lease_expires", "state",
                                              "token"}));
  EXPECT_EQ(single(admin().query("HGET", {key, "lease_expires"})),
            std::to_string((t0 + k_lease).time_since_epoch().count()));
  const auto pttl = std::stoll(single(admin().query("PTTL", {key})).value_or("-1"));
  EXPECT_GT(pttl, 3'500'000);
  EXPECT_LE(pttl, 3'600'000);
}

TEST_F(RedisStore, KeysOfDifferentPrincipalsNeverCollide) {
  const auto s = open_store_for_test();
  // With a plain "principal:key" layout, these two would be the same key "a:b:c".
  ASSERT_EQ(s->begin({"a:b", "c"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  EXPECT_EQ(s->begin({"a", "b:c"}, fp_of(2), "t2", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  EXPECT_EQ(s->begin({"", "a:b:c"}, fp_of(3), "t3", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
}

TEST_F(RedisStore, LeaseCanBeTakenOverExactlyWhenItExpires) {
  const auto s = open_store_for_test();
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  // Nanoseconds since the epoch exceed 2^53: one nanosecond must still decide.
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t2", t0 + k_lease - 1ns, k_lease, k_ttl).outcome,
            begin_outcome::in_progress);
  const auto taken = s->begin({"p", "k"}, fp_of(1), "t2", t0 + k_lease, k_lease, k_ttl);
  EXPECT_EQ(taken.outcome, begin_outcome::acquired);
  EXPECT_TRUE(taken.took_over);
  const auto now_held = s->begin({"p", "k"}, fp_of(1), "t3", t0 + k_lease, k_lease, k_ttl);
  EXPECT_EQ(now_held.lease_expires, t0 + 2 * k_lease);
}

TEST_F(RedisStore, RecordExpiresExactlyAtItsExpiry) {
  const auto s = open_store_for_test();
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  ASSERT_EQ(
      s->complete({"p", "k"}, "t1", t0 + 1s, k_ttl, [](transaction&) { return respond("1"); }),
      complete_outcome::completed);
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t2", t0 + 1s + k_ttl - 1ns, k_lease, k_ttl).outcome,
            begin_outcome::completed);
  const auto fresh = s->begin({"p", "k"}, fp_of(9), "t2", t0 + 1s + k_ttl, k_lease, k_ttl);
  EXPECT_EQ(fresh.outcome, begin_outcome::acquired);
  EXPECT_FALSE(fresh.took_over);
  // The new record starts clean: no stored response of the old one.
  EXPECT_EQ(single(admin().query("HEXISTS", {record_key_text(test_prefix(), "p", "k"), "body"})),
            "0");
}

TEST_F(RedisStore, TimesBeforeTheEpochCompareCorrectly) {
  const auto s = open_store_for_test();
  const wall_time_point early{-1h};
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", early, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t2", early + k_lease - 1ns, k_lease, k_ttl).outcome,
            begin_outcome::in_progress);
  EXPECT_TRUE(s->begin({"p", "k"}, fp_of(1), "t2", early + k_lease, k_lease, k_ttl).took_over);
}

TEST_F(RedisStore, BadArgumentsThrowInvalidArgumentNamingThem) {
  const auto s = open_store_for_test();
  EXPECT_NE(invalid_argument_message([&] {
              (void)s->begin({"p", "k"}, fp_of(1), "t", t0, 0ns, k_ttl);
            }).find("lease 0ns"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              (void)s->begin({"p", "k"}, fp_of(1), "t", t0, k_lease, -1s);
            }).find("ttl"),
            std::string::npos);
  const std::string long_part(256, 'x');
  EXPECT_NE(invalid_argument_message([&] {
              (void)s->begin({long_part, "k"}, fp_of(1), "t", t0, k_lease, k_ttl);
            }).find("record_key.principal of 256 bytes"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              s->release({"p", long_part}, "t");
            }).find("record_key.key of 256 bytes"),
            std::string::npos);
}

// --- complete --------------------------------------------------------------------------------

TEST_F(RedisStore, CompletedResponseIsReplayedByteForByte) {
  const auto s = open_store_for_test();
  const std::string body("binary\0body\xff\r\n", 15);
  const stored_response response{
      207,
      {{"Content-Type", "text/plain"}, {"X-Empty", ""}, {"", "no name"}, {"X-Bin", {"\0\1", 2}}},
      body};
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(7), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  ASSERT_EQ(s->complete({"p", "k"}, "t1", t0, k_ttl, [&](transaction&) { return response; }),
            complete_outcome::completed);
  const auto replay = s->begin({"p", "k"}, fp_of(8), "t2", t0 + 1s, k_lease, k_ttl);
  EXPECT_EQ(replay.outcome, begin_outcome::completed);
  EXPECT_EQ(replay.fingerprint, fp_of(7));
  ASSERT_TRUE(replay.response.has_value());
  EXPECT_EQ(*replay.response, response);
}

TEST_F(RedisStore, QueuedCommandsApplyExactlyWhenCompleteReturnsCompleted) {
  const auto s = open_store_for_test();
  const std::string ledger = test_prefix() + ":ledger";
  const std::string total = test_prefix() + ":total";
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  const auto done = s->complete({"p", "k"}, "t1", t0, k_ttl, [&](transaction& tx) {
    EXPECT_EQ(tx.kind(), stormguard::guard::store_kind::redis);
    EXPECT_TRUE(tx.execute("RPUSH", {ledger, "charge-1"}).empty());  // queued: no rows
    tx.execute("incrby", {total, "500"});                            // any case
    tx.execute("HSET", {ledger + ":meta", "currency", "eur", "by", "p"});
    // Nothing has run yet.
    EXPECT_EQ(single(admin().query("EXISTS", {ledger})), "0");
    return respond("{\"id\":1}");
  });
  EXPECT_EQ(done, complete_outcome::completed);
  const auto rows = admin().query("LRANGE", {ledger, "0", "-1"});
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0][0], "charge-1");
  EXPECT_EQ(single(admin().query("GET", {total})), "500");
  EXPECT_EQ(single(admin().query("HGET", {ledger + ":meta", "by"})), "p");
}

TEST_F(RedisStore, TakenOverLeaseCannotCompleteAndItsCommandsNeverRun) {
  const auto s = open_store_for_test();
  const std::string ledger = test_prefix() + ":ledger";
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "old", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  ASSERT_TRUE(s->begin({"p", "k"}, fp_of(1), "new", t0 + k_lease, k_lease, k_ttl).took_over);

  EXPECT_EQ(s->complete({"p", "k"}, "old", t0 + k_lease + 1s, k_ttl,
                        [&](transaction& tx) {
                          tx.execute("RPUSH", {ledger, "old"});
                          return respond("old");
                        }),
            complete_outcome::lease_lost);
  EXPECT_EQ(single(admin().query("EXISTS", {ledger})), "0");

  EXPECT_EQ(s->complete({"p", "k"}, "new", t0 + k_lease + 2s, k_ttl,
                        [&](transaction& tx) {
                          tx.execute("RPUSH", {ledger, "new"});
                          return respond("new");
                        }),
            complete_outcome::completed);
  EXPECT_EQ(single(admin().query("LRANGE", {ledger, "0", "-1"})), "new");
  const auto replay = s->begin({"p", "k"}, fp_of(1), "x", t0 + k_lease + 3s, k_lease, k_ttl);
  ASSERT_TRUE(replay.response.has_value());
  EXPECT_EQ(replay.response->body, "new");
  // Completing twice is a lost lease: the record is no longer in progress.
  EXPECT_EQ(s->complete({"p", "k"}, "new", t0 + k_lease + 4s, k_ttl,
                        [](transaction&) { return respond("again"); }),
            complete_outcome::lease_lost);
}

TEST_F(RedisStore, CompleteOfAReleasedOrMissingRecordIsLeaseLost) {
  const auto s = open_store_for_test();
  bool ran = false;
  EXPECT_EQ(s->complete({"p", "absent"}, "t", t0, k_ttl,
                        [&](transaction&) {
                          ran = true;
                          return respond("");
                        }),
            complete_outcome::lease_lost);
  EXPECT_TRUE(ran);  // the work runs first (it only queues); its commands are discarded
}

TEST_F(RedisStore, ThrowingWorkSendsNothingAndPropagates) {
  const auto s = open_store_for_test();
  const std::string ledger = test_prefix() + ":ledger";
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  EXPECT_THROW((void)s->complete({"p", "k"}, "t1", t0, k_ttl,
                                 [&](transaction& tx) -> stored_response {
                                   tx.execute("RPUSH", {ledger, "x"});
                                   throw std::runtime_error("handler failed");
                                 }),
               std::runtime_error);
  EXPECT_EQ(single(admin().query("EXISTS", {ledger})), "0");
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t2", t0, k_lease, k_ttl).outcome,
            begin_outcome::in_progress);
}

TEST_F(RedisStore, QueuedCommandThatCannotRunIsRefusedBeforeAnythingIsWritten) {
  const auto s = open_store_for_test();
  const std::string ledger = test_prefix() + ":ledger";
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  struct bad_command {
    std::vector<std::string_view> command;
    std::string expected;
  };
  for (const auto& [command, expected] : std::vector<bad_command>{
           {{"NOSUCHCOMMAND", "x"}, "queued command 2: unknown command nosuchcommand"},
           {{"INCR"}, "queued command 2: wrong number of arguments for incr"},
           {{"MULTI"}, "queued command 2: multi cannot run in a script"},
           {{"CLIENT", "REPLY", "OFF"}, "queued command 2: client|reply cannot run in a script"},
           {{"CLIENT", "NOSUCH"}, "queued command 2: unknown command client|nosuch"}}) {
    SCOPED_TRACE(expected);
    const std::string message = store_error_message([&] {
      (void)s->complete({"p", "k"}, "t1", t0, k_ttl, [&](transaction& tx) {
        tx.execute("RPUSH", {ledger, "first"});
        tx.execute(command.front(), std::span(command).subspan(1));
        return respond("");
      });
    });
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_NE(message.find("nothing was written"), std::string::npos) << message;
    EXPECT_EQ(single(admin().query("EXISTS", {ledger})), "0");
  }
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t2", t0, k_lease, k_ttl).outcome,
            begin_outcome::in_progress);
}

TEST_F(RedisStore, QueuedCommandFailingWhileRunningKeepsEarlierWritesAndTheRecordInProgress) {
  // Documented: a Redis script does not roll back. The checks before running catch unknown
  // commands and bad argument counts; a WRONGTYPE or a non-integer can only fail while running.
  const auto s = open_store_for_test();
  const std::string ledger = test_prefix() + ":ledger";
  const std::string text = test_prefix() + ":text";
  admin().query("SET", {text, "not a number"});
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  const std::string message = store_error_message([&] {
    (void)s->complete({"p", "k"}, "t1", t0, k_ttl, [&](transaction& tx) {
      tx.execute("RPUSH", {ledger, "first"});
      tx.execute("INCR", {text});
      tx.execute("RPUSH", {ledger, "third"});
      return respond("");
    });
  });
  EXPECT_NE(message.find("queued command 2 (INCR) failed"), std::string::npos) << message;
  EXPECT_NE(message.find("not an integer"), std::string::npos) << message;
  EXPECT_NE(message.find("do not roll back"), std::string::npos) << message;
  EXPECT_EQ(single(admin().query("LRANGE", {ledger, "0", "-1"})), "first");
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t2", t0, k_lease, k_ttl).outcome,
            begin_outcome::in_progress);
}

TEST_F(RedisStore, SelectCannotBeQueued) {
  const auto s = open_store_for_test();
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  const std::string message = invalid_argument_message([&] {
    (void)s->complete({"p", "k"}, "t1", t0, k_ttl, [](transaction& tx) {
      tx.execute("select", {"1"});
      return respond("");
    });
  });
  EXPECT_NE(message.find("statement \"select\""), std::string::npos) << message;
  // A name with a control byte or a space is refused too (a NUL would cut the name short).
  for (const std::string& name :
       {std::string("SET\0X", 5), std::string("SET X"), std::string("\x7f")}) {
    const std::string bad = invalid_argument_message([&] {
      (void)s->complete({"p", "k"}, "t1", t0, k_ttl, [&](transaction& tx) {
        tx.execute(name, {"a", "1"});
        return respond("");
      });
    });
    EXPECT_NE(bad.find("has no spaces or control bytes"), std::string::npos) << bad;
  }
}

// --- release and query -----------------------------------------------------------------------

TEST_F(RedisStore, ReleaseDeletesOnlyAnInProgressRecordUnderItsToken) {
  const auto s = open_store_for_test();
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  s->release({"p", "k"}, "other");
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t2", t0, k_lease, k_ttl).outcome,
            begin_outcome::in_progress);
  s->release({"p", "k"}, "t1");
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t3", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  ASSERT_EQ(s->complete({"p", "k"}, "t3", t0, k_ttl, [](transaction&) { return respond("x"); }),
            complete_outcome::completed);
  s->release({"p", "k"}, "t3");  // completed: a no-op
  EXPECT_EQ(s->begin({"p", "k"}, fp_of(1), "t4", t0, k_lease, k_ttl).outcome,
            begin_outcome::completed);
  s->release({"p", "never"}, "t");  // absent: a no-op
  EXPECT_EQ(s->purge_expired(t0 + 2 * k_ttl), 0U);
}

TEST_F(RedisStore, QueryGivesOneRowPerArrayElementAndOneColumnEach) {
  const auto s = open_store_for_test();
  const std::string list = test_prefix() + ":list";
  EXPECT_EQ(single(s->query("SET", {test_prefix() + ":s", "v"})), "OK");
  EXPECT_EQ(single(s->query("RPUSH", {list, "a", "", "c"})), "3");
  EXPECT_EQ(s->query("LRANGE", {list, "0", "-1"}), (std::vector<row>{{"a"}, {""}, {"c"}}));
  EXPECT_EQ(s->query("MGET", {test_prefix() + ":s", test_prefix() + ":absent"}),
            (std::vector<row>{{"v"}, {std::nullopt}}));
  EXPECT_EQ(single(s->query("GET", {test_prefix() + ":absent"})), std::nullopt);
  EXPECT_TRUE(s->query("LRANGE", {test_prefix() + ":absent", "0", "-1"}).empty());
  // A nested array (SCAN's keys) is one row with a column per element.
  const auto scan = s->query("SCAN", {"0", "MATCH", list, "COUNT", "1000000"});
  ASSERT_EQ(scan.size(), 2U);
  EXPECT_EQ(scan[1], (row{list}));
}

TEST_F(RedisStore, QueryErrorReplyThrowsStoreError) {
  const auto s = open_store_for_test();
  const std::string message = store_error_message([&] { (void)s->query("NOSUCHCOMMAND", {"x"}); });
  EXPECT_NE(message.find("NOSUCHCOMMAND: ERR unknown command"), std::string::npos) << message;
}

TEST_F(RedisStore, QueryRefusesCommandsThatChangeThePooledConnection) {
  const auto s = open_store_for_test();
  for (const auto& [name, arg] :
       std::vector<std::pair<std::string, std::string>>{{"SELECT", "1"},
                                                        {"multi", ""},
                                                        {"SUBSCRIBE", "c"},
                                                        {"HELLO", "3"},
                                                        {"CLIENT", "REPLY"},
                                                        {"READONLY", ""},
                                                        {"asking", ""},
                                                        {"CLIENT", "SETNAME"}}) {
    const std::string message = invalid_argument_message([&] {
      if (arg.empty()) {
        (void)s->query(name, {});
      } else {
        (void)s->query(name, {arg});
      }
    });
    EXPECT_NE(message.find("statement \"" + name + "\""), std::string::npos) << message;
  }
  EXPECT_EQ(single(s->query("PING", {})), "PONG");
}

TEST_F(RedisStore, OutOfMemoryIsRefusedBeforeAnythingIsWritten) {
  const auto s = open_store_for_test();
  const std::string ledger = test_prefix() + ":ledger";
  const std::string other = test_prefix() + ":other";
  admin().query("SET", {other, "kept"});
  ASSERT_EQ(s->begin({"p", "k"}, fp_of(1), "t1", t0, k_lease, k_ttl).outcome,
            begin_outcome::acquired);
  struct restore_maxmemory {
    ~restore_maxmemory() { admin().query("CONFIG", {"SET", "maxmemory", "0"}); }
  } restore;
  admin().query("CONFIG", {"SET", "maxmemory", "1"});
  const std::string message = store_error_message([&] {
    (void)s->complete({"p", "k"}, "t1", t0, k_ttl, [&](transaction& tx) {
      // DEL may run out of memory (not denyoom): without the script flags it would run, and
      // the RPUSH then fail.
      tx.execute("DEL", {other});
      tx.execute("RPUSH", {ledger, "first"});
      return respond("");
    });
  });
  EXPECT_NE(message.find("OOM"), std::string::npos) << message;
  admin().query("CONFIG", {"SET", "maxmemory", "0"});
  EXPECT_EQ(single(admin().query("EXISTS", {ledger})), "0");
  EXPECT_EQ(single(admin().query("GET", {other})), "kept");
  EXPECT_EQ(s->complete({"p", "k"}, "t1", t0, k_ttl,
                        [&](transaction& tx) {
                          tx.execute("RPUSH", {ledger, "first"});
                          return respond("");
                        }),
            complete_outcome::completed);
}

// --- the guard on Redis: a store that goes away ----------------------------------------------

stormguard::guard::request charge() {
  return {.principal = "user-1",
          .method = "POST",
          .target = "/charges",
          .body = "{\"amount\":500}",
          .idempotency_key = "key-1"};
}

std::string header_of(const stored_response& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<none>";
}

TEST_F(GuardOnRedis, LostConnectionAtBeginAnswers503AndNeverRunsTheHandler) {
  const auto s = open_store_for_test(1);
  stormguard::testing::manual_clock clock;
  stormguard::guard::idempotency_guard guard(*s, {.time = &clock});
  const auto ids = store_client_ids();
  ASSERT_EQ(ids.size(), 1U);
  admin().query("CLIENT", {"KILL", "ID", ids[0]});
  int runs = 0;
  const auto r = guard.handle(charge(), [&](transaction&) {
    ++runs;
    return respond("{}");
  });
  EXPECT_EQ(r.decision, stormguard::guard::decision::store_unavailable);
  EXPECT_EQ(r.response.status, 503);
  EXPECT_EQ(header_of(r.response, "Retry-After"), "1");
  EXPECT_EQ(runs, 0);
  // The next request reconnects.
  EXPECT_EQ(guard.handle(charge(), [&](transaction&) { return respond("{}"); }).decision,
            stormguard::guard::decision::ran);
}

TEST_F(GuardOnRedis, LostConnectionAtCompleteAnswers503CommitsNothingAndTheLeaseThenExpires) {
  const auto s = open_store_for_test(1);
  stormguard::testing::manual_clock clock;
  stormguard::guard::idempotency_guard guard(*s, {.time = &clock});
  const std::string ledger = test_prefix() + ":ledger";
  const auto r = guard.handle(charge(), [&](transaction& tx) {
    tx.execute("RPUSH", {ledger, "charge"});
    // The handler runs with no connection held: kill the idle one that complete() will use.
    const auto ids = store_client_ids();
    EXPECT_EQ(ids.size(), 1U);
    if (!ids.empty()) admin().query("CLIENT", {"KILL", "ID", ids[0]});
    return respond("{}");
  });
  EXPECT_EQ(r.decision, stormguard::guard::decision::store_unavailable);
  EXPECT_EQ(single(admin().query("EXISTS", {ledger})), "0");
  // The record stays in progress under the lost token until its lease expires ...
  EXPECT_EQ(guard.handle(charge(), [&](transaction&) { return respond("{}"); }).decision,
            stormguard::guard::decision::in_progress);
  // ... and is then taken over: the retry runs the handler once.
  clock.advance(guard.options().lease);
  const auto retry = guard.handle(charge(), [&](transaction& tx) {
    tx.execute("RPUSH", {ledger, "charge"});
    return respond("{}");
  });
  EXPECT_EQ(retry.decision, stormguard::guard::decision::ran);
  EXPECT_TRUE(retry.took_over);
  EXPECT_EQ(single(admin().query("LLEN", {ledger})), "1");
}

// --- concurrency -----------------------------------------------------------------------------

TEST_F(RedisStore, ConcurrentBeginsOnOneKeyAcquireExactlyOnce) {
  const auto s = open_store_for_test(4);
  constexpr int k_threads = 32;
  std::atomic<int> acquired{0};
  std::atomic<int> in_progress{0};
  std::latch start(k_threads);
  std::vector<std::thread> threads;
  for (int i = 0; i < k_threads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      const auto r = s->begin({"p", "k"}, fp_of(1), "t" + std::to_string(i), t0, k_lease, k_ttl);
      (r.outcome == begin_outcome::acquired ? acquired : in_progress).fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(acquired.load(), 1);
  EXPECT_EQ(in_progress.load(), k_threads - 1);
}

TEST_F(RedisStore, GuardRunsTheHandlerOnceUnderConcurrentRepeats) {
  const auto s = open_store_for_test(4);
  stormguard::testing::manual_clock clock;
  stormguard::guard::idempotency_guard guard(*s, {.time = &clock});
  const std::string counter = test_prefix() + ":charges";
  constexpr int k_threads = 32;
  std::atomic<int> ran{0};
  std::atomic<int> others{0};
  std::latch start(k_threads);
  std::vector<std::thread> threads;
  for (int i = 0; i < k_threads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      const auto r = guard.handle({.principal = "user-1",
                                   .method = "POST",
                                   .target = "/charges",
                                   .body = "{\"amount\":500}",
                                   .idempotency_key = "key-1"},
                                  [&](transaction& tx) {
                                    tx.execute("INCR", {counter});
                                    return respond("{\"charged\":500}");
                                  });
      using stormguard::guard::decision;
      if (r.decision == decision::ran) {
        ran.fetch_add(1);
      } else if (r.decision == decision::in_progress || r.decision == decision::replayed) {
        others.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(others.load(), k_threads - 1);
  EXPECT_EQ(single(admin().query("GET", {counter})), "1");
  const auto replay = guard.handle({.principal = "user-1",
                                    .method = "POST",
                                    .target = "/charges",
                                    .body = "{\"amount\":500}",
                                    .idempotency_key = "key-1"},
                                   [](transaction&) { return respond("never"); });
  EXPECT_EQ(replay.decision, stormguard::guard::decision::replayed);
  EXPECT_EQ(replay.response.body, "{\"charged\":500}");
}

}  // namespace
