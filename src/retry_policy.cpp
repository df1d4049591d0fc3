#include "stormguard/retry_policy.hpp"

#include <stdexcept>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard {

std::string_view to_string(end_reason r) noexcept {
  switch (r) {
    case end_reason::success:
      return "success";
    case end_reason::not_retryable:
      return "not_retryable";
    case end_reason::attempts_exhausted:
      return "attempts_exhausted";
    case end_reason::budget_exhausted:
      return "budget_exhausted";
    case end_reason::retry_after_too_long:
      return "retry_after_too_long";
    case end_reason::deadline_exceeded:
      return "deadline_exceeded";
    case end_reason::cancelled:
      return "cancelled";
    case end_reason::throttled:
      return "throttled";
  }
  return "unknown";
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
