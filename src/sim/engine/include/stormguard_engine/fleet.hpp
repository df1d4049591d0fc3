// SPDX-License-Identifier: Apache-2.0
// The client fleet of the time-series model (the internal engine target stormguard_sim_engine): the
// logical requests, the client instances (each a generator and a budget) and the calls of the
// library's budget protocol (stormguard::request_budget, budget_protocol.hpp: the same calls, in
// the same order, as the retrier's) — admit a request, an attempt succeeded, an attempt failed
// (record and decide), the request ended.
#ifndef STORMGUARD_ENGINE_FLEET_HPP
#define STORMGUARD_ENGINE_FLEET_HPP

#include <bit>
#include <cstdint>
#include <deque>
#include <vector>

#include "stormguard/budget.hpp"
#include "stormguard/budget_protocol.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"
#include "stormguard_engine/fleet_sync.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::sim::engine {

// The strategy as a run applies it: a scenario's max_retries replaces the strategy's (for a
// strategy that retries and takes the scenario's count). Shared by the simulator and the lab.
inline strategy with_scenario_retries(const scenario& s, const strategy& strat) {
  strategy applied = strat;
  if (s.max_retries && applied.scenario_retries && applied.retry.max_retries > 0) {
    applied.retry.max_retries = *s.max_retries;
  }
  return applied;
}

// awaiting: at least one copy in flight; backing_off: none, a retry is scheduled; ended.
enum class request_state : std::uint8_t { awaiting, backing_off, ended };

// The most copies of one logical request in flight at once (the width of request::copies).
inline constexpr std::int32_t k_max_copies = 8;

// One logical request. Its client is its index modulo the number of clients (round-robin), so it
// is not stored: 24 bytes per logical request, the bulk of a run's memory.
//
// Several copies (attempts) of one logical request may be in flight at once: `copies` has bit k
// set while attempt `attempt - k` is in flight (neither answered nor timed out), so an answer or
// a timeout counts once, for the copy it belongs to, and a late answer of a copy that timed out
// is recognised as such. Without hedging there is at most one copy: bit 0, the latest attempt.
struct request {
  std::int64_t start;           // arrival = start of attempt 1, ns
  std::int64_t previous_delay;  // the delay waited before the current attempt, ns
  std::int32_t attempt;         // the latest attempt number started
  request_state state;
  request_budget budget;  // the request's side of the budget protocol (1 byte)
  bool in_incident;       // started inside the incident window: its attempts count for the incident
  std::uint8_t copies;    // bit k: attempt `attempt - k` is in flight

  // Attempt `number` (above every earlier one) leaves now.
  void start_copy(std::int32_t number) noexcept {
    const std::int32_t shift = number - attempt;
    copies = shift >= k_max_copies ? 0 : static_cast<std::uint8_t>(copies << shift);
    copies |= 1U;
    attempt = number;
    state = request_state::awaiting;
  }
  // Attempt `number` is in flight (not answered, not timed out).
  [[nodiscard]] bool in_flight(std::int32_t number) const noexcept {
    const std::int32_t k = attempt - number;
    return k >= 0 && k < k_max_copies && ((copies >> k) & 1U) != 0;
  }
  // Attempt `number` was answered or timed out: no longer in flight.
  void end_copy(std::int32_t number) noexcept {
    const std::int32_t k = attempt - number;
    if (k >= 0 && k < k_max_copies) copies = static_cast<std::uint8_t>(copies & ~(1U << k));
  }
  // The copies in flight.
  [[nodiscard]] int copies_in_flight() const noexcept { return std::popcount(copies); }
};
static_assert(sizeof(request) == 24);

template <class B>
struct client {
  client(std::uint64_t seed, const auto& config) : rng(seed), budget(config) {}
  random_generator rng;
  B budget;
};

// Domain tag of the clients' generators.
inline constexpr std::uint64_t k_tag_client = 0x636c69656e74ULL;  // "client"

