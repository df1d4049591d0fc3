// SPDX-License-Identifier: Apache-2.0
// app/tune.hpp (the application layer: not installed): `stormguard tune`, a retry policy sized for
// a service, chosen by running candidates through the simulator (the same engine as `simulate`),
// with the evidence that it holds at the service's fleet size and at ten times it.
//
// A service is described by what a team knows (service_description: rate, client processes,
// workers × service time, healthy p50/p99, the callers' deadline, a baseline error rate), or
// taken from a time-series scenario (description_of). The failure it must survive is an incident
// of the scenario; for a description, friday-night's shape scaled to the service (service time ×
// 75 for 10 s: capacity falls to 1.3 %). The rules (rules_for, budget_candidates) fix what follows
// from the description (attempt timeout, window, cap, jitter) and propose the values the search
// compares; tune() runs the candidates, coarse first, then refines around the best, and returns
// the best that meets the goal with its evidence (tune_report).
//
//   stormguard::sim::service_description d;   // 2,000 req/s from 20 clients, 100 × 20 ms ...
//   auto report = stormguard::sim::tune(stormguard::sim::service_scenario(d), d, {}, {});
//   if (report.verdict.met) std::cout << stormguard::config::to_json(report.policy);
#ifndef STORMGUARD_APP_TUNE_HPP
#define STORMGUARD_APP_TUNE_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/sim/parallel.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"

namespace stormguard::sim {

/// What a team knows about its service. Durations are positive; see check_description for the
/// ranges.
struct service_description {
  double requests_per_second = 2000;  ///< logical requests per second of all clients; > 0
  int clients = 20;                   ///< client processes; in [1, 100,000]
  int workers = 100;                  ///< attempts the server serves at once; in [1, 1,000,000]
  /// The healthy service time of one attempt (its p50 latency); in (0, 1 h].
  duration p50 = std::chrono::milliseconds(20);
  /// The healthy p99 latency; >= p50. Above 2 × p50 it is a tail: service_scenario stalls 2 % of
  /// attempts by p99 − p50, and the search tries hedging.
  duration p99 = std::chrono::milliseconds(20);
  /// The callers' deadline for one logical request, every retry included; > p50, <= 1 h.
  duration deadline = std::chrono::seconds(10);
  /// The fraction of attempts that fail (a 503) when the service is healthy; in [0, 0.5]. The
  /// tuned policy must keep success >= 99.9 % against it (default 1 %: a policy that never
  /// retries cannot pass).
  double error_rate = 0.01;

