// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stormguard/config/policy.hpp"
#include "stormguard/sim/strategy.hpp"
#include "support/policy_text.hpp"

namespace {

namespace sim = stormguard::sim;
namespace config = stormguard::config;

TEST(BuiltinStrategies, AreThePoliciesOfTheEmbeddedFile) {
  const std::vector<config::policy> file = stormguard::test_support::value_of(
      config::load_policies(STORMGUARD_SOURCE_DIR "/policies/builtin-strategies.json"));
  EXPECT_EQ(sim::builtin_policies(), file);
  const auto strategies = sim::builtin_strategies();
  ASSERT_EQ(strategies.size(), file.size());
  for (std::size_t i = 0; i < file.size(); ++i) {
    EXPECT_EQ(strategies[i].as_policy(), file[i]) << file[i].name;
    EXPECT_TRUE(strategies[i].scenario_retries) << file[i].name;
    EXPECT_TRUE(strategies[i].retries_503) << file[i].name;
  }
}

TEST(FromPolicy, KeepsTheWholePolicy) {
  config::policy p = stormguard::test_support::value_of(
      config::parse_policies(R"({"policies": [{"name": "p", "retries": 5,
    "budget": {"kind": "quota", "max_tokens": 50}, "retryable_statuses": [500, 502],
    "attempt_timeout": "2s", "deadline": "9s"}]})"))[0];
  const sim::strategy s = sim::from_policy(p);
  EXPECT_EQ(s.as_policy(), p);  // statuses and deadline included: nothing is lost
  EXPECT_FALSE(s.retries_503);
  EXPECT_FALSE(s.scenario_retries);
  p.statuses = stormguard::retryable_statuses{};
  EXPECT_TRUE(sim::from_policy(p).retries_503);
}

TEST(FromPolicy, APolicyWithABuiltInsNameAndValuesRunsAsIt) {
  const sim::strategy* builtin = sim::find_strategy("full+quota");
  ASSERT_NE(builtin, nullptr);
  sim::strategy s = sim::from_policy(builtin->as_policy());
  s.scenario_retries = true;
  EXPECT_EQ(s, *builtin);
}

}  // namespace
