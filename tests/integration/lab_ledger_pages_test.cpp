// SPDX-License-Identifier: Apache-2.0
// GET /ledger of stormguard::lab::server in pages (`?after=CURSOR&limit=N`, N at most 1,000) on
// each guard store (SQLite, PostgreSQL, Redis), read on a store connection and a worker of its
// own: every row once across the pages, a bad query refused naming the parameter, and a charge
// sent behind 30 unread ledger requests answered about as fast as alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/guard/store.hpp"
#include "stormguard/idempotency.hpp"
#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "support/lab_scenarios.hpp"
#include "support/postgres_server.hpp"
#include "support/raw_http.hpp"
#include "support/redis_server.hpp"

namespace {

namespace lab = stormguard::lab;
namespace fs = std::filesystem;
using stormguard::test_support::raw_connection;
using stormguard::test_support::raw_response;
using clock_type = std::chrono::steady_clock;

constexpr int k_rows = 5000;
const std::string k_body = R"({"amount": 4200, "currency": "eur"})";

raw_response get(std::uint16_t port, const std::string& target) {
  raw_connection c(port);
  EXPECT_TRUE(c.send("GET " + target + " HTTP/1.1\r\nHost: x\r\n" +
                     stormguard::test_support::ledger_authorization() + "\r\n"));
  return c.read_response();
}

class LabLedgerPages : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stormguard-ledger-pages-" + std::to_string(::getpid()) +
                                        "-" + std::to_string(++instance_));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    srv_.reset();
    fs::remove_all(dir_);
  }

  // A server on a new store of the parameter's kind holding k_rows more ledger rows (written
  // straight into the store: the server creates the table, then the rows are added). Returns
  // the rows the ledger holds in all (a shared Redis may hold other tests' rows).
  std::int64_t start_with_rows() {
    const std::string& kind = GetParam();
    std::string spec;
    if (kind == "sqlite") {
      spec = "sqlite:" + (dir_ / "ledger.db").string();
    } else if (kind == "postgres") {
      spec = "postgres:" + stormguard::test_support::shared_postgres_server().create_database();
    } else {
      spec = "redis:" + stormguard::test_support::redis_server::shared().url();
    }
    auto started = lab::server::start(
        *stormguard::sim::builtin_scenario("no-incident"),
        {.payments = lab::payments_options{
             .idempotency = spec,
             .ledger_token = std::string(stormguard::test_support::k_ledger_token)}});
    EXPECT_TRUE(started) << (started ? "" : started.error());
    if (!started) return 0;
    srv_ = *std::move(started);
    auto store = stormguard::guard::open_store(spec);
    if (kind == "redis") {
      std::vector<std::string> args{"stormguard_ledger"};
      for (int i = 0; i < k_rows; ++i) {
        args.push_back(R"({"id":"ch_)" + stormguard::make_idempotency_key() +
                       R"(","principal":"p","key":"k","amount":1,"currency":"eur"})");
      }
      const std::vector<std::string_view> views(args.begin(), args.end());
      (void)store->query("RPUSH", std::span<const std::string_view>(views));
      const auto n = store->query("LLEN", {"stormguard_ledger"});
      return std::stoll(n.at(0).at(0).value_or("0"));
    }
    (void)store->query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
            std::to_string(k_rows) +
            ") INSERT INTO stormguard_ledger (id, principal, idem_key, amount, currency) "
            "SELECT 'ch_' || i, 'p', 'k' || i, 1, 'eur' FROM n",
        {});
    return k_rows;
  }

  fs::path dir_;
  std::unique_ptr<lab::server> srv_;
  static inline int instance_ = 0;
};

TEST_P(LabLedgerPages, EveryRowOnceAcrossPagesOfAtMostTheLimit) {
  const std::int64_t total = start_with_rows();
  ASSERT_TRUE(srv_);
  std::set<std::string> ids;
  std::string after;
  int pages = 0;
  do {
    const raw_response r =
        get(srv_->port(), "/ledger?limit=1000" + (after.empty() ? "" : "&after=" + after));
    ASSERT_EQ(r.status, 200) << r.head << r.body;
    const auto page = nlohmann::json::parse(r.body);
    ASSERT_LE(page.at("rows").size(), 1000U);
    for (const auto& row : page.at("rows")) {
      EXPECT_TRUE(ids.insert(row.at("id").get<std::string>()).second) << "a row twice";
    }
    after = page.contains("next") ? page.at("next").get<std::string>() : "";
    ASSERT_LT(++pages, 1000);
  } while (!after.empty());
  EXPECT_EQ(static_cast<std::int64_t>(ids.size()), total);
  EXPECT_GE(pages, 5);
  // Without a limit: a page of the maximum, 1,000 rows.
  EXPECT_EQ(nlohmann::json::parse(get(srv_->port(), "/ledger").body).at("rows").size(), 1000U);
}

