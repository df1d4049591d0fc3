// SPDX-License-Identifier: Apache-2.0
// The fleet budget's sync step on virtual time (the internal engine target stormguard_sim_engine):
// for a strategy whose budget is a stormguard::fleet_budget, each client's budget exchanges its
// counts with a model of the shared store (stormguard/sim/fleet_store.hpp) as
// stormguard::fleet::redis_sync does with Redis. For every other budget class it is empty and
// its step does nothing.
//
// The step runs before each call a client's budget gets (admission, success, failure, end), at
// the time of that call:
//   1. a sync whose answer is due by now ends (end_sync with the view, or sync_failed);
//   2. a client idle for longer than max_sync_interval replays the latest sync its background
//      syncer would have made meanwhile (deltas are zero while idle, so only the view's age
//      differs: the store's totals are taken now, at most one round trip fresher than the real
//      syncer's);
//   3. if the budget says a sync is due, its deltas go to the store now and the answer is due
//      one round trip later (at once when the round trip is 0); a sync started in the store's
//      outage fails after the model's timeout.
// A budget whose claims follow need (ask_for_credit) differs: its background syncer runs on time
// (drain: a look sync_interval after each sync began, a sync then if the client made a request
// since, else one at max_sync_interval), instead of the replay of step 2, since the pool its asks
// draw from must hear of every grant as a real syncer reports it; and its asks reach the store
// (ask) with a round trip that delays the retry (take_ask_delay).
// The store serves one sync per 1/capacity seconds, in the order the steps send them: a sync that
// finds the store busy waits, is applied when served, and answers its wait later; one whose wait
// and round trip pass the timeout fails at the timeout, applied all the same (store_load counts
// the syncs served, those timeouts and the busiest second of store time).
// A budget kept in K shards (fleet_budget_options::shards) has K such stores, each with its own
// window, claims, live clients and capacity (one Redis or Cluster master per shard); client i
// spends from shard i mod K (stormguard::fleet::attach draws a shard per process: the model
// deals them out evenly instead). store_load's busiest second is the busiest shard's.
// The store: the fleet's window of requests and retries in slots of the store's time (the
// scenario's clock: one clock for the store, as Redis's TIME), the library's fleet_window (deltas
// clamped as fleet_window_store clamps them) and each client's claim (the credit handed out at
// its last sync, fleet_budget::claim, as fleet_window_store and the Redis script hand it out);
// live clients = the clients that have synced (no simulated client dies). Not thread-safe (one run,
// one thread).
#ifndef STORMGUARD_ENGINE_FLEET_SYNC_HPP
#define STORMGUARD_ENGINE_FLEET_SYNC_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <stdexcept>
#include <vector>

#include "stormguard/detail/format.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/sim/fleet_store.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::sim::engine {

// What the modelled store served in a run (strategy_result's store_* counters).
struct store_load {
  std::int64_t syncs = 0;           // syncs the store served (applied)
  std::int64_t sync_timeouts = 0;   // of them, those whose wait in its queue passed the timeout
  std::int64_t busiest_second = 0;  // the most syncs served in one second of store time
};

// Any budget but the fleet budget: no store, no step.
template <class B>
class fleet_sync {
 public:
  template <class Config>
  fleet_sync(const scenario&, const strategy&, const Config&) noexcept {}
  void attach(std::uint32_t, B&) noexcept {}
  void step(std::uint32_t, B&, std::int64_t) noexcept {}
  [[nodiscard]] std::int64_t take_ask_delay(std::uint32_t) noexcept { return 0; }
  [[nodiscard]] store_load load() const noexcept { return {}; }
};

