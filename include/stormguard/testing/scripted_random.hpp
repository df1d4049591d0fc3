// SPDX-License-Identifier: Apache-2.0
/// \file
/// A "random" generator that returns the values a test
/// scripts, so that jittered delays can be checked exactly.
///
/// stormguard maps one 64-bit value x to a draw in [0, bound] as floor(x · (bound + 1) / 2^64)
/// (see stormguard::uniform_int). `fraction(f)` gives the x that lands a fraction f of the way
/// through the range: fraction(0) draws 0, fraction(1) draws the bound itself, fraction(0.5)
/// draws floor((bound + 1) / 2).
///
/// \code{.cpp}
///  stormguard::testing::scripted_random g{fraction(0.0), fraction(1.0)};
///  stormguard::backoff b;                             // full jitter, base 100 ms
///  b.delay(1, g);                                     // 0 ms
///  b.delay(1, g);                                     // 100 ms
/// \endcode
#ifndef STORMGUARD_TESTING_SCRIPTED_RANDOM_HPP
#define STORMGUARD_TESTING_SCRIPTED_RANDOM_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace stormguard::testing {

/// The 64-bit value that stormguard's uniform draws map to the fraction `f` of their range.
/// `f` in [0, 1]; values outside are clamped (this is a test helper, not an API that takes input).
[[nodiscard]] constexpr std::uint64_t fraction(double f) noexcept {
  if (!(f > 0.0)) return 0;
  if (f >= 1.0) return std::numeric_limits<std::uint64_t>::max();
  // 2^64 · f, computed without overflowing: f < 1 so the product is below 2^64.
  return static_cast<std::uint64_t>(f * 18446744073709551616.0);
}

/// A generator that returns a scripted sequence of values, then throws std::out_of_range when
/// asked for more (a test that draws more than it scripted has a bug worth seeing). Satisfies
/// stormguard::bit_generator. Not thread-safe.
class scripted_random {
 public:
  /// The type of the values operator() returns (UniformRandomBitGenerator).
  using result_type = std::uint64_t;

  /// A generator that returns `values`, in order.
  scripted_random(std::initializer_list<std::uint64_t> values) : values_(values) {}
  /// A generator that returns `values`, in order.
  explicit scripted_random(std::vector<std::uint64_t> values) : values_(std::move(values)) {}

  /// The smallest value operator() returns: 0.
  static constexpr result_type min() noexcept { return 0; }
  /// The largest value operator() returns: 2^64 - 1.
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }

  /// The next scripted value.
  result_type operator()() {
    if (next_ >= values_.size()) {
      throw std::out_of_range("scripted_random: script exhausted after " +
                              std::to_string(values_.size()) + " values");
    }
    return values_[next_++];
  }

  /// How many values have been drawn.
  [[nodiscard]] std::size_t drawn() const noexcept { return next_; }

 private:
  std::vector<std::uint64_t> values_;
  std::size_t next_ = 0;
};

}  // namespace stormguard::testing

#endif  // STORMGUARD_TESTING_SCRIPTED_RANDOM_HPP
