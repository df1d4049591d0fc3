// SPDX-License-Identifier: Apache-2.0
// `stormguard tune`'s search and evidence runs (app/tune.hpp): candidates run through
// sim::simulate, the one engine of `simulate`, two scenarios each (the storm and the baseline).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <variant>

#include "app/tune.hpp"
#include "app/tune_internal.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/fleet_budget.hpp"

namespace stormguard::sim {

using namespace tune_detail;

tune_figures tune_figures::of(const strategy_result& r) {
  tune_figures f;
  f.name = r.name;
  f.amplification = r.amplification;
  f.incident_amplification = r.incident_amplification;
  f.success = r.success_ratio;
  f.recovery_s = r.recovery_s;
  f.recovery_measurable = r.recovery_measurable;
  f.p99_latency_ms = r.p99_latency_ms;
  f.budget_exhausted = r.budget_exhausted + r.hedges_refused;
  f.store_sync_timeouts = r.store_sync_timeouts;
  std::int64_t arrived = 0;
  std::int64_t succeeded = 0;
  const auto from = static_cast<std::size_t>(k_warm_up / std::chrono::seconds(1));
  for (std::size_t i = from; i < r.series.size(); ++i) {
    arrived += r.series[i].logical_requests;
    succeeded += r.series[i].successes;
  }
  if (arrived > 0) {
    f.steady_success = std::min(1.0, static_cast<double>(succeeded) / static_cast<double>(arrived));
  }
  return f;
}

namespace tune_detail {

std::vector<config::policy> default_policies() {
  auto parsed = config::parse_policies(recommended_policies_json());
  if (!parsed) throw std::logic_error("policies/recommended.json: " + parsed.error().message);
  return *std::move(parsed);
}

tune_verdict judge(const tune_goal& goal, const tune_figures& storm, const tune_figures& baseline,
                   int* missed) {
  std::vector<std::string> why;
  const double amp = storm.incident_amplification.value_or(0.0);
  if (amp > goal.max_incident_amplification + 1e-9) {
    why.push_back(fmt::format("incident amplification {:.2f}x above {:.2f}x", amp,
                              goal.max_incident_amplification));
  }
  const double success = storm.success.value_or(0.0);
  if (goal.min_success && success < *goal.min_success - 1e-9) {
    why.push_back(
        fmt::format("success {:.2f} % below {:.2f} %", 100 * success, 100 * *goal.min_success));
  }
  if (goal.max_recovery_s) {
    if (!storm.recovery_s) {
      why.push_back("never recovered (the goal: within " +
                    detail::format_double(*goal.max_recovery_s) + " s)");
    } else if (*storm.recovery_s > *goal.max_recovery_s + 1e-9) {
      why.push_back(fmt::format("recovery {:.1f} s longer than {:.1f} s", *storm.recovery_s,
                                *goal.max_recovery_s));
    }
  }
  const double healthy = baseline.steady_success.value_or(0.0);
  if (healthy < goal.min_baseline_success - 1e-9) {
    why.push_back(fmt::format("success on a healthy day {:.2f} % below {:.2f} %", 100 * healthy,
                              100 * goal.min_baseline_success));
  }
  if (missed != nullptr) *missed = static_cast<int>(why.size());
  const std::int64_t timeouts = storm.store_sync_timeouts + baseline.store_sync_timeouts;
  if (!why.empty() && timeouts > 0) {
    // Why, when it is the store: its budgets fell back to local counts.
    why.push_back(
        fmt::format("the fleet's store saturated ({} syncs timed out in its queue: "
                    "keep the budget in shards, budget.fleet.shards)",
                    timeouts));
  }
  tune_verdict v;
  v.met = why.empty();
  for (const std::string& w : why) v.reason += (v.reason.empty() ? "" : "; ") + w;
  return v;
}

}  // namespace tune_detail

namespace {

using namespace std::chrono_literals;

constexpr std::array<double, 3> k_ratios{0.05, 0.1, 0.2};
constexpr std::array<double, 4> k_failure_rates{0.01, 0.10, 0.50, 1.00};
// The margin below the goal's incident amplification that the search prefers.
constexpr double k_margin = 0.05;

// The search's running state: the scenarios, the goal, the progress told.
struct search {
  const scenario& storm;
  scenario baseline;
  const service_description& d;
  tune_goal goal;
  const tune_options& options;
  bool tail = false;
  std::size_t planned = 0;  // simulations planned (an estimate, raised as the search goes)
  std::size_t tried = 0;
  std::size_t runs = 0;  // simulations run: progress is told as each one ends
  std::vector<evaluated> all;

