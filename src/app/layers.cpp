// SPDX-License-Identifier: Apache-2.0
#include "app/layers.hpp"

#include <fmt/format.h>

#include <cmath>
#include <deque>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "stormguard/budget.hpp"
#include "stormguard/budget_protocol.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard_engine/event_queue.hpp"
#include "stormguard_engine/json_writer.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::sim {

namespace {

using seeds::fnv1a;
using seeds::mix;

// Attempts at the bottom grow as 4^layers per top-level request: 6 layers make 41 million attempts
// at the bottom per retrying row (see docs/simulator.md for the time); 7 would take 4 times as
// long.
constexpr int k_max_layers = 6;
constexpr double k_max_requests = 1'000'000;
using seeds::k_tag_arrivals;
constexpr std::uint64_t k_tag_layer = 0x6c61796572ULL;  // "layer"

template <class B>
struct layer {
  layer(std::uint64_t seed, const auto& config, const retry_options& options)
      : rng(seed), budget(config), policy(options) {}
  random_generator rng;
  B budget;
  retry_policy policy;
};

struct call {
  std::int64_t previous_delay;  // ns
  std::uint32_t parent;         // the call one layer up; k_none for a top-level call
  std::uint32_t top;            // the top-level call it serves
  std::int32_t attempt;         // the current attempt (from 1)
  std::int32_t depth;           // 0 = the top layer
  bool counted;                 // its top-level request started during the incident
  request_budget budget;        // the call's side of the budget protocol (budget_protocol.hpp)
};
constexpr std::uint32_t k_none = 0xffffffffU;

template <class B, class Config>
class layers_engine {
 public:
  layers_engine(const layers_options& o, const strategy& strat, const Config& config, bool top_only)
      : o_(o), arrivals_rng_(mix(o.seed, k_tag_arrivals)) {
    retry_options inner = strat.retry;
    if (top_only) inner.max_retries = 0;
    for (int k = 0; k < o.layers; ++k) {
      const std::uint64_t seed =
          mix(mix(mix(o.seed, k_tag_layer), static_cast<std::uint64_t>(k)), fnv1a(strat.name));
      layers_.emplace_back(seed, config, k == 0 ? strat.retry : inner);
    }
    row_.name = strat.name;
    row_.top_only = top_only;
    row_.layer_attempts.assign(static_cast<std::size_t>(o.layers), 0);
    end_ = o.length.count();
  }

  layers_row run() {
    // Arrivals first (they do not depend on the strategy), then the calls they start, in time
    // order with the retries.
    std::int64_t next_arrival = next_gap(0);
    while (true) {
      const bool have_retry = !heap_.empty();
      if (next_arrival >= end_ && !have_retry) break;
      ++row_.events;
      if (next_arrival < end_ && (!have_retry || next_arrival <= heap_.top().time)) {
        const std::int64_t now = next_arrival;
        const bool counted = incident_at(now);
        const auto id = new_call(k_none, 0, 0, counted);
        if (counted) ++row_.top_requests;
        if (admit(id, now)) start_attempt(id, now);
        next_arrival = next_gap(now);
        continue;
      }
      const engine::event e = heap_.top();
      heap_.pop();
      ++calls_[e.request].attempt;
      start_attempt(e.request, e.time);
    }
    row_.bottom_attempts = row_.layer_attempts.back();
    if (row_.top_requests > 0) {
      row_.bottom_amplification =
          static_cast<double>(row_.bottom_attempts) / static_cast<double>(row_.top_requests);
    }
    return std::move(row_);
  }

 private:
  [[nodiscard]] bool incident_at(std::int64_t t) const noexcept {
    return t >= o_.incident_start.count() && t < o_.incident_end.count();
  }

  std::int64_t next_gap(std::int64_t now) {
    const double u = uniform_unit(arrivals_rng_);
    const double gap_ns = -std::log1p(-u) / o_.requests_per_second * 1e9;
    if (!(gap_ns < static_cast<double>(end_ - now))) return end_;
    return now + static_cast<std::int64_t>(std::llround(gap_ns));
  }

  // A call starts at layer `depth`: a logical request for that layer's service. Its slot comes
  // from the calls that ended (end_call), so memory follows the calls in progress, not all calls.
  std::uint32_t new_call(std::uint32_t parent, std::int32_t depth, std::uint32_t top,
                         bool counted) {
    std::uint32_t id = 0;
    if (free_.empty()) {
      id = static_cast<std::uint32_t>(calls_.size());
      calls_.emplace_back();
    } else {
      id = free_.back();
      free_.pop_back();
    }
    calls_[id] = call{0, parent, parent == k_none ? id : top, 1, depth, counted, request_budget{}};
    return id;
  }

