// SPDX-License-Identifier: Apache-2.0
/// \file
/// One ratio budget for a whole fleet of client processes.
///
/// A ratio_budget kept per process stops working when a fleet has many small clients: each keeps
/// its own floor (min_retries_per_second), so N processes allow N floors, and at 2,000 clients of
/// 1 request/s the default floor alone is ten times the demand. fleet_budget keeps Finagle's
/// ratio budget (retries <= ratio · requests over a window, plus a floor) for the fleet: every
/// process counts locally and, off the request path, exchanges its counts with a shared store
/// (stormguard::fleet's Redis syncer, or the simulator's store model) and receives the fleet's
/// window totals and the number of live processes in return. Between two exchanges a process
/// spends only its share of what the fleet has left, so N processes do not spend the same
/// allowance N times.
///
/// This class is the algorithm only, standard library only: it never talks to a store and never
/// reads a clock. The owner drives the exchange (the sync step):
///
/// \code{.cpp}
///  if (budget.sync_due(now)) {
///    const fleet_deltas out = budget.begin_sync(now);  // this process's counts since the last
///    fleet_view in;                                    // ... one round trip to the store ...
///    if (ok) budget.end_sync(now, in); else budget.sync_failed(now);
///  }
/// \endcode
///
/// and the executors use it like any budget (retry_budget concept of budget.hpp):
///
/// \code{.cpp}
///  stormguard::fleet_budget budget({.ratio = {.ratio = 0.1, .min_retries_per_second = 10}});
///  stormguard::retrier retry(policy, clock, rng, budget);
/// \endcode
///
/// Algorithm (all amounts in integer micro-retries, 1 retry = 10^6):
///
/// \code{.unparsed}
///  allowance A = ratio · R_fleet + floor · window − W_fleet      (the fleet's window totals)
///  share s     = r_local / R_fleet   (r_local: this process's requests in its own window;
///                                     1 / live_clients while the fleet has no requests;
///                                     1 / (R_fleet + 1) while this process has none yet: a
///                                     process that has just started counts the request it is
///                                     about to make)
///  claim       = min(s · A, max(0, A − C))   (fleet_budget::claim; C: the claims the store
///                                     holds for the other live processes)
///  at each sync:      credit = claim + (deposits − grants since the deltas were taken); the
///                     store keeps the claim (its positive part) for this process until its
///                     next sync or the expiry of its heartbeat (fleet_window_store, the Redis
///                     script: no two processes hold the same credit). From a store that only
///                     counts (end_sync with a fleet_view alone), C = 0.
///  between syncs:     credit += ratio · 10^6 per request, −= the same as this process's
///                     deposits leave its window, −= 10^6 per retry granted. A grant that leaves
///                     the window frees allowance in the store, which the next sync hands out.
///  each retry:        granted when credit >= 10^6 (credit −= 10^6); when 0 < credit < 10^6 it is
///                     granted with probability credit / 10^6 (the caller's generator) and the
///                     fractional credit is used up either way
/// \endcode
///
/// Shares are fractional and never rounded up: at 20,000 clients of 0.1 request/s a share is about
/// 0.1 retry, and the expected number of retries the fleet is granted in one round is A. With
/// fleet_budget_options::ask_for_credit the claims follow need instead: the store hands out whole
/// retries only (the fractions stay in its pool), and a process whose credit is below one retry
/// asks the store for the rest of one when a retry is wanted (set_asker; fleet_budget::grant).
///
/// Overshoot. A process's view of the fleet is up to L = (its sync interval + the store's round
/// trip) old. With a store that only counts, what it allots misses the retries the rest of the
/// fleet was granted since their last reports, and it re-spends its share of them: up to the
/// retries the fleet grants in L (a whole burst when L is as long as the burst: 2,000 clients of
/// 1 req/s, each reporting its grants about a second late, granted 1.17x during the Friday-night
/// incident against 1.115x for one shared budget). With a store that hands out credit the age of
/// the view no longer matters: credit handed out is claimed until its holder reports what it
/// spent, so the fleet can exceed one shared budget only by (a) the grants made during one round
/// trip against a claim the store has already replaced (at most (ratio · fleet request rate +
/// floor) · RTT), and (b) the fractional draws, exact in expectation, at most one retry per
/// process above its claim in the worst case (standard deviation at most sqrt(N) / 2 retries per
/// round for N processes). Neither depends on the sync interval; a long interval costs the other
/// way: a claim its holder does not spend stays unavailable to the rest of the fleet until the
/// holder's next sync. Measured against one shared ratio_budget on the same traffic with every
/// attempt failing (tests/fleet_budget_test.cpp, round trip 0): +0.06 % at L = 100 ms (200
/// clients of 10 req/s) and −7.9 % at L = 1 s (2,000 clients of 1 req/s); with a counting store
/// +4.9 % and +12.6 %.
///
/// When the store is away (begin_sync/sync_failed, or no successful sync for 3 · max_sync_interval)
/// the budget never blocks a request on it: it falls back to a local ratio budget over this
/// process's own window whose floor is the fleet floor ÷ the last known number of live clients
/// (fractional; before the first successful sync: fleet floor ÷ expected_clients when that is
/// given, else 0, the ratio alone). It rejoins the fleet at the next successful sync. The store
/// may have lost its window meanwhile (a Redis restarted without persistence holds only what was
/// reported after the restart), so for one window after an outage a process's share counts only
/// its requests since the outage began (those it still owed the store, and later ones): never
/// more than the store can hold, at the price of a smaller share for one window when the store
/// kept everything.
///
/// Thread-safe: every member takes one short critical section; none allocates.
#ifndef STORMGUARD_FLEET_BUDGET_HPP
#define STORMGUARD_FLEET_BUDGET_HPP

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/sliding_window.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/export.hpp"
#include "stormguard/random.hpp"

