// SPDX-License-Identifier: Apache-2.0
/// \file
/// The discrete-event storm simulator.
///
/// `simulate(scenario, strategy)` runs one strategy through one scenario on virtual time and
/// returns its metrics and its 1-second time series. The model (docs/simulator.md has the full
/// description):
///
/// - Load: logical requests arrive as one Poisson process of `requests_per_second` (exponential
///   inter-arrival times -ln(1-u)/rate, u from stormguard::uniform_unit), assigned round-robin to
///   `clients` client instances. Arrivals stop at the scenario's length.
/// - Clients: each owns a stormguard::random_generator and a budget of the strategy's kind. A
///   logical request deposits into its client's budget, then sends attempt 1. A failed attempt
///   (a 503 or a timeout) goes to retry_policy::decide(attempt, classification::retry(),
///   previous_delay, rng, budget, now): retry after the delay, or end the logical request.
/// - Server: `workers` slots and a FIFO queue of at most `queue_limit` attempts; an attempt that
///   finds the queue full is rejected at once (503). Service time depends on the phase at the
///   moment service starts. The server completes abandoned (timed-out) attempts too.
/// - Timeouts: an attempt not answered within `timeout` is abandoned by its client; a later
///   response is ignored (counted as wasted work). A response at exactly the deadline is late.
///   The network adds no delay.
/// - Incident: during [start, end) the service time may change (service that starts in it), and
///   each attempt sent in it may be lost by the network (never answered: a timeout) or fail at
///   once with a 503, drawn from its own generator. With server.overload, the service time of
///   an attempt is the overload's while more than above_rate attempts reached the server in the
///   last second.
/// - A scenario's max_retries replaces the strategies' (those that retry).
///
/// The run is deterministic: events are ordered by (time, sequence number), the arrival process
/// has its own generator seeded from the scenario seed (so every strategy sees the same arrivals),
/// and client i's generator is seeded from (seed, i, strategy name). The simulation stops at the
/// scenario's length; attempts still unanswered then are counted as in flight.
///
/// \code{.cpp}
///  auto result = stormguard::sim::simulate(stormguard::sim::friday_night(),
///                                          *stormguard::sim::find_strategy("naive"));
///  if (result.amplification) std::cout << *result.amplification << '\n';
/// \endcode
#ifndef STORMGUARD_SIM_SIMULATOR_HPP
#define STORMGUARD_SIM_SIMULATOR_HPP

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "stormguard/export.hpp"
#include "stormguard/sim/parallel.hpp"
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

/// The width of the bins of strategy_result::fine_series: 100 ms.
inline constexpr duration k_fine_bin = std::chrono::milliseconds(100);

/// What happened in one bin of k_fine_bin (100 ms): enough to see the waves of synchronised
/// retries that 1-s bins smooth away. Counted as in time_bin.
struct fine_bin {
  std::int64_t attempts = 0;          ///< attempts sent
  std::int64_t successes = 0;         ///< attempts answered in time (goodput)
  std::int64_t logical_requests = 0;  ///< logical requests that arrived (the demand)

  friend bool operator==(const fine_bin&, const fine_bin&) = default;
};

