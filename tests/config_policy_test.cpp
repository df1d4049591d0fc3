// SPDX-License-Identifier: Apache-2.0
// stormguard::config: the policy file format, its strictness (hostile files), and the gRPC and
// Envoy importers.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../fuzz/policy_invariants.hpp"
#include "stormguard/config/policy.hpp"
#include "support/policy_text.hpp"

namespace {

using namespace std::chrono_literals;
namespace config = stormguard::config;

using stormguard::test_support::error_of;
using stormguard::test_support::one;
using stormguard::test_support::parse;

TEST(PolicyFile, AMinimalPolicyHasTheLibrarysDefaults) {
  const auto policies = parse(one(""));
  ASSERT_EQ(policies.size(), 1u);
  const config::policy& p = policies[0];
  EXPECT_EQ(p.name, "p");
  EXPECT_EQ(p.retry, stormguard::retry_options{});
  EXPECT_TRUE(std::holds_alternative<stormguard::no_budget>(p.budget));
  EXPECT_EQ(p.statuses, stormguard::retryable_statuses{});
  EXPECT_EQ(p.attempt_timeout, stormguard::duration::max());
  EXPECT_EQ(p.deadline, stormguard::duration::max());
  EXPECT_TRUE(p.warnings.empty());
}

TEST(PolicyFile, ReadsEveryField) {
  const auto p = parse(one(R"(, "description": "d", "attempts": 5,
      "backoff": {"base": "50ms", "cap": "2s", "multiplier": 1.5, "jitter": "equal"},
      "budget": {"kind": "quota", "max_tokens": 100, "retry_cost": 4, "timeout_cost": 8,
                 "no_retry_increment": 2},
      "retryable_statuses": [503, 429], "max_retry_after": "30s",
      "attempt_timeout": "1.5s", "deadline": "1min")"))[0];
  EXPECT_EQ(p.description, "d");
  EXPECT_EQ(p.retry.max_retries, 4);
  EXPECT_EQ(p.retry.backoff.base, 50ms);
  EXPECT_EQ(p.retry.backoff.cap, 2s);
  EXPECT_EQ(p.retry.backoff.multiplier, 1.5);
  EXPECT_EQ(p.retry.backoff.jitter, stormguard::jitter::equal);
  EXPECT_EQ(p.budget, config::budget_options(stormguard::retry_quota_options{100, 4, 8, 2}));
  EXPECT_EQ(p.statuses.to_vector(), (std::vector<int>{429, 503}));
  EXPECT_EQ(p.retry.max_retry_after, 30s);
  EXPECT_EQ(p.attempt_timeout, 1500ms);
  EXPECT_EQ(p.deadline, 1min);
}

TEST(PolicyFile, EveryBudgetKindRoundTripsThroughToJson) {
  for (const char* budget :
       {R"("none")", R"("ratio")", R"({"kind": "ratio", "ratio": 0.2, "window": "5s",
        "min_retries_per_second": 1})",
        R"({"kind": "token_bucket", "max_tokens": 20, "token_ratio": 0.5})", R"("quota")",
        R"({"kind": "adaptive", "window": "1min", "k": 1.5, "requests_padding": 8})",
        R"({"kind": "concurrency", "budget_percent": 25, "min_retry_concurrency": 1})"}) {
    const auto policies =
        parse(one(std::string(R"(, "attempt_timeout": "1s", "budget": )") + budget));
    const auto again = parse(config::to_json(policies));
    EXPECT_EQ(again, policies) << budget << "\n" << config::to_json(policies);
  }
}

TEST(PolicyFile, BudgetsTakeTheLibrarysDefaults) {
  EXPECT_EQ(parse(one(R"(, "budget": "ratio")"))[0].budget,
            config::budget_options(stormguard::ratio_budget_options{}));
  EXPECT_EQ(parse(one(R"(, "budget": {"kind": "concurrency"})"))[0].budget,
            config::budget_options(stormguard::concurrency_budget_options{}));
  EXPECT_EQ(config::budget_kind(stormguard::adaptive_throttle_options{}), "adaptive");
}

TEST(PolicyFile, SelectsByNameOrTheFirst) {
  const auto policies = parse(R"({"policies": [{"name": "a"}, {"name": "b", "retries": 1}]})");
  EXPECT_EQ(stormguard::test_support::value_of(config::select_policy(policies, "")).name, "a");
  EXPECT_EQ(
      stormguard::test_support::value_of(config::select_policy(policies, "b")).retry.max_retries,
      1);
  try {
    (void)stormguard::test_support::value_of(config::select_policy(policies, "c"));
    FAIL();
  } catch (const config::policy_error& e) {
    EXPECT_NE(e.message.find("(the policies in the file are a, b)"), std::string::npos);
  }
}

