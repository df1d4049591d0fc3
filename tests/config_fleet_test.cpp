// SPDX-License-Identifier: Apache-2.0
// Policy files: the `fleet` object of a ratio budget (a stormguard::fleet_budget_options).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <variant>
#include <vector>

#include "stormguard/config/policy.hpp"
#include "stormguard/fleet_budget.hpp"
#include "support/policy_text.hpp"

namespace {

using namespace std::chrono_literals;
namespace config = stormguard::config;

std::string one(const std::string& budget) {
  return R"({"policies": [{"name": "p", "budget": )" + budget + "}]}";
}

config::policy_error error_of(const std::string& budget) {
  try {
    (void)stormguard::test_support::value_of(config::parse_policies(one(budget)));
  } catch (const config::policy_error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << budget;
  return config::policy_error{};
}

TEST(FleetPolicy, ARatioBudgetWithAFleetObjectIsAFleetBudget) {
  const auto p = stormguard::test_support::value_of(config::parse_policies(one(
      R"({"kind": "ratio", "ratio": 0.2, "min_retries_per_second": 5, "fleet": {"store":
      "redis://127.0.0.1:6379/0", "key": "checkout-api", "sync_interval": "50ms",
      "max_sync_interval": "1s", "expected_clients": 40, "password_env": "FLEET_PW"}})")));
  const auto* o = std::get_if<stormguard::fleet_budget_options>(&p[0].budget);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->ratio.ratio, 0.2);
  EXPECT_EQ(o->ratio.min_retries_per_second, 5);
  EXPECT_EQ(o->store.url, "redis://127.0.0.1:6379/0");
  EXPECT_EQ(o->store.key, "checkout-api");
  EXPECT_EQ(o->store.password_env, "FLEET_PW");
  EXPECT_EQ(o->sync_interval, 50ms);
  EXPECT_EQ(o->max_sync_interval, 1s);
  EXPECT_EQ(o->expected_clients, 40);
  EXPECT_EQ(config::budget_kind(p[0].budget), "fleet");
}

TEST(FleetPolicy, ToJsonWritesARatioBudgetWithItsFleetAndRoundTrips) {
  const auto p = stormguard::test_support::value_of(config::parse_policies(
      one(R"({"kind": "ratio", "fleet": {"store": "redis://db:6380/2", "key": "k"}})")));
  const std::string text = config::to_json(p);
  EXPECT_NE(text.find(R"("kind": "ratio")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("store": "redis://db:6380/2",)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("sync_interval": "100ms",)"), std::string::npos) << text;
  EXPECT_EQ(stormguard::test_support::value_of(config::parse_policies(text)), p);
}

// "shards": K keeps the budget in K shards; "auto" sizes K from expected_clients (each syncing
// every sync_interval, no store more than half busy at the measured capacity) and is written
// back as the number it chose; one shard is written as nothing (files before shards read it).
TEST(FleetPolicy, ShardsAreReadAsANumberOrSizedFromTheFleetAndRoundTrip) {
  const auto three = stormguard::test_support::value_of(config::parse_policies(one(
      R"({"kind": "ratio", "fleet": {"store": "redis://db:6380/2", "key": "k", "shards": 3}})")));
  EXPECT_EQ(std::get<stormguard::fleet_budget_options>(three[0].budget).shards, 3);
  const std::string text = config::to_json(three);
  EXPECT_NE(text.find(R"("shards": 3)"), std::string::npos) << text;
  EXPECT_EQ(stormguard::test_support::value_of(config::parse_policies(text)), three);
  const auto sized = stormguard::test_support::value_of(config::parse_policies(one(
      R"({"kind": "ratio", "fleet": {"key": "k", "expected_clients": 100000, "shards": "auto"}})")));
  EXPECT_EQ(std::get<stormguard::fleet_budget_options>(sized[0].budget).shards,
            stormguard::fleet_budget::shards_for(100'000, 100ms, 29'000.0, 0.5));
  const auto one_shard = stormguard::test_support::value_of(
      config::parse_policies(one(R"({"kind": "ratio", "fleet": {"key": "k"}})")));
  EXPECT_EQ(std::get<stormguard::fleet_budget_options>(one_shard[0].budget).shards, 1);
  EXPECT_EQ(config::to_json(one_shard).find("shards"), std::string::npos);
}

// "ask_for_credit": claims that follow need; written only when true (files before it read it).
TEST(FleetPolicy, AskForCreditIsReadAndRoundTrips) {
  const auto asks = stormguard::test_support::value_of(config::parse_policies(
      one(R"({"kind": "ratio", "fleet": {"key": "k", "ask_for_credit": true}})")));
  EXPECT_TRUE(std::get<stormguard::fleet_budget_options>(asks[0].budget).ask_for_credit);
  const std::string text = config::to_json(asks);
  EXPECT_NE(text.find(R"("ask_for_credit": true)"), std::string::npos) << text;
  EXPECT_EQ(stormguard::test_support::value_of(config::parse_policies(text)), asks);
  const auto shares = stormguard::test_support::value_of(config::parse_policies(
      one(R"({"kind": "ratio", "fleet": {"key": "k", "ask_for_credit": false}})")));
  EXPECT_FALSE(std::get<stormguard::fleet_budget_options>(shares[0].budget).ask_for_credit);
  EXPECT_EQ(config::to_json(shares).find("ask_for_credit"), std::string::npos);
}

TEST(FleetPolicy, APasswordIsNeverWritten) {
  const auto p = stormguard::test_support::value_of(config::parse_policies(
      one(R"({"kind": "ratio", "fleet": {"store": "redis://app:hunter2@db:6379", "key": "k"}})")));
  const std::string text = config::to_json(p);
  EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
  EXPECT_NE(text.find("redis://app:***@db:6379"), std::string::npos) << text;
}

struct hostile {
  const char* budget;
  const char* field;
  const char* says;
};

class HostileFleet : public ::testing::TestWithParam<hostile> {};

TEST_P(HostileFleet, IsRejectedNamingTheField) {
  const config::policy_error e = error_of(GetParam().budget);
  EXPECT_EQ(e.field, GetParam().field) << e.message;
  EXPECT_NE(e.message.find(GetParam().says), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find("hunter2"), std::string::npos) << e.message;
}

INSTANTIATE_TEST_SUITE_P(
    Values, HostileFleet,
    ::testing::Values(
        hostile{R"({"kind": "ratio", "fleet": {"store": "redis://h"}})",
                "policies[0].budget.fleet.key", "missing"},
        hostile{R"({"kind": "ratio", "fleet": {"key": ""}})", "policies[0].budget.fleet.key",
                "1 to 200"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "a{b}"}})", "policies[0].budget.fleet.key",
                "'{'"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "store": "http://h"}})",
                "policies[0].budget.fleet.store", "redis://"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "store": "rediss://:hunter2@h"}})",
                "policies[0].budget.fleet.store", "TLS"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "sync_interval": "5ms"}})",
                "policies[0].budget.fleet.sync_interval", "10ms"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "sync_interval": "11s"}})",
                "policies[0].budget.fleet.sync_interval", "10s"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "max_sync_interval": "50ms"}})",
                "policies[0].budget.fleet.max_sync_interval", "100ms"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "expected_clients": -1}})",
                "policies[0].budget.fleet.expected_clients", "10000000"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "ask_for_credit": "yes"}})",
                "policies[0].budget.fleet.ask_for_credit", "boolean, got \"yes\""},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "shards": 0}})",
                "policies[0].budget.fleet.shards", "1024"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "shards": 1025}})",
                "policies[0].budget.fleet.shards", "1024"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "shards": "many"}})",
                "policies[0].budget.fleet.shards", "or \"auto\", got \"many\""},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "shards": "auto"}})",
                "policies[0].budget.fleet.shards", "\"expected_clients\" > 0"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "expected_clients": 10000000,
                "sync_interval": "10ms", "shards": "auto"}})",
                "policies[0].budget.fleet.shards", "more than 1024: raise sync_interval"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "password_env": "A B"}})",
                "policies[0].budget.fleet.password_env", "environment variable"},
        hostile{R"({"kind": "ratio", "fleet": {"key": "k", "colour": 1}})",
                "policies[0].budget.fleet.colour", "unknown"},
        hostile{R"({"kind": "ratio", "fleet": "redis://h"})", "policies[0].budget.fleet", "object"},
        hostile{R"({"kind": "quota", "fleet": {"key": "k"}})", "policies[0].budget.fleet",
                "only to a budget of kind \"ratio\""},
        hostile{R"("fleet")", "policies[0].budget", "\"fleet\" object"},
        hostile{R"({"kind": "fleet", "ratio": 0.2})", "policies[0].budget.kind",
                "\"kind\": \"ratio\", ..., \"fleet\": {"}));

// The documented spelling is a ratio budget with a `fleet` object; "kind": "fleet" (the kind's
// name in metric labels and the budget list) is accepted as an alias when it carries the object,
// reads the same options and is written back in the documented spelling.
TEST(FleetPolicy, KindFleetWithItsObjectIsAnAliasWrittenBackAsRatio) {
  const std::string fleet = R"("fleet": {"store": "redis://db:6380/2", "key": "k"}})";
  const auto alias = stormguard::test_support::value_of(
      config::parse_policies(one(R"({"kind": "fleet", "ratio": 0.2, )" + fleet)));
  const auto documented = stormguard::test_support::value_of(
      config::parse_policies(one(R"({"kind": "ratio", "ratio": 0.2, )" + fleet)));
  EXPECT_EQ(alias, documented);
  EXPECT_EQ(config::budget_kind(alias[0].budget), "fleet");
  const std::string text = config::to_json(alias);
  EXPECT_NE(text.find(R"("kind": "ratio")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"("kind": "fleet")"), std::string::npos) << text;
}

}  // namespace
