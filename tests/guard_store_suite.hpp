// SPDX-License-Identifier: Apache-2.0
// The conformance suite every idempotency store passes (store.hpp's contract and the guard's
// protocol on top of it), run against real SQLite, PostgreSQL and Redis servers.
//
// A store's test file instantiates it with a factory that makes a fresh, empty store for each
// test (its own table or key prefix, so tests never see each other's records):
//
//   STORMGUARD_INSTANTIATE_STORE_SUITE(Sqlite, (store_factory{"sqlite",
//       [](const std::string& table) { return make_sqlite_store({...}); }}));
//
// which instantiates both halves: StoreConformance (the store's contract) and GuardOnStore (the
// guard's protocol, including 64 concurrent requests with one key).
//
// Tests of a store that is down (503 + Retry-After, the handler never run) need a store-specific
// way to break it, so they live in each store's own test file.
#ifndef STORMGUARD_TESTS_GUARD_STORE_SUITE_HPP
#define STORMGUARD_TESTS_GUARD_STORE_SUITE_HPP

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/guard/guard.hpp"
#include "stormguard/guard/store.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace stormguard_test {

using namespace std::chrono_literals;
namespace sg = stormguard::guard;

struct store_factory {
  std::string name;
  /// A fresh store whose records live in `table` (SQL table or Redis key prefix), empty.
  std::function<std::unique_ptr<sg::store>(const std::string& table)> make;
};

/// gtest prints a parameter by its name (not a hex dump of the struct).
inline void PrintTo(const store_factory& f, std::ostream* os) { *os << f.name; }

/// The handler's ledger in the store's own language: one row per charge.
inline void ledger_create(sg::store& s, const std::string& ledger) {
  if (s.kind() == sg::store_kind::redis) {
    s.query("DEL", {ledger});
  } else {
    s.query("CREATE TABLE IF NOT EXISTS " + ledger + " (k TEXT NOT NULL)", {});
  }
}
inline void ledger_add(sg::transaction& tx, const std::string& ledger, std::string_view key) {
  if (tx.kind() == sg::store_kind::redis) {
    tx.execute("RPUSH", {ledger, key});
  } else {
    tx.execute("INSERT INTO " + ledger + " (k) VALUES ($1)", {key});
  }
}
inline long ledger_rows(sg::store& s, const std::string& ledger) {
  if (s.kind() == sg::store_kind::redis) {
    return std::stol(s.query("LLEN", {ledger}).at(0).at(0).value());
  }
  return std::stol(s.query("SELECT COUNT(*) FROM " + ledger, {}).at(0).at(0).value());
}

class StoreConformance : public ::testing::TestWithParam<store_factory> {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const std::string n =
        std::to_string(counter.fetch_add(1)) + "_" + std::to_string(static_cast<long>(::getpid()));
    table_ = "conf_" + n;
    ledger_ = "ledger_" + n;
    store_ = GetParam().make(table_);
    ledger_create(*store_, ledger_);
  }

  sg::store& store() { return *store_; }
  sg::fingerprint fp(std::string_view body) { return sg::fingerprint_of("POST", "/charges", body); }
  sg::begin_result begin(std::string_view principal, std::string_view key, std::string_view token,
                         stormguard::wall_time_point now, stormguard::duration lease = 30s) {
    return store().begin({principal, key}, fp("a"), token, now, lease, 24h);
  }
  sg::complete_outcome complete(std::string_view principal, std::string_view key,
                                std::string_view token, stormguard::wall_time_point now,
                                sg::stored_response r = {
                                    201, {{"Content-Type", "text/plain"}}, "ok"}) {
    return store().complete({principal, key}, token, now, 24h, [&](sg::transaction& tx) {
      ledger_add(tx, ledger_, key);
      return r;
    });
  }
  long rows() { return ledger_rows(store(), ledger_); }

  stormguard::testing::manual_clock clock_;
  stormguard::wall_time_point t0_ = clock_.wall_now();
  std::string table_, ledger_;
  std::unique_ptr<sg::store> store_;
};

// ---- the store's contract ------------------------------------------------------------------