TEST(ClientProfile, ABuiltInsNameOrAnObjectOfEveryFieldRoundTrips) {
  const auto curl = config::parse_client_profile(R"("curl")");
  ASSERT_TRUE(curl) << curl.error().message;
  EXPECT_EQ(*curl, *stormguard::find_client_profile("curl"));
  EXPECT_FALSE(curl->reuses_connections);
  EXPECT_EQ(config::to_json(*curl), R"("curl")");
  const auto custom = config::parse_client_profile(
      R"({"attempt_label": "grpc-previous-rpc-attempts", "deadline": false, "pushback": true,
          "retry_after": "replace", "reuse_connections": true, "retries": true})");
  ASSERT_TRUE(custom) << custom.error().message;
  EXPECT_EQ(custom->name, stormguard::k_custom_client_profile);
  EXPECT_EQ(custom->label, stormguard::attempt_label::grpc_previous_attempts);
  EXPECT_FALSE(custom->sends_deadline);
  EXPECT_TRUE(custom->honours_pushback);
  EXPECT_EQ(custom->retry_after, stormguard::retry_after_use::replace);
  const auto again = config::parse_client_profile(config::to_json(*custom));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *custom);
  // Every built-in reads back as itself, by name.
  for (const stormguard::client_profile& b : stormguard::k_client_profiles) {
    const auto read = config::parse_client_profile(config::to_json(b));
    ASSERT_TRUE(read) << b.name;
    EXPECT_EQ(*read, b) << b.name;
  }
}

TEST(ClientProfile, BadProfilesNameTheFieldAndQuoteTheValue) {
  const auto error = [](const std::string& text) {
    const auto read = config::parse_client_profile(text, "client_profile");
    EXPECT_FALSE(read) << text;
    return read ? config::policy_error{} : read.error();
  };
  auto e = error(R"("wget")");
  EXPECT_EQ(e.field, "client_profile");
  EXPECT_NE(e.message.find(R"(got "wget")"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(R"("go-retryablehttp")"), std::string::npos) << e.message;
  e = error("7");
  EXPECT_EQ(e.field, "client_profile");
  e = error(R"({"attempt_label": "none", "deadline": false, "pushback": false,
               "retry_after": "sometimes", "reuse_connections": true, "retries": true})");
  EXPECT_EQ(e.field, "client_profile.retry_after");
  EXPECT_NE(e.message.find(R"(got "sometimes")"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(R"("minimum", "replace" or "ignore")"), std::string::npos);
  e = error(R"({"attempt_label": "none", "deadline": "no", "pushback": false,
               "retry_after": "ignore", "reuse_connections": true, "retries": true})");
  EXPECT_EQ(e.field, "client_profile.deadline");
  EXPECT_NE(e.message.find("must be true or false"), std::string::npos) << e.message;
  e = error(R"({"attempt_label": "none"})");  // every field is required
  EXPECT_EQ(e.field, "client_profile.deadline");
  EXPECT_NE(e.message.find("missing"), std::string::npos) << e.message;
  e = error(R"({"attempt_label": "none", "deadline": false, "pushback": false, "retry_after":
               "ignore", "reuse_connections": true, "retries": true, "jitter": "full"})");
  EXPECT_EQ(e.field, "client_profile.jitter");
}

TEST(ClientProfile, APolicyNamesItsClientAndTheImportersNameTheirs) {
  const auto p = parse(one(R"(, "client_profile": "go-retryablehttp")"))[0];
  ASSERT_TRUE(p.client);
  EXPECT_EQ(p.client->name, "go-retryablehttp");
  const auto again = parse("{\"policies\": [" + config::to_json(p) + "]}")[0];
  EXPECT_EQ(again, p);
  EXPECT_FALSE(parse(one(""))[0].client);  // absent: the scenario's
  EXPECT_EQ(error_of(one(R"(, "client_profile": "wget")")).field, "policies[0].client_profile");
  const auto grpc = parse(R"({"methodConfig": [{"name": [{"service": "s"}],
      "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.1s", "maxBackoff": "1s",
      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
                          config::policy_format::grpc)[0];
  ASSERT_TRUE(grpc.client);
  EXPECT_EQ(grpc.client->name, "grpc");
  const auto envoy = parse(R"({"retry_policy": {"retry_on": "5xx", "num_retries": 2}})",
                           config::policy_format::envoy)[0];
  ASSERT_TRUE(envoy.client);
  EXPECT_EQ(envoy.client->name, "envoy");
}

TEST(PolicyReference, SplitsFormatFileAndName) {
  auto r = stormguard::test_support::value_of(
      config::parse_policy_reference("grpc:/no/such/file.json:svc/M"));
  EXPECT_EQ(r.format, config::policy_format::grpc);
  EXPECT_EQ(r.file, "/no/such/file.json");
  EXPECT_EQ(r.name, "svc/M");
  r = stormguard::test_support::value_of(config::parse_policy_reference("envoy:route.yaml"));
  EXPECT_EQ(r.format, config::policy_format::envoy);
  EXPECT_EQ(r.name, "");
  EXPECT_THROW((void)stormguard::test_support::value_of(config::parse_policy_reference("f.json:")),
               config::policy_error);
  EXPECT_THROW((void)stormguard::test_support::value_of(config::parse_policy_reference("")),
               config::policy_error);
}

