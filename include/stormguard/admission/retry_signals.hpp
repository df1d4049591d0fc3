// SPDX-License-Identifier: Apache-2.0
/// \file
/// Retry signals: what lets a server tell a retry from a first attempt when the client runs no
/// stormguard code. Recognition and counting only; what admission does with them is the
/// server's choice (docs/admission.md, "Retry signals").
///
/// Strong signals (a client or a proxy says so, or the request is a retry by definition):
///
/// \code{.unparsed}
///  x-envoy-attempt-count: 2         Envoy's router: the attempt number, 1 for the first
///                                   (router filter, "x-envoy-attempt-count";
///                                   include_request_attempt_count)
///  grpc-previous-rpc-attempts: 1    gRPC clients: attempts before this one; absent on the first
///                                   (gRFC A6 "gRPC Retry Design", "Exposed Retry Metadata")
///  amz-sdk-request: attempt=2; max=3
///                                   the AWS SDKs: this attempt's number (1 for the first) and
///                                   the most attempts, max_attempts (the SDKs' retry
///                                   middleware: aws-sdk-js-v3 middleware-retry, the Kotlin and
///                                   Swift SDKs; "Retry behavior", AWS SDKs and Tools
///                                   Reference Guide, for max_attempts)
///  retry-attempt: 1                 Microsoft Graph SDKs' retry handler: the retry number, added
///                                   on each retry (msgraph-sdk-design, middleware/RetryHandler)
///  Idempotency-Key seen again       the same key from the same principal within the window: one
///                                   logical request sent again (IETF draft
///                                   draft-ietf-httpapi-idempotency-key-header-07)
/// \endcode
///
/// The weak signal: a request fingerprint (principal or peer, method, target, a digest of the
/// body; computed by the caller) seen again within the window after the server's answer to that
/// fingerprint failed (5xx, refused, or the connection closed unanswered). Clients that label
/// nothing (curl `--retry`, go-retryablehttp, scripts) still repeat the very same request. Weak
/// because identical requests are also legitimate (a page polled every second): it never fires
/// without a failure before it, and a match is used once.
///
/// \code{.cpp}
///  stormguard::admission::retry_signal_recognizer recognizer;  // 2 tables of 65,536 entries
///  stormguard::admission::retry_labels labels;
///  for (const auto& [name, value] : request_fields) labels.field(name, value);
///  const auto seen = recognizer.recognise(clock.now(), labels, key_digest, fingerprint);
///  if (seen.strong()) { ... a retry, by a label or a repeated key ... }
///  ... after answering 5xx (or dropping the connection):
///  recognizer.failed(clock.now(), fingerprint);
/// \endcode
///
/// Bad values are never a crash and never a recognised retry: a label whose value does not
/// follow its grammar (not digits, a sign, out of range, empty, a list, two fields that read
/// differently) is label_state::malformed and counted apart (retry_signal_counts::malformed).
/// Everything here is thread-safe, allocates only at construction, and never throws after it.
#ifndef STORMGUARD_ADMISSION_RETRY_SIGNALS_HPP
#define STORMGUARD_ADMISSION_RETRY_SIGNALS_HPP

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "stormguard/admission/recent_keys.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/http_syntax.hpp"
#include "stormguard/export.hpp"
#include "stormguard/retry_headers.hpp"

