#include "sim/metrics.hpp"

#include <algorithm>
#include <chrono>

namespace stormguard::sim::engine {

namespace {

// a ÷ b, undefined (nullopt) when b is 0: no requests means no ratio, not a ratio of 0.
std::optional<double> ratio(std::int64_t a, std::int64_t b) {
  if (b == 0) return std::nullopt;
  return static_cast<double>(a) / static_cast<double>(b);
}

// Nearest rank: the ceil(0.99 · n)-th smallest latency, in ms.
std::optional<double> p99_ms(std::vector<std::int64_t>& latencies) {
  if (latencies.empty()) return std::nullopt;
  const std::size_t rank = (latencies.size() * 99 + 99) / 100;
  auto nth = latencies.begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(latencies.begin(), nth, latencies.end());
  return static_cast<double>(*nth) / 1e6;
}

}  // namespace

std::optional<bin_range> whole_bins_after_incident(const scenario& s) {
  const std::int64_t end = s.length.count();
  if (!s.incident || s.incident->end.count() >= end) return std::nullopt;
  const std::int64_t incident_end = s.incident->end.count();
  return bin_range{static_cast<std::size_t>((incident_end + k_bin_ns - 1) / k_bin_ns),
                   static_cast<std::size_t>(end / k_bin_ns)};
}

std::optional<double> recovery_seconds(const scenario& s, std::span<const time_bin> series) {
  const auto bins = whole_bins_after_incident(s);
  if (!bins) return std::nullopt;
  constexpr int k_run = 5;
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

metrics::metrics(const scenario& s, std::string name, double expected_requests)
    : s_(s), end_(s.length.count()) {
  result_.name = std::move(name);
  result_.series.assign(static_cast<std::size_t>((end_ + k_bin_ns - 1) / k_bin_ns), time_bin{});
  result_.fine_series.assign(static_cast<std::size_t>((end_ + k_fine_bin_ns - 1) / k_fine_bin_ns),
                             fine_bin{});
  latencies_.reserve(static_cast<std::size_t>(expected_requests * 1.05) + 16);
}

strategy_result metrics::finish(std::int64_t in_flight_attempts, std::int64_t requests_in_flight) {
  strategy_result& m = result_;
  m.in_flight_attempts = in_flight_attempts;
  m.requests_in_flight = requests_in_flight;
  m.amplification = ratio(m.attempts, m.logical_requests);
  m.success_ratio = ratio(m.successes, m.logical_requests);
  if (s_.incident) {
    m.incident_amplification = ratio(m.incident_attempts, m.incident_logical_requests);
  }
  std::int64_t peak = 0;
  for (const time_bin& b : m.series) peak = std::max(peak, b.attempts);
  m.peak_load_ratio = static_cast<double>(peak) / s_.requests_per_second;
  m.p99_latency_ms = p99_ms(latencies_);
  m.recovery_s = recovery_seconds(s_, m.series);
  if (const auto bins = whole_bins_after_incident(s_); bins && bins->first < bins->end) {
    std::int64_t attempts = 0;
    for (std::size_t k = bins->first; k < bins->end; ++k) {
      attempts += m.series[k].attempts;
      if (m.series[k].logical_requests > 0) m.recovery_measurable = true;
    }
    m.after_incident_attempt_rate =
        static_cast<double>(attempts) / static_cast<double>(bins->end - bins->first);
  }
  return std::move(result_);
}

}  // namespace stormguard::sim::engine
