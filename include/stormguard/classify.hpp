// SPDX-License-Identifier: Apache-2.0
/// \file
/// The verdict on one failed attempt, and the classifiers that give it.
///
/// A classifier is any callable that takes a failed attempt's error and returns a
/// `stormguard::classification` (retry, retry_after(d) or stop) or a bool (true = retry). The
/// retrier's default, `stormguard::default_classifier`, retries the transient I/O errors
/// (`is_transient` below) and stops on everything else it can recognise; `retry_only` and
/// `never_retry` say "retry only these" and "never retry these" in one line:
///
/// \code{.cpp}
///  auto result = retry(connect_once);                                   // default rules
///  auto strict = retry(connect_once, stormguard::retry_only(std::errc::connection_refused));
///  auto loose  = retry(connect_once, stormguard::never_retry(std::errc::permission_denied));
/// \endcode
///
/// All classifiers here are stateless values: thread-safe, cheap to copy, never allocate.
#ifndef STORMGUARD_CLASSIFY_HPP
#define STORMGUARD_CLASSIFY_HPP

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <exception>
#include <system_error>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"

namespace stormguard {

/// The verdict on one failed attempt: retry (with the policy's backoff), retry no sooner than a
/// delay the server asked for (Retry-After), or stop (the failure is not worth another attempt).
class classification {
 public:
  /// What the verdict says.
  enum class kind { retry, retry_after, stop };

  /// Retry after the policy's backoff.
  [[nodiscard]] static constexpr classification retry() noexcept { return {kind::retry, {}}; }
  /// Retry no sooner than `delay` from now (a Retry-After the server sent; RFC 9110 §10.2.3).
  /// retry_policy::decide waits max(backoff, delay) + U(0, delay / 2) (see there); a negative
  /// delay counts as 0 (a date in the past).
  [[nodiscard]] static constexpr classification retry_after(duration delay) noexcept {
    return {kind::retry_after, std::max(delay, duration::zero())};
  }
  /// Do not retry this failure.
  [[nodiscard]] static constexpr classification stop() noexcept { return {kind::stop, {}}; }

  /// This verdict, marked as the verdict on a timeout (the attempt got no answer in time).
  /// Budgets that price a retry after a timeout differently see it (retry_quota charges
  /// timeout_cost instead of retry_cost); the retry decision itself is unchanged. The default
  /// classifiers mark std::errc::timed_out.
  [[nodiscard]] constexpr classification as_timeout() const noexcept {
    classification c = *this;
    c.timeout_ = true;
    return c;
  }

  /// What the verdict says to do: retry, retry_after or stop.
  [[nodiscard]] constexpr kind action() const noexcept { return kind_; }
  /// The server's minimum delay for retry_after; zero otherwise.
  [[nodiscard]] constexpr duration delay() const noexcept { return delay_; }
  /// True when the failure was a timeout (see as_timeout).
  [[nodiscard]] constexpr bool timeout() const noexcept { return timeout_; }

  friend constexpr bool operator==(const classification&, const classification&) = default;

