// SPDX-License-Identifier: Apache-2.0
// app/tune_internal.hpp: what tune.cpp, tune_search.cpp and tune_report.cpp share (not installed,
// not part of app/tune.hpp's interface): a candidate policy's values and its evaluation.
#ifndef STORMGUARD_APP_TUNE_INTERNAL_HPP
#define STORMGUARD_APP_TUNE_INTERNAL_HPP

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "app/tune.hpp"

namespace stormguard::sim::tune_detail {

// The values a candidate policy varies; the rest follows from the rules.
struct candidate {
  bool fleet = false;       // one budget for the fleet, else one per process
  double ratio = 0.1;       // budget.ratio
  std::int64_t floor = 10;  // budget.min_retries_per_second (of the fleet when fleet)
  duration window{};        // budget.window
  int retries = 3;          // retries (0 with hedging)
  duration base{};          // backoff.base
  duration cap{};           // backoff.cap
  duration timeout{};       // attempt_timeout
  int hedge_attempts = 0;   // hedging.max_attempts; 0: no hedging
  duration hedge_delay{};   // hedging.delay
  bool ask = false;         // a fleet budget whose claims follow need (ask_for_credit)

  friend bool operator==(const candidate&, const candidate&) = default;
};

// The backoff base of the rules: max(5 × p50, 2 × p99), rounded up to a whole 10 ms, so at least
// 10 ms (docs/tune.md: a shorter sleep is within the error of a timer and a scheduler, so full
// jitter would spread nothing, and the schedule reads in whole steps).
[[nodiscard]] duration base_rule(const service_description& d);

// The worst case of one logical request that retries `retries` times: every attempt runs to
// `timeout` and every backoff to its ceiling min(cap, base · 2^(n-1)), cap the last ceiling.
struct schedule {
  duration total{};
  duration cap{};
};
[[nodiscard]] schedule worst_schedule(duration timeout, duration base, int retries);

// The candidate as a policy named `name` for the service `d`.
[[nodiscard]] config::policy make_policy(const std::string& name, const service_description& d,
                                         const candidate& c);

// The largest budget floor a policy holds (ratio_budget_options::min_retries_per_second).
inline constexpr std::int64_t k_max_floor = 1'000'000;

// Whether a process's share of a fleet budget is below one retry per window at the largest
// ratio the search tries (20,000 clients of 0.1 req/s: a tenth): the search then also tries
// claims that follow need (fleet_budget_options::ask_for_credit).
[[nodiscard]] bool tiny_shares(const service_description& d, duration window);

// The budget floors the search compares: per process 0, 1, 10; for the fleet a tenth, a quarter
// and half of the incident's capacity (at least 1, at most k_max_floor).
[[nodiscard]] std::vector<std::int64_t> floor_candidates(const scenario& storm, bool fleet);

// A candidate's figures on the storm and the baseline, and its verdict.
struct evaluated {
  candidate values;
  config::policy policy;
  tune_figures storm;
  tune_figures baseline;
  tune_verdict verdict;
  int missed = 0;  // goals missed
};

// The reasons for each value of the chosen candidate: the rules' (rules_for) where the search
// kept them, what the search compared where it chose.
[[nodiscard]] std::vector<tune_reason> explain(const service_description& d, const scenario& storm,
                                               const candidate& chosen);

// The verdict of figures on the goal (missed: how many goals were missed).
[[nodiscard]] tune_verdict judge(const tune_goal& goal, const tune_figures& storm,
                                 const tune_figures& baseline, int* missed = nullptr);

// The library's default policies (policies/recommended.json, embedded): recommended,
// recommended-fleet.
[[nodiscard]] std::vector<config::policy> default_policies();

// The embedded text of policies/recommended.json (generated at configure time).
[[nodiscard]] std::string_view recommended_policies_json();

}  // namespace stormguard::sim::tune_detail

#endif  // STORMGUARD_APP_TUNE_INTERNAL_HPP
