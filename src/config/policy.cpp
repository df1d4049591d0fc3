// SPDX-License-Identifier: Apache-2.0
#include "stormguard/config/policy.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "config/export_format.hpp"
#include "config/fleet_json.hpp"
#include "config/policy_json.hpp"
#include "detail/settings_json.hpp"
#include "detail/strict_json.hpp"
#include "stormguard/backoff.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::config {

namespace sj = stormguard::detail::strict_json;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

using namespace std::chrono_literals;

constexpr int k_max_retries = 1000;
constexpr duration k_max_backoff = 1h;
constexpr duration k_max_retry_after = 24h;
constexpr duration k_max_attempt_timeout = 1h;
constexpr duration k_max_deadline = 24h;
constexpr std::size_t k_max_description = 200;
constexpr std::size_t k_max_policies = 100;

std::string quote_duration(duration d) { return "\"" + format_duration(d) + "\""; }

backoff_options read_backoff(const json& value, const std::string& path) {
  sj::object_reader r(value, path, {"base", "cap", "multiplier", "jitter"});
  backoff_options b;
  if (r.has("base")) b.base = r.time_between("base", duration::zero(), k_max_backoff);
  if (r.has("cap")) b.cap = r.time_between("cap", duration::zero(), k_max_backoff);
  if (b.cap < b.base) {
    // Blame the field written: a cap below the base written, or a base above the default cap.
    if (r.has("cap")) {
      sj::fail(r.field("cap"), "must be at least " + sj::join_path(path, "base") + " (" +
                                   format_duration(b.base) + "), got " + sj::quote(value["cap"]));
    }
    sj::fail(r.field("base"), "must be at most " + sj::join_path(path, "cap") + " (" +
                                  format_duration(b.cap) + ", the default; give a larger cap " +
                                  "too), got " + sj::quote(value["base"]));
  }
  if (r.has("multiplier")) b.multiplier = r.number_between("multiplier", 1, 1000);
  if (r.has("jitter")) {
    const json& j = r.required("jitter", "a string");
    const auto parsed = j.is_string() ? parse_jitter(j.get<std::string>()) : std::nullopt;
    if (!parsed) {
      sj::fail(r.field("jitter"),
               "must be \"none\", \"equal\", \"full\" or \"decorrelated\", got " + sj::quote(j));
    }
    b.jitter = *parsed;
  }
  if (b.jitter == jitter::decorrelated && b.base == duration::zero()) {
    sj::fail(r.field("base"),
             "must be > 0 with decorrelated jitter (its delays grow from the "
             "base), got " +
                 quote_duration(b.base));
  }
  return b;
}

json parse_document(std::string_view text) {
  return sj::parse(text, detail::k_max_depth, "policy file", " (a policy file needs 4)");
}

std::vector<policy> read_stormguard(std::string_view text) {
  const json doc = parse_document(text);
  if (!doc.is_object()) {
    sj::fail("",
             "a policy file must be a JSON object {\"policies\": [...]}, got " + sj::quote(doc));
  }
  sj::object_reader top(doc, "", {"policies"});
  const json& list = top.required("policies", "an array of policy objects");
  if (!list.is_array() || list.empty() || list.size() > k_max_policies) {
    sj::fail("policies",
             "must be an array of 1 to " + std::to_string(k_max_policies) +
                 " policy objects, got " +
                 (list.is_array() ? std::to_string(list.size()) + " policies" : sj::quote(list)));
  }
  std::vector<policy> policies;
  for (std::size_t i = 0; i < list.size(); ++i) {
    policies.push_back(detail::read_policy(list[i], sj::index_path("policies", i)));
  }
  detail::check_unique_names(policies, "policies");
  return policies;
}