// The records' schema version, kept beside them: SQL in the one row of `<table>_schema`, Redis
// in the key `<prefix>:schema`. These write it as a build of another version would have, or
// remove it as a build from before versions were kept left the store.
inline void set_schema_version(sg::store& s, const std::string& table,
                               const std::optional<std::string>& version) {
  if (s.kind() == sg::store_kind::redis) {
    if (version) {
      s.query("SET", {table + ":schema", *version});
    } else {
      s.query("DEL", {table + ":schema"});
    }
  } else if (version) {
    s.query("UPDATE " + table + "_schema SET version = " + *version, {});
  } else {
    s.query("DROP TABLE " + table + "_schema", {});
  }
}
/// The version a store keeps; nullopt when it keeps none.
inline std::optional<std::string> schema_version(sg::store& s, const std::string& table) {
  std::vector<sg::row> rows;
  try {
    rows = s.kind() == sg::store_kind::redis
               ? s.query("GET", {table + ":schema"})
               : s.query("SELECT version FROM " + table + "_schema", {});
  } catch (const sg::store_error&) {
    return std::nullopt;  // SQL: no such table
  }
  if (rows.size() != 1 || rows[0].size() != 1) return std::nullopt;
  return rows[0][0];
}

TEST_P(StoreConformance, ANewStoreKeepsSchemaVersion1) {
  EXPECT_EQ(schema_version(store(), table_), "1");
  // Opening it again changes nothing.
  const auto again = GetParam().make(table_);
  EXPECT_EQ(schema_version(*again, table_), "1");
}

TEST_P(StoreConformance, AStoreOfAnotherSchemaVersionIsRefusedAtOpenNamingBothVersions) {
  ASSERT_EQ(begin("p", "k1", "tok-1", t0_).outcome, sg::begin_outcome::acquired);
  set_schema_version(store(), table_, "2");
  try {
    (void)GetParam().make(table_);
    FAIL() << "a store of schema version 2 was opened";
  } catch (const sg::store_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("schema version \"2\""), std::string::npos) << what;
    EXPECT_NE(what.find("schema version 1"), std::string::npos) << what;
    EXPECT_NE(what.find(table_), std::string::npos) << what;
  }
  // Nothing was changed: the version and the record are as they were.
  EXPECT_EQ(schema_version(store(), table_), "2");
  set_schema_version(store(), table_, "1");
  EXPECT_EQ(begin("p", "k1", "tok-2", t0_ + 1s).outcome, sg::begin_outcome::in_progress);
}

TEST_P(StoreConformance, AStoreWithoutASchemaVersionIsOpenedAsVersion1WithItsRecords) {
  ASSERT_EQ(begin("p", "k1", "tok-1", t0_).outcome, sg::begin_outcome::acquired);
  ASSERT_EQ(complete("p", "k1", "tok-1", t0_ + 1s), sg::complete_outcome::completed);
  set_schema_version(store(), table_, std::nullopt);
  ASSERT_EQ(schema_version(store(), table_), std::nullopt);

  const auto reopened = GetParam().make(table_);
  EXPECT_EQ(schema_version(*reopened, table_), "1");
  const auto found = reopened->begin({"p", "k1"}, fp("a"), "tok-2", t0_ + 2s, 30s, 24h);
  EXPECT_EQ(found.outcome, sg::begin_outcome::completed);
}

TEST_P(StoreConformance, BeginAcquiresAnAbsentKeyThenReportsItInProgress) {
  const auto first = begin("p", "k1", "tok-1", t0_);
  EXPECT_EQ(first.outcome, sg::begin_outcome::acquired);
  EXPECT_FALSE(first.took_over);
  const auto second = begin("p", "k1", "tok-2", t0_ + 1s);
  EXPECT_EQ(second.outcome, sg::begin_outcome::in_progress);
  EXPECT_EQ(second.fingerprint, fp("a"));
  EXPECT_EQ(second.lease_expires, t0_ + 30s);
}

