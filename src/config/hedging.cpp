// SPDX-License-Identifier: Apache-2.0
// The `hedging` object of a policy (stormguard/config/hedging.hpp): read and written here, called
// from read_policy and policy_json (policy.cpp).
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <system_error>

#include "config/policy_json.hpp"
#include "detail/strict_json.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::config::detail {

namespace sj = stormguard::detail::strict_json;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

constexpr std::chrono::hours k_max_delay{1};

// "p95", "p99.9": the percentile as a fraction in (0, 1); nullopt when `text` is not "p<number>"
// with the number in (0, 100).
std::optional<double> parse_percentile(const std::string& text) {
  if (text.size() < 2 || text[0] != 'p') return std::nullopt;
  double value = 0.0;
  const char* first = text.data() + 1;
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc{} || end != last || !(value > 0.0 && value < 100.0)) return std::nullopt;
  return value / 100.0;
}

}  // namespace

std::string format_percentile(double q) {
  return "p" + stormguard::detail::format_double(std::round(q * 1e6) / 1e4);
}

void read_hedging(const json& value, const sj::object_reader& policy_reader, policy& p) {
  const std::string path = policy_reader.field("hedging");
  sj::object_reader h(value, path,
                      {"max_attempts", "delay", "fallback_delay", "non_fatal_statuses",
                       "non_fatal_grpc_codes", "budget"});
  const char* const both = "a policy has retries or hedging, not both (gRFC A6)";
  if (policy_reader.has("retries") && p.retry.max_retries != 0) {
    sj::fail(policy_reader.field("retries"), std::string("must be 0 with hedging: ") + both +
                                                 ", got " + std::to_string(p.retry.max_retries));
  }
  if (policy_reader.has("attempts") && p.retry.max_retries != 0) {
    sj::fail(policy_reader.field("attempts"), std::string("must be 1 with hedging: ") + both +
                                                  " (give hedging.max_attempts), got " +
                                                  std::to_string(p.retry.max_retries + 1));
  }
  for (const char* unused : {"backoff", "retryable_statuses", "retryable_grpc_codes"}) {
    if (policy_reader.has(unused)) {
      sj::fail(policy_reader.field(unused),
               "not with hedging: copies go at hedging.delay and hedging.non_fatal_statuses "
               "(hedging.non_fatal_grpc_codes over gRPC) says which answers send the next one");
    }
  }
  p.retry.max_retries = 0;
  hedging_config c;
  if (h.has("max_attempts"))
    c.options.max_attempts = static_cast<int>(h.integer("max_attempts", 2, 5));
  if (h.has("delay")) {
    const json& d = h.required("delay", "a duration or \"pNN\"");
    const auto q = d.is_string() ? parse_percentile(d.get<std::string>()) : std::nullopt;
    if (q) {
      c.options.delay_quantile = *q;
    } else if (d.is_string() && !d.get<std::string>().empty() && d.get<std::string>()[0] == 'p') {
      sj::fail(
          h.field("delay"),
          "must be a percentile \"pNN\" with NN in (0, 100), such as \"p95\", got " + sj::quote(d));
    } else {
      c.options.delay = h.time_between("delay", duration::zero(), k_max_delay);
    }
  }
  if (h.has("fallback_delay")) {
    c.options.delay = h.time_between("fallback_delay", duration::zero(), k_max_delay);
  }
  if (h.has("non_fatal_statuses")) {
    c.non_fatal_statuses =
        read_status_list(value["non_fatal_statuses"], h.field("non_fatal_statuses"));
  }
  if (h.has("non_fatal_grpc_codes")) {
    c.non_fatal_grpc_codes =
        read_grpc_code_list(value["non_fatal_grpc_codes"], h.field("non_fatal_grpc_codes"));
  }
  if (h.has("budget")) {
    if (policy_reader.has("budget")) {
      sj::fail(h.field("budget"),
               "give the budget once: here or as the policy's budget (it is the same budget)");
    }
    p.budget = read_budget_value(value["budget"], h.field("budget"));
  }
  c.options.max_retry_after = p.retry.max_retry_after;
  try {
    (void)hedging_policy(c.options);  // the library's own validation, as a backstop
  } catch (const std::invalid_argument& e) {
    sj::fail(path, e.what());
  }
  p.hedging = c;
}

