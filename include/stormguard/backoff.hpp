// SPDX-License-Identifier: Apache-2.0
/// \file
/// How long to wait before each retry.
///
/// A `stormguard::backoff` is a pure computation: given the retry number n (1 for the first retry)
/// and a random generator, it returns the delay before retry n. It never sleeps and never reads a
/// clock; the retry executor and the storm simulator do that. The formulas are those of Marc
/// Brooker, "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015):
///
/// \code{.unparsed}
///  ceiling(n)    = min(cap, base · multiplier^(n-1))          (the default: retry 1 waits <= base)
///                = min(cap, base · multiplier^n)              (ceiling_exponent::retry: Brooker's
///                code)
///  none          : delay = ceiling(n)
///  equal         : delay = ceiling(n)/2 + U(0, ceiling(n)/2)          ∈ [ceiling/2, ceiling]
///  full (default): delay = U(0, ceiling(n))                            ∈ [0, ceiling]
///  decorrelated  : delay = min(cap, U(base, 3 · previous delay)),      previous of retry 1 = base
/// \endcode
///
/// The decorrelated formula is the blog's code as published (`sleep = min(cap, random_between(base,
/// sleep * 3))`, starting from sleep = base). The blog's code computes the ceiling of the n-th
/// retry as base · 2^n with n from 1 (its first retry's ceiling is 2 · base); the option
/// backoff_options::exponent = ceiling_exponent::retry selects that convention, for reproducing
/// the blog's experiment exactly (the simulator's brooker-occ scenario does).
///
/// U(a, b) is uniform over the closed range at nanosecond resolution
/// (stormguard::uniform_duration). All arithmetic saturates: any n up to INT_MAX and any base <=
/// cap give a delay in [0, cap].
///
/// \code{.cpp}
///  stormguard::backoff policy;                     // base 100 ms, cap 3 s, ×2, full jitter
///  stormguard::random_generator rng;
///  auto first = policy.delay(1, rng);              // uniform in [0, 100 ms]
///  auto fifth = policy.delay(5, rng);              // uniform in [0, 1.6 s]
///  auto tenth = policy.delay(10, rng);             // uniform in [0, 3 s] (capped)
/// \endcode
#ifndef STORMGUARD_BACKOFF_HPP
#define STORMGUARD_BACKOFF_HPP

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/detail/empty_braces.hpp"
#include "stormguard/export.hpp"
#include "stormguard/random.hpp"

namespace stormguard {

/// How a delay is spread below its ceiling (Brooker 2015). See the file comment for formulas.
enum class jitter {
  none,          ///< exactly the ceiling: clients that failed together retry together
  equal,         ///< half the ceiling fixed, half random
  full,          ///< uniform in [0, ceiling]: the least total work in Brooker's experiment
  decorrelated,  ///< min(cap, U(base, 3 · previous delay)): grows from the previous delay
};

/// "none", "equal", "full" or "decorrelated"; "unknown" for a value outside the enum.
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(jitter j) noexcept;

/// Parses the names printed by to_string(jitter). Returns nullopt for anything else (the match is
/// exact and case-sensitive).
[[nodiscard]] STORMGUARD_EXPORT std::optional<jitter> parse_jitter(std::string_view text) noexcept;

/// Which power of the multiplier the ceiling of retry n uses.
enum class ceiling_exponent {
  /// ceiling(n) = min(cap, base · multiplier^(n-1)): the first retry's ceiling is base (the
  /// default: "base is the first ceiling").
  retry_minus_one,
  /// ceiling(n) = min(cap, base · multiplier^n): the first retry's ceiling is base · multiplier.
  /// The convention of the code behind Brooker's "Exponential Backoff And Jitter" (AWS
  /// Architecture Blog, 2015; github.com/aws-samples/aws-arch-backoff-simulator), whose ceiling
  /// is `min(cap, base * 2 ** attempt)` with attempt counted from 1 (base 5, cap 2000: the first
  /// retry's ceiling is 10).
  retry,
};

/// The settings of a backoff. Defaults: base 100 ms, cap 3 s, multiplier 2, full jitter (Brooker
/// 2015's advice; the numbers of the Go engine in docs/design.md, "The essay this project started
/// from").
struct backoff_options {
  /// The first ceiling: the largest delay before retry 1. >= 0; 0 means retry at once (the
  /// anti-pattern, allowed so that simulations can show it), except with decorrelated jitter,
  /// which needs base > 0.
  duration base = std::chrono::milliseconds(100);
  /// The largest delay ever returned. >= base. May be as large as duration::max().
  duration cap = std::chrono::seconds(3);
  /// The growth factor of the ceiling per retry: finite and >= 1 (1 gives a constant ceiling).
  /// Used as a double, never truncated (1.5 means 1.5).
  double multiplier = 2.0;
  /// The jitter applied under the ceiling.
  stormguard::jitter jitter = stormguard::jitter::full;
  /// The exponent of the ceiling: retry - 1 (the default) or retry (Brooker's published code).
  /// Decorrelated jitter has no ceiling and ignores it.
  ceiling_exponent exponent = ceiling_exponent::retry_minus_one;

