// SPDX-License-Identifier: Apache-2.0
// `policy export --to grpc`: a policy as a gRPC service config (gRFC A6; gRPC's
// service_config.proto): one methodConfig with retryPolicy or hedgingPolicy and timeout, and
// retryThrottling. The mapping is the gRPC importer's (import.cpp) read backwards; the table is in
// docs/policy.md ("Exporting").
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "config/export_format.hpp"
#include "config/policy_json.hpp"
#include "stormguard/config/export.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::config {

namespace {

using ordered_json = nlohmann::ordered_json;
using detail::code_list;
using detail::proto_seconds;
using detail::status_list;

constexpr int k_grpc_max_attempts = 5;  // gRFC A6: a larger maxAttempts is treated as 5

// A protobuf identifier: a letter or '_', then letters, digits or '_'.
bool is_identifier(std::string_view s) noexcept {
  const auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (s.empty() || !letter(s.front())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

// A service's full name as gRPC writes it: "package.Service", identifiers joined by '.', at least
// two of them (a route's host such as "api" or "backend" is not one).
bool is_service_name(std::string_view s) noexcept {
  std::size_t parts = 0;
  while (true) {
    const auto dot = s.find('.');
    if (!is_identifier(s.substr(0, dot))) return false;
    ++parts;
    if (dot == std::string_view::npos) return parts >= 2;
    s.remove_prefix(dot + 1);
  }
}

// methodConfig[0].name: the policy's name when it is a gRPC name ("package.Service/Method",
// "package.Service", "default"), else [{}] (every method of the channel), with a warning.
ordered_json method_names(const policy& p, std::vector<std::string>& warnings) {
  ordered_json name = ordered_json::object();
  const std::string_view full = p.name;
  const auto slash = full.find('/');
  const std::string_view service = full.substr(0, slash);
  const std::string_view method =
      slash == std::string_view::npos ? std::string_view{} : full.substr(slash + 1);
  if (slash != std::string_view::npos && is_service_name(service) && is_identifier(method)) {
    name["service"] = std::string(service);
    name["method"] = std::string(method);
  } else if (slash == std::string_view::npos && is_service_name(service)) {
    name["service"] = std::string(service);
  } else if (p.name != "default") {
    warnings.push_back("name: " + stormguard::detail::quote_for_message(p.name) +
                       " is not a gRPC service or method name (\"package.Service\" or "
                       "\"package.Service/Method\"): the methodConfig applies to every method "
                       "(name [{}]), and reads back as the policy \"default\"; write your "
                       "service's name there to narrow it");
  }
  return ordered_json::array({name});
}

// The codes written for `named` (the policy's gRPC codes), or, when it names none, those that
// the HTTP statuses stand for: UNAVAILABLE (the code of every transport failure too, which
// stormguard always retries).
grpc_codes codes_for(const std::optional<grpc_codes>& named) {
  return named ? *named : default_retryable_grpc_codes();
}

// A warning when the HTTP statuses do not come back from the codes (the importer maps
// UNAVAILABLE to 429, 502, 503, 504 and nothing else).
void check_statuses(const std::string& field, const retryable_statuses& statuses,
                    const grpc_codes& codes, std::vector<std::string>& warnings) {
  const retryable_statuses implied = detail::statuses_implied_by(codes);
  if (statuses == implied) return;
  warnings.push_back(field + ": the HTTP statuses " + status_list(statuses.to_vector()) +
                     " are not in a service config, which names gRPC codes (" + code_list(codes) +
                     "): read back as " + status_list(implied.to_vector()) +
                     " (UNAVAILABLE stands for 429, 502, 503, 504)");
}

ordered_json retry_policy_json(const policy& p, const grpc_codes& codes,
                               std::vector<std::string>& warnings) {
  const backoff_options& b = p.retry.backoff;
  ordered_json r;
  int attempts = p.retry.max_retries + 1;
  if (attempts > k_grpc_max_attempts) {
    warnings.push_back("retries: " + std::to_string(p.retry.max_retries) +
                       ": gRPC makes at most 5 attempts (gRFC A6): maxAttempts 5, 4 retries");
    attempts = k_grpc_max_attempts;
  }
  r["maxAttempts"] = attempts;
  const duration tiny(1);
  if (b.base == duration::zero()) {
    warnings.push_back(
        "backoff.base: 0s: gRPC's initialBackoff must be > 0: written as 1ns (0.000000001s)");
  }
  r["initialBackoff"] = proto_seconds(std::max(b.base, tiny));
  r["maxBackoff"] = proto_seconds(std::max(b.cap, tiny));
  r["backoffMultiplier"] = b.multiplier;
  if (b.jitter != jitter::full) {
    warnings.push_back("backoff.jitter: " + std::string(to_string(b.jitter)) +
                       ": gRPC's backoff is always full jitter (random(0, current backoff), "
                       "gRFC A6); read back as full");
  }
  r["retryableStatusCodes"] = detail::grpc_code_names_json(codes);
  if (p.attempt_timeout != duration::max()) {
    r["perAttemptRecvTimeout"] = proto_seconds(p.attempt_timeout);
  }
  return r;
}

// The method config's retryPolicy, or nothing (with a warning for what then acts no more) when
// the policy makes one attempt. Without retries the backoff, the statuses and the codes do not act,
// and are not compared when read back.
void write_retries(const policy& p, ordered_json& m, std::vector<std::string>& warnings) {
  const grpc_codes codes = codes_for(p.retryable_grpc_codes);
  if (p.retry.max_retries > 0 && codes.empty()) {
    warnings.push_back(
        "retryable_grpc_codes: empty: a retryPolicy needs at least one code, so "
        "none is written and gRPC makes one attempt; read back with 0 retries");
  }
  if (p.retry.max_retries == 0 || codes.empty()) {
    if (p.attempt_timeout != duration::max()) {
      warnings.push_back("attempt_timeout: " + format_duration(p.attempt_timeout) +
                         ": perAttemptRecvTimeout lives in a retryPolicy, and none is written "
                         "(one attempt); the timeout (deadline) still bounds the call");
    }
    return;
  }
  check_statuses("retryable_statuses", p.statuses, codes, warnings);
  m["retryPolicy"] = retry_policy_json(p, codes, warnings);
}

void write_hedging(const policy& p, ordered_json& m, std::vector<std::string>& warnings) {
  const hedging_config& h = *p.hedging;
  ordered_json hp;
  hp["maxAttempts"] = h.options.max_attempts;
  if (h.options.delay_quantile > 0) {
    warnings.push_back("hedging.delay: " + detail::format_percentile(h.options.delay_quantile) +
                       ": gRPC's hedgingDelay is a fixed duration: written as the fallback_delay " +
                       format_duration(h.options.delay));
  }
  hp["hedgingDelay"] = proto_seconds(h.options.delay);
  const grpc_codes codes = h.non_fatal_grpc_codes ? *h.non_fatal_grpc_codes
                                                  : (h.non_fatal_statuses.to_vector().empty()
                                                         ? grpc_codes{}
                                                         : default_retryable_grpc_codes());
  check_statuses("hedging.non_fatal_statuses", h.non_fatal_statuses, codes, warnings);
  if (!codes.empty()) hp["nonFatalStatusCodes"] = detail::grpc_code_names_json(codes);
  m["hedgingPolicy"] = std::move(hp);
  if (p.attempt_timeout != duration::max()) {
    warnings.push_back("attempt_timeout: " + format_duration(p.attempt_timeout) +
                       ": a hedgingPolicy has no per-attempt timeout; not written");
  }
}

// retryThrottling: a token_bucket budget as it is; a ratio budget approximated (with a warning);
// any other kind not written (with a warning).
void write_throttling(const policy& p, ordered_json& doc, std::vector<std::string>& warnings) {
  if (std::holds_alternative<no_budget>(p.budget)) return;
  if (const auto* t = std::get_if<token_bucket_throttle_options>(&p.budget)) {
    const double tokens = std::max(1.0, std::round(t->max_tokens));
    if (tokens != t->max_tokens) {
      warnings.push_back("budget.max_tokens: " + stormguard::detail::format_double(t->max_tokens) +
                         ": retryThrottling.maxTokens is a whole number: written as " +
                         stormguard::detail::format_double(tokens));
    }
    doc["retryThrottling"] = {{"maxTokens", static_cast<int>(tokens)},
                              {"tokenRatio", t->token_ratio}};
    return;
  }
  if (const auto r = detail::ratio_of(p.budget)) {
    const double ratio = std::clamp(std::round(r->ratio * 1000) / 1000, 0.001, 1000.0);
    doc["retryThrottling"] = {{"maxTokens", 10}, {"tokenRatio", ratio}};
    warnings.push_back(
        "budget: " + detail::budget_words(p.budget) +
        ": gRPC has no ratio budget; written as retryThrottling, its token bucket (maxTokens 10, "
        "tokenRatio " +
        stormguard::detail::format_double(ratio) +
        ": a failure costs a token, a success gives back tokenRatio, no retry at half the "
        "tokens or below), per client and channel target; window, min_retries_per_second" +
        (std::holds_alternative<fleet_budget_options>(p.budget) ? " and the fleet" : "") +
        " are not expressible; read back as token_bucket");
    return;
  }
  warnings.push_back("budget: " + detail::budget_words(p.budget) +
                     ": a service config has only retryThrottling (a token bucket): not written, "
                     "so gRPC's retries are not throttled; read back as none");
}

}  // namespace

exported_policy export_grpc(const policy& p) {
  exported_policy out;
  std::vector<std::string>& warnings = out.warnings;
  ordered_json m;
  m["name"] = method_names(p, warnings);
  if (p.deadline != duration::max()) m["timeout"] = proto_seconds(p.deadline);
  if (p.hedging) {
    write_hedging(p, m, warnings);
  } else {
    write_retries(p, m, warnings);
  }
  if (!detail::default_max_retry_after(p)) {
    warnings.push_back("max_retry_after: " + format_duration(p.retry.max_retry_after) +
                       ": gRPC waits for any grpc-retry-pushback-ms, without a limit; read back "
                       "as the default 60s");
  }
  if (p.client && p.client->name != "grpc") {
    warnings.push_back("client_profile: " + stormguard::detail::quote_for_message(p.client->name) +
                       ": a service config is run by gRPC's own client; read back as \"grpc\"");
  }
  ordered_json doc;
  doc["methodConfig"] = ordered_json::array({std::move(m)});
  write_throttling(p, doc, warnings);
  out.text = detail::compact_arrays(doc.dump(2)) + "\n";
  return out;
}

}  // namespace stormguard::config