// A hostile file: its text, the field path of the error, and a part of the message.
struct hostile {
  std::string label;
  std::string text;
  std::string field;
  std::string message;
};

void PrintTo(const hostile& h, std::ostream* os) { *os << h.label; }

class HostilePolicy : public ::testing::TestWithParam<hostile> {};

TEST_P(HostilePolicy, IsRejectedNamingTheFieldItsRangeAndTheValue) {
  const hostile& h = GetParam();
  const config::policy_error e = error_of(h.text);
  EXPECT_EQ(e.field, h.field) << e.message;
  EXPECT_NE(e.message.find(h.message), std::string::npos) << e.message;
  if (!h.field.empty()) {
    EXPECT_EQ(e.message.rfind(h.field + ": ", 0), 0u) << e.message;
  }
}

const std::string deep = std::string(100, '[') + std::string(100, ']');

INSTANTIATE_TEST_SUITE_P(
    PolicyFile, HostilePolicy,
    ::testing::Values(
        hostile{"empty", "", "", "invalid JSON"},
        hostile{"not_json", "{policies", "", "invalid JSON"},
        hostile{"nan_literal", one(R"(, "retries": NaN)"), "", "invalid JSON"},
        hostile{"top_array", "[]", "", "must be a JSON object"},
        hostile{"no_policies", "{}", "policies", "missing"},
        hostile{"unknown_top", R"({"policies": [{"name": "p"}], "x": 1})", "x", "unknown field"},
        hostile{"empty_list", R"({"policies": []})", "policies", "1 to 100"},
        hostile{"policy_not_object", R"({"policies": [3]})", "policies[0]",
                "must be a JSON object"},
        hostile{"no_name", R"({"policies": [{}]})", "policies[0].name", "missing"},
        hostile{"name_with_space", R"({"policies": [{"name": "a b"}]})", "policies[0].name",
                "\"a b\""},
        hostile{"name_escape", R"({"policies": [{"name": "\u001b[31m"}]})", "policies[0].name",
                "\\x1b"},
        hostile{"duplicate_name", R"({"policies": [{"name": "a"}, {"name": "a"}]})",
                "policies[1].name", "must be unique"},
        hostile{"duplicate_key", one(R"(, "retries": 1, "retries": 2)"), "policies[0].retries",
                "appears more than once"},
        hostile{"unknown_field", one(R"(, "retry": 1)"), "policies[0].retry", "unknown field"},
        hostile{"retries_string", one(R"(, "retries": "3")"), "policies[0].retries",
                "an integer in [0, 1000], got \"3\""},
        hostile{"retries_negative", one(R"(, "retries": -1)"), "policies[0].retries", "got -1"},
        hostile{"retries_float", one(R"(, "retries": 2.5)"), "policies[0].retries", "got 2.5"},
        hostile{"retries_huge", one(R"(, "retries": 1e300)"), "policies[0].retries", "[0, 1000]"},
        hostile{"retries_and_attempts", one(R"(, "retries": 1, "attempts": 2)"),
                "policies[0].attempts", "not both"},
        hostile{"attempts_zero", one(R"(, "attempts": 0)"), "policies[0].attempts", "[1, 1001]"},
        hostile{"base_number", one(R"(, "backoff": {"base": 100})"), "policies[0].backoff.base",
                "a duration string"},
        hostile{"base_negative", one(R"(, "backoff": {"base": "-1s"})"), "policies[0].backoff.base",
                "negative"},
        hostile{"base_no_unit", one(R"(, "backoff": {"base": "100"})"), "policies[0].backoff.base",
                "got \"100\""},
        hostile{"base_above_default_cap", one(R"(, "backoff": {"base": "5s"})"),
                "policies[0].backoff.base", "at most policies[0].backoff.cap (3s, the default"},
        hostile{"cap_below_base", one(R"(, "backoff": {"base": "1s", "cap": "500ms"})"),
                "policies[0].backoff.cap", "at least policies[0].backoff.base (1s), got \"500ms\""},
        hostile{"cap_above_hour", one(R"(, "backoff": {"cap": "2h"})"), "policies[0].backoff.cap",
                "in [0s, 1h]"},
        hostile{"multiplier_below_one", one(R"(, "backoff": {"multiplier": 0.5})"),
                "policies[0].backoff.multiplier", "[1, 1000], got 0.5"},
        hostile{"multiplier_string", one(R"(, "backoff": {"multiplier": "2"})"),
                "policies[0].backoff.multiplier", "got \"2\""},
        hostile{"unknown_jitter", one(R"(, "backoff": {"jitter": "Full"})"),
                "policies[0].backoff.jitter", "got \"Full\""},
        hostile{"decorrelated_zero_base",
                one(R"(, "backoff": {"base": "0s", "jitter": "decorrelated"})"),
                "policies[0].backoff.base", "decorrelated"},
        hostile{"backoff_array", one(R"(, "backoff": [])"), "policies[0].backoff",
                "must be a JSON object"},
        hostile{"unknown_budget", one(R"(, "budget": "envoy")"), "policies[0].budget",
                "got \"envoy\""},
        hostile{"budget_without_kind", one(R"(, "budget": {"ratio": 0.1})"),
                "policies[0].budget.kind", "missing"},
        hostile{"budget_option_of_other_kind",
                one(R"(, "budget": {"kind": "ratio", "max_tokens": 3})"),
                "policies[0].budget.max_tokens", "unknown field"},
        hostile{"ratio_negative", one(R"(, "budget": {"kind": "ratio", "ratio": -0.1})"),
                "policies[0].budget.ratio", "[0, 1000], got -0.1"},
        hostile{"window_too_long", one(R"(, "budget": {"kind": "ratio", "window": "2min"})"),
                "policies[0].budget.window", "[1s, 60s]"},
        hostile{"token_decimals",
                one(R"(, "budget": {"kind": "token_bucket", "token_ratio": 0.1234})"),
                "policies[0].budget", "0.1234"},
        hostile{"percent_above_100",
                one(R"(, "budget": {"kind": "concurrency", "budget_percent": 101})"),
                "policies[0].budget.budget_percent", "[0, 100], got 101"},
        hostile{"quota_cost_above_max",
                one(R"(, "budget": {"kind": "quota", "max_tokens": 10, "retry_cost": 11})"),
                "policies[0].budget.retry_cost", "[0, 10], got 11"},
        hostile{"status_out_of_range", one(R"(, "retryable_statuses": [503, 600])"),
                "policies[0].retryable_statuses[1]", "[100, 599], got 600"},
        hostile{"status_string", one(R"(, "retryable_statuses": ["503"])"),
                "policies[0].retryable_statuses[0]", "got \"503\""},
        hostile{"status_twice", one(R"(, "retryable_statuses": [503, 503])"),
                "policies[0].retryable_statuses[1]", "more than once"},
        hostile{"statuses_object", one(R"(, "retryable_statuses": {})"),
                "policies[0].retryable_statuses", "an empty object"},
        hostile{"max_retry_after_zero", one(R"(, "max_retry_after": "0s")"),
                "policies[0].max_retry_after", "(0, 24h]"},
        hostile{"attempt_timeout_null", one(R"(, "attempt_timeout": null)"),
                "policies[0].attempt_timeout", "got null"},
        hostile{"deadline_bool", one(R"(, "deadline": true)"), "policies[0].deadline", "got true"},
        hostile{"deep_nesting", R"({"policies": )" + deep + "}", "", "nested more than 64 levels"},
        hostile{"long_description", one(R"(, "description": ")" + std::string(300, 'x') + "\""),
                "policies[0].description", "at most 200 bytes"}),
    [](const ::testing::TestParamInfo<hostile>& param) { return param.param.label; });