namespace stormguard {

class fleet_budget;

/// Where a fleet budget's shared counts live: what stormguard::fleet's Redis syncer connects to.
/// Plain text, never used by fleet_budget itself (it never talks to a store): an executor that
/// builds the budget from a policy attaches a syncer with these settings when the fleet
/// component is built (without a store the budget stays in its fallback, a local ratio budget).
struct fleet_store_options {
  /// redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] (a Redis, or any node of a Redis Cluster: the
  /// syncer follows MOVED), redis+sentinel://[[USER:]PASSWORD@]HOST[:PORT][,...]/MASTER[/DB]
  /// (the master found through Redis Sentinel), or empty: no store (the simulator models one).
  /// Secret when it holds a password: print it through stormguard::redact().
  std::string url;
  /// The service's fleet key: 1 to 200 printable ASCII characters other than '{' and '}'. Every
  /// process of one service uses the same key; an HTTP client's per-host budget uses
  /// "KEY:scheme://host:port".
  std::string key;
  /// The name of an environment variable holding the store's password (overrides one in the
  /// URL); empty = none. The name, never the password.
  std::string password_env;

  friend bool operator==(const fleet_store_options&, const fleet_store_options&) = default;
};

/// The settings of a fleet_budget: a budget kind of the one list (stormguard/budget_kinds.hpp),
/// kind "fleet". Policy files write it as a ratio budget with a `fleet` object
/// ({"kind": "ratio", ..., "fleet": {"store": URL, "key": KEY, "sync_interval": "100ms"}}).
struct fleet_budget_options {
  /// The fleet's ratio budget: ratio, window and min_retries_per_second (the floor of the whole
  /// fleet, not of one process). Validated as ratio_budget validates them.
  ratio_budget_options ratio;
  /// How often a busy process exchanges its counts with the store. In [10 ms, 10 s]; default
  /// 100 ms. Store load: live clients ÷ sync_interval round trips per second.
  duration sync_interval = std::chrono::milliseconds(100);
  /// The longest a process waits between two exchanges, however little traffic it has. In
  /// [sync_interval, 60 s]; default 2 s.
  duration max_sync_interval = std::chrono::seconds(2);
  /// A process with little traffic syncs after at most this many of its own requests once
  /// sync_interval has passed (else only when max_sync_interval has). In [1, 1,000,000]; default 1.
  std::int64_t sync_every_requests = 1;
  /// The fleet size assumed before the first successful sync (its fallback floor is the fleet
  /// floor ÷ this). 0 = unknown: the fallback then has no floor until the first sync. In
  /// [0, 10,000,000].
  std::int64_t expected_clients = 0;
  /// The fleet's floor is min_retries_per_second × floor_scale retries per second: a fleet run
  /// X times smaller than the one the policy was written for (`stormguard lab --scale X`,
  /// `simulate --scale X`) uses X, so that a fractional floor (0.5/s) stays exact. In (0, 1];
  /// default 1. Not a policy-file setting.
  double floor_scale = 1.0;
  /// The number of shards K the fleet's budget is kept in, in [1, 1024]; default 1 (one budget,
  /// one store key). With K > 1 the fleet keeps K independent budgets, each under its own store
  /// key (`KEY#S/K` for shard S: distinct hash tags, so a Redis Cluster can place them on
  /// different masters) and each with 1/K of the floor; a process spends from one shard only
  /// (stormguard::fleet::attach chooses it), with the ratio over the requests of that shard's
  /// processes. A store then serves 1/K of the fleet's syncs per key. The K allowances sum to
  /// the fleet's exactly (ratio · R + floor · window: the budget is linear in the requests), so
  /// sharding never lets the fleet spend more; what it costs is the other way: a shard whose
  /// processes fail more than the others cannot spend their unused allowance
  /// (docs/budgets.md, "Shards"). Every process of a fleet must use the same K (processes with
  /// another K keep other keys: a separate budget). fleet_budget itself uses K only to take its
  /// part of the floor (and of expected_clients before its first sync).
  std::int64_t shards = 1;
  /// Claims that follow need (default false: shares only). With true, a store hands a process
  /// whole retries only (its share rounded down: a share smaller than one retry stays in the
  /// fleet's pool), and a process whose credit is below one retry when a retry is wanted asks the
  /// store for the rest of one retry (fleet_budget::set_asker: one round trip, serialised by the
  /// store, granted from the allowance no process has claimed, all or nothing). A fleet of many
  /// processes that each send few requests (20,000 clients of 0.1 request/s: a share is a tenth of
  /// a retry) then retries its rare failures wherever they happen, and the store still never
  /// hands out more than the allowance (docs/budgets.md measures the fleet against one shared
  /// budget). The cost: a retry of a process without credit waits one store round trip
  /// more (on the thread that decides it: in an async executor, its event loop's thread, for at
  /// most the syncer's timeout), and each such retry is one more store command. Without an asker
  /// (no syncer attached, or a store of fleet protocol 3 before this option) the budget draws on
  /// its fractional credit as with shares. docs/budgets.md, "Claims that follow need".
  bool ask_for_credit = false;
  /// The store the fleet shares (not used by the budget itself; see fleet_store_options).
  fleet_store_options store;

