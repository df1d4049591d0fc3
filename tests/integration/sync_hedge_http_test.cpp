// SPDX-License-Identifier: Apache-2.0
// Hedged calls of the synchronous stormguard::http::client (client_options::hedging) against a
// real HTTP/1.1 server on loopback that serves every connection concurrently
// (support/concurrent_http_server.hpp), and copies spread over a host's addresses (gRFC A6) for
// the synchronous and the asynchronous hedging, with a name that resolves to 127.0.0.1 and
// 127.0.0.2 (client_options::resolve; all of 127/8 is loopback on Linux). Real time: the hedging
// delays are tens of milliseconds.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <asio/io_context.hpp>
#include <chrono>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/http/client.hpp"
#include "stormguard/http/hedge.hpp"
#include "stormguard/metrics/http.hpp"
#include "stormguard/random.hpp"
#include "support/asio_run.hpp"
#include "support/concurrent_http_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::end_reason;
using stormguard::hedge_report;
using stormguard::hedge_stop;
using stormguard::http::client;
using stormguard::http::client_hedging;
using stormguard::http::client_options;
using stormguard::http::key;
using stormguard::http::request;
using stormguard::http::result;
using stormguard::test_support::concurrent_server;
using stormguard::test_support::header_of;
using steady = std::chrono::steady_clock;

// Two copies 50 ms apart, no budget, one attempt per copy.
client_options hedged(int copies = 2, std::chrono::milliseconds delay = 50ms) {
  client_options o;
  o.retry.max_retries = 0;
  o.budget = stormguard::no_budget{};
  o.attempt_timeout = 5s;
  o.connect_timeout = 1s;
  o.hedging = client_hedging{};
  o.hedging->policy.max_attempts = copies;
  o.hedging->policy.delay = delay;
  return o;
}

request at(const concurrent_server& server, std::string method = "GET") {
  request r;
  r.method = std::move(method);
  r.url = server.url();
  if (r.method == "POST") r.body = R"({"amount":100})";
  return r;
}

TEST(SyncHedge, ASlowFirstCopyLosesItsConnectionIsClosedBeforePerformReturns) {
  concurrent_server server({{0ms, 200, "warm"}, {3000ms, 200, "slow"}, {0ms, 200, "fast"}});
  client c(hedged());
  ASSERT_TRUE(c.perform(at(server)).ok());  // the event loop and a kept-alive connection
  const int before = server.client_fds();   // the client's descriptors
  const auto start = steady::now();
  const result r = c.perform(at(server));
  const int after = server.client_fds();
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.response);
  EXPECT_EQ(r.response->body, "fast");
  ASSERT_TRUE(r.hedging);
  EXPECT_EQ(r.hedging->winner, 2);
  EXPECT_EQ(r.hedging->sent, 2);
  EXPECT_EQ(r.hedging->cancelled, 1);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_LT(steady::now() - start, 2s);  // the slow answer was not waited for
  // Copy 1's connection was closed, copy 2's kept: as many descriptors as before.
  EXPECT_EQ(after, before);
  EXPECT_EQ(server.heads().size(), 3U);
}

TEST(SyncHedge, AFastFirstAnswerSendsNoCopy) {
  concurrent_server server({{0ms, 200, "first"}});
  client c(hedged());
  const result r = c.perform(at(server));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.hedging);
  EXPECT_EQ(r.hedging->sent, 1);
  EXPECT_EQ(r.hedging->winner, 1);
  EXPECT_EQ(server.heads().size(), 1U);
}

TEST(SyncHedge, ASpentBudgetRefusesTheCopyAndNeverCancelsTheOneInFlight) {
  concurrent_server server({{300ms, 200, "slow but fine"}});
  client_options o = hedged();
  // No retry at all: the copy after the first is refused.
  o.budget = stormguard::ratio_budget_options{.ratio = 0.0, .min_retries_per_second = 0};
  client c(o);
  const result r = c.perform(at(server));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.response->body, "slow but fine");
  ASSERT_TRUE(r.hedging);
  EXPECT_EQ(r.hedging->refused, 1);
  EXPECT_EQ(r.hedging->sent, 1);
  EXPECT_EQ(r.hedging->cancelled, 0);
  EXPECT_EQ(r.hedging->winner, 1);
  EXPECT_EQ(server.heads().size(), 1U);
}

