// SPDX-License-Identifier: Apache-2.0
// `policy export --to linkerd`: a policy as a Linkerd 2 ServiceProfile (linkerd.io/v1alpha2):
// one route matching every path, retryable when the policy retries, its timeout the policy's
// deadline, the HTTP statuses below 500 it retries as failure response classes, and
// spec.retryBudget from a ratio budget. YAML, as Linkerd's documentation and `linkerd profile`
// write it, with comments a JSON file could not carry. The table is in docs/policy.md
// ("Exporting").
#include <string>
#include <variant>
#include <vector>

#include "config/export_format.hpp"
#include "stormguard/config/export.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::config {

namespace {

using detail::go_duration;

// A YAML double-quoted scalar: JSON's escaping is valid YAML.
std::string yaml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// What Linkerd's retries cannot say of the policy's retries.
void retry_warnings(const policy& p, std::vector<std::string>& warnings) {
  if (p.retry.max_retries == 0) return;
  warnings.push_back("retries: " + std::to_string(p.retry.max_retries) +
                     ": a ServiceProfile has no retry count: the retryBudget alone bounds the "
                     "retries of a retryable route");
  warnings.push_back("backoff: Linkerd retries at once, without a back-off (base " +
                     format_duration(p.retry.backoff.base) + ", cap " +
                     format_duration(p.retry.backoff.cap) + " not expressible)");
  bool all_5xx = true;
  for (int s = 500; s <= 599; ++s) all_5xx = all_5xx && p.statuses.contains(s);
  if (!all_5xx) {
    warnings.push_back(
        "retryable_statuses: Linkerd counts every 5xx as a failure and retries "
        "it on a retryable route, not only " +
        detail::status_list(p.statuses.to_vector()));
  }
  if (p.retryable_grpc_codes) {
    warnings.push_back(
        "retryable_grpc_codes: Linkerd retries a gRPC response whatever its "
        "failure code on a retryable route, not only " +
        detail::code_list(*p.retryable_grpc_codes));
  }
  if (p.statuses.contains(429) || p.statuses.contains(503)) {
    warnings.push_back("max_retry_after: Linkerd does not wait for a Retry-After");
  }
}

std::string route_yaml(const policy& p, std::vector<std::string>& warnings) {
  const bool retryable = p.retry.max_retries > 0;
  std::string y = "  routes:\n";
  y += "  - name: " + yaml_quote("every request (stormguard policy " + p.name + ")") + "\n";
  y += "    condition:\n      pathRegex: \".*\"\n";
  // Statuses below 500 that the policy retries are failures for Linkerd only when a response
  // class says so (5xx always are).
  std::string classes;
  for (const int s : p.statuses.to_vector()) {
    if (!retryable || s >= 500) continue;
    classes += "    - condition:\n        status:\n          min: " + std::to_string(s) +
               "\n          max: " + std::to_string(s) + "\n      isFailure: true\n";
  }
  if (!classes.empty()) y += "    responseClasses:\n" + classes;
  if (retryable) {
    y += "    # Linkerd retries only the requests of routes marked retryable: keep this for\n"
         "    # idempotent requests only (or split the route by method).\n";
  }
  y += std::string("    isRetryable: ") + (retryable ? "true" : "false") + "\n";
  if (p.deadline != duration::max()) {
    y += "    timeout: " + go_duration(p.deadline) + "\n";
  } else {
    warnings.push_back("deadline: none: a route without a timeout gets Linkerd's default, 10s");
  }
  return y;
}

std::string budget_yaml(const policy& p, std::vector<std::string>& warnings) {
  const auto r = detail::ratio_of(p.budget);
  if (!r) {
    warnings.push_back("budget: " + detail::budget_words(p.budget) +
                       ": a ServiceProfile has only retryBudget (a ratio budget): not written, "
                       "so Linkerd's default (retryRatio 0.2, minRetriesPerSecond 10, ttl 10s) "
                       "applies");
    return "";
  }
  if (std::holds_alternative<fleet_budget_options>(p.budget)) {
    warnings.push_back(
        "budget.fleet: Linkerd's retryBudget is per proxy, not one for the fleet; "
        "its settings are written as they are");
  }
  return "  retryBudget:\n    retryRatio: " + stormguard::detail::format_double(r->ratio) +
         "\n    minRetriesPerSecond: " + std::to_string(r->min_retries_per_second) +
         "\n    ttl: " + go_duration(r->window) + "\n";
}

}  // namespace

exported_policy export_linkerd(const policy& p) {
  exported_policy out;
  std::vector<std::string>& warnings = out.warnings;
  if (p.hedging) {
    warnings.push_back(
        "hedging: Linkerd 2 does not hedge: the route is not retryable and sends "
        "one request");
  }
  retry_warnings(p, warnings);
  if (p.attempt_timeout != duration::max()) {
    warnings.push_back("attempt_timeout: " + format_duration(p.attempt_timeout) +
                       ": a ServiceProfile route has one timeout, for the request with its "
                       "retries (the policy's deadline)");
  }
  std::string y =
      "# A Linkerd 2 ServiceProfile written by `stormguard policy export --to linkerd`\n"
      "# from the policy " +
      yaml_quote(p.name) +
      ".\n# metadata.name must be your service's FQDN "
      "(SERVICE.NAMESPACE.svc.cluster.local) and\n"
      "# metadata.namespace its namespace: replace the placeholders.\n";
  y += "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata:\n";
  y += "  name: my-service.my-namespace.svc.cluster.local\n  namespace: my-namespace\n";
  y += "spec:\n" + route_yaml(p, warnings) + budget_yaml(p, warnings);
  out.text = std::move(y);
  return out;
}

}  // namespace stormguard::config
