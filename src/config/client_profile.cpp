// SPDX-License-Identifier: Apache-2.0
// A client profile in a policy or scenario file (stormguard/client_profile.hpp): a built-in's name
// or an object with every behaviour spelled out.
#include "stormguard/client_profile.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "config/policy_json.hpp"
#include "detail/strict_json.hpp"
#include "stormguard/config/policy.hpp"

namespace stormguard::config {

namespace sj = stormguard::detail::strict_json;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

constexpr std::array<std::string_view, 3> k_label_names{
    label_name(attempt_label::none), label_name(attempt_label::envoy_attempt_count),
    label_name(attempt_label::grpc_previous_attempts)};
constexpr std::array<std::string_view, 3> k_retry_after_names{
    retry_after_use_name(retry_after_use::minimum), retry_after_use_name(retry_after_use::replace),
    retry_after_use_name(retry_after_use::ignore)};

std::string builtin_names() {
  std::string out;
  for (std::size_t i = 0; i < k_client_profiles.size(); ++i) {
    out += (i == 0                              ? ""
            : i + 1 == k_client_profiles.size() ? " or "
                                                : ", ") +
           ("\"" + std::string(k_client_profiles[i].name) + "\"");
  }
  return out;
}

}  // namespace

namespace detail {

client_profile read_client_profile(const json& value, const std::string& path) {
  if (value.is_string()) {
    if (auto builtin = find_client_profile(value.get_ref<const std::string&>())) return *builtin;
    sj::fail(sj::field_text(path), "must be a built-in client profile (" + builtin_names() +
                                       ") or an object of its fields, got " + sj::quote(value));
  }
  if (!value.is_object()) {
    sj::fail(sj::field_text(path), "must be a built-in client profile's name (" + builtin_names() +
                                       ") or an object of its fields, got " + sj::quote(value));
  }
  sj::object_reader r(
      value, path,
      {"attempt_label", "deadline", "pushback", "retry_after", "reuse_connections", "retries"});
  client_profile p{.name = k_custom_client_profile};
  p.label = static_cast<attempt_label>(r.choice("attempt_label", k_label_names));
  p.sends_deadline = r.flag("deadline");
  p.honours_pushback = r.flag("pushback");
  p.retry_after = static_cast<retry_after_use>(r.choice("retry_after", k_retry_after_names));
  p.reuses_connections = r.flag("reuse_connections");
  p.retries = r.flag("retries");
  return p;
}

ordered_json client_profile_json(const client_profile& p) {
  if (const auto builtin = find_client_profile(p.name); builtin && *builtin == p) {
    return std::string(p.name);
  }
  ordered_json j;
  j["attempt_label"] = std::string(label_name(p.label));
  j["deadline"] = p.sends_deadline;
  j["pushback"] = p.honours_pushback;
  j["retry_after"] = std::string(retry_after_use_name(p.retry_after));
  j["reuse_connections"] = p.reuses_connections;
  j["retries"] = p.retries;
  return j;
}

}  // namespace detail

outcome<client_profile, policy_error> parse_client_profile(std::string_view text,
                                                           const std::string& field) {
  try {
    const json value = sj::parse(text, detail::k_max_depth, "client profile", "");
    return detail::read_client_profile(value, field);
  } catch (const sj::failure& f) {
    return failure{policy_error{f.field, f.message}};
  }
}

std::string to_json(const client_profile& p) { return detail::client_profile_json(p).dump(); }

}  // namespace stormguard::config