  /// Its kind in metric labels (budget_kinds.hpp). Policy files write {"kind": "ratio", ...,
  /// "fleet": {...}} (docs/policy.md).
  static constexpr std::string_view kind = "fleet";
  /// The class these options build.
  using budget_type = fleet_budget;
  /// The ratio budget's settings (ratio, window, min_retries_per_second: the fleet's floor), as
  /// ratio_budget_options::fields lists them. The fleet settings are read and written apart
  /// (policy files' `fleet` object).
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    ratio_budget_options::fields(o.ratio, std::forward<F>(f));
  }

  friend bool operator==(const fleet_budget_options&, const fleet_budget_options&) = default;
};

/// What a process reports at a sync: its logical requests and granted retries since the previous
/// report (both >= 0).
struct fleet_deltas {
  std::int64_t requests = 0;  ///< logical requests admitted
  std::int64_t retries = 0;   ///< retries granted
  friend constexpr bool operator==(const fleet_deltas&, const fleet_deltas&) = default;
};

/// What a process tells a store that hands out credit (fleet_window_store's four-argument sync,
/// stormguard::fleet's Redis script) besides its deltas: the numerator of its share and the
/// budget's terms, so that the store computes its credit with fleet_budget::claim.
struct fleet_terms {
  /// This process's requests in its own window that the store can hold (>= 0): its share's
  /// numerator.
  std::int64_t own_requests = 0;
  /// Micro-retries one request deposits: round(ratio · 10^6), in [0, 10^9].
  std::int64_t deposit = 0;
  /// The fleet's floor over the window (min_retries_per_second · window), in micro-retries, >= 0.
  std::int64_t reserve = 0;
  /// True for a budget whose claims follow need (fleet_budget_options::ask_for_credit): the
  /// store hands out whole retries only, the share rounded down.
  bool whole_retries = false;
  friend constexpr bool operator==(const fleet_terms&, const fleet_terms&) = default;
};

