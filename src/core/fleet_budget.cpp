// SPDX-License-Identifier: Apache-2.0
#include "stormguard/fleet_budget.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>

#include "stormguard/detail/format.hpp"
#include "stormguard/detail/uint128.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard {

namespace {

[[noreturn]] void reject(const std::string& message) {
  throw std::invalid_argument("stormguard::fleet_budget: " + message);
}

const fleet_budget_options& validated(const fleet_budget_options& o) {
  // The ratio fields: ratio_budget's own validation (one definition of their ranges).
  (void)ratio_budget(o.ratio);
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  if (o.sync_interval < milliseconds(10) || o.sync_interval > seconds(10)) {
    reject("sync_interval must be in [10ms, 10s], got " + format_duration(o.sync_interval));
  }
  if (o.max_sync_interval < o.sync_interval || o.max_sync_interval > seconds(60)) {
    reject("max_sync_interval must be in [sync_interval (" + format_duration(o.sync_interval) +
           "), 60s], got " + format_duration(o.max_sync_interval));
  }
  if (o.sync_every_requests < 1 || o.sync_every_requests > 1'000'000) {
    reject("sync_every_requests must be in [1, 1000000], got " +
           std::to_string(o.sync_every_requests));
  }
  if (!(o.floor_scale > 0.0 && o.floor_scale <= 1.0)) {
    reject("floor_scale must be in (0, 1], got " + detail::format_double(o.floor_scale));
  }
  if (o.expected_clients < 0 || o.expected_clients > 10'000'000) {
    reject("expected_clients must be in [0, 10000000], got " + std::to_string(o.expected_clients));
  }
  if (o.shards < 1 || o.shards > fleet_budget::k_max_shards) {
    reject("shards must be in [1, 1024], got " + std::to_string(o.shards));
  }
  return o;
}

// a · b / c for non-negative a, b and positive c, without overflow, saturated to int64.
std::int64_t mul_div(std::int64_t a, std::int64_t b, std::int64_t c) noexcept {
  const detail::uint128 q = static_cast<detail::uint128>(a) * static_cast<detail::uint128>(b) /
                            static_cast<detail::uint128>(c);
  constexpr auto max = static_cast<detail::uint128>(INT64_MAX);
  return static_cast<std::int64_t>(q > max ? max : q);
}

}  // namespace

fleet_budget::fleet_budget(fleet_budget_options options)
    : options_(validated(options)),
      deposit_amount_(std::llround(options_.ratio.ratio * static_cast<double>(k_scale))),
      // floor/s · window(s) · 10^6 = floor · window(ns) / 1000, as ratio_budget's reserve.
      // A shard keeps 1/K of the fleet's floor.
      fleet_reserve_(std::llround(static_cast<double>(options_.ratio.min_retries_per_second) *
                                  static_cast<double>(options_.ratio.window.count() / 1000) *
                                  options_.floor_scale / static_cast<double>(options_.shards))),
      slice_ns_((options_.ratio.window.count() + ratio_budget::k_slices - 1) /
                ratio_budget::k_slices),
      local_(slice_ns_) {}

std::int64_t fleet_budget::shards_for(std::int64_t clients, duration sync_interval,
                                      double store_capacity, double share) {
  if (clients < 0) reject("shards_for: clients must be >= 0, got " + std::to_string(clients));
  if (sync_interval <= duration::zero()) {
    reject("shards_for: sync_interval must be > 0, got " + format_duration(sync_interval));
  }
  if (!(store_capacity > 0.0 && std::isfinite(store_capacity))) {
    reject("shards_for: store_capacity must be a positive number of syncs per second, got " +
           detail::format_double(store_capacity));
  }
  if (!(share > 0.0 && share <= 1.0)) {
    reject("shards_for: share must be in (0, 1], got " + detail::format_double(share));
  }
  const double asked = static_cast<double>(clients) /
                       std::chrono::duration<double>(sync_interval).count();  // syncs per second
  const double k = std::ceil(asked / (store_capacity * share));
  if (!(k < 9.2e18)) return INT64_MAX;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(k));
}

