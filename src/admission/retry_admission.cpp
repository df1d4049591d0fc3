// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/retry_admission.hpp"

namespace stormguard::admission {

bool retry_admission::admit(time_point now, const attempt_info& attempt) noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  if (attempt.malformed) malformed_.fetch_add(1, relaxed);
  if (!attempt.is_retry()) {
    budget_.deposit(now);
    first_attempts_.fetch_add(1, relaxed);
    return true;
  }
  if (budget_.try_withdraw(now)) {
    retries_admitted_.fetch_add(1, relaxed);
    return true;
  }
  retries_refused_.fetch_add(1, relaxed);
  return false;
}

retry_admission_counts retry_admission::counts() const noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  return retry_admission_counts{first_attempts_.load(relaxed), retries_admitted_.load(relaxed),
                                retries_refused_.load(relaxed), malformed_.load(relaxed)};
}

}  // namespace stormguard::admission
