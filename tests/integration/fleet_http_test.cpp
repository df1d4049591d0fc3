// SPDX-License-Identifier: Apache-2.0
// The HTTP clients' per-host fleet budgets on a real Redis (tests/support/redis_server.hpp)
// through stormguard::fleet::host_attacher: two clients with budgets of their own share one
// fleet's spend per host (key "KEY:scheme://host:port"), and a Redis killed mid-run leaves them in
// their fallback without any call waiting on it. The syncers run on their own threads on real
// time; the tests wait for their state by polling (at most 5 s each), never by a fixed sleep.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/fleet/attach.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/http/client.hpp"
#include "support/http_requests.hpp"
#include "support/http_test_server.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::any_budget;
using stormguard::end_reason;
using stormguard::fleet_budget;
using stormguard::fleet_budget_options;
using stormguard::http::client;
using stormguard::http::client_options;
using stormguard::test_support::fast_options;
using stormguard::test_support::get;
using stormguard::test_support::http_test_server;
using stormguard::test_support::redis_server;
using steady = std::chrono::steady_clock;

// A fleet budget: ratio 0.1, floor 1 retry/s over 10 s (10 retries for the fleet), 10 ms syncs.
client_options fleet_client(const std::string& url, const std::string& key,
                            std::function<void(std::string_view)> log = {}) {
  client_options o = fast_options();
  fleet_budget_options f;
  f.ratio = {.ratio = 0.1, .min_retries_per_second = 1};
  f.sync_interval = 10ms;
  f.store = {.url = url, .key = key, .password_env = {}};
  o.budget = f;
  o.attach_budget = stormguard::fleet::host_attacher(std::move(log));
  return o;
}

// Calls f(fleet_budget&) on `host`'s budget of `c`.
template <class F>
auto with_fleet(client& c, const std::string& host, F f) {
  return c.budgets().for_host(host).visit([&](auto& b) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(b)>, fleet_budget>) {
      return f(b);
    } else {
      ADD_FAILURE() << "not a fleet budget";
      return decltype(f(std::declval<fleet_budget&>())){};
    }
  });
}

// Polls `done` every 5 ms for at most 5 s.
bool eventually(const std::function<bool()>& done) {
  const auto until = steady::now() + 5s;
  while (steady::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

std::string host_of(const http_test_server& server) {
  return "http://127.0.0.1:" + std::to_string(server.port());
}

TEST(FleetHttp, TwoClientsShareOneHostsFleetBudget) {
  http_test_server server;
  server.set_fallback({.status = 503});
  const std::string key = "fleet-http-" + std::to_string(getpid());
  const std::string host = host_of(server);
  client a(fleet_client(redis_server::shared().url(), key));
  ASSERT_TRUE(eventually(
      [&] { return with_fleet(a, host, [](fleet_budget& b) { return b.live_clients() >= 1; }); }));
  int a_retries = 0;
  for (int i = 0; i < 10; ++i) a_retries += a.perform(get(server)).attempts - 1;
  EXPECT_GE(a_retries, 8);  // the fleet's 10 retries (its floor), give or take a draw
  // B joins: once its syncer has seen A (2 live clients) and A's spend, it has no retry left.
  // A, idle now, reports its last calls within max_sync_interval (2 s): until then B's view is
  // stale and B may hold a part of an allowance A has already spent (the overshoot
  // fleet_budget.hpp bounds), so the test waits for the view, not for a fixed time.
  client b(fleet_client(redis_server::shared().url(), key));
  (void)b.budgets().for_host(host);  // B's budget and its syncer now
  ASSERT_TRUE(eventually([&] {
    return with_fleet(a, host, [](fleet_budget& f) { return f.live_clients() == 2; }) &&
           with_fleet(b, host, [](fleet_budget& f) {
             return f.live_clients() == 2 && f.credit_micro() < fleet_budget::k_scale;
           });
  })) << with_fleet(a, host, [](fleet_budget& f) { return f.live_clients(); })
      << " " << with_fleet(b, host, [](fleet_budget& f) { return f.live_clients(); }) << " "
      << with_fleet(b, host, [](fleet_budget& f) { return f.credit_micro(); });
  const auto r = b.perform(get(server));
  EXPECT_LE(r.attempts, 2);
  // Another port of the same host is another fleet key: a full allowance of its own.
  http_test_server other;
  other.set_fallback({.status = 503});
  ASSERT_TRUE(eventually([&] {
    return with_fleet(b, host_of(other), [](fleet_budget& f) { return f.live_clients() >= 1; });
  }));
  int other_retries = 0;
  for (int i = 0; i < 10; ++i) other_retries += b.perform(get(other)).attempts - 1;
  EXPECT_GE(other_retries, 8);
}

TEST(FleetHttp, RedisKilledMidRunFallsBackWithoutWaiting) {
  http_test_server server;
  server.set_fallback({.status = 503});
  auto redis = std::make_unique<redis_server>();
  std::mutex lines_mutex;
  std::vector<std::string> lines;
  client c(fleet_client(redis->url(), "fleet-http-kill", [&](std::string_view line) {
    const std::lock_guard hold(lines_mutex);
    lines.emplace_back(line);
  }));
  const std::string host = host_of(server);
  ASSERT_TRUE(eventually([&] {
    return with_fleet(c, host, [](fleet_budget& f) {
      return f.current_mode(stormguard::real_clock().now()) == fleet_budget::mode::joined;
    });
  }));
  for (int i = 0; i < 5; ++i) (void)c.perform(get(server));
  ASSERT_EQ(kill(redis->pid(), SIGKILL), 0);
  redis.reset();
  // Every call ends on its own time: the longest takes a few ms, never a store's timeout.
  steady::duration longest{};
  for (int i = 0; i < 20; ++i) {
    const auto start = steady::now();
    const auto r = c.perform(get(server));
    longest = std::max(longest, steady::now() - start);
    EXPECT_TRUE(r.reason == end_reason::budget_exhausted ||
                r.reason == end_reason::attempts_exhausted);
  }
  EXPECT_LT(longest, 100ms);
  EXPECT_TRUE(eventually([&] {
    return with_fleet(c, host, [](fleet_budget& f) {
      return f.current_mode(stormguard::real_clock().now()) == fleet_budget::mode::fallback;
    });
  }));
  const std::lock_guard hold(lines_mutex);
  int falls = 0;
  for (const auto& l : lines) falls += l.find("falling back") != std::string::npos ? 1 : 0;
  EXPECT_EQ(falls, 1);
}

}  // namespace
