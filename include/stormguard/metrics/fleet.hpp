// SPDX-License-Identifier: Apache-2.0
/// \file
/// Prometheus metrics of a fleet budget's store syncer (the Redis
/// syncer of stormguard::fleet, or any owner of the sync step): whether the store answers, the
/// syncs that succeeded and failed, the last round trip, the fleet size seen, this process's share,
/// and whether the budget runs in its fallback.
///
/// \code{.cpp}
///  prometheus::Registry registry;
///  stormguard::metrics::fleet_metrics fleet(registry);
///  auto sync = stormguard::fleet::attach(budget, {.on_sync = fleet.hook("checkout-api")});
/// \endcode
///
/// The metrics (docs/metrics.md), labelled with the caller's client name:
/// \code{.unparsed}
///  stormguard_fleet_syncs_total{client, result}      result: ok, error, refused (the store's
///                                                    key is shared by another fleet protocol)
///  stormguard_fleet_store_up{client}                 1 when the last sync succeeded, else 0
///  stormguard_fleet_fallback{client}                 1 while the budget runs on local counts
///  stormguard_fleet_sync_latency_seconds{client}     the last successful round trip
///  stormguard_fleet_live_clients{client}             the fleet size the store reported last
///  stormguard_fleet_share{client}                    this process's share of the fleet's
///                                                    requests at the last sync, in [0, 1]
/// \endcode
/// Thread-safe: hook() takes a mutex once per client name; the hook itself only sets gauges and
/// adds to counters (no allocation).
#ifndef STORMGUARD_METRICS_FLEET_HPP
#define STORMGUARD_METRICS_FLEET_HPP

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/export.hpp"
#include "stormguard/metrics/retry_metrics.hpp"

namespace stormguard::metrics {

/// One sync's outcome and the state it left, as a syncer reports it after each sync.
struct fleet_sync_sample {
  bool ok = false;                ///< this sync succeeded
  duration latency{};             ///< its round trip (meaningful when ok)
  std::int64_t live_clients = 0;  ///< the fleet size last reported by the store
  std::int64_t share_ppm = 0;     ///< this process's share of the fleet's requests, ppm
  bool fallback = false;          ///< the budget runs on local counts now
  /// This sync failed because the store's key is shared by processes of another fleet protocol
  /// (redis_sync_stats::refused): counted as result "refused" instead of "error".
  bool refused = false;
};

/// The metrics of the syncers of one registry (see the file comment).
class STORMGUARD_EXPORT fleet_metrics {
 public:
  /// Registers the families on `registry` (which must outlive this object) with `options`'s
  /// prefix and label name. Throws std::invalid_argument for an invalid prefix or label.
  explicit fleet_metrics(prometheus::Registry& registry, metrics_options options = {});
  fleet_metrics(const fleet_metrics&) = delete;
  fleet_metrics& operator=(const fleet_metrics&) = delete;

  /// Records one sample for `client`.
  void record(std::string_view client, const fleet_sync_sample& sample);
  /// A callable that records samples for `client` (its instruments looked up once, now); valid
  /// as long as this object lives.
  [[nodiscard]] std::function<void(const fleet_sync_sample&)> hook(std::string_view client);

 private:
  struct instruments {
    prometheus::Counter* ok = nullptr;
    prometheus::Counter* error = nullptr;
    prometheus::Counter* refused = nullptr;
    prometheus::Gauge* up = nullptr;
    prometheus::Gauge* fallback = nullptr;
    prometheus::Gauge* latency = nullptr;
    prometheus::Gauge* live = nullptr;
    prometheus::Gauge* share = nullptr;
  };
  static void apply(const instruments& i, const fleet_sync_sample& s) noexcept;
  instruments& for_client(std::string_view client);

  std::string label_;
  prometheus::Family<prometheus::Counter>& syncs_;
  prometheus::Family<prometheus::Gauge>& up_;
  prometheus::Family<prometheus::Gauge>& fallback_;
  prometheus::Family<prometheus::Gauge>& latency_;
  prometheus::Family<prometheus::Gauge>& live_;
  prometheus::Family<prometheus::Gauge>& share_;
  stormguard::detail::mutex mutex_;
  std::map<std::string, instruments, std::less<>> clients_ STORMGUARD_GUARDED_BY(mutex_);
};

}  // namespace stormguard::metrics

#endif  // STORMGUARD_METRICS_FLEET_HPP
