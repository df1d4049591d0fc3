// SPDX-License-Identifier: Apache-2.0
#include "stormguard/backoff.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "stormguard/detail/enum_names.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard {

namespace {
constexpr std::array<std::string_view, 4> k_jitter_names{"none", "equal", "full", "decorrelated"};
}  // namespace

std::string_view to_string(jitter value) noexcept {
  return detail::enum_name(value, k_jitter_names);
}

std::optional<jitter> parse_jitter(std::string_view text) noexcept {
  return detail::enum_from_name<jitter>(text, k_jitter_names);
}

namespace {

void reject(const std::string& message) {
  throw std::invalid_argument("stormguard::backoff: " + message);
}

// base · scale as a ceiling (base in ns, as a double): saturating at cap (2^63 ns and above, or
// inf, is cap).
duration scaled_ceiling(double base, duration cap, double scale) noexcept {
  const double value = base * scale;
  // 2^63 is exactly representable; anything at or above it (or inf) saturates.
  if (!(value < 0x1.0p63)) return cap;
  const duration ceiling{static_cast<std::int64_t>(value)};
  return std::min(cap, ceiling);
}

// min(cap, base · multiplier^(retry-1)) (or ^retry with ceiling_exponent::retry) in double,
// saturating at cap. Powers of two scale a double exactly, so with multiplier 2 every ceiling
// below 2^63 ns is exact.
duration compute_ceiling(const backoff_options& o, int retry) noexcept {
  // Base 0 stays 0 for every retry: the power below overflows to infinity from retry 1025 (with
  // multiplier 2) and 0 · inf is NaN, which the saturation test would take for "above the cap".
  if (o.base == duration::zero()) return duration::zero();
  // In double: retry may be INT_MAX, and retry - 1 + 1 must not overflow an int.
  const double exponent =
      static_cast<double>(retry) - (o.exponent == ceiling_exponent::retry ? 0.0 : 1.0);
  if (o.multiplier == 1.0 || exponent == 0.0) return o.base;
  // Multiplier 2 (the default): an exact scaling by a power of two, far cheaper than std::pow.
  const double scale = o.multiplier == 2.0
                           ? std::ldexp(1.0, static_cast<int>(std::min(exponent, 2000.0)))
                           : std::pow(o.multiplier, exponent);
  return scaled_ceiling(static_cast<double>(o.base.count()), o.cap, scale);
}

// table.fill(value), written so that GCC 12 vectorises it (16 stores for 32 entries): it does
// not vectorise std::array::fill of a duration, a struct copy.
template <std::size_t n>
void fill_with(std::array<duration, n>& table, duration value) noexcept {
  const std::int64_t count = value.count();
  for (std::size_t i = 0; i < n; ++i) table[i] = duration{count};
}

// Fills table[0 .. n) with compute_ceiling(o, 1 .. n), bit-identical (tests/backoff_test.cpp
// checks it), without a std::pow or std::ldexp per entry, so that building a policy per call
// is cheap. Fills the table with cap (a fixed-size fill, unrolled), then computes the ceilings
// up to the first one equal to cap (they never decrease).
//  - Multiplier 2 (the default) with a base that a double holds exactly (up to 2^53 ns, 104
//    days): base · 2^e is exact in double, so shifting the integer gives the same ceiling.
//  - Any other multiplier: m^e is carried from one entry to the next (scale · m) for as long as
//    that product is exact, which it is exactly when the odd part of the power's significand,
//    q^e with q the odd part of m's, fits in 53 bits (an odd integer has no trailing zero to
//    shed). std::pow returns an exact power exactly too (its error is under one ulp). From the
//    first inexact product on, std::pow as compute_ceiling does (1.5 stays exact up to 1.5^33).
template <std::size_t n>
void fill_ceilings(const backoff_options& o, std::array<duration, n>& table) noexcept {
  const duration base = o.base;
  const duration cap = o.cap;
  const double m = o.multiplier;
  if (base == duration::zero() || m == 1.0) {
    fill_with(table, base);  // base 0, or a constant ceiling (base <= cap)
    return;
  }
  fill_with(table, cap);
  constexpr std::uint64_t significand_limit = std::uint64_t{1} << 53;
  const int first_exponent = o.exponent == ceiling_exponent::retry ? 1 : 0;
  if (m == 2.0 && static_cast<std::uint64_t>(base.count()) <= significand_limit) {
    constexpr std::int64_t max = duration::max().count();
    for (std::size_t i = 0; i < n; ++i) {
      const int e = static_cast<int>(i) + first_exponent;
      const duration c =
          e < 63 && base.count() <= (max >> e) ? std::min(cap, duration{base.count() << e}) : cap;
      if (c == cap) break;
      table[i] = c;
    }
  } else {
    const double base_ns = static_cast<double>(base.count());
    // m >= 1 is finite and normal: its significand is the 52 stored bits and the implicit 1.
    std::uint64_t q = (std::bit_cast<std::uint64_t>(m) & ((std::uint64_t{1} << 52) - 1)) |
                      (std::uint64_t{1} << 52);
    q >>= std::countr_zero(q);
    const std::uint64_t odd_limit = (significand_limit - 1) / q;  // q^e · q fits in 53 bits
    double scale = first_exponent == 0 ? 1.0 : m;     // m^e of this entry, exact while `exact`
    std::uint64_t odd = first_exponent == 0 ? 1 : q;  // q^e
    bool exact = true;
    for (std::size_t i = 0; i < n; ++i) {
      const int exponent = static_cast<int>(i) + first_exponent;
      const duration c = exponent == 0 ? base
                         : exact       ? scaled_ceiling(base_ns, cap, scale)
                                       : compute_ceiling(o, static_cast<int>(i) + 1);
      if (c == cap) break;
      table[i] = c;
      exact = exact && odd <= odd_limit;
      odd *= q;
      scale *= m;
    }
  }
}

}  // namespace