  friend bool operator==(const service_description&, const service_description&) = default;
};

/// The workers of a server of `capacity` requests per second whose attempts take `p50`:
/// round(capacity × p50), at least 1; nullopt when capacity is not finite and > 0 or the result
/// exceeds 1,000,000.
[[nodiscard]] std::optional<int> workers_for(double capacity, duration p50);

/// The description's first problem as "FIELD: why, got VALUE" (FIELD the CLI flag's name without
/// dashes: "rate", "clients", "workers", "capacity", "p50", "p99", "deadline", "error-rate"), or
/// nullopt.
[[nodiscard]] std::optional<std::string> check_description(const service_description& d);

/// The scenario of a described service: 60 s of `requests_per_second` from `clients` to `workers`
/// × p50 (fixed service time; a tail as above), queue limit 10 s of demand, timeout the longer of
/// timeout_candidates (for policies without an attempt timeout),
/// and friday-night's incident scaled to it: from 10 s to 20 s the service time is 75 × p50.
/// Seed `seed`. Precondition: check_description(d) is nullopt.
[[nodiscard]] scenario service_scenario(const service_description& d, std::uint64_t seed = 42);

/// The description of a time-series scenario: its rate, clients, workers, service time as p50,
/// p50 + its stall's duration as p99 when it has a stall, `deadline` and `error_rate` as given.
[[nodiscard]] service_description description_of(const scenario& s, duration deadline,
                                                 double error_rate);

/// `s` without its incident, failing `error_rate` of its attempts all the time instead (an
/// incident over the whole run with that error rate): what a policy meets on a healthy day.
[[nodiscard]] scenario baseline_scenario(const scenario& s, double error_rate);

/// `s` with its incident replaced by one of the same times in which `failure_rate` of the attempts
/// fail at once (503), the server otherwise healthy. `s` must have an incident.
[[nodiscard]] scenario failure_rate_scenario(const scenario& s, double failure_rate);

/// What the tuned policy must achieve. Unset figures are taken from the library's default
/// policies (the better of recommended and recommended-fleet on the same scenario).
struct tune_goal {
  double max_incident_amplification = 1.15;  ///< attempts per logical request of the incident
  std::optional<double> min_success;         ///< in [0, 1]; default: the better default policy's
  std::optional<double> max_recovery_s;      ///< default: the better default policy's, if any
  double min_baseline_success = 0.999;       ///< success on baseline_scenario; in [0, 1]
};

/// How the search runs.
struct tune_options {
  std::string name = "tuned";  ///< the policy's name (a policy-file name)
  unsigned threads = 2;        ///< simulations side by side; 0 = one per hardware thread
  /// At most this many candidate policies run (coarse grid first); >= 4.
  std::size_t max_candidates = 200;
  progress_callback progress;  ///< told as candidates finish (may be empty)
};

/// One value of the tuned policy and the reason for it, in words with its numbers.
struct tune_reason {
  std::string field;   ///< the policy field ("attempt_timeout", "budget.min_retries_per_second")
  std::string value;   ///< as the policy file writes it
  std::string reason;  ///< one or two sentences
};

/// The start of a run that the healthy day's success leaves out: the budgets start empty, and a
/// fleet budget has not synced yet (10 s, the default window).
inline constexpr duration k_warm_up = std::chrono::seconds(10);

/// The four figures of a policy on a scenario.
struct tune_figures {
  std::string name;                              ///< the policy's name
  std::optional<double> amplification;           ///< strategy_result::amplification
  std::optional<double> incident_amplification;  ///< strategy_result::incident_amplification
  std::optional<double> success;                 ///< strategy_result::success_ratio
  std::optional<double> recovery_s;              ///< strategy_result::recovery_s
  bool recovery_measurable = false;              ///< strategy_result::recovery_measurable
  std::optional<double> p99_latency_ms;          ///< strategy_result::p99_latency_ms
  std::int64_t budget_exhausted = 0;             ///< strategy_result::budget_exhausted
  /// Successes ÷ logical requests over the 1-s bins from k_warm_up on (strategy_result::series):
  /// the success of a running service, after the budgets have filled (they start empty at the
  /// start of a run). nullopt when no request arrived then.
  std::optional<double> steady_success;
  /// strategy_result::store_sync_timeouts: syncs of a fleet budget that waited past the timeout
  /// in the modelled store's queue (the store saturated).
  std::int64_t store_sync_timeouts = 0;

