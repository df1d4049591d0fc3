// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store: the shared conformance suite (tests/guard_store_suite.hpp) and what only
// PostgreSQL has (options, a server that is down, a killed connection, row locks, prepared
// statements, concurrent table creation), against a real PostgreSQL 15 server
// (tests/support/postgres_server.hpp), one per test executable; each test has its own table.
// Time is the `now` passed in, never the real clock.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "guard_store_suite.hpp"
#include "stormguard/guard/stores.hpp"
#include "support/postgres_server.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::wall_time_point;
using stormguard::guard::begin_outcome;
using stormguard::guard::complete_outcome;
using stormguard::guard::fingerprint;
using stormguard::guard::make_postgres_store;
using stormguard::guard::postgres_options;
using stormguard::guard::record_key;
using stormguard::guard::row;
using stormguard::guard::store;
using stormguard::guard::store_error;
using stormguard::guard::stored_response;
using stormguard::guard::transaction;
using stormguard::test_util::invalid_argument_message;

const wall_time_point t0{std::chrono::seconds(1'700'000'000)};

fingerprint fp(std::uint8_t b) {
  fingerprint f{};
  f.fill(b);
  return f;
}

// --- options: checked before any connection is made (no server needed) ---

TEST(PostgresOptions, EmptyUrlIsRejectedNamingTheField) {
  const auto m = invalid_argument_message([] { (void)make_postgres_store({.url = ""}); });
  EXPECT_NE(m.find("postgres_options.url \"\""), std::string::npos) << m;
}

TEST(PostgresOptions, UrlThatLibpqCannotParseIsRejectedWithoutEchoingIt) {
  const auto m = invalid_argument_message(
      [] { (void)make_postgres_store({.url = "host=db password=s3cret bogus"}); });
  EXPECT_NE(m.find("postgres_options.url"), std::string::npos) << m;
  EXPECT_NE(m.find("not a libpq connection string"), std::string::npos) << m;
  EXPECT_EQ(m.find("s3cret"), std::string::npos) << m;
}

TEST(PostgresOptions, TableMustBeAnIdentifierOfAtMost63Characters) {
  for (const std::string& bad :
       std::vector<std::string>{"", "1abc", "a-b", "a b", "tab\"le", std::string(64, 'a')}) {
    const auto m = invalid_argument_message(
        [&] { (void)make_postgres_store({.url = "postgresql://x@127.0.0.1:1/x", .table = bad}); });
    EXPECT_NE(m.find("postgres_options.table"), std::string::npos) << bad << ": " << m;
    EXPECT_NE(m.find("[A-Za-z_][A-Za-z0-9_]*"), std::string::npos) << m;
  }
}

TEST(PostgresOptions, MaxConnectionsMustBe1To1024) {
  for (const std::size_t bad : {std::size_t{0}, std::size_t{1025}}) {
    const auto m = invalid_argument_message([&] {
      (void)make_postgres_store({.url = "postgresql://x@127.0.0.1:1/x", .max_connections = bad});
    });
    EXPECT_NE(
        m.find("postgres_options.max_connections " + std::to_string(bad) + ": must be 1..1024"),
        std::string::npos)
        << m;
  }
}

TEST(PostgresOptions, ConnectTimeoutBelowOneSecondIsRejected) {
  const auto m = invalid_argument_message([] {
    (void)make_postgres_store({.url = "postgresql://x@127.0.0.1:1/x", .connect_timeout = 999ms});
  });
  EXPECT_NE(m.find("postgres_options.connect_timeout 999ms: must be >= 1s"), std::string::npos)
      << m;
}

TEST(PostgresOptions, TimeoutsOutOfRangeAreRejectedNamingTheField) {
  const std::string url = "postgresql://x@127.0.0.1:1/x";
  EXPECT_NE(invalid_argument_message([&] {
              (void)make_postgres_store({.url = url, .statement_timeout = 0ms});
            }).find("postgres_options.statement_timeout 0s"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              (void)make_postgres_store({.url = url, .statement_timeout = 5s, .reply_timeout = 5s});
            }).find("postgres_options.reply_timeout 5s: must be longer than statement_timeout"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              (void)make_postgres_store({.url = url, .tcp_user_timeout = 0ms});
            }).find("postgres_options.tcp_user_timeout"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([&] {
              (void)make_postgres_store({.url = url, .keepalive_idle = 0s});
            }).find("postgres_options.keepalive_idle"),
            std::string::npos);
}

TEST(PostgresStoreDown, TheErrorNeverCarriesThePassword) {
  try {
    (void)make_postgres_store({.url = "postgresql://app:hunter2@127.0.0.1:1/postgres"});
    FAIL() << "expected store_error";
  } catch (const store_error& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

TEST(PostgresStoreDown, OpeningAStoreWhoseServerIsDownThrowsStoreErrorWithLibpqsReason) {
  // Nothing listens on 127.0.0.1:1.
  try {
    (void)make_postgres_store({.url = "postgresql://postgres@127.0.0.1:1/postgres"});
    FAIL() << "expected store_error";
  } catch (const store_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("postgres store: cannot connect:"), std::string::npos) << m;
    EXPECT_NE(m.find("Connection refused"), std::string::npos) << m;
  }
}

// --- against the server ---

class PostgresStore : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      server_ = &stormguard::test_support::shared_postgres_server();
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
    table_ = stormguard::test_support::unique_table_name();
    store_ = open();
  }

  std::unique_ptr<store> open(std::size_t max_connections = 8) {
    return make_postgres_store(
        {.url = server_->url(), .table = table_, .max_connections = max_connections});
  }

  /// begin with lease 10 s and ttl 60 s.
  stormguard::guard::begin_result begin(const record_key& id, std::uint8_t f,
                                        std::string_view token, wall_time_point now = t0) {
    return store_->begin(id, fp(f), token, now, 10s, 60s);
  }

  std::string count(std::string_view sql) {
    const auto rows = store_->query(sql, {});
    return rows.at(0).at(0).value_or("NULL");
  }

  stormguard::test_support::postgres_server* server_ = nullptr;
  std::string table_;
  std::unique_ptr<store> store_;
};