TEST(PolicyFile, FileErrorsStartWithThePath) {
  const auto dir = std::filesystem::temp_directory_path() / "stormguard-config-test";
  std::filesystem::create_directories(dir);
  const auto big = dir / "big.json";
  {
    std::ofstream out(big);
    out << std::string(config::k_max_policy_file_bytes + 10, ' ');
  }
  for (const auto& [path, message] : std::vector<std::pair<std::filesystem::path, std::string>>{
           {dir / "missing.json", "cannot open the policy file"},
           {dir, "is a directory"},
           {big, "larger than 1048576 bytes"},
           {"/dev/zero", "larger than 1048576 bytes"}}) {
    try {
      (void)stormguard::test_support::value_of(config::load_policies(path));
      ADD_FAILURE() << path;
    } catch (const config::policy_error& e) {
      EXPECT_EQ(e.message.rfind(path.string() + ": ", 0), 0u) << e.message;
      EXPECT_NE(e.message.find(message), std::string::npos) << e.message;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(PolicyFile, TheExamplesInPoliciesParse) {
  EXPECT_EQ(stormguard::test_support::value_of(
                config::load_policies(STORMGUARD_SOURCE_DIR "/policies/seed-go-engine.json"))[0]
                .retry,
            stormguard::retry_options{});
  const auto recommended = stormguard::test_support::value_of(
      config::load_policies(STORMGUARD_SOURCE_DIR "/policies/recommended.json"));
  EXPECT_EQ(recommended[0].budget, config::budget_options(stormguard::ratio_budget_options{}));
  EXPECT_EQ(stormguard::test_support::value_of(
                config::load_policies(STORMGUARD_SOURCE_DIR "/policies/grpc-service-config.json",
                                      config::policy_format::grpc))
                .size(),
            1u);
  EXPECT_EQ(
      stormguard::test_support::value_of(config::load_policies(
          STORMGUARD_SOURCE_DIR "/policies/envoy-route.yaml", config::policy_format::envoy))[0]
          .name,
      "backend/0");
  EXPECT_EQ(stormguard::test_support::value_of(
                config::load_policies(STORMGUARD_SOURCE_DIR "/policies/envoy-bootstrap.yaml",
                                      config::policy_format::envoy))
                .size(),
            2u);
}

// ---------------------------------------------------------------------------------------------
// gRPC service config
// ---------------------------------------------------------------------------------------------

std::string grpc_config(int max_attempts, const std::string& codes = R"(["UNAVAILABLE"])") {
  return R"({"methodConfig": [{"name": [{"service": "pkg.Svc", "method": "Get"}],
    "retryPolicy": {"maxAttempts": )" +
         std::to_string(max_attempts) +
         R"(, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
    "retryableStatusCodes": )" +
         codes + "}}]}";
}

TEST(GrpcImport, MapsMaxAttemptsBackoffAndFullJitter) {
  const auto p = parse(grpc_config(4), config::policy_format::grpc)[0];
  EXPECT_EQ(p.name, "pkg.Svc/Get");
  EXPECT_EQ(p.retry.max_retries, 3);
  EXPECT_EQ(p.retry.backoff.base, 100ms);
  EXPECT_EQ(p.retry.backoff.cap, 1s);
  EXPECT_EQ(p.retry.backoff.multiplier, 2.0);
  EXPECT_EQ(p.retry.backoff.jitter, stormguard::jitter::full);
  EXPECT_EQ(p.statuses, stormguard::retryable_statuses{});  // UNAVAILABLE: 429, 502, 503, 504
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_TRUE(std::holds_alternative<stormguard::no_budget>(p.budget));
}

TEST(GrpcImport, CapsMaxAttemptsAtFiveWithAWarning) {
  const auto p = parse(grpc_config(7), config::policy_format::grpc)[0];
  EXPECT_EQ(p.retry.max_retries, 4);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("methodConfig[0].retryPolicy.maxAttempts: 7 is above gRPC's limit"),
            std::string::npos);
}

TEST(GrpcImport, RetryThrottlingIsTheTokenBucketAndUnmappedCodesWarn) {
  std::string text = grpc_config(3, R"(["UNAVAILABLE", "DEADLINE_EXCEEDED"])");
  text.insert(text.size() - 1, R"(, "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1})");
  const auto p = parse(text, config::policy_format::grpc)[0];
  EXPECT_EQ(p.budget, config::budget_options(stormguard::token_bucket_throttle_options{10, 0.1}));
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("DEADLINE_EXCEEDED"), std::string::npos);
}

