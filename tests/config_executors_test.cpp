// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "stormguard/config/executors.hpp"
#include "stormguard/http/hedge_policy.hpp"
#include "stormguard/http/policy.hpp"
#include "support/policy_text.hpp"

namespace {

using namespace std::chrono_literals;
namespace config = stormguard::config;
using stormguard::duration;
using stormguard::time_point;

config::policy sample() {
  return stormguard::test_support::value_of(
      config::parse_policies(R"({"policies": [{"name": "p", "retries": 5,
    "backoff": {"base": "10ms", "cap": "1s", "jitter": "equal"},
    "budget": {"kind": "adaptive", "k": 1.5}, "retryable_statuses": [503],
    "attempt_timeout": "2s", "deadline": "9s", "max_retry_after": "5s"}]})"))[0];
}

TEST(RetrierSettings, CarryEveryFieldThatActsOnACall) {
  const config::policy p = sample();
  const auto s = config::retrier_settings_for(p);
  EXPECT_EQ(s.retry, p.retry);
  EXPECT_EQ(s.budget, p.budget);
  EXPECT_EQ(stormguard::budget_kind(s.budget), "adaptive");
  EXPECT_EQ(s.statuses, p.statuses);
  EXPECT_EQ(s.attempt_timeout, 2s);
  EXPECT_EQ(s.deadline, 9s);
  EXPECT_EQ(s.policy().options(), p.retry);
  EXPECT_EQ(s.call(time_point{} + 1s).deadline, time_point{} + 10s);
}

TEST(RetrierSettings, NoLimitIsDurationMaxAndNoDeadline) {
  config::policy p = sample();
  p.attempt_timeout = stormguard::duration::max();
  p.deadline = stormguard::duration::max();
  const auto s = config::retrier_settings_for(p);
  EXPECT_EQ(s.attempt_timeout, duration::max());
  EXPECT_EQ(s.deadline, duration::max());
  EXPECT_EQ(s.call(time_point{} + 1s).deadline, time_point::max());
  p.deadline = duration::max();  // saturates instead of overflowing
  EXPECT_EQ(config::retrier_settings_for(p).call(time_point{} + 1h).deadline, time_point::max());
}

TEST(HttpClientOptionsFor, SetsThePolicysFieldsAndKeepsTheOthers) {
  const config::policy p = sample();
  stormguard::http::client_options base;
  base.connect_timeout = 3s;
  base.key_format = stormguard::idempotency_key_format::bare;
  const auto o = stormguard::http::client_options_for(p, base);
  EXPECT_EQ(o.retry, p.retry);
  EXPECT_EQ(o.statuses, p.statuses);
  EXPECT_EQ(o.budget, p.budget);
  EXPECT_EQ(o.attempt_timeout, 2s);
  EXPECT_EQ(o.connect_timeout, 3s);
  EXPECT_EQ(o.key_format, stormguard::idempotency_key_format::bare);
  config::policy no_timeout = p;
  no_timeout.attempt_timeout = stormguard::duration::max();
  EXPECT_EQ(stormguard::http::client_options_for(no_timeout, base).attempt_timeout,
            base.attempt_timeout);
  EXPECT_EQ(stormguard::http::call_options_for(p, time_point{}).deadline, time_point{} + 9s);
}

TEST(HedgingSettings, CarryThePolicysHedgingBudgetAndLimits) {
  config::policy p =
      stormguard::test_support::value_of(config::parse_policies(R"({"policies": [{"name": "h",
    "hedging": {"max_attempts": 3, "delay": "50ms", "non_fatal_statuses": [503, 502],
                "budget": {"kind": "quota", "max_tokens": 100}},
    "attempt_timeout": "2s", "deadline": "9s", "max_retry_after": "5s"}]})"))[0];
  p.retry.max_retry_after = 7s;  // as a command's --max-retry-after would
  const auto s = config::hedging_settings_for(p);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->options.max_attempts, 3);
  EXPECT_EQ(s->options.delay, 50ms);
  EXPECT_EQ(s->options.max_retry_after, 7s);
  EXPECT_EQ(stormguard::budget_kind(s->budget), "quota");
  EXPECT_EQ(s->budget, p.budget);
  EXPECT_EQ(s->attempt_timeout, 2s);
  EXPECT_EQ(s->call(time_point{} + 1s).deadline, time_point{} + 10s);
  EXPECT_EQ(s->policy().options(), s->options);
  EXPECT_EQ(stormguard::http::hedge_http_options_for(*s).non_fatal_statuses,
            (std::vector<int>{502, 503}));
}

TEST(HedgingSettings, APolicyThatRetriesHasNone) {
  EXPECT_FALSE(config::hedging_settings_for(sample()).has_value());
}

}  // namespace

namespace {

TEST(HttpClientOptionsFor, AHedgingPolicyGivesAClientThatHedgesAndARetryingOneNone) {
  config::policy p =
      stormguard::test_support::value_of(config::parse_policies(R"({"policies": [{"name": "h",
    "hedging": {"max_attempts": 3, "delay": "50ms", "non_fatal_statuses": [503],
                "budget": {"kind": "quota", "max_tokens": 100}}}]})"))[0];
  p.retry.max_retries = 2;  // as a command's --retries would: a hedging client does not retry
  stormguard::http::client_options base;
  int ended = 0;
  base.hedging.emplace();
  base.hedging->on_end = [&ended](stormguard::end_reason, const stormguard::hedge_report&) {
    ++ended;
  };
  const auto o = stormguard::http::client_options_for(p, base);
  ASSERT_TRUE(o.hedging.has_value());
  EXPECT_EQ(o.hedging->policy, config::hedging_settings_for(p)->options);
  EXPECT_EQ(o.hedging->non_fatal_statuses, std::vector<int>{503});
  EXPECT_EQ(o.retry.max_retries, 0);
  EXPECT_EQ(stormguard::budget_kind(o.budget), "quota");
  ASSERT_TRUE(o.hedging->on_end);  // the caller's hook is kept
  o.hedging->on_end(stormguard::end_reason::success, {});
  EXPECT_EQ(ended, 1);
  EXPECT_FALSE(stormguard::http::client_options_for(sample(), o).hedging.has_value());
}

}  // namespace