TEST_P(StoreConformance, CompleteStoresTheResponseByteForByteAndBeginReturnsIt) {
  ASSERT_EQ(begin("p", "k", "tok", t0_).outcome, sg::begin_outcome::acquired);
  const sg::stored_response r{201,
                              {{"Content-Type", "application/json"}, {"Location", "/c/1\x01:"}},
                              std::string("{\"id\":1}\0\xff tail", 15)};
  ASSERT_EQ(complete("p", "k", "tok", t0_ + 1s, r), sg::complete_outcome::completed);
  const auto again = begin("p", "k", "tok-2", t0_ + 2s);
  ASSERT_EQ(again.outcome, sg::begin_outcome::completed);
  ASSERT_TRUE(again.response.has_value());
  EXPECT_EQ(*again.response, r);
  EXPECT_EQ(again.fingerprint, fp("a"));
  EXPECT_EQ(rows(), 1);
}

TEST_P(StoreConformance, AnExpiredLeaseIsTakenOverAndTheOldHolderCannotCommit) {
  ASSERT_EQ(begin("p", "k", "old", t0_, 5s).outcome, sg::begin_outcome::acquired);
  EXPECT_EQ(begin("p", "k", "new", t0_ + 4s, 5s).outcome, sg::begin_outcome::in_progress);
  const auto taken = begin("p", "k", "new", t0_ + 5s, 5s);  // lease_expires <= now
  EXPECT_EQ(taken.outcome, sg::begin_outcome::acquired);
  EXPECT_TRUE(taken.took_over);
  EXPECT_EQ(complete("p", "k", "old", t0_ + 6s), sg::complete_outcome::lease_lost);
  EXPECT_EQ(rows(), 0) << "the old holder's writes must be discarded";
  EXPECT_EQ(complete("p", "k", "new", t0_ + 6s), sg::complete_outcome::completed);
  EXPECT_EQ(rows(), 1);
}

TEST_P(StoreConformance, ARecordPastItsTtlIsNew) {
  ASSERT_EQ(store().begin({"p", "k"}, fp("a"), "t1", t0_, 5s, 10s).outcome,
            sg::begin_outcome::acquired);
  ASSERT_EQ(store().complete({"p", "k"}, "t1", t0_, 10s,
                             [](sg::transaction&) {
                               return sg::stored_response{200, {}, "x"};
                             }),
            sg::complete_outcome::completed);
  EXPECT_EQ(store().begin({"p", "k"}, fp("b"), "t2", t0_ + 9s, 5s, 10s).outcome,
            sg::begin_outcome::completed);
  const auto fresh = store().begin({"p", "k"}, fp("b"), "t2", t0_ + 10s, 5s, 10s);
  EXPECT_EQ(fresh.outcome, sg::begin_outcome::acquired);
  EXPECT_FALSE(fresh.took_over);
}

TEST_P(StoreConformance, KeysAreScopedPerPrincipalWithoutAmbiguity) {
  EXPECT_EQ(begin("alice", "k", "t1", t0_).outcome, sg::begin_outcome::acquired);
  EXPECT_EQ(begin("bob", "k", "t2", t0_).outcome, sg::begin_outcome::acquired);
  // ("a:b", "c") and ("a", "b:c") are different records, whatever a store's key layout.
  EXPECT_EQ(begin("a:b", "c", "t3", t0_).outcome, sg::begin_outcome::acquired);
  EXPECT_EQ(begin("a", "b:c", "t4", t0_).outcome, sg::begin_outcome::acquired);
  EXPECT_EQ(begin("", "k", "t5", t0_).outcome, sg::begin_outcome::acquired);
  ASSERT_EQ(complete("alice", "k", "t1", t0_, {200, {}, "alice's"}),
            sg::complete_outcome::completed);
  const auto bob = begin("bob", "k", "t6", t0_);
  EXPECT_EQ(bob.outcome, sg::begin_outcome::in_progress) << "bob must never see alice's response";
}

