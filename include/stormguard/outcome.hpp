// SPDX-License-Identifier: Apache-2.0
/// \file
/// The minimal expected-like result of one attempt, for C++20 code
/// without std::expected.
///
/// An operation given to stormguard::retrier (retry.hpp) may return any type with has_value(),
/// operator* and error() (std::expected in C++23, tl::expected, …); stormguard::outcome is the one
/// shipped here:
///
/// \code{.cpp}
///  stormguard::outcome<std::string, std::error_code> fetch(int id) {
///    if (id < 0) return stormguard::failure{std::make_error_code(std::errc::invalid_argument)};
///    return std::string("user ") + std::to_string(id);
///  }
///  auto r = fetch(7);
///  if (r) use(*r); else log(r.error().message());
/// \endcode
#ifndef STORMGUARD_OUTCOME_HPP
#define STORMGUARD_OUTCOME_HPP

#include <concepts>
#include <utility>
#include <variant>

namespace stormguard {

/// Wraps an error so that it converts to an outcome<T, E> holding the error.
template <class E>
struct failure {
  /// The error the outcome will hold.
  E error;
};
/// Deduces failure<E> from the error: `failure{ec}`.
template <class E>
failure(E) -> failure<E>;

/// The result of one attempt: a value of type T, or an error of type E. The minimal
/// expected-like type for C++20 code; an operation may return any type with has_value(),
/// operator* and error() (std::expected in C++23) instead. A plain value type: thread-safe as
/// T and E are (const access from several threads is safe).
template <class T, class E>
class outcome {
 public:
  /// A successful outcome holding `value`.
  constexpr outcome(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  /// A failed outcome holding `f.error`.
  template <class F>
  requires std::constructible_from<E, F>
  constexpr outcome(failure<F> f) : state_(std::in_place_index<1>, std::move(f.error)) {}

  /// True when the outcome holds a value.
  [[nodiscard]] constexpr bool has_value() const noexcept { return state_.index() == 0; }
  /// has_value().
  constexpr explicit operator bool() const noexcept { return has_value(); }
  /// The value. Precondition: has_value().
  [[nodiscard]] constexpr T& operator*() & noexcept { return *std::get_if<0>(&state_); }
  /// The value. Precondition: has_value().
  [[nodiscard]] constexpr const T& operator*() const& noexcept { return *std::get_if<0>(&state_); }
  /// The value, moved out. Precondition: has_value().
  [[nodiscard]] constexpr T&& operator*() && noexcept {
    return std::move(*std::get_if<0>(&state_));
  }
  /// The value's members. Precondition: has_value().
  [[nodiscard]] constexpr T* operator->() noexcept { return std::get_if<0>(&state_); }
  /// The value's members. Precondition: has_value().
  [[nodiscard]] constexpr const T* operator->() const noexcept { return std::get_if<0>(&state_); }
  /// The error. Precondition: !has_value().
  [[nodiscard]] constexpr E& error() & noexcept { return *std::get_if<1>(&state_); }
  /// The error. Precondition: !has_value().
  [[nodiscard]] constexpr const E& error() const& noexcept { return *std::get_if<1>(&state_); }
  /// The error, moved out. Precondition: !has_value().
  [[nodiscard]] constexpr E&& error() && noexcept { return std::move(*std::get_if<1>(&state_)); }

 private:
  std::variant<T, E> state_;
};

/// An expected-like type: has_value(), operator* and error().
template <class R>
concept expected_like = requires(R r) {
  { r.has_value() } -> std::convertible_to<bool>;
  *std::move(r);
  std::move(r).error();
};

/// The value of a successful call whose operation returns no value (a std::error_code, void, or
/// an expected-like type of void): retry_result<done_t, E>::value holds `done`.
struct done_t {
  friend constexpr bool operator==(done_t, done_t) noexcept = default;
};
/// The only done_t value.
inline constexpr done_t done{};

}  // namespace stormguard

#endif  // STORMGUARD_OUTCOME_HPP