TEST_F(PostgresStore, KindIsPostgres) {
  EXPECT_EQ(store_->kind(), stormguard::guard::store_kind::postgres);
}

TEST_F(PostgresStore, BeginAcquiresANewKeyThenReportsItInProgressWithItsLeaseAndFingerprint) {
  const record_key id{"alice", "k1"};
  const auto first = begin(id, 1, "tok-1");
  EXPECT_EQ(first.outcome, begin_outcome::acquired);
  EXPECT_FALSE(first.took_over);
  const auto second = begin(id, 2, "tok-2", t0 + 9s);
  EXPECT_EQ(second.outcome, begin_outcome::in_progress);
  EXPECT_EQ(second.fingerprint, fp(1));
  EXPECT_EQ(second.lease_expires, t0 + 10s);
  EXPECT_FALSE(second.response.has_value());
}

TEST_F(PostgresStore, CompleteCommitsTheHandlersWritesWithTheResponseWhichBeginThenReplays) {
  store_->query("CREATE TABLE " + table_ + "_ledger (k TEXT, amount INTEGER)", {});
  const record_key id{"alice", "k1"};
  ASSERT_EQ(begin(id, 7, "tok").outcome, begin_outcome::acquired);
  const stored_response response{201,
                                 {{"Content-Type", "application/json"},
                                  {"X-Binary", std::string("a\0b\xff", 4)},
                                  {"X-Empty", ""}},
                                 std::string("{\"id\":1}\0tail", 13)};
  const auto done = store_->complete(id, "tok", t0 + 1s, 60s, [&](transaction& tx) {
    EXPECT_EQ(tx.kind(), stormguard::guard::store_kind::postgres);
    tx.execute("INSERT INTO " + table_ + "_ledger (k, amount) VALUES ($1, $2)", {"k1", "250"});
    const auto rows = tx.execute("SELECT amount, NULL FROM " + table_ + "_ledger", {});
    EXPECT_EQ(rows, (std::vector<row>{{"250", std::nullopt}}));
    return response;
  });
  EXPECT_EQ(done, complete_outcome::completed);
  EXPECT_EQ(count("SELECT sum(amount) FROM " + table_ + "_ledger"), "250");

  const auto again = begin(id, 7, "tok-2", t0 + 30s);
  EXPECT_EQ(again.outcome, begin_outcome::completed);
  EXPECT_EQ(again.fingerprint, fp(7));
  ASSERT_TRUE(again.response.has_value());
  EXPECT_EQ(*again.response, response);
}

