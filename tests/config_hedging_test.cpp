// SPDX-License-Identifier: Apache-2.0
// stormguard::config: the `hedging` object of a policy file, and the gRPC and Envoy importers'
// hedging policies.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "stormguard/config/hedging.hpp"
#include "stormguard/config/policy.hpp"
#include "support/policy_text.hpp"

namespace {

using namespace std::chrono_literals;
namespace config = stormguard::config;

using stormguard::test_support::error_of;
using stormguard::test_support::one;
using stormguard::test_support::parse;

TEST(HedgingPolicyFile, ReadsEveryField) {
  const auto p = parse(one(R"(, "hedging": {"max_attempts": 3, "delay": "50ms",
      "non_fatal_statuses": [503], "budget": {"kind": "ratio", "ratio": 0.2}})"))[0];
  ASSERT_TRUE(p.hedging);
  EXPECT_EQ(p.hedging->options.max_attempts, 3);
  EXPECT_EQ(p.hedging->options.delay, 50ms);
  EXPECT_EQ(p.hedging->options.delay_quantile, 0.0);
  EXPECT_TRUE(p.hedging->non_fatal_statuses.contains(503));
  EXPECT_FALSE(p.hedging->non_fatal_statuses.contains(502));
  EXPECT_EQ(p.retry.max_retries, 0);  // a policy has retries or hedging
  ASSERT_TRUE(std::holds_alternative<stormguard::ratio_budget_options>(p.budget));
  EXPECT_EQ(std::get<stormguard::ratio_budget_options>(p.budget).ratio, 0.2);
}

TEST(HedgingPolicyFile, DefaultsAreTwoCopiesTwentyMillisecondsApartAndNoNonFatalStatus) {
  const auto p = parse(one(R"(, "hedging": {})"))[0];
  ASSERT_TRUE(p.hedging);
  EXPECT_EQ(p.hedging->options.max_attempts, 2);
  EXPECT_EQ(p.hedging->options.delay, 20ms);
  EXPECT_TRUE(p.hedging->non_fatal_statuses.to_vector().empty());
  EXPECT_TRUE(std::holds_alternative<stormguard::no_budget>(p.budget));
}

TEST(HedgingPolicyFile, APercentileDelayAdaptsWithAFallback) {
  const auto p = parse(one(R"(, "hedging": {"delay": "p99.9", "fallback_delay": "30ms"})"))[0];
  EXPECT_DOUBLE_EQ(p.hedging->options.delay_quantile, 0.999);
  EXPECT_EQ(p.hedging->options.delay, 30ms);
  EXPECT_EQ(parse(one(R"(, "hedging": {"delay": "p95"})"))[0].hedging->options.delay_quantile,
            0.95);
  EXPECT_NE(
      error_of(one(R"(, "hedging": {"delay": "p100"})")).message.find("policies[0].hedging.delay"),
      std::string::npos);
  EXPECT_EQ(error_of(one(R"(, "hedging": {"delay": "px"})")).field, "policies[0].hedging.delay");
}

TEST(HedgingPolicyFile, SixAttemptsOrMoreAreRejectedNamingTheField) {
  for (const char* n : {"6", "100", "1", "0", "-1"}) {
    const auto e = error_of(one(std::string(R"(, "hedging": {"max_attempts": )") + n + "}"));
    EXPECT_EQ(e.field, "policies[0].hedging.max_attempts") << n;
    EXPECT_NE(e.message.find("[2, 5]"), std::string::npos) << e.message;
  }
}

TEST(HedgingPolicyFile, RetriesAndHedgingExcludeEachOther) {
  EXPECT_EQ(error_of(one(R"(, "retries": 3, "hedging": {})")).field, "policies[0].retries");
  EXPECT_EQ(error_of(one(R"(, "attempts": 2, "hedging": {})")).field, "policies[0].attempts");
  EXPECT_EQ(error_of(one(R"(, "backoff": {"base": "1s"}, "hedging": {})")).field,
            "policies[0].backoff");
  EXPECT_EQ(error_of(one(R"(, "budget": "ratio", "hedging": {"budget": "ratio"})")).field,
            "policies[0].hedging.budget");
  // retries 0 is what `policy check` prints: accepted.
  EXPECT_TRUE(parse(one(R"(, "retries": 0, "budget": "quota", "hedging": {})"))[0].hedging);
}

TEST(HedgingPolicyFile, UnknownFieldsAndBadStatusesAreErrors) {
  EXPECT_EQ(error_of(one(R"(, "hedging": {"copies": 2})")).field, "policies[0].hedging.copies");
  EXPECT_EQ(error_of(one(R"(, "hedging": {"non_fatal_statuses": [600]})")).field,
            "policies[0].hedging.non_fatal_statuses[0]");
  EXPECT_EQ(error_of(one(R"(, "hedging": {"delay": "2h"})")).field, "policies[0].hedging.delay");
}

TEST(HedgingPolicyFile, ToJsonPrintsTheObjectAndReadsBackTheSamePolicy) {
  const auto p = parse(one(R"(, "hedging": {"max_attempts": 3, "delay": "50ms",
      "non_fatal_statuses": [503, 502], "budget": "ratio"})"))[0];
  const std::string text = config::to_json(p);
  EXPECT_NE(text.find(R"("retries": 0)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("delay": "50ms")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("non_fatal_statuses": [502, 503])"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("max_attempts": 3)"), std::string::npos) << text;
  EXPECT_EQ(parse(R"({"policies": [)" + text + "]}")[0], p);
  const auto q = parse(one(R"(, "hedging": {"delay": "p99.9"})"))[0];
  const std::string qt = config::to_json(q);
  EXPECT_NE(qt.find(R"("delay": "p99.9")"), std::string::npos) << qt;
  EXPECT_EQ(parse(R"({"policies": [)" + qt + "]}")[0], q);
}

bool has_warning(const config::policy& p, const std::string& text) {
  for (const auto& w : p.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(GrpcHedgingImport, HedgingPolicyGivesTheDocumentedPolicy) {
  const auto p = parse(R"({"methodConfig": [{"name": [{"service": "s"}],
      "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.05s",
                        "nonFatalStatusCodes": ["UNAVAILABLE"]}}],
      "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}})",
                       config::policy_format::grpc)[0];
  ASSERT_TRUE(p.hedging);
  EXPECT_EQ(p.hedging->options.max_attempts, 3);
  EXPECT_EQ(p.hedging->options.delay, 50ms);
  EXPECT_TRUE(p.hedging->non_fatal_statuses.contains(503));
  EXPECT_EQ(p.retry.max_retries, 0);
  EXPECT_TRUE(std::holds_alternative<stormguard::token_bucket_throttle_options>(p.budget));
  // What `policy check` prints reads back as the same policy.
  auto again = parse(R"({"policies": [)" + config::to_json(p) + "]}")[0];
  again.warnings = p.warnings;
  again.description = p.description;
  EXPECT_EQ(again, p);
}

TEST(GrpcHedgingImport, SevenAttemptsAreCappedAtFiveWithAWarningNamingTheField) {
  const auto p = parse(R"({"methodConfig": [{"name": [{}],
      "hedgingPolicy": {"maxAttempts": 7}}]})",
                       config::policy_format::grpc)[0];
  EXPECT_EQ(p.hedging->options.max_attempts, 5);
  EXPECT_EQ(p.hedging->options.delay, 0ms);  // A6: no delay sends every copy at once
  EXPECT_TRUE(has_warning(p, "methodConfig[0].hedgingPolicy.maxAttempts: 7")) << p.warnings.size();
}