 private:
  constexpr classification(kind k, duration d) noexcept : kind_(k), delay_(d) {}
  kind kind_;
  duration delay_;
  bool timeout_ = false;
};

/// True for the transient I/O errors worth retrying (a network blip, not a bug):
/// std::errc::connection_refused, connection_reset, connection_aborted, timed_out,
/// host_unreachable, network_unreachable, resource_unavailable_try_again (EAGAIN; also EWOULDBLOCK
/// where they differ) and interrupted (EINTR). Compares through std::error_condition, so a
/// std::system_category code from errno matches too. False for everything else, notably
/// operation_canceled and a success (ec == 0). Thread-safe; never throws.
[[nodiscard]] STORMGUARD_EXPORT bool is_transient(const std::error_code& ec) noexcept;

/// The std::error_code carried by a std::system_error (or a type derived from it) held in `e`;
/// an empty error_code (value 0) when `e` is null or holds any other exception.
/// Rethrows `e` internally to look (the cost of one throw). Thread-safe; never throws.
[[nodiscard]] STORMGUARD_EXPORT std::error_code error_code_of(const std::exception_ptr& e) noexcept;

/// The retrier's default classifier.
///
/// - std::error_code: retry when is_transient(ec) (marked as_timeout() for timed_out); stop for
///   everything else, including operation_canceled (the caller cancelled: never retried), every
///   other errc, every code of a non-generic category that maps to none of the transient
///   conditions, and ec == 0.
/// - std::exception_ptr (the error of an operation that throws): the same rule applied to
///   error_code_of(e), so a std::system_error with a transient code is retried and every other
///   exception (std::bad_alloc, std::logic_error, a user type, …) stops the call at once with
///   end_reason::not_retryable; the exception is in the result's last_error, for the caller to
///   std::rethrow_exception if it wants.
/// - any other error type (an int, a user enum, a string…): retry (stormguard cannot know; the
///   policy's max_retries, backoff and budget still bound the retries). Pass your own classifier
///   to say which of them are transient.
///
/// Stateless; thread-safe.
struct default_classifier {
  /// A transient error code (is_transient) is retried (timed_out marked as_timeout()); any other
  /// stops.
  [[nodiscard]] classification operator()(const std::error_code& ec) const noexcept {
    if (!is_transient(ec)) return classification::stop();
    return ec == std::errc::timed_out ? classification::retry().as_timeout()
                                      : classification::retry();
  }
  /// An exception: classified as its error code (error_code_of); stops unless a transient
  /// std::system_error.
  [[nodiscard]] classification operator()(const std::exception_ptr& e) const noexcept {
    return (*this)(error_code_of(e));
  }
  template <class E>
  /// Any other error type: retry.
  [[nodiscard]] constexpr classification operator()(const E&) const noexcept {
    return classification::retry();
  }
};

/// Every error is worth a retry (bounded by max_retries, backoff and budget). The retrier's
/// default before default_classifier; kept for callers that name it. Stateless; thread-safe.
struct retry_any_error {
  template <class E>
  /// Any error: retry.
  [[nodiscard]] constexpr classification operator()(const E&) const noexcept {
    return classification::retry();
  }
};

/// A classifier over std::error_code (and std::exception_ptr holding a std::system_error) built
/// from a list of std::errc: with `listed_retry` true it retries exactly the listed conditions;
/// with false it retries everything except the listed conditions. In both modes
/// std::errc::operation_canceled, ec == 0 and an exception that is not a std::system_error
/// stop the call (cancellation is never retried). A retried timed_out is marked as_timeout().
/// Made by retry_only and never_retry. Stateless after construction; thread-safe.
template <std::size_t N, bool listed_retry>
class errc_classifier {
 public:
  /// A classifier over the conditions `codes` (see the class comment for what `listed_retry` does).
  constexpr explicit errc_classifier(std::array<std::errc, N> codes) noexcept : codes_(codes) {}

  /// Retry or stop for `ec`, as the class comment says.
  [[nodiscard]] classification operator()(const std::error_code& ec) const noexcept {
    if (!ec || ec == std::errc::operation_canceled) return classification::stop();
    const bool listed =
        std::any_of(codes_.begin(), codes_.end(), [&](std::errc c) { return ec == c; });
    if (listed != listed_retry) return classification::stop();
    return ec == std::errc::timed_out ? classification::retry().as_timeout()
                                      : classification::retry();
  }
  /// An exception: classified as its error code (error_code_of); stops unless a std::system_error.
  [[nodiscard]] classification operator()(const std::exception_ptr& e) const noexcept {
    return (*this)(error_code_of(e));
  }

 private:
  std::array<std::errc, N> codes_;
};

/// Retries exactly the listed conditions, stops on every other error (and always on
/// operation_canceled): `retry(op, retry_only(std::errc::timed_out, std::errc::connection_reset))`.
template <class... Errc>
requires(std::same_as<Errc, std::errc>&&...)
    [[nodiscard]] constexpr auto retry_only(Errc... codes) noexcept {
  return errc_classifier<sizeof...(Errc), true>(std::array<std::errc, sizeof...(Errc)>{codes...});
}

/// Stops on the listed conditions (and always on operation_canceled and on exceptions that are
/// not std::system_error), retries every other error:
/// `retry(op, never_retry(std::errc::permission_denied))`.
template <class... Errc>
requires(std::same_as<Errc, std::errc>&&...)
    [[nodiscard]] constexpr auto never_retry(Errc... codes) noexcept {
  return errc_classifier<sizeof...(Errc), false>(std::array<std::errc, sizeof...(Errc)>{codes...});
}

}  // namespace stormguard

#endif  // STORMGUARD_CLASSIFY_HPP
