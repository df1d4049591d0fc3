// SPDX-License-Identifier: Apache-2.0
#include <prometheus/check_names.h>

#include <stdexcept>

#include "stormguard/metrics/fleet.hpp"

namespace stormguard::metrics {

namespace {

// PREFIX + suffix, or std::invalid_argument naming the prefix.
std::string checked(const std::string& prefix, const char* suffix) {
  if (std::string name = prefix + suffix; prometheus::CheckMetricName(name)) return name;
  throw std::invalid_argument("metrics_options.prefix: \"" + prefix +
                              "\" does not make a valid Prometheus metric name");
}

const std::string& checked_label(const std::string& label) {
  if (!prometheus::CheckLabelName(label) || label == "result") {
    throw std::invalid_argument("metrics_options.label: not a valid label name: \"" + label + "\"");
  }
  return label;
}

}  // namespace

fleet_metrics::fleet_metrics(prometheus::Registry& registry, metrics_options options)
    : label_(checked_label(options.label)),
      syncs_(prometheus::BuildCounter()
                 .Name(checked(options.prefix, "_fleet_syncs_total"))
                 .Help("Fleet budget syncs with the shared store, by result (ok, error, refused)")
                 .Register(registry)),
      up_(prometheus::BuildGauge()
              .Name(checked(options.prefix, "_fleet_store_up"))
              .Help("1 when the fleet budget's last sync with its store succeeded, else 0")
              .Register(registry)),
      fallback_(prometheus::BuildGauge()
                    .Name(checked(options.prefix, "_fleet_fallback"))
                    .Help("1 while the fleet budget runs on local counts (its fallback)")
                    .Register(registry)),
      latency_(prometheus::BuildGauge()
                   .Name(checked(options.prefix, "_fleet_sync_latency_seconds"))
                   .Help("The fleet budget's last successful sync round trip, in seconds")
                   .Register(registry)),
      live_(prometheus::BuildGauge()
                .Name(checked(options.prefix, "_fleet_live_clients"))
                .Help("The number of live processes of the fleet, as the store reported last")
                .Register(registry)),
      share_(prometheus::BuildGauge()
                 .Name(checked(options.prefix, "_fleet_share"))
                 .Help("This process's share of the fleet's requests at the last sync (0 to 1)")
                 .Register(registry)) {}

fleet_metrics::instruments& fleet_metrics::for_client(std::string_view client) {
  const stormguard::detail::lock hold(mutex_);
  auto it = clients_.find(client);
  if (it != clients_.end()) return it->second;
  const std::string name(client);
  instruments i;
  i.ok = &syncs_.Add({{label_, name}, {"result", "ok"}});
  i.error = &syncs_.Add({{label_, name}, {"result", "error"}});
  i.refused = &syncs_.Add({{label_, name}, {"result", "refused"}});
  i.up = &up_.Add({{label_, name}});
  i.fallback = &fallback_.Add({{label_, name}});
  i.latency = &latency_.Add({{label_, name}});
  i.live = &live_.Add({{label_, name}});
  i.share = &share_.Add({{label_, name}});
  return clients_.emplace(name, i).first->second;
}

void fleet_metrics::apply(const instruments& i, const fleet_sync_sample& s) noexcept {
  (s.ok ? i.ok : s.refused ? i.refused : i.error)->Increment();
  i.up->Set(s.ok ? 1 : 0);
  i.fallback->Set(s.fallback ? 1 : 0);
  if (s.ok) i.latency->Set(std::chrono::duration<double>(s.latency).count());
  i.live->Set(static_cast<double>(s.live_clients));
  i.share->Set(static_cast<double>(s.share_ppm) / 1e6);
}

void fleet_metrics::record(std::string_view client, const fleet_sync_sample& sample) {
  apply(for_client(client), sample);
}

std::function<void(const fleet_sync_sample&)> fleet_metrics::hook(std::string_view client) {
  const instruments i = for_client(client);
  return [i](const fleet_sync_sample& s) { apply(i, s); };
}

}  // namespace stormguard::metrics
