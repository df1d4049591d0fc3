// SPDX-License-Identifier: Apache-2.0
// The readers of a policy's budget value and of a list of HTTP statuses: shared by the policy
// reader (policy.cpp) and the hedging object's reader (hedging.cpp).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "config/fleet_json.hpp"
#include "config/policy_json.hpp"
#include "detail/settings_json.hpp"
#include "detail/strict_json.hpp"
#include "stormguard/budget_kinds.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/detail/format.hpp"

namespace stormguard::config {

namespace sj = stormguard::detail::strict_json;
using json = nlohmann::json;

namespace {

constexpr std::size_t k_max_statuses = 500;

// Constructs the budget class from `options`, the library's own validation: a backstop that
// also checks what the reader does not (token_bucket's three decimals).
template <class Budget, class Options>
void check_budget(const std::string& field, const Options& options) {
  try {
    Budget budget(options);
    (void)budget;
  } catch (const std::invalid_argument& e) {
    sj::fail(field, detail::library_message(e));
  }
}

// The settings of a budget of kind O, read through O::fields (the one list of each kind's
// settings, with their ranges), then checked by the class's own constructor.
template <class O>
O read_budget_fields(const json& fields, const std::string& path) {
  std::vector<std::string_view> known{"kind"};
  for (std::string_view name : stormguard::detail::settings_json::names<O, O>())
    known.push_back(name);
  sj::object_reader r(fields, path, known);
  O o;
  stormguard::detail::settings_json::read<O>(r, o);
  check_budget<typename O::budget_type>(path, o);
  return o;
}

}  // namespace

namespace detail {

budget_options read_budget_value(const json& value, const std::string& path) {
  const std::string kinds = budget_kind_names();
  std::string kind;
  if (value.is_string()) {
    kind = value.get<std::string>();
  } else if (value.is_object()) {
    const auto it = value.find("kind");
    if (it == value.end())
      sj::fail(sj::join_path(path, "kind"), "missing (expected " + kinds + ")");
    if (!it->is_string()) {
      sj::fail(sj::join_path(path, "kind"), "must be " + kinds + ", got " + sj::quote(*it));
    }
    kind = it->get<std::string>();
  } else {
    sj::fail(path, "must be " + kinds + " or an object with \"kind\", got " + sj::quote(value));
  }
  const std::string kind_field = value.is_string() ? path : sj::join_path(path, "kind");
  const json empty = json::object();
  const json& fields = value.is_object() ? value : empty;
  // A ratio budget with a `fleet` object: config/fleet.cpp.
  if (auto fleet = detail::read_fleet_budget(kind, fields, path, kind_field)) return *fleet;
  std::optional<budget_options> read;
  for_each_budget_kind([&]<class O>(std::type_identity<O>) {
    if (!read && O::kind == kind) read = read_budget_fields<O>(fields, path);
  });
  if (!read) {
    sj::fail(kind_field,
             "must be " + kinds + ", got " + stormguard::detail::quote_for_message(kind));
  }
  return *read;
}

retryable_statuses read_status_list(const json& value, const std::string& path) {
  if (!value.is_array()) {
    sj::fail(path,
             "must be an array of HTTP statuses (integers in [100, 599]), got " + sj::quote(value));
  }
  if (value.size() > k_max_statuses) {
    sj::fail(path, "must have at most " + std::to_string(k_max_statuses) + " statuses, got " +
                       std::to_string(value.size()));
  }
  std::vector<int> statuses;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const json& v = value[i];
    const std::string field = sj::index_path(path, i);
    const bool in_range =
        (v.is_number_unsigned() && v.get<std::uint64_t>() >= 100 && v.get<std::uint64_t>() <= 599);
    if (!in_range) {
      sj::fail(field, "must be an HTTP status, an integer in [100, 599], got " + sj::quote(v));
    }
    const int status = v.get<int>();
    if (std::find(statuses.begin(), statuses.end(), status) != statuses.end()) {
      sj::fail(field, std::to_string(status) + " appears more than once");
    }
    statuses.push_back(status);
  }
  return retryable_statuses(std::span<const int>(statuses));
}

}  // namespace detail

}  // namespace stormguard::config
