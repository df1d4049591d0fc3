// SPDX-License-Identifier: Apache-2.0
// lab/stats_text.hpp (private to stormguard::lab): the bodies of serve's `GET /stats` and
// `GET /metrics`, from the server's counters.
#ifndef STORMGUARD_LAB_STATS_TEXT_HPP
#define STORMGUARD_LAB_STATS_TEXT_HPP

#include <string>

#include "stormguard/lab/server.hpp"

namespace stormguard::lab {

/// The counters as one JSON object (the body of `GET /stats`): the fields of server_stats
/// (elapsed as "elapsed_s", seconds), plus "scenario" (its name), "phase" (phase_name),
/// "workers" and "queue_limit".
[[nodiscard]] std::string stats_json(const sim::scenario& s, const server_stats& stats);

/// The counters in the Prometheus text exposition format 0.0.4 (the body of `GET /metrics`):
/// counters stormguard_serve_{attempts,served,served_in_time,rejected,errors,lost}_total,
/// gauges stormguard_serve_{queued,in_service,elapsed_seconds}; the limits' and the defences'
/// counts; the payments endpoint's stormguard_serve_charges{,_committed,_replayed,_dropped,
/// _unavailable}_total and stormguard_serve_store_{outages,recoveries}_total (0 without it).
[[nodiscard]] std::string stats_prometheus(const server_stats& stats);

}  // namespace stormguard::lab

#endif  // STORMGUARD_LAB_STATS_TEXT_HPP
