// The time-series engine: the model's events (arrival, attempt start, timeout, service done) and
// what each does, over the event queues (event_queue.hpp), the server (server.hpp), the client
// fleet and its retry protocol (fleet.hpp) and the metrics (metrics.hpp).
#include "stormguard/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "sim/common.hpp"
#include "sim/event_queue.hpp"
#include "sim/fleet.hpp"
#include "sim/metrics.hpp"
#include "sim/server.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"

namespace stormguard::sim {

namespace {

using engine::event_kind;

// now + delay in ns, saturating at the largest time instead of overflowing. The engine never
// processes an event at or after the end of the run, so a saturated time simply means "never".
constexpr std::int64_t add_saturated(std::int64_t now, std::int64_t delay) noexcept {
  return stormguard::detail::saturating_add(duration(now), duration(delay)).count();
}
static_assert(add_saturated(std::numeric_limits<std::int64_t>::max() - 1, 5) ==
              std::numeric_limits<std::int64_t>::max());

double expected_requests(const scenario& s) {
  return s.requests_per_second * std::chrono::duration<double>(s.length).count();
}

template <class B>
class time_series_engine {
 public:
  template <class Config>
  time_series_engine(const scenario& s, const strategy& strat, const Config& config)
      : s_(s),
        end_(s.length.count()),
        timeout_(strat.attempt_timeout.value_or(s.timeout).count()),
        unavailable_(strat.retries_503 ? classification::retry() : classification::stop()),
        queues_(end_, s.distribution == service_distribution::fixed),
        server_(s, seeds::mix(s.seed, seeds::k_tag_service)),
        fleet_(s, strat, config, expected_requests(s)),
        metrics_(s, strat.name, expected_requests(s)),
        arrivals_rng_(seeds::mix(s.seed, seeds::k_tag_arrivals)),
        incident_rng_(seeds::mix(s.seed, seeds::k_tag_incident)) {
    if (s.incident) {
      incident_start_ = s.incident->start.count();
      incident_end_ = s.incident->end.count();
      loss_rate_ = s.incident->loss_rate;
      error_or_loss_rate_ = s.incident->loss_rate + s.incident->error_rate;
    }
  }

  strategy_result run() {
    schedule_next_arrival(0);
    std::int64_t events = 0;
    while (true) {
      const engine::event e = queues_.pop();
      if (e.time >= end_) break;  // also the "no event left" sentinel
      metrics_.sample_queue_until(e.time, server_.queue_length());
      ++events;
      dispatch(e);
    }
    metrics_.sample_queue_until(end_ + engine::k_bin_ns, server_.queue_length());
    metrics_.counters().events = events;
    std::int64_t in_flight_attempts = 0;
    std::int64_t requests_in_flight = 0;
    for (const engine::request& r : fleet_.requests()) {
      if (r.state == engine::request_state::awaiting) ++in_flight_attempts;
      if (r.state != engine::request_state::ended) ++requests_in_flight;
    }
    return metrics_.finish(in_flight_attempts, requests_in_flight);
  }

 private:
  void dispatch(const engine::event& e) {
    switch (e.kind) {
      case event_kind::arrival:
        on_arrival(e.time);
        break;
      case event_kind::attempt_start:
        start_attempt(e.request, e.attempt, e.time);
        break;
      case event_kind::timeout:
        on_timeout(e.request, e.attempt, e.time);
        break;
      case event_kind::service_done:
        on_service_done(e.request, e.attempt, e.time);
        break;
    }
  }

  [[nodiscard]] bool in_incident(std::int64_t t) const noexcept {
    return t >= incident_start_ && t < incident_end_;
  }

  void schedule_next_arrival(std::int64_t now) {
    // Exponential inter-arrival time of a Poisson process: -ln(1 - u) / rate.
    const double u = uniform_unit(arrivals_rng_);
    // In double, and compared with the time left before rounding: for a tiny rate the gap can be
    // far beyond the int64 range (even infinite), and then there is simply no next arrival.
    const double gap_ns = -std::log1p(-u) / s_.requests_per_second * 1e9;
    if (!(gap_ns < static_cast<double>(end_ - now))) return;
    queues_.push(now + static_cast<std::int64_t>(std::llround(gap_ns)), event_kind::arrival, 0, 0);
  }