  // Tells options.progress that `finished` more simulations of a batch started at runs ended.
  void tell(std::size_t finished) {
    planned = std::max(planned, runs + finished + 1);
    if (options.progress) options.progress(runs + finished, planned);
  }
  // A progress callback for a batch that starts now (told from the batch's worker threads, one
  // call at a time; the search's thread waits for the batch meanwhile).
  [[nodiscard]] progress_callback batch_progress() {
    if (!options.progress) return {};
    return [this](std::size_t finished, std::size_t) { tell(finished); };
  }

  // Runs `policies` on every scenario of `scenarios`, in parallel; results[s][p].
  std::vector<std::vector<strategy_result>> run(const std::vector<const scenario*>& scenarios,
                                                const std::vector<config::policy>& policies) {
    std::vector<strategy> strategies;
    for (const config::policy& p : policies) strategies.push_back(from_policy(p));
    const std::size_t n = strategies.size();
    std::vector<std::vector<strategy_result>> out(scenarios.size(),
                                                  std::vector<strategy_result>(n));
    const unsigned threads =
        parallel_runs(*scenarios.front(), options.threads, n * scenarios.size());
    parallel_for(
        n * scenarios.size(), threads,
        [&](std::size_t i) { out[i / n][i % n] = simulate(*scenarios[i / n], strategies[i % n]); },
        batch_progress());
    runs += n * scenarios.size();
    return out;
  }

  // Evaluates the candidates not tried yet; their indices in `all`.
  std::vector<std::size_t> evaluate(std::vector<candidate> list) {
    std::vector<candidate> fresh;
    for (const candidate& c : list) {
      const bool seen =
          std::any_of(all.begin(), all.end(), [&](const evaluated& e) { return e.values == c; }) ||
          std::find(fresh.begin(), fresh.end(), c) != fresh.end();
      if (!seen && tried + fresh.size() < options.max_candidates) fresh.push_back(c);
    }
    std::vector<config::policy> policies;
    for (const candidate& c : fresh) policies.push_back(make_policy(options.name, d, c));
    std::vector<std::size_t> indices;
    if (fresh.empty()) return indices;
    const auto results = run({&storm, &baseline}, policies);
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      evaluated e{fresh[i],
                  policies[i],
                  tune_figures::of(results[0][i]),
                  tune_figures::of(results[1][i]),
                  {},
                  0};
      e.verdict = judge(goal, e.storm, e.baseline, &e.missed);
      indices.push_back(all.size());
      all.push_back(std::move(e));
    }
    tried += fresh.size();
    return indices;
  }

  // How far figures fall short of the goal, 0 when they meet it: the relative shortfall of each
  // figure, the healthy day's in tenths of its allowed failures (99.88 % against 99.9 %: 0.02).
  [[nodiscard]] double shortfall(const evaluated& e) const {
    double sum = 0.0;
    const double amp = e.storm.incident_amplification.value_or(0.0);
    sum += std::max(0.0, amp - goal.max_incident_amplification) / goal.max_incident_amplification;
    if (goal.min_success && *goal.min_success > 0.0) {
      sum += std::max(0.0, *goal.min_success - e.storm.success.value_or(0.0)) / *goal.min_success;
    }
    if (goal.max_recovery_s) {
      sum += e.storm.recovery_s ? std::max(0.0, *e.storm.recovery_s - *goal.max_recovery_s) /
                                      std::max(1.0, *goal.max_recovery_s)
                                : 1.0;
    }
    const double allowed = std::max(1e-6, 1.0 - goal.min_baseline_success);
    sum += 0.1 *
           std::max(0.0, goal.min_baseline_success - e.baseline.steady_success.value_or(0.0)) /
           allowed;
    return e.verdict.met ? 0.0 : std::max(sum, 1e-4);
  }

