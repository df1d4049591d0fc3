// SPDX-License-Identifier: Apache-2.0
/// \file
/// Keeps a stormguard::fleet_budget in step with the rest of its
/// fleet through Redis, off the request path.
///
/// Every process of a service runs one redis_sync per fleet_budget. A background thread wakes a
/// few times per sync interval; when the budget says a sync is due it sends the process's counts
/// since the last sync and receives the fleet's window totals, the number of live processes and
/// the credit Redis sets aside for it (its claim: fleet_budget::claim, the other live processes'
/// claims subtracted, so that no two processes hold the same credit), in one round trip (one
/// EVALSHA of a Lua script, atomic in Redis). Requests never wait on it: when
/// Redis is down, slow or answers garbage the budget falls back to its local counts (see
/// fleet_budget.hpp), the syncer says so once through the log hook, and rejoins when Redis answers.
///
/// Claims that follow need (fleet_budget_options::ask_for_credit): the syncer sets itself as the
/// budget's asker (fleet_budget::set_asker), so a retry that finds its credit below one retry
/// asks Redis for the rest of one with the same script, on the syncer's connection and on the
/// caller's thread: one round trip (after a sync in progress, at most two timeouts). Without a
/// connection or a live heartbeat the ask fails at once and the budget draws as with shares.
///
/// Reconnection: after a failed round trip the connection is dropped and the next try waits a
/// backoff: sync_interval after the first failure, doubling with each failure in a row, at most
/// the budget's max_sync_interval, each wait drawn uniformly in [half, all] of it (so that a whole
/// fleet does not reconnect in step when its Redis restarts). A Redis that comes back (restarted
/// on the same address, its data lost or not) is therefore rejoined within max_sync_interval
/// (default 2 s) plus one round trip; the deltas counted meanwhile go out with that sync.
///
/// \code{.cpp}
///  stormguard::fleet_budget budget({.ratio = {.ratio = 0.1, .min_retries_per_second = 10}});
///  stormguard::real_clock clock;
///  stormguard::fleet::redis_sync sync(budget, {.url = "redis://127.0.0.1:6379/0",
///                                              .key = "checkout-api"}, clock);
///  stormguard::retrier retry(policy, clock, rng, budget);   // requests use the budget as usual
/// \endcode
///
/// What Redis holds, under the hash tag {KEY} (one cluster slot per service), since fleet
/// protocol 3: one string, {KEY}:version, the protocol ("3"), a space, and 49 numbers packed as
/// little-endian doubles (exact below 2^53):
/// \code{.unparsed}
///  the epoch            Redis TIME (us) when the state was created
///  learning until       Redis TIME (ms) when a learning window ends (below)
///  next look            when the script next looks for the keys of older layouts
///  g                    the heartbeat buckets' width, ceil(heartbeat_ttl / 8) of the creator
///  newest slice N, newest bucket K
///  11 window slots      requests and retries of slices N-10..N (slice = window / 10, by
///                       Redis TIME)
///  10 heartbeat buckets clients, and the sum of their claims, whose heartbeat expires by
///                       k · g, for k = K-9..K
/// \endcode
/// A process carries its bucket and claim from one sync to the next and the script moves them,
/// so a sync costs a fixed number of Redis commands whatever the fleet size: TIME, GET and SET
/// (which sets the expiry too: two retention periods plus 1 s, the retention being
/// max(window + slice, heartbeat_ttl + g), 11 s by default); 4 when it creates the state and
/// once per retention period (EXISTS of the older layouts' keys). A dead process's claim and
/// heartbeat leave with their bucket: after heartbeat_ttl, at most g (ttl / 8) later. Processes
/// of one key should share the window and heartbeat_ttl: a heartbeat longer than 9 · g is cut
/// to it.
///
/// Protocol versions: a process refuses to share a key with processes of another fleet protocol,
/// whose script would keep another budget in the same keys. It reads the protocol before the
/// space first; at creation and once per retention period it also looks for the keys of
/// protocols 1 and 2 ({KEY}:window, {KEY}:clients, {KEY}:claims: stormguard 0.1 wrote no
/// version). Processes of protocol 2 read {KEY}:version first too, find "3 ..." and refuse
/// themselves, naming protocol "3". A refused sync writes nothing and fails like an
/// unreachable store (the budget falls back to its local counts), is counted in
/// redis_sync_stats::refusals, and the log hook says once which protocols and releases met
/// ("... fleet protocol "2" (stormguard 0.2, three keys without epochs); this process speaks
/// fleet protocol 3 (stormguard 0.3.0) ...").
///
/// Learning mode: a store that answers but has forgotten the fleet (restarted empty, FLUSHALL,
/// evicted, a failover to a replica that lagged) has lost the retries of the window and the
/// claims handed out. A process that synced less than one retention period ago shows the
/// store's epoch; a store with another epoch (or none) has forgotten, and for one window from
/// then it hands no process a claim larger than the one that process held
/// (redis_sync_stats::forgotten and redis_sync_stats::learning; the log hook says it).
/// docs/budgets.md has the reasons for this design and the measured effect. Only Redis's clock is
/// used (TIME inside the script): no process's clock is compared with another's. Deltas are clamped
/// to [0, fleet_window_store::k_max_delta] by the script. Store load: one round trip per process
/// per sync interval (docs/budgets.md).
///
/// Thread-safety: the constructor starts the thread, the destructor stops and joins it (within
/// one command timeout). sync_once() and the accessors may be called from any thread.
#ifndef STORMGUARD_FLEET_REDIS_SYNC_HPP
#define STORMGUARD_FLEET_REDIS_SYNC_HPP

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"
#include "stormguard/fleet_budget.hpp"

