// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry_policy.hpp"

#include <array>
#include <stdexcept>
#include <string>

#include "stormguard/detail/enum_names.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard {

namespace {
constexpr std::array<std::string_view, 9> k_end_reason_names{"success",
                                                             "not_retryable",
                                                             "attempts_exhausted",
                                                             "budget_exhausted",
                                                             "retry_after_too_long",
                                                             "deadline_exceeded",
                                                             "cancelled",
                                                             "throttled",
                                                             "server_refused"};
}  // namespace

std::string_view to_string(end_reason value) noexcept {
  return detail::enum_name(value, k_end_reason_names);
}

namespace {

const retry_options& validated(const retry_options& options) {
  if (options.max_retries < 0 || options.max_retries > 1'000'000) {
    throw std::invalid_argument(
        "stormguard::retry_policy: max_retries must be in [0, 1000000], got " +
        std::to_string(options.max_retries));
  }
  if (options.max_retry_after <= duration::zero()) {
    throw std::invalid_argument("stormguard::retry_policy: max_retry_after must be > 0, got " +
                                format_duration(options.max_retry_after));
  }
  return options;
}

}  // namespace

retry_policy::retry_policy(retry_options options)
    : options_(validated(options)), backoff_(options_.backoff) {}

}  // namespace stormguard
