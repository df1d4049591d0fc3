// SPDX-License-Identifier: Apache-2.0
/// \file
/// How a server answers what its defences decided, and what a
/// client that honours the answer does next — written once, for a real server, the simulator's
/// virtual server and the lab's clients alike.
///
/// \code{.unparsed}
///  outcome        status  grpc-retry-pushback-ms  Retry-After       a client that honours them
///  served         200     -                       -                 done
///  unavailable    503     -                       -                 may retry (own backoff)
///  retry_refused  503     -1 (do not retry)       -                 stops (server_refused)
///  over_limit     503     -                       limiter's delay   retries after the delay
///  expired        503     -1 (do not retry)       -                 stops (server_refused)
///  codel_dropped  503     -                       -                 may retry (own backoff)
///  retry_shed     503     -                       -                 may retry (own backoff)
/// \endcode
///
/// retry_refused is the server-side retry budget (retry_admission.hpp), over_limit the concurrency
/// limit (concurrency_limit.hpp: Retry-After drawn with jitter, retry_after_for_refusal), expired
/// drop-expired (defences.hpp: the caller's deadline has passed, or will before an answer),
/// codel_dropped the adaptive LIFO + CoDel queue (codel.hpp), and retry_shed a recognised retry
/// refused while the server is overloaded (retry_shedder.hpp). "unavailable" is any other
/// immediate 503 of the server's own (a full queue, an error).
///
/// \code{.cpp}
///  const stormguard::admission::reply r = stormguard::admission::reply_for(outcome);
///  if (r.do_not_retry) add_header(stormguard::k_pushback_header, r.pushback);
///  if (r.retry_after) add_header("Retry-After", std::to_string(
///      stormguard::admission::retry_after_seconds(limit.retry_after_for_refusal(rng))));
///  send(r.status, r.reason_phrase, r.body);
/// \endcode
///
/// The pushback follows gRFC A6 (a negative value: do not retry); Retry-After is RFC 9110 §10.2.3
/// (delay-seconds). Everything here is a constexpr pure function: thread-safe, no allocation.
#ifndef STORMGUARD_ADMISSION_REPLY_HPP
#define STORMGUARD_ADMISSION_REPLY_HPP

#include <chrono>
#include <cstdint>
#include <string_view>

#include "stormguard/admission/retry_admission.hpp"  // k_refusal_pushback, k_refusal_status
#include "stormguard/client_profile.hpp"
#include "stormguard/clock.hpp"

namespace stormguard::admission {

/// What a server did with one request (see the file comment's table).
enum class outcome : std::uint8_t {
  served,         ///< admitted and served
  unavailable,    ///< an immediate 503 of the server's own (a full queue, an error)
  retry_refused,  ///< the server-side retry budget refused a retry (retry_admission::admit)
  over_limit,     ///< the concurrency limit refused it (concurrency_limit::try_acquire)
  expired,        ///< drop-expired: its caller's deadline has passed or is too near (expired())
  codel_dropped,  ///< the LIFO + CoDel queue dropped it after it waited too long
  retry_shed,     ///< a recognised retry refused while the server is overloaded (retry_shedder)
};

/// The answer a server sends for an outcome.
struct reply {
  /// The HTTP status: 200 for served, 503 (k_refusal_status) for every refusal or drop.
  int status = 200;
  /// The reason phrase of `status` (RFC 9110 §15).
  std::string_view reason_phrase = "OK";
  /// True: send grpc-retry-pushback-ms with the value `pushback` (gRFC A6 "do not retry").
  bool do_not_retry = false;
  /// The pushback value to send when do_not_retry is true (k_refusal_pushback, "-1").
  std::string_view pushback{};
  /// True: send Retry-After with the concurrency limit's jittered delay (retry_after_seconds).
  bool retry_after = false;
  /// A short plain-text body that says why (one line, ending in '\n'); the server may send its
  /// own instead, e.g. for unavailable, whose cause it knows.
  std::string_view body = "ok\n";
  friend constexpr bool operator==(const reply&, const reply&) = default;
};

/// The answer to `o` (the file comment's table). Pure, constexpr, thread-safe.
[[nodiscard]] constexpr reply reply_for(outcome o) noexcept {
  reply r{.status = k_refusal_status, .reason_phrase = "Service Unavailable"};
  switch (o) {
    case outcome::served:
      return reply{};
    case outcome::unavailable:
      r.body = "unavailable\n";
      return r;
    case outcome::retry_refused:
      r.do_not_retry = true;
      r.pushback = k_refusal_pushback;
      r.body = "retry refused by the server budget\n";
      return r;
    case outcome::over_limit:
      r.retry_after = true;
      r.body = "over the concurrency limit\n";
      return r;
    case outcome::expired:
      r.do_not_retry = true;
      r.pushback = k_refusal_pushback;
      r.body = "deadline passed\n";
      return r;
    case outcome::codel_dropped:
      r.body = "dropped: waited too long\n";
      return r;
    case outcome::retry_shed:
      r.body = "retry shed: the server is overloaded\n";
      return r;
  }
  r.body = "unavailable\n";
  return r;
}

/// The Retry-After value (delay-seconds, RFC 9110 §10.2.3) for a delay: whole seconds, rounded
/// down (the concurrency limit draws whole seconds already); a negative delay gives 0.
[[nodiscard]] constexpr std::int64_t retry_after_seconds(duration delay) noexcept {
  return delay < duration::zero() ? 0
                                  : std::chrono::duration_cast<std::chrono::seconds>(delay).count();
}

/// What a client does with an answer.
enum class client_step : std::uint8_t {
  done,         ///< a 2xx: the request succeeded
  retry,        ///< a failure it may retry, after its own backoff (and budget)
  retry_after,  ///< a failure it may retry, no sooner than the server's Retry-After
  stop,         ///< the server said "do not retry" (pushback < 0): the request ends, refused
};

/// What a client does with `answer` (a reply_for result, or the fields a client read off a real
/// response: its status, whether the pushback said "do not retry", whether Retry-After came), as
/// its profile says (stormguard/client_profile.hpp): a client that ignores pushback retries a
/// "do not retry" answer as a plain failure; one that ignores Retry-After retries on its own
/// backoff. Pushback wins over Retry-After when both come and both are honoured. Whether the
/// client retries at all, and how long it waits after a Retry-After (at least, or exactly), is
/// the caller's to apply. Pure, constexpr, thread-safe.
[[nodiscard]] constexpr client_step client_step_for(const reply& answer,
                                                    const client_profile& client) noexcept {
  if (answer.status >= 200 && answer.status < 300) return client_step::done;
  if (answer.do_not_retry && client.honours_pushback) return client_step::stop;
  if (answer.retry_after && client.retry_after != retry_after_use::ignore) {
    return client_step::retry_after;
  }
  return client_step::retry;
}

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_REPLY_HPP
