// SPDX-License-Identifier: Apache-2.0
// Hedged requests in the time-series model (the internal engine target stormguard_sim_engine), for
// a strategy whose policy has `hedging`: the driver (driver.hpp) calls these hooks and acts on
// their answers; the decision of when the next copy goes is the library's
// (stormguard::hedging_policy::plan_next, gRFC A6 semantics), and every copy after the first asks
// its client's budget (stormguard::try_charge_hedge, through fleet::try_hedge).
//
// The model:
//   - Copy 1 leaves at arrival; copy k + 1 is due `delay` after copy k (the policy's fixed delay,
//     or the quantile of the latencies of the run's successful requests so far), up to
//     max_attempts copies. A copy that answers with a non-fatal outcome (a timeout, or a 503 when
//     hedging.non_fatal_statuses has 503) sends the next copy at once; a fatal one (a 503
//     otherwise) ends the request as failed.
//   - A due copy that the budget refuses is not sent (hedges_refused), and no further copy is
//     sent for that request; the copies in flight keep running (a spent budget never cancels
//     work already sent). If none is in flight, the request ends as failed.
//   - The first success wins (hedges_won when it is not copy 1); the copies still in flight are
//     cancelled (hedges_cancelled): the client forgets them, but the server keeps serving them
//     (their worker stays busy until their service ends, as on an HTTP/1.1 server where closing
//     the connection does not stop the handler), and their answers count as wasted_work.
//   - A budget that hears retry ends (concurrency) hears of every granted copy when its request
//     ends.
//
// Timers of copies that are no longer due (another copy was sent sooner, the request ended) are
// recognised when they fire and ignored. Not thread-safe: one thread runs a run.
#ifndef STORMGUARD_ENGINE_HEDGING_HPP
#define STORMGUARD_ENGINE_HEDGING_HPP

#include <cstdint>
#include <optional>
#include <vector>

#include "stormguard/classify.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"
#include "stormguard_engine/fleet.hpp"

namespace stormguard::sim::engine {

// What the driver does after a failed copy of a hedged request.
enum class hedge_next : std::uint8_t {
  wait,      // other copies are in flight: wait for them
  send_now,  // send copy `attempt + 1` now (driver.start_attempt)
  give_up,   // end the request as failed (the copies in flight were cancelled)
};

// Whether a copy whose timer fired goes out.
enum class hedge_due : std::uint8_t {
  send,     // charged to the budget: send it
  stale,    // no longer due (a later copy left, or the request ended): ignore
  refused,  // the budget refused it: not sent, and no further copy for this request
};

class hedger {
 public:
  // Disabled unless the strategy hedges and its client retries at all (client_profile::retries).
  hedger(const strategy& strat, bool client_retries) {
    if (!strat.hedging || !client_retries) return;
    policy_.emplace(strat.hedging->options);
    non_fatal_503_ = strat.hedging->non_fatal_statuses.contains(503);
    if (strat.hedging->options.delay_quantile > 0.0) {
      tracker_.emplace(strat.hedging->options.delay_quantile);
    }
  }

  [[nodiscard]] bool enabled() const noexcept { return policy_.has_value(); }

  // Copy `attempt` (> 1) of request `id` is due now.
  template <class B>
  [[nodiscard]] hedge_due copy_due(fleet<B>& f, std::uint32_t id, std::int32_t attempt,
                                   std::int64_t now, strategy_result& counters) {
    const request& r = f[id];
    if (r.state == request_state::ended || r.attempt != attempt - 1 || stopped(id)) {
      return hedge_due::stale;
    }
    if (!f.try_hedge(id, now)) {
      ++counters.hedges_refused;
      stop(id);
      return hedge_due::refused;
    }
    ++counters.hedges_sent;
    return hedge_due::send;
  }

  // Copy `attempt` of request `id` leaves now: the next copy's timer, if the policy sends one.
  template <class Transport>
  void sent(Transport& transport, std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    const time_point t = at(now);
    const duration delay = policy_->delay(tracker_ ? &*tracker_ : nullptr);
    const hedge_plan plan =
        policy_->plan_next(attempt, t, t, std::nullopt, time_point::max(), delay);
    if (plan.send) transport.schedule_attempt(plan.at.time_since_epoch().count(), id, attempt + 1);
  }

  // Copy `attempt` of request `id` succeeded now (its bit already cleared), before the request
  // ends: counts the win, cancels the copies still in flight and ends the granted copies.
  template <class B>
  void won(fleet<B>& f, std::uint32_t id, std::int32_t attempt, std::int64_t now,
           strategy_result& counters) {
    request& r = f[id];
    if (attempt > 1) ++counters.hedges_won;
    if (tracker_) tracker_->record(duration(now - r.start));
    cancel_and_release(f, id, now, counters);
  }

  // A copy of request `id` failed now with `verdict` (its bit already cleared).
  template <class B>
  [[nodiscard]] hedge_next failed(fleet<B>& f, std::uint32_t id, std::int64_t now,
                                  classification verdict, strategy_result& counters) {
    const request& r = f[id];
    if (r.state == request_state::ended) return hedge_next::wait;  // a cancelled copy's late answer
    const bool non_fatal =
        verdict.timeout() || (non_fatal_503_ && verdict.action() != classification::kind::stop);
    if (non_fatal) {
      if (!stopped(id) && r.attempt < policy_->options().max_attempts) return hedge_next::send_now;
      if (r.copies_in_flight() > 0) return hedge_next::wait;
    }
    cancel_and_release(f, id, now, counters);
    return hedge_next::give_up;
  }

 private:
  [[nodiscard]] static time_point at(std::int64_t now) { return time_point(duration(now)); }

  template <class B>
  void cancel_and_release(fleet<B>& f, std::uint32_t id, std::int64_t now,
                          strategy_result& counters) {
    request& r = f[id];
    counters.hedges_cancelled += r.copies_in_flight();
    r.copies = 0;
    for (std::int32_t k = 1; k < r.attempt; ++k) f.hedge_ended(id, now);
  }

  [[nodiscard]] bool stopped(std::uint32_t id) const noexcept {
    return id < stopped_.size() && stopped_[id];
  }
  void stop(std::uint32_t id) {
    if (stopped_.size() <= id) stopped_.resize(static_cast<std::size_t>(id) + 1, false);
    stopped_[id] = true;
  }

  std::optional<hedging_policy> policy_;
  std::optional<latency_tracker> tracker_;
  bool non_fatal_503_ = false;
  std::vector<bool> stopped_;  // requests whose copies the budget stopped
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_HEDGING_HPP
