// SPDX-License-Identifier: Apache-2.0
// `policy export --to envoy`: a policy as an Envoy route configuration
// (envoy.config.route.v3.RouteConfiguration: one virtual host, one route whose RouteAction has
// retry_policy, timeout and hedge_policy) with the cluster's circuit_breakers
// (envoy.config.cluster.v3.CircuitBreakers.Thresholds.RetryBudget) beside it. The mapping is the
// Envoy importer's (import_envoy.cpp) read backwards; the table is in docs/policy.md
// ("Exporting").
#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "config/export_format.hpp"
#include "config/policy_json.hpp"
#include "stormguard/config/export.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::config {

namespace {

using namespace std::chrono_literals;
using ordered_json = nlohmann::ordered_json;
using detail::proto_seconds;

// The virtual host and cluster of the output: envoy:FILE reads the route back as HOST/ROUTE.
constexpr std::string_view k_host = "stormguard";

// Envoy's retry_on conditions for gRPC status codes (x-envoy-retry-grpc-on), by code.
constexpr std::array<std::pair<int, std::string_view>, 5> k_grpc_conditions = {{
    {1, "cancelled"},
    {4, "deadline-exceeded"},
    {8, "resource-exhausted"},
    {13, "internal"},
    {14, "unavailable"},
}};

// retry_on and retriable_status_codes for `statuses` and the gRPC `codes`: the transport
// failures stormguard always retries, then 5xx / gateway-error / retriable-4xx where they cover
// the statuses exactly, the rest as retriable-status-codes, then the gRPC conditions.
void write_conditions(const std::vector<int>& statuses, const std::optional<grpc_codes>& codes,
                      const std::string& codes_field, ordered_json& r,
                      std::vector<std::string>& warnings) {
  std::vector<std::string> on = {"connect-failure", "refused-stream", "reset"};
  std::vector<int> rest = statuses;
  const auto take = [&rest](int lo, int hi) {
    for (int s = lo; s <= hi; ++s) {
      if (std::find(rest.begin(), rest.end(), s) == rest.end()) return false;
    }
    std::erase_if(rest, [&](int s) { return s >= lo && s <= hi; });
    return true;
  };
  if (take(500, 599)) {
    on.emplace_back("5xx");
  } else if (take(502, 504)) {
    on.emplace_back("gateway-error");
  }
  if (take(409, 409)) on.emplace_back("retriable-4xx");
  if (!rest.empty()) on.emplace_back("retriable-status-codes");
  if (codes) {
    grpc_codes left = *codes;
    for (const auto& [code, condition] : k_grpc_conditions) {
      if (!codes->contains(code)) continue;
      on.emplace_back(condition);
      left = grpc_codes::from_mask(left.mask() & ~(std::uint32_t{1} << code));
    }
    if (!left.empty()) {
      warnings.push_back(codes_field + ": " + detail::code_list(left) +
                         ": Envoy's retry_on has gRPC conditions for CANCELLED, "
                         "DEADLINE_EXCEEDED, INTERNAL, RESOURCE_EXHAUSTED and UNAVAILABLE only; "
                         "not written");
    }
    if (codes->empty()) {
      warnings.push_back(codes_field +
                         ": empty: Envoy has no way to say \"no gRPC code\"; read back as "
                         "absent (the gRPC client's default, UNAVAILABLE)");
    }
  }
  std::string text;
  for (const auto& c : on) text += (text.empty() ? "" : ",") + c;
  r["retry_on"] = text;
  if (!rest.empty()) r["retriable_status_codes"] = rest;
}

void write_backoff(const backoff_options& b, ordered_json& r, std::vector<std::string>& warnings) {
  if (b.base == duration::zero()) {
    warnings.push_back("backoff.base: 0s: Envoy's base_interval must be > 0: written as 1ms");
  } else if (b.base % 1ms != duration::zero() || b.cap % 1ms != duration::zero()) {
    warnings.push_back("backoff: " + format_duration(b.base) + " to " + format_duration(b.cap) +
                       ": Envoy counts its back-off in whole milliseconds");
  }
  const duration base = std::max<duration>(b.base, 1ms);
  r["retry_back_off"] = {{"base_interval", proto_seconds(base)},
                         {"max_interval", proto_seconds(std::max(b.cap, base))}};
  if (b.multiplier != 2.0) {
    warnings.push_back("backoff.multiplier: " + stormguard::detail::format_double(b.multiplier) +
                       ": Envoy's back-off doubles (2); read back as 2");
  }
  if (b.jitter != jitter::full) {
    warnings.push_back("backoff.jitter: " + std::string(to_string(b.jitter)) +
                       ": Envoy's back-off is always full jitter; read back as full");
  }
}

// The cluster's circuit_breakers: a concurrency budget as it is, a ratio budget approximated,
// any other kind not written (Envoy's default circuit breaker then applies).
std::optional<ordered_json> circuit_breakers(const budget_options& budget,
                                             std::vector<std::string>& warnings) {
  const auto of = [](double percent, std::int64_t min_concurrency) {
    ordered_json t;
    t["priority"] = "DEFAULT";
    t["retry_budget"] = {{"budget_percent", {{"value", percent}}},
                         {"min_retry_concurrency", min_concurrency}};
    return ordered_json{{"thresholds", ordered_json::array({t})}};
  };
  if (const auto* c = std::get_if<concurrency_budget_options>(&budget)) {
    return of(c->budget_percent, c->min_retry_concurrency);
  }
  if (const auto r = detail::ratio_of(budget)) {
    const double percent = std::min(100.0, r->ratio * 100);
    warnings.push_back(
        "budget: " + detail::budget_words(budget) +
        ": Envoy has no ratio budget over a time window" +
        (std::holds_alternative<fleet_budget_options>(budget) ? " and no fleet budget" : "") +
        ": written as the cluster's retry_budget, retries in flight at most " +
        stormguard::detail::format_double(percent) +
        " % of the requests in flight (min_retry_concurrency 3, Envoy's default); window and "
        "min_retries_per_second are not expressible; read back as concurrency");
    return of(percent, 3);
  }
  warnings.push_back("budget: " + detail::budget_words(budget) +
                     ": Envoy's only retry budget is the cluster's (retries in flight): not "
                     "written, so Envoy's default circuit breaker applies (3 retries in flight, "
                     "max_retries 3); read back as concurrency 0 % with 3");
  return std::nullopt;
}

// The route's retry_policy and hedge_policy.
void write_route_policies(const policy& p, ordered_json& action,
                          std::vector<std::string>& warnings) {
  ordered_json r;
  if (p.hedging) {
    const hedging_config& h = *p.hedging;
    write_conditions(h.non_fatal_statuses.to_vector(), h.non_fatal_grpc_codes,
                     "hedging.non_fatal_grpc_codes", r, warnings);
    r["num_retries"] = h.options.max_attempts - 1;
    duration delay = h.options.delay;
    if (h.options.delay_quantile > 0) {
      warnings.push_back("hedging.delay: " + detail::format_percentile(h.options.delay_quantile) +
                         ": Envoy hedges on a fixed per_try_timeout: written as the "
                         "fallback_delay " +
                         format_duration(delay));
    }
    if (delay == duration::zero()) {
      warnings.push_back(
          "hedging.delay: 0s: Envoy hedges when a per_try_timeout fires, which "
          "must be > 0: written as 1ms");
      delay = 1ms;
    }
    r["per_try_timeout"] = proto_seconds(delay);
    if (p.attempt_timeout != duration::max()) {
      warnings.push_back("attempt_timeout: " + format_duration(p.attempt_timeout) +
                         ": with hedge_on_per_try_timeout the per_try_timeout is the hedging "
                         "delay; not written");
    }
    action["retry_policy"] = std::move(r);
    action["hedge_policy"] = {{"hedge_on_per_try_timeout", true}};
    return;
  }
  write_conditions(p.statuses.to_vector(), p.retryable_grpc_codes, "retryable_grpc_codes", r,
                   warnings);
  r["num_retries"] = p.retry.max_retries;
  if (p.attempt_timeout != duration::max()) {
    r["per_try_timeout"] = proto_seconds(p.attempt_timeout);
  }
  write_backoff(p.retry.backoff, r, warnings);
  action["retry_policy"] = std::move(r);
}

// What Envoy's router does not do that the policy does: honour Retry-After, bound it.
void retry_after_warnings(const policy& p, std::vector<std::string>& warnings) {
  const bool retries = p.retry.max_retries > 0 || p.hedging.has_value();
  const auto& statuses = p.hedging ? p.hedging->non_fatal_statuses : p.statuses;
  if (retries && (statuses.contains(429) || statuses.contains(503))) {
    warnings.push_back(
        "max_retry_after: Envoy's router does not wait for a Retry-After (only with a "
        "rate_limited_retry_back_off, which is not written): its retries of 429 and 503 go at "
        "the back-off");
  } else if (!detail::default_max_retry_after(p)) {
    warnings.push_back("max_retry_after: " + format_duration(p.retry.max_retry_after) +
                       ": Envoy's router has no such limit; read back as the default 60s");
  }
}

}  // namespace

