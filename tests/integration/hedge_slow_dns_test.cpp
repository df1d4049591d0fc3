// SPDX-License-Identifier: Apache-2.0
// Hedged copies spread over a host's addresses while the system's resolver is slow: the lookup of
// the addresses for copy 2 must not block the thread that runs the client's io_context (other
// timers and transfers on it keep their time), for http::async_hedge with its default resolver
// (asio_host_resolver) and for the synchronous client. A slow DNS server without the network:
// this executable defines getaddrinfo itself (it interposes the C library's), and answers the
// name "localhost" after k_slow with 127.0.0.1 and 127.0.0.2 (all of 127/8 is loopback on
// Linux); every other name goes to the C library. libcurl resolves "localhost" by itself without
// getaddrinfo (since 7.78), so only the hedge's own lookup is slow. Real time.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <strings.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/http/client.hpp"
#include "stormguard/http/hedge.hpp"
#include "stormguard/random.hpp"
#include "support/asio_run.hpp"
#include "support/concurrent_http_server.hpp"

namespace {

using namespace std::chrono_literals;
constexpr auto k_slow = 300ms;

std::atomic<int> g_slow_lookups{0};
std::mutex g_loop_mutex;
std::thread::id g_loop_thread{};        // the thread that runs the test's event loop
std::atomic<int> g_lookups_on_loop{0};  // slow lookups made on it

}  // namespace

// The C library's getaddrinfo, except for "localhost": k_slow, then 127.0.0.1 and 127.0.0.2.
extern "C" int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                           struct addrinfo** res) {
  using real_type = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
  static const auto real = reinterpret_cast<real_type>(::dlsym(RTLD_NEXT, "getaddrinfo"));
  if (node == nullptr || ::strcasecmp(node, "localhost") != 0)
    return real(node, service, hints, res);
  ++g_slow_lookups;
  {
    const std::lock_guard hold(g_loop_mutex);
    if (std::this_thread::get_id() == g_loop_thread) ++g_lookups_on_loop;
  }
  std::this_thread::sleep_for(k_slow);
  struct addrinfo numeric = hints != nullptr ? *hints : addrinfo{};
  numeric.ai_flags |= AI_NUMERICHOST;
  numeric.ai_flags &= ~AI_ADDRCONFIG;
  numeric.ai_family = AF_INET;
  struct addrinfo* first = nullptr;
  struct addrinfo* second = nullptr;
  if (const int e = real("127.0.0.1", service, &numeric, &first); e != 0) return e;
  if (const int e = real("127.0.0.2", service, &numeric, &second); e != 0) {
    ::freeaddrinfo(first);
    return e;
  }
  struct addrinfo* last = first;
  while (last->ai_next != nullptr) last = last->ai_next;
  last->ai_next = second;  // glibc's freeaddrinfo frees node by node
  *res = first;
  return 0;
}

namespace {

using stormguard::end_reason;
using stormguard::http::client_options;
using stormguard::http::hedged_result;
using stormguard::http::request;
using stormguard::test_support::concurrent_server;
using steady = std::chrono::steady_clock;

// A timer every 10 ms on `io` while the test runs: the most any tick came late.
class heartbeat {
 public:
  explicit heartbeat(asio::io_context& io) : timer_(io) { arm(steady::now()); }
  void stop() {
    stopped_ = true;
    timer_.cancel();
  }
  [[nodiscard]] steady::duration worst() const { return worst_; }
  [[nodiscard]] int ticks() const { return ticks_; }

 private:
  void arm(steady::time_point due) {
    timer_.expires_at(due + 10ms);
    timer_.async_wait([this](const std::error_code& ec) {
      if (ec || stopped_) return;
      const auto now = steady::now();
      worst_ = std::max(worst_, now - timer_.expiry());
      ++ticks_;
      arm(now);
    });
  }
  asio::steady_timer timer_;
  steady::duration worst_{};
  int ticks_ = 0;
  bool stopped_ = false;
};

client_options one_attempt() {
  client_options o;
  o.retry.max_retries = 0;
  o.attempt_timeout = 5s;
  o.connect_timeout = 1s;
  return o;
}

class SlowDns : public ::testing::Test {
 protected:
  SlowDns() : server({{1500ms, 200, "slow"}, {0ms, 200, "fast"}}, {"127.0.0.2"}) {
    g_slow_lookups = 0;
    g_lookups_on_loop = 0;
    const std::lock_guard hold(g_loop_mutex);
    g_loop_thread = std::this_thread::get_id();
  }
  ~SlowDns() override {
    const std::lock_guard hold(g_loop_mutex);
    g_loop_thread = {};
  }
  [[nodiscard]] request req() const {
    request r;
    r.url = "http://localhost:" + std::to_string(server.port()) + "/x";
    return r;
  }
  // One hedged call (2 copies, 50 ms apart) on `io`, with a heartbeat on the same loop.
  hedged_result hedge_once(const stormguard::http::hedge_http_options& options,
                           asio::cancellation_slot slot = {}) {
    stormguard::http::async_client client(io.get_executor(), one_attempt());
    stormguard::real_clock clock;
    stormguard::random_generator rng{5};
    stormguard::hedger hedge(stormguard::hedging_policy({.max_attempts = 2, .delay = 50ms}), clock,
                             rng);
    heartbeat beat(io);
    std::optional<hedged_result> got;
    stormguard::http::async_hedge(client, hedge, req(), options, {},
                                  asio::bind_cancellation_slot(slot, [&](hedged_result r) {
                                    in_flight_at_completion = client.in_flight();
                                    got = std::move(r);
                                  }));
    stormguard::test_support::run_until(io, [&] { return got.has_value(); });
    beat.stop();
    worst = beat.worst();
    ticks = beat.ticks();
    return got ? std::move(*got) : hedged_result{};
  }