  friend bool operator==(const backoff_options&, const backoff_options&) = default;
};

/// Exponential (or, with multiplier 1, constant) backoff with jitter.
///
/// Immutable after construction, so one instance may be shared by any number of threads; the
/// random generator passed to delay() is the caller's and is not synchronised.
class STORMGUARD_EXPORT backoff {
 public:
  /// Validates `options` and precomputes the first ceilings. Throws std::invalid_argument naming
  /// the field and the value when base < 0, cap < base, multiplier is NaN, infinite or < 1,
  /// jitter or exponent is not one of the enumerators, or jitter is decorrelated with base == 0.
  /// `backoff({})` is the same as `backoff()`.
  explicit backoff(backoff_options options = {});

  /// \cond
  // `backoff({})`: the defaults, as backoff().
  backoff(detail::empty_braces) : backoff(backoff_options{}) {}
  /// \endcond

  /// A constant backoff: every ceiling is `delay` (base = cap = delay, multiplier 1), with the
  /// given jitter (none by default: exactly `delay` each time). Throws std::invalid_argument for
  /// a negative delay.
  [[nodiscard]] static backoff constant(duration delay, stormguard::jitter j = jitter::none);

  /// The validated settings.
  [[nodiscard]] const backoff_options& options() const noexcept { return options_; }

  /// The ceiling of retry `retry`: min(cap, base · multiplier^(retry-1)), or
  /// min(cap, base · multiplier^retry) with ceiling_exponent::retry; saturating, in [base, cap].
  /// `retry` counts from 1; a value < 1 throws std::invalid_argument.
  [[nodiscard]] duration ceiling(int retry) const {
    if (retry < 1) throw_bad_retry(retry);
    if (retry <= k_table_size) return table_[static_cast<std::size_t>(retry - 1)];
    return ceiling_slow(retry);
  }

  /// The delay before retry `retry` (from 1), drawn with one call of `g` (none draws nothing).
  /// `previous` is the delay actually waited before retry - 1; only decorrelated jitter uses it,
  /// and zero or negative means "no previous delay" (start from base). Always in [0, cap]; for
  /// decorrelated jitter in [base, cap]. Throws std::invalid_argument when `retry` < 1.
  template <bit_generator G>
  [[nodiscard]] duration delay(int retry, G& g, duration previous = duration::zero()) const {
    switch (options_.jitter) {
      case jitter::none:
        return ceiling(retry);
      case jitter::equal: {
        const duration c = ceiling(retry);
        const duration half = c / 2;
        return half + uniform_duration(g, c - half);
      }
      case jitter::decorrelated: {
        if (retry < 1) throw_bad_retry(retry);
        const duration from = previous > duration::zero() ? previous : options_.base;
        const duration hi = saturating_triple(from);
        return std::min(options_.cap, uniform_duration(g, options_.base, hi));
      }
      case jitter::full:
      default:
        return uniform_duration(g, ceiling(retry));
    }
  }

  friend bool operator==(const backoff& a, const backoff& b) noexcept {
    return a.options_ == b.options_;
  }

 private:
  static constexpr int k_table_size = 32;

  [[noreturn]] static void throw_bad_retry(int retry);
  [[nodiscard]] duration ceiling_slow(int retry) const noexcept;
  [[nodiscard]] static duration saturating_triple(duration d) noexcept {
    constexpr auto max = duration::max().count();
    return d.count() > max / 3 ? duration::max() : d * 3;
  }

  backoff_options options_;
  // Every entry is written by the constructor (no zero-fill first: building a policy per call
  // stays cheap).
  std::array<duration, k_table_size> table_;
};

}  // namespace stormguard

#endif  // STORMGUARD_BACKOFF_HPP