TEST(GrpcImport, EveryNameOfAnEntrySelectsItAndAServiceWideNameAppliesToItsMethods) {
  const std::string text = R"({"methodConfig": [
    {"name": [{"service": "google.pubsub.v1.Publisher", "method": "CreateTopic"},
              {"service": "google.pubsub.v1.Publisher", "method": "UpdateTopic"}],
     "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
                     "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}},
    {"name": [{"service": "google.pubsub.v1.Subscriber"}], "timeout": "60s",
     "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.1s", "maxBackoff": "60s",
                     "backoffMultiplier": 1.3, "retryableStatusCodes": ["UNAVAILABLE"]}}]})";
  const auto all = parse(text, config::policy_format::grpc);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].name, "google.pubsub.v1.Publisher/CreateTopic");
  EXPECT_EQ(all[1].name, "google.pubsub.v1.Publisher/UpdateTopic");
  EXPECT_EQ(all[1].retry, all[0].retry);
  const std::string path = testing::TempDir() + "/grpc-names.json";
  std::ofstream(path) << text;
  const auto update = stormguard::test_support::value_of(
      config::load_policies(stormguard::test_support::value_of(config::parse_policy_reference(
          "grpc:" + path + ":google.pubsub.v1.Publisher/UpdateTopic"))));
  ASSERT_EQ(update.size(), 1u);
  EXPECT_EQ(update[0].retry.max_retries, 2);
  const auto pull =
      stormguard::test_support::value_of(config::load_policies(stormguard::test_support::value_of(
          config::parse_policy_reference("grpc:" + path + ":google.pubsub.v1.Subscriber/Pull"))));
  ASSERT_EQ(pull.size(), 1u);
  EXPECT_EQ(pull[0].name, "google.pubsub.v1.Subscriber");
  EXPECT_EQ(pull[0].deadline, 60s);
  ASSERT_FALSE(pull[0].warnings.empty());
  EXPECT_NE(pull[0].warnings.back().find("the service-wide entry google.pubsub.v1.Subscriber"),
            std::string::npos);
  EXPECT_THROW((void)stormguard::test_support::value_of(config::load_policies(
                   stormguard::test_support::value_of(config::parse_policy_reference(
                       "grpc:" + path + ":google.pubsub.v1.Publisher/DeleteTopic")))),
               config::policy_error);
  std::remove(path.c_str());
}