TEST(SyncHedge, ANegativePushbackStopsFurtherCopies) {
  concurrent_server server({{0ms, 503, "no", "grpc-retry-pushback-ms: -1\r\n"}});
  client_options o = hedged();
  o.hedging->non_fatal_statuses = {503};
  client c(o);
  const result r = c.perform(at(server));
  EXPECT_EQ(r.reason, end_reason::server_refused);  // as a retrier says for it
  ASSERT_TRUE(r.hedging);
  EXPECT_EQ(r.hedging->sent, 1);
  EXPECT_EQ(r.hedging->stop, hedge_stop::server_refused);
  ASSERT_TRUE(r.response);
  EXPECT_EQ(r.response->status, 503);
}

TEST(SyncHedge, APushbackDelayPostponesTheNextCopy) {
  concurrent_server server({{0ms, 503, "later", "grpc-retry-pushback-ms: 250\r\n"}, {0ms, 200}});
  // A hedging delay of 2 s, so that the first copy's answer (at once) always comes before it,
  // even on a loaded machine: with 10 ms the second copy sometimes left on the delay, before the
  // pushback was read, and the call ended in 20 ms.
  client_options o = hedged(2, 2s);
  o.hedging->non_fatal_statuses = {503};  // without the pushback: the next copy at once
  client c(o);
  const auto start = steady::now();
  const result r = c.perform(at(server));
  ASSERT_TRUE(r.ok());
  const auto took = steady::now() - start;
  EXPECT_GE(took, 240ms);   // the pushback's 250 ms, not "at once"
  EXPECT_LT(took, 1900ms);  // nor the hedging delay
  EXPECT_EQ(r.hedging->winner, 2);
}

TEST(SyncHedge, APostIsHedgedWithOneKeyAndA409InProgressWaitsForTheOtherCopy) {
  concurrent_server server({{300ms, 201, "created"}, {0ms, 409, "in progress"}});
  client c(hedged());
  request req = at(server, "POST");
  req.idempotency = key::generate();
  const result r = c.perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.response->status, 201);
  EXPECT_EQ(r.hedging->winner, 1);
  EXPECT_EQ(r.hedging->sent, 2);
  const auto heads = server.heads();
  ASSERT_EQ(heads.size(), 2U);
  const auto k1 = header_of(heads[0], "Idempotency-Key");
  ASSERT_TRUE(k1);
  EXPECT_EQ(k1, header_of(heads[1], "Idempotency-Key"));
}

