// SPDX-License-Identifier: Apache-2.0
#include "stormguard/backoff.hpp"

#include <algorithm>
#include <array>
#include <cmath>
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
  const double value = static_cast<double>(o.base.count()) * scale;
  // 2^63 is exactly representable; anything at or above it (or inf) saturates.
  if (!(value < 0x1.0p63)) return o.cap;
  const duration ceiling{static_cast<std::int64_t>(value)};
  return std::min(o.cap, ceiling);
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
  int retry = 1;
  for (; retry <= k_table_size; ++retry) {
    const duration c = compute_ceiling(options_, retry);
    table_[static_cast<std::size_t>(retry - 1)] = c;
    if (c == options_.cap) break;
  }
  for (++retry; retry <= k_table_size; ++retry) {
    table_[static_cast<std::size_t>(retry - 1)] = options_.cap;
  }
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
