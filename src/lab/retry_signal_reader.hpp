// SPDX-License-Identifier: Apache-2.0
// Internal: serve's retry signals (stormguard/admission/retry_signals.hpp) read from libevent's
// requests. Every request of the scenario's and the payments endpoints goes through recognise():
// its header labels, its Idempotency-Key and its fingerprint, as 64-bit keys cut from SHA-256
// digests (OpenSSL libcrypto):
//
//   who          the Authorization field's value when present (the principal), else the peer's
//                address (without the port: a client's next connection has another)
//   fingerprint  SHA-256 of the fingerprint domain block, who, method (one byte), target as sent,
//                body
//   key          SHA-256 of the key domain block, who, Idempotency-Key (the first field)
//
// The domain block is "stormguard retry fingerprint v2" (or "... idempotency key v2") padded with
// zero bytes to one SHA-256 block of 64 bytes, hashed once at construction: each digest starts
// from a copy of that state, and a bodiless GET whose who and target take at most 42 bytes
// together is one more block. Each part but the method is preceded by its length (4 bytes,
// big-endian; a part of 4 GiB or more gives no key), so that no two requests hash the same bytes.
// OpenSSL's low-level SHA-256 functions are used, not the EVP layer, whose per-digest overhead
// was twice the digest's own cost (docs/performance.md, "Retry signals"). Recognition and
// counting only; what admission does with them is the defences' choice. Loop thread only;
// counts() from any thread.
#ifndef STORMGUARD_LAB_RETRY_SIGNAL_READER_HPP
#define STORMGUARD_LAB_RETRY_SIGNAL_READER_HPP

#include <openssl/sha.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "stormguard/admission/retry_signals.hpp"
#include "stormguard/clock.hpp"

struct evhttp_request;

namespace stormguard::lab::detail {

class retry_signal_reader {
 public:
  /// Throws as admission::retry_signal_recognizer does; std::bad_alloc.
  explicit retry_signal_reader(admission::retry_signals_options options = {});
  retry_signal_reader(const retry_signal_reader&) = delete;
  retry_signal_reader& operator=(const retry_signal_reader&) = delete;

  /// What recognise() found in one request.
  struct recognition {
    /// Its fingerprint (for failed()), or nullopt when libcrypto failed (then none).
    std::optional<std::uint64_t> fingerprint;
    /// The attempt number its strong signals say, when one says it is a retry: the largest of
    /// amz-sdk-request's attempt and Microsoft Graph's retry-attempt + 1, and 2 for a repeated
    /// Idempotency-Key; 0 when no strong signal says retry. (x-envoy-attempt-count and
    /// grpc-previous-rpc-attempts are read with the attempt's other fields:
    /// detail::read_attempt_fields.)
    std::int64_t retry_attempt = 0;
    /// Its fingerprint was seen again after the server's answer to it failed (the weak signal:
    /// admission::request_signals::fingerprint_after_failure).
    bool weak_retry = false;
  };
  /// Recognises and counts `req`'s signals at `now`.
  recognition recognise(evhttp_request* req, time_point now) noexcept;
  /// Recognises and counts the retry labels among `fields` (name, value) of a request that came
  /// by another transport, at `now`: no Idempotency-Key and no fingerprint (recognition's
  /// fingerprint is nullopt, weak_retry false).
  recognition recognise_labels(std::span<const std::pair<std::string, std::string>> fields,
                               time_point now) noexcept;
  /// `req`'s fingerprint, computed again (nullopt when the client has gone and the request has
  /// no Authorization field: without its connection the peer is unknown, or for a part of 4 GiB
  /// or more).
  std::optional<std::uint64_t> fingerprint(evhttp_request* req) noexcept;
  /// The answer to a request with `fingerprint` failed at `now` (nothing for nullopt).
  void failed(std::optional<std::uint64_t> fingerprint, time_point now) noexcept {
    if (fingerprint) recognizer_.failed(now, *fingerprint);
  }
  /// Bytes the recognizer's two tables hold (fixed at construction).
  [[nodiscard]] std::size_t memory_bytes() const noexcept { return recognizer_.memory_bytes(); }
  /// The counts so far. Any thread.
  [[nodiscard]] admission::retry_signal_counts counts() const noexcept {
    return recognizer_.counts();
  }

 private:
  // The fingerprint of `req` sent by `from` (nullopt: unknown, no fingerprint).
  std::optional<std::uint64_t> fingerprint(evhttp_request* req,
                                           std::optional<std::string_view> from) noexcept;
  admission::retry_signal_recognizer recognizer_;
  SHA256_CTX fingerprint_prefix_{};  // the fingerprint domain block hashed
  SHA256_CTX key_prefix_{};          // the key domain block hashed
};

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_LAB_RETRY_SIGNAL_READER_HPP