/// The metrics of one strategy on one scenario. Per-attempt counters satisfy
/// \code{.unparsed}
///  attempts = successes + failures + timeouts + in_flight_attempts
/// \endcode
/// and per-logical-request counters satisfy
/// \code{.unparsed}
///  logical_requests = successes + attempts_exhausted + budget_exhausted + throttled +
///                     requests_in_flight.
/// \endcode
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
  /// Attempts the network lost (incident.loss_rate): they end as timeouts (or in flight).
  std::int64_t lost = 0;
  /// Abandoned attempts that the server nevertheless served to completion (its wasted work).
  std::int64_t wasted_work = 0;

  // The logical requests that started inside the incident [start, end) (clipped to the simulated
  // time) and all their attempts, wherever those fall; zero without an incident.
  std::int64_t incident_logical_requests = 0;  ///< logical requests that arrived in it
  std::int64_t incident_attempts = 0;          ///< all the attempts of those logical requests

  /// attempts ÷ logical_requests; nullopt when no logical request arrived (0/0 is undefined).
  std::optional<double> amplification;
  /// incident_attempts ÷ incident_logical_requests: the attempts per logical request started in
  /// the incident (their retries after its end included); nullopt without an incident or when no
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
  /// Whether recovery can be measured: the incident ends within the simulated time and logical
  /// requests arrived in at least 5 of the whole 1-s bins after it, one run of recovery_s's
  /// definition (otherwise recovery_s is "n/a": the run ends too soon after the incident).
  bool recovery_measurable = false;
  /// The mean attempts per second over the whole 1-s bins after the end of the incident; nullopt
  /// without an incident that ends at least a whole bin before the end of the simulated time.
  std::optional<double> after_incident_attempt_rate;

  // The server's defences (scenario::defences, `simulate --defence`).
  /// The defences the server ran, as given ("none", "retry-budget", "drop-expired+lifo-codel").
  std::string defence = "none";
  /// Attempts refused before any work: a full queue, the retry budget, the concurrency limit, or
  /// CoDel dropping a request that waited too long (each answered with a 503).
  std::int64_t rejected = 0;
  /// Attempts that used a worker (started service), whatever became of their answer.
  std::int64_t served = 0;
  /// Attempts drop-expired took out of the queue because their caller's deadline had passed, or
  /// was nearer than the server's estimate of their service time.
  std::int64_t expired_dropped = 0;
  /// Logical requests ended by a "do not retry" pushback (end reason server_refused).
  std::int64_t server_refused = 0;
  /// The attempts of the incident's logical requests (incident_logical_requests) that used a
  /// worker, whenever they did.
  std::int64_t incident_served = 0;
  /// served ÷ logical_requests; nullopt when no logical request arrived.
  std::optional<double> served_amplification;
  /// incident_served ÷ incident_logical_requests; nullopt as for incident_amplification.
  std::optional<double> incident_served_amplification;
  /// The 99.9th percentile (nearest rank) of the same latencies as p99_latency_ms, in ms; nullopt
  /// when none succeeded.
  std::optional<double> p999_latency_ms;

  // Hedging (a strategy with hedging; zero otherwise). Copies count in `attempts`, and
  //   attempts = successes + failures + timeouts + in_flight_attempts + hedges_cancelled.
  std::int64_t hedges_sent = 0;       ///< copies sent after the first of their logical request
  std::int64_t hedges_won = 0;        ///< logical requests whose success came from such a copy
  std::int64_t hedges_refused = 0;    ///< copies the budget refused (not sent)
  std::int64_t hedges_cancelled = 0;  ///< copies in flight when another ended their request
  /// The fleet budget's modelled store (sim::fleet_store_model; 0 without a fleet budget, and in
  /// the lab with a real store): the syncs it served, those of them whose wait in its queue
  /// passed the syncer's timeout (applied, the client never answered: the store is saturated),
  /// and the most syncs it served in one second of its time (÷ fleet_store_model::capacity: its
  /// busiest second's load).
  std::int64_t store_syncs = 0;
  std::int64_t store_sync_timeouts = 0;   ///< see store_syncs
  std::int64_t store_busiest_second = 0;  ///< see store_syncs

  std::int64_t events = 0;            ///< events processed (for performance measurements)
  std::vector<time_bin> series;       ///< one bin per started second of simulated time
  std::vector<fine_bin> fine_series;  ///< one bin per started 100 ms (k_fine_bin), for plots

  /// Calls `f(name, member, decimals)` for every figure `simulate --json` writes, in the order it
  /// writes them, with the key it gives it: the strategy's name and its defences (strings), the
  /// counters (std::int64_t) and the derived figures (double or std::optional<double>, written
  /// with `decimals` decimals; null when empty). This is the one list of the report's keys: the
  /// JSON writer, the lab's multi-process parts (for_each_counter) and the tests go through it,
  /// so a figure added here reaches every one of them. `R` is strategy_result or const
  /// strategy_result; `f` gets a reference of the same constness.
  template <class R, class F>
  static void for_each_key(R& r, F&& f) {
    f("name", r.name, 0);
    f("logical_requests", r.logical_requests, 0);
    f("attempts", r.attempts, 0);
    f("amplification", r.amplification, 4);
    f("incident_amplification", r.incident_amplification, 4);
    f("peak_load_ratio", r.peak_load_ratio, 4);
    f("success_ratio", r.success_ratio, 4);
    f("p99_latency_ms", r.p99_latency_ms, 1);
    f("recovery_s", r.recovery_s, 1);
    f("successes", r.successes, 0);
    f("failures", r.failures, 0);
    f("timeouts", r.timeouts, 0);
    f("in_flight_attempts", r.in_flight_attempts, 0);
    f("attempts_exhausted", r.attempts_exhausted, 0);
    f("budget_exhausted", r.budget_exhausted, 0);
    f("throttled", r.throttled, 0);
    f("requests_in_flight", r.requests_in_flight, 0);
    f("wasted_work", r.wasted_work, 0);
    f("incident_logical_requests", r.incident_logical_requests, 0);
    f("incident_attempts", r.incident_attempts, 0);
    f("lost", r.lost, 0);
    f("defence", r.defence, 0);
    f("rejected", r.rejected, 0);
    f("served", r.served, 0);
    f("expired_dropped", r.expired_dropped, 0);
    f("server_refused", r.server_refused, 0);
    f("incident_served", r.incident_served, 0);
    f("served_amplification", r.served_amplification, 4);
    f("incident_served_amplification", r.incident_served_amplification, 4);
    f("p999_latency_ms", r.p999_latency_ms, 1);
    f("hedges_sent", r.hedges_sent, 0);
    f("hedges_won", r.hedges_won, 0);
    f("hedges_refused", r.hedges_refused, 0);
    f("hedges_cancelled", r.hedges_cancelled, 0);
    f("store_syncs", r.store_syncs, 0);
    f("store_sync_timeouts", r.store_sync_timeouts, 0);
    f("store_busiest_second", r.store_busiest_second, 0);
  }

  /// Calls `f(name, counter)` for every counter of a result (each std::int64_t figure of
  /// for_each_key, in its order). Every counter but store_busiest_second (a peak: the lab's
  /// merge takes the parts' largest) is a count over the run, so the parts of one run add up: the
  /// lab's multi-process runs send, read and sum a part's figures through it.
  template <class R, class F>
  static void for_each_counter(R& r, F&& f) {
    for_each_key(r, [&f](const char* name, auto& member, int) {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(member)>, std::int64_t>) {
        f(name, member);
      }
    });
  }
};

