// SPDX-License-Identifier: Apache-2.0
#include "stormguard/http_classify.hpp"

#include <stdexcept>

#include "stormguard/idempotency.hpp"

namespace stormguard {

namespace {

void check_status(int status) {
  if (status < retryable_statuses::min_status || status > retryable_statuses::max_status) {
    throw std::invalid_argument("retryable status: " + std::to_string(status) +
                                " is not an HTTP status code (expected " +
                                std::to_string(retryable_statuses::min_status) + ".." +
                                std::to_string(retryable_statuses::max_status) + ")");
  }
}

}  // namespace

retryable_statuses::retryable_statuses() : retryable_statuses({429, 502, 503, 504}) {}

retryable_statuses::retryable_statuses(std::initializer_list<int> statuses)
    : retryable_statuses(std::span<const int>(statuses.begin(), statuses.size())) {}

retryable_statuses::retryable_statuses(std::span<const int> statuses) {
  for (const int status : statuses) add(status);
}

bool retryable_statuses::contains(int status) const noexcept {
  return status >= min_status && status <= max_status &&
         set_.test(static_cast<std::size_t>(status));
}

void retryable_statuses::add(int status) {
  check_status(status);
  set_.set(static_cast<std::size_t>(status));
}

void retryable_statuses::remove(int status) {
  check_status(status);
  set_.reset(static_cast<std::size_t>(status));
}

std::vector<int> retryable_statuses::to_vector() const {
  std::vector<int> out;
  for (int status = min_status; status <= max_status; ++status) {
    if (set_.test(static_cast<std::size_t>(status))) out.push_back(status);
  }
  return out;
}

std::string retryable_statuses::to_string() const {
  std::string out;
  for (const int status : to_vector()) {
    if (!out.empty()) out += ',';
    out += std::to_string(status);
  }
  return out;
}

bool may_resend(std::string_view method, bool has_idempotency_key) noexcept {
  return has_idempotency_key || is_idempotent_method(method);
}

classification classify_http_status(int status, std::string_view method, bool has_idempotency_key,
                                    std::optional<duration> retry_after,
                                    const retryable_statuses& statuses) {
  // 409 on a keyed request: the server's idempotency guard says "a request with this key is in
  // progress" (draft-ietf-httpapi-idempotency-key-header-07 §2.7); the same request, sent again
  // after its Retry-After, gets the first request's response.
  const bool key_in_progress = status == 409 && has_idempotency_key;
  if (!statuses.contains(status) && !key_in_progress) return classification::stop();
  if (!may_resend(method, has_idempotency_key)) return classification::stop();
  if (retry_after) return classification::retry_after(*retry_after);
  return classification::retry();
}

classification classify_transport_failure(transport_phase phase, std::string_view method,
                                          bool has_idempotency_key) noexcept {
  if (phase == transport_phase::not_sent) return classification::retry();
  return may_resend(method, has_idempotency_key) ? classification::retry() : classification::stop();
}

}  // namespace stormguard