  // Whether a is better than b (docs/tune.md, "How the search chooses"): nearer the goal; then
  // an incident amplification k_margin below the goal's (a policy on the edge of the goal may
  // fall off it on real sockets or another seed); for a tail the healthy day's p99 (to 10 ms);
  // the healthy day's success over the whole run (to 0.1 %: how soon a budget serves processes
  // that just started, as after a deploy); success in the storm (to 0.5 %), recovery, incident
  // amplification (to 0.05x); the larger ratio (more room for retries in a partial failure), no
  // hedging, fewer retries, the lower floor.
  [[nodiscard]] bool better(const evaluated& a, const evaluated& b) const {
    const auto key = [this](const evaluated& e) {
      const double inf = std::numeric_limits<double>::infinity();
      return std::make_tuple(
          std::llround(1e4 * shortfall(e)),
          e.storm.incident_amplification.value_or(0.0) > goal.max_incident_amplification - k_margin,
          tail ? std::llround(0.1 * e.baseline.p99_latency_ms.value_or(1e12)) : 0LL,
          -std::llround(1000.0 * e.baseline.success.value_or(0.0)),
          -std::llround(200.0 * e.storm.success.value_or(0.0)), e.storm.recovery_s.value_or(inf),
          std::llround(20.0 * e.storm.incident_amplification.value_or(0.0)), -e.values.ratio,
          e.values.hedge_attempts, e.values.retries, e.values.floor);
    };
    return key(a) < key(b);
  }

