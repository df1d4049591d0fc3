// SPDX-License-Identifier: Apache-2.0
/// \file
/// Gives a budget built from a policy its Redis syncer, when the
/// policy asks for one — the step every executor takes after building its budget.
///
/// A policy's budget of kind fleet ({"kind": "ratio", ..., "fleet": {"store": URL, "key": KEY}})
/// builds a stormguard::fleet_budget that, on its own, stays in its fallback (a local ratio
/// budget): it never talks to a store. attach() starts the redis_sync that keeps it in step with
/// the rest of the fleet, off the request path (a background thread; requests never wait on Redis):
///
/// \code{.cpp}
///  stormguard::any_budget budget(settings.budget);                 // any kind
///  auto sync = stormguard::fleet::attach(budget, {.log = log});    // nullptr: nothing to attach
///  stormguard::retrier retry(settings.policy(), clock, rng, budget);
///  ...                                                             // sync stops with its owner
/// \endcode
///
/// For the HTTP clients' per-host budgets (http::client_options::attach_budget), host_attacher()
/// gives the hook that attaches one syncer per host, on the fleet key "KEY:scheme://host:port".
///
/// The password: the policy's `password_env` names an environment variable read here (once per
/// attach); a password in the URL otherwise. Neither is ever printed: log lines show the URL
/// through stormguard::redact().
///
/// Thread-safety: attach() and the hook may be called from any thread; each syncer is as
/// thread-safe as redis_sync.
#ifndef STORMGUARD_FLEET_ATTACH_HPP
#define STORMGUARD_FLEET_ATTACH_HPP

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "stormguard/budget_kinds.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"
#include "stormguard/fleet/redis_sync.hpp"

namespace stormguard::fleet {

/// How attach() builds the syncer.
struct attach_options {
  /// Appended to the policy's fleet key (e.g. ":http://host:80" for one host's budget); the
  /// whole key must stay valid (1 to 200 printable characters other than '{' and '}').
  std::string key_suffix;
  /// The syncer's log lines (fallback and rejoin, once each; a missing password variable). Never
  /// contain the password. Empty = silent.
  redis_sync::log_hook log;
  /// The syncer's clock; nullptr = a real_clock owned by the library (steady time).
  clock* time = nullptr;
  /// One round trip's connect and command timeout (redis_sync_options::timeout), [1 ms, 10 s].
  duration timeout = std::chrono::milliseconds(100);
  /// redis_sync_options::on_sync (e.g. sync_hook(fleet_metrics.hook(NAME))). Empty = none.
  std::function<void(const redis_sync_stats&)> on_sync{};
  /// For a budget kept in K > 1 shards (fleet_budget_options::shards): the shard this process
  /// spends from, in [0, K). -1 (the default): drawn uniformly at attach from std::random_device
  /// (each process keeps it for its life; over many processes the shards fill evenly). A value
  /// outside [-1, K) throws std::invalid_argument naming attach_options::shard. Ignored when
  /// K = 1.
  std::int64_t shard = -1;
};

/// The store key of shard `shard` of a budget kept in `shards` shards under `key`: `key` itself
/// when shards is 1 (the key of an unsharded fleet, unchanged), else `key#shard/shards`
/// (e.g. "checkout-api#2/3"): a distinct hash tag per shard, and a key no process with another
/// shard count shares. Throws std::invalid_argument for shards outside [1, 1024] or a shard
/// outside [0, shards).
[[nodiscard]] STORMGUARD_EXPORT std::string shard_key(const std::string& key, std::int64_t shard,
                                                      std::int64_t shards);

/// An on_sync callable that hands `sink` a Sample {ok, latency, live_clients, share_ppm,
/// fallback, refused} built from each sync's counts: with stormguard::metrics::fleet_metrics,
/// `sync_hook<stormguard::metrics::fleet_sync_sample>(metrics.hook("checkout-api"))`. Header-only:
/// the fleet component does not link the metrics one.
template <class Sample, class Sink>
[[nodiscard]] std::function<void(const redis_sync_stats&)> sync_hook(Sink sink) {
  return [sink = std::move(sink)](const redis_sync_stats& s) {
    sink(Sample{s.store_up, s.last_latency, s.live_clients, s.share_ppm, s.fallback, s.refused});
  };
}

/// When `budget` holds a fleet_budget whose options name a store URL, a started redis_sync for
/// it (background thread) on the key `store.key + key_suffix` (with K > 1 shards, that key's
/// shard_key for the shard of attach_options::shard); otherwise nullptr (another kind,
/// or a fleet budget without a store: it stays in its fallback). The syncer must be destroyed
/// before the budget. Throws std::invalid_argument as redis_sync's constructor (naming the field,
/// the URL redacted); never contacts Redis (the first sync does, on the syncer's thread).
[[nodiscard]] STORMGUARD_EXPORT std::unique_ptr<redis_sync> attach(any_budget& budget,
                                                                   attach_options options = {});

/// Whether `options` is a fleet budget naming a store (what attach() would attach to).
[[nodiscard]] STORMGUARD_EXPORT bool wants_store(const budget_options& options) noexcept;

/// A hook for http::client_options::attach_budget: (host "scheme://host:port", its budget) →
/// the host's syncer (attach() with key_suffix ":" + host), or nullptr. `log` receives each
/// syncer's lines. Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT
    std::function<std::shared_ptr<void>(const std::string&, any_budget&)>
    host_attacher(redis_sync::log_hook log = {}, duration timeout = std::chrono::milliseconds(100));

}  // namespace stormguard::fleet

#endif  // STORMGUARD_FLEET_ATTACH_HPP