template <class B>
class fleet {
 public:
  // Client i's generator is seeded from (seed, i, the strategy's name); `expected_requests`
  // reserves the request table.
  template <class Config>
  fleet(const scenario& s, const strategy& strat, const Config& config, double expected_requests)
      : policy_(strat.retry),
        clients_count_(static_cast<std::uint32_t>(s.clients)),
        sync_(s, strat, config) {
    const std::uint64_t strategy_hash = seeds::fnv1a(strat.name);
    for (int i = 0; i < s.clients; ++i) {
      const std::uint64_t seed =
          seeds::mix(seeds::mix(seeds::mix(s.seed, k_tag_client), static_cast<std::uint64_t>(i)),
                     strategy_hash);
      clients_.emplace_back(seed, config);
      sync_.attach(static_cast<std::uint32_t>(i), clients_.back().budget);
    }
    requests_.reserve(static_cast<std::size_t>(expected_requests * 1.05) + 16);
  }

  // A new logical request arrived now; returns its id.
  std::uint32_t add(std::int64_t now, bool in_incident) {
    const auto id = static_cast<std::uint32_t>(requests_.size());
    requests_.push_back(
        request{now, 0, 0, request_state::awaiting, request_budget{}, in_incident, 0});
    return id;
  }

  [[nodiscard]] request& operator[](std::uint32_t id) { return requests_[id]; }
  [[nodiscard]] const std::vector<request>& requests() const noexcept { return requests_; }

  // The client's budget admits the request's first attempt (adaptive throttling may reject it
  // locally).
  [[nodiscard]] bool admit(std::uint32_t id, std::int64_t now) {
    auto& c = client_of(id, now);
    return requests_[id].budget.admit(c.budget, at(now), c.rng);
  }

  // The request's current attempt succeeded: its client's budget hears of it.
  void succeeded(std::uint32_t id, std::int64_t now) {
    request& r = requests_[id];
    r.budget.succeeded(client_of(id, now).budget, at(now), r.attempt);
  }

  // The request's current attempt failed (`verdict` is retry() for a 503, retry().as_timeout()
  // for a timeout): the one place where a retry is decided, by the library's retry_policy with
  // this client's generator and budget.
  [[nodiscard]] retry_decision failed(std::uint32_t id, std::int64_t now, classification verdict) {
    request& r = requests_[id];
    auto& c = client_of(id, now);
    retry_decision d = r.budget.failed(policy_, c.budget, r.attempt, verdict,
                                       duration(r.previous_delay), c.rng, at(now));
    // A budget that asked its store for credit decided one round trip later.
    const std::int64_t asked = sync_.take_ask_delay(id % clients_count_);
    if (d.retry) d.delay += duration(asked);
    return d;
  }

  // A hedged copy after the first asks the client's budget (stormguard::try_charge_hedge); and a
  // granted copy ended (stormguard::hedge_ended). See stormguard_engine/hedging.hpp.
  [[nodiscard]] bool try_hedge(std::uint32_t id, std::int64_t now) {
    auto& c = client_of(id, now);
    return try_charge_hedge(c.budget, at(now), c.rng);
  }
  void hedge_ended(std::uint32_t id, std::int64_t now) {
    stormguard::hedge_ended(client_of(id, now).budget, at(now));
  }

  // The request ended (success or give-up): its client's budget hears of it.
  void ended(std::uint32_t id, std::int64_t now) {
    requests_[id].budget.end(client_of(id, now).budget, at(now));
  }

  // Client i's budget (i < the scenario's clients), for a caller that syncs it with a real store.
  [[nodiscard]] B& client_budget(std::uint32_t i) { return clients_[i].budget; }
  [[nodiscard]] std::uint32_t clients_count() const noexcept { return clients_count_; }
  // What the modelled fleet store served (zero without one).
  [[nodiscard]] store_load load() const noexcept { return sync_.load(); }

 private:
  // The request's client, after its budget's sync step at `now` (fleet_sync.hpp; nothing for a
  // budget that has no store).
  [[nodiscard]] client<B>& client_of(std::uint32_t id, std::int64_t now) {
    const std::uint32_t i = id % clients_count_;
    sync_.step(i, clients_[i].budget, now);
    return clients_[i];
  }
  [[nodiscard]] static time_point at(std::int64_t now) { return time_point(duration(now)); }

  retry_policy policy_;
  std::uint32_t clients_count_;
  std::deque<client<B>> clients_;  // a deque: budgets are neither copyable nor movable
  std::vector<request> requests_;
  fleet_sync<B> sync_;
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_FLEET_HPP