TEST_F(PostgresStore, EmptyResponseRoundTrips) {
  const record_key id{"", "k"};
  ASSERT_EQ(begin(id, 1, "tok").outcome, begin_outcome::acquired);
  ASSERT_EQ(store_->complete(id, "tok", t0, 60s,
                             [](transaction&) {
                               return stored_response{204, {}, ""};
                             }),
            complete_outcome::completed);
  const auto again = begin(id, 1, "tok-2");
  ASSERT_TRUE(again.response.has_value());
  EXPECT_EQ(*again.response, (stored_response{204, {}, ""}));
}

TEST_F(PostgresStore, AnExceptionFromTheWorkRollsBackItsWritesAndPropagates) {
  store_->query("CREATE TABLE " + table_ + "_ledger (k TEXT)", {});
  const record_key id{"alice", "k1"};
  ASSERT_EQ(begin(id, 1, "tok").outcome, begin_outcome::acquired);
  EXPECT_THROW((void)store_->complete(id, "tok", t0, 60s,
                                      [&](transaction& tx) -> stored_response {
                                        tx.execute("INSERT INTO " + table_ + "_ledger VALUES ($1)",
                                                   {"x"});
                                        throw std::runtime_error("handler failed");
                                      }),
               std::runtime_error);
  EXPECT_EQ(count("SELECT count(*) FROM " + table_ + "_ledger"), "0");
  // Still in progress under our token: the guard releases it.
  EXPECT_EQ(begin(id, 1, "other", t0 + 1s).outcome, begin_outcome::in_progress);
  store_->release(id, "tok");
  EXPECT_EQ(begin(id, 1, "other", t0 + 1s).outcome, begin_outcome::acquired);
}

