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

/// How GET /metrics shows a count: a counter stormguard_serve_<name>_total, or a gauge
/// stormguard_serve_<name>.
enum class metric_type { counter, gauge };

/// One count of server_stats: its member, its key in GET /stats (and its metric's name), its
/// metric type and the metric's HELP text.
struct stats_count {
  std::int64_t server_stats::*member;
  const char* name;
  metric_type type;
  const char* help;
};

/// THE list of server_stats' counts, in wire order: GET /stats writes and reads them
/// (wire.cpp), GET /metrics shows them (stats_text.cpp) and the server keeps one atomic each
/// (server.cpp, count<M>()). A count added here reaches all three.
// clang-format off
inline constexpr stats_count k_stats_counts[] = {
    {&server_stats::attempts, "attempts", metric_type::counter,
     "Requests read on the scenario's endpoint."},
    {&server_stats::served, "served", metric_type::counter,
     "Requests answered 200 after their service."},
    {&server_stats::served_in_time, "served_in_time", metric_type::counter,
     "Requests answered 200 within the scenario's timeout."},
    {&server_stats::rejected, "rejected", metric_type::counter,
     "Requests answered 503 at once: the queue was full."},
    {&server_stats::errors, "errors", metric_type::counter,
     "Requests answered 503 at once: the incident's error rate."},
    {&server_stats::lost, "lost", metric_type::counter,
     "Requests read and never answered: the incident's loss rate."},
    {&server_stats::queued, "queued", metric_type::gauge,
     "Requests waiting for a worker."},
    {&server_stats::in_service, "in_service", metric_type::gauge,
     "Requests in service."},
    {&server_stats::charges, "charges", metric_type::counter,
     "POST /charges requests read by the payments endpoint."},
    {&server_stats::charges_committed, "charges_committed", metric_type::counter,
     "Charges committed by this server (the handler ran)."},
    {&server_stats::charges_replayed, "charges_replayed", metric_type::counter,
     "Charges answered from the guard's stored response."},
    {&server_stats::charges_dropped, "charges_dropped", metric_type::counter,
     "Committed charges left unanswered on purpose (--fault-after-commit)."},
    {&server_stats::charges_unavailable, "charges_unavailable", metric_type::counter,
     "Charges answered 503: the idempotency store was unavailable or failing."},
    {&server_stats::requests_refused, "requests_refused", metric_type::counter,
     "Requests refused for their framing or size (400, 413, 431, 501; docs/lab.md Limits)."},
    {&server_stats::read_timeouts, "read_timeouts", metric_type::counter,
     "Connections closed: a request not read whole in time (408)."},
    {&server_stats::idle_closed, "idle_closed", metric_type::counter,
     "Idle connections closed (idle timeout, or room at the cap)."},
    {&server_stats::connections_refused, "connections_refused", metric_type::counter,
     "New connections closed at once at the connection cap."},
    {&server_stats::accept_errors, "accept_errors", metric_type::counter,
     "accept() failures (out of descriptors), each a 100 ms pause."},
    {&server_stats::store_outages, "store_outages", metric_type::counter,
     "Times the idempotency store began failing (a 503 after an answer from it)."},
    {&server_stats::store_recoveries, "store_recoveries", metric_type::counter,
     "Times the idempotency store answered again after a 503."},
    {&server_stats::write_timeouts, "write_timeouts", metric_type::counter,
     "Connections closed: an answer not taken by the client within write_timeout."},
    {&server_stats::unsent_refused, "unsent_refused", metric_type::counter,
     "Requests answered 503: the answers not yet sent exceeded max_unsent_bytes."},
    {&server_stats::unsent_bytes, "unsent_bytes", metric_type::gauge,
     "Answers written and not yet sent, all connections together, in bytes."},
    {&server_stats::incident_served, "incident_served", metric_type::counter,
     "Requests labelled x-stormguard-incident (the lab's) that took a worker."},
};
// clang-format on
/// The counts every GET /stats has; those after them (the limits' counts) read as 0 when
/// absent, from a server of an earlier version. The defences' counts (server_stats::
/// defence_decisions) follow these, one per kind of sim::defence_kinds named by its stats_key,
/// and read as 0 when absent too.
inline constexpr std::size_t k_stats_required_counts = 13;

/// The index of counter `m` in k_stats_counts (its size when `m` is not a count).
constexpr std::size_t stats_count_index(std::int64_t server_stats::*m) noexcept {
  std::size_t i = 0;
  while (i < std::size(k_stats_counts) && k_stats_counts[i].member != m) ++i;
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
