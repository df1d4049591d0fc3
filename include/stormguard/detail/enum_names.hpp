// SPDX-License-Identifier: Apache-2.0
// Internal: enumerator names from one table per enumeration, so that `to_string` and its parse
// are a table lookup instead of a hand-written switch per enumeration.
#ifndef STORMGUARD_DETAIL_ENUM_NAMES_HPP
#define STORMGUARD_DETAIL_ENUM_NAMES_HPP

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>

namespace stormguard::detail {

/// The name of `e` in `names`, whose i-th entry names the enumerator of value i (the enumeration's
/// enumerators must be 0, 1, …, N−1); "unknown" for any other value (a cast from an integer).
template <class E, std::size_t N>
requires std::is_enum_v<E>
[[nodiscard]] constexpr std::string_view enum_name(
    E e, const std::array<std::string_view, N>& names) noexcept {
  using U = std::underlying_type_t<E>;
  const U value = static_cast<U>(e);
  if constexpr (std::is_signed_v<U>) {
    if (value < 0) return "unknown";
  }
  const auto index = static_cast<std::size_t>(value);
  return index < N ? names[index] : std::string_view("unknown");
}

/// The enumerator that `names` calls `text` (exact, case-sensitive), or nullopt.
template <class E, std::size_t N>
requires std::is_enum_v<E>
[[nodiscard]] constexpr std::optional<E> enum_from_name(
    std::string_view text, const std::array<std::string_view, N>& names) noexcept {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == text) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_ENUM_NAMES_HPP