TEST_F(PostgresStore,
       AFailedHandlerStatementThrowsStoreErrorAndNothingCommitsEvenIfTheHandlerGoesOn) {
  store_->query("CREATE TABLE " + table_ + "_ledger (k TEXT)", {});
  const record_key id{"alice", "k1"};
  ASSERT_EQ(begin(id, 1, "tok").outcome, begin_outcome::acquired);
  try {
    (void)store_->complete(id, "tok", t0, 60s, [&](transaction& tx) {
      tx.execute("INSERT INTO " + table_ + "_ledger VALUES ($1)", {"x"});
      EXPECT_THROW(tx.execute("SELECT no_such_column FROM " + table_ + "_ledger", {}), store_error);
      EXPECT_THROW(tx.execute("SELECT 1", {}), store_error);  // the transaction is aborted
      return stored_response{200, {}, "swallowed the error"};
    });
    FAIL() << "expected store_error";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_column"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count("SELECT count(*) FROM " + table_ + "_ledger"), "0");
  EXPECT_EQ(begin(id, 1, "other", t0 + 1s).outcome, begin_outcome::in_progress);
}

TEST_F(PostgresStore, AHandlerStatementMayNotEndTheTransaction) {
  const record_key id{"alice", "k1"};
  ASSERT_EQ(begin(id, 1, "tok").outcome, begin_outcome::acquired);
  EXPECT_THROW((void)store_->complete(id, "tok", t0, 60s,
                                      [&](transaction& tx) {
                                        tx.execute("ROLLBACK", {});
                                        return stored_response{};
                                      }),
               store_error);
  EXPECT_EQ(begin(id, 1, "other", t0 + 1s).outcome, begin_outcome::in_progress);
}

TEST_F(PostgresStore, HandlerStatementsArePreparedOncePerConnectionAndCachedByText) {
  auto single = open(1);  // one connection: every call below uses it
  const record_key id{"alice", "k1"};
  ASSERT_EQ(single->begin(id, fp(1), "tok", t0, 10s, 60s).outcome, begin_outcome::acquired);
  const std::string statement = "SELECT $1::int + 1";
  ASSERT_EQ(single->complete(id, "tok", t0, 60s,
                             [&](transaction& tx) {
                               EXPECT_EQ(tx.execute(statement, {"1"}), (std::vector<row>{{"2"}}));
                               EXPECT_EQ(tx.execute(statement, {"41"}), (std::vector<row>{{"42"}}));
                               return stored_response{};
                             }),
            complete_outcome::completed);
  EXPECT_EQ(single->query(statement, {"0"}), (std::vector<row>{{"1"}}));
  const auto prepared = single->query(
      "SELECT count(*) FROM pg_prepared_statements WHERE statement = $1", {statement});
  EXPECT_EQ(prepared, (std::vector<row>{{"1"}}));
}

TEST_F(PostgresStore, ATakeoverAfterTheLeaseExpiresFencesOutTheFirstHolder) {
  store_->query("CREATE TABLE " + table_ + "_ledger (who TEXT)", {});
  const record_key id{"alice", "k1"};
  ASSERT_EQ(begin(id, 1, "first").outcome, begin_outcome::acquired);
  EXPECT_EQ(begin(id, 1, "second", t0 + 10s - 1ns).outcome, begin_outcome::in_progress);
  const auto taken = begin(id, 1, "second", t0 + 10s);
  EXPECT_EQ(taken.outcome, begin_outcome::acquired);
  EXPECT_TRUE(taken.took_over);

  auto write = [&](std::string who) {
    return [this, who](transaction& tx) {
      tx.execute("INSERT INTO " + table_ + "_ledger VALUES ($1)", {who});
      return stored_response{200, {}, who};
    };
  };
  EXPECT_EQ(store_->complete(id, "first", t0 + 11s, 60s, write("first")),
            complete_outcome::lease_lost);
  EXPECT_EQ(store_->complete(id, "second", t0 + 11s, 60s, write("second")),
            complete_outcome::completed);
  EXPECT_EQ(store_->query("SELECT who FROM " + table_ + "_ledger", {}),
            (std::vector<row>{{"second"}}));
  EXPECT_EQ(begin(id, 1, "third", t0 + 12s).response->body, "second");
}

TEST_F(PostgresStore, CompleteAfterReleaseIsLeaseLost) {
  const record_key id{"alice", "k1"};
  ASSERT_EQ(begin(id, 1, "tok").outcome, begin_outcome::acquired);
  store_->release(id, "tok");
  bool ran = false;
  EXPECT_EQ(store_->complete(id, "tok", t0, 60s,
                             [&](transaction&) {
                               ran = true;
                               return stored_response{};
                             }),
            complete_outcome::lease_lost);
  EXPECT_FALSE(ran);
}

TEST_F(PostgresStore, PurgeExpiredDeletesRecordsWhoseExpiryHasPassedAndCountsThem) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(store_
                  ->begin({"p", "k" + std::to_string(i)}, fp(1), "tok",
                          t0 + std::chrono::seconds(i), 10s, 60s)
                  .outcome,
              begin_outcome::acquired);
  }
  EXPECT_EQ(store_->purge_expired(t0 + 60s), 1U);  // k0 expires at t0 + 60 s
  EXPECT_EQ(store_->purge_expired(t0 + 60s), 0U);
  EXPECT_EQ(store_->purge_expired(t0 + 62s), 2U);
  EXPECT_EQ(count("SELECT count(*) FROM " + table_), "0");
}

TEST_F(PostgresStore, KeysAreScopedPerPrincipalAndKeptAsAnyBytes) {
  const std::string odd_principal("p\0\xff\xfe", 4);
  const std::string other_principal("p\0\xff\xfd", 4);
  const std::string key(255, 'k');
  ASSERT_EQ(begin({odd_principal, key}, 1, "a").outcome, begin_outcome::acquired);
  EXPECT_EQ(begin({other_principal, key}, 2, "b").outcome, begin_outcome::acquired);
  EXPECT_EQ(begin({odd_principal, key}, 3, "c").fingerprint, fp(1));
  EXPECT_THROW((void)begin({std::string(256, 'p'), "k"}, 1, "a"), std::invalid_argument);
  EXPECT_THROW((void)begin({"p", std::string(256, 'k')}, 1, "a"), std::invalid_argument);
}

