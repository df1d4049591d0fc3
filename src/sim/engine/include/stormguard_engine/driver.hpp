// SPDX-License-Identifier: Apache-2.0
// The client side of the time-series model, written once for the simulator (virtual time, an
// event queue and the server model in process) and the lab (a real clock, Asio timers and HTTP
// attempts on real sockets): the arrivals (a Poisson process from the scenario's "arrivals"
// stream), a logical request's admission by its client's budget, the start of each attempt, what
// an answer, a 503 or a timeout does (the library's retry_policy decides through the fleet), and
// the metrics of the run.
//
// The environment is a type `Transport` with these members, called by the driver:
//
//   void schedule_arrival(std::int64_t at);          // call driver.arrival(at) at time `at`
//   void schedule_attempt(std::int64_t at, std::uint32_t id, std::int32_t attempt);
//                                                     // call driver.start_attempt(...) at `at`
//   void send(std::uint32_t id, std::int32_t attempt, std::int64_t now);
//                                                     // attempt leaves now; its answer comes
//                                                     // back as driver.succeeded, .unavailable
//                                                     // or .timed_out
//   void note_throttled();  void note_outcome(attempt_status);  void note_retry(duration);
//   void note_end(end_reason);                        // for an observer (Prometheus); no-ops in
//                                                     // the simulator (derive from no_notes)
//
// Times are ns of the scenario's clock (0 = its start). A time at or after the scenario's end is
// never acted on: a transport may drop such a schedule. Not thread-safe: one thread runs it.
#ifndef STORMGUARD_ENGINE_DRIVER_HPP
#define STORMGUARD_ENGINE_DRIVER_HPP

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "stormguard/client_profile.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"
#include "stormguard_engine/fleet.hpp"
#include "stormguard_engine/hedging.hpp"
#include "stormguard_engine/metrics.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::sim::engine {

// The notes a transport may ignore: derive from it and override what you need.
struct no_notes {
  void note_throttled() noexcept {}
  void note_outcome(attempt_status) noexcept {}
  void note_retry(duration) noexcept {}
  void note_end(end_reason) noexcept {}
};

// now + delay in ns, saturating at the largest time instead of overflowing: a saturated time
// simply means "never" (nothing at or after the end of the run is acted on).
constexpr std::int64_t add_saturated(std::int64_t now, std::int64_t delay) noexcept {
  return stormguard::detail::saturating_add(duration(now), duration(delay)).count();
}
static_assert(add_saturated(std::numeric_limits<std::int64_t>::max() - 1, 5) ==
              std::numeric_limits<std::int64_t>::max());

// Logical requests a run expects: requests_per_second x duration.
inline double expected_requests(const scenario& s) {
  return s.requests_per_second * std::chrono::duration<double>(s.length).count();
}

// The driver of one run of one strategy, whose clients' budgets are of class B.
template <class B, class Transport>
class driver {
 public:
  // `s` and `transport` must outlive the driver; `strat` is the strategy as applied
  // (with_scenario_retries) and `config` its budget's options.
  template <class Config>
  driver(const scenario& s, const strategy& strat, const Config& config, Transport& transport)
      : s_(s),
        transport_(transport),
        end_(s.length.count()),
        timeout_(
            (strat.attempt_timeout != duration::max() ? strat.attempt_timeout : s.timeout).count()),
        unavailable_(strat.retries_503 ? classification::retry() : classification::stop()),
        profile_(profile_of(s, strat)),
        fleet_(s, strat, config, expected_requests(s)),
        metrics_(s, strat.name, expected_requests(s)),
        hedger_(strat, profile_.retries),
        arrivals_rng_(seeds::mix(s.seed, seeds::k_tag_arrivals)) {
    if (s.incident) {
      incident_start_ = s.incident->start.count();
      incident_end_ = s.incident->end.count();
    }
  }

  // Schedules the first arrival.
  void begin() { schedule_next_arrival(0); }

  // A logical request arrives now: its client's budget admits it (adaptive throttling may reject
  // it locally: no attempt is sent) and its first attempt leaves; the next arrival is scheduled.
  void arrival(std::int64_t now) {
    const bool incident = in_incident(now);
    const std::uint32_t id = fleet_.add(now, incident);
    metrics_.arrival(now, incident);
    if (!fleet_.admit(id, now)) {
      fleet_[id].state = request_state::ended;
      ++metrics_.counters().throttled;
      transport_.note_throttled();
    } else {
      start_attempt(id, 1, now);
    }
    schedule_next_arrival(now);
  }