namespace stormguard::fleet {

/// The fleet protocol this build speaks: the layout of the keys and the script's arguments and
/// answer. 1 was stormguard 0.1 (no version in the store); 2 was stormguard 0.2 (three keys); 3 is
/// stormguard 0.3 and later (one hash, epochs and learning mode). A change
/// of either is a new protocol and a new minor version of stormguard (docs/releases.md).
inline constexpr int k_fleet_protocol = 3;

struct redis_sync_stats;

/// Where and how a redis_sync talks to Redis.
struct redis_sync_options {
  /// redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] (a Redis, or any node of a Redis Cluster: a
  /// sync follows MOVED and ASK, and after a failover the syncer connects to another node it
  /// learnt from CLUSTER SLOTS), or redis+sentinel://[[USER:]PASSWORD@]HOST[:PORT][,...]/MASTER
  /// (each connection asks the sentinels for the master) (stormguard/detail/redis_url.hpp).
  std::string url;
  /// The service's fleet key: 1 to 200 printable ASCII characters other than '{' and '}'.
  std::string key;
  /// A password given apart from the URL (e.g. read from the environment variable a policy's
  /// `password_env` names); overrides one in the URL. Never printed.
  std::string password;
  /// This process's id in the fleet, for its logs and metrics (since fleet protocol 3 the store
  /// keeps no per-process entry); empty = generated (host name, pid and 64 random bits).
  std::string client_id;
  /// The connect and command timeout of one round trip. In [1 ms, 10 s]; 100 ms.
  duration timeout = std::chrono::milliseconds(100);
  /// How long a process counts as live after its last sync. 0 = 3 · max_sync_interval of the
  /// budget; otherwise in [max_sync_interval, 1 h].
  duration heartbeat_ttl{};
  /// false: no background thread; the owner calls sync_once() (tests, or an event loop of its
  /// own).
  bool start_thread = true;
  /// Called after each sync that was tried (succeeded or failed) with the counts then, on the
  /// syncing thread, never on a request's path (e.g. stormguard::metrics::fleet_metrics through
  /// fleet::sync_hook). Must not throw or block. Empty = none.
  std::function<void(const redis_sync_stats&)> on_sync{};
};

/// Counts of the syncer's work since construction.
struct redis_sync_stats {
  std::int64_t syncs = 0;         ///< successful round trips
  std::int64_t errors = 0;        ///< failed ones (connection, timeout, garbage)
  duration last_latency{};        ///< the last successful round trip
  bool store_up = false;          ///< the last round trip succeeded
  std::int64_t live_clients = 0;  ///< the fleet size the store reported last
  std::int64_t share_ppm = 0;     ///< this process's share at the last sync (fleet_budget)
  bool fallback = true;           ///< the budget ran on local counts after the last sync
  /// Successful round trips that followed failed ones after the budget had joined once: how
  /// many times this process rejoined the fleet (e.g. after a restart of Redis).
  std::int64_t rejoins = 0;
  /// Round trips the store refused because the key is shared by processes of another fleet
  /// protocol (see the file comment); also counted in `errors`.
  std::int64_t refusals = 0;
  /// The last round trip was such a refusal.
  bool refused = false;
  /// Successful round trips that found the store had forgotten the fleet (another epoch or
  /// none, less than one retention period after this process's last sync): each starts a
  /// learning window (see the file comment).
  std::int64_t forgotten = 0;
  /// The syncer's clock time of the last of them (time_point{} before the first).
  time_point last_forgotten{};
  /// The last successful round trip was in a learning window (its claim capped at the one
  /// this process held).
  bool learning = false;
  /// Asks of a budget whose claims follow need (fleet_budget_options::ask_for_credit) sent to
  /// the store since construction (an ask that found no connection is not sent).
  std::int64_t asks = 0;
  /// Of them, those the store granted (each the rest of one retry).
  std::int64_t asks_granted = 0;
};

/// The syncer: see the file comment.
class STORMGUARD_EXPORT redis_sync {
 public:
  /// A line for the operator: the fallback when the store goes away ("... falls back to local
  /// counts: WHY"), once, and the rejoin, once. Never contains the password. Must not throw.
  using log_hook = std::function<void(std::string_view)>;

  /// Validates `options` (throws std::invalid_argument naming the field, the URL redacted) and,
  /// unless start_thread is false, starts the background thread. Does not connect yet: the first
  /// sync does, so a Redis that is down at start-up never fails construction.
  redis_sync(fleet_budget& budget, redis_sync_options options, clock& clock, log_hook log = {});
  /// Stops and joins the thread.
  ~redis_sync();
  redis_sync(const redis_sync&) = delete;
  redis_sync& operator=(const redis_sync&) = delete;

  /// One sync now if the budget says one is due and no reconnection backoff is running (or
  /// `force`, which ignores both): true when it succeeded.
  bool sync_once(bool force = false);

  /// The counts so far.
  [[nodiscard]] redis_sync_stats stats() const;
  /// This process's id in the fleet.
  [[nodiscard]] const std::string& client_id() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::jthread thread_;
};

}  // namespace stormguard::fleet

#endif  // STORMGUARD_FLEET_REDIS_SYNC_HPP
