// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/retry_signals.hpp"

#include "stormguard/detail/http_syntax.hpp"

namespace stormguard::admission {

namespace {

constexpr label_reading k_malformed{label_state::malformed, 0};

// 1*DIGIT within [0, max] after trimming SP/HTAB (stormguard::detail::plain_decimal).
std::optional<std::int64_t> number(std::string_view v, std::int64_t max) noexcept {
  return stormguard::detail::plain_decimal(stormguard::detail::trim_ows(v), max);
}

label_reading attempt_reading(std::int64_t attempt) noexcept {
  return {attempt >= 2 ? label_state::retry : label_state::first_attempt, attempt};
}

// `amz-sdk-request: attempt=N; max=M[; ttl=…]`.
label_reading read_amz_sdk_request(std::string_view value) noexcept {
  std::optional<std::int64_t> attempt;
  std::optional<std::int64_t> most;
  bool repeated = false;
  while (true) {
    const std::size_t semicolon = value.find(';');
    const std::string_view part = stormguard::detail::trim_ows(value.substr(0, semicolon));
    if (!part.empty()) {
      const std::size_t equals = part.find('=');
      if (equals == std::string_view::npos) return k_malformed;
      const std::string_view name = stormguard::detail::trim_ows(part.substr(0, equals));
      const std::string_view v = part.substr(equals + 1);
      const bool is_attempt = stormguard::detail::equals_ignoring_case(name, "attempt");
      if (is_attempt || stormguard::detail::equals_ignoring_case(name, "max")) {
        std::optional<std::int64_t>& slot = is_attempt ? attempt : most;
        if (slot) repeated = true;
        slot = number(v, k_max_attempt_number);
        if (!slot || *slot < 1) return k_malformed;
      }
    }
    if (semicolon == std::string_view::npos) break;
    value.remove_prefix(semicolon + 1);
  }
  if (repeated || !attempt || (most && *attempt > *most)) return k_malformed;
  return attempt_reading(*attempt);
}

}  // namespace

label_reading read_retry_label(retry_signal label, std::string_view value) noexcept {
  switch (label) {
    case retry_signal::envoy_attempt_count: {
      const auto n = number(value, k_max_attempt_number);
      return n && *n >= 1 ? attempt_reading(*n) : k_malformed;
    }
    case retry_signal::grpc_previous_attempts:
    case retry_signal::graph_retry_attempt: {
      const auto n = number(value, k_max_attempt_number - 1);
      return n ? attempt_reading(*n + 1) : k_malformed;
    }
    case retry_signal::amz_sdk_request:
      return read_amz_sdk_request(value);
    case retry_signal::idempotency_key:
    case retry_signal::fingerprint:
      break;
  }
  return {};
}

void retry_labels::field(std::string_view name, std::string_view value) noexcept {
  for (std::size_t i = 0; i < k_retry_label_count; ++i) {
    const retry_signal label = k_retry_signals[i];
    if (!stormguard::detail::equals_ignoring_case(name, signal_name(label))) continue;
    const label_reading r = read_retry_label(label, value);
    label_reading& kept = readings_[i];
    if (kept.state == label_state::absent) {
      kept = r;
    } else if (kept != r) {
      kept = k_malformed;  // two fields that say different things say nothing
    }
    return;
  }
}

retry_signal_recognizer::retry_signal_recognizer(retry_signals_options options)
    : keys_(options.idempotency_keys), failed_(options.failed_fingerprints) {}

request_signals retry_signal_recognizer::recognise(
    time_point now, const retry_labels& labels, std::optional<std::uint64_t> idempotency_key,
    std::optional<std::uint64_t> fingerprint) noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  request_signals seen;
  for (std::size_t i = 0; i < k_retry_label_count; ++i) {
    seen.labels[i] = labels.reading(k_retry_signals[i]).state;
  }
  if (idempotency_key) seen.repeated_idempotency_key = keys_.insert(*idempotency_key, now);
  if (fingerprint) seen.fingerprint_after_failure = failed_.take(*fingerprint, now);
  requests_.fetch_add(1, relaxed);
  for (const retry_signal s : k_retry_signals) {
    if (seen.shows(s)) recognised_[index_of(s)].fetch_add(1, relaxed);
    if (seen.malformed(s)) malformed_[index_of(s)].fetch_add(1, relaxed);
  }
  if (seen.strong()) strong_.fetch_add(1, relaxed);
  if (seen.weak_only()) weak_only_.fetch_add(1, relaxed);
  return seen;
}

void retry_signal_recognizer::failed(time_point now, std::uint64_t fingerprint) noexcept {
  failed_.remember(fingerprint, now);
  failures_.fetch_add(1, std::memory_order_relaxed);
}

retry_signal_counts retry_signal_recognizer::counts() const noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  retry_signal_counts c;
  c.requests = requests_.load(relaxed);
  for (std::size_t i = 0; i < k_retry_signal_count; ++i) {
    c.recognised[i] = recognised_[i].load(relaxed);
    c.malformed[i] = malformed_[i].load(relaxed);
  }
  c.strong = strong_.load(relaxed);
  c.weak_only = weak_only_.load(relaxed);
  c.failures = failures_.load(relaxed);
  return c;
}

}  // namespace stormguard::admission