template <>
class fleet_sync<fleet_budget> {
 public:
  fleet_sync(const scenario& s, const strategy& strat, const fleet_budget_options& o)
      : model_(strat.fleet_store),
        service_ns_(service_ns(strat.fleet_store.capacity)),
        max_sync_(o.max_sync_interval.count()),
        sync_(o.sync_interval.count()),
        shards_(static_cast<std::size_t>(
                    std::clamp<std::int64_t>(o.shards, 1, fleet_budget::k_max_shards)),
                shard(o.ratio.window)),
        clients_(static_cast<std::size_t>(std::max(1, s.clients))),
        askers_(clients_.size()) {}
  fleet_sync(const fleet_sync&) = delete;  // the budgets' askers point into it
  fleet_sync& operator=(const fleet_sync&) = delete;

  // Client i's budget asks this model's store when its claims follow need
  // (fleet_budget_options::ask_for_credit); a real store's syncer sets its own asker.
  void attach(std::uint32_t i, fleet_budget& b) noexcept {
    if (model_.external || !b.options().ask_for_credit) return;
    askers_[i] = asker{this, &b, i, 0};
    b.set_asker(&fleet_sync::ask_for, &askers_[i]);
  }

  // The time client i's last ask took (its round trip and wait, or the timeout), in ns, once:
  // the retry it decided waits that long more (a sync executor asks, then sleeps its backoff).
  [[nodiscard]] std::int64_t take_ask_delay(std::uint32_t i) noexcept {
    const std::int64_t d = static_cast<std::int64_t>(askers_[i].delay_us) * 1000;
    askers_[i].delay_us = 0;
    return d;
  }

  // The time one sync holds the store, in ns: 0 for an unlimited store. Throws
  // std::invalid_argument for a capacity outside [1, 10^9] syncs/s that is not +infinity.
  [[nodiscard]] static double service_ns(double capacity) {
    if (std::isinf(capacity) && capacity > 0) return 0.0;
    if (!(capacity >= 1.0 && capacity <= 1e9)) {
      throw std::invalid_argument(
          "fleet_store.capacity must be a number of syncs per second in [1, 1000000000] or "
          "infinity (no limit), got " +
          stormguard::detail::format_double(capacity));
    }
    return 1e9 / capacity;
  }

  [[nodiscard]] store_load load() const noexcept { return load_; }

  // The store model's memory per client, in bytes, at most (estimated_run_bytes): its state, its
  // asker and four queued looks (a budget that asks: measured at most 2.1 looks per client, at
  // 2,000 clients of 1 req/s; 1.04 at 20,000 of 0.1; the queue's vector may hold twice that).
  static constexpr std::size_t k_client_bytes = 160;

  // The step before a call of client `i`'s budget `b` at `now` (ns of the scenario's clock).
  void step(std::uint32_t i, fleet_budget& b, std::int64_t now) {
    if (model_.external) return;  // a real store: the caller's syncers keep the budgets in step
    drain(now);
    state& c = clients_[i];
    deliver(c, b, now);
    if (askers_[i].budget != nullptr) {
      // A budget that asks: its background syncer runs on time (drain), and syncs now if due.
      if (c.done_at < 0 && b.sync_due(at(now))) {
        start(i, c, b, now, now);
        deliver(c, b, now);
      }
      schedule(i, c);
      return;
    }
    if (c.done_at >= 0) return;  // a sync is in flight
    if (c.synced && now - c.last_start >= max_sync_ + model_.round_trip.count()) {
      // The background syncer's latest sync while this client was idle.
      const std::int64_t k = (now - model_.round_trip.count() - c.last_start) / max_sync_;
      start(i, c, b, c.last_start + k * max_sync_, now);
      deliver(c, b, now);
      if (c.done_at >= 0) return;
    }
    if (b.sync_due(at(now))) {
      start(i, c, b, now, now);
      deliver(c, b, now);
    }
  }

