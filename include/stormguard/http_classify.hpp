// SPDX-License-Identifier: Apache-2.0
/// \file
/// The retry rules of HTTP, as classifications.
///
/// Which failed HTTP attempts are worth another attempt (RFC 9110; docs/design.md, "The essay this
/// project started from"):
/// - a final response: retry 429, 502, 503, 504 (configurable: retryable_statuses), honouring
///   Retry-After; never another 4xx — except 409 Conflict on a request that carries an
///   Idempotency-Key, which is the server's idempotency guard saying "a request with this key is
///   in progress" (draft-ietf-httpapi-idempotency-key-header-07 §2.7; stormguard::guard); not
///   500/501 by default (more likely a bug than a blip);
/// - a transport failure before the request was sent (resolve, connect, refused): retry;
/// - anything that may have reached the server (a retryable status, a send/receive error, a
///   timeout waiting for the response) is retried only when the request may be sent again: an
///   idempotent method (RFC 9110 §9.2.2) or a request carrying an Idempotency-Key.
///
/// \code{.cpp}
///  auto c = stormguard::classify_http_status(503, "GET", false, std::chrono::seconds(2));
///  // c == classification::retry_after(2 s)
///  stormguard::classify_http_status(503, "POST", false, std::nullopt);   // stop: no key
///  stormguard::classify_transport_failure(stormguard::transport_phase::not_sent, "POST", false);
///  // retry: the server never saw it
/// \endcode
///
/// The table of these rules with their reasons is in docs/http.md ("Classification"). The mapping
/// from libcurl's CURLcode to transport_phase lives in the libcurl client (stormguard::http).
/// All functions are pure and thread-safe.
#ifndef STORMGUARD_HTTP_CLASSIFY_HPP
#define STORMGUARD_HTTP_CLASSIFY_HPP

#include <bitset>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/classify.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"

namespace stormguard {

/// The set of HTTP status codes that may be retried. Default: 429, 502, 503, 504 (RFC 9110
/// §15.5.20, §15.6.3-15.6.5: temporary conditions). Not 500/501 by default. Plain value type: cheap
/// to copy (a 600-bit set), no allocation; const member functions are thread-safe, mutation needs
/// external synchronisation.
class STORMGUARD_EXPORT retryable_statuses {
 public:
  /// The lowest status code accepted (RFC 9110 §15: three digits, 1xx..5xx).
  static constexpr int min_status = 100;
  /// The highest status code accepted.
  static constexpr int max_status = 599;

  /// {429, 502, 503, 504}.
  retryable_statuses();
  /// Exactly `statuses` (duplicates are harmless). Note that `retryable_statuses{}` is the
  /// default set (empty braces value-initialise); for an empty set pass an empty span.
  /// Throws std::invalid_argument naming the status when one is outside [100, 599].
  explicit retryable_statuses(std::initializer_list<int> statuses);
  /// Same as the initializer_list constructor.
  explicit retryable_statuses(std::span<const int> statuses);

  /// True when `status` is in the set; false for any status outside [100, 599]. Never throws.
  [[nodiscard]] bool contains(int status) const noexcept;

  /// Adds `status`. Throws std::invalid_argument naming it when outside [100, 599].
  void add(int status);
  /// Removes `status` (no effect when absent). Throws std::invalid_argument naming it when
  /// outside [100, 599].
  void remove(int status);

  /// The statuses in ascending order.
  [[nodiscard]] std::vector<int> to_vector() const;
  /// The statuses in ascending order, comma-separated: "429,502,503,504" ("" when empty).
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const retryable_statuses&, const retryable_statuses&) = default;

 private:
  std::bitset<max_status + 1> set_;
};

/// True when a request may be sent again although it may already have reached the server:
/// its method is idempotent (is_idempotent_method, RFC 9110 §9.2.2; case-sensitive), or it carries
/// an idempotency key. Never throws.
[[nodiscard]] STORMGUARD_EXPORT bool may_resend(std::string_view method,
                                                bool has_idempotency_key) noexcept;

/// Classifies an attempt that got a final HTTP response with `status` (the client calls it
/// only for statuses it does not treat as success, i.e. outside 2xx/3xx):
///  - status not in `statuses` => stop, except 409 with has_idempotency_key (the key's first
///    request is still in progress at the server: retried, honouring its Retry-After, whatever
///    `statuses` holds; a server that uses 409 for a lasting conflict replays it under the same
///    key, so the retries end at the policy's attempt limit);
///  - !may_resend(method, has_idempotency_key) => stop (a POST without a key is never retried,
///    whatever the error);
///  - `retry_after` set => classification::retry_after(*retry_after);
///  - otherwise classification::retry() (own backoff; this includes an unparsable Retry-After,
///    which the caller passes as nullopt — it never means "retry at once").
///
/// `retry_after` is the parsed Retry-After (parse_retry_after), >= 0; a negative value counts as
/// 0 (classification::retry_after clamps). Whether a delay is too long (max_retry_after, the
/// deadline) is the retry policy's decision, not this function's. Never throws.
[[nodiscard]] STORMGUARD_EXPORT classification
classify_http_status(int status, std::string_view method, bool has_idempotency_key,
                     std::optional<duration> retry_after, const retryable_statuses& statuses = {});

/// Where a transport failure happened relative to sending the request.
enum class transport_phase {
  not_sent,    ///< the request certainly did not reach the server (resolve, connect, refused)
  maybe_sent,  ///< it may have been sent and processed (send/recv error, empty reply, timeout
               ///< waiting for the response)
};

/// not_sent => retry for any method; maybe_sent => retry only if may_resend(...), else stop.
/// Never throws.
[[nodiscard]] STORMGUARD_EXPORT classification classify_transport_failure(
    transport_phase phase, std::string_view method, bool has_idempotency_key) noexcept;

}  // namespace stormguard

#endif  // STORMGUARD_HTTP_CLASSIFY_HPP