namespace stormguard::admission {

/// One way a request can show that it is a retry. The first k_retry_label_count are header
/// labels. The order is the order of k_retry_signals, of the counts and of the metrics.
enum class retry_signal : std::uint8_t {
  envoy_attempt_count,     ///< strong: `x-envoy-attempt-count` >= 2
  grpc_previous_attempts,  ///< strong: `grpc-previous-rpc-attempts` >= 1
  amz_sdk_request,         ///< strong: `amz-sdk-request` with attempt >= 2
  graph_retry_attempt,     ///< strong: `retry-attempt` >= 1
  idempotency_key,         ///< strong: an Idempotency-Key seen again within the window
  fingerprint,             ///< weak: a fingerprint seen again after a failed answer
};

/// How many retry signals there are.
inline constexpr std::size_t k_retry_signal_count = 6;
/// How many of them are header labels (the first ones).
inline constexpr std::size_t k_retry_label_count = 4;
/// Every signal, in order.
inline constexpr std::array<retry_signal, k_retry_signal_count> k_retry_signals{
    retry_signal::envoy_attempt_count, retry_signal::grpc_previous_attempts,
    retry_signal::amz_sdk_request,     retry_signal::graph_retry_attempt,
    retry_signal::idempotency_key,     retry_signal::fingerprint};

/// The AWS SDKs' request header: `attempt=N; max=M` (lower case, as HTTP/2 sends it).
inline constexpr std::string_view k_amz_sdk_request_header = "amz-sdk-request";
/// Microsoft Graph SDKs' retry number header (sent as `Retry-Attempt`; names compare
/// case-insensitively).
inline constexpr std::string_view k_graph_retry_attempt_header = "retry-attempt";
/// The idempotency key header (sent as `Idempotency-Key`).
inline constexpr std::string_view k_idempotency_key_header = "idempotency-key";

/// The signal's position in k_retry_signals (and in every count array).
[[nodiscard]] constexpr std::size_t index_of(retry_signal s) noexcept {
  return static_cast<std::size_t>(s);
}

/// The signal's name: the label value of its metrics and its key in `GET /stats`. The header
/// name for a label ("x-envoy-attempt-count", "grpc-previous-rpc-attempts", "amz-sdk-request",
/// "retry-attempt"), else "idempotency-key" or "fingerprint".
[[nodiscard]] constexpr std::string_view signal_name(retry_signal s) noexcept {
  switch (s) {
    case retry_signal::envoy_attempt_count:
      return k_attempt_count_header;
    case retry_signal::grpc_previous_attempts:
      return k_previous_attempts_header;
    case retry_signal::amz_sdk_request:
      return k_amz_sdk_request_header;
    case retry_signal::graph_retry_attempt:
      return k_graph_retry_attempt_header;
    case retry_signal::idempotency_key:
      return k_idempotency_key_header;
    case retry_signal::fingerprint:
      return "fingerprint";
  }
  return "fingerprint";
}

/// True for the strong signals (every one but the fingerprint).
[[nodiscard]] constexpr bool is_strong(retry_signal s) noexcept {
  return s != retry_signal::fingerprint;
}

/// True for the header labels (index_of(s) < k_retry_label_count): the only signals that can
/// be malformed.
[[nodiscard]] constexpr bool is_label(retry_signal s) noexcept {
  return index_of(s) < k_retry_label_count;
}

/// What one label says.
enum class label_state : std::uint8_t {
  absent,         ///< the request does not carry it
  first_attempt,  ///< well-formed, and says this is the first attempt
  retry,          ///< well-formed, and says this is a retry: the signal is recognised
  malformed,      ///< present but unreadable: not a recognised retry, counted apart
};

/// One label read.
struct label_reading {
  label_state state = label_state::absent;  ///< see label_state
  /// The attempt number the label says, 1 for a first attempt, in [1, k_max_attempt_number];
  /// 0 when absent or malformed.
  std::int64_t attempt = 0;

  /// True when the label says this is a retry (state retry).
  [[nodiscard]] constexpr bool is_retry() const noexcept { return state == label_state::retry; }
  friend constexpr bool operator==(const label_reading&, const label_reading&) = default;
};

/// Reads one field value of header label `label` (absent for a signal that is no label). Each
/// number is 1*DIGIT (no sign, no spaces inside; SP/HTAB around the value or a parameter are
/// allowed), at most k_max_attempt_number as an attempt number:
///
/// \code{.unparsed}
///  x-envoy-attempt-count       N in [1, max]: attempt N (Envoy counts the first as 1).
///                              0, -1, 1.0, 0x2, two, empty, 99999999999, "1, 2": malformed
///  grpc-previous-rpc-attempts  N in [0, max - 1]: attempt N + 1 (0: a first attempt)
///  retry-attempt               N in [0, max - 1]: attempt N + 1 (0: a first attempt)
///  amz-sdk-request             parameters separated by ';', each name=value, names in any
///                              case: `attempt` exactly once, in [1, max]; `max`, if present,
///                              at most once, in [attempt, max]; others (`ttl`) ignored; empty
///                              parameters ignored. Anything else (no attempt, attempt=0,
///                              attempt above max, a parameter without '=', a repeated attempt)
///                              is malformed.
/// \endcode
[[nodiscard]] STORMGUARD_EXPORT label_reading read_retry_label(retry_signal label,
                                                               std::string_view value) noexcept;

/// Reads a request's labels from its header fields one at a time (HTTP lets a field appear more
/// than once): call field(name, value) for every field, then reading(label). The first field of
/// a label is read with read_retry_label; a repeated one that reads differently makes that label
/// malformed; one that reads the same counts once. Names compare case-insensitively (ASCII);
/// other fields are ignored. No allocation, keeps no view of the values. Not thread-safe (one
/// per request).
class STORMGUARD_EXPORT retry_labels {
 public:
  /// Takes one header field (name without the colon; value as received).
  void field(std::string_view name, std::string_view value) noexcept;
  /// Whether field() reads a field named `name` (one of the labels' names, case-insensitive):
  /// a caller that holds values as C strings may skip measuring the others'.
  [[nodiscard]] static constexpr bool reads(std::string_view name) noexcept {
    for (std::size_t i = 0; i < k_retry_label_count; ++i) {
      if (stormguard::detail::equals_ignoring_case(name, signal_name(k_retry_signals[i]))) {
        return true;
      }
    }
    return false;
  }
  /// What the fields taken so far say for `label` (absent for a signal that is no label).
  [[nodiscard]] label_reading reading(retry_signal label) const noexcept {
    return is_label(label) ? readings_[index_of(label)] : label_reading{};
  }