 private:
  // One shard's store: its window, the claims it holds, its live clients and its queue.
  struct shard {
    explicit shard(duration length) : window(length) {}
    fleet_window window;
    std::int64_t live = 0;
    std::int64_t claimed = 0;  // the sum of its clients' claims
    double free_at = 0.0;      // when it has served every sync it has been sent, ns
    std::int64_t second = -1;  // the second of store time being counted, and its syncs
    std::int64_t in_second = 0;
  };
  struct state {
    std::int64_t done_at = -1;  // when the answer of the sync in flight arrives; -1: none
    std::int64_t last_start = 0;
    fleet_answer answer{};
    std::int64_t claim = 0;  // the credit the store holds for this client (>= 0)
    bool ok = false;
    bool synced = false;  // has ever synced (counted as live by the store)
  };
  // The context of client i's asker, and when its background syncer looks next (-1: never yet).
  struct asker {
    fleet_sync* self = nullptr;
    fleet_budget* budget = nullptr;
    std::uint32_t client = 0;
    std::uint32_t delay_us = 0;  // the last ask's round trip and wait (take_ask_delay)
    std::int64_t next_look = -1;
  };

  // When client i's background syncer next looks (a budget that asks): when the answer in flight
  // arrives; else sync_interval after the last sync began (a sync is due then if the client made
  // a request since), and max_sync_interval after it otherwise (the idle sync, which gives back
  // a claim the client did not spend).
  void schedule(std::uint32_t i, const state& c) {
    std::int64_t next = c.done_at;
    if (next < 0) {
      next = c.last_start + sync_;
      if (next <= last_drain_) next = c.last_start + max_sync_;
      next = std::max(next, last_drain_ + 1);
    }
    if (askers_[i].next_look == next) return;
    askers_[i].next_look = next;
    looks_.push(look{next, i});
  }

  // Runs the background syncers of the clients that ask whose look is due by `now`, in time
  // order, at their own times (a real process's syncer thread does not wait for a request).
  void drain(std::int64_t now) {
    while (!looks_.empty() && looks_.top().time <= now) {
      const look l = looks_.top();
      looks_.pop();
      asker& a = askers_[l.client];
      if (a.next_look != l.time) continue;  // replaced by a later look
      a.next_look = -1;
      last_drain_ = l.time;
      state& c = clients_[l.client];
      deliver(c, *a.budget, l.time);
      if (c.done_at < 0 && a.budget->sync_due(at(l.time))) {
        start(l.client, c, *a.budget, l.time, l.time);
        deliver(c, *a.budget, l.time);
      }
      schedule(l.client, c);
    }
    last_drain_ = std::max(last_drain_, now);
  }

  struct look {
    std::int64_t time;
    std::uint32_t client;
    bool operator>(const look& o) const noexcept {
      return time != o.time ? time > o.time : client > o.client;
    }
  };
  static time_point at(std::int64_t t) noexcept { return time_point(duration(t)); }

  static std::int64_t ask_for(void* context, time_point now, std::int64_t wanted) noexcept {
    auto& a = *static_cast<asker*>(context);
    return a.self->ask(a, now.time_since_epoch().count(), wanted);
  }

  // An ask of the client of `a` reaches its shard's store at `now`: granted from what no client
  // has claimed (fleet_budget::grant, as fleet_window_store and the Redis script grant it), after
  // the store's queue; in the outage, or past the timeout, it fails after the timeout.
  std::int64_t ask(asker& a, std::int64_t now, std::int64_t wanted) {
    const auto us = [](std::int64_t ns) { return static_cast<std::uint32_t>(ns / 1000); };
    if (store_down(now)) {
      a.delay_us = us(model_.timeout.count());
      return -1;
    }
    state& c = clients_[a.client];
    shard& store = shards_[a.client % shards_.size()];
    const std::int64_t wait = queue(store, now);
    if (wait > 0 && model_.round_trip.count() + wait > model_.timeout.count()) {
      ++load_.sync_timeouts;
      a.delay_us = us(model_.timeout.count());
      return -1;  // not applied: an ask the client gave up on grants nothing it could spend
    }
    a.delay_us = us(model_.round_trip.count() + wait);
    const fleet_deltas total = store.window.add(at(now + wait), fleet_deltas{});
    const fleet_view view{total.requests, total.retries, store.live};
    const std::int64_t granted =
        fleet_budget::grant(view, a.budget->terms(), store.claimed, wanted);
    c.claim += granted;
    store.claimed += granted;
    return granted;
  }

