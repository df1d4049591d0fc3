// SPDX-License-Identifier: Apache-2.0
/// \file
/// A stormguard policy written as the configuration of the clients and proxies teams already
/// run — the reverse of the importers (policy.hpp): an Envoy route's `retry_policy` with the
/// cluster's retry budget, a gRPC service config (gRFC A6), or a Linkerd 2 ServiceProfile's
/// `retryBudget`. What the target cannot express is not silently dropped: each loss is one
/// warning naming the policy's field.
///
/// \code{.cpp}
///  auto policies = stormguard::config::load_policies("policies/recommended.json");
///  const auto out = stormguard::config::export_policy(policies->front(),
///                                                     stormguard::config::export_target::grpc);
///  std::cout << out.text;                                        // a service config (JSON)
///  for (const auto& w : out.warnings) std::cerr << "warning: " << w << '\n';
/// \endcode
///
/// The mappings, field by field, with their sources (Envoy's route.v3.RetryPolicy and
/// cluster.v3.CircuitBreakers.Thresholds.RetryBudget, gRFC A6, Linkerd's ServiceProfile), are in
/// docs/policy.md ("Exporting"). For Envoy and gRPC the importer reads the output back:
/// parse_policies(export_policy(p, t).text, t's format) gives `p` again in every field the
/// target holds (tested for every built-in policy); every field that does not come back has a
/// warning.
///
/// Pure functions of a valid policy (one read by this library): thread-safe, no state, no I/O;
/// they throw nothing but std::bad_alloc.
#ifndef STORMGUARD_CONFIG_EXPORT_HPP
#define STORMGUARD_CONFIG_EXPORT_HPP

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/config/policy.hpp"
#include "stormguard/export.hpp"

namespace stormguard::config {

/// What a policy is exported as.
enum class export_target {
  envoy,    ///< an Envoy RouteConfiguration (JSON) with the cluster's circuit_breakers beside it
  grpc,     ///< a gRPC service config (JSON, gRFC A6): methodConfig, retryThrottling
  linkerd,  ///< a Linkerd 2 ServiceProfile (YAML, linkerd.io/v1alpha2): routes, retryBudget
};

/// The target's name on the command line: "envoy", "grpc" or "linkerd".
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(export_target target) noexcept;

/// The target named `name` (exactly "envoy", "grpc" or "linkerd"), or nullopt.
[[nodiscard]] STORMGUARD_EXPORT std::optional<export_target> parse_export_target(
    std::string_view name) noexcept;

/// A policy in a target's format.
struct exported_policy {
  /// The configuration, ending with a newline: JSON for envoy and grpc, YAML for linkerd.
  std::string text;
  /// What the target cannot express, one sentence each, starting with the policy's field path
  /// ("budget: ...", "backoff.jitter: ..."); empty when the target holds the whole policy.
  std::vector<std::string> warnings;
};

/// `p` as an Envoy route configuration: one virtual host "stormguard" with one route named after
/// the policy (route.retry_policy, route.timeout, route.hedge_policy) and, beside it, the
/// cluster's circuit_breakers.thresholds[0].retry_budget. envoy:FILE reads it back as the policy
/// "stormguard/NAME".
[[nodiscard]] STORMGUARD_EXPORT exported_policy export_envoy(const policy& p);

/// `p` as a gRPC service config: one methodConfig (retryPolicy or hedgingPolicy, timeout) and
/// retryThrottling for a token_bucket (or ratio) budget. The entry's name is the policy's when
/// that is a gRPC name ("service/method", a dotted service, "default"), else [{}] (every method),
/// with a warning.
[[nodiscard]] STORMGUARD_EXPORT exported_policy export_grpc(const policy& p);

/// `p` as a Linkerd 2 ServiceProfile (YAML): a route matching every path, retryable when the
/// policy retries, its timeout the policy's deadline, and spec.retryBudget from a ratio budget.
/// metadata.name is a placeholder FQDN to replace (a comment in the output says so).
[[nodiscard]] STORMGUARD_EXPORT exported_policy export_linkerd(const policy& p);

/// export_envoy, export_grpc or export_linkerd, as `target` says.
[[nodiscard]] STORMGUARD_EXPORT exported_policy export_policy(const policy& p,
                                                              export_target target);

}  // namespace stormguard::config

#endif  // STORMGUARD_CONFIG_EXPORT_HPP
