// SPDX-License-Identifier: Apache-2.0
/// \file
/// The Retry-After a server chooses for its refusals from how long it has been overloaded: for
/// the clients nobody can change, which ignore every header but Retry-After (go-retryablehttp and
/// curl sleep exactly what it says instead of their own backoff; docs/admission.md, "Client
/// profiles").
///
/// A server does not know when an overload will end. What it knows is how long it has lasted:
/// by J. R. Gott's Copernican argument ("Implications of the Copernican principle for our future
/// prospects", Nature 363, 1993) an overload observed at a random moment of its life is as
/// likely to be in its first half as in its second, so its age is the median estimate of what is
/// left. The pacer answers `factor` · age (at least `min`, at most `max`), drawn upward by up to
/// `spread` of itself so that the refused clients come back spread out rather than together, and
/// rounded up to whole seconds (Retry-After's delay-seconds, RFC 9110 §10.2.3: never sooner than
/// the draw), kept within [min, max] (min rounded up, max down, to whole seconds). With the
/// defaults an overload's first refusals get 2 s (1 s · [1, 1.5), rounded up). A refusal early in
/// an overload is told to come back soon; one late in a long overload is told to wait about as
/// long again, so that a client that obeys comes back about when the server can serve it, after
/// one refusal rather than four.
///
/// The overload begins with the first refusal after a calm period and ends when `calm` passes
/// without a refusal.
///
/// \code{.cpp}
///  stormguard::admission::retry_after_pacer pacer;   // factor 2, 1 s .. 60 s, spread 0.5, calm 2
///  s
///  ... when refusing a request at `now`:
///  const auto wait = pacer.refusal(now, rng);          // whole seconds
///  add_header("Retry-After", std::to_string(stormguard::admission::retry_after_seconds(wait)));
/// \endcode
#ifndef STORMGUARD_ADMISSION_RETRY_AFTER_PACER_HPP
#define STORMGUARD_ADMISSION_RETRY_AFTER_PACER_HPP

#include <chrono>
#include <optional>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"
#include "stormguard/random.hpp"

namespace stormguard::admission {

/// The pacer's settings.
struct retry_after_pacer_options {
  /// The shortest Retry-After before the spread: in [1 s, 1 h] (rounded up to whole seconds);
  /// default 1 s.
  duration min = std::chrono::seconds(1);
  /// The longest: in [1 s, 1 h] and at least `min` (rounded down to whole seconds); default 60 s.
  duration max = std::chrono::seconds(60);
  /// Retry-After is factor · the overload's age before the spread: in [0.1, 100]; default 2.
  double factor = 2.0;
  /// The upward spread, as a fraction of the delay: in [0, 1]; default 0.5 (delays drawn over
  /// [d, 1.5 d), then rounded up to whole seconds and kept within [min, max]).
  double spread = 0.5;
  /// An overload ends after this long without a refusal: in (0, 1 h]; default 2 s.
  duration calm = std::chrono::seconds(2);
  friend bool operator==(const retry_after_pacer_options&,
                         const retry_after_pacer_options&) = default;
};

/// See the file comment. Not thread-safe: one owner (a server's event loop) calls it. Times are
/// of one steady clock (any, as long as it is the same at every call).
class STORMGUARD_EXPORT retry_after_pacer {
 public:
  /// Validates `options`; throws std::invalid_argument naming the field and the value.
  explicit retry_after_pacer(retry_after_pacer_options options = {});

  /// A request is refused at `now`: the overload goes on (or begins), and the Retry-After to
  /// send with the refusal: whole seconds in [min, max]. A `now` earlier than the last refusal's
  /// is taken as the last refusal's (a clock never runs back for the pacer).
  [[nodiscard]] duration refusal(time_point now, random_generator& rng) noexcept;
  /// When the overload that is on at `now` began, or nullopt when the server is calm.
  [[nodiscard]] std::optional<time_point> overload_began(time_point now) const noexcept;
  /// The validated settings.
  [[nodiscard]] const retry_after_pacer_options& options() const noexcept { return options_; }

 private:
  retry_after_pacer_options options_;
  std::optional<time_point> began_;
  time_point last_{};
};

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_RETRY_AFTER_PACER_HPP