TEST_F(PostgresStore, BeginRejectsANonPositiveLeaseOrTtl) {
  const auto m = invalid_argument_message([&] {
    (void)store_->begin({"p", "k"}, fp(1), "t", t0, 0s, 60s);
  });
  EXPECT_NE(m.find("lease 0s: must be > 0"), std::string::npos) << m;
  EXPECT_THROW((void)store_->begin({"p", "k"}, fp(1), "t", t0, 10s, -1s), std::invalid_argument);
}

TEST_F(PostgresStore, QueryReturnsRowsAsTextAndNullAsNullopt) {
  EXPECT_EQ(
      store_->query("SELECT 1, 'a'::text, NULL UNION ALL SELECT $1::int, $2, $3", {"2", "b", "c"}),
      (std::vector<row>{{"1", "a", std::nullopt}, {"2", "b", "c"}}));
  EXPECT_EQ(store_->query("CREATE TABLE " + table_ + "_x (a INT)", {}), std::vector<row>{});
  EXPECT_THROW(store_->query("SELEKT 1", {}), store_error);
  EXPECT_THROW(store_->query("SELECT $1::text", {std::string_view("a\0b", 3)}),
               std::invalid_argument);
}

TEST_F(PostgresStore, AQueryThatLeavesATransactionOpenIsAnErrorAndRolledBack) {
  auto single = open(1);
  EXPECT_THROW(single->query("BEGIN", {}), store_error);
  EXPECT_EQ(single->query("SELECT 1", {}), (std::vector<row>{{"1"}}));
}

/// Waits (at most 10 s) until the backend `pid` has gone (pg_terminate_backend only signals it).
void wait_until_gone(store& s, const std::string& pid) {
  for (int i = 0; i < 1000; ++i) {
    if (s.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int", {pid}) ==
        std::vector<row>{{"0"}}) {
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  FAIL() << "backend " << pid << " still there after 10 s";
}

TEST_F(PostgresStore, AnIdleConnectionTheServerClosedIsReplacedBeforeBeginIsSent) {
  // As after a server restart: the pooled connection's backend is gone. begin() notices it
  // before sending anything and runs on a new connection instead of failing (a needless 503).
  auto single = open(1);
  const auto pid = single->query("SELECT pg_backend_pid()", {}).at(0).at(0).value();
  ASSERT_EQ(store_->query("SELECT pg_terminate_backend($1::int)", {pid}),
            (std::vector<row>{{"t"}}));
  wait_until_gone(*store_, pid);
  EXPECT_EQ(single->begin({"p", "k"}, fp(1), "tok", t0, 10s, 60s).outcome, begin_outcome::acquired);
  const auto new_pid = single->query("SELECT pg_backend_pid()", {}).at(0).at(0).value();
  EXPECT_NE(new_pid, pid);
}

TEST_F(PostgresStore, EveryStaleConnectionOfThePoolIsReplacedWithoutAFailure) {
  auto pooled = open(4);
  std::vector<std::thread> threads;
  std::vector<std::string> pids(4);
  {  // open four connections at once, so that the pool holds four
    std::latch together(4);
    for (std::size_t i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] {
        together.arrive_and_wait();
        pids[i] =
            pooled->query("SELECT pg_backend_pid() FROM pg_sleep(0.2)", {}).at(0).at(0).value();
      });
    }
    for (auto& t : threads) t.join();
  }
  for (const auto& pid : pids) {
    (void)store_->query("SELECT pg_terminate_backend($1::int)", {pid});
    wait_until_gone(*store_, pid);
  }
  for (int i = 0; i < 6; ++i) {
    EXPECT_NO_THROW(
        (void)pooled->begin({"p", "k" + std::to_string(i)}, fp(1), "tok", t0, 10s, 60s));
  }
}