TEST_P(StoreConformance, ReleaseDeletesOnlyTheHoldersInProgressRecord) {
  ASSERT_EQ(begin("p", "k", "tok", t0_).outcome, sg::begin_outcome::acquired);
  store().release({"p", "k"}, "other");
  EXPECT_EQ(begin("p", "k", "x", t0_).outcome, sg::begin_outcome::in_progress);
  store().release({"p", "k"}, "tok");
  EXPECT_EQ(complete("p", "k", "tok", t0_), sg::complete_outcome::lease_lost);
  EXPECT_EQ(begin("p", "k", "y", t0_).outcome, sg::begin_outcome::acquired);
  ASSERT_EQ(complete("p", "k", "y", t0_), sg::complete_outcome::completed);
  store().release({"p", "k"}, "y");  // completed: a no-op
  EXPECT_EQ(begin("p", "k", "z", t0_).outcome, sg::begin_outcome::completed);
}

TEST_P(StoreConformance, AnExceptionFromTheWorkCommitsNothing) {
  ASSERT_EQ(begin("p", "k", "tok", t0_).outcome, sg::begin_outcome::acquired);
  EXPECT_THROW((void)store().complete({"p", "k"}, "tok", t0_, 24h,
                                      [&](sg::transaction& tx) -> sg::stored_response {
                                        ledger_add(tx, ledger_, "k");
                                        throw std::runtime_error("card declined");
                                      }),
               std::runtime_error);
  EXPECT_EQ(rows(), 0);
  EXPECT_EQ(begin("p", "k", "x", t0_).outcome, sg::begin_outcome::in_progress);
  EXPECT_EQ(complete("p", "k", "tok", t0_), sg::complete_outcome::completed);
  EXPECT_EQ(rows(), 1);
}

TEST_P(StoreConformance, PurgeExpiredRemovesOnlyExpiredRecords) {
  ASSERT_EQ(store().begin({"p", "old"}, fp("a"), "t", t0_, 1s, 10s).outcome,
            sg::begin_outcome::acquired);
  ASSERT_EQ(store().begin({"p", "new"}, fp("a"), "t", t0_ + 5s, 1s, 10s).outcome,
            sg::begin_outcome::acquired);
  const std::size_t purged = store().purge_expired(t0_ + 10s);
  if (store().kind() == sg::store_kind::redis) {
    EXPECT_EQ(purged, 0U);  // Redis expires keys by itself (PEXPIRE)
  } else {
    EXPECT_EQ(purged, 1U);
  }
  EXPECT_EQ(store().begin({"p", "new"}, fp("a"), "t2", t0_ + 10s, 1s, 10s).outcome,
            sg::begin_outcome::acquired)
      << "the lease of 'new' expired at +6 s: taken over";
}

TEST_P(StoreConformance, ConcurrentBeginsAcquireExactlyOnce) {
  constexpr int n = 32;
  std::latch go(n);
  std::atomic<int> acquired{0}, in_progress{0};
  std::vector<std::jthread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const std::string token = "tok-" + std::to_string(i);
      go.arrive_and_wait();
      const auto r = store().begin({"p", "race"}, fp("a"), token, t0_, 30s, 24h);
      (r.outcome == sg::begin_outcome::acquired ? acquired : in_progress).fetch_add(1);
    });
  }
  threads.clear();
  EXPECT_EQ(acquired.load(), 1);
  EXPECT_EQ(in_progress.load(), n - 1);
}

TEST_P(StoreConformance, FindReadsTheLiveRecordWithoutWriting) {
  EXPECT_EQ(store().find({"p", "k"}, t0_), std::nullopt);
  ASSERT_EQ(begin("p", "k", "tok", t0_, 10s).outcome, sg::begin_outcome::acquired);
  const auto running = store().find({"p", "k"}, t0_ + 1s);
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(running->outcome, sg::begin_outcome::in_progress);
  EXPECT_EQ(running->fingerprint, fp("a"));
  EXPECT_EQ(running->lease_expires, t0_ + 10s);
  EXPECT_EQ(store().find({"p", "k"}, t0_ + 10s), std::nullopt) << "the lease expired";
  EXPECT_EQ(store().find({"other", "k"}, t0_ + 1s), std::nullopt) << "scoped per principal";
  ASSERT_EQ(complete("p", "k", "tok", t0_ + 2s), sg::complete_outcome::completed);
  const auto done = store().find({"p", "k"}, t0_ + 3s);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->outcome, sg::begin_outcome::completed);
  ASSERT_TRUE(done->response.has_value());
  EXPECT_EQ(done->response->body, "ok");
  EXPECT_EQ(store().find({"p", "k"}, t0_ + 2s + 24h), std::nullopt) << "the record expired";
  // Nothing was written: a begin after find still sees the completed record.
  EXPECT_EQ(begin("p", "k", "tok-2", t0_ + 4s).outcome, sg::begin_outcome::completed);
}