backoff::backoff(backoff_options options) : options_(options) {
  if (options_.base < duration::zero()) {
    reject("base must be >= 0, got " + format_duration(options_.base));
  }
  if (options_.cap < options_.base) {
    reject("cap must be >= base (" + format_duration(options_.base) + "), got " +
           format_duration(options_.cap));
  }
  if (!std::isfinite(options_.multiplier) || options_.multiplier < 1.0) {
    reject("multiplier must be a finite number >= 1, got " +
           detail::format_double(options_.multiplier));
  }
  const auto j = static_cast<int>(options_.jitter);
  if (j < static_cast<int>(jitter::none) || j > static_cast<int>(jitter::decorrelated)) {
    reject("jitter must be one of none, equal, full, decorrelated, got " + std::to_string(j));
  }
  const auto e = static_cast<int>(options_.exponent);
  if (e < static_cast<int>(ceiling_exponent::retry_minus_one) ||
      e > static_cast<int>(ceiling_exponent::retry)) {
    reject("exponent must be retry_minus_one or retry, got " + std::to_string(e));
  }
  if (options_.jitter == jitter::decorrelated && options_.base == duration::zero()) {
    reject("decorrelated jitter needs base > 0 (every delay would be U(0, 0) = 0), got base 0s");
  }
  // The ceilings grow until they reach cap and stay there: compute them only up to cap (6
  // entries for the defaults) and fill the rest, so that building a policy per call is cheap.
  fill_ceilings(options_, table_);
}

backoff backoff::constant(duration delay, stormguard::jitter j) {
  if (delay < duration::zero()) {
    reject("constant delay must be >= 0, got " + format_duration(delay));
  }
  return backoff(backoff_options{.base = delay, .cap = delay, .multiplier = 1.0, .jitter = j});
}

void backoff::throw_bad_retry(int retry) {
  throw std::invalid_argument(
      "stormguard::backoff: retry must be >= 1 (the first retry is 1), got " +
      std::to_string(retry));
}

duration backoff::ceiling_slow(int retry) const noexcept {
  // Past the table the ceiling only grows; once the table's last entry reached cap it stays.
  if (table_.back() == options_.cap) return options_.cap;
  return compute_ceiling(options_, retry);
}

}  // namespace stormguard
