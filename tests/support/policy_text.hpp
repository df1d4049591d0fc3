// SPDX-License-Identifier: Apache-2.0
// Test-only helpers for the policy file tests: parse a policy file's text, catch the policy_error
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

/// The policies of `text` in format `f` (config::parse_policies; throws its policy_error).
inline std::vector<config::policy> parse(
    const std::string& text, config::policy_format f = config::policy_format::stormguard) {
  return config::parse_policies(text, f);
}

/// The policy_error of parsing `text`: its field and message. A test failure when it parses.
inline config::policy_error error_of(const std::string& text,
                                     config::policy_format f = config::policy_format::stormguard) {
  try {
    (void)config::parse_policies(text, f);
  } catch (const config::policy_error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << text;
  return config::policy_error("", "");
}

/// A policy file with one policy named "p" and `policy_fields` (", \"retries\": 2", ...).
inline std::string one(const std::string& policy_fields) {
  return R"({"policies": [{"name": "p")" + policy_fields + "}]}";
}

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_POLICY_TEXT_HPP