TEST_F(PostgresStore, AHungServerCostsOneCallAtMostTheReplyTimeout) {
  auto single = make_postgres_store({.url = server_->url(),
                                     .table = table_,
                                     .max_connections = 1,
                                     .statement_timeout = 200ms,
                                     .reply_timeout = 1s});
  const auto pid = single->query("SELECT pg_backend_pid()", {}).at(0).at(0).value();
  const pid_t backend = static_cast<pid_t>(std::stol(pid));
  if (::kill(backend, SIGSTOP) != 0) GTEST_SKIP() << "cannot stop the backend: " << errno;
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    (void)single->begin({"p", "k"}, fp(1), "tok", t0, 10s, 60s);
  } catch (const store_error& e) {
    message = e.what();
  }
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(backend, SIGCONT);
  EXPECT_NE(message.find("no reply within 1s"), std::string::npos) << message;
  EXPECT_LT(took, 5s);
  EXPECT_GE(took, 900ms);
  // The connection was closed: the next call runs on a new one. (Another key: the stopped
  // backend may still run the first begin once it continues.)
  EXPECT_EQ(single->begin({"p", "k2"}, fp(1), "tok", t0, 10s, 60s).outcome,
            begin_outcome::acquired);
}

TEST_F(PostgresStore, TheSessionsStatementTimeoutIsSet) {
  auto s =
      make_postgres_store({.url = server_->url(), .table = table_, .statement_timeout = 1500ms});
  EXPECT_EQ(s->query("SHOW statement_timeout", {}), (std::vector<row>{{"1500ms"}}));
  EXPECT_THROW(
      (void)make_postgres_store(
          {.url = server_->url(), .table = table_, .statement_timeout = 100ms, .reply_timeout = 5s})
          ->query("SELECT pg_sleep(1)", {}),
      store_error);
}

TEST_F(PostgresStore, ConcurrentBeginsOfOneKeyAcquireItExactlyOnce) {
  constexpr int k_threads = 16;
  constexpr int k_keys = 20;
  auto shared = open(k_threads);
  for (int key = 0; key < k_keys; ++key) {
    std::atomic<int> acquired{0};
    std::atomic<int> in_progress{0};
    std::latch go(k_threads);
    std::vector<std::jthread> threads;
    for (int i = 0; i < k_threads; ++i) {
      threads.emplace_back([&, i] {
        go.arrive_and_wait();
        const auto r = shared->begin({"p", "key-" + std::to_string(key)}, fp(1),
                                     "tok-" + std::to_string(i), t0, 10s, 60s);
        (r.outcome == begin_outcome::acquired ? acquired : in_progress)++;
      });
    }
    threads.clear();
    EXPECT_EQ(acquired.load(), 1) << "key " << key;
    EXPECT_EQ(in_progress.load(), k_threads - 1) << "key " << key;
  }
}

TEST_F(PostgresStore, ConcurrentTakeoversOfAnExpiredLeaseSucceedExactlyOnce) {
  constexpr int k_threads = 16;
  auto shared = open(k_threads);
  const record_key id{"p", "k"};
  ASSERT_EQ(shared->begin(id, fp(1), "dead", t0, 10s, 60s).outcome, begin_outcome::acquired);
  std::atomic<int> took_over{0};
  std::atomic<int> in_progress{0};
  std::latch go(k_threads);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < k_threads; ++i) {
      threads.emplace_back([&, i] {
        go.arrive_and_wait();
        const auto r = shared->begin(id, fp(1), "tok-" + std::to_string(i), t0 + 20s, 10s, 60s);
        if (r.outcome == begin_outcome::acquired && r.took_over) {
          ++took_over;
        } else if (r.outcome == begin_outcome::in_progress) {
          ++in_progress;
        }
      });
    }
  }
  EXPECT_EQ(took_over.load(), 1);
  EXPECT_EQ(in_progress.load(), k_threads - 1);
}

