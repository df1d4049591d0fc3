// SPDX-License-Identifier: Apache-2.0
// The fleet budget's syncer metrics (stormguard/metrics/fleet.hpp): the samples as Prometheus
// text, and a real Redis syncer (tests/support/redis_server.hpp, driven by sync_once on a manual
// clock) feeding them through fleet::sync_hook: up and joined, then a store that is down.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "stormguard/fleet/attach.hpp"
#include "stormguard/fleet/redis_sync.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/metrics/fleet.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::metrics::fleet_metrics;
using stormguard::metrics::fleet_sync_sample;

std::string text(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

bool has(const std::string& all, const std::string& line) {
  return all.find(line + "\n") != std::string::npos;
}

TEST(FleetMetrics, SamplesSetTheGaugesAndCountTheSyncs) {
  prometheus::Registry registry;
  fleet_metrics m(registry);
  m.record("api", fleet_sync_sample{true, 2ms, 4, 250'000, false});
  m.record("api", fleet_sync_sample{true, 1ms, 5, 200'000, false});
  const std::string joined = text(registry);
  EXPECT_TRUE(has(joined, R"(stormguard_fleet_syncs_total{client="api",result="ok"} 2)")) << joined;
  EXPECT_TRUE(has(joined, R"(stormguard_fleet_store_up{client="api"} 1)")) << joined;
  EXPECT_TRUE(has(joined, R"(stormguard_fleet_fallback{client="api"} 0)")) << joined;
  EXPECT_TRUE(has(joined, R"(stormguard_fleet_live_clients{client="api"} 5)")) << joined;
  EXPECT_TRUE(has(joined, R"(stormguard_fleet_share{client="api"} 0.2)")) << joined;
  EXPECT_TRUE(has(joined, R"(stormguard_fleet_sync_latency_seconds{client="api"} 0.001)"))
      << joined;
  const auto hook = m.hook("api");
  hook(fleet_sync_sample{false, 0ms, 5, 200'000, true});
  const std::string down = text(registry);
  EXPECT_TRUE(has(down, R"(stormguard_fleet_syncs_total{client="api",result="error"} 1)")) << down;
  EXPECT_TRUE(has(down, R"(stormguard_fleet_store_up{client="api"} 0)")) << down;
  EXPECT_TRUE(has(down, R"(stormguard_fleet_fallback{client="api"} 1)")) << down;
  // The last successful round trip stays.
  EXPECT_TRUE(has(down, R"(stormguard_fleet_sync_latency_seconds{client="api"} 0.001)")) << down;
  // A store whose key another fleet protocol shares: counted as refused, not as an error.
  hook(fleet_sync_sample{false, 0ms, 5, 200'000, true, true});
  const std::string refused = text(registry);
  EXPECT_TRUE(has(refused, R"(stormguard_fleet_syncs_total{client="api",result="refused"} 1)"))
      << refused;
  EXPECT_TRUE(has(refused, R"(stormguard_fleet_syncs_total{client="api",result="error"} 1)"))
      << refused;
}

TEST(FleetMetrics, BadPrefixOrLabelIsRejected) {
  prometheus::Registry registry;
  EXPECT_THROW(fleet_metrics(registry, {.prefix = "1bad"}), std::invalid_argument);
  EXPECT_THROW(fleet_metrics(registry, {.label = "result"}), std::invalid_argument);
}

TEST(FleetMetrics, ARedisSyncerFeedsThemThroughSyncHook) {
  prometheus::Registry registry;
  fleet_metrics m(registry);
  stormguard::testing::manual_clock clock;
  stormguard::fleet_budget budget;
  stormguard::fleet::redis_sync_options o;
  o.url = stormguard::test_support::redis_server::shared().url();
  o.key = "fleet-metrics-" + std::to_string(getpid());
  o.start_thread = false;
  o.on_sync = stormguard::fleet::sync_hook<fleet_sync_sample>(m.hook("checkout"));
  stormguard::fleet::redis_sync sync(budget, o, clock);
  ASSERT_TRUE(sync.sync_once(true));
  const std::string up = text(registry);
  EXPECT_TRUE(has(up, R"(stormguard_fleet_syncs_total{client="checkout",result="ok"} 1)")) << up;
  EXPECT_TRUE(has(up, R"(stormguard_fleet_store_up{client="checkout"} 1)")) << up;
  EXPECT_TRUE(has(up, R"(stormguard_fleet_fallback{client="checkout"} 0)")) << up;
  EXPECT_TRUE(has(up, R"(stormguard_fleet_live_clients{client="checkout"} 1)")) << up;

  stormguard::fleet_budget other;
  o.url =
      "redis://127.0.0.1:" + std::to_string(stormguard::test_support::redis_server::unused_port()) +
      "/0";
  o.on_sync = stormguard::fleet::sync_hook<fleet_sync_sample>(m.hook("down"));
  stormguard::fleet::redis_sync away(other, o, clock);
  EXPECT_FALSE(away.sync_once(true));
  const std::string down = text(registry);
  EXPECT_TRUE(has(down, R"(stormguard_fleet_syncs_total{client="down",result="error"} 1)")) << down;
  EXPECT_TRUE(has(down, R"(stormguard_fleet_store_up{client="down"} 0)")) << down;
  EXPECT_TRUE(has(down, R"(stormguard_fleet_fallback{client="down"} 1)")) << down;
}

}  // namespace