 private:
  std::array<label_reading, k_retry_label_count> readings_{};
};

/// The sizes and windows of a recognizer's two tables (recent_keys_options: capacity in entries
/// of 16 bytes, window). Defaults: 65,536 entries (1 MiB) and 60 s each.
struct retry_signals_options {
  /// Idempotency keys seen (a repeat within the window is a retry).
  recent_keys_options idempotency_keys{};
  /// Fingerprints whose answer failed (seen again within the window: a weak signal).
  recent_keys_options failed_fingerprints{};
};

/// What one request showed (retry_signal_recognizer::recognise).
struct request_signals {
  /// The labels, in retry_signal order.
  std::array<label_state, k_retry_label_count> labels{};
  /// Its idempotency key was seen within the window before.
  bool repeated_idempotency_key = false;
  /// Its fingerprint's answer failed within the window before (that failure is used up).
  bool fingerprint_after_failure = false;

  /// Whether signal `s` recognised this request as a retry.
  [[nodiscard]] constexpr bool shows(retry_signal s) const noexcept {
    if (is_label(s)) return labels[index_of(s)] == label_state::retry;
    return s == retry_signal::idempotency_key ? repeated_idempotency_key
                                              : fingerprint_after_failure;
  }
  /// Whether label `s` was malformed (false for the other signals).
  [[nodiscard]] constexpr bool malformed(retry_signal s) const noexcept {
    return is_label(s) && labels[index_of(s)] == label_state::malformed;
  }
  /// Recognised by at least one strong signal.
  [[nodiscard]] constexpr bool strong() const noexcept {
    for (const retry_signal s : k_retry_signals) {
      if (is_strong(s) && shows(s)) return true;
    }
    return false;
  }
  /// Recognised by the weak signal only (never a reason to refuse a healthy server's request).
  [[nodiscard]] constexpr bool weak_only() const noexcept {
    return fingerprint_after_failure && !strong();
  }
};

/// Counts since construction (each read atomically; the set is not one instant).
struct retry_signal_counts {
  std::int64_t requests = 0;  ///< requests recognise() saw
  /// Requests each signal recognised as a retry, in retry_signal order (a request may count
  /// under several).
  std::array<std::int64_t, k_retry_signal_count> recognised{};
  /// Requests whose label was malformed, in retry_signal order (0 for the last two).
  std::array<std::int64_t, k_retry_signal_count> malformed{};
  std::int64_t strong = 0;     ///< requests recognised by at least one strong signal
  std::int64_t weak_only = 0;  ///< requests recognised by the fingerprint alone
  std::int64_t failures = 0;   ///< failed() calls
};

/// Recognises the retry signals of each request and counts them: see the file comment.
/// Thread-safe (several worker threads may share one); memory fixed at construction
/// (memory_bytes()).
///
/// Example (tests/reference_admission_examples_test.cpp, run by the tests):
/// \snippet reference_admission_examples_test.cpp retry_signal_recognizer
class STORMGUARD_EXPORT retry_signal_recognizer {
 public:
  /// Allocates the two tables. Throws std::invalid_argument naming the field
  /// (recent_keys_options.capacity or .window) and the value; std::bad_alloc.
  explicit retry_signal_recognizer(retry_signals_options options = {});

  /// Recognises one request arriving at `now` (the server's steady clock): its `labels`; its
  /// `idempotency_key` (a digest of the principal or peer and the key; empty: it carries none),
  /// recorded and compared with the keys seen within the window; its `fingerprint` (a digest of
  /// the principal or peer, method, target and body; empty: not fingerprinted), compared with
  /// the fingerprints that failed within the window (a match is used up). Counts what it shows.
  request_signals recognise(time_point now, const retry_labels& labels,
                            std::optional<std::uint64_t> idempotency_key,
                            std::optional<std::uint64_t> fingerprint) noexcept;
  /// The server's answer to a request with `fingerprint` failed at `now`: a 5xx, a refusal, or
  /// the connection closed without an answer (by the server, or by the client before it came).
  void failed(time_point now, std::uint64_t fingerprint) noexcept;

  /// What was recognised so far.
  [[nodiscard]] retry_signal_counts counts() const noexcept;
  /// The table of idempotency keys.
  [[nodiscard]] const recent_keys& idempotency_keys() const noexcept { return keys_; }
  /// The table of failed fingerprints.
  [[nodiscard]] const recent_keys& failed_fingerprints() const noexcept { return failed_; }
  /// Bytes both tables hold (fixed).
  [[nodiscard]] std::size_t memory_bytes() const noexcept {
    return keys_.memory_bytes() + failed_.memory_bytes();
  }

 private:
  recent_keys keys_;
  recent_keys failed_;
  std::atomic<std::int64_t> requests_{0};
  std::array<std::atomic<std::int64_t>, k_retry_signal_count> recognised_{};
  std::array<std::atomic<std::int64_t>, k_retry_signal_count> malformed_{};
  std::atomic<std::int64_t> strong_{0};
  std::atomic<std::int64_t> weak_only_{0};
  std::atomic<std::int64_t> failures_{0};
};

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_RETRY_SIGNALS_HPP