TEST_P(LabLedgerPages, OnlyTheOperatorTokenReadsTheLedger) {
  (void)start_with_rows();
  ASSERT_TRUE(srv_);
  const std::string token(stormguard::test_support::k_ledger_token);
  for (const std::string& field :
       {std::string(), std::string("Authorization: Bearer cus_1\r\n"),
        "Authorization: Bearer " + token + "0\r\n", "Authorization: Basic " + token + "\r\n"}) {
    raw_connection c(srv_->port());
    ASSERT_TRUE(c.send("GET /ledger?limit=1 HTTP/1.1\r\nHost: x\r\n" + field + "\r\n"));
    const raw_response r = c.read_response();
    EXPECT_EQ(r.status, 401) << field;
    EXPECT_NE(r.head.find("WWW-Authenticate: Bearer"), std::string::npos) << r.head;
    EXPECT_EQ(r.body.find("\"rows\""), std::string::npos) << r.body;
  }
  EXPECT_EQ(get(srv_->port(), "/ledger?limit=1").status, 200);
}

TEST(LabLedgerOff, WithoutAnOperatorTokenTheLedgerIs404) {
  auto started = lab::server::start(stormguard::test_support::tiny_scenario(),
                                    {.payments = lab::payments_options{.idempotency = "off"}});
  ASSERT_TRUE(started) << started.error();
  raw_connection c((*started)->port());
  ASSERT_TRUE(c.send("GET /ledger HTTP/1.1\r\nHost: x\r\n" +
                     stormguard::test_support::ledger_authorization() + "\r\n"));
  const raw_response r = c.read_response();
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("ledger_off"), std::string::npos) << r.body;
  // A token that is not one is refused at start, naming its length, never its bytes.
  try {
    (void)lab::server::start(
        stormguard::test_support::tiny_scenario(),
        {.payments = lab::payments_options{.idempotency = "off", .ledger_token = "short-secret"}});
    ADD_FAILURE() << "a 12-byte token was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ledger_token (12 bytes)"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("short-secret"), std::string::npos) << e.what();
  }
}

TEST_P(LabLedgerPages, ABadQueryIsRefusedNamingTheParameterAndTheValue) {
  (void)start_with_rows();
  ASSERT_TRUE(srv_);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/ledger?limit=1001", "limit \"1001\""},
      {"/ledger?limit=0", "limit \"0\""},
      {"/ledger?limit=-1", "limit \"-1\""},
      {"/ledger?after=x", "after \"x\""},
      {"/ledger?page=2", "\"page\""},
      {"/ledger?limit=5&limit=6", "limit: given twice"},
      // An encoded NUL would cut the value short in evhttp's decoding: the query is refused.
      {"/ledger?limit=1%00junk", "query \"limit=1%00junk\""},
      {"/ledger?after=0%00junk", "query \"after=0%00junk\""},
      {"/ledger?limit", "query \"limit\""},
      {"/ledger?after=1000000000000000000", "0..999999999999999999"}};
  for (const auto& [target, named] : cases) {
    const raw_response r = get(srv_->port(), target);
    EXPECT_EQ(r.status, 400) << target;
    const auto problem = nlohmann::json::parse(r.body, nullptr, false);
    ASSERT_TRUE(problem.is_object()) << r.body;
    EXPECT_EQ(problem.value("code", ""), "invalid_query") << r.body;
    EXPECT_NE(problem.value("detail", "").find(named), std::string::npos)
        << target << ": " << r.body;
  }
}

TEST_P(LabLedgerPages, AChargeIsNotQueuedBehindLedgerReads) {
  (void)start_with_rows();
  ASSERT_TRUE(srv_);
  const auto charge = [&] {
    raw_connection c(srv_->port());
    EXPECT_TRUE(
        c.send("POST /charges HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Idempotency-Key: \"" +
               stormguard::make_idempotency_key() +
               "\"\r\nContent-Length: " + std::to_string(k_body.size()) + "\r\n\r\n" + k_body));
    const auto began = clock_type::now();
    EXPECT_EQ(c.read_response().status, 201);
    return clock_type::now() - began;
  };
  auto idle = charge();
  for (int i = 0; i < 2; ++i) idle = std::min(idle, charge());
  // 30 ledger requests whose answers nobody reads (a full page each), then a charge.
  std::vector<std::unique_ptr<raw_connection>> readers;
  for (int i = 0; i < 30; ++i) {
    readers.push_back(std::make_unique<raw_connection>(srv_->port()));
    ASSERT_TRUE(readers.back()->send("GET /ledger?limit=1000 HTTP/1.1\r\nHost: x\r\n" +
                                     stormguard::test_support::ledger_authorization() + "\r\n"));
  }
  const auto behind = charge();
  EXPECT_LT(behind, 2 * idle + std::chrono::milliseconds(100))
      << "idle " << std::chrono::duration<double, std::milli>(idle).count() << " ms, behind "
      << std::chrono::duration<double, std::milli>(behind).count() << " ms";
}

INSTANTIATE_TEST_SUITE_P(Stores, LabLedgerPages, ::testing::Values("sqlite", "postgres", "redis"));

}  // namespace
