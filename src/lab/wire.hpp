// SPDX-License-Identifier: Apache-2.0
// The lab server's wire formats, defined once for both sides of the socket (private to
// stormguard::lab): the server writes them (src/lab/server.cpp, src/lab/charges.cpp) and
// `lab payments` reads them (src/lab/payments.cpp), with nlohmann::json's to_json/from_json.
//
//   GET /stats   {"scenario":"friday-night","phase":"normal","clock_started":true,
//                 "elapsed_s":1.5,"attempts":…,"served":…,"served_in_time":…,"rejected":…,
//                 "errors":…,"lost":…,"queued":…,"in_service":…,"charges":…,
//                 "charges_committed":…,"charges_replayed":…,"charges_dropped":…,
//                 "charges_unavailable":…, the limits' and defences' counts,…,
//                 "retry_signals":{"x-envoy-attempt-count":…,…,"fingerprint":…},
//                 "retry_signals_malformed":{"x-envoy-attempt-count":…,…},"workers":…,
//                 "queue_limit":…,"instance":"16 hex digits, new at every start"}
//   GET /ledger?after=CURSOR&limit=N
//                {"store":"sqlite","rows":[{"id":"ch_…","principal":"…","key":"…",
//                 "amount":100,"currency":"eur"},…],"next":"CURSOR"}   ("next" only when more
//                 rows may follow: the `after` of the next page)
//
// Text is written with stormguard_engine/json_writer.hpp's dump_json (bad UTF-8 as U+FFFD).
#ifndef STORMGUARD_SRC_LAB_WIRE_HPP
#define STORMGUARD_SRC_LAB_WIRE_HPP

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stormguard/lab/server.hpp"

namespace stormguard::lab::wire {

/// The server_stats members that are counts and their names in GET /stats, in wire order.
// clang-format off
inline constexpr const char* k_stats_count_names[] = {
    "attempts", "served", "served_in_time", "rejected", "errors", "lost", "queued", "in_service",
    "charges", "charges_committed", "charges_replayed", "charges_dropped", "charges_unavailable",
    "requests_refused", "read_timeouts", "idle_closed", "connections_refused",
    "accept_errors", "store_outages", "store_recoveries", "write_timeouts", "unsent_refused",
    "unsent_bytes", "incident_served"};
// clang-format on
inline constexpr std::int64_t server_stats::*k_stats_counts[] = {&server_stats::attempts,
                                                                 &server_stats::served,
                                                                 &server_stats::served_in_time,
                                                                 &server_stats::rejected,
                                                                 &server_stats::errors,
                                                                 &server_stats::lost,
                                                                 &server_stats::queued,
                                                                 &server_stats::in_service,
                                                                 &server_stats::charges,
                                                                 &server_stats::charges_committed,
                                                                 &server_stats::charges_replayed,
                                                                 &server_stats::charges_dropped,
                                                                 &server_stats::charges_unavailable,
                                                                 &server_stats::requests_refused,
                                                                 &server_stats::read_timeouts,
                                                                 &server_stats::idle_closed,
                                                                 &server_stats::connections_refused,
                                                                 &server_stats::accept_errors,
                                                                 &server_stats::store_outages,
                                                                 &server_stats::store_recoveries,
                                                                 &server_stats::write_timeouts,
                                                                 &server_stats::unsent_refused,
                                                                 &server_stats::unsent_bytes,
                                                                 &server_stats::incident_served};
static_assert(std::size(k_stats_count_names) == std::size(k_stats_counts));
/// The counts every GET /stats has; those after them (the limits' counts) read as 0 when
/// absent, from a server of an earlier version. The defences' counts (server_stats::
/// defence_decisions) follow these, one per kind of sim::defence_kinds named by its stats_key,
/// and read as 0 when absent too.
inline constexpr std::size_t k_stats_required_counts = 13;

/// The index of counter `m` in k_stats_counts (its size when `m` is not a count).
constexpr std::size_t stats_count_index(std::int64_t server_stats::*m) noexcept {
  std::size_t i = 0;
  while (i < std::size(k_stats_counts) && k_stats_counts[i] != m) ++i;
  return i;
}

/// GET /stats: the server's counters (server_stats, elapsed in seconds), its scenario's name,
/// phase (phase_name), workers and queue limit.
struct stats_message {
  std::string scenario;
  std::string phase;
  server_stats stats;
  int workers = 0;
  std::int64_t queue_limit = 0;
};

/// Every member, in the order above.
void to_json(nlohmann::ordered_json& j, const stats_message& m);
/// Throws nlohmann::json::exception when a member is missing or of another type.
void from_json(const nlohmann::json& j, stats_message& m);

/// One ledger row (also the value the Redis ledger list stores).
struct ledger_row {
  std::string id;  ///< "ch_" and 32 hex digits, new for every run of the handler
  std::string principal;
  std::string key;  ///< the Idempotency-Key as the guard parsed it ("" without one: off only)
  std::int64_t amount = 0;
  std::string currency;
};

void to_json(nlohmann::ordered_json& j, const ledger_row& r);
/// A member that is missing or of another type reads as empty (0 for amount).
void from_json(const nlohmann::json& j, ledger_row& r);

/// The most rows of one GET /ledger page (`limit`), and the default.
inline constexpr std::int64_t k_ledger_max_limit = 1000;

/// GET /ledger: the store's name and one page of its rows in commit order.
struct ledger_message {
  std::string store;
  std::vector<ledger_row> rows;
  /// The cursor of the next page (its `after`), when more rows may follow; empty at the end.
  std::string next;
};

void to_json(nlohmann::ordered_json& j, const ledger_message& m);
/// Throws nlohmann::json::exception unless `j` is an object with a "rows" array; "store" and
/// "next" may be missing (empty); rows that are not objects are skipped.
void from_json(const nlohmann::json& j, ledger_message& m);

}  // namespace stormguard::lab::wire

#endif  // STORMGUARD_SRC_LAB_WIRE_HPP
