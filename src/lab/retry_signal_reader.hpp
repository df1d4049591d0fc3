// SPDX-License-Identifier: Apache-2.0
// Internal: serve's retry signals (stormguard/admission/retry_signals.hpp) read from libevent's
// requests. Every request of the scenario's and the payments endpoints goes through recognise():
// its header labels, its Idempotency-Key and its fingerprint, as 64-bit keys cut from SHA-256
// digests (OpenSSL libcrypto, as the guard's fingerprint_of):
//
//   who          the Authorization field's value when present (the principal), else the peer's
//                address (without the port: a client's next connection has another)
//   fingerprint  SHA-256 of "stormguard retry fingerprint v1", who, method, target as sent, body
//   key          SHA-256 of "stormguard retry idempotency key v1", who, Idempotency-Key (the
//                first field)
//
// each part preceded by its length (8 bytes, big-endian), so that no two requests hash the same
// bytes. Recognition and counting only: no request is refused for a signal. Loop thread only (one
// digest context, reused); counts() from any thread.
#ifndef STORMGUARD_LAB_RETRY_SIGNAL_READER_HPP
#define STORMGUARD_LAB_RETRY_SIGNAL_READER_HPP

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "stormguard/admission/retry_signals.hpp"
#include "stormguard/clock.hpp"

struct evhttp_request;
struct evp_md_ctx_st;

namespace stormguard::lab::detail {

class retry_signal_reader {
 public:
  /// Throws as admission::retry_signal_recognizer does; std::bad_alloc.
  explicit retry_signal_reader(admission::retry_signals_options options = {});
  ~retry_signal_reader();
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
  /// `req`'s fingerprint, computed again (nullopt when libcrypto fails or the client has gone:
  /// without its connection the peer is unknown).
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
  struct ctx_deleter {
    void operator()(evp_md_ctx_st* c) const noexcept;
  };
  // A context that has hashed `domain` already, copied for each digest (saves OpenSSL 3's
  // per-call algorithm fetch and the domain's bytes); null when libcrypto failed.
  static std::unique_ptr<evp_md_ctx_st, ctx_deleter> prefixed(std::string_view domain) noexcept;
  admission::retry_signal_recognizer recognizer_;
  std::unique_ptr<evp_md_ctx_st, ctx_deleter> ctx_;
  std::unique_ptr<evp_md_ctx_st, ctx_deleter> fingerprint_prefix_;
  std::unique_ptr<evp_md_ctx_st, ctx_deleter> key_prefix_;
};

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_LAB_RETRY_SIGNAL_READER_HPP