  // Attempt `attempt` of request `id` leaves now (with hedging, a copy: see hedging.hpp).
  void start_attempt(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    if (hedger_.enabled()) {
      if (attempt > 1) {
        const hedge_due due = hedger_.copy_due(fleet_, id, attempt, now, metrics_.counters());
        if (due == hedge_due::stale) return;
        if (due == hedge_due::refused) {
          if (fleet_[id].copies_in_flight() == 0) failed(id, now, classification::stop());
          return;
        }
      }
    }
    request& r = fleet_[id];
    r.start_copy(attempt);
    metrics_.attempt(now, r.in_incident);
    transport_.send(id, attempt, now);
    // After send: an answer due exactly at the delay comes before the next copy's timer.
    if (hedger_.enabled()) hedger_.sent(transport_, id, attempt, now);
  }

  // Attempt `attempt` of request `id` was answered with a success now. An answer to a copy that
  // is no longer in flight (it timed out, or another copy ended the request) is wasted work.
  void succeeded(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    request& r = fleet_[id];
    if (r.state == request_state::ended || !r.in_flight(attempt)) {
      ++metrics_.counters().wasted_work;
      return;
    }
    r.end_copy(attempt);
    if (hedger_.enabled()) hedger_.won(fleet_, id, attempt, now, metrics_.counters());
    r.state = request_state::ended;
    metrics_.success(now, now - r.start);
    fleet_.succeeded(id, now);
    fleet_.ended(id, now);
    transport_.note_outcome(attempt_status::success);
    transport_.note_end(end_reason::success);
  }

  // Attempt `attempt` of request `id` was answered 503 now (by the incident or a full queue).
  void unavailable(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    fleet_[id].end_copy(attempt);
    metrics_.failure(now);
    transport_.note_outcome(unavailable_.action() != classification::kind::stop
                                ? attempt_status::failure
                                : attempt_status::not_retryable);
    failed(id, now, unavailable_);
  }

  // The server's defences (stormguard_engine/defences.hpp) --------------------------------------

  // Attempt `attempt` of request `id` took a worker: counted as served (served amplification).
  void served(std::uint32_t id) {
    ++metrics_.counters().served;
    if (fleet_[id].in_incident) ++metrics_.counters().incident_served;
  }

  // Whether attempt `attempt` of request `id` is still awaited (not ended, not timed out): an
  // answer to one that is not reaches nobody.
  [[nodiscard]] bool awaits(std::uint32_t id, std::int32_t attempt) {
    const request& r = fleet_[id];
    return r.state != request_state::ended && r.in_flight(attempt);
  }

  // Attempt `attempt` of request `id` was answered 503 now with Retry-After `delay` (the
  // concurrency limit): a retryable 503 whose retry waits as the client profile says: at least
  // `delay` (minimum: the library's retry_policy), exactly `delay` (replace), or its own backoff
  // (ignore).
  void unavailable_after(std::uint32_t id, std::int32_t attempt, std::int64_t now, duration delay) {
    if (profile_.retry_after == retry_after_use::ignore) {
      unavailable(id, attempt, now);
      return;
    }
    fleet_[id].end_copy(attempt);
    metrics_.failure(now);
    const bool retried = unavailable_.action() != classification::kind::stop;
    const bool replace = profile_.retry_after == retry_after_use::replace;
    const classification verdict =
        retried && !replace ? classification::retry_after(delay) : unavailable_;
    transport_.note_outcome(retried ? attempt_status::failure : attempt_status::not_retryable);
    failed(id, now, verdict, replace ? std::optional<duration>(delay) : std::nullopt);
  }

  // Attempt `attempt` of request `id` was answered 503 now with "do not retry" (gRFC A6 pushback
  // -1: the server's retry budget, drop-expired): the request ends (server_refused). Its client's
  // budget records the failed attempt as a non-retryable one: nothing deposited, no retry
  // withdrawn.
  void refused(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    request& r = fleet_[id];
    r.end_copy(attempt);
    metrics_.failure(now);
    transport_.note_outcome(attempt_status::not_retryable);
    (void)fleet_.failed(id, now, classification::stop());
    if (r.copies_in_flight() > 0) return;  // another copy may still succeed
    r.state = request_state::ended;
    fleet_.ended(id, now);
    transport_.note_end(end_reason::server_refused);
    ++metrics_.counters().server_refused;
  }