  // The call ended: nothing refers to it any more (its caller is told next), so its slot is free.
  // Returns its caller (k_none for a top-level call).
  std::uint32_t end_call(std::uint32_t id) {
    free_.push_back(id);
    return calls_[id].parent;
  }

  // Asks the layer's budget to admit a new call (adaptive throttling may reject it locally: the
  // call then fails at once without an attempt).
  bool admit(std::uint32_t id, std::int64_t now) {
    auto& l = layers_[static_cast<std::size_t>(calls_[id].depth)];
    if (calls_[id].budget.admit(l.budget, time_point(duration(now)), l.rng)) return true;
    ++row_.throttled;
    const std::uint32_t parent = end_call(id);
    if (parent != k_none) attempt_done(parent, false, now);
    return false;
  }

  // The current attempt of call `id` starts now: on the bottom (the last layer) it succeeds or
  // fails at once; above, it is a call one layer down.
  void start_attempt(std::uint32_t id, std::int64_t now) {
    const call c = calls_[id];  // a copy: new_call may move the pool
    if (c.counted) ++row_.layer_attempts[static_cast<std::size_t>(c.depth)];
    if (c.depth + 1 == o_.layers) {
      attempt_done(id, !incident_at(now), now);
      return;
    }
    const std::uint32_t child = new_call(id, c.depth + 1, c.top, c.counted);
    if (admit(child, now)) start_attempt(child, now);
  }

  // The current attempt of call `id` ended (ok: it succeeded). Decides the retry, or ends the
  // call and reports to the caller one layer up.
  void attempt_done(std::uint32_t id, bool ok, std::int64_t now) {
    auto& l = layers_[static_cast<std::size_t>(calls_[id].depth)];
    call& c = calls_[id];
    const time_point t(duration{now});
    if (ok) {
      c.budget.succeeded(l.budget, t, c.attempt);
    } else {
      const retry_decision next =
          c.budget.failed(l.policy, l.budget, c.attempt, classification::retry(),
                          duration(c.previous_delay), l.rng, t);
      if (next.retry) {
        c.previous_delay = next.delay.count();
        heap_.push(engine::event{detail::saturating_add(duration(now), next.delay).count(), seq_++,
                                 id, 0, engine::event_kind::attempt_start});
        return;
      }
      if (next.reason == end_reason::budget_exhausted) ++row_.budget_exhausted;
    }
    c.budget.end(l.budget, t);
    const std::uint32_t parent = end_call(id);
    if (parent != k_none) attempt_done(parent, ok, now);
  }

