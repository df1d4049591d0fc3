// stormguard/sim/simulator.hpp: the discrete-event storm simulator.
//
// `simulate(scenario, strategy)` runs one strategy through one scenario on virtual time and
// returns its metrics and its 1-second time series. The model (docs/simulator.md has the full
// description):
//
//   - Load: logical requests arrive as one Poisson process of `requests_per_second` (exponential
//     inter-arrival times -ln(1-u)/rate, u from stormguard::uniform_unit), assigned round-robin to
//     `clients` client instances. Arrivals stop at the scenario's length.
//   - Clients: each owns a stormguard::random_generator and a budget of the strategy's kind. A
//     logical request deposits into its client's budget, then sends attempt 1. A failed attempt
//     (a 503 or a timeout) goes to retry_policy::decide(attempt, classification::retry(),
//     previous_delay, rng, budget, now): retry after the delay, or end the logical request.
//   - Server: `workers` slots and a FIFO queue of at most `queue_limit` attempts; an attempt that
//     finds the queue full is rejected at once (503). Service time depends on the phase at the
//     moment service starts. The server completes abandoned (timed-out) attempts too.
//   - Timeouts: an attempt not answered within `timeout` is abandoned by its client; a later
//     response is ignored (counted as wasted work). A response at exactly the deadline is late.
//     The network adds no delay.
//
// The run is deterministic: events are ordered by (time, sequence number), the arrival process
// has its own generator seeded from the scenario seed (so every strategy sees the same arrivals),
// and client i's generator is seeded from (seed, i, strategy name). The simulation stops at the
// scenario's length; attempts still unanswered then are counted as in flight.
//
//   auto result = stormguard::sim::simulate(stormguard::sim::friday_night(),
//                                           *stormguard::sim::find_strategy("naive"));
//   if (result.amplification) std::cout << *result.amplification << '\n';
#ifndef STORMGUARD_SIM_SIMULATOR_HPP
#define STORMGUARD_SIM_SIMULATOR_HPP

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::sim {

/// What happened in one 1-second bin [t, t + 1 s) of simulated time. Attempts are counted when
/// they start; successes, failures and timeouts when they happen.
struct time_bin {
  std::int64_t logical_requests = 0;  ///< logical requests that arrived (the demand)
  std::int64_t attempts = 0;          ///< attempts sent (first attempts and retries)
  std::int64_t successes = 0;         ///< attempts answered in time (= logical successes: goodput)
  std::int64_t failures = 0;          ///< attempts rejected with a 503 (queue full)
  std::int64_t timeouts = 0;          ///< attempts abandoned at their timeout
  std::int64_t queue_length = 0;      ///< attempts waiting in the server's queue at the bin's end

  friend bool operator==(const time_bin&, const time_bin&) = default;
};

/// The metrics of one strategy on one scenario. Per-attempt counters satisfy
///   attempts = successes + failures + timeouts + in_flight_attempts
/// and per-logical-request counters satisfy
///   logical_requests = successes + attempts_exhausted + budget_exhausted + throttled +
///                      requests_in_flight.
struct strategy_result {
  std::string name;  ///< the strategy's name

  // Per logical request.
  std::int64_t logical_requests = 0;    ///< logical requests started within the simulated time
  std::int64_t attempts_exhausted = 0;  ///< ended after max_retries retries all failed
  std::int64_t budget_exhausted = 0;    ///< ended because the budget denied a retry (fail fast)
  /// rejected locally before their first attempt (adaptive_throttle; zero for other budgets)
  std::int64_t throttled = 0;
  std::int64_t requests_in_flight = 0;  ///< not ended when the simulation stopped

  // Per attempt.
  std::int64_t attempts = 0;            ///< attempts sent
  std::int64_t successes = 0;           ///< attempts answered within their timeout
  std::int64_t failures = 0;            ///< attempts rejected with a 503 (queue full)
  std::int64_t timeouts = 0;            ///< attempts abandoned at their timeout
  std::int64_t in_flight_attempts = 0;  ///< attempts still awaiting an answer at the end
  /// Abandoned attempts that the server nevertheless served to completion (its wasted work).
  std::int64_t wasted_work = 0;

  // During the incident [start, end) clipped to the simulated time; zero without an incident.
  std::int64_t incident_logical_requests = 0;  ///< logical requests that arrived in it
  std::int64_t incident_attempts = 0;          ///< attempts sent in it

  /// attempts ÷ logical_requests; nullopt when no logical request arrived (0/0 is undefined).
  std::optional<double> amplification;
  /// incident_attempts ÷ incident_logical_requests; nullopt without an incident or when no
  /// logical request arrived during it.
  std::optional<double> incident_amplification;
  /// The largest attempts count of any 1-s bin ÷ requests_per_second (1.0 ≈ the demand).
  double peak_load_ratio = 0.0;
  /// successes ÷ logical_requests (in-flight requests count as not successful); nullopt when no
  /// logical request arrived.
  std::optional<double> success_ratio;
  /// The 99th percentile (nearest rank) of the latency of successful logical requests, from the
  /// start of the first attempt to the success, in milliseconds; nullopt when none succeeded.
  std::optional<double> p99_latency_ms;
  /// Seconds from the end of the incident until the start of the first run of 5 consecutive
  /// whole 1-s bins with demand, each starting at or after the end of the incident, whose goodput
  /// (successes) is >= 95 % of the logical requests that arrived in the same bin (> 0). Bins
  /// without demand neither count towards the run nor break it; the run starts at its first bin.
  /// nullopt when there is no incident, when no logical request arrived in the whole bins after
  /// it (undefined: "n/a" in the table), or when no such run fits in the simulated time (never
  /// recovered).
  std::optional<double> recovery_s;

  std::int64_t events = 0;       ///< events processed (for performance measurements)
  std::vector<time_bin> series;  ///< one bin per started second of simulated time
};

/// The results of several strategies on one scenario, in the order they were given.
struct simulation_report {
  sim::scenario scenario;
  std::vector<strategy_result> strategies;
};

/// Runs `strat` through `s`. Throws std::invalid_argument (with validate()'s message) for an
/// invalid scenario, and std::bad_alloc if memory runs out (validate() bounds the logical
/// requests to 10,000,000: about 400 MB). Times saturate instead of overflowing. Deterministic: the
/// same arguments always give the same result. Thread-safe (no shared state); independent runs may
/// go in parallel.
[[nodiscard]] strategy_result simulate(const scenario& s, const strategy& strat);

/// Runs every strategy in `strategies` through `s`, in order.
[[nodiscard]] simulation_report simulate(const scenario& s, std::span<const strategy> strategies);

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_SIMULATOR_HPP
