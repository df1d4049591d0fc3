// SPDX-License-Identifier: Apache-2.0
// The metrics of one run of the time-series model (part of the internal engine shared by the
// simulator and the lab): the counters, the 1-s and 100-ms time series and the latencies as events
// happen, then the derived metrics (ratios, p99, peak, and the post-incident metrics: recovery and
// the attempt rate after the incident), computed in this one place for the table, JSON, the load
// sweep and the plots.
#ifndef STORMGUARD_ENGINE_METRICS_HPP
#define STORMGUARD_ENGINE_METRICS_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"

namespace stormguard::sim::engine {

inline constexpr std::int64_t k_bin_ns = 1'000'000'000;            // the 1-second bins
inline constexpr std::int64_t k_fine_bin_ns = k_fine_bin.count();  // the plots' bins

// The whole 1-s bins after the incident: [first, end). nullopt when there is no incident or it
// does not end within the simulated time.
struct bin_range {
  std::size_t first;
  std::size_t end;
};
[[nodiscard]] std::optional<bin_range> whole_bins_after_incident(const scenario& s);

// Seconds from the end of the incident to the start of the first run of 5 good whole bins (see
// strategy_result::recovery_s).
[[nodiscard]] std::optional<double> recovery_seconds(const scenario& s,
                                                     std::span<const time_bin> series);

// The derived figures of a result from its counters and its 1-s series: amplification,
// incident_amplification, served_amplification, incident_served_amplification, success_ratio,
// peak_load_ratio, recovery_s, recovery_measurable, after_incident_attempt_rate. The one formula
// of each, for a simulated run (metrics::finish) and for the lab's merged parts
// (lab::merge_parts). The latency percentiles come from the latencies, not from here.
void derive(const scenario& s, strategy_result& m);

class metrics {
 public:
  metrics(const scenario& s, std::string name, double expected_requests);

  [[nodiscard]] strategy_result& counters() noexcept { return result_; }

  void arrival(std::int64_t now, bool in_incident) {
    ++result_.logical_requests;
    ++bin(now).logical_requests;
    ++fine(now).logical_requests;
    if (in_incident) ++result_.incident_logical_requests;
  }
  void attempt(std::int64_t now, bool in_incident) {
    ++result_.attempts;
    ++bin(now).attempts;
    ++fine(now).attempts;
    if (in_incident) ++result_.incident_attempts;
  }
  void failure(std::int64_t now) {
    ++result_.failures;
    ++bin(now).failures;
  }
  void timeout(std::int64_t now) {
    ++result_.timeouts;
    ++bin(now).timeouts;
  }
  void success(std::int64_t now, std::int64_t latency) {
    ++result_.successes;
    ++bin(now).successes;
    ++fine(now).successes;
    latencies_.push_back(latency);
  }

  // Records `queue_length` as the queue length at the end of every bin that ends at or before t.
  void sample_queue_until(std::int64_t t, std::int64_t queue_length) {
    while (next_sample_bin_ < result_.series.size() &&
           static_cast<std::int64_t>(next_sample_bin_ + 1) * k_bin_ns <= t) {
      result_.series[next_sample_bin_++].queue_length = queue_length;
    }
  }

  // The result, with the derived metrics. `in_flight_attempts` and `requests_in_flight` are
  // the engine's counts at the end of the run.
  strategy_result finish(std::int64_t in_flight_attempts, std::int64_t requests_in_flight);

 private:
  // The bin of time t. Every processed event lies in [0, end), so the index is always in range;
  // the check makes a bug a clear exception rather than a write out of bounds.
  [[nodiscard]] time_bin& bin(std::int64_t t) {
    if (t < 0 || t >= end_) throw std::logic_error("stormguard::sim: event time out of range");
    return result_.series[static_cast<std::size_t>(t / k_bin_ns)];
  }
  [[nodiscard]] fine_bin& fine(std::int64_t t) {
    return result_.fine_series[static_cast<std::size_t>(t / k_fine_bin_ns)];
  }