  const layers_options& o_;
  std::int64_t end_ = 0;
  random_generator arrivals_rng_;
  std::deque<layer<B>> layers_;      // a deque: budgets are neither copyable nor movable
  std::vector<call> calls_;          // the calls in progress, and free slots
  std::vector<std::uint32_t> free_;  // the free slots of calls_
  engine::radix_heap heap_;          // retries, by (time, sequence number)
  std::uint64_t seq_ = 0;
  layers_row row_;
};

// 120000 -> "120,000".
std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::optional<std::string> validate(const layers_options& o) {
  if (o.layers < 1 || o.layers > k_max_layers) {
    return fmt::format("layers: must be an integer in [1, {}], got {}", k_max_layers, o.layers);
  }
  if (!std::isfinite(o.requests_per_second) || o.requests_per_second <= 0.0) {
    return "requests_per_second: must be a number > 0, got " +
           detail::format_double(o.requests_per_second);
  }
  if (o.length <= duration::zero() || o.length > std::chrono::hours(1)) {
    return "duration: must be in (0, 1h], got " + format_duration(o.length);
  }
  const double requests = o.requests_per_second * std::chrono::duration<double>(o.length).count();
  if (requests > k_max_requests) {
    return fmt::format(
        "requests_per_second: requests_per_second x duration must be at most {} top-level "
        "requests, got {}",
        k_max_requests, detail::format_double(requests));
  }
  if (o.incident_start < duration::zero()) {
    return "incident_start: must be >= 0, got " + format_duration(o.incident_start);
  }
  if (o.incident_end <= o.incident_start) {
    return "incident_end: must be after incident_start, got " + format_duration(o.incident_end);
  }
  return std::nullopt;
}

layers_report simulate_layers(const layers_options& o, std::span<const strategy> strategies,
                              unsigned threads, const progress_callback& progress) {
  if (auto problem = validate(o)) {
    throw std::invalid_argument("stormguard::sim::simulate_layers: " + *problem);
  }
  // The rows in report order: each strategy at every layer, then (if it retries) at the top only.
  struct job {
    const strategy* strat;
    bool top_only;
  };
  std::vector<job> jobs;
  for (const strategy& strat : strategies) {
    jobs.push_back({&strat, false});
    if (strat.retry.max_retries != 0) jobs.push_back({&strat, true});  // else the same row
  }
  layers_report report{o, std::vector<layers_row>(jobs.size())};
  parallel_for(
      jobs.size(), threads,
      [&](std::size_t i) {
        report.rows[i] = std::visit(
            [&](const auto& config) {
              using config_type = std::decay_t<decltype(config)>;
              using budget_type = typename budget_for<config_type>::type;
              return layers_engine<budget_type, config_type>(o, *jobs[i].strat, config,
                                                             jobs[i].top_only)
                  .run();
            },
            jobs[i].strat->budget);
      },
      progress);
  return report;
}

std::string to_json(const layers_report& report) {
  engine::json_writer w;
  w.begin_report("layers", report.options.seed).field("layers", report.options.layers);
  w.key("strategies").begin_array();
  for (const layers_row& r : report.rows) {
    w.begin_object().field("name", r.name);
    w.field("retries_at", r.top_only ? "top layer" : "every layer");
    w.field("top_requests", r.top_requests).field("bottom_attempts", r.bottom_attempts);
    w.fixed("bottom_amplification", r.bottom_amplification, 4).key("layer_attempts").begin_array();
    for (const auto n : r.layer_attempts) w.value(n);
    w.end_array().field("budget_exhausted", r.budget_exhausted).field("throttled", r.throttled);
    w.end_object();
  }
  return std::move(w.end_array().end_object()).line();
}

std::string to_csv(const layers_report& report) {
  std::string out = "strategy,retries_at,top_requests,bottom_attempts,bottom_amplification";
  for (int k = 1; k <= report.options.layers; ++k) out += fmt::format(",layer_{}", k);
  out += '\n';
  for (const layers_row& r : report.rows) {
    out += fmt::format(
        "{},{},{},{},{}", r.name, r.top_only ? "top layer" : "every layer", r.top_requests,
        r.bottom_attempts,
        r.bottom_amplification ? fmt::format("{:.4f}", *r.bottom_amplification) : std::string());
    for (std::int64_t a : r.layer_attempts) out += fmt::format(",{}", a);
    out += '\n';
  }
  return out;
}

std::string format_table(const layers_report& report) {
  const layers_options& o = report.options;
  const std::string incident =
      o.incident_start == duration::zero() && o.incident_end == duration::max()
          ? std::string("for the whole run")
          : fmt::format("from {} to {}", format_duration(o.incident_start),
                        o.incident_end == duration::max() ? std::string("the end")
                                                          : format_duration(o.incident_end));
  std::string out = fmt::format(
      "layers: {} retrying layer{} above a bottom service that fails every attempt {}; {} "
      "top-level req/s for {}; no network delay (only backoffs take time); one service "
      "instance (generator and budget) per layer; seed {}\n\n",
      o.layers, o.layers == 1 ? "" : "s", incident,
      o.requests_per_second == std::floor(o.requests_per_second) && o.requests_per_second < 1e15
          ? grouped(static_cast<std::int64_t>(o.requests_per_second))
          : detail::format_double(o.requests_per_second),
      format_duration(o.length), o.seed);
  out +=
      fmt::format("{:<13} {:<12} {:>9} {:>10} {:>8} {:>9}  {}\n", "strategy", "retries at",
                  "requests", "bottom", "ampl.", "throttled", "attempts per request at each layer");
  for (const layers_row& r : report.rows) {
    std::string per_layer;
    for (std::int64_t a : r.layer_attempts) {
      per_layer += fmt::format(
          "{:>9}",  // 4^6 = "4096.00x" still leaves a space
          r.top_requests > 0
              ? fmt::format("{:.2f}x", static_cast<double>(a) / static_cast<double>(r.top_requests))
              : std::string("n/a"));
    }
    out += fmt::format("{:<13} {:<12} {:>9} {:>10} {:>8} {:>9}  {}\n", r.name,
                       r.top_only ? "top layer" : "every layer", grouped(r.top_requests),
                       grouped(r.bottom_attempts),
                       r.bottom_amplification ? fmt::format("{:.2f}x", *r.bottom_amplification)
                                              : std::string("n/a"),
                       grouped(r.throttled), per_layer);
  }
  out +=
      "requests = top-level requests started during the incident; bottom = their attempts that "
      "reached the bottom service; ampl. = bottom / requests; throttled = calls a layer's budget "
      "rejected before their first attempt (adaptive throttling)\n";
  double book = 1.0;
  for (int k = 0; k < o.layers; ++k) book *= 4.0;
  out += fmt::format(
      "\nWith 3 retries (4 attempts) at each of {} layers the SRE book expects {} attempts at the "
      "bottom per top-level request (4^{}).\n",
      o.layers, detail::format_double(book), o.layers);
  return out;
}

}  // namespace stormguard::sim
