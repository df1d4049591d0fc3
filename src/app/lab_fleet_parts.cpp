// SPDX-License-Identifier: Apache-2.0
// A lab fleet spread over several processes (app/lab_fleet.hpp: fleet_part,
// merge_parts, part_to_json, part_from_json): each process runs a part of the clients and
// arrivals; one merges the parts' figures with the server's counters, computing the derived
// figures as the simulator does (stormguard_engine/metrics.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "app/lab_fleet.hpp"
#include "stormguard/version.hpp"
#include "stormguard_engine/metrics.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::lab {

namespace {

using json = nlohmann::json;

// The counters a part reports, by name: every counter of strategy_result, from its one list.
template <class R, class F>
void counters(R& r, F&& f) {
  sim::strategy_result::for_each_counter(r, std::forward<F>(f));
}

}  // namespace

sim::scenario fleet_part(const sim::scenario& s, std::size_t k, std::size_t parts) {
  if (parts < 1 || parts > 64 || k >= parts) {
    throw std::invalid_argument("stormguard::lab::fleet_part: part " + std::to_string(k) + " of " +
                                std::to_string(parts) +
                                ": parts must be in [1, 64] and the part below them");
  }
  if (s.clients < static_cast<int>(parts)) {
    throw std::invalid_argument("stormguard::lab::fleet_part: " + std::to_string(parts) +
                                " parts of " + std::to_string(s.clients) +
                                " clients: every part needs a client of its own");
  }
  // The clients split as evenly as whole clients allow (the parts add up to the scenario's
  // clients), and each part's rate is its clients' share: every client sends what it sends in
  // the simulator, requests_per_second ÷ clients.
  sim::scenario part = s;
  const int whole = s.clients / static_cast<int>(parts);
  const int left = s.clients % static_cast<int>(parts);
  part.clients = whole + (static_cast<int>(k) < left ? 1 : 0);
  part.requests_per_second =
      s.requests_per_second * static_cast<double>(part.clients) / static_cast<double>(s.clients);
  if (parts > 1) part.seed = sim::seeds::mix(s.seed, 0x70617274ULL + k);  // "part"
  return part;
}

sim::strategy_result merge_parts(const sim::scenario& s,
                                 std::span<const sim::strategy_result> parts,
                                 const server_stats& st) {
  sim::strategy_result m;
  if (!parts.empty()) m.name = parts.front().name;
  m.series.assign(static_cast<std::size_t>((s.length.count() + sim::engine::k_bin_ns - 1) /
                                           sim::engine::k_bin_ns),
                  sim::time_bin{});
  for (const sim::strategy_result& p : parts) {
    counters(m, [&](const char* name, std::int64_t& total) {
      counters(p, [&](const char* other, const std::int64_t& v) {
        if (std::string_view(name) == other) total += v;
      });
    });
    for (std::size_t k = 0; k < p.series.size() && k < m.series.size(); ++k) {
      sim::time_bin& b = m.series[k];
      b.logical_requests += p.series[k].logical_requests;
      b.attempts += p.series[k].attempts;
      b.successes += p.series[k].successes;
      b.failures += p.series[k].failures;
      b.timeouts += p.series[k].timeouts;
    }
    const auto larger = [](std::optional<double>& a, std::optional<double> b) {
      if (b && (!a || *b > *a)) a = b;
    };
    larger(m.p99_latency_ms, p.p99_latency_ms);
    larger(m.p999_latency_ms, p.p999_latency_ms);
  }
  // A peak, not a count (summed above with the counters): the parts' modelled stores do not add
  // up second by second.
  m.store_busiest_second = 0;
  for (const sim::strategy_result& p : parts) {
    m.store_busiest_second = std::max(m.store_busiest_second, p.store_busiest_second);
  }
  m.lost = st.lost;
  m.wasted_work = std::max<std::int64_t>(0, st.served - st.served_in_time);
  m.served = st.served + st.in_service;
  m.rejected = st.rejected + st.defence_rejected();
  m.expired_dropped = st.dropped_expired();
  m.incident_served = st.incident_served;
  sim::engine::derive(s, m);
  return m;
}

namespace {

json part_json(const sim::strategy_result& r) {
  json j;
  j["wire"] = k_lab_wire_version;
  j["name"] = r.name;
  counters(r, [&](const char* name, const std::int64_t& v) { j[name] = v; });
  if (r.p99_latency_ms) j["p99_latency_ms"] = *r.p99_latency_ms;
  if (r.p999_latency_ms) j["p999_latency_ms"] = *r.p999_latency_ms;
  json series = json::array();
  for (const sim::time_bin& b : r.series) {
    series.push_back({b.logical_requests, b.attempts, b.successes, b.failures, b.timeouts});
  }
  j["series"] = std::move(series);
  return j;
}

// Refuses a line of another wire version (k_lab_wire_version), naming both: the worker that
// wrote it is another build of stormguard, whose counters may mean something else.
void check_wire(const json& j) {
  const auto it = j.find("wire");
  if (it == j.end()) {
    throw std::invalid_argument(fmt::format(
        "the line has no \"wire\" version: written by a worker of lab wire 1 (stormguard 0.1); "
        "this process reads lab wire {} (stormguard {}): run the workers from the same build",
        k_lab_wire_version, version()));
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() != k_lab_wire_version) {
    throw std::invalid_argument(fmt::format(
        "\"wire\" is {}: written by a worker of another lab wire version; this process reads "
        "lab wire {} (stormguard {}): run the workers from the same build",
        it->dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 40), k_lab_wire_version,
        version()));
  }
}