TEST_F(PostgresStore, ATakeoverDuringCompleteWaitsForItsCommitAndSeesTheResponse) {
  auto other = open(2);
  const record_key id{"p", "k"};
  ASSERT_EQ(begin(id, 1, "holder").outcome, begin_outcome::acquired);
  std::latch in_work(1);
  std::latch finish(1);
  std::optional<stormguard::guard::begin_result> seen;
  std::jthread holder([&] {
    EXPECT_EQ(store_->complete(id, "holder", t0 + 20s, 60s,
                               [&](transaction&) {
                                 in_work.count_down();
                                 finish.wait();
                                 return stored_response{200, {}, "done"};
                               }),
              complete_outcome::completed);
  });
  in_work.wait();
  // The lease expired (t0 + 10 s), but complete() holds the row: the takeover waits.
  std::jthread taker([&] { seen = other->begin(id, fp(1), "taker", t0 + 20s, 10s, 60s); });
  // Wait (by asking the server, not by sleeping) until the taker is blocked on the row lock.
  bool blocked = false;
  for (int i = 0; i < 10000 && !blocked; ++i) {
    blocked = other->query("SELECT count(*) FROM pg_locks WHERE NOT granted", {}) !=
              std::vector<row>{{"0"}};
  }
  EXPECT_TRUE(blocked);
  finish.count_down();
  holder.join();
  taker.join();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->outcome, begin_outcome::completed);
  EXPECT_EQ(seen->response.value_or(stored_response{}).body, "done");
}

TEST_F(PostgresStore, ARepeatDuringCompleteIsAnsweredInProgressWithoutWaitingForTheHolder) {
  const record_key id{"p", "k"};
  ASSERT_EQ(begin(id, 1, "holder").outcome, begin_outcome::acquired);
  std::promise<stormguard::guard::begin_result> answer;
  auto answered = answer.get_future();
  std::jthread repeat;
  ASSERT_EQ(store_->complete(id, "holder", t0 + 1s, 60s,
                             [&](transaction&) {
                               // complete() holds the row's lock; the lease is still live.
                               repeat = std::jthread(
                                   [&] { answer.set_value(begin(id, 1, "repeat", t0 + 2s)); });
                               // Bounded only so that a wrong implementation fails, not hangs.
                               if (answered.wait_for(10s) != std::future_status::ready) {
                                 ADD_FAILURE() << "begin waited for the holder's transaction";
                               }
                               return stored_response{};
                             }),
            complete_outcome::completed);
  repeat.join();
  const auto seen = answered.get();
  EXPECT_EQ(seen.outcome, begin_outcome::in_progress);
  EXPECT_EQ(seen.lease_expires, t0 + 10s);
}

TEST_F(PostgresStore, StoresOpeningTheSameNewTableAtOnceAllSucceed) {
  constexpr int k_threads = 8;
  const std::string table = stormguard::test_support::unique_table_name();
  std::atomic<int> opened{0};
  std::latch go(k_threads);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < k_threads; ++i) {
      threads.emplace_back([&] {
        go.arrive_and_wait();
        try {
          auto s = make_postgres_store({.url = server_->url(), .table = table});
          ++opened;
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
        }
      });
    }
  }
  EXPECT_EQ(opened.load(), k_threads);
}

TEST_F(PostgresStore, ATableOfAnotherLayoutIsReportedWhenTheStoreOpens) {
  const std::string table = stormguard::test_support::unique_table_name();
  store_->query(
      "CREATE TABLE " + table + " (principal TEXT, key TEXT, PRIMARY KEY (principal, key))", {});
  try {
    (void)make_postgres_store({.url = server_->url(), .table = table});
    FAIL() << "expected store_error";
  } catch (const store_error& e) {
    EXPECT_NE(std::string(e.what()).find("exists with another layout"), std::string::npos)
        << e.what();
  }
}

}  // namespace

namespace stormguard_test {
namespace {

std::unique_ptr<sg::store> make_in(const std::string& table) {
  return sg::make_postgres_store(
      {.url = stormguard::test_support::shared_postgres_server().url(), .table = table});
}

}  // namespace

STORMGUARD_INSTANTIATE_SQL_STORE_SUITE(Postgres, (store_factory{"postgres", make_in}));

}  // namespace stormguard_test
