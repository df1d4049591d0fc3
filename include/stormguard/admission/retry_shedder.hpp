// SPDX-License-Identifier: Apache-2.0
/// \file
/// Retries shed first under overload: while a server's other defences are refusing or dropping
/// requests (its queue full, CoDel dropping, its concurrency limit reached), a request
/// recognised as a retry, by a strong signal or by the weak one alone
/// (stormguard/admission/retry_signals.hpp), is refused at the door before it takes a place, so
/// that the room left goes to first attempts. While the server is calm nothing is shed: a weak
/// signal alone never refuses a healthy server's request.
///
/// Why first attempts first: under overload a retry is the work the server already failed once,
/// sent again; a first attempt is new demand. Serving first attempts keeps the fraction of
/// logical requests that succeed at first try highest, and a refused retry costs the server a
/// few hundred bytes of answer instead of a place in the queue (the retry-budget rule of "Handling
/// Overload", Site Reliability Engineering, O'Reilly 2016, ch. 21, applied at the server to
/// clients that keep no budget of their own).
///
/// \code{.cpp}
///  stormguard::admission::retry_shedder shedder;                  // hold 1 s
///  ... whenever a defence refuses or drops a request at `now`:
///  shedder.engaged(now);
///  ... for each arriving request:
///  if (shedder.shed(now, seen.strong() || seen.fingerprint_after_failure)) refuse(...);
/// \endcode
#ifndef STORMGUARD_ADMISSION_RETRY_SHEDDER_HPP
#define STORMGUARD_ADMISSION_RETRY_SHEDDER_HPP

#include <chrono>
#include <cstdint>
#include <optional>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"

namespace stormguard::admission {

/// The shedder's settings.
struct retry_shedder_options {
  /// How long the server counts as overloaded after the last refusal or drop of another
  /// defence: in [1 ms, 1 h]; default 100 ms (one CoDel interval: it bridges the gaps between
  /// CoDel's drops, and a recovered server stops shedding at once; a longer hold sheds more
  /// retries that the server could have served: docs/admission.md, "Shedding recognised
  /// retries").
  duration hold = std::chrono::milliseconds(100);
  friend bool operator==(const retry_shedder_options&, const retry_shedder_options&) = default;
};

/// See the file comment. Not thread-safe: one owner (a server's event loop, or one worker's
/// admission) calls it. Times are of one steady clock (any, as long as it is the same at every
/// call).
class STORMGUARD_EXPORT retry_shedder {
 public:
  /// Validates `options`; throws std::invalid_argument naming the field (hold) and the value.
  explicit retry_shedder(retry_shedder_options options = {});

  /// Another defence refused or dropped a request at `now` (the queue full, CoDel, the
  /// concurrency limit, drop-expired, the retry budget): the server is overloaded until
  /// now + hold. The shedder's own refusals must not be reported here (they would keep the
  /// overload on for as long as retries keep coming). An instant earlier than one already
  /// reported changes nothing.
  void engaged(time_point now) noexcept;
  /// True while the server counts as overloaded: a refusal or drop was reported within `hold`
  /// before `now` (at now = that instant + hold it is over).
  [[nodiscard]] bool overloaded(time_point now) const noexcept {
    return last_ && now - *last_ < options_.hold;
  }
  /// Whether to refuse a request arriving at `now` that is `recognised_retry` (by any signal,
  /// strong or weak): only a recognised retry, and only while overloaded. Counts what it sheds.
  [[nodiscard]] bool shed(time_point now, bool recognised_retry) noexcept {
    if (!recognised_retry || !overloaded(now)) return false;
    ++shed_;
    return true;
  }
  /// Requests shed so far.
  [[nodiscard]] std::int64_t shed_count() const noexcept { return shed_; }
  /// The validated settings.
  [[nodiscard]] const retry_shedder_options& options() const noexcept { return options_; }

 private:
  retry_shedder_options options_;
  std::optional<time_point> last_;
  std::int64_t shed_ = 0;
};

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_RETRY_SHEDDER_HPP