  // The best of the candidates `among` (indices into all); the lowest index on a tie.
  [[nodiscard]] std::size_t best_of(const std::vector<std::size_t>& among) const {
    std::size_t best = among.front();
    for (const std::size_t i : among) {
      if (better(all[i], all[best])) best = i;
    }
    return best;
  }
  [[nodiscard]] std::vector<std::size_t> every() const {
    std::vector<std::size_t> v(all.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
  }
};

}  // namespace

bool tune_detail::tiny_shares(const service_description& d, duration window) {
  const double per_client = d.requests_per_second / static_cast<double>(std::max(1, d.clients));
  return per_client * std::chrono::duration<double>(window).count() * k_ratios.back() < 1.0;
}

namespace {

// Stage 1: the budget's scope, floor and ratio at each attempt timeout, with the rules' schedule.
std::vector<candidate> budget_grid(const search& s) {
  std::vector<candidate> out;
  for (const duration timeout : timeout_candidates(s.d)) {
    const policy_rules r = rules_for(s.d, timeout);
    if (r.retries == 0 && !s.tail) {
      // No retry fits the deadline and no tail to hedge: nothing to budget, one candidate.
      out.push_back(candidate{false, 0.1, 0, r.window, 0, r.base, r.cap, timeout, 0, {}});
      continue;
    }
    for (const bool fleet : {false, true}) {
      if (fleet && s.d.clients == 1) continue;
      for (const std::int64_t floor : floor_candidates(s.storm, fleet)) {
        for (const double ratio : k_ratios) {
          out.push_back(
              candidate{fleet, ratio, floor, r.window, r.retries, r.base, r.cap, timeout, 0, {}});
          if (fleet && tiny_shares(s.d, r.window)) {
            out.push_back(candidate{
                fleet, ratio, floor, r.window, r.retries, r.base, r.cap, timeout, 0, {}, true});
          }
        }
      }
    }
  }
  return out;
}

// Stage 2: the retries and the base around the best, each schedule within the deadline.
std::vector<candidate> schedule_grid(const search& s, const candidate& best) {
  std::vector<candidate> out;
  const policy_rules r = rules_for(s.d, best.timeout);
  for (const duration base : {r.base, 2 * r.base}) {
    for (int retries = 1; retries <= 3; ++retries) {
      const schedule w = worst_schedule(best.timeout, base, retries);
      if (w.total > s.d.deadline) continue;
      candidate c = best;
      c.retries = retries;
      c.base = base;
      c.cap = w.cap;
      out.push_back(c);
    }
  }
  return out;
}

// Stage 3: the ratio and the floor refined together around a candidate, and its window doubled.
std::vector<candidate> refine_grid(const candidate& best) {
  std::vector<candidate> out;
  if (best.retries == 0 && best.hedge_attempts == 0) return out;  // no budget to refine
  for (const double ratio_factor : {0.75, 1.0, 1.25}) {
    for (const double floor_factor : {0.5, 1.0, 2.0}) {
      candidate c = best;
      c.ratio = std::round(best.ratio * ratio_factor * 1000.0) / 1000.0;
      c.floor = std::llround(static_cast<double>(best.floor) * floor_factor);
      if (c.ratio > 0.0 && c.floor <= k_max_floor && c != best) out.push_back(c);
    }
  }
  candidate wider = best;
  wider.window = std::min<duration>(2 * best.window, std::chrono::seconds(60));
  if (wider.window != best.window) out.push_back(wider);
  return out;
}

// Stage 4 (a tail): hedging with the best budget's scope and floor, a second or third copy after
// 2 or 4 x p50, at the ratios of the grid (the copies of the tail draw from the budget too).
std::vector<candidate> hedge_grid(const search& s, const candidate& best) {
  std::vector<candidate> out;
  for (const double ratio : k_ratios) {
    for (const int copies : {2, 3}) {
      for (const int times : {2, 4}) {
        candidate c = best;
        c.ratio = ratio;
        c.hedge_attempts = copies;
        c.hedge_delay = std::max<duration>(1ms, times * s.d.p50);
        out.push_back(c);
      }
    }
  }
  return out;
}

// The goal's defaults from the library's default policies on the storm.
tune_goal fill_goal(search& s, const std::vector<config::policy>& defaults) {
  tune_goal g = s.goal;
  const auto results = s.run({&s.storm}, defaults);
  if (!g.min_success) {
    double best = 0.0;
    for (const auto& r : results[0]) best = std::max(best, r.success_ratio.value_or(0.0));
    g.min_success = best;
  }
  if (!g.max_recovery_s && s.storm.incident) {
    for (const auto& r : results[0]) {
      if (r.recovery_s) g.max_recovery_s = std::min(g.max_recovery_s.value_or(1e18), *r.recovery_s);
    }
  }
  return g;
}

// The lowest failure rate (1 % steps) at which the budget denies >= 0.1 % of the requests.
std::optional<double> binding_rate(search& s, const config::policy& p) {
  if (!s.storm.incident) return std::nullopt;
  const auto binds = [&](int percent) {
    const scenario f = failure_rate_scenario(s.storm, percent / 100.0);
    const auto r = s.run({&f}, {p})[0][0];
    return static_cast<double>(r.budget_exhausted + r.hedges_refused) >=
           0.001 * static_cast<double>(std::max<std::int64_t>(1, r.logical_requests));
  };
  if (!binds(100)) return std::nullopt;
  int lo = 0;  // does not bind (no failures)
  int hi = 100;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (binds(mid) ? hi : lo) = mid;
  }
  return hi / 100.0;
}

// The scenario at 10x the clients (the same rate), at most 100,000 clients.
scenario ten_times(const scenario& storm) {
  scenario wide = storm;
  wide.clients = static_cast<int>(std::min<std::int64_t>(100'000, 10LL * storm.clients));
  return wide;
}

// Among the best candidates that meet the goal (the two best of each budget scope), the one
// nearest to the goal at 10x the fleet (storm and healthy day; ranking order on a tie), its
// verdict at 10x in `verdict`; `best` when no candidate meets the goal.
std::size_t hold_at_10x(search& s, std::size_t best, tune_verdict& verdict) {
  std::vector<std::size_t> order = s.every();
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return s.better(s.all[a], s.all[b]); });
  std::vector<std::size_t> finalists{best};
  int per_scope[2] = {0, 0};
  for (const std::size_t i : order) {
    if (!s.all[i].verdict.met || per_scope[s.all[i].values.fleet] >= 2) continue;
    ++per_scope[s.all[i].values.fleet];
    if (i != best) finalists.push_back(i);
  }
  const scenario wide = ten_times(s.storm);
  const scenario wide_healthy = baseline_scenario(wide, s.d.error_rate);
  std::vector<config::policy> policies;
  for (const std::size_t i : finalists) policies.push_back(s.all[i].policy);
  const auto results = s.run({&wide, &wide_healthy}, policies);
  // Each finalist's figures at 10x, judged as at the fleet size; the nearest to the goal wins, in
  // ranking order on a tie (the ranking's order of `finalists` is kept by `order`).
  std::vector<evaluated> wide_figures;
  for (std::size_t k = 0; k < finalists.size(); ++k) {
    evaluated e = s.all[finalists[k]];
    e.storm = tune_figures::of(results[0][k]);
    e.baseline = tune_figures::of(results[1][k]);
    e.verdict = judge(s.goal, e.storm, e.baseline, &e.missed);
    wide_figures.push_back(std::move(e));
  }
  std::optional<std::size_t> chosen;
  long long nearest = 0;
  for (const std::size_t i : order) {
    const auto k = static_cast<std::size_t>(std::find(finalists.begin(), finalists.end(), i) -
                                            finalists.begin());
    if (k == finalists.size() || !s.all[i].verdict.met) continue;
    const long long gap = std::llround(1e4 * s.shortfall(wide_figures[k]));
    if (!chosen || gap < nearest) {
      chosen = k;
      nearest = gap;
    }
  }
  if (!chosen) chosen = 0;  // `best` does not meet the goal: its own figures at 10x
  verdict = wide_figures[*chosen].verdict;
  return finalists[*chosen];
}

// Every candidate the search ran, in words with its figures (the report's `tried`).
std::vector<tune_candidate> tried_candidates(const search& s) {
  std::vector<tune_candidate> out;
  for (const evaluated& e : s.all) {
    const candidate& c = e.values;
    std::string summary =
        fmt::format("{} ratio {} floor {}/s window {}, {} retries base {}, timeout {}",
                    c.fleet ? (c.ask ? "fleet (asks for credit)" : "fleet") : "per-process",
                    detail::format_double(c.ratio), c.floor, format_duration(c.window), c.retries,
                    format_duration(c.base), format_duration(c.timeout));
    if (c.hedge_attempts > 0) {
      summary += fmt::format(", hedging {} copies after {}", c.hedge_attempts,
                             format_duration(c.hedge_delay));
    }
    out.push_back({std::move(summary), e.storm, e.baseline, e.verdict});
  }
  return out;
}

}  // namespace