/// What the store returns at a sync: the fleet's totals over the window (this process's reported
/// deltas included) and the number of live processes.
struct fleet_view {
  std::int64_t requests = 0;      ///< logical requests of the whole fleet in the window (>= 0)
  std::int64_t retries = 0;       ///< retries of the whole fleet in the window (>= 0)
  std::int64_t live_clients = 0;  ///< processes whose heartbeat has not expired (>= 1 when valid)
  friend constexpr bool operator==(const fleet_view&, const fleet_view&) = default;
};

/// What a store that hands out credit returns at a sync (fleet_window_store's four-argument
/// sync, stormguard::fleet's Redis script): the view, and the credit it set aside for this
/// process until its next sync (its claim, in micro-retries; negative: its part of a debt),
/// computed by fleet_budget::claim with the other live processes' claims subtracted.
struct fleet_answer {
  fleet_view view;          ///< the fleet's totals and live processes
  std::int64_t credit = 0;  ///< this process's claim, micro-retries
  friend constexpr bool operator==(const fleet_answer&, const fleet_answer&) = default;
};

namespace detail {

// Requests and retries summed over a window's slots (detail::sliding_window's element): the
// counts of fleet_budget's own window and of the fleet's (fleet_window).
struct fleet_counts {
  std::int64_t requests = 0;
  std::int64_t retries = 0;
  fleet_counts& operator+=(const fleet_counts& o) noexcept {
    requests += o.requests;
    retries += o.retries;
    return *this;
  }
  fleet_counts& operator-=(const fleet_counts& o) noexcept {
    requests -= o.requests;
    retries -= o.retries;
    return *this;
  }
};

}  // namespace detail

/// The ratio budget of Finagle (see ratio_budget) kept for a whole fleet; see the file comment
/// for the algorithm, the overshoot bound and the fallback. Thread-safe (one mutex); no member
/// allocates.
///
/// Example (tests/reference_examples_test.cpp, run by the tests):
/// \snippet reference_examples_test.cpp fleet_budget
class STORMGUARD_EXPORT fleet_budget {
 public:
  /// The options type that builds it (its kind: fleet_budget_options::kind).
  using options_type = fleet_budget_options;

  /// Whether the budget spends its share of the fleet's allowance or falls back to local counts.
  enum class mode : unsigned char {
    joined,    ///< the last sync succeeded recently: shares of the fleet's allowance
    fallback,  ///< no successful sync yet, the last failed, or it is too old: local ratio budget
  };

  /// Validates `options`; throws std::invalid_argument naming the field and the value: the ratio
  /// fields as ratio_budget does, sync_interval outside [10 ms, 10 s], max_sync_interval outside
  /// [sync_interval, 60 s], sync_every_requests outside [1, 1,000,000], expected_clients outside
  /// [0, 10,000,000], shards outside [1, 1024].
  explicit fleet_budget(fleet_budget_options options = {});
  fleet_budget(const fleet_budget&) = delete;
  fleet_budget& operator=(const fleet_budget&) = delete;

  /// retry_budget: counts one logical request (locally and in the next report) and adds its
  /// deposit to the credit. Always true: a ratio budget never rejects a first attempt.
  template <class G>
  [[nodiscard]] bool try_admit(time_point now, G&) noexcept {
    admit(now);
    return true;
  }
  /// retry_budget: may one retry be sent at `now`? In joined mode from the credit (a fractional
  /// credit is a draw from `g`; with ask_for_credit and an asker, a credit below one retry first
  /// asks the store for the rest of one, which blocks the caller for that round trip), in
  /// fallback mode from the local ratio budget.
  template <class G>
  [[nodiscard]] bool try_withdraw(time_point now, attempt_status, G& g) noexcept {
    return withdraw(now, uniform_int(g, k_scale - 1));
  }
  /// retry_budget: nothing (as for ratio_budget, outcomes play no part).
  void record(time_point, const attempt_report&) noexcept {}