  void on_arrival(std::int64_t now) {
    const bool incident = in_incident(now);
    const std::uint32_t id = fleet_.add(now, incident);
    metrics_.arrival(now, incident);
    if (!fleet_.admit(id, now)) {
      // Rejected locally before its first attempt (adaptive throttling): no attempt is sent.
      fleet_[id].state = engine::request_state::ended;
      ++metrics_.counters().throttled;
    } else {
      start_attempt(id, 1, now);
    }
    schedule_next_arrival(now);
  }

  void start_attempt(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    engine::request& r = fleet_[id];
    r.attempt = attempt;
    r.state = engine::request_state::awaiting;
    metrics_.attempt(now, r.in_incident);
    if (error_or_loss_rate_ > 0.0 && in_incident(now)) {
      // One draw decides: lost with probability loss_rate, else a 503 with error_rate.
      const double u = uniform_unit(incident_rng_);
      if (u < loss_rate_) {
        ++metrics_.counters().lost;
        queues_.push(add_saturated(now, timeout_), event_kind::timeout, id, attempt);
        return;
      }
      if (u < error_or_loss_rate_) {
        metrics_.failure(now);
        on_failure(id, now, unavailable_);
        return;
      }
    }
    server_.arrive(now);
    const bool start_now = server_.has_free_worker();
    if (!start_now && server_.queue_full()) {
      // Queue full: an immediate 503 (retryable unless the strategy's statuses lack 503).
      metrics_.failure(now);
      on_failure(id, now, unavailable_);
      return;
    }
    // The timeout is pushed before the service completion so that, at equal times, the timeout
    // comes first: a response at exactly the deadline is late.
    queues_.push(add_saturated(now, timeout_), event_kind::timeout, id, attempt);
    if (start_now) {
      push_service_done(id, attempt, now, server_.start(now));
    } else {
      server_.enqueue(engine::queued_attempt{id, attempt});
    }
  }

  void push_service_done(std::uint32_t id, std::int32_t attempt, std::int64_t now,
                         engine::service svc) {
    queues_.push(add_saturated(now, svc.time), event_kind::service_done, id, attempt, svc.lane);
  }

  void on_service_done(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    if (const auto next = server_.finish(now)) {
      push_service_done(next->attempt.request, next->attempt.attempt, now, next->svc);
    }
    engine::request& r = fleet_[id];
    if (r.state == engine::request_state::awaiting && r.attempt == attempt) {
      r.state = engine::request_state::ended;
      metrics_.success(now, now - r.start);
      fleet_.succeeded(id, now);
      fleet_.ended(id, now);
    } else {
      ++metrics_.counters().wasted_work;  // the client gave up on this attempt: ignored
    }
  }

  void on_timeout(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    const engine::request& r = fleet_[id];
    if (r.state != engine::request_state::awaiting || r.attempt != attempt) return;  // answered
    metrics_.timeout(now);
    on_failure(id, now, classification::retry().as_timeout());
  }

  // The attempt failed: the fleet decides (the library's retry_policy), the engine acts.
  void on_failure(std::uint32_t id, std::int64_t now, classification verdict) {
    const retry_decision next = fleet_.failed(id, now, verdict);
    engine::request& r = fleet_[id];
    if (next.retry) {
      r.state = engine::request_state::backing_off;
      r.previous_delay = next.delay.count();
      queues_.push(add_saturated(now, std::max<std::int64_t>(0, next.delay.count())),
                   event_kind::attempt_start, id, r.attempt + 1);
      return;
    }
    r.state = engine::request_state::ended;
    fleet_.ended(id, now);
    if (next.reason == end_reason::budget_exhausted) {
      ++metrics_.counters().budget_exhausted;
    } else {
      ++metrics_.counters().attempts_exhausted;
    }
  }