// Runs `read`, turning its failures (and, as a backstop, nlohmann's) into a policy_error.
template <class Read>
auto checked(Read read, const std::string& prefix = "")
    -> outcome<std::invoke_result_t<Read>, policy_error> {
  try {
    return read();
  } catch (const sj::failure& f) {
    return failure{policy_error{f.field, prefix + f.message}};
  } catch (const json::exception& e) {  // not expected: every access is checked first
    return failure{policy_error{"", prefix + "invalid policy: " + e.what()}};
  }
}

}  // namespace

namespace detail {

policy read_policy(const json& value, const std::string& path) {
  sj::object_reader r(value, path,
                      {"name", "description", "retries", "attempts", "backoff", "budget",
                       "retryable_statuses", "retryable_grpc_codes", "max_retry_after",
                       "attempt_timeout", "deadline", "hedging", "client_profile"});
  policy p;
  p.name = r.string("name");
  check_name(r.field("name"), p.name);
  if (r.has("description")) {
    p.description = r.string("description");
    if (p.description.size() > k_max_description) {
      sj::fail(r.field("description"), "must be at most " + std::to_string(k_max_description) +
                                           " bytes, got " + std::to_string(p.description.size()));
    }
  }
  if (r.has("retries") && r.has("attempts")) {
    sj::fail(r.field("attempts"), "give retries or attempts (= retries + 1), not both");
  }
  if (r.has("retries"))
    p.retry.max_retries = static_cast<int>(r.integer("retries", 0, k_max_retries));
  if (r.has("attempts")) {
    p.retry.max_retries = static_cast<int>(r.integer("attempts", 1, k_max_retries + 1)) - 1;
  }
  if (r.has("backoff")) p.retry.backoff = read_backoff(value["backoff"], r.field("backoff"));
  if (r.has("budget")) p.budget = detail::read_budget_value(value["budget"], r.field("budget"));
  if (r.has("retryable_statuses")) {
    p.statuses =
        detail::read_status_list(value["retryable_statuses"], r.field("retryable_statuses"));
  }
  if (r.has("retryable_grpc_codes")) {
    p.retryable_grpc_codes =
        read_grpc_code_list(value["retryable_grpc_codes"], r.field("retryable_grpc_codes"));
  }
  if (r.has("max_retry_after")) {
    p.retry.max_retry_after = r.positive_time("max_retry_after", k_max_retry_after);
  }
  if (r.has("attempt_timeout")) {
    p.attempt_timeout = r.positive_time("attempt_timeout", k_max_attempt_timeout);
  }
  if (r.has("deadline")) p.deadline = r.positive_time("deadline", k_max_deadline);
  if (r.has("hedging")) read_hedging(value["hedging"], r, p);
  if (r.has("client_profile")) {
    p.client = read_client_profile(value["client_profile"], r.field("client_profile"));
  }
  check_retry(path, p.retry);
  return p;
}

ordered_json policy_json(const policy& p) {
  ordered_json j;
  j["name"] = p.name;
  j["description"] = p.description;
  j["retries"] = p.retry.max_retries;
  j["backoff"]["base"] = format_duration(p.retry.backoff.base);
  j["backoff"]["cap"] = format_duration(p.retry.backoff.cap);
  j["backoff"]["multiplier"] = p.retry.backoff.multiplier;
  j["backoff"]["jitter"] = std::string(to_string(p.retry.backoff.jitter));
  ordered_json b;
  b["kind"] = std::string(budget_kind(p.budget));
  std::visit([&b]<class O>(const O& o) { stormguard::detail::settings_json::write<O>(o, b); },
             p.budget);
  detail::write_fleet_budget(p.budget, b);  // a fleet budget: kind "ratio" and its `fleet`
  j["budget"] = std::move(b);
  j["retryable_statuses"] = p.statuses.to_vector();
  if (p.retryable_grpc_codes)
    j["retryable_grpc_codes"] = grpc_code_names_json(*p.retryable_grpc_codes);
  j["max_retry_after"] = format_duration(p.retry.max_retry_after);
  if (p.attempt_timeout != duration::max()) {
    j["attempt_timeout"] = format_duration(p.attempt_timeout);
  }
  if (p.deadline != duration::max()) j["deadline"] = format_duration(p.deadline);
  write_hedging(p, j);
  if (p.client) j["client_profile"] = client_profile_json(*p.client);
  return j;
}

}  // namespace detail