TEST(GrpcImport, AnImportOfMoreThanAHundredPoliciesIsRefusedWithTheCount) {
  // One entry naming 101 methods makes 101 policies: more than a policy file may hold, so that
  // `policy check --json` of an import always reads back. 100 are accepted.
  const auto config_of = [](int methods) {
    std::string names;
    for (int i = 0; i < methods; ++i) {
      names += std::string(i == 0 ? "" : ", ") + R"({"service": "s", "method": "m)" +
               std::to_string(i) + R"("})";
    }
    return R"({"methodConfig": [{"name": [)" + names + R"(], "retryPolicy": {"maxAttempts": 2,
        "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"]}}]})";
  };
  EXPECT_EQ(parse(config_of(100), config::policy_format::grpc).size(), 100U);
  const auto refused = config::parse_policies(config_of(101), config::policy_format::grpc);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().field, "methodConfig");
  EXPECT_NE(refused.error().message.find("makes 101 policies"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("at most 100"), std::string::npos)
      << refused.error().message;
}

TEST(GrpcImport, InternalAndUnknownSayWhichHttpStatusesTheyCorrespondTo) {
  const auto p = parse(grpc_config(3, R"(["UNAVAILABLE", "INTERNAL", "UNKNOWN"])"),
                       config::policy_format::grpc)[0];
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_NE(p.warnings[0].find("INTERNAL: kept in retryable_grpc_codes"), std::string::npos)
      << p.warnings[0];
  EXPECT_NE(p.warnings[0].find("it corresponds to HTTP 400"), std::string::npos) << p.warnings[0];
  EXPECT_NE(p.warnings[1].find("UNKNOWN: kept in retryable_grpc_codes"), std::string::npos)
      << p.warnings[1];
  EXPECT_NE(p.warnings[1].find("it corresponds to every HTTP status without a code of its own"),
            std::string::npos)
      << p.warnings[1];
  for (const auto& w : p.warnings) {
    EXPECT_EQ(w.find("no HTTP status"), std::string::npos) << w;
    EXPECT_NE(w.find("which stormguard does not retry over HTTP"), std::string::npos) << w;
  }
  // The HTTP executors' reading does not change; the gRPC executors keep every code.
  EXPECT_EQ(p.statuses, stormguard::retryable_statuses{});
  ASSERT_TRUE(p.retryable_grpc_codes.has_value());
  EXPECT_EQ(p.retryable_grpc_codes->to_vector(), (std::vector<int>{2, 13, 14}));
}

TEST(GrpcImport, RejectsBadFieldsNamingThem) {
  EXPECT_EQ(error_of(grpc_config(1), config::policy_format::grpc).field,
            "methodConfig[0].retryPolicy.maxAttempts");
  EXPECT_EQ(error_of(grpc_config(3, R"(["NOPE"])"), config::policy_format::grpc).field,
            "methodConfig[0].retryPolicy.retryableStatusCodes[0]");
  std::string ms = grpc_config(3);
  ms.replace(ms.find("\"0.1s\""), 6, "\"100ms\"");
  EXPECT_EQ(error_of(ms, config::policy_format::grpc).field,
            "methodConfig[0].retryPolicy.initialBackoff");
  EXPECT_EQ(error_of("{}", config::policy_format::grpc).field, "methodConfig");
}

// ---------------------------------------------------------------------------------------------
// Envoy
// ---------------------------------------------------------------------------------------------

TEST(EnvoyImport, FollowsEnvoysSourceForTheBackOff) {
  const auto p = parse(R"({"retry_policy": {"retry_on": "5xx", "num_retries": 3,
                            "retry_back_off": {"base_interval": "0.025s"}}})",
                       config::policy_format::envoy)[0];
  EXPECT_EQ(p.retry.max_retries, 3);
  EXPECT_EQ(p.retry.backoff.base, 25ms);
  EXPECT_EQ(p.retry.backoff.cap, 250ms);  // max_interval defaults to 10 x base_interval
  EXPECT_EQ(p.retry.backoff.multiplier, 2.0);
  EXPECT_EQ(p.retry.backoff.jitter, stormguard::jitter::full);
  const stormguard::backoff b(p.retry.backoff);
  EXPECT_EQ(b.ceiling(1), 25ms);
  EXPECT_EQ(b.ceiling(2), 50ms);
  EXPECT_EQ(b.ceiling(3), 100ms);
  EXPECT_TRUE(p.statuses.contains(500));
  EXPECT_TRUE(p.statuses.contains(503));
  EXPECT_FALSE(p.statuses.contains(429));
}