namespace tune_detail {
void gather_evidence(tune_report& report, const std::vector<config::policy>& shown,
                     unsigned threads, const std::function<void(std::size_t)>& finished);
}  // namespace tune_detail

tune_report tune(const scenario& storm, const service_description& d, const tune_goal& goal,
                 const tune_options& options) {
  if (auto problem = validate(storm)) throw std::invalid_argument(problem->message);
  search s{storm, baseline_scenario(storm, d.error_rate), d, goal, options, false, 0, 0, 0, {}};
  s.tail = d.p99 > 2 * d.p50;
  const std::vector<config::policy> defaults = default_policies();
  std::vector<candidate> grid = budget_grid(s);
  // Simulations: the defaults, two per candidate (the grid, the schedule, refinements of up to 9
  // candidates: about 5 new ones on friday-night, friday-night-fleet and 20,000 clients, which
  // tried 20 to 74 candidates after the grid; hedging), the finalists at 10x (two each), the
  // evidence and the binding rate. An estimate for the progress bar: raised when the search
  // runs past it.
  s.planned = defaults.size() +
              2 * std::min(grid.size() + 6 + 5 * 9 + (s.tail ? 21 : 0), options.max_candidates) +
              2 * 5 + 3 * 5 + k_failure_rates.size() + 8;
  s.goal = fill_goal(s, defaults);
  s.evaluate(std::move(grid));
  std::size_t best = s.best_of(s.every());
  s.evaluate(schedule_grid(s, s.all[best].values));
  best = s.best_of(s.every());
  // Refine around the best of each scope, then twice more around the best of all.
  for (const bool fleet : {false, true}) {
    std::vector<std::size_t> scope;
    for (std::size_t i = 0; i < s.all.size(); ++i) {
      if (s.all[i].values.fleet == fleet) scope.push_back(i);
    }
    if (!scope.empty()) s.evaluate(refine_grid(s.all[s.best_of(scope)].values));
  }
  // Then from both sides of the goal: around the best that survives the storm and the best that
  // keeps a healthy day, until neither changes (at most 6 rounds).
  for (int round = 0; round < 6; ++round) {
    const std::size_t before = s.all.size();
    for (const int side : {0, 1}) {
      std::vector<std::size_t> near;
      for (std::size_t i = 0; i < s.all.size(); ++i) {
        const bool healthy =
            s.all[i].baseline.steady_success.value_or(0.0) >= s.goal.min_baseline_success - 1e-9;
        if (healthy == (side == 1)) near.push_back(i);
      }
      if (!near.empty()) s.evaluate(refine_grid(s.all[s.best_of(near)].values));
    }
    if (s.all.size() == before) break;
  }
  best = s.best_of(s.every());
  if (s.tail) {
    const auto hedged = s.evaluate(hedge_grid(s, s.all[best].values));
    if (!hedged.empty()) s.evaluate(refine_grid(s.all[s.best_of(hedged)].values));
    best = s.best_of(s.every());
  }
  tune_verdict at_10x;
  best = hold_at_10x(s, best, at_10x);
  tune_report report;
  report.verdict_10x = at_10x;
  report.service = d;
  report.storm = storm;
  report.goal = s.goal;
  report.policy = s.all[best].policy;
  report.verdict = s.all[best].verdict;
  report.reasons = explain(d, storm, s.all[best].values);
  // The best of the other scope, evaluated with the tuned values where it was not in the grid;
  // only candidates with a budget (one without retries or copies has none, of either scope).
  const auto budgeted = [&s](std::size_t i) {
    return !std::holds_alternative<no_budget>(s.all[i].policy.budget);
  };
  if (d.clients > 1 && budgeted(best)) {
    std::vector<std::size_t> other;
    for (std::size_t i = 0; i < s.all.size(); ++i) {
      if (s.all[i].values.fleet != s.all[best].values.fleet && budgeted(i)) other.push_back(i);
    }
    if (!other.empty()) {
      const std::size_t o = s.best_of(other);
      report.other_scope = s.all[o].policy;
      report.other_scope->name = options.name + (s.all[o].values.fleet ? "-fleet" : "-per-process");
      report.other_scope_verdict = s.all[o].verdict;
    }
  }
  std::vector<config::policy> shown{report.policy};
  for (const config::policy& p : defaults) shown.push_back(p);
  config::policy none = report.policy;
  none.name = "no-retries";
  none.retry.max_retries = 0;
  none.hedging.reset();
  none.budget = no_budget{};
  shown.push_back(none);
  if (report.other_scope) shown.push_back(*report.other_scope);
  report.candidates_tried = s.tried;
  report.tried = tried_candidates(s);
  gather_evidence(report, shown, options.threads, [&s](std::size_t finished) {
    if (s.options.progress) s.tell(finished);
  });
  s.runs += report.runs;
  report.binds_at = binding_rate(s, report.policy);
  report.runs = s.runs;
  if (options.progress) options.progress(s.planned, s.planned);
  return report;
}