// ---- the guard's protocol on this store ------------------------------------------------------

class GuardOnStore : public StoreConformance {
 protected:
  sg::guard_options options() {
    sg::guard_options o;
    o.time = &clock_;
    return o;
  }
  sg::request charge(std::string_view principal, std::string_view key_field,
                     std::string_view body = "{\"amount\":100}") {
    return {principal, "POST", "/charges", body, key_field};
  }
  sg::idempotency_guard::handler handler(std::atomic<int>& runs, std::string key) {
    return [this, &runs, key](sg::transaction& tx) {
      runs.fetch_add(1);
      ledger_add(tx, ledger_, key);
      return sg::stored_response{201,
                                 {{"Content-Type", "application/json"}, {"X-Not-Kept", "1"}},
                                 "{\"charge\":" + std::to_string(runs.load()) + "}"};
    };
  }
  static std::string header(const sg::stored_response& r, std::string_view name) {
    for (const auto& [n, v] : r.headers) {
      if (n == name) return v;
    }
    return "<none>";
  }
};

TEST_P(GuardOnStore, TheHandlerRunsOnceAndTheRepeatIsReplayedAndMarked) {
  sg::idempotency_guard g(store(), options());
  std::atomic<int> runs{0};
  const auto first = g.handle(charge("p", "\"key-1\""), handler(runs, "key-1"));
  EXPECT_EQ(first.decision, sg::decision::ran);
  EXPECT_EQ(first.response.status, 201);
  EXPECT_EQ(header(first.response, "X-Not-Kept"), "<none>") << "only kept headers are stored";
  clock_.advance(1h);
  const auto second = g.handle(charge("p", "key-1"), handler(runs, "key-1"));  // bare form
  EXPECT_EQ(second.decision, sg::decision::replayed);
  EXPECT_EQ(second.response.status, 201);
  EXPECT_EQ(second.response.body, first.response.body);
  EXPECT_EQ(header(second.response, "Content-Type"), "application/json");
  EXPECT_EQ(header(second.response, std::string(sg::replayed_header)), "true");
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(rows(), 1);
}