/// The results of several strategies on one scenario, in the order they were given.
struct simulation_report {
  /// The scenario as simulated.
  sim::scenario scenario;
  /// One result per strategy, in the order given.
  std::vector<strategy_result> strategies;
};

/// The bound on the work of one run (one strategy through one scenario): at most this many
/// estimated attempts, requests_per_second x duration x (1 + max_retries), or x max_attempts for
/// a hedged strategy. 50,000,000 is the largest valid scenario (10,000,000 logical requests) with
/// the built-in strategies' 5 copies (hedged-unbudgeted; 3 retries for the others).
inline constexpr double k_max_estimated_attempts = 50'000'000;

/// The most attempts one run of `strat` through `s` can make, as estimated before running it:
/// requests_per_second x duration x (1 + max_retries), with the scenario's max_retries replacing
/// the strategy's when the strategy retries; x hedging.max_attempts for a hedged strategy.
[[nodiscard]] STORMGUARD_EXPORT double estimated_attempts(const scenario& s,
                                                          const strategy& strat) noexcept;

/// Checks the work bound for every strategy: nullopt, or an error (field "max_retries" when the
/// scenario sets it, else "requests_per_second") that gives the estimate and the bound.
[[nodiscard]] STORMGUARD_EXPORT std::optional<scenario_error> check_work(
    const scenario& s, std::span<const strategy> strategies);

/// The memory one run of `s` is estimated to need, in bytes (32 bytes per expected logical
/// request: its state and its latency; per client, the largest client of any budget kind with
/// its generator and the fleet store model's state: 1,168 bytes on x86-64 with GCC 12), and the
/// memory that the runs side by side of
/// simulate(s, strategies, threads) may take together: k_max_parallel_bytes.
[[nodiscard]] STORMGUARD_EXPORT double estimated_run_bytes(const scenario& s) noexcept;
/// The memory, in bytes, that the runs side by side of simulate() may take together (768 MiB).
inline constexpr double k_max_parallel_bytes = 768.0 * 1024 * 1024;

/// The number of runs of `s` that go side by side on `threads` threads (0 = one per hardware
/// thread) for `count` runs: resolve_threads(threads, count), lowered so that the runs together
/// are estimated to fit in k_max_parallel_bytes (at least 1). Memory is then bounded by the
/// scenario, whatever the thread count.
[[nodiscard]] STORMGUARD_EXPORT unsigned parallel_runs(const scenario& s, unsigned threads,
                                                       std::size_t count) noexcept;

/// Runs `strat` through `s`. Throws std::invalid_argument (with validate()'s or check_work()'s
/// message) for an invalid scenario or one above the work bound, and std::bad_alloc if memory
/// runs out (validate() bounds the logical requests to 10,000,000: about 340 MB per run). Times
/// saturate instead of overflowing. Deterministic: the same arguments always give the same result.
/// Thread-safe (no shared state); independent runs may go in parallel.
[[nodiscard]] STORMGUARD_EXPORT strategy_result simulate(const scenario& s, const strategy& strat);

/// Runs every strategy in `strategies` through `s`; the report lists them in the given order.
[[nodiscard]] STORMGUARD_EXPORT simulation_report simulate(const scenario& s,
                                                           std::span<const strategy> strategies);

/// The same, with the strategies run on parallel_runs(s, threads, strategies.size()) threads (see
/// parallel_for) and `progress` told as each one finishes. The report is identical to the
/// sequential one.
[[nodiscard]] STORMGUARD_EXPORT simulation_report simulate(const scenario& s,
                                                           std::span<const strategy> strategies,
                                                           unsigned threads,
                                                           const progress_callback& progress = {});

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_SIMULATOR_HPP