namespace tune_detail {

// The evidence of the shown policies: at the fleet size, at 10×, on the baseline; the tuned
// policy at each failure rate. Adds its simulations to report.runs.
void gather_evidence(tune_report& report, const std::vector<config::policy>& shown,
                     unsigned threads, const std::function<void(std::size_t)>& finished) {
  std::vector<strategy> strategies;
  for (const config::policy& p : shown) strategies.push_back(from_policy(p));
  // `finished` is told the simulations of this function that have ended, as each one ends.
  const auto from = [&](std::size_t before) -> progress_callback {
    return [&finished, before](std::size_t done, std::size_t) { finished(before + done); };
  };
  const std::size_t n = strategies.size();
  report.at_fleet = simulate(report.storm, strategies, threads, from(0));
  const scenario wide = ten_times(report.storm);
  report.fleet_10x = wide.clients;
  for (const strategy_result& r : simulate(wide, strategies, threads, from(n)).strategies) {
    report.at_10x.push_back(tune_figures::of(r));
  }
  const scenario healthy = baseline_scenario(report.storm, report.service.error_rate);
  for (const strategy_result& r : simulate(healthy, strategies, threads, from(2 * n)).strategies) {
    report.baseline.push_back(tune_figures::of(r));
  }
  report.runs += 3 * n;
  if (!report.storm.incident) return;
  std::vector<scenario> rates;
  for (const double rate : k_failure_rates)
    rates.push_back(failure_rate_scenario(report.storm, rate));
  std::vector<strategy_result> out(rates.size());
  parallel_for(
      rates.size(), parallel_runs(report.storm, threads, rates.size()),
      [&](std::size_t i) { out[i] = simulate(rates[i], strategies.front()); }, from(3 * n));
  for (std::size_t i = 0; i < rates.size(); ++i) {
    report.failure_rates.push_back({k_failure_rates[i], out[i].amplification,
                                    out[i].incident_amplification, out[i].success_ratio});
  }
  report.runs += rates.size();
}

}  // namespace tune_detail

}  // namespace stormguard::sim