  /// The figures of one simulator result.
  [[nodiscard]] static tune_figures of(const strategy_result& r);
};

/// A candidate's verdict against the goal: met, or the first goal it missed, in words.
struct tune_verdict {
  bool met = false;
  std::string reason;  ///< empty when met
};

/// One row of the amplification-against-failure-rate table.
struct failure_rate_point {
  double failure_rate = 0.0;                     ///< of the attempts in the incident's window
  std::optional<double> amplification;           ///< over the whole run
  std::optional<double> incident_amplification;  ///< of the requests in the window
  std::optional<double> success;                 ///< over the whole run
};

/// One candidate the search ran, in the order it ran them.
struct tune_candidate {
  /// Its values in words: "fleet ratio 0.1 floor 7/s window 10s, 3 retries base 100ms, timeout
  /// 1s" (", hedging 2 copies after 20ms" when it hedges).
  std::string summary;
  tune_figures storm;    ///< on the storm at the fleet size
  tune_figures healthy;  ///< on the healthy day
  tune_verdict verdict;  ///< on the goal
};

/// Everything `tune` prints.
struct tune_report {
  service_description service;   ///< as described (or read from the scenario)
  scenario storm;                ///< the failure to survive, at the fleet size
  std::optional<int> fleet_10x;  ///< the clients of the 10× run (capped at 100,000)
  tune_goal goal;                ///< with the defaults filled in
  config::policy policy;         ///< the recommendation (or the closest candidate)
  tune_verdict verdict;          ///< of `policy` on the goal
  /// Of `policy` on the same goal at 10x the clients: the search prefers, among the best that
  /// meet the goal, one that meets it at 10x too (fleet_10x clients; storm and healthy day).
  tune_verdict verdict_10x;
  std::vector<tune_reason> reasons;
  /// The best policy with a budget of the other scope (per process when `policy`'s is a fleet
  /// budget, else fleet), with its verdict: why the scope was chosen. nullopt for one client.
  std::optional<config::policy> other_scope;
  tune_verdict other_scope_verdict;  ///< of other_scope
  /// The storm at the fleet size: the tuned policy, recommended, recommended-fleet, no retries
  /// (the tuned policy with retries 0), other_scope when set; in this order. Its series feed the
  /// plot.
  simulation_report at_fleet;
  std::vector<tune_figures> at_10x;    ///< the same policies at 10× the clients (same rate)
  std::vector<tune_figures> baseline;  ///< the same policies on baseline_scenario
  std::vector<failure_rate_point> failure_rates;  ///< the tuned policy at 1, 10, 50, 100 %
  /// The lowest failure rate (to 1 %) at which the tuned policy's budget denies retries to at
  /// least 0.1 % of the logical requests; nullopt when it never does (or has no budget).
  std::optional<double> binds_at;
  std::vector<tune_candidate> tried;  ///< every candidate the search ran (`--json` only)
  std::size_t candidates_tried = 0;   ///< candidate policies simulated by the search
  std::size_t runs = 0;               ///< simulations in all (search and evidence)
};

/// Why no policy can meet any goal before searching: demand above capacity even without retries,
/// or a deadline no longer than one healthy attempt. nullopt when a search makes sense.
[[nodiscard]] std::optional<std::string> infeasible(const scenario& storm,
                                                    const service_description& d);

/// The values that follow from the description alone, each with its reason: attempt_timeout
/// (from p50/p99 and the deadline), backoff (jitter full, multiplier 2, base, cap against the
/// deadline), budget.window (against the longest backoff plus p99). `retries` is the count the
/// deadline allows (at most 3). Pure.
struct policy_rules {
  duration attempt_timeout{};
  duration base{};
  duration cap{};
  int retries = 0;
  duration window{};
  std::vector<tune_reason> reasons;
};
/// The rules for a description (with the attempt timeout `timeout`; see policy_rules).
[[nodiscard]] policy_rules rules_for(const service_description& d, duration timeout);

/// The attempt timeouts the search compares: max(2 × p99, 10 × p50) and five times it, each
/// rounded up to a whole 10 ms and at most the deadline ÷ 2 (one retry must fit); ascending,
/// without repeats.
[[nodiscard]] std::vector<duration> timeout_candidates(const service_description& d);

/// The incident capacity of `storm`: workers ÷ the incident's service time (the server's when the
/// incident keeps it), in req/s; workers ÷ service time without an incident.
[[nodiscard]] double incident_capacity(const scenario& storm);

/// Searches and measures (see the file comment). Throws std::invalid_argument for an invalid
/// scenario (as simulate does). Deterministic for the same arguments, whatever `threads`.
[[nodiscard]] tune_report tune(const scenario& storm, const service_description& d,
                               const tune_goal& goal, const tune_options& options);

/// The report as text: the policy's reasons, the evidence tables, the verdict.
[[nodiscard]] std::string format_report(const tune_report& report);

/// The report as one JSON object (keys: service, goal, verdict, policy, reasons, other_scope,
/// at_fleet, at_10x, baseline, failure_rates, binds_at, tried, candidates_tried, runs).
[[nodiscard]] std::string to_json(const tune_report& report);

}  // namespace stormguard::sim

#endif  // STORMGUARD_APP_TUNE_HPP
