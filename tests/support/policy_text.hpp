// SPDX-License-Identifier: Apache-2.0
// Test-only helpers for the policy file tests: parse a policy file's text, get the policy_error
// it gives, and write one policy with its fields.
//
//   const auto p = stormguard::test_support::parse(stormguard::test_support::one(R"(, "retries":
//   2)")); EXPECT_EQ(stormguard::test_support::error_of(one(R"(, "retries": -1)")).field(), "...");
//
// Header-only.
#ifndef STORMGUARD_TESTS_SUPPORT_POLICY_TEXT_HPP
#define STORMGUARD_TESTS_SUPPORT_POLICY_TEXT_HPP

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "stormguard/config/policy.hpp"

namespace stormguard::test_support {

/// The policies of `text` in format `f` (config::parse_policies); throws its policy_error, so
/// that a test can write EXPECT_THROW(parse(text), config::policy_error).
inline std::vector<config::policy> parse(
    const std::string& text, config::policy_format f = config::policy_format::stormguard) {
  auto policies = config::parse_policies(text, f);
  if (!policies) throw policies.error();
  return *std::move(policies);
}

/// The value of `r`; throws its policy_error (for EXPECT_THROW) when it holds one.
template <class T>
T value_of(stormguard::outcome<T, config::policy_error> r) {
  if (!r) throw r.error();
  return *std::move(r);
}

/// The policy_error of parsing `text`: its field and message. A test failure when it parses.
inline config::policy_error error_of(const std::string& text,
                                     config::policy_format f = config::policy_format::stormguard) {
  auto policies = config::parse_policies(text, f);
  if (!policies) return policies.error();
  ADD_FAILURE() << "accepted: " << text;
  return config::policy_error{};
}

/// A policy file with one policy named "p" and `policy_fields` (", \"retries\": 2", ...).
inline std::string one(const std::string& policy_fields) {
  return R"({"policies": [{"name": "p")" + policy_fields + "}]}";
}

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_POLICY_TEXT_HPP
