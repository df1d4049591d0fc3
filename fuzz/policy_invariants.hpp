// SPDX-License-Identifier: Apache-2.0
// The invariants the policy parser keeps for every input (fuzz/policy_fuzz.cpp; the unit test
// PolicyCorpus.EveryCorpusFileKeepsTheInvariants checks every file of fuzz/corpus/policy):
//  - parse_policies returns policies or a policy_error: no crash, no sanitizer report, no
//    exception (std::bad_alloc aside), no hang;
//  - what it returns is never empty, and its normalized form (to_json) parses back, in
//    stormguard's format, to the same policies (importer warnings aside).
// The first byte of an input chooses the format: 'g' a gRPC service config, 'e' an Envoy file,
// anything else stormguard's own; the rest is the file's text.
#ifndef STORMGUARD_FUZZ_POLICY_INVARIANTS_HPP
#define STORMGUARD_FUZZ_POLICY_INVARIANTS_HPP

#include <string>
#include <string_view>
#include <vector>

#include "stormguard/config/policy.hpp"

namespace stormguard::fuzz {

/// "" when `input` keeps the invariants, else what went wrong.
inline std::string check_policy_invariants(std::string_view input) {
  namespace config = stormguard::config;
  config::policy_format format = config::policy_format::stormguard;
  if (!input.empty() && input.front() == 'g') format = config::policy_format::grpc;
  if (!input.empty() && input.front() == 'e') format = config::policy_format::envoy;
  if (!input.empty()) input.remove_prefix(1);
  auto parsed = config::parse_policies(input, format);
  if (!parsed) return "";
  std::vector<config::policy> policies = *std::move(parsed);
  if (policies.empty()) return "parse_policies returned no policy";
  for (auto& p : policies) p.warnings.clear();
  const std::string normalized = config::to_json(policies);
  const auto again = config::parse_policies(normalized);
  if (!again) {
    return "the normalized policies are rejected: " + again.error().message + "\n" + normalized;
  }
  if (*again != policies) return "the normalized policies parse back differently:\n" + normalized;
  return "";
}

}  // namespace stormguard::fuzz

#endif  // STORMGUARD_FUZZ_POLICY_INVARIANTS_HPP
