// SPDX-License-Identifier: Apache-2.0
// The ledger's principals are not credentials: `GET /ledger` shows each
// charge's principal as the guard's digest; an attacker who reads it (or a stolen store) and sends
// it as the bearer token, with the victim's Idempotency-Key and body, must get a refusal or a
// charge of their own — never the victim's stored response. On lab::server in process, on a real
// socket, in front of real SQLite, PostgreSQL 15 and Redis 7 stores (tests/support starts them),
// with and without a principal key.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

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

const std::string k_body = R"({"amount": 4200, "currency": "eur"})";

raw_response post_charge(std::uint16_t port, const std::string& token, const std::string& key) {
  raw_connection c(port);
  EXPECT_TRUE(
      c.send("POST /charges HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Authorization: Bearer " +
             token + "\r\nIdempotency-Key: " + key +
             "\r\nContent-Length: " + std::to_string(k_body.size()) + "\r\n\r\n" + k_body));
  return c.read_response();
}

class LabLedgerReplay : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stormguard-ledger-replay-" + std::to_string(::getpid()) +
                                        "-" + std::to_string(++instance_));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A new store of the parameter's kind (its own file or database; Redis: the keys are new).
  std::string store_spec() {
    const std::string& kind = GetParam();
    if (kind == "sqlite") return "sqlite:" + (dir_ / "ledger.db").string();
    if (kind == "postgres") {
      return "postgres:" + stormguard::test_support::shared_postgres_server().create_database();
    }
    return "redis:" + stormguard::test_support::redis_server::shared().url();
  }

  fs::path dir_;
  static inline int instance_ = 0;
};

TEST_P(LabLedgerReplay, ADigestFromTheLedgerSentAsATokenNeverGetsTheVictimsCharge) {
  const std::string spec = store_spec();
  for (const std::string principal_key : {"", "a fleet-wide principal key"}) {
    auto started = lab::server::start(
        *stormguard::sim::builtin_scenario("no-incident"),
        {.payments = lab::payments_options{
             .idempotency = spec,
             .principal_key = principal_key,
             .ledger_token = std::string(stormguard::test_support::k_ledger_token)}});
    ASSERT_TRUE(started) << started.error();
    const std::unique_ptr<lab::server> srv = *std::move(started);
    const std::string key = stormguard::make_idempotency_key();

    const raw_response victim = post_charge(srv->port(), "cus_victim_token", key);
    ASSERT_EQ(victim.status, 201) << victim.head << victim.body;
    const std::string victim_id = nlohmann::json::parse(victim.body).at("id");

    raw_connection ledger(srv->port());
    ASSERT_TRUE(ledger.send("GET /ledger HTTP/1.1\r\nHost: x\r\n" +
                            stormguard::test_support::ledger_authorization() + "\r\n"));
    const raw_response rows = ledger.read_response();
    ASSERT_EQ(rows.status, 200) << rows.head;
    std::string digest;
    const nlohmann::json shown = nlohmann::json::parse(rows.body);
    for (const auto& row : shown.at("rows")) {
      if (row.at("key") == key) digest = row.at("principal");
    }
    ASSERT_FALSE(digest.empty()) << rows.body;
    EXPECT_EQ(digest.find("cus_victim_token"), std::string::npos);

    // The digest as shown, and its hex digits alone (what a store written before the prefix
    // held): each is a token of its own, never the victim's.
    const std::string hex = digest.substr(digest.find(':') + 1);
    for (const std::string& stolen : {digest, hex}) {
      const raw_response attack = post_charge(srv->port(), stolen, key);
      EXPECT_FALSE(attack.field("Idempotent-Replayed").has_value())
          << "principal key '" << principal_key << "', token " << stolen << ": " << attack.head;
      EXPECT_EQ(attack.body.find(victim_id), std::string::npos)
          << "the victim's charge " << victim_id << " was replayed to token " << stolen;
      EXPECT_TRUE(attack.status == 401 || attack.status == 201) << attack.head << attack.body;
      if (attack.status == 201) {
        EXPECT_NE(nlohmann::json::parse(attack.body).at("id"), victim_id);
      }
    }
    // The victim's own retry is still replayed.
    const raw_response retry = post_charge(srv->port(), "cus_victim_token", key);
    EXPECT_EQ(retry.status, 201);
    EXPECT_EQ(retry.field("Idempotent-Replayed"), "true");
    EXPECT_EQ(nlohmann::json::parse(retry.body).at("id"), victim_id);
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, LabLedgerReplay, ::testing::Values("sqlite", "postgres", "redis"),
                         [](const auto& param) { return param.param; });

}  // namespace