  // Attempt `attempt` of request `id` timed out now; nothing if it was answered already.
  void timed_out(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    request& r = fleet_[id];
    if (r.state == request_state::ended || !r.in_flight(attempt)) return;
    r.end_copy(attempt);
    metrics_.timeout(now);
    transport_.note_outcome(attempt_status::timeout);
    failed(id, now, classification::retry().as_timeout());
  }

  // Whether request `id` has ended (a transport that cancels its losing copies asks).
  [[nodiscard]] bool ended(std::uint32_t id) { return fleet_[id].state == request_state::ended; }

  // The client profile that plays this strategy (profile_of: the strategy's, else the
  // scenario's).
  [[nodiscard]] const client_profile& profile() const noexcept { return profile_; }
  // The attempts' timeout, in ns.
  [[nodiscard]] std::int64_t timeout() const noexcept { return timeout_; }
  [[nodiscard]] std::int64_t end() const noexcept { return end_; }
  [[nodiscard]] engine::metrics& run_metrics() noexcept { return metrics_; }
  // The clients and their budgets (the lab attaches real stores' syncers to them).
  [[nodiscard]] fleet<B>& clients() noexcept { return fleet_; }

  // The result, once the run is over: copies still in flight and requests not ended counted.
  [[nodiscard]] strategy_result finish() {
    std::int64_t in_flight_attempts = 0;
    std::int64_t requests_in_flight = 0;
    for (const request& r : fleet_.requests()) {
      in_flight_attempts += r.copies_in_flight();
      if (r.state != request_state::ended) ++requests_in_flight;
    }
    strategy_result r = metrics_.finish(in_flight_attempts, requests_in_flight);
    const store_load load = fleet_.load();
    r.store_syncs = load.syncs;
    r.store_sync_timeouts = load.sync_timeouts;
    r.store_busiest_second = load.busiest_second;
    return r;
  }

 private:
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
    transport_.schedule_arrival(now + static_cast<std::int64_t>(std::llround(gap_ns)));
  }

  // An attempt failed: the fleet decides (the library's retry_policy), the driver acts. With
  // other copies still in flight (hedging) a retry leaves the request awaiting them; a give-up
  // ends the request, and their answers then count as wasted work. A client that never retries
  // (client_profile::retries false) stops at once; `exact_delay` is a Retry-After the client
  // sleeps instead of its backoff (retry_after_use::replace; the policy still decides whether).
  void failed(std::uint32_t id, std::int64_t now, classification verdict,
              std::optional<duration> exact_delay = std::nullopt) {
    if (!profile_.retries) verdict = classification::stop();
    if (hedger_.enabled()) {
      switch (hedger_.failed(fleet_, id, now, verdict, metrics_.counters())) {
        case hedge_next::wait:
          return;
        case hedge_next::send_now:
          start_attempt(id, fleet_[id].attempt + 1, now);
          return;
        case hedge_next::give_up:
          break;  // the copies in flight were cancelled; the request ends below
      }
    }
    retry_decision next = fleet_.failed(id, now, verdict);
    if (next.retry && exact_delay) next.delay = *exact_delay;
    request& r = fleet_[id];
    if (next.retry) {
      transport_.note_retry(next.delay);
      if (r.copies_in_flight() == 0) r.state = request_state::backing_off;
      r.previous_delay = next.delay.count();
      transport_.schedule_attempt(add_saturated(now, std::max<std::int64_t>(0, next.delay.count())),
                                  id, r.attempt + 1);
      return;
    }
    r.state = request_state::ended;
    fleet_.ended(id, now);
    transport_.note_end(next.reason);
    if (next.reason == end_reason::budget_exhausted) {
      ++metrics_.counters().budget_exhausted;
    } else {
      ++metrics_.counters().attempts_exhausted;
    }
  }

  const scenario& s_;
  Transport& transport_;
  std::int64_t end_;
  std::int64_t timeout_;
  classification unavailable_;  // the verdict on a 503
  client_profile profile_;
  std::int64_t incident_start_ = 0;
  std::int64_t incident_end_ = 0;  // [0, 0): no incident
  fleet<B> fleet_;
  engine::metrics metrics_;
  hedger hedger_;  // disabled unless the strategy hedges
  random_generator arrivals_rng_;
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_DRIVER_HPP