  [[nodiscard]] bool store_down(std::int64_t t) const noexcept {
    return model_.outage && t >= model_.outage->start.count() && t < model_.outage->end.count();
  }

  // Client `i` sends its deltas at `sent` (<= now); the store answers at store time `now`.
  void start(std::uint32_t i, state& c, fleet_budget& b, std::int64_t sent, std::int64_t now) {
    const fleet_deltas d = b.begin_sync(at(sent));
    c.last_start = sent;
    if (store_down(sent)) {
      c.ok = false;
      c.done_at = sent + model_.timeout.count();
      return;
    }
    shard& store = shards_[i % shards_.size()];
    // The store's own time: it serves the sync at now + wait.
    const std::int64_t wait = queue(store, now);
    const fleet_terms terms = b.terms();
    const fleet_deltas total = store.window.add(at(now + wait), d);  // the library's, clamped
    if (!c.synced) {
      c.synced = true;
      ++store.live;
    }
    // The store hands out credit as fleet_window_store does: the library's formula, with the
    // other clients' claims subtracted; this client's claim replaces its last one.
    store.claimed -= c.claim;
    const fleet_view view{total.requests, total.retries, store.live};
    const std::int64_t credit = fleet_budget::claim(view, terms, store.claimed);
    c.claim = std::max<std::int64_t>(credit, 0);
    store.claimed += c.claim;
    c.answer = fleet_answer{view, credit};
    if (wait > 0 && model_.round_trip.count() + wait > model_.timeout.count()) {
      ++load_.sync_timeouts;  // applied by the store, never heard of by the client
      c.ok = false;
      c.done_at = sent + model_.timeout.count();
      return;
    }
    c.ok = true;
    c.done_at = sent + model_.round_trip.count() + wait;
  }

  // A sync reaches the store at `now`: it is served once the store is free, and counted.
  // Returns its wait in ns (0 for an unlimited store, or one that is free).
  std::int64_t queue(shard& store, std::int64_t now) {
    const double begin = std::max(static_cast<double>(now), store.free_at);
    store.free_at = begin + service_ns_;
    const auto second = static_cast<std::int64_t>(begin / 1e9);
    if (second != store.second) {
      store.second = second;
      store.in_second = 0;
    }
    ++load_.syncs;
    load_.busiest_second = std::max(load_.busiest_second, ++store.in_second);
    return std::llround(begin - static_cast<double>(now));
  }

  static void deliver(state& c, fleet_budget& b, std::int64_t now) {
    if (c.done_at < 0 || c.done_at > now) return;
    if (c.ok) {
      b.end_sync(at(c.done_at), c.answer);
    } else {
      b.sync_failed(at(c.done_at));
    }
    c.done_at = -1;
  }

  fleet_store_model model_;
  double service_ns_;  // 1/capacity, in ns (0: no limit)
  store_load load_{};
  std::int64_t max_sync_;
  std::int64_t sync_;          // sync_interval, ns
  std::vector<shard> shards_;  // K (a shard without clients spends nothing, as in a real fleet)
  std::vector<state> clients_;
  std::vector<asker> askers_;  // one per client, stable: the budgets point at them
  // The background syncers' next looks (budgets that ask), earliest first; stale entries skipped.
  std::priority_queue<look, std::vector<look>, std::greater<>> looks_;
  std::int64_t last_drain_ = 0;
  static_assert(sizeof(state) + sizeof(asker) + 4 * sizeof(look) <= k_client_bytes);
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_FLEET_SYNC_HPP