  /// True when a sync should start at `now`: none is in progress, and sync_interval has passed
  /// since the last one started with at least sync_every_requests requests since, or
  /// max_sync_interval has passed. The first sync is due at once.
  [[nodiscard]] bool sync_due(time_point now) const noexcept;
  /// Starts a sync: returns this process's deltas since the last report and resets them. Until
  /// end_sync or sync_failed, activity is counted toward the next report.
  [[nodiscard]] fleet_deltas begin_sync(time_point now) noexcept;
  /// Ends a sync with the answer of a store that only counts: joins (or stays in) the fleet and
  /// takes its share of the allowance the view shows (claim(view, terms, 0)). A view that cannot
  /// be true (negative counts, live_clients < 1) counts as a failed sync.
  void end_sync(time_point now, const fleet_view& view) noexcept;
  /// Ends a sync with the answer of a store that hands out credit: the credit is the claim the
  /// store set aside for this process, plus this process's deposits and grants since
  /// begin_sync. A view that cannot be true counts as a failed sync.
  void end_sync(time_point now, const fleet_answer& answer) noexcept;
  /// Ends a sync that failed (store unavailable, timed out, garbage): the deltas taken by
  /// begin_sync are kept for the next report, and the budget falls back to local counts.
  void sync_failed(time_point now) noexcept;

  /// Asks the store for `wanted` micro-retries (in (0, 10^6]) at `now` (the budget's clock) for
  /// the process that owns the budget; returns what the store added to this process's claim:
  /// `wanted`, or 0 when the fleet has less than that unclaimed; negative when the store could not
  /// be asked (down, timed out, refused). Must not throw; may block for one round trip (bounded
  /// by the caller's timeout). `context` is the pointer given to set_asker.
  using credit_asker = std::int64_t (*)(void* context, time_point now,
                                        std::int64_t wanted) noexcept;
  /// Sets the asker a budget with ask_for_credit uses in joined mode when a retry finds its
  /// credit below one retry (stormguard::fleet::redis_sync sets it; the simulator's store model
  /// too). At most one asker per budget; nullptr removes it, after waiting for asks in progress
  /// to return (so the context may be destroyed when this returns). Without ask_for_credit the
  /// asker is never called.
  void set_asker(credit_asker ask, void* context) noexcept;
  /// Asks made (set_asker) and asks the store granted, since construction.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> asks() const noexcept;

  /// The mode at `now` (joined turns to fallback 3 · max_sync_interval after the last success).
  [[nodiscard]] mode current_mode(time_point now) const noexcept;
  /// How many times the budget has left joined mode (for "said once" logs and metrics).
  [[nodiscard]] std::int64_t fallbacks() const noexcept;
  /// The credit now, in micro-retries (may be negative after a fractional draw). Observability.
  [[nodiscard]] std::int64_t credit_micro() const noexcept;
  /// This process's share of the fleet's requests at the last sync, in parts per million.
  [[nodiscard]] std::int64_t share_ppm() const noexcept;
  /// The live clients at the last successful sync (0 before it).
  [[nodiscard]] std::int64_t live_clients() const noexcept;
  /// The validated settings.
  [[nodiscard]] const fleet_budget_options& options() const noexcept { return options_; }
  /// What the sync begun last (begin_sync) tells a store that hands out credit: this process's
  /// requests in its window that the store can hold, and the budget's terms.
  [[nodiscard]] fleet_terms terms() const noexcept;

  /// The credit a store sets aside for a process at a sync, in micro-retries: its share of the
  /// fleet's allowance A = deposit · R + reserve − 10^6 · W (R, W: the view's window totals, this
  /// sync's deltas included), but never more than what the other live processes have not
  /// claimed (A − `claimed`, when positive; `claimed` >= 0, the sum of their positive claims).
  /// The share is own_requests ÷ R (at most 1); 1 ÷ (R + 1) when own_requests is 0; 1 ÷ live
  /// clients when R is 0. Negative when the fleet has overspent (A < 0): the process's part of
  /// the debt. The one formula of the fleet's stores (fleet_window_store, the simulator's store
  /// model, and stormguard::fleet's Redis script, which computes the same in Lua). Saturating;
  /// never throws.
  [[nodiscard]] static std::int64_t claim(const fleet_view& totals, const fleet_terms& terms,
                                          std::int64_t claimed) noexcept;
  /// What a store grants a process that asks for `wanted` micro-retries (a budget whose claims
  /// follow need): `wanted` when the fleet's allowance (as claim computes it from `totals` and
  /// `terms`) minus every live process's claim (`claimed`, the asker's own included) is at least
  /// `wanted`, else 0; 0 for wanted <= 0. The store adds the grant to the asker's claim. The one
  /// formula of fleet_window_store, the simulator's store model and the Redis script. Saturating;
  /// never throws.
  [[nodiscard]] static std::int64_t grant(const fleet_view& totals, const fleet_terms& terms,
                                          std::int64_t claimed, std::int64_t wanted) noexcept;