bool fleet_budget::joined(time_point now) const noexcept {
  return has_joined_ && now - last_success_ <= 3 * options_.max_sync_interval;
}

void fleet_budget::admit(time_point now) noexcept {
  const detail::lock hold(mutex_);
  local_.add(now, counts{1, 0});
  ++pending_.requests;
  ++requests_since_sync_;
  ++requests_since_base_;
  refresh(now);
}

void fleet_budget::refresh(time_point now) noexcept {
  // The change of this process's own ratio balance over its window since the last call: its
  // deposits and grants, and what expired. A deposit alone is not spendable: in a ratio budget
  // the deposits that leave the window take their part of the allowance with them.
  // A grant that leaves the window is not: it frees allowance in the store's window too, where
  // the next sync hands it out (counting it here as well would spend it twice).
  const counts total = local_.total(now);
  const std::int64_t balance = total.requests * deposit_amount_;
  const std::int64_t change = balance - local_balance_;
  local_balance_ = balance;
  credit_ += change;
  since_take_ += change;
}

void fleet_budget::spend(std::int64_t amount) noexcept {
  credit_ -= amount;
  since_take_ -= amount;
}

bool fleet_budget::withdraw_local(time_point now) noexcept {
  // The fallback: a ratio budget over this process's own window, with its part of the floor.
  // live_clients_ counts this shard's processes; expected_clients the whole fleet's.
  std::int64_t clients = live_clients_ > 0
                             ? live_clients_
                             : (options_.expected_clients + options_.shards - 1) / options_.shards;
  const std::int64_t reserve = clients > 0 ? fleet_reserve_ / clients : 0;
  const counts total = local_.total(now);
  const std::int64_t balance = total.requests * deposit_amount_ + reserve - total.retries * k_scale;
  return balance >= k_scale;
}

bool fleet_budget::withdraw(time_point now, std::int64_t draw) noexcept {
  credit_asker ask = nullptr;
  void* context = nullptr;
  std::int64_t wanted = 0;
  {
    const detail::lock hold(mutex_);
    refresh(now);
    if (!options_.ask_for_credit || asker_ == nullptr || asked_in_vain_ || credit_ >= k_scale ||
        !joined(now)) {
      return decide(now, draw);
    }
    // Claims that follow need: the rest of one retry from what the fleet has not claimed, asked
    // outside the lock (one round trip).
    ask = asker_;
    context = asker_context_;
    wanted = k_scale - std::max<std::int64_t>(credit_, 0);
    ++asks_;
    ++asks_in_progress_;
  }
  const std::int64_t got = ask(context, now, wanted);
  const detail::lock hold(mutex_);
  --asks_in_progress_;
  if (got > 0) {
    // Part of the store's claim for this process from now on; since_take_ carries it past a
    // sync in flight (whose answer the store computed before this ask).
    const std::int64_t added = std::min(got, wanted);
    credit_ += added;
    since_take_ += added;
    ++asks_granted_;
  } else {
    asked_in_vain_ = true;
  }
  refresh(now);
  return decide(now, draw);
}

