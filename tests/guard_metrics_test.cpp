// SPDX-License-Identifier: Apache-2.0
// stormguard/metrics/guard.hpp: the guard's decisions, store errors, store latencies and short
// circuit as Prometheus series, through the guard's observer, on a real SQLite store and on a
// store that is down.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "stormguard/guard/store.hpp"
#include "stormguard/guard/stores.hpp"
#include "stormguard/metrics/guard.hpp"
#include "support/redis_server.hpp"

namespace {

namespace sg = stormguard::guard;
using namespace std::chrono_literals;

// The value of the series `name` whose labels include `labels` (a counter's or gauge's value, a
// histogram's sample count); -1 when there is none.
double value_of(prometheus::Registry& registry, const std::string& name,
                const std::map<std::string, std::string>& labels = {}) {
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& metric : family.metric) {
      bool all = true;
      for (const auto& [k, v] : labels) {
        bool found = false;
        for (const auto& l : metric.label) found = found || (l.name == k && l.value == v);
        all = all && found;
      }
      if (!all) continue;
      switch (family.type) {
        case prometheus::MetricType::Counter:
          return metric.counter.value;
        case prometheus::MetricType::Gauge:
          return metric.gauge.value;
        case prometheus::MetricType::Histogram:
          return static_cast<double>(metric.histogram.sample_count);
        default:
          return -1;
      }
    }
  }
  return -1;
}

sg::stored_response charged() { return {201, {}, "{\"id\":\"ch_1\"}"}; }

TEST(GuardMetrics, CountEachDecisionAndTimeEachStoreCall) {
  const std::filesystem::path db =
      std::filesystem::temp_directory_path() /
      ("stormguard-guard-metrics-" + std::to_string(::getpid()) + ".db");
  prometheus::Registry registry;
  stormguard::metrics::guard_metrics metrics(registry);
  {
    const auto store = sg::make_sqlite_store({.path = db.string()});
    sg::idempotency_guard g(*store, {.observer = &metrics});
    const auto charge = [&](std::string_view body, std::string_view key) {
      return g.handle({"p", "POST", "/charges", body, key},
                      [](sg::transaction&) { return charged(); });
    };
    EXPECT_EQ(charge("a", "k1").decision, sg::decision::ran);
    EXPECT_EQ(charge("a", "k1").decision, sg::decision::replayed);
    EXPECT_EQ(charge("a", "k1").decision, sg::decision::replayed);
    EXPECT_EQ(charge("b", "k1").decision, sg::decision::mismatch);
    EXPECT_EQ(charge("a", "k2").decision, sg::decision::ran);
  }
  std::filesystem::remove(db);
  std::filesystem::remove(db.string() + "-wal");
  std::filesystem::remove(db.string() + "-shm");
  const std::string decisions = "stormguard_guard_decisions_total";
  EXPECT_EQ(value_of(registry, decisions, {{"decision", "ran"}}), 2);
  EXPECT_EQ(value_of(registry, decisions, {{"decision", "replayed"}}), 2);
  EXPECT_EQ(value_of(registry, decisions, {{"decision", "mismatch"}}), 1);
  EXPECT_EQ(value_of(registry, decisions, {{"decision", "in_progress"}}), 0);
  EXPECT_EQ(value_of(registry, decisions, {{"decision", "store_unavailable"}}), 0);
  // Five begins, two completes (the handler's runs); every one timed, none failed.
  const std::string seconds = "stormguard_guard_store_seconds";
  EXPECT_EQ(value_of(registry, seconds, {{"operation", "begin"}}), 5);
  EXPECT_EQ(value_of(registry, seconds, {{"operation", "complete"}}), 2);
  EXPECT_EQ(value_of(registry, "stormguard_guard_store_errors_total", {{"operation", "begin"}}), 0);
  EXPECT_EQ(value_of(registry, "stormguard_guard_store_down"), 0);
}