policies_result parse_policies(std::string_view text, policy_format format) {
  return checked([&] {
    if (format == policy_format::stormguard) return read_stormguard(text);
    std::vector<policy> imported =
        format == policy_format::grpc ? detail::import_grpc(text) : detail::import_envoy(text);
    // The import is a policy file (policy check --json writes it), so it keeps that file's bound.
    if (imported.size() > k_max_policies) {
      sj::fail(format == policy_format::grpc ? "methodConfig" : "",
               "the import makes " + std::to_string(imported.size()) +
                   " policies (one per gRPC method name or Envoy route); a policy file holds at "
                   "most " +
                   std::to_string(k_max_policies));
    }
    return imported;
  });
}

policies_result load_policies(const std::filesystem::path& path, policy_format format) {
  auto text = checked([&] { return sj::read_file(path, k_max_policy_file_bytes, "policy"); });
  if (!text) return failure{std::move(text).error()};
  auto policies = parse_policies(*text, format);
  if (!policies) policies.error().message = path.string() + ": " + policies.error().message;
  return policies;
}

outcome<policy, policy_error> select_policy(const std::vector<policy>& policies,
                                            std::string_view name) {
  if (policies.empty()) return failure{policy_error{"", "no policy to select from"}};
  if (name.empty()) return policies.front();
  std::string names;
  for (const policy& p : policies) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  return failure{policy_error{"", "no policy named " + stormguard::detail::quote_for_message(name) +
                                      " (the policies in the file are " + names + ")"}};
}

outcome<policy_reference, policy_error> parse_policy_reference(std::string_view text) {
  policy_reference ref;
  if (text.substr(0, 5) == "grpc:") {
    ref.format = policy_format::grpc;
    text.remove_prefix(5);
  } else if (text.substr(0, 6) == "envoy:") {
    ref.format = policy_format::envoy;
    text.remove_prefix(6);
  }
  std::error_code ec;
  const auto colon = text.rfind(':');
  if (colon != std::string_view::npos && !std::filesystem::exists(std::string(text), ec)) {
    ref.name = std::string(text.substr(colon + 1));
    text = text.substr(0, colon);
    if (ref.name.empty()) {
      return failure{
          policy_error{"", "the policy name after ':' is empty (write FILE or FILE:NAME)"}};
    }
  }
  if (text.empty()) {
    return failure{policy_error{"", "the file name is empty (write [grpc:|envoy:]FILE[:NAME])"}};
  }
  ref.file = std::string(text);
  return ref;
}

policies_result load_policies(const policy_reference& reference) {
  policies_result all = load_policies(reference.file, reference.format);
  if (!all || reference.name.empty()) return all;
  if (reference.format == policy_format::grpc) {  // every name of an entry; service-wide entries
    if (auto p = detail::select_grpc_policy(*all, reference.name)) {
      return std::vector<policy>{std::move(*p)};
    }
  }
  auto one = select_policy(*all, reference.name);
  if (!one) {
    return failure{policy_error{"", reference.file.string() + ": " + one.error().message}};
  }
  return std::vector<policy>{*std::move(one)};
}

std::string to_json(const policy& p) {
  return detail::compact_arrays(detail::policy_json(p).dump(2)) + "\n";
}

std::string to_json(const std::vector<policy>& policies) {
  ordered_json doc;
  doc["policies"] = ordered_json::array();
  for (const policy& p : policies) doc["policies"].push_back(detail::policy_json(p));
  return detail::compact_arrays(doc.dump(2)) + "\n";
}

}  // namespace stormguard::config