// Bad UTF-8 in a strategy name or a message becomes U+FFFD (as detail::dump_json does), never a
// throw.
std::string line(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string part_to_json(const sim::strategy_result& r) { return line(part_json(r)); }

std::string part_report_to_json(const part_report& r) {
  json j = part_json(r.result);
  j["transport_failures"] = r.transport_failures;
  j["first_transport_failure"] = r.first_transport_failure;
  j["fleet_syncs"] = r.fleet_syncs;
  j["fleet_sync_errors"] = r.fleet_sync_errors;
  j["fleet_rejoins"] = r.fleet_rejoins;
  j["fleet_syncers"] = r.fleet_syncers;
  j["fleet_never_synced"] = r.fleet_never_synced;
  j["fleet_fallback_s"] = r.fleet_fallback_s;
  j["fleet_forgotten"] = r.fleet_forgotten;
  j["fleet_forgotten_at_s"] = r.fleet_forgotten_at_s;
  return line(j);
}

std::string parts_store_reason(std::span<const part_report> parts, std::string_view store,
                               duration length) {
  part_report t;
  for (const part_report& p : parts) {
    t.fleet_syncs += p.fleet_syncs;
    t.fleet_sync_errors += p.fleet_sync_errors;
    t.fleet_syncers += p.fleet_syncers;
    t.fleet_never_synced += p.fleet_never_synced;
    t.fleet_fallback_s += p.fleet_fallback_s;
  }
  if (t.fleet_syncers == 0) return {};
  const double seconds = std::chrono::duration<double>(length).count();
  const double share = seconds > 0 ? t.fleet_fallback_s / (seconds * t.fleet_syncers) : 0.0;
  if (t.fleet_never_synced == 0 && share <= k_max_fallback_share) return {};
  return fmt::format(
      "the fleet store {} did not serve the run: {} of {} syncers never synced and the fleet "
      "budgets ran in their fallback (local ratio budgets) for {:.0f} % of the run ({} syncs "
      "answered, {} failed; is Redis up there, and its password given?); the simulator's column "
      "models a working store, so the figures are not comparable",
      store, t.fleet_never_synced, t.fleet_syncers, std::min(share, 1.0) * 100, t.fleet_syncs,
      t.fleet_sync_errors);
}

std::string parts_invalid_reason(std::span<const part_report> parts, const server_stats& st) {
  std::int64_t failures = 0;
  std::string first;
  for (const part_report& p : parts) {
    failures += p.transport_failures;
    if (first.empty()) first = p.first_transport_failure;
  }
  if (failures == 0 && st.accept_errors == 0 && st.connections_refused == 0) return {};
  return fmt::format(
      "the lab's own sockets failed: {} attempts of the worker processes ended without a "
      "response other than by time-out{}, the lab server's accept() failed {} times and it "
      "closed {} new connections at its connection cap (descriptors ran out: raise "
      "RLIMIT_NOFILE, ulimit -n, or lower --scale); the figures measure the lab, not the "
      "scenario",
      failures, first.empty() ? std::string() : " (first: " + first + ")", st.accept_errors,
      st.connections_refused);
}

part_report part_report_from_json(std::string_view text) {
  part_report r;
  r.result = part_from_json(text);
  try {
    const json j = json::parse(text);
    const auto count = [&](const char* name, std::int64_t& v) {
      if (j.contains(name)) v = j.at(name).get<std::int64_t>();
      if (v < 0) throw std::invalid_argument(std::string(name) + " is negative");
    };
    count("transport_failures", r.transport_failures);
    if (j.contains("first_transport_failure")) {
      r.first_transport_failure = j.at("first_transport_failure").get<std::string>();
    }
    count("fleet_syncs", r.fleet_syncs);
    count("fleet_sync_errors", r.fleet_sync_errors);
    count("fleet_rejoins", r.fleet_rejoins);
    count("fleet_syncers", r.fleet_syncers);
    count("fleet_never_synced", r.fleet_never_synced);
    if (j.contains("fleet_fallback_s")) r.fleet_fallback_s = j.at("fleet_fallback_s").get<double>();
    if (!(r.fleet_fallback_s >= 0)) throw std::invalid_argument("fleet_fallback_s is negative");
    count("fleet_forgotten", r.fleet_forgotten);
    if (j.contains("fleet_forgotten_at_s")) {
      r.fleet_forgotten_at_s = j.at("fleet_forgotten_at_s").get<double>();
    }
    if (!(r.fleet_forgotten_at_s >= -1)) {
      throw std::invalid_argument("fleet_forgotten_at_s is below -1");
    }
    return r;
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("stormguard::lab::part_report_from_json: ") + e.what());
  }
}

sim::strategy_result part_from_json(std::string_view text) {
  try {
    const json j = json::parse(text);
    check_wire(j);
    sim::strategy_result r;
    r.name = j.at("name").get<std::string>();
    counters(r, [&](const char* name, std::int64_t& v) { v = j.at(name).get<std::int64_t>(); });
    if (j.contains("p99_latency_ms")) r.p99_latency_ms = j["p99_latency_ms"].get<double>();
    if (j.contains("p999_latency_ms")) r.p999_latency_ms = j["p999_latency_ms"].get<double>();
    for (const json& b : j.at("series")) {
      r.series.push_back(sim::time_bin{b.at(0).get<std::int64_t>(), b.at(1).get<std::int64_t>(),
                                       b.at(2).get<std::int64_t>(), b.at(3).get<std::int64_t>(),
                                       b.at(4).get<std::int64_t>(), 0});
    }
    return r;
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("stormguard::lab::part_from_json: ") + e.what());
  }
}

}  // namespace stormguard::lab
