// SPDX-License-Identifier: Apache-2.0
// tests/counting_budget.hpp: a retry budget for tests that records every call the executor
// makes and grants a set number of retries.
#ifndef STORMGUARD_TESTS_COUNTING_BUDGET_HPP
#define STORMGUARD_TESTS_COUNTING_BUDGET_HPP

#include <vector>

#include "stormguard/budget.hpp"

namespace stormguard::test_util {

// Counts try_admit calls (and rejects them all when `admit` is false), grants retries while
// `grants_left` > 0, and keeps every record() report and every withdrawal's status.
struct counting_budget {
  explicit counting_budget(int grants = 1'000'000) : grants_left(grants) {}

  int admits = 0;       // try_admit calls
  int withdrawals = 0;  // try_withdraw calls, granted or not
  int grants_left;
  bool admit = true;
  std::vector<time_point> admit_times;
  std::vector<attempt_status> withdrawal_statuses;
  std::vector<attempt_report> records;

  template <class G>
  bool try_admit(time_point now, G&) {
    ++admits;
    admit_times.push_back(now);
    return admit;
  }
  template <class G>
  bool try_withdraw(time_point, attempt_status status, G&) {
    ++withdrawals;
    withdrawal_statuses.push_back(status);
    if (grants_left == 0) return false;
    --grants_left;
    return true;
  }
  void record(time_point, const attempt_report& report) { records.push_back(report); }
};
static_assert(retry_budget<counting_budget>);

}  // namespace stormguard::test_util

#endif  // STORMGUARD_TESTS_COUNTING_BUDGET_HPP