void fleet_budget::set_asker(credit_asker ask, void* context) noexcept {
  for (;;) {
    {
      const detail::lock hold(mutex_);
      if (ask != nullptr || asks_in_progress_ == 0) {
        asker_ = ask;
        asker_context_ = ask != nullptr ? context : nullptr;
        return;
      }
    }
    // An ask in progress still uses the old context: it returns within its round trip.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::pair<std::int64_t, std::int64_t> fleet_budget::asks() const noexcept {
  const detail::lock hold(mutex_);
  return {asks_, asks_granted_};
}

bool fleet_budget::decide(time_point now, std::int64_t draw) noexcept {
  bool granted = false;
  if (joined(now)) {
    if (credit_ >= k_scale) {
      granted = true;
    } else if (credit_ > 0) {
      // A fractional share: granted with probability credit / 10^6, and used up either way, so
      // the expected number of retries it buys is exactly credit / 10^6.
      granted = draw < credit_;
      if (!granted) {
        since_take_ -= credit_;
        credit_ = 0;
      }
    }
  } else {
    granted = withdraw_local(now);
  }
  if (granted) {
    local_.add(now, counts{0, 1});
    ++pending_.retries;
    spend(k_scale);  // the grant's 10^6 leaves the credit
  }
  return granted;
}

bool fleet_budget::sync_due(time_point now) const noexcept {
  const detail::lock hold(mutex_);
  if (syncing_) return false;
  if (!synced_once_) return true;
  const duration since = now - last_sync_start_;
  if (since >= options_.max_sync_interval) return true;
  return since >= options_.sync_interval && requests_since_sync_ >= options_.sync_every_requests;
}

fleet_deltas fleet_budget::begin_sync(time_point now) noexcept {
  const detail::lock hold(mutex_);
  syncing_ = true;
  synced_once_ = true;
  last_sync_start_ = now;
  requests_since_sync_ = 0;
  in_flight_ = pending_;
  pending_ = counts{};
  refresh(now);
  since_take_ = 0;
  terms_own_ = std::min(local_.total(now).requests, requests_since_base_);
  return fleet_deltas{in_flight_.requests, in_flight_.retries};
}

void fleet_budget::end_sync(time_point now, const fleet_view& view) noexcept {
  joined_with(now, view, nullptr);
}

void fleet_budget::end_sync(time_point now, const fleet_answer& answer) noexcept {
  joined_with(now, answer.view, &answer.credit);
}

void fleet_budget::joined_with(time_point now, const fleet_view& view,
                               const std::int64_t* credit) noexcept {
  if (view.requests < 0 || view.retries < 0 || view.live_clients < 1) {
    sync_failed(now);
    return;
  }
  const detail::lock hold(mutex_);
  syncing_ = false;
  in_flight_ = counts{};
  refresh(now);
  // Only the requests the store can hold count toward the share: after an outage the store may
  // have lost its window (a Redis restarted empty), and holds only what was reported since;
  // counting the whole local window against that would hand the fleet several times its
  // allowance.
  const std::int64_t own = std::min(local_.total(now).requests, requests_since_base_);
  share_ppm_ = share_of(view, own);
  live_clients_ = view.live_clients;
  // From a store that hands out credit, the claim it set aside for this process (the other
  // processes' claims subtracted); from one that only counts, the share of what it saw.
  const std::int64_t portion =
      credit != nullptr
          ? *credit
          : claim(view, fleet_terms{own, deposit_amount_, fleet_reserve_, options_.ask_for_credit},
                  0);
  // The deposits and grants since begin_sync are this process's own, on top of its claim.
  credit_ = std::clamp<std::int64_t>(portion, -(INT64_MAX / 4), INT64_MAX / 4) +
            std::clamp<std::int64_t>(since_take_, -(INT64_MAX / 4), INT64_MAX / 4);
  since_take_ = 0;
  asked_in_vain_ = false;
  if (!has_joined_) has_joined_ = true;
  last_success_ = now;
}

void fleet_budget::sync_failed(time_point) noexcept {
  const detail::lock hold(mutex_);
  syncing_ = false;
  // Nothing is lost: the deltas the failed sync carried go out with the next one.
  pending_ += in_flight_;
  in_flight_ = counts{};
  // Leaving the fleet: the store may lose what was reported so far (a restart without
  // persistence); from now on this process's share counts only what it has not reported yet and
  // what follows, until a whole window has passed (end_sync).
  if (has_joined_) requests_since_base_ = pending_.requests;
  if (has_joined_) ++fallbacks_;
  has_joined_ = false;
}

fleet_budget::mode fleet_budget::current_mode(time_point now) const noexcept {
  const detail::lock hold(mutex_);
  return joined(now) ? mode::joined : mode::fallback;
}

std::int64_t fleet_budget::fallbacks() const noexcept {
  const detail::lock hold(mutex_);
  return fallbacks_;
}

std::int64_t fleet_budget::credit_micro() const noexcept {
  const detail::lock hold(mutex_);
  return credit_;
}

std::int64_t fleet_budget::share_ppm() const noexcept {
  const detail::lock hold(mutex_);
  return share_ppm_;
}

fleet_terms fleet_budget::terms() const noexcept {
  const detail::lock hold(mutex_);
  return fleet_terms{terms_own_, deposit_amount_, fleet_reserve_, options_.ask_for_credit};
}

std::int64_t fleet_budget::share_of(const fleet_view& totals, std::int64_t own) noexcept {
  // A process with no request in the store yet (one that has just started, such as a one-shot
  // command syncing before its first attempt) counts the request it is about to make, 1 / (R +
  // 1): its own count would give it nothing while the rest of the fleet's requests fill the
  // window, and an even share (1 / live) would hand every newcomer a live client's part on top of
  // the shares of those whose requests fill it. The share is at most 1: a store that lags behind
  // this process must not hand it more than the whole allowance.
  const std::int64_t r = totals.requests;
  if (r > 0 && own > 0) return std::min<std::int64_t>(k_scale, mul_div(own, k_scale, r));
  if (r > 0) return k_scale / (r < INT64_MAX ? r + 1 : r);
  return k_scale / std::max<std::int64_t>(1, totals.live_clients);
}

namespace {

// The fleet's allowance left in its window (saturating: garbage counts must not overflow).
// Negative when the fleet has granted more than its window allows.
std::int64_t allowance_of(const fleet_view& totals, const fleet_terms& terms) noexcept {
  const std::int64_t r = std::max<std::int64_t>(0, totals.requests);
  const std::int64_t deposit = std::max<std::int64_t>(0, terms.deposit);
  const std::int64_t reserve = std::clamp<std::int64_t>(terms.reserve, 0, INT64_MAX / 4);
  const std::int64_t deposits = std::min(mul_div(r, deposit, 1), INT64_MAX / 4);
  const std::int64_t spent = std::min(
      mul_div(std::max<std::int64_t>(0, totals.retries), fleet_budget::k_scale, 1), INT64_MAX / 4);
  return deposits + reserve - spent;
}

}  // namespace

std::int64_t fleet_budget::grant(const fleet_view& totals, const fleet_terms& terms,
                                 std::int64_t claimed, std::int64_t wanted) noexcept {
  if (wanted <= 0) return 0;
  const std::int64_t unclaimed =
      allowance_of(totals, terms) - std::clamp<std::int64_t>(claimed, 0, INT64_MAX / 4);
  return unclaimed >= wanted ? wanted : 0;
}

std::int64_t fleet_budget::claim(const fleet_view& totals, const fleet_terms& terms,
                                 std::int64_t claimed) noexcept {
  const std::int64_t r = std::max<std::int64_t>(0, totals.requests);
  // The fleet's allowance left in its window. Negative when the fleet has granted more than its
  // window allows: each process then carries its share of the debt, which its deposits repay
  // before it retries again.
  const std::int64_t allowance = allowance_of(totals, terms);
  const std::int64_t share = share_of(fleet_view{r, totals.retries, totals.live_clients},
                                      std::max<std::int64_t>(0, terms.own_requests));
  const std::int64_t target =
      allowance >= 0 ? mul_div(allowance, share, k_scale) : -mul_div(-allowance, share, k_scale);
  // Never more than the others have left unclaimed: two processes never hold the same credit.
  const std::int64_t unclaimed =
      std::max<std::int64_t>(0, allowance - std::clamp<std::int64_t>(claimed, 0, INT64_MAX / 4));
  const std::int64_t portion = std::min(target, unclaimed);
  // Claims that follow need: whole retries only; the fractions stay in the pool for askers.
  return terms.whole_retries && portion > 0 ? portion - portion % k_scale : portion;
}

std::int64_t fleet_budget::live_clients() const noexcept {
  const detail::lock hold(mutex_);
  return live_clients_;
}

}  // namespace stormguard