TEST(SyncHedge, APostWithoutAKeyIsSentOnce) {
  concurrent_server server({{200ms, 201, "created"}});
  client c(hedged());
  const result r = c.perform(at(server, "POST"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.hedging->sent, 1);
  EXPECT_EQ(server.heads().size(), 1U);
}

TEST(SyncHedge, AStopEndsTheCallAndEveryCopy) {
  concurrent_server server({{3000ms, 200}, {3000ms, 200}});
  client c(hedged());
  std::stop_source stop;
  // The stop comes once both copies have reached the server (at most 2 s: a loaded sanitizer
  // run may send the second copy later than its delay), not after a fixed sleep.
  std::thread stopper([&] {
    const auto until = steady::now() + 2s;
    while (server.heads().size() < 2 && steady::now() < until) {
      std::this_thread::sleep_for(5ms);
    }
    stop.request_stop();
  });
  const auto start = steady::now();
  const result r = c.perform(at(server), {.stop = stop.get_token()});
  stopper.join();
  EXPECT_EQ(r.reason, end_reason::cancelled);
  EXPECT_LT(steady::now() - start, 2900ms);  // not the copies' 3 s answers
  EXPECT_EQ(r.hedging->sent, 2);
  EXPECT_EQ(r.hedging->cancelled, 2);
}

TEST(SyncHedge, TheEndHookAndTheMetricsSeeEachCall) {
  concurrent_server server({{300ms, 200, "slow"}, {0ms, 200, "fast"}});
  prometheus::Registry registry;
  stormguard::metrics::retry_metrics metrics(registry);
  client_options o = hedged();
  std::vector<hedge_report> seen;
  int attempts = 0;
  std::vector<int> numbers;  // on_attempt's number of each copy, as it ends
  o.on_attempt = [&](const stormguard::http::attempt_info& a) {
    ++attempts;
    numbers.push_back(a.attempt);
  };
  o.hedging->on_end = stormguard::metrics::http_hedge_hook(
      metrics, "api", o, [&](end_reason, const hedge_report& report) { seen.push_back(report); });
  client c(o);
  const result r = c.perform(at(server));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(seen.size(), 1U);
  EXPECT_EQ(seen[0], *r.hedging);
  EXPECT_EQ(attempts, 2);  // once per copy
  // Each copy numbered as its x-envoy-attempt-count says: the fast second copy ends first, then
  // the cancelled first one (it said "1" for both).
  EXPECT_EQ(numbers, (std::vector<int>{2, 1}));
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_NE(text.find(R"(stormguard_hedges_sent_total{client="api"} 1)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(stormguard_hedges_won_total{client="api"} 1)"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(stormguard_hedges_cancelled_total{client="api"} 1)"), std::string::npos)
      << text;
}

TEST(SyncHedge, ARetryingClientCannotHedge) {
  client_options o = hedged();
  o.retry.max_retries = 2;
  EXPECT_THROW(client{o}, std::invalid_argument);
  o = hedged();
  o.hedging->policy.max_attempts = 6;
  EXPECT_THROW(client{o}, std::invalid_argument);
  o = hedged();
  o.hedging->resolve_wait = -1ms;
  try {
    client c{o};
    ADD_FAILURE() << "a negative resolve_wait was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("hedging.resolve_wait"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("-1000000ns"), std::string::npos) << e.what();
  }
}

// ----- copies spread over the host's addresses (gRFC A6) -----------------------------------------

class SpreadCopies : public ::testing::Test {
 protected:
  SpreadCopies() : server({{3000ms, 200, "slow"}, {0ms, 200, "fast"}}, {"127.0.0.2"}) {}
  [[nodiscard]] std::string host() const { return "two.test:" + std::to_string(server.port()); }
  [[nodiscard]] client_options options() const {
    client_options o = hedged();
    o.resolve = {host() + ":127.0.0.1,127.0.0.2"};
    return o;
  }
  [[nodiscard]] request req() const {
    request r;
    r.url = "http://" + host() + "/x";
    return r;
  }
  void expect_two_addresses() const {
    const auto heads = server.heads();
    ASSERT_EQ(heads.size(), 2U);
    EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1", "127.0.0.2"}));
    for (const auto& head : heads) EXPECT_EQ(header_of(head, "Host"), host());
  }
  concurrent_server server;
};

TEST_F(SpreadCopies, TheSyncClientSendsTheSecondCopyToTheSecondAddress) {
  client c(options());
  const result r = c.perform(req());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.response->body, "fast");
  EXPECT_EQ(r.hedging->winner, 2);
  expect_two_addresses();
}

TEST_F(SpreadCopies, TheNextFirstCopyDoesNotRideTheConnectionOfAPinnedCopy) {
  client c(options());
  ASSERT_TRUE(c.perform(req()).ok());  // copy 2's connection, to 127.0.0.2, is kept alive
  const result r = c.perform(req());   // the server's third answer: at once
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.hedging->sent, 1);
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1", "127.0.0.2", "127.0.0.1"}));
}

TEST_F(SpreadCopies, TheAsyncHedgeSendsTheSecondCopyToTheSecondAddress) {
  asio::io_context io;
  client_options o = options();
  o.hedging.reset();
  stormguard::http::async_client transfers(io.get_executor(), o);
  stormguard::real_clock clock;
  stormguard::random_generator rng{5};
  stormguard::hedger hedge(stormguard::hedging_policy({.max_attempts = 2, .delay = 50ms}), clock,
                           rng);
  std::optional<stormguard::http::hedged_result> got;
  stormguard::http::async_hedge(transfers, hedge, req(), {}, {},
                                [&](stormguard::http::hedged_result r) { got = std::move(r); });
  stormguard::test_support::run_until(io, [&] { return got.has_value(); });
  ASSERT_TRUE(got && got->ok());
  EXPECT_EQ(got->report.winner, 2);
  expect_two_addresses();
}

TEST_F(SpreadCopies, ACopyPinnedByTheCallerStaysWhereItWasPinned) {
  client c(options());
  request r = req();
  r.connect_address = "127.0.0.2";
  ASSERT_TRUE(c.perform(r).ok());
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.2", "127.0.0.2"}));
}

}  // namespace