  const scenario& s_;
  std::int64_t end_;
  std::vector<std::int64_t> latencies_;
  std::size_t next_sample_bin_ = 0;
  strategy_result result_;
};

// Definitions (header-only: the engine target has no compiled code).

namespace metrics_detail {

// a ÷ b, undefined (nullopt) when b is 0: no requests means no ratio, not a ratio of 0.
inline std::optional<double> ratio(std::int64_t a, std::int64_t b) {
  if (b == 0) return std::nullopt;
  return static_cast<double>(a) / static_cast<double>(b);
}

// Nearest rank: the ceil(0.99 · n)-th smallest latency, in ms.
inline std::optional<double> p99_ms(std::vector<std::int64_t>& latencies) {
  if (latencies.empty()) return std::nullopt;
  const std::size_t rank = (latencies.size() * 99 + 99) / 100;
  auto nth = latencies.begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(latencies.begin(), nth, latencies.end());
  return static_cast<double>(*nth) / 1e6;
}

// Nearest rank: the ceil(0.999 · n)-th smallest latency, in ms.
inline std::optional<double> p999_ms(std::vector<std::int64_t>& latencies) {
  if (latencies.empty()) return std::nullopt;
  const std::size_t rank = (latencies.size() * 999 + 999) / 1000;
  auto nth = latencies.begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(latencies.begin(), nth, latencies.end());
  return static_cast<double>(*nth) / 1e6;
}

}  // namespace metrics_detail

inline std::optional<bin_range> whole_bins_after_incident(const scenario& s) {
  const std::int64_t end = s.length.count();
  if (!s.incident || s.incident->end.count() >= end) return std::nullopt;
  const std::int64_t incident_end = s.incident->end.count();
  return bin_range{static_cast<std::size_t>((incident_end + k_bin_ns - 1) / k_bin_ns),
                   static_cast<std::size_t>(end / k_bin_ns)};
}

// Recovery is a run of this many whole 1-s bins with demand, each with goodput >= 95 %.
inline constexpr int k_recovery_run = 5;

inline std::optional<double> recovery_seconds(const scenario& s, std::span<const time_bin> series) {
  const auto bins = whole_bins_after_incident(s);
  if (!bins) return std::nullopt;
  constexpr int k_run = k_recovery_run;
  // A bin without demand says nothing about recovery: it neither counts towards the run nor
  // breaks it. The run starts at its first bin with demand.
  int run = 0;
  std::size_t run_start = 0;
  for (std::size_t k = bins->first; k < bins->end; ++k) {
    const time_bin& b = series[k];
    if (b.logical_requests == 0) continue;
    const bool good =
        static_cast<double>(b.successes) >= 0.95 * static_cast<double>(b.logical_requests);
    if (!good) {
      run = 0;
      continue;
    }
    if (run++ == 0) run_start = k;
    if (run == k_run) {
      const std::int64_t start = static_cast<std::int64_t>(run_start) * k_bin_ns;
      return static_cast<double>(start - s.incident->end.count()) / 1e9;
    }
  }
  return std::nullopt;
}

inline metrics::metrics(const scenario& s, std::string name, double expected_requests)
    : s_(s), end_(s.length.count()) {
  result_.name = std::move(name);
  result_.series.assign(static_cast<std::size_t>((end_ + k_bin_ns - 1) / k_bin_ns), time_bin{});
  result_.fine_series.assign(static_cast<std::size_t>((end_ + k_fine_bin_ns - 1) / k_fine_bin_ns),
                             fine_bin{});
  latencies_.reserve(static_cast<std::size_t>(expected_requests * 1.05) + 16);
}

inline void derive(const scenario& s, strategy_result& m) {
  m.amplification = metrics_detail::ratio(m.attempts, m.logical_requests);
  m.success_ratio = metrics_detail::ratio(m.successes, m.logical_requests);
  m.incident_amplification = std::nullopt;
  m.incident_served_amplification = std::nullopt;
  if (s.incident) {
    m.incident_amplification =
        metrics_detail::ratio(m.incident_attempts, m.incident_logical_requests);
    m.incident_served_amplification =
        metrics_detail::ratio(m.incident_served, m.incident_logical_requests);
  }
  m.served_amplification = metrics_detail::ratio(m.served, m.logical_requests);
  std::int64_t peak = 0;
  for (const time_bin& b : m.series) peak = std::max(peak, b.attempts);
  m.peak_load_ratio = static_cast<double>(peak) / s.requests_per_second;
  m.recovery_s = recovery_seconds(s, m.series);
  m.recovery_measurable = false;
  m.after_incident_attempt_rate = std::nullopt;
  if (const auto bins = whole_bins_after_incident(s); bins && bins->first < bins->end) {
    std::int64_t attempts = 0;
    int with_demand = 0;
    for (std::size_t k = bins->first; k < bins->end; ++k) {
      attempts += m.series[k].attempts;
      if (m.series[k].logical_requests > 0) ++with_demand;
    }
    // Fewer bins with demand than one run: the run ends before recovery could be seen ("n/a",
    // not "never").
    m.recovery_measurable = with_demand >= k_recovery_run;
    m.after_incident_attempt_rate =
        static_cast<double>(attempts) / static_cast<double>(bins->end - bins->first);
  }
}

inline strategy_result metrics::finish(std::int64_t in_flight_attempts,
                                       std::int64_t requests_in_flight) {
  strategy_result& m = result_;
  m.in_flight_attempts = in_flight_attempts;
  m.requests_in_flight = requests_in_flight;
  derive(s_, m);
  m.p99_latency_ms = metrics_detail::p99_ms(latencies_);
  m.p999_latency_ms = metrics_detail::p999_ms(latencies_);
  return std::move(result_);
}

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_METRICS_HPP