  const scenario& s_;
  std::int64_t end_;
  std::int64_t timeout_;
  classification unavailable_;  // the verdict on a 503
  std::int64_t incident_start_ = 0;
  std::int64_t incident_end_ = 0;  // [0, 0): no incident
  double loss_rate_ = 0.0;
  double error_or_loss_rate_ = 0.0;
  engine::event_queues queues_;
  engine::server server_;
  engine::fleet<B> fleet_;
  engine::metrics metrics_;
  random_generator arrivals_rng_;
  random_generator incident_rng_;
};

std::string grouped(double n) {
  return stormguard::detail::format_grouped(static_cast<std::int64_t>(std::round(n)));
}

void check_or_throw(const scenario& s, std::span<const strategy> strategies) {
  if (auto problem = validate(s)) {
    throw std::invalid_argument("stormguard::sim::simulate: invalid scenario: " + problem->message);
  }
  if (auto problem = check_work(s, strategies)) {
    throw std::invalid_argument("stormguard::sim::simulate: " + problem->message);
  }
}

}  // namespace

double estimated_attempts(const scenario& s, const strategy& strat) noexcept {
  const strategy applied = engine::with_scenario_retries(s, strat);
  return expected_requests(s) * (1.0 + static_cast<double>(std::max(0, applied.retry.max_retries)));
}

std::optional<scenario_error> check_work(const scenario& s, std::span<const strategy> strategies) {
  for (const strategy& strat : strategies) {
    if (strat.retry.max_retries >= engine::k_max_event_attempt) {
      return scenario_error{"max_retries",
                            fmt::format("max_retries: {} has {}; at most {} are allowed",
                                        stormguard::detail::quote_for_message(strat.name),
                                        strat.retry.max_retries, engine::k_max_event_attempt - 1)};
    }
    const double estimate = estimated_attempts(s, strat);
    if (estimate <= k_max_estimated_attempts) continue;
    const int retries = engine::with_scenario_retries(s, strat).retry.max_retries;
    std::string field = s.max_retries ? "max_retries" : "requests_per_second";
    std::string message = fmt::format(
        "{}: the run of {} would make up to {} attempts (requests_per_second x duration = {} "
        "logical requests, x (1 + {} retries)); at most {} are allowed: lower "
        "requests_per_second, duration or max_retries",
        field, stormguard::detail::quote_for_message(strat.name), grouped(estimate),
        grouped(expected_requests(s)), retries, grouped(k_max_estimated_attempts));
    return scenario_error{std::move(field), std::move(message)};
  }
  return std::nullopt;
}

double estimated_run_bytes(const scenario& s) noexcept {
  return (expected_requests(s) * 1.05 + 16) *
         static_cast<double>(sizeof(engine::request) + sizeof(std::int64_t));
}

unsigned parallel_runs(const scenario& s, unsigned threads, std::size_t count) noexcept {
  const unsigned resolved = resolve_threads(threads, count);
  const double fit = std::floor(k_max_parallel_bytes / std::max(1.0, estimated_run_bytes(s)));
  return fit >= static_cast<double>(resolved) ? resolved : std::max(1U, static_cast<unsigned>(fit));
}

strategy_result simulate(const scenario& s, const strategy& strat) {
  check_or_throw(s, std::span<const strategy>(&strat, 1));
  const strategy applied = engine::with_scenario_retries(s, strat);
  return std::visit(
      [&](const auto& config) {
        using budget_type = typename budget_for<std::decay_t<decltype(config)>>::type;
        return time_series_engine<budget_type>(s, applied, config).run();
      },
      applied.budget);
}

simulation_report simulate(const scenario& s, std::span<const strategy> strategies) {
  return simulate(s, strategies, 1);
}

simulation_report simulate(const scenario& s, std::span<const strategy> strategies,
                           unsigned threads, const progress_callback& progress) {
  check_or_throw(s, strategies);
  simulation_report report{s, {}};
  report.strategies.resize(strategies.size());
  parallel_for(
      strategies.size(), parallel_runs(s, threads, strategies.size()),
      [&](std::size_t i) { report.strategies[i] = simulate(s, strategies[i]); }, progress);
  return report;
}

}  // namespace stormguard::sim