// A store whose every call fails, as one that is down.
class down_store final : public sg::store {
 public:
  [[nodiscard]] sg::store_kind kind() const noexcept override { return sg::store_kind::sqlite; }
  sg::begin_result begin(const sg::record_key&, const sg::fingerprint&, std::string_view,
                         stormguard::wall_time_point, stormguard::duration,
                         stormguard::duration) override {
    throw sg::store_error("connection refused");
  }
  sg::complete_outcome complete(const sg::record_key&, std::string_view,
                                stormguard::wall_time_point, stormguard::duration,
                                const work&) override {
    throw sg::store_error("connection refused");
  }
  void release(const sg::record_key&, std::string_view) override {}
  std::size_t purge_expired(stormguard::wall_time_point) override { return 0; }
  std::vector<sg::row> query(std::string_view, std::span<const std::string_view>) override {
    return {};
  }
  using store::query;
};

TEST(GuardMetrics, CountStoreErrorsAndShowTheShortCircuit) {
  prometheus::Registry registry;
  stormguard::metrics::guard_metrics metrics(registry);
  down_store store;
  sg::idempotency_guard g(store, {.trip_after_failures = 2, .observer = &metrics});
  for (int i = 0; i < 5; ++i) {
    const auto r =
        g.handle({"p", "POST", "/charges", "a", "k"}, [](sg::transaction&) { return charged(); });
    EXPECT_EQ(r.decision, sg::decision::store_unavailable);
  }
  EXPECT_EQ(
      value_of(registry, "stormguard_guard_decisions_total", {{"decision", "store_unavailable"}}),
      5);
  // Two calls failed, then the short circuit answered without asking the store.
  EXPECT_EQ(value_of(registry, "stormguard_guard_store_errors_total", {{"operation", "begin"}}), 2);
  EXPECT_EQ(value_of(registry, "stormguard_guard_store_seconds", {{"operation", "begin"}}), 2);
  EXPECT_EQ(value_of(registry, "stormguard_guard_store_down"), 1);
  // By cause: the store said "connection refused".
  EXPECT_EQ(value_of(registry, "stormguard_guard_store_failures_total",
                     {{"operation", "begin"}, {"cause", "unreachable"}}),
            2);
  EXPECT_EQ(value_of(registry, "stormguard_guard_store_failures_total",
                     {{"operation", "begin"}, {"cause", "other"}}),
            0);
}

TEST(GuardMetrics, CountStoreFailuresByCauseOnARedisThatWasKilled) {
  prometheus::Registry registry;
  stormguard::metrics::guard_metrics metrics(registry);
  auto redis = std::make_unique<stormguard::test_support::redis_server>();
  auto store = sg::make_redis_store({.url = redis->url(), .prefix = "metrics_cause"});
  sg::idempotency_guard g(*store, {.trip_after_failures = 1000, .observer = &metrics});
  ASSERT_EQ(
      g.handle({"p", "POST", "/charges", "a", "k0"}, [](sg::transaction&) { return charged(); })
          .decision,
      sg::decision::ran);
  ::kill(redis->pid(), SIGKILL);
  redis.reset();
  for (int i = 1; i <= 3; ++i) {
    const auto r = g.handle({"p", "POST", "/charges", "a", "k" + std::to_string(i)},
                            [](sg::transaction&) { return charged(); });
    EXPECT_EQ(r.decision, sg::decision::store_unavailable);
  }
  // The pooled connection breaks (connection_lost), new ones are refused (unreachable): each
  // failure has a cause, none is "other".
  const double lost = value_of(registry, "stormguard_guard_store_failures_total",
                               {{"operation", "begin"}, {"cause", "connection_lost"}});
  const double unreachable = value_of(registry, "stormguard_guard_store_failures_total",
                                      {{"operation", "begin"}, {"cause", "unreachable"}});
  EXPECT_EQ(lost + unreachable, 3) << "lost " << lost << ", unreachable " << unreachable;
  EXPECT_EQ(value_of(registry, "stormguard_guard_store_failures_total",
                     {{"operation", "begin"}, {"cause", "other"}}),
            0);
}

TEST(GuardMetrics, TwoObserversOnOneRegistryShareTheSeries) {
  prometheus::Registry registry;
  stormguard::metrics::guard_metrics first(registry);
  // The same families again in one registry: prometheus-cpp returns the existing families (same
  // name, type and help), and the series are shared.
  stormguard::metrics::guard_metrics second(registry);
  second.on_decision(sg::decision::ran, true);
  EXPECT_EQ(value_of(registry, "stormguard_guard_decisions_total", {{"decision", "ran"}}), 1);
  EXPECT_EQ(value_of(registry, "stormguard_guard_takeovers_total"), 1);
}

}  // namespace