TEST_P(GuardOnStore, ARepeatWhileInProgressGets409WithTheLeaseLeftAsRetryAfter) {
  sg::idempotency_guard g(store(), options());
  ASSERT_EQ(store()
                .begin({g.stored_principal("p"), "k"},
                       sg::fingerprint_of("POST", "/charges", "{\"amount\":100}"), "someone",
                       clock_.wall_now(), 30s, 24h)
                .outcome,
            sg::begin_outcome::acquired);
  clock_.advance(std::chrono::milliseconds(10'500));
  std::atomic<int> runs{0};
  const auto r = g.handle(charge("p", "k"), handler(runs, "k"));
  EXPECT_EQ(r.decision, sg::decision::in_progress);
  EXPECT_EQ(r.response.status, 409);
  EXPECT_EQ(header(r.response, "Retry-After"), "20");  // 19.5 s left, rounded up
  EXPECT_EQ(runs.load(), 0);
}

TEST_P(GuardOnStore, ADeadHoldersExpiredLeaseIsTakenOver) {
  sg::idempotency_guard g(store(), options());
  ASSERT_EQ(store()
                .begin({g.stored_principal("p"), "k"},
                       sg::fingerprint_of("POST", "/charges", "{\"amount\":100}"), "dead-process",
                       clock_.wall_now(), g.options().lease, 24h)
                .outcome,
            sg::begin_outcome::acquired);
  clock_.advance(g.options().lease);
  std::atomic<int> runs{0};
  const auto r = g.handle(charge("p", "k"), handler(runs, "k"));
  EXPECT_EQ(r.decision, sg::decision::ran);
  EXPECT_TRUE(r.took_over);
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(store().complete({g.stored_principal("p"), "k"}, "dead-process", clock_.wall_now(), 24h,
                             [](sg::transaction&) { return sg::stored_response{}; }),
            sg::complete_outcome::lease_lost);
}

TEST_P(GuardOnStore, TheSameKeyWithAnotherBodyGets422) {
  sg::idempotency_guard g(store(), options());
  std::atomic<int> runs{0};
  ASSERT_EQ(g.handle(charge("p", "k", "{\"amount\":100}"), handler(runs, "k")).decision,
            sg::decision::ran);
  const auto r = g.handle(charge("p", "k", "{\"amount\":999}"), handler(runs, "k"));
  EXPECT_EQ(r.decision, sg::decision::mismatch);
  EXPECT_EQ(r.response.status, 422);
  sg::request other_target = charge("p", "k");
  other_target.target = "/refunds";
  EXPECT_EQ(g.handle(other_target, handler(runs, "k")).response.status, 422);
  EXPECT_EQ(runs.load(), 1);
}

TEST_P(GuardOnStore, MissingAndBadKeysGet400AndNeverRunTheHandler) {
  sg::idempotency_guard g(store(), options());
  std::atomic<int> runs{0};
  sg::request none = charge("p", "");
  none.idempotency_key.reset();
  EXPECT_EQ(g.handle(none, handler(runs, "")).decision, sg::decision::missing_key);
  for (const std::string& bad : {std::string(256, 'k'), std::string("caf\xc3\xa9"), std::string(""),
                                 std::string("\"unterminated"), std::string("\"a\" , \"b\""),
                                 std::string("\"bad\\escape\""), std::string("tab\there")}) {
    const auto r = g.handle(charge("p", bad), handler(runs, bad));
    EXPECT_EQ(r.decision, sg::decision::bad_key) << bad;
    EXPECT_EQ(r.response.status, 400) << bad;
  }
  EXPECT_EQ(g.handle(charge(std::string(256, 'p'), "k"), handler(runs, "k")).response.status, 400);
  EXPECT_EQ(g.handle(charge(std::string(255, 'p'), "k"), handler(runs, "k")).decision,
            sg::decision::ran)
      << "a principal of 255 bytes is the limit, inclusive";
  EXPECT_EQ(g.handle(charge("p", std::string(255, 'k')), handler(runs, "k")).decision,
            sg::decision::ran)
      << "255 characters is the limit, inclusive";
  EXPECT_EQ(runs.load(), 2);
}

TEST_P(GuardOnStore, APrincipalNeverReceivesAnothersStoredResponse) {
  sg::idempotency_guard g(store(), options());
  std::atomic<int> runs{0};
  const auto alice = g.handle(charge("alice", "shared-key"), handler(runs, "alice"));
  const auto mallory = g.handle(charge("mallory", "shared-key"), handler(runs, "mallory"));
  EXPECT_EQ(alice.decision, sg::decision::ran);
  EXPECT_EQ(mallory.decision, sg::decision::ran) << "mallory gets her own record";
  EXPECT_NE(mallory.response.body, alice.response.body);
  EXPECT_EQ(runs.load(), 2);
}

TEST_P(GuardOnStore, AThrowingHandlerReleasesTheKeyAndCommitsNothing) {
  sg::idempotency_guard g(store(), options());
  EXPECT_THROW((void)g.handle(charge("p", "k"),
                              [&](sg::transaction& tx) -> sg::stored_response {
                                ledger_add(tx, ledger_, "k");
                                throw std::runtime_error("processor timeout");
                              }),
               std::runtime_error);
  EXPECT_EQ(rows(), 0);
  std::atomic<int> runs{0};
  EXPECT_EQ(g.handle(charge("p", "k"), handler(runs, "k")).decision, sg::decision::ran)
      << "released: the retry runs at once";
  EXPECT_EQ(rows(), 1);
}

/// What only the SQL stores do (Redis queues the handler's commands: guard_redis_test).
TEST_P(GuardOnStore, PrincipalsAreStoredAsTheirKeyedHashAndOldRecordsAreReplayedWhenMigrating) {
  // A record written before principals were hashed: under the principal as is.
  ASSERT_EQ(begin("alice-token", "old-key", "tok", t0_).outcome, sg::begin_outcome::acquired);
  ASSERT_EQ(complete("alice-token", "old-key", "tok", t0_), sg::complete_outcome::completed);
  // One written before the digest had its prefix.
  const std::string unprefixed = sg::unprefixed_principal_digest("alice-token", "fleet key");
  ASSERT_EQ(begin(unprefixed, "older-key", "tok", t0_).outcome, sg::begin_outcome::acquired);
  ASSERT_EQ(complete(unprefixed, "older-key", "tok", t0_), sg::complete_outcome::completed);
  auto o = options();
  o.principal_key = "fleet key";
  o.find_unhashed_records = true;  // the operator's one-time migration
  sg::idempotency_guard g(store(), o);
  std::atomic<int> runs{0};
  for (const std::string key : {"old-key", "older-key"}) {
    const auto replay = g.handle(charge("alice-token", key, "a"), handler(runs, key));
    EXPECT_EQ(replay.decision, sg::decision::replayed) << key;
  }
  EXPECT_EQ(runs.load(), 0);
  // A new key: stored under the hash, found again under it, never under the token.
  const auto ran = g.handle(charge("alice-token", "new-key"), handler(runs, "new-key"));
  ASSERT_EQ(ran.decision, sg::decision::ran);
  const std::string hashed = sg::principal_digest("alice-token", "fleet key");
  const auto stored = store().find({hashed, "new-key"}, clock_.wall_now());
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->outcome, sg::begin_outcome::completed);
  EXPECT_EQ(store().find({"alice-token", "new-key"}, clock_.wall_now()), std::nullopt);
  EXPECT_EQ(g.handle(charge("alice-token", "new-key"), handler(runs, "new-key")).decision,
            sg::decision::replayed);
  EXPECT_EQ(runs.load(), 1);
}

TEST_P(GuardOnStore, AStoredDigestSentAsThePrincipalNeverGetsItsOwnersResponse) {
  // alice's charges, in the current form and in the form before the prefix.
  const std::string unprefixed = sg::unprefixed_principal_digest("alice-token", "");
  for (const bool migrating : {false, true}) {
    auto o = options();
    o.find_unhashed_records = migrating;
    sg::idempotency_guard g(store(), o);
    std::atomic<int> runs{0};
    const std::string key = migrating ? "key-migrating" : "key";
    const std::string older = "older-" + key;
    ASSERT_EQ(begin(unprefixed, older, "tok", t0_).outcome, sg::begin_outcome::acquired);
    ASSERT_EQ(complete(unprefixed, older, "tok", t0_, {201, {}, "alice's older charge"}),
              sg::complete_outcome::completed);
    const auto victim = g.handle(charge("alice-token", key), handler(runs, key));
    ASSERT_EQ(victim.decision, sg::decision::ran);
    // What a ledger or a stolen store shows, sent back as the principal.
    for (const auto& [stolen, stolen_key] :
         {std::pair<std::string, std::string>{g.stored_principal("alice-token"), key},
          {unprefixed, older}}) {
      const auto attack = g.handle(charge(stolen, stolen_key), handler(runs, stolen_key));
      EXPECT_EQ(attack.decision, sg::decision::ran) << stolen << " migrating " << migrating;
      EXPECT_NE(attack.response.body, victim.response.body);
      EXPECT_EQ(attack.response.body.find("alice"), std::string::npos);
      EXPECT_EQ(header(attack.response, std::string(sg::replayed_header)), "<none>");
    }
    EXPECT_EQ(runs.load(), 3) << "alice's charge and the two attackers' own";
  }
}

class SqlGuardOnStore : public GuardOnStore {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SqlGuardOnStore);  // the Redis executable

TEST_P(SqlGuardOnStore, AFailedSqlStatementReleasesTheKeyLikeAThrowingHandler) {
  sg::idempotency_guard g(store(), options());
  // The handler swallows the error and returns: the guard must still commit nothing.
  EXPECT_THROW((void)g.handle(charge("p", "k"),
                              [&](sg::transaction& tx) {
                                ledger_add(tx, ledger_, "k");
                                try {
                                  tx.execute("INSERT INTO no_such_table VALUES ($1)", {"x"});
                                } catch (const sg::statement_error&) {
                                }
                                return sg::stored_response{201, {}, "charged"};
                              }),
               sg::statement_error);
  EXPECT_EQ(rows(), 0);
  std::atomic<int> runs{0};
  EXPECT_EQ(g.handle(charge("p", "k"), handler(runs, "k")).decision, sg::decision::ran)
      << "released at once: the corrected retry runs without waiting for the lease";
  EXPECT_EQ(rows(), 1);
}

TEST_P(GuardOnStore, AResponseOverTheLimitIsNotStoredNorCommitted) {
  sg::guard_options o = options();
  o.max_response_bytes = 1000;
  sg::idempotency_guard g(store(), o);
  auto big = [&](std::size_t body) {
    return [&, body](sg::transaction& tx) {
      ledger_add(tx, ledger_, "k");
      // Content-Type (12) + application/json (16) = 28 bytes of kept headers.
      return sg::stored_response{
          201, {{"Content-Type", "application/json"}}, std::string(body, 'x')};
    };
  };
  const auto over = g.handle(charge("p", "k"), big(1000 - 28 + 1));
  EXPECT_EQ(over.decision, sg::decision::response_too_large);
  EXPECT_EQ(over.response.status, 500);
  EXPECT_EQ(rows(), 0);
  const auto at = g.handle(charge("p", "k"), big(1000 - 28));
  EXPECT_EQ(at.decision, sg::decision::ran) << "exactly the limit is stored";
  EXPECT_EQ(g.handle(charge("p", "k"), big(1)).response.body.size(), 1000U - 28U);
  EXPECT_EQ(rows(), 1);
}

TEST_P(GuardOnStore, SixtyFourConcurrentRequestsWithOneKeyRunTheHandlerOnce) {
  sg::idempotency_guard g(store(), options());
  constexpr int n = 64;
  std::latch go(n);
  std::atomic<int> runs{0}, ran{0}, conflicts{0}, replays{0}, other{0};
  std::vector<std::jthread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&] {
      go.arrive_and_wait();
      const auto r = g.handle(charge("p", "the-key"), handler(runs, "the-key"));
      switch (r.decision) {
        case sg::decision::ran:
          ran.fetch_add(1);
          break;
        case sg::decision::in_progress:
          conflicts.fetch_add(1);
          break;
        case sg::decision::replayed:
          replays.fetch_add(1);
          break;
        default:
          other.fetch_add(1);
          break;
      }
    });
  }
  threads.clear();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(conflicts.load() + replays.load(), n - 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(rows(), 1);
}

}  // namespace stormguard_test

#define STORMGUARD_INSTANTIATE_STORE_SUITE(prefix, factory)                               \
  INSTANTIATE_TEST_SUITE_P(prefix, StoreConformance, ::testing::Values(factory),          \
                           [](const auto& param_info) { return param_info.param.name; }); \
  INSTANTIATE_TEST_SUITE_P(prefix, GuardOnStore, ::testing::Values(factory),              \
                           [](const auto& param_info) { return param_info.param.name; })

/// STORMGUARD_INSTANTIATE_STORE_SUITE plus the tests only SQL stores pass (SqlGuardOnStore).
#define STORMGUARD_INSTANTIATE_SQL_STORE_SUITE(prefix, factory)                 \
  STORMGUARD_INSTANTIATE_STORE_SUITE(prefix, factory);                          \
  INSTANTIATE_TEST_SUITE_P(prefix, SqlGuardOnStore, ::testing::Values(factory), \
                           [](const auto& param_info) { return param_info.param.name; })

#endif  // STORMGUARD_TESTS_GUARD_STORE_SUITE_HPP