TEST(EnvoyImport, AYamlFileWithSeveralDocumentsIsAnErrorNotCutToTheFirst) {
  const std::string two =
      "---\nretry_policy: {num_retries: 1}\n---\nretry_policy: {num_retries: 2}\n";
  const config::policy_error e = error_of(two, config::policy_format::envoy);
  EXPECT_NE(e.message.find("a YAML file with 2 documents"), std::string::npos) << e.message;
}

TEST(EnvoyImport, DefaultsAreOneRetryAnd25ms) {
  const auto p =
      parse(R"({"retry_policy": {"retry_on": "gateway-error"}})", config::policy_format::envoy)[0];
  EXPECT_EQ(p.retry.max_retries, 1);
  EXPECT_EQ(p.retry.backoff.base, 25ms);
  EXPECT_EQ(p.statuses.to_vector(), (std::vector<int>{502, 503, 504}));
  // Without a retry_budget, Envoy's default circuit breaker: 3 retries in flight.
  EXPECT_EQ(p.budget, config::budget_options(stormguard::concurrency_budget_options{0.0, 3}));
}

TEST(EnvoyImport, YamlRouteConfigurationWithARetryBudget) {
  const std::string yaml = R"(
virtual_hosts:
- name: backend
  retry_policy: {retry_on: reset, num_retries: 2}
  routes:
  - match: {prefix: "/"}
    name: api
    route:
      cluster: backend
      retry_policy:
        retry_on: "5xx,envoy-ratelimited"
        num_retries: 3
        per_try_timeout: 0.5s
        retry_back_off: {base_interval: 0.025s, max_interval: 0.2s}
retry_budget:
  budget_percent: {value: 25.0}
  min_retry_concurrency: 5
)";
  const auto policies = parse(yaml, config::policy_format::envoy);
  ASSERT_EQ(policies.size(), 2u);
  EXPECT_EQ(policies[0].name, "backend");
  EXPECT_EQ(policies[0].retry.max_retries, 2);
  const config::policy& api = policies[1];
  EXPECT_EQ(api.name, "backend/api");
  EXPECT_EQ(api.retry.backoff.cap, 200ms);
  EXPECT_EQ(api.attempt_timeout, 500ms);
  EXPECT_EQ(api.budget, config::budget_options(stormguard::concurrency_budget_options{25.0, 5}));
  ASSERT_EQ(api.warnings.size(), 2u);
  EXPECT_NE(api.warnings[0].find("envoy-ratelimited"), std::string::npos);
  // No route timeout: Envoy's default 15 s covers every retry, and is the deadline.
  EXPECT_EQ(api.deadline, 15s);
  EXPECT_NE(api.warnings[1].find("virtual_hosts[0].routes[0].route.timeout: absent"),
            std::string::npos)
      << api.warnings[1];
}

TEST(EnvoyImport, AFullBootstrapGivesOnePolicyPerRouteWithItsTimeoutAndItsClustersBudget) {
  const std::string file = STORMGUARD_SOURCE_DIR "/policies/envoy-bootstrap.yaml";
  const auto policies =
      stormguard::test_support::value_of(config::load_policies(file, config::policy_format::envoy));
  ASSERT_EQ(policies.size(), 2u);
  const config::policy& charges = policies[0];
  EXPECT_EQ(charges.name, "api/charges");
  EXPECT_EQ(charges.retry.max_retries, 2);
  EXPECT_EQ(charges.deadline, 3s);
  EXPECT_EQ(charges.attempt_timeout, 1s);
  EXPECT_EQ(charges.statuses.to_vector(), (std::vector<int>{503}));
  EXPECT_EQ(charges.budget,
            config::budget_options(stormguard::concurrency_budget_options{10.0, 2}));
  EXPECT_TRUE(charges.warnings.empty());
  const config::policy& catalog = policies[1];
  EXPECT_EQ(catalog.name, "api/catalog");
  EXPECT_EQ(catalog.deadline, 15s);
  EXPECT_EQ(catalog.budget, config::budget_options(stormguard::concurrency_budget_options{0.0, 3}));
  std::string notes;
  for (const auto& w : catalog.warnings) notes += w + "\n";
  EXPECT_NE(notes.find("static_resources.clusters[1]: no retry_budget"), std::string::npos)
      << notes;
  EXPECT_NE(notes.find(".route.timeout: absent: Envoy's default route timeout, 15s"),
            std::string::npos)
      << notes;
  // Selectable by name, as a route file's policies are.
  const auto one =
      stormguard::test_support::value_of(config::load_policies(stormguard::test_support::value_of(
          config::parse_policy_reference("envoy:" + file + ":api/charges"))));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "api/charges");
}

