// SPDX-License-Identifier: Apache-2.0
// `stormguard tune`: the service's scenario, the rules and the search (app/tune.hpp). The
// evidence runs and the report's text and JSON are in app/tune_report.cpp.
#include "app/tune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "app/tune_internal.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/fleet_budget.hpp"

namespace stormguard::sim {

namespace {

using namespace std::chrono_literals;

// friday-night's shape: the service time × 75 (20 ms → 1.5 s: 5,000 → 67 req/s, 1.3 %) from
// 10 s to 20 s of a 60-s run.
constexpr std::int64_t k_slowdown = 75;
constexpr duration k_length = 60s;
constexpr duration k_incident_start = 10s;
constexpr duration k_incident_end = 20s;
// A tail (p99 above 2 × p50) is this fraction of attempts stalling by p99 − p50: the nearest-rank
// p99 of the latencies then falls among the stalls.
constexpr double k_stall_fraction = 0.02;
constexpr int k_max_retries = 3;
// The longest backoff and attempt timeout a policy holds (stormguard::config).
constexpr duration k_max_policy_time = 1h;
// Below this rate the 60-s run holds too few requests for its figures to mean anything.
constexpr double k_min_rate = 1.0;

std::string seconds_text(duration d) { return format_duration(d); }

// A long duration in hours and minutes when it is whole minutes ("2h", "1h5m", "12m"), else as
// seconds_text.
std::string long_text(duration d) {
  const auto minutes = std::chrono::duration_cast<std::chrono::minutes>(d);
  if (d < 1min || minutes != d) return seconds_text(d);
  const auto h = minutes.count() / 60;
  const auto m = minutes.count() % 60;
  if (h == 0) return fmt::format("{}m", m);
  return m == 0 ? fmt::format("{}h", h) : fmt::format("{}h{}m", h, m);
}

duration round_up_10ms(duration d) {
  const duration step = 10ms;
  return ((d + step - duration(1)) / step) * step;
}

}  // namespace

std::optional<int> workers_for(double capacity, duration p50) {
  if (!(capacity > 0.0) || !std::isfinite(capacity) || p50 <= duration::zero()) {
    return std::nullopt;
  }
  const double w = std::round(capacity * std::chrono::duration<double>(p50).count());
  if (w > 1'000'000) return std::nullopt;
  return std::max(1, static_cast<int>(w));
}

std::optional<std::string> check_description(const service_description& d) {
  const auto bad = [](std::string_view field, std::string_view why, const std::string& value) {
    return fmt::format("{}: {}, got {}", field, why, value);
  };
  if (!(d.requests_per_second > 0.0) || !std::isfinite(d.requests_per_second)) {
    return bad("rate", "must be a number of requests per second > 0",
               detail::format_double(d.requests_per_second));
  }
  if (d.clients < 1 || d.clients > 100'000) {
    return bad("clients", "must be an integer in [1, 100000]", std::to_string(d.clients));
  }
  if (d.workers < 1 || d.workers > 1'000'000) {
    return bad("workers", "must be an integer in [1, 1000000]", std::to_string(d.workers));
  }
  if (d.p50 <= duration::zero() || d.p50 > 1h) {
    return bad("p50", "must be a duration in (0, 1h]", seconds_text(d.p50));
  }
  if (d.p99 < d.p50 || d.p99 > 1h) {
    return bad("p99", "must be a duration in [p50 (" + seconds_text(d.p50) + "), 1h]",
               seconds_text(d.p99));
  }
  if (d.deadline <= d.p50 || d.deadline > 1h) {
    return bad(
        "deadline",
        "must be longer than one healthy attempt (p50 " + seconds_text(d.p50) + ") and at most 1h",
        seconds_text(d.deadline));
  }
  if (!(d.error_rate >= 0.0 && d.error_rate <= 0.5)) {
    return bad("error-rate", "must be a fraction in [0, 0.5]", detail::format_double(d.error_rate));
  }
  const double requests = d.requests_per_second * 60.0;
  if (requests > 10'000'000) {
    return bad("rate", "must be at most 166666 req/s (60 s of simulated time)",
               detail::format_double(d.requests_per_second));
  }
  if (d.requests_per_second < k_min_rate) {
    return bad("rate",
               "must be at least 1 req/s: the 60-s run would hold fewer than 60 logical requests "
               "(10 in the incident), too few for any of the figures tune compares",
               detail::format_double(d.requests_per_second));
  }
  // The rules derive the backoff base (max(5 x p50, 2 x p99)) and the attempt timeout (at least
  // p99 + p50); a policy holds each up to 1 h.
  if (5 * d.p50 > k_max_policy_time) {
    return bad("p50",
               "must be at most 12m: the backoff base the rules derive, 5 x p50 = " +
                   long_text(5 * d.p50) + ", must be at most 1h (a policy's limit)",
               long_text(d.p50));
  }
  if (2 * d.p99 > k_max_policy_time) {
    return bad("p99",
               "must be at most 30m: the backoff base the rules derive, 2 x p99 = " +
                   long_text(2 * d.p99) + ", must be at most 1h (a policy's limit)",
               long_text(d.p99));
  }
  return std::nullopt;
}

scenario service_scenario(const service_description& d, std::uint64_t seed) {
  scenario s;
  s.name = "service";
  s.description = fmt::format(
      "{} req/s from {} clients to {} workers x {}; from 10 s to 20 s the service time is 75x "
      "(friday-night's shape)",
      detail::format_double(d.requests_per_second), d.clients, d.workers, seconds_text(d.p50));
  s.seed = seed;
  s.length = k_length;
  s.requests_per_second = d.requests_per_second;
  s.clients = d.clients;
  // The timeout of clients that set none (recommended-fleet): the longer attempt timeout the
  // search compares.
  s.timeout = timeout_candidates(d).back();
  s.workers = d.workers;
  s.queue_limit = std::max<std::int64_t>(
      d.workers, static_cast<std::int64_t>(std::llround(d.requests_per_second * 10.0)));
  s.service_time = d.p50;
  if (d.p99 > 2 * d.p50) s.stall = stall{k_stall_fraction, d.p99 - d.p50};
  s.incident = incident{k_incident_start, k_incident_end,
                        std::min<duration>(1h, d.p50 * k_slowdown), 0.0, 0.0};
  return s;
}

service_description description_of(const scenario& s, duration deadline, double error_rate) {
  service_description d;
  d.requests_per_second = s.requests_per_second;
  d.clients = s.clients;
  d.workers = s.workers;
  d.p50 = s.service_time;
  d.p99 = s.stall ? s.service_time + s.stall->length : s.service_time;
  d.deadline = deadline;
  d.error_rate = error_rate;
  return d;
}

scenario baseline_scenario(const scenario& s, double error_rate) {
  scenario b = s;
  b.name = s.name + "/baseline";
  b.incident =
      error_rate > 0.0
          ? std::optional(incident{duration::zero(), s.length + 1s, std::nullopt, error_rate, 0.0})
          : std::nullopt;
  return b;
}

scenario failure_rate_scenario(const scenario& s, double failure_rate) {
  scenario f = s;
  const incident& i = *s.incident;
  f.name = fmt::format("{}/failure-{}", s.name, detail::format_double(failure_rate));
  f.incident = incident{i.start, i.end, std::nullopt, failure_rate, 0.0};
  return f;
}

double incident_capacity(const scenario& storm) {
  const duration t = storm.incident && storm.incident->service_time ? *storm.incident->service_time
                                                                    : storm.service_time;
  return storm.workers / std::chrono::duration<double>(t).count();
}

std::optional<std::string> infeasible(const scenario& storm, const service_description& d) {
  const double capacity = storm.workers / std::chrono::duration<double>(storm.service_time).count();
  if (storm.requests_per_second > capacity) {
    return fmt::format(
        "the demand ({} req/s) is above the server's healthy capacity ({} workers / {} = {} "
        "req/s) even without retries: no retry policy can make up for missing capacity; add "
        "capacity or shed load first",
        detail::format_double(storm.requests_per_second), storm.workers,
        seconds_text(storm.service_time),
        // Whole req/s, or three significant digits below 100 (0.139, not 0).
        capacity >= 100 ? detail::format_double(std::floor(capacity))
                        : fmt::format("{:.3g}", capacity));
  }
  if (d.deadline <= d.p50) {
    return fmt::format(
        "the deadline ({}) is no longer than one healthy attempt ({}): no policy "
        "can succeed in time, with or without retries",
        seconds_text(d.deadline), seconds_text(d.p50));
  }
  return std::nullopt;
}

namespace tune_detail {
duration base_rule(const service_description& d) {
  return round_up_10ms(std::max(5 * d.p50, 2 * d.p99));
}
}  // namespace tune_detail

std::vector<duration> timeout_candidates(const service_description& d) {
  const duration tight = round_up_10ms(std::max(2 * d.p99, 10 * d.p50));
  // One retry after a backoff of base must fit: 2 attempts + base <= the deadline.
  const duration most =
      std::max<duration>(round_up_10ms(d.p99 + d.p50),
                         std::min(d.deadline / 2, (d.deadline - tune_detail::base_rule(d)) / 2));
  std::vector<duration> out;
  for (const duration t : {tight, 5 * tight}) {
    const duration c = std::min(t, most);
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

namespace {

// Why `timeout`: the rule's value when the deadline leaves room for it, else why it is shorter
// (timeout_candidates: at most (deadline - base) / 2, at least p99 + p50).
std::string timeout_reason(const service_description& d, duration timeout) {
  const duration rule = round_up_10ms(std::max(2 * d.p99, 10 * d.p50));
  const duration base = tune_detail::base_rule(d);
  const bool retry_fits = 2 * timeout + base <= d.deadline;
  std::string compared;
  for (const duration t : timeout_candidates(d)) {
    compared += (compared.empty() ? "" : " and ") + seconds_text(t);
  }
  if (timeout >= rule) {
    return fmt::format(
        "{} is at least max(2 x p99, 10 x p50) = {} (rounded up to 10 ms: a healthy attempt, its "
        "tail included, is never cut short){}; the search compared {}",
        seconds_text(timeout), seconds_text(rule),
        retry_fits
            ? fmt::format(", and short enough that a retry after one backoff of {} still "
                          "fits the deadline ({})",
                          seconds_text(base), seconds_text(d.deadline))
            : fmt::format("; no retry after it fits the deadline ({})", seconds_text(d.deadline)),
        compared);
  }
  return fmt::format(
      "{} is shorter than the rule's max(2 x p99, 10 x p50) = {}, which the deadline ({}) has no "
      "room for: {}; the search compared {}",
      seconds_text(timeout), seconds_text(rule), seconds_text(d.deadline),
      retry_fits ? fmt::format("{} is the longest with which a retry after one backoff of {} "
                               "still fits ((deadline - base) / 2)",
                               seconds_text(timeout), seconds_text(base))
                 : fmt::format("{} is p99 + p50 rounded up to 10 ms, the shortest that never cuts "
                               "a healthy attempt short, and no retry fits the deadline after it",
                               seconds_text(timeout)),
      compared);
}

}  // namespace

policy_rules rules_for(const service_description& d, duration timeout) {
  policy_rules r;
  r.attempt_timeout = timeout;
  r.reasons.push_back({"attempt_timeout", seconds_text(timeout), timeout_reason(d, timeout)});
  // base: a retry sooner than a few healthy answers meets the same trouble; 5 × p50, 2 × p99.
  r.base = tune_detail::base_rule(d);
  // Retries and cap against the deadline: (retries + 1) attempts of the attempt timeout and the
  // ceilings of the backoff (base · 2^(n-1), the worst case of full jitter) fit in it.
  r.retries = 0;
  tune_detail::schedule fits = tune_detail::worst_schedule(timeout, r.base, 0);
  for (int n = 1; n <= k_max_retries; ++n) {
    const auto next = tune_detail::worst_schedule(timeout, r.base, n);
    if (next.total > d.deadline) break;
    r.retries = n;
    fits = next;
  }
  r.cap = fits.cap;
  const duration used = fits.total;
  r.reasons.push_back(
      {"retries", std::to_string(r.retries),
       fmt::format("{} retr{} of {} after backoffs of at most {} (full jitter, x2) take at most "
                   "{} with the first attempt, within the deadline of {} (at most {} retries: "
                   "more only multiply a storm)",
                   r.retries, r.retries == 1 ? "y" : "ies", seconds_text(timeout),
                   seconds_text(r.cap), seconds_text(used), seconds_text(d.deadline),
                   k_max_retries)});
  r.reasons.push_back(
      {"backoff",
       fmt::format("base {}, cap {}, full jitter", seconds_text(r.base), seconds_text(r.cap)),
       fmt::format("base is max(5 x p50, 2 x p99) rounded up to a whole 10 ms (so at least "
                   "10 ms) = {}: a retry sooner than a few healthy "
                   "answers meets the same trouble; cap is the last retry's ceiling that fits "
                   "the deadline; full jitter spreads the retries of clients that failed "
                   "together (Brooker 2015)",
                   seconds_text(r.base))});
  // The window holds a whole logical request: every backoff plus an attempt's p99 and timeout.
  const duration longest = used + d.p99;
  r.window = std::clamp<duration>(std::chrono::ceil<std::chrono::seconds>(longest), duration(10s),
                                  duration(60s));
  r.reasons.push_back(
      {"budget.window", seconds_text(r.window),
       fmt::format("at least the longest schedule of one logical request (every backoff and "
                   "attempt, {}, plus p99) and at least 10 s, so that a request's deposit and "
                   "its retries count in one window",
                   seconds_text(used))});
  return r;
}

namespace tune_detail {

schedule worst_schedule(duration timeout, duration base, int retries) {
  schedule s{timeout, base};
  duration ceiling = base;
  for (int n = 1; n <= retries; ++n) {
    s.total += ceiling + timeout;
    s.cap = ceiling;
    ceiling = std::min<duration>(2 * ceiling, 1h);
  }
  return s;
}

config::policy make_policy(const std::string& name, const service_description& d,
                           const candidate& c) {
  config::policy p;
  p.name = name;
  p.description = fmt::format("tuned for {} req/s from {} clients (stormguard tune)",
                              detail::format_double(d.requests_per_second), d.clients);
  p.retry.max_retries = c.hedge_attempts > 0 ? 0 : c.retries;
  // The gRPC codes the HTTP statuses stand for (503 and the others: UNAVAILABLE), written in the
  // file as `--export grpc` writes them, so that the file and the service config agree.
  if (c.hedge_attempts == 0 && c.retries > 0) {
    p.retryable_grpc_codes = config::default_retryable_grpc_codes();
  }
  p.retry.backoff.base = c.base;
  p.retry.backoff.cap = c.cap;
  p.retry.backoff.multiplier = 2.0;
  p.retry.backoff.jitter = jitter::full;
  const ratio_budget_options ratio{c.ratio, c.window, c.floor};
  if (c.hedge_attempts == 0 && c.retries == 0) {
    p.budget = no_budget{};  // no retry and no copy: nothing to budget
  } else if (c.fleet) {
    fleet_budget_options f;
    f.ratio = ratio;
    f.store.key = name;
    f.expected_clients = d.clients;
    f.ask_for_credit = c.ask;
    p.budget = f;
  } else {
    p.budget = ratio;
  }
  p.attempt_timeout = c.timeout;
  p.deadline = d.deadline;
  if (c.hedge_attempts > 0) {
    config::hedging_config h;
    h.options.max_attempts = c.hedge_attempts;
    h.options.delay = c.hedge_delay;
    // A status the policy would retry sends the next copy at once (a healthy day's 503s).
    h.non_fatal_statuses = p.statuses;
    h.non_fatal_grpc_codes = config::default_retryable_grpc_codes();
    p.hedging = h;
  }
  return p;
}

std::vector<std::int64_t> floor_candidates(const scenario& storm, bool fleet) {
  const double headroom = incident_capacity(storm);
  std::vector<std::int64_t> out;
  const auto add = [&out](std::int64_t f) {
    if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  };
  if (fleet) {
    // One floor for the fleet: a tenth, a quarter or half of what the server completes in the
    // incident.
    for (const double share : {0.1, 0.25, 0.5}) {
      add(std::clamp<std::int64_t>(std::llround(share * headroom), 1, k_max_floor));
    }
  } else {
    // Per process: the floor multiplies by the clients.
    for (const std::int64_t f : {0, 1, 10}) add(f);
  }
  return out;
}

std::vector<tune_reason> explain(const service_description& d, const scenario& storm,
                                 const candidate& c) {
  const policy_rules r = rules_for(d, c.timeout);
  std::vector<tune_reason> out{r.reasons.front()};  // attempt_timeout: the rule's words
  const schedule w = worst_schedule(c.timeout, c.base, c.retries);
  if (c.hedge_attempts > 0) {
    out.push_back(
        {"hedging",
         fmt::format("{} copies, the next after {}", c.hedge_attempts, seconds_text(c.hedge_delay)),
         fmt::format("the healthy p99 ({}) is more than twice the p50 ({}): a copy sent "
                     "after {} x p50 wins over a stalled attempt; each copy after the "
                     "first is charged to the budget; the search compared 2 and 3 "
                     "copies after 2 and 4 x p50 against retries",
                     seconds_text(d.p99), seconds_text(d.p50),
                     (c.hedge_delay + d.p50 / 2) / d.p50)});
  } else if (c.retries == 0) {
    // No retry fits: the reasons say so, and nothing about a budget (the policy has none).
    out.push_back(
        {"retries", "0",
         fmt::format("one retry would take up to {} (2 attempts of {} and a backoff of up to {}), "
                     "more than the deadline of {}: no retry fits, and the policy makes one "
                     "attempt",
                     seconds_text(2 * c.timeout + c.base), seconds_text(c.timeout),
                     seconds_text(c.base), seconds_text(d.deadline))});
    out.push_back({"budget", "none",
                   "with 0 retries there is nothing to budget (no backoff, no window, no floor)"});
    return out;
  } else {
    out.push_back(
        {"retries", std::to_string(c.retries),
         fmt::format("{} attempts of {} and backoffs of at most {} take at most {}, within the "
                     "deadline of {} (it allows {}; the search compared 1 to {}: past the "
                     "first retry a budget, not the count, bounds a storm)",
                     c.retries + 1, seconds_text(c.timeout), seconds_text(w.cap),
                     seconds_text(w.total), seconds_text(d.deadline), r.retries,
                     std::max(1, r.retries))});
    out.push_back(
        {"backoff",
         fmt::format("base {}, cap {}, multiplier 2, full jitter", seconds_text(c.base),
                     seconds_text(c.cap)),
         fmt::format("base {} (the rule: max(5 x p50, 2 x p99) rounded up to a whole 10 ms = {}; "
                     "the search compared it and twice it): a retry sooner than a few healthy "
                     "answers meets the same trouble; cap is the last retry's ceiling; full "
                     "jitter spreads the retries of clients that failed together (Brooker 2015)",
                     seconds_text(c.base), seconds_text(r.base))});
  }
  out.push_back(
      {"budget.window", seconds_text(c.window),
       fmt::format("at least the longest schedule of one logical request ({} of attempts and "
                   "backoffs, plus p99 {}) and at least 10 s, so that a request's deposit and "
                   "its retries count in one window{}",
                   seconds_text(w.total), seconds_text(d.p99),
                   c.window != r.window
                       ? "; the search doubled the rule's " + seconds_text(r.window)
                       : std::string())});
  const double headroom = incident_capacity(storm);
  const double total_floor =
      static_cast<double>(c.floor) * (c.fleet ? 1.0 : static_cast<double>(d.clients));
  out.push_back(
      {c.fleet ? "budget (fleet)" : "budget (per process)",
       fmt::format("ratio {}, floor {}/s{}", detail::format_double(c.ratio), c.floor,
                   c.fleet ? " for the fleet" : " per process"),
       fmt::format("the floor allows {}/s of retries in all{} against the {:.0f} req/s the "
                   "server completes in the incident ({:.0f} % of it); the ratio lets {:.1f} % "
                   "more attempts through over the window, above the {:.1f} % a healthy day "
                   "fails; the search compared per-process floors 0, 1, 10, fleet floors of "
                   "10/25/50 % of that capacity (at most {}/s, a budget's largest floor), "
                   "ratios 0.05, 0.1, 0.2, then refined",
                   detail::format_double(total_floor),
                   c.fleet ? "" : fmt::format(" ({} x {} clients)", c.floor, d.clients), headroom,
                   100.0 * total_floor / headroom, 100.0 * c.ratio, 100.0 * d.error_rate,
                   k_max_floor)});
  if (c.ask) {
    const double per_client = d.requests_per_second / static_cast<double>(std::max(1, d.clients)) *
                              std::chrono::duration<double>(c.window).count() * c.ratio;
    out.push_back(
        {"budget.fleet.ask_for_credit", "true",
         fmt::format(
             "a process's share of the allowance is about {:.2f} retries per window "
             "({} req/s from {} clients), so with shares alone a healthy day's rare "
             "failures land on processes without a whole retry; with claims that follow "
             "need a process without one asks the store for it (one round trip more "
             "for that retry), and the store still never hands out more than the allowance; "
             "the search compared both",
             per_client, detail::format_double(d.requests_per_second), d.clients)});
  }
  return out;
}

}  // namespace tune_detail

}  // namespace stormguard::sim