  /// One retry in micro-retries.
  static constexpr std::int64_t k_scale = ratio_budget::k_scale;

  /// The most shards a fleet budget is kept in (fleet_budget_options::shards).
  static constexpr std::int64_t k_max_shards = 1024;
  /// The syncs per second one store is taken to serve when nothing else is known: one Redis 7
  /// on the 2 shared cores of docs/budgets.md ("Store load") saturated at 29,300–32,400 syncs/s
  /// (`build/bench/fleet_store_benchmark`), the lowest rounded down. The simulator's default
  /// store capacity and a policy's `"shards": "auto"` use it.
  static constexpr double k_measured_store_capacity = 29'000.0;

  /// The shards a fleet needs so that no store serves more than `share` of `store_capacity`:
  /// ceil(clients ÷ sync_interval ÷ (store_capacity · share)), at least 1, saturated at INT64_MAX;
  /// it may exceed k_max_shards, which callers refuse (a policy's "auto", `simulate
  /// --fleet-shards auto`: raise sync_interval, or set the shards). `clients`: the
  /// fleet's busy processes, each syncing every `sync_interval` (the most a fleet asks of its
  /// store); `store_capacity`: the syncs per second one store (one Redis, one Cluster master)
  /// serves, > 0 (docs/budgets.md, "Store load": about 29,000 for Redis 7 on the machine
  /// measured); `share` in (0, 1] (the head room: 0.5 keeps each store at most half busy).
  /// Throws std::invalid_argument naming the parameter and the value for clients < 0,
  /// sync_interval <= 0, a capacity that is not a positive finite number, or a share outside
  /// (0, 1].
  [[nodiscard]] static std::int64_t shards_for(std::int64_t clients, duration sync_interval,
                                               double store_capacity, double share = 0.5);

 private:
  using counts = detail::fleet_counts;

  void admit(time_point now) noexcept;
  bool withdraw(time_point now, std::int64_t draw) noexcept;
  bool decide(time_point now, std::int64_t draw) noexcept STORMGUARD_REQUIRES(mutex_);
  bool joined(time_point now) const noexcept STORMGUARD_REQUIRES(mutex_);
  bool withdraw_local(time_point now) noexcept STORMGUARD_REQUIRES(mutex_);
  void refresh(time_point now) noexcept STORMGUARD_REQUIRES(mutex_);
  void spend(std::int64_t amount) noexcept STORMGUARD_REQUIRES(mutex_);
  void joined_with(time_point now, const fleet_view& view, const std::int64_t* credit) noexcept;
  static std::int64_t share_of(const fleet_view& totals, std::int64_t own) noexcept;

  fleet_budget_options options_;
  std::int64_t deposit_amount_;  // round(ratio · 10^6)
  std::int64_t fleet_reserve_;   // floor · window in micro-retries
  std::int64_t slice_ns_;

  mutable detail::mutex mutex_;
  detail::sliding_window<counts, ratio_budget::k_slices> local_ STORMGUARD_GUARDED_BY(mutex_);
  counts pending_ STORMGUARD_GUARDED_BY(mutex_);    // not yet reported
  counts in_flight_ STORMGUARD_GUARDED_BY(mutex_);  // reported by a sync not yet ended
  std::int64_t credit_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t since_take_ STORMGUARD_GUARDED_BY(mutex_) = 0;  // credit change since begin_sync
  // the deposits of this process's own window, in micro-retries, at the last refresh
  std::int64_t local_balance_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t terms_own_ STORMGUARD_GUARDED_BY(mutex_) = 0;  // own requests at begin_sync
  std::int64_t share_ppm_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t live_clients_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t fallbacks_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t requests_since_sync_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  // Requests since the last time the store may have lost this process's reports (construction,
  // or the start of the last outage, counting the reports it then still owed): a share's
  // numerator never exceeds it.
  std::int64_t requests_since_base_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  credit_asker asker_ STORMGUARD_GUARDED_BY(mutex_) = nullptr;
  void* asker_context_ STORMGUARD_GUARDED_BY(mutex_) = nullptr;
  std::int64_t asks_in_progress_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t asks_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t asks_granted_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  // An ask found nothing (or no store) since the last sync: no more asks until the next one.
  bool asked_in_vain_ STORMGUARD_GUARDED_BY(mutex_) = false;
  bool has_joined_ STORMGUARD_GUARDED_BY(mutex_) = false;  // last sync succeeded
  bool syncing_ STORMGUARD_GUARDED_BY(mutex_) = false;
  bool synced_once_ STORMGUARD_GUARDED_BY(mutex_) = false;
  time_point last_sync_start_ STORMGUARD_GUARDED_BY(mutex_){};
  time_point last_success_ STORMGUARD_GUARDED_BY(mutex_){};
};