TEST(EnvoyImport, ARouteTimeoutOf0sIsNoDeadlineAndABadOneNamesTheField) {
  const std::string bootstrap =
      R"({"static_resources": {"listeners": [{"filter_chains": [{"filters": [
    {"name": "envoy.filters.network.http_connection_manager", "typed_config": {"route_config": {
      "virtual_hosts": [{"name": "h", "routes": [{"route": {"cluster": "c", "timeout": "TIMEOUT",
        "retry_policy": {"retry_on": "5xx"}}}]}]}}}]}]}],
    "clusters": [{"name": "c"}]}})";
  auto with = [&](const std::string& timeout) {
    std::string text = bootstrap;
    text.replace(text.find("TIMEOUT"), 7, timeout);
    return text;
  };
  const auto p = parse(with("0s"), config::policy_format::envoy).at(0);
  EXPECT_EQ(p.name, "h/0");
  EXPECT_EQ(p.deadline, stormguard::duration::max());
  EXPECT_EQ(error_of(with("15"), config::policy_format::envoy).field,
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config."
            "virtual_hosts[0].routes[0].route.timeout");
}

TEST(EnvoyImport, ABootstrapWhoseRoutesComeFromRdsSaysSo) {
  const std::string text = R"({"static_resources": {"listeners": [{"filter_chains": [{"filters": [
    {"name": "envoy.filters.network.http_connection_manager",
     "typed_config": {"rds": {"route_config_name": "r"}}}]}]}]}})";
  const std::string message = error_of(text, config::policy_format::envoy).message;
  EXPECT_NE(message.find("RDS"), std::string::npos) << message;
}

TEST(EnvoyImport, RejectsHostileFiles) {
  const auto field = [](const std::string& text) {
    return error_of(text, config::policy_format::envoy).field;
  };
  EXPECT_EQ(field(R"({"retry_policy": {"retry_on": "5xx,bogus"}})"), "retry_policy.retry_on");
  EXPECT_EQ(field(R"({"retry_policy": {"num_retries": -1, "retry_on": "5xx"}})"),
            "retry_policy.num_retries");
  EXPECT_EQ(field(R"({"retry_policy": {"retry_on": "5xx", "retry_back_off": {}}})"),
            "retry_policy.retry_back_off.base_interval");
  EXPECT_EQ(field(R"({"retry_policy": {"retry_on": "5xx", "bogus": 1}})"), "retry_policy.bogus");
  EXPECT_EQ(field(R"({"name": "no policy here"})"), "");
  EXPECT_EQ(field("retry_policy: {num_retries: .nan, retry_on: 5xx}"), "retry_policy.num_retries");
  EXPECT_EQ(field("retry_policy: [unclosed"), "");
  EXPECT_EQ(field(std::string(200, '[')), "");
  // An alias bomb: each level doubles the nodes; the conversion stops at its node limit.
  std::string bomb = "a: &a [x, x]\n";
  for (int i = 1; i < 25; ++i) {
    bomb += "b" + std::to_string(i) + ": &b" + std::to_string(i) + " [*" +
            (i == 1 ? std::string("a") : "b" + std::to_string(i - 1)) + ", *" +
            (i == 1 ? std::string("a") : "b" + std::to_string(i - 1)) + "]\n";
  }
  bomb += "retry_policy: *b24\n";
  EXPECT_NE(std::string(error_of(bomb, config::policy_format::envoy).message).find("YAML nodes"),
            std::string::npos);
}

// The fuzzer's seed corpus (and any crash kept there) as regression tests.
TEST(PolicyCorpus, EveryCorpusFileKeepsTheInvariants) {
  const std::filesystem::path dir = STORMGUARD_SOURCE_DIR "/fuzz/corpus/policy";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(stormguard::fuzz::check_policy_invariants(input), "") << entry.path();
    ++files;
  }
  EXPECT_GE(files, 5);
}

}  // namespace

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PolicyDocs, CompleteExampleIsTheFile) {
  const std::string doc = read_text(STORMGUARD_SOURCE_DIR "/docs/policy.md");
  const std::size_t section = doc.find("## A complete example");
  ASSERT_NE(section, std::string::npos);
  const std::size_t open = doc.find("```json\n", section);
  ASSERT_NE(open, std::string::npos);
  const std::size_t close = doc.find("\n```", open + 8);
  ASSERT_NE(close, std::string::npos);
  const std::string block = doc.substr(open + 8, close - open - 8);
  const std::string file = read_text(STORMGUARD_SOURCE_DIR "/policies/recommended.json");
  EXPECT_EQ(nlohmann::json::parse(block), nlohmann::json::parse(file));
}

}  // namespace