// A6: a hedgingDelay of 0 sends every copy at once, so the error's range includes 0.
TEST(GrpcHedgingImport, AZeroDelayIsAcceptedAndTheErrorsRangeSaysSo) {
  const auto p = parse(R"({"methodConfig": [{"name": [{}],
      "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0s"}}]})",
                       config::policy_format::grpc)[0];
  EXPECT_EQ(p.hedging->options.delay, 0ms);
  const auto e = error_of(R"({"methodConfig": [{"name": [{}],
      "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "-1s"}}]})",
                          config::policy_format::grpc);
  EXPECT_EQ(e.field, "methodConfig[0].hedgingPolicy.hedgingDelay");
  EXPECT_NE(e.message.find("in [0, 1h]"), std::string::npos) << e.message;
}

TEST(GrpcHedgingImport, RetryPolicyAndHedgingPolicyTogetherAreAnError) {
  const auto e = error_of(R"({"methodConfig": [{"name": [{}],
      "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
                      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
      "hedgingPolicy": {"maxAttempts": 3}}]})",
                          config::policy_format::grpc);
  EXPECT_EQ(e.field, "methodConfig[0].hedgingPolicy");
}

TEST(EnvoyHedgingImport, HedgeOnPerTryTimeoutHedgesAtThePerTryTimeout) {
  const auto p = parse(R"({"virtual_hosts": [{"name": "h", "routes": [{"name": "r",
      "route": {"retry_policy": {"retry_on": "5xx", "num_retries": 2, "per_try_timeout": "0.1s"},
                "hedge_policy": {"hedge_on_per_try_timeout": true, "initial_requests": 2,
                                 "additional_request_chance": {"numerator": 10}}}}]}]})",
                       config::policy_format::envoy)[0];
  ASSERT_TRUE(p.hedging);
  EXPECT_EQ(p.hedging->options.max_attempts, 3);
  EXPECT_EQ(p.hedging->options.delay, 100ms);
  EXPECT_TRUE(p.hedging->non_fatal_statuses.contains(503));
  EXPECT_EQ(p.attempt_timeout,
            stormguard::duration::max());  // Envoy keeps the timed-out request in flight
  EXPECT_EQ(p.retry.max_retries, 0);
  EXPECT_TRUE(has_warning(p, "hedge_policy.initial_requests: not implemented by Envoy itself"));
  EXPECT_TRUE(has_warning(p, "hedge_policy.additional_request_chance: not implemented"));
  EXPECT_TRUE(has_warning(p, "envoy #20036"));
}

TEST(EnvoyHedgingImport, WithoutHedgeOnPerTryTimeoutThereIsNoHedging) {
  const auto p = parse(R"({"retry_policy": {"retry_on": "5xx", "num_retries": 2},
                           "hedge_policy": {"hedge_on_per_try_timeout": true}})",
                       config::policy_format::envoy)[0];
  EXPECT_FALSE(p.hedging);  // no per_try_timeout: Envoy never hedges
  EXPECT_TRUE(has_warning(p, "no per_try_timeout"));
  EXPECT_EQ(p.retry.max_retries, 2);
}

}  // namespace