  concurrent_server server;
  asio::io_context io;
  steady::duration worst{};
  int ticks = 0;
  std::size_t in_flight_at_completion = 99;
};

TEST_F(SlowDns, TheLookupForTheSecondCopyNeverBlocksTheEventLoop) {
  // Copy 2 may wait a whole second for the addresses: it goes pinned to the 2nd address once the
  // slow lookup (300 ms) answers, and meanwhile the loop's other timers keep their time.
  const hedged_result r = hedge_once({.resolve_wait = 1s});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 2);
  EXPECT_EQ(r.result.response->body, "fast");
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1", "127.0.0.2"}));
  EXPECT_EQ(g_slow_lookups.load(), 1);
  EXPECT_EQ(g_lookups_on_loop.load(), 0) << "getaddrinfo ran on the event loop's thread";
  EXPECT_LT(worst, 100ms) << "a 10 ms timer on the same io_context came late";
  EXPECT_GE(ticks, 20);  // the heartbeat ran all along (the call takes >= 350 ms)
  EXPECT_EQ(in_flight_at_completion, 0U);
}

TEST_F(SlowDns, TheSecondCopyGoesUnpinnedWhenTheLookupOutlastsTheWait) {
  const auto start = steady::now();
  const hedged_result r = hedge_once({.resolve_wait = 20ms});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 2);
  // Copy 2 did not wait for the 300 ms lookup: sent at about 50 + 20 ms, unpinned (libcurl sends
  // it to the first address of localhost), and answered at once.
  EXPECT_LT(steady::now() - start, 250ms);
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1", "127.0.0.1"}));
  EXPECT_EQ(g_lookups_on_loop.load(), 0);
  EXPECT_LT(worst, 100ms);
}

TEST_F(SlowDns, ACallCancelledWhileItsLookupRunsCompletesAtOnce) {
  asio::cancellation_signal cancel;
  asio::steady_timer at(io, 150ms);  // copy 2 waits for the lookup by then
  at.async_wait([&](const std::error_code&) { cancel.emit(asio::cancellation_type::terminal); });
  const int before = server.client_fds();
  const auto start = steady::now();
  const hedged_result r = hedge_once({.resolve_wait = 1s}, cancel.slot());
  const auto took = steady::now() - start;
  EXPECT_EQ(r.result.reason, end_reason::cancelled);
  EXPECT_EQ(r.report.sent, 2);
  EXPECT_LT(took, 250ms);  // not after the lookup's 300 ms, nor the first copy's 1.5 s
  EXPECT_EQ(server.heads().size(), 1U);    // copy 2 was never sent
  EXPECT_EQ(in_flight_at_completion, 0U);  // copy 1's transfer was cut before the completion
  EXPECT_EQ(g_lookups_on_loop.load(), 0);
  // Nothing of the call is left open: the client's descriptors are gone with it.
  EXPECT_EQ(server.client_fds(), before);
}

TEST_F(SlowDns, TheSyncClientsHedgeIsNotHeldBackByTheLookup) {
  // The synchronous client runs the same hedge on its own loop: copy 2 goes after the delay and
  // the default wait (10 ms), unpinned, not after the 300 ms lookup.
  client_options o = one_attempt();
  o.budget = stormguard::no_budget{};
  o.hedging = stormguard::http::client_hedging{};
  o.hedging->policy.max_attempts = 2;
  o.hedging->policy.delay = 50ms;
  stormguard::http::client c(o);
  const auto start = steady::now();
  const stormguard::http::result r = c.perform(req());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.response->body, "fast");
  EXPECT_LT(steady::now() - start, 250ms);
  EXPECT_EQ(g_lookups_on_loop.load(), 0);
}

}  // namespace
