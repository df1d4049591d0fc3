// SPDX-License-Identifier: Apache-2.0
// Internal to stormguard::config: reading a budget kind's settings from its JSON object through
// the kind's own list, `Options::fields` (stormguard/budget_kinds.hpp: each setting's name, member
// and range). The one dispatch on a setting's type, for every kind's reader (budget_json.cpp)
// and for the fleet budget's ratio settings (fleet.cpp).
#ifndef STORMGUARD_SRC_CONFIG_BUDGET_FIELDS_HPP
#define STORMGUARD_SRC_CONFIG_BUDGET_FIELDS_HPP

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "detail/strict_json.hpp"
#include "stormguard/clock.hpp"

namespace stormguard::config::detail {

/// The names of the settings of budget options `O`, in the order of O::fields.
template <class O>
[[nodiscard]] std::vector<std::string_view> budget_setting_names() {
  std::vector<std::string_view> names;
  const O defaults{};
  O::fields(defaults, [&](std::string_view name, const auto&, const auto&, const auto&) {
    names.push_back(name);
  });
  return names;
}

/// Reads every setting of `o` that the object of `r` has, each within its range [lo, hi]: a
/// duration (text such as "10s"), a double or an int64. A setting that is absent keeps its value
/// in `o`. Throws strict_json::failure naming the field and the value for one out of range or of
/// the wrong type.
template <class O>
void read_budget_settings(stormguard::detail::strict_json::object_reader& r, O& o) {
  O::fields(o, [&r](std::string_view name, auto& field, auto lo, auto hi) {
    if (!r.has(name)) return;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, duration>) {
      field = r.time_between(name, lo, hi);
    } else if constexpr (std::is_same_v<T, double>) {
      field = r.number_between(name, lo, hi);
    } else {
      static_assert(std::is_same_v<T, std::int64_t>,
                    "a budget setting is a duration, double or int64");
      field = r.integer(name, lo, hi);
    }
  });
}

}  // namespace stormguard::config::detail

#endif  // STORMGUARD_SRC_CONFIG_BUDGET_FIELDS_HPP
