// SPDX-License-Identifier: Apache-2.0
// Internal (private to the libraries that read and write JSON files: stormguard::config's
// policies, stormguard::sim's scenarios): the one reading and writing of a settings object
// through its type's own list of settings, `fields`.
//
// A type D that describes the settings of an options object O has
//
//   template <class Self, class F> static void fields(Self& o, F&& f);
//
// which calls f(name, o.member, lo, hi) once per setting, in the documented order: the setting's
// JSON name, the member (of Self's constness) and its valid range [lo, hi]. A member is a
// duration (written as text, "10s"), a std::optional<duration> (absent when empty), a double or
// an int64. Budget options describe themselves (D = O: stormguard/budget.hpp); a server defence's
// kind describes its options (stormguard/sim/defence_kinds.hpp).
#ifndef STORMGUARD_SRC_DETAIL_SETTINGS_JSON_HPP
#define STORMGUARD_SRC_DETAIL_SETTINGS_JSON_HPP

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "detail/strict_json.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::detail::settings_json {

/// The names of the settings D describes for options O, in the order of D::fields.
template <class D, class O>
[[nodiscard]] std::vector<std::string_view> names() {
  std::vector<std::string_view> out;
  const O defaults{};
  D::fields(defaults, [&](std::string_view name, const auto&, const auto&, const auto&) {
    out.push_back(name);
  });
  return out;
}

/// Reads every setting of `o` that the object of `r` has, each within its range [lo, hi]. A
/// setting that is absent keeps its value in `o`. Throws strict_json::failure naming the field
/// and the value for one out of range or of the wrong type.
template <class D, class O>
void read(strict_json::object_reader& r, O& o) {
  D::fields(o, [&r](std::string_view name, auto& field, auto lo, auto hi) {
    if (!r.has(name)) return;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, duration> || std::is_same_v<T, std::optional<duration>>) {
      field = r.time_between(name, lo, hi);
    } else if constexpr (std::is_same_v<T, double>) {
      field = r.number_between(name, lo, hi);
    } else {
      static_assert(std::is_same_v<T, std::int64_t>,
                    "a setting is a duration, an optional duration, a double or an int64");
      field = r.integer(name, lo, hi);
    }
  });
}

/// Writes every setting of `o` into the object `out`, in the order of D::fields (an empty
/// optional duration is left out).
template <class D, class O, class Json>
void write(const O& o, Json& out) {
  D::fields(o, [&out](std::string_view name, const auto& field, const auto&, const auto&) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, duration>) {
      out[std::string(name)] = format_duration(field);
    } else if constexpr (std::is_same_v<T, std::optional<duration>>) {
      if (field) out[std::string(name)] = format_duration(*field);
    } else {
      out[std::string(name)] = field;
    }
  });
  if (out.is_null()) out = Json::object();  // a kind without settings is written as {}
}

}  // namespace stormguard::detail::settings_json

#endif  // STORMGUARD_SRC_DETAIL_SETTINGS_JSON_HPP
