// SPDX-License-Identifier: Apache-2.0
// app/payments_report.hpp (the application layer: not installed): the audit of `stormguard lab
// payments` (stormguard::lab::run_payments) as JSON and as a table.
#ifndef STORMGUARD_APP_PAYMENTS_REPORT_HPP
#define STORMGUARD_APP_PAYMENTS_REPORT_HPP

#include <string>

#include "stormguard/lab/payments.hpp"

namespace stormguard::lab {

/// One JSON object: charges, ledger_rows, duplicates, lost, unconfirmed, attempts,
/// client_attempts, succeeded, failed, replayed, conflicts, unavailable, dropped (null when
/// unknown), no_response, other_rows, store, servers,
/// fault_after_commit (null when unknown), policy, elapsed_s, charges_per_s, interrupted, passed,
/// counters_reset, max_failed, gave_up.
[[nodiscard]] std::string to_json(const payments_audit& audit);

/// The table: one figure per line, the verdict last.
[[nodiscard]] std::string format_table(const payments_audit& audit);

}  // namespace stormguard::lab

#endif  // STORMGUARD_APP_PAYMENTS_REPORT_HPP