exported_policy export_envoy(const policy& p) {
  exported_policy out;
  std::vector<std::string>& warnings = out.warnings;
  ordered_json action;
  action["cluster"] = std::string(k_host);
  // Envoy's route timeout covers every retry; "0s" disables it (no deadline).
  action["timeout"] = p.deadline == duration::max() ? "0s" : proto_seconds(p.deadline);
  write_route_policies(p, action, warnings);
  retry_after_warnings(p, warnings);
  if (p.client && p.client->name != "envoy") {
    warnings.push_back("client_profile: " + stormguard::detail::quote_for_message(p.client->name) +
                       ": the route is run by Envoy's router; read back as \"envoy\"");
  }
  const std::string host(k_host);
  if (host.size() + 1 + p.name.size() > 64) {
    warnings.push_back("name: envoy:FILE reads the route back as " +
                       stormguard::detail::quote_for_message(host + "/" + p.name) +
                       ", longer than a policy name may be (64 characters): rename the route");
  }
  ordered_json route;
  route["name"] = p.name;
  route["match"] = {{"prefix", "/"}};
  route["route"] = std::move(action);
  ordered_json vhost;
  vhost["name"] = host;
  vhost["domains"] = ordered_json::array({"*"});
  vhost["routes"] = ordered_json::array({std::move(route)});
  ordered_json doc;
  doc["name"] = host;
  doc["virtual_hosts"] = ordered_json::array({std::move(vhost)});
  if (auto breakers = circuit_breakers(p.budget, warnings)) {
    doc["circuit_breakers"] = std::move(*breakers);
  }
  out.text = detail::compact_arrays(doc.dump(2)) + "\n";
  return out;
}

}  // namespace stormguard::config