/// The fleet's window totals as a store keeps them: each sync's requests and retries, clamped
/// to [0, k_max_delta], in ratio_budget::k_slices slots of the store's own time, summed over the
/// fleet budget's window. The counting part of a fleet store, without its heartbeats:
/// fleet_window_store adds them, the simulator's store model counts its live clients itself. Not
/// thread-safe (its owner serialises calls); no allocation after construction. Header-only.
class fleet_window {
 public:
  /// The largest requests or retries one sync may add (larger reports are clamped to it).
  static constexpr std::int64_t k_max_delta = 10'000'000;

  /// `window`: the fleet budget's window (fleet_budget_options::ratio.window), > 0.
  explicit fleet_window(duration window)
      : window_((window.count() + ratio_budget::k_slices - 1) / ratio_budget::k_slices) {}

  /// Adds one sync's deltas (each clamped to [0, k_max_delta]) at store time `now`; returns the
  /// fleet's requests and retries in the window at `now`, these deltas included.
  fleet_deltas add(time_point now, const fleet_deltas& deltas) {
    const auto clamp = [](std::int64_t v) { return std::clamp<std::int64_t>(v, 0, k_max_delta); };
    window_.add(now, detail::fleet_counts{clamp(deltas.requests), clamp(deltas.retries)});
    const detail::fleet_counts total = window_.total(now);
    return fleet_deltas{total.requests, total.retries};
  }

 private:
  detail::sliding_window<detail::fleet_counts, ratio_budget::k_slices> window_;
};

/// An in-memory fleet store: the reference model of what stormguard::fleet's Redis script keeps,
/// used by the simulator (on virtual time) and by tests. Window slots are indexed by the store's
/// own time (the `now` passed to sync, never a client's clock); a client is live while its last
/// sync is younger than `heartbeat_ttl`. Deltas are clamped to [0, k_max_delta] per sync, so one
/// buggy process cannot poison the totals. Not thread-safe (a model: its owner serialises calls);
/// allocates per new client id. Header-only (inline), so that its standard containers are
/// instantiated in the user's code, not exported from a shared core.
class fleet_window_store {
 public:
  /// The largest requests or retries one sync may add (larger reports are clamped to it).
  static constexpr std::int64_t k_max_delta = fleet_window::k_max_delta;

  /// `window`: the fleet budget's window, in [1 s, 60 s]; `heartbeat_ttl` > 0. Throws
  /// std::invalid_argument naming the parameter otherwise.
  fleet_window_store(duration window, duration heartbeat_ttl);

  /// One sync of client `client` at store time `now`: adds its (clamped) deltas, renews its
  /// heartbeat, and returns the fleet's window totals and live clients (the caller included).
  /// A store that only counts: the view has no credit, and the client holds no claim.
  fleet_view sync(time_point now, const std::string& client, const fleet_deltas& deltas);
  /// The same, from a store that hands out credit (what stormguard::fleet's Redis script does):
  /// the view's credit is fleet_budget::claim(totals, terms (clamped), the other live clients'
  /// claims), and the store keeps it as this client's claim (its positive part) until the
  /// client's next sync or the expiry of its heartbeat, so that no two clients are handed the
  /// same credit.
  fleet_answer sync(time_point now, const std::string& client, const fleet_deltas& deltas,
                    const fleet_terms& terms);
  /// An ask of client `client` at store time `now` for `wanted` micro-retries (a budget whose
  /// claims follow need, fleet_budget_options::ask_for_credit): fleet_budget::grant over the
  /// window totals, `terms` (clamped) and every live client's claim; the grant is added to the
  /// client's claim. Adds no counts and renews no heartbeat; a client that is not live (never
  /// synced, or its heartbeat expired) is granted 0.
  std::int64_t ask(time_point now, const std::string& client, std::int64_t wanted,
                   const fleet_terms& terms);
  /// The sum of the live clients' claims (micro-retries, >= 0) after the last sync.
  [[nodiscard]] std::int64_t claimed() const noexcept { return claimed_; }

