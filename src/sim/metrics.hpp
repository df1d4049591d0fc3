// The metrics of one run of the time-series model (private to stormguard::sim): the counters, the
// 1-s and 100-ms time series and the latencies as events happen, then the derived metrics
// (ratios, p99, peak, and the post-incident metrics: recovery and the attempt rate after the
// incident), computed in this one place for the table, JSON, the load sweep and the plots.
#ifndef STORMGUARD_SRC_SIM_METRICS_HPP
#define STORMGUARD_SRC_SIM_METRICS_HPP

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

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_SRC_SIM_METRICS_HPP
