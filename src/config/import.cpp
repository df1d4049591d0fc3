// SPDX-License-Identifier: Apache-2.0
// The gRPC importer: a gRPC service config (gRFC A6) mapped onto stormguard policies. The
// mapping table, and what cannot be mapped (reported in policy::warnings), are in docs/policy.md.
// The Envoy importer is import_envoy.cpp; the checks both share are checks.cpp.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <utility>

#include "config/policy_json.hpp"  // nlohmann::json, std::optional, std::string, std::vector
#include "detail/strict_json.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::config::detail {

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace sj = stormguard::detail::strict_json;

constexpr duration k_max_interval = 1h;

// ---------------------------------------------------------------------------------------------
// gRPC service config (gRFC A6 "gRPC Retry Design"; gRPC's service_config.proto)
// ---------------------------------------------------------------------------------------------

// The names of one methodConfig entry, one per element of its `name` list: "service/method",
// "service" (every method of the service without an entry of its own), or "default" for the
// entry that applies to every method ({} or no name).
std::vector<std::string> grpc_names(const json& entry, const std::string& path) {
  const auto it = entry.find("name");
  if (it == entry.end()) return {"default"};
  if (!it->is_array())
    sj::fail(path + ".name", "must be an array of {service, method}, got " + sj::quote(*it));
  if (it->empty()) return {"default"};
  if (it->size() > 1000) sj::fail(path + ".name", "more than 1000 names");
  std::vector<std::string> names;
  for (std::size_t i = 0; i < it->size(); ++i) {
    sj::object_reader n((*it)[i], sj::index_path(path + ".name", i), {"service", "method"});
    const std::string service = n.has("service") ? n.string("service") : "";
    const std::string method = n.has("method") ? n.string("method") : "";
    if (!method.empty() && service.empty()) {
      sj::fail(n.field("service"), "is empty while method is " +
                                       stormguard::detail::quote_for_message(method) +
                                       " (a method belongs to a service)");
    }
    std::string name = service.empty()  ? "default"
                       : method.empty() ? service
                                        : service + "/" + method;
    if (std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(std::move(name));
  }
  return names;
}

// retryThrottling (gRFC A6) as a token_bucket_throttle; no_budget when absent.
budget_options read_grpc_throttling(const sj::object_reader& top, const json& doc) {
  if (!top.has("retryThrottling")) return no_budget{};
  sj::object_reader t(doc["retryThrottling"], "retryThrottling", {"maxTokens", "tokenRatio"});
  token_bucket_throttle_options o;
  o.max_tokens = static_cast<double>(t.integer("maxTokens", 1, 1000));
  o.token_ratio = t.number_between("tokenRatio", 0.001, 1000);
  try {
    token_bucket_throttle check(o);
  } catch (const std::invalid_argument& e) {
    sj::fail("retryThrottling.tokenRatio", std::string(e.what()));
  }
  return o;
}

// What an unmapped gRPC code corresponds to in gRPC's HTTP-to-gRPC status table
// (doc/http-grpc-status-mapping.md): 400 INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED,
// 404 UNIMPLEMENTED, 429/502/503/504 UNAVAILABLE, every other status UNKNOWN.
std::string grpc_code_warning(int code, std::string_view kept_in) {
  const std::string name(grpc_code_name(code));
  const std::string kept = ": kept in " + std::string(kept_in) +
                           " (the gRPC client retries it); for the HTTP executors and the "
                           "simulator ";
  const std::string not_retried =
      ", which stormguard does not retry over HTTP (the request would fail the same way again): "
      "not mapped to an HTTP status";
  switch (code) {
    case 13:  // INTERNAL
      return name + kept + "it corresponds to HTTP 400 in gRPC's HTTP-to-gRPC status table" +
             not_retried;
    case 2:  // UNKNOWN
      return name + kept +
             "it corresponds to every HTTP status without a code of its own in gRPC's "
             "HTTP-to-gRPC status table (any status but 400, 401, 403, 404, 429, 502, 503, 504)" +
             not_retried;
    case 16:  // UNAUTHENTICATED
      return name + kept + "it corresponds to HTTP 401 in gRPC's HTTP-to-gRPC status table" +
             not_retried;
    case 7:  // PERMISSION_DENIED
      return name + kept + "it corresponds to HTTP 403 in gRPC's HTTP-to-gRPC status table" +
             not_retried;
    case 12:  // UNIMPLEMENTED
      return name + kept + "it corresponds to HTTP 404 in gRPC's HTTP-to-gRPC status table" +
             not_retried;
    default:
      return name + kept +
             "it has no HTTP status in gRPC's HTTP-to-gRPC status table (UNAVAILABLE is the "
             "retryable code that does: 429, 502, 503, 504): not mapped to an HTTP status";
  }
}

// retryPolicy.retryableStatusCodes (or, with `hedging`, hedgingPolicy.nonFatalStatusCodes, which
// may be empty): every code is kept for the gRPC executors (p.retryable_grpc_codes, or the
// hedging's non_fatal_grpc_codes); for the HTTP executors UNAVAILABLE maps to the statuses 429,
// 502, 503, 504 and every other code is reported (grpc_code_warning) and not mapped.
void read_grpc_status_codes(const sj::object_reader& r, policy& p,
                            std::string_view key = "retryableStatusCodes",
                            hedging_config* hedging = nullptr) {
  const json& codes = r.required(key, "a non-empty array of gRPC status codes");
  if (!codes.is_array() || (codes.empty() && hedging == nullptr)) {
    sj::fail(r.field(key),
             "must be a non-empty array of gRPC status codes (such as \"UNAVAILABLE\"), got " +
                 sj::quote(codes));
  }
  const grpc_codes read = read_grpc_code_list(codes, r.field(key), /*any_case=*/true);
  const std::string kept_in =
      hedging != nullptr ? "hedging.non_fatal_grpc_codes" : "retryable_grpc_codes";
  // Warnings in the file's order, naming the element as written.
  for (std::size_t c = 0; c < codes.size(); ++c) {
    int code = 0;
    if (codes[c].is_string()) {
      std::string name = codes[c].get<std::string>();
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
      code = grpc_code_of(name).value_or(0);
    } else {
      code = codes[c].get<int>();
    }
    if (code != k_grpc_unavailable) {
      p.warnings.push_back(sj::index_path(r.field(key), c) + ": " +
                           grpc_code_warning(code, kept_in));
    }
  }
  if (hedging != nullptr) {
    hedging->non_fatal_grpc_codes = read;
    if (read.contains(k_grpc_unavailable)) hedging->non_fatal_statuses = retryable_statuses{};
  } else {
    p.retryable_grpc_codes = read;
    if (read.contains(k_grpc_unavailable)) p.statuses = retryable_statuses{};  // 429, 502-504
  }
}

// One methodConfig's hedgingPolicy (gRFC A6): maxAttempts (capped at 5, as gRPC does),
// hedgingDelay (default 0: every copy at once), nonFatalStatusCodes.
void read_grpc_hedging_policy(const json& hedging_policy, const std::string& hp, policy& p) {
  sj::object_reader r(hedging_policy, hp, {"maxAttempts", "hedgingDelay", "nonFatalStatusCodes"});
  std::int64_t attempts = proto_integer(r, "maxAttempts", 2, 1'000'000);
  if (attempts > 5) {
    p.warnings.push_back(r.field("maxAttempts") + ": " + std::to_string(attempts) +
                         " is above gRPC's limit of 5 attempts: capped at 5 (gRFC A6)");
    attempts = 5;
  }
  hedging_config c;
  c.options.max_attempts = static_cast<int>(attempts);
  c.options.delay = duration::zero();
  if (r.has("hedgingDelay")) {
    c.options.delay = proto_duration(r, "hedgingDelay", k_max_interval, true);  // 0: all at once
  }
  if (r.has("nonFatalStatusCodes")) {
    read_grpc_status_codes(r, p, "nonFatalStatusCodes", &c);
  }
  c.options.max_retry_after = p.retry.max_retry_after;
  p.hedging = c;
  p.statuses = retryable_statuses{};  // unused with hedging: the file format's default
}

// One methodConfig's retryPolicy, with gRPC's semantics (maxAttempts counts the first attempt and
// is capped at 5; full jitter).
void read_grpc_retry_policy(const json& retry_policy, const std::string& rp, policy& p) {
  sj::object_reader r(retry_policy, rp,
                      {"maxAttempts", "initialBackoff", "maxBackoff", "backoffMultiplier",
                       "retryableStatusCodes", "perAttemptRecvTimeout"});
  std::int64_t attempts = proto_integer(r, "maxAttempts", 2, 1'000'000);
  if (attempts > 5) {
    p.warnings.push_back(r.field("maxAttempts") + ": " + std::to_string(attempts) +
                         " is above gRPC's limit of 5 attempts: gRPC makes at most 5 (4 retries)");
    attempts = 5;
  }
  p.retry.max_retries = static_cast<int>(attempts - 1);
  p.retry.backoff.base = proto_duration(r, "initialBackoff", k_max_interval);
  p.retry.backoff.cap = proto_duration(r, "maxBackoff", k_max_interval);
  if (p.retry.backoff.cap < p.retry.backoff.base) {
    p.warnings.push_back(r.field("maxBackoff") +
                         ": below initialBackoff, so every delay's ceiling is maxBackoff (" +
                         format_duration(p.retry.backoff.cap) + "): base set to it");
    p.retry.backoff.base = p.retry.backoff.cap;
  }
  p.retry.backoff.multiplier = r.number_between("backoffMultiplier", 1, 1000);
  p.retry.backoff.jitter = jitter::full;  // gRFC A6: random(0, current_backoff)
  if (r.has("perAttemptRecvTimeout")) {
    p.attempt_timeout = proto_duration(r, "perAttemptRecvTimeout", 1h);
  }
  read_grpc_status_codes(r, p);
}

std::vector<policy> read_grpc(const json& doc) {
  if (!doc.is_object())
    sj::fail("", "a gRPC service config must be a JSON object, got " + sj::quote(doc));
  sj::object_reader top(doc, "",
                        {"methodConfig", "retryThrottling", "loadBalancingConfig",
                         "loadBalancingPolicy", "healthCheckConfig"});
  const json& list = top.required("methodConfig", "an array of method configs");
  if (!list.is_array() || list.empty() || list.size() > 100) {
    sj::fail("methodConfig", "must be an array of 1 to 100 method configs, got " + sj::quote(list));
  }
  const budget_options budget = read_grpc_throttling(top, doc);
  std::vector<policy> policies;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = sj::index_path("methodConfig", i);
    sj::object_reader m(list[i], path,
                        {"name", "waitForReady", "timeout", "maxRequestMessageBytes",
                         "maxResponseMessageBytes", "retryPolicy", "hedgingPolicy"});
    const std::vector<std::string> names = grpc_names(list[i], path);
    policy p;
    p.name = names.front();
    check_name(path + ".name", p.name);
    p.description = "imported from gRPC methodConfig[" + std::to_string(i) + "]";
    p.client = find_client_profile("grpc");  // gRPC's own retries play it
    p.budget = budget;
    p.retry.max_retries = 0;
    p.statuses = retryable_statuses(std::span<const int>());
    if (m.has("timeout")) p.deadline = proto_duration(m, "timeout", 24h);
    if (m.has("hedgingPolicy")) {
      if (m.has("retryPolicy")) {
        sj::fail(path + ".hedgingPolicy",
                 "an entry has retryPolicy or hedgingPolicy, not both (gRFC A6)");
      }
      read_grpc_hedging_policy(list[i]["hedgingPolicy"], path + ".hedgingPolicy", p);
    } else if (!m.has("retryPolicy")) {
      p.warnings.push_back(path + ": no retryPolicy: gRPC makes one attempt (0 retries)");
    } else {
      read_grpc_retry_policy(list[i]["retryPolicy"], path + ".retryPolicy", p);
      check_retry(path, p.retry);
    }
    // Every name of the entry selects it: one policy per name, alike but for the name.
    for (std::size_t n = 0; n < names.size(); ++n) {
      policy named = p;
      named.name = names[n];
      check_name(sj::index_path(path + ".name", n), named.name);
      if (names.size() > 1) {
        named.description +=
            " (name " + std::to_string(n + 1) + " of " + std::to_string(names.size()) + ")";
      }
      policies.push_back(std::move(named));
    }
  }
  check_unique_names(policies, "methodConfig");
  return policies;
}

}  // namespace

std::vector<policy> import_grpc(std::string_view text) {
  return read_grpc(sj::parse(text, k_max_depth, "gRPC service config"));
}

std::optional<policy> select_grpc_policy(const std::vector<policy>& policies,
                                         std::string_view name) {
  for (const policy& p : policies) {
    if (p.name == name) return p;
  }
  // A service-wide entry (service without method) applies to the service's methods that have
  // no entry of their own.
  const auto slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  const std::string_view service = name.substr(0, slash);
  for (const policy& p : policies) {
    if (p.name != service) continue;
    policy chosen = p;
    chosen.warnings.push_back(std::string(name) +
                              " has no methodConfig entry of its own: the "
                              "service-wide entry " +
                              p.name + " applies to it");
    return chosen;
  }
  return std::nullopt;
}

}  // namespace stormguard::config::detail