  /// The largest deposit per request a client may state, in micro-retries (a ratio of 1000); a
  /// larger one is clamped to it, as a process may only report what it could really have.
  static constexpr std::int64_t k_max_deposit = 1'000'000'000;
  /// The largest reserve a client may state, in micro-retries (a floor of 10^6 retries per second
  /// over 60 s); a larger one is clamped to it.
  static constexpr std::int64_t k_max_reserve = 60'000'000'000'000;

 private:
  struct client_state {
    time_point expiry;
    std::int64_t claim = 0;  // >= 0
  };
  fleet_view count(time_point now, const std::string& client, const fleet_deltas& deltas,
                   std::int64_t claim);
  static fleet_terms stated(const fleet_terms& terms) noexcept;
  void expire(time_point now);

  duration heartbeat_ttl_;
  fleet_window window_;
  std::map<std::string, client_state, std::less<>> clients_;
  std::int64_t claimed_ = 0;
};

inline fleet_window_store::fleet_window_store(duration window, duration heartbeat_ttl)
    : heartbeat_ttl_(heartbeat_ttl), window_(window) {
  if (window < std::chrono::seconds(1) || window > std::chrono::seconds(60)) {
    throw std::invalid_argument(
        "stormguard::fleet_window_store: window must be in [1s, 60s], got " +
        format_duration(window));
  }
  if (heartbeat_ttl <= duration::zero()) {
    throw std::invalid_argument("stormguard::fleet_window_store: heartbeat_ttl must be > 0, got " +
                                format_duration(heartbeat_ttl));
  }
}

inline fleet_view fleet_window_store::count(time_point now, const std::string& client,
                                            const fleet_deltas& deltas, std::int64_t claim) {
  const fleet_deltas total = window_.add(now, deltas);
  // This client's claim is replaced; the claims of clients whose heartbeat expired are freed.
  auto [it, added] = clients_.try_emplace(client);
  claimed_ -= it->second.claim;
  it->second = client_state{now + heartbeat_ttl_, claim};
  claimed_ += claim;
  expire(now);
  return fleet_view{total.requests, total.retries, static_cast<std::int64_t>(clients_.size())};
}

inline fleet_view fleet_window_store::sync(time_point now, const std::string& client,
                                           const fleet_deltas& deltas) {
  return count(now, client, deltas, 0);
}

inline void fleet_window_store::expire(time_point now) {
  std::erase_if(clients_, [this, now](const auto& entry) {
    if (entry.second.expiry > now) return false;
    claimed_ -= entry.second.claim;
    return true;
  });
}

inline fleet_terms fleet_window_store::stated(const fleet_terms& terms) noexcept {
  const auto clamp = [](std::int64_t v, std::int64_t most) {
    return std::clamp<std::int64_t>(v, 0, most);
  };
  return fleet_terms{clamp(terms.own_requests, k_max_delta * 1000),
                     clamp(terms.deposit, k_max_deposit), clamp(terms.reserve, k_max_reserve),
                     terms.whole_retries};
}

inline std::int64_t fleet_window_store::ask(time_point now, const std::string& client,
                                            std::int64_t wanted, const fleet_terms& terms) {
  expire(now);
  const auto it = clients_.find(client);
  if (it == clients_.end()) return 0;
  const fleet_deltas total = window_.add(now, fleet_deltas{});
  const fleet_view view{total.requests, total.retries, static_cast<std::int64_t>(clients_.size())};
  const std::int64_t granted = fleet_budget::grant(view, stated(terms), claimed_, wanted);
  it->second.claim += granted;
  claimed_ += granted;
  return granted;
}

inline fleet_answer fleet_window_store::sync(time_point now, const std::string& client,
                                             const fleet_deltas& deltas, const fleet_terms& terms) {
  // Expire first, so that the claims of clients gone count no more.
  (void)count(now, client, fleet_deltas{}, 0);
  const fleet_terms stated = fleet_window_store::stated(terms);
  // The totals with these deltas, and the others' claims (this client's was reset to 0 above).
  const fleet_view view = count(now, client, deltas, 0);
  const std::int64_t credit = fleet_budget::claim(view, stated, claimed_);
  (void)count(now, client, fleet_deltas{}, std::max<std::int64_t>(credit, 0));
  return fleet_answer{view, credit};
}

}  // namespace stormguard

#endif  // STORMGUARD_FLEET_BUDGET_HPP