void write_hedging(const policy& p, ordered_json& j) {
  if (!p.hedging) return;
  const hedging_options& o = p.hedging->options;
  ordered_json h;
  h["max_attempts"] = o.max_attempts;
  if (o.delay_quantile > 0.0) {
    h["delay"] = format_percentile(o.delay_quantile);
    h["fallback_delay"] = format_duration(o.delay);
  } else {
    h["delay"] = format_duration(o.delay);
  }
  h["non_fatal_statuses"] = p.hedging->non_fatal_statuses.to_vector();
  if (p.hedging->non_fatal_grpc_codes) {
    h["non_fatal_grpc_codes"] = grpc_code_names_json(*p.hedging->non_fatal_grpc_codes);
  }
  if (j.contains("budget")) {
    h["budget"] = j["budget"];
    j.erase("budget");
  }
  j.erase("backoff");
  j.erase("retryable_statuses");
  j.erase("retryable_grpc_codes");
  j["hedging"] = std::move(h);
}

}  // namespace stormguard::config::detail

namespace stormguard::config::detail {

void apply_envoy_hedge_policy(const json& hedge, const std::string& path, policy& p) {
  sj::object_reader r(
      hedge, path, {"initial_requests", "additional_request_chance", "hedge_on_per_try_timeout"});
  for (const char* unimplemented : {"initial_requests", "additional_request_chance"}) {
    if (r.has(unimplemented)) {
      p.warnings.push_back(r.field(unimplemented) +
                           ": not implemented by Envoy itself (envoy #20036): ignored");
    }
  }
  bool on_timeout = false;
  if (r.has("hedge_on_per_try_timeout")) {
    const json& v = hedge["hedge_on_per_try_timeout"];
    if (!v.is_boolean())
      sj::fail(r.field("hedge_on_per_try_timeout"), "must be a boolean, got " + sj::quote(v));
    on_timeout = v.get<bool>();
  }
  if (!on_timeout) {
    p.warnings.push_back(path +
                         ": without hedge_on_per_try_timeout Envoy does not hedge: no hedging");
    return;
  }
  if (p.attempt_timeout == duration::max()) {
    p.warnings.push_back(r.field("hedge_on_per_try_timeout") +
                         ": the retry_policy has no per_try_timeout, so Envoy never hedges: no "
                         "hedging");
    return;
  }
  int attempts = p.retry.max_retries + 1;
  if (attempts < 2) {
    p.warnings.push_back(r.field("hedge_on_per_try_timeout") +
                         ": num_retries is 0, so Envoy sends no second request: no hedging");
    return;
  }
  if (attempts > 5) {
    p.warnings.push_back(r.field("hedge_on_per_try_timeout") + ": num_retries " +
                         std::to_string(attempts - 1) + " allows " + std::to_string(attempts) +
                         " requests; hedging.max_attempts is capped at 5 (gRFC A6)");
    attempts = 5;
  }
  // Envoy sends the next request when the per-try timeout fires, keeps the first in flight and
  // takes the first good answer; a retriable status sends the next one at once.
  hedging_config c;
  c.options.max_attempts = attempts;
  c.options.delay = p.attempt_timeout;
  c.options.max_retry_after = p.retry.max_retry_after;
  c.non_fatal_statuses = p.statuses;
  c.non_fatal_grpc_codes = p.retryable_grpc_codes;
  p.hedging = c;
  p.retryable_grpc_codes.reset();
  p.retry.max_retries = 0;
  p.retry.backoff = backoff_options{};
  p.statuses = retryable_statuses{};
  p.attempt_timeout = duration::max();
}

}  // namespace stormguard::config::detail
