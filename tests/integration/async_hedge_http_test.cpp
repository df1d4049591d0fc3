// SPDX-License-Identifier: Apache-2.0
// stormguard::http::async_hedge against a real HTTP/1.1 server on 127.0.0.1 that serves every
// connection concurrently (an Asio server on its own thread, below: the shared test server
// answers one request at a time, so a slow answer would hold the hedge back). Real time: the
// hedging delays are tens of milliseconds; every wait on the io_context is bounded.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/streambuf.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/budget.hpp"
#include "stormguard/http/hedge.hpp"
#include "stormguard/random.hpp"
#include "support/asio_run.hpp"
#include "support/concurrent_http_server.hpp"
#include "support/open_fds.hpp"

namespace {

using namespace std::chrono_literals;
using asio::ip::tcp;
using stormguard::end_reason;
using stormguard::hedger;
using stormguard::hedging_policy;
using stormguard::http::async_client;
using stormguard::http::client_options;
using stormguard::http::hedged_result;
using stormguard::http::key;
using stormguard::http::request;
using stormguard::test_support::concurrent_server;
using stormguard::test_support::header_of;
using stormguard::test_support::open_fds;
using stormguard::test_support::reply;
using steady = std::chrono::steady_clock;
namespace as_tuple = asio::experimental;

stormguard::http::client_options one_attempt() {
  stormguard::http::client_options o;
  o.retry.max_retries = 0;
  o.attempt_timeout = 5s;
  o.connect_timeout = 1s;
  return o;
}

using stormguard::test_support::run_until;

class HttpHedge : public ::testing::Test {
 protected:
  hedged_result perform(request req, const stormguard::http::hedge_http_options& options = {},
                        const concurrent_server* server = nullptr) {
    std::optional<hedged_result> got;
    stormguard::http::async_hedge(client, hedge, std::move(req), options, {}, [&](hedged_result r) {
      EXPECT_EQ(client.in_flight(), 0U);  // no copy left running
      fds_at_completion = server != nullptr ? server->client_fds() : open_fds();
      got = std::move(r);
    });
    run_until(io, [&] { return got.has_value(); });
    return got ? std::move(*got) : hedged_result{};
  }
  request at(const concurrent_server& server, std::string method = "GET") {
    request r;
    r.method = std::move(method);
    r.url = server.url();
    if (r.method == "POST") r.body = R"({"amount":100})";
    return r;
  }

  asio::io_context io;
  async_client client{io.get_executor(), one_attempt()};
  stormguard::real_clock clock;
  stormguard::random_generator rng{3};
  hedger<stormguard::random_generator, stormguard::no_budget> hedge{
      hedging_policy({.max_attempts = 2, .delay = 50ms}), clock, rng};
  int fds_at_completion = -1;
};

TEST_F(HttpHedge, ASlowFirstAnswerLosesToTheHedgeAndItsConnectionIsClosedBeforeCompletion) {
  concurrent_server server({{0ms, 200, "warm"}, {3000ms, 200, "slow"}, {0ms, 200, "fast"}});
  ASSERT_TRUE(perform(at(server)).ok());   // a kept-alive connection, which copy 1 reuses
  const int before = server.client_fds();  // the client's descriptors
  const auto start = steady::now();
  const hedged_result r = perform(at(server), {}, &server);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.result.response);
  EXPECT_EQ(r.result.response->body, "fast");
  EXPECT_EQ(r.report.winner, 2);
  EXPECT_EQ(r.report.sent, 2);
  EXPECT_EQ(r.report.cancelled, 1);
  EXPECT_LT(steady::now() - start, 2s);  // the slow answer was not waited for
  // Copy 1's connection was closed, copy 2's is kept for reuse: the client holds as many
  // descriptors as before (the server still holds copy 1's socket until its 3 s answer).
  EXPECT_EQ(fds_at_completion, before);
  const auto heads = server.heads();
  ASSERT_EQ(heads.size(), 3U);
  // Each copy says which attempt it is (gRFC A6 numbers hedged attempts), so that a server's
  // retry budget counts the hedge as a retry (it was sent as a first attempt, and passed it).
  EXPECT_EQ(header_of(heads[1], "x-envoy-attempt-count"), "1");
  EXPECT_EQ(header_of(heads[2], "x-envoy-attempt-count"), "2");
}

TEST_F(HttpHedge, ARequestThatNumbersItsOwnAttemptIsCopyOneAndTheCopiesCountOn) {
  concurrent_server server({{300ms, 200, "slow"}, {0ms, 200, "fast"}});
  stormguard::http::request req = at(server);
  req.headers.push_back({"X-Envoy-Attempt-Count", "7"});
  const hedged_result r = perform(req);
  ASSERT_TRUE(r.ok());
  const auto heads = server.heads();
  ASSERT_EQ(heads.size(), 2U);
  // Copy 1 says the caller's 7, copy 2 says 8: never the caller's number twice, and never two
  // fields (header_of reads the first field; the count below finds any second one).
  EXPECT_EQ(header_of(heads[0], "X-Envoy-Attempt-Count"), "7");
  EXPECT_EQ(header_of(heads[1], "X-Envoy-Attempt-Count"), "8");
  for (const std::string& head : heads) {
    const auto first = head.find("ttempt-Count");
    EXPECT_EQ(head.find("ttempt-Count", first + 1), std::string::npos) << head;
  }
}

TEST_F(HttpHedge, AFastFirstAnswerSendsNoHedge) {
  concurrent_server server({{0ms, 200, "first"}});
  const hedged_result r = perform(at(server));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.sent, 1);
  EXPECT_EQ(r.report.winner, 1);
  EXPECT_EQ(server.heads().size(), 1U);
}

TEST_F(HttpHedge, APostIsHedgedOnlyWithAnIdempotencyKeyTheSameOnEveryCopy) {
  // Copy 2 hears 409 "in progress" from the server's idempotency guard: wait for copy 1.
  concurrent_server server({{300ms, 201, "created"}, {0ms, 409, "in progress"}});
  request req = at(server, "POST");
  req.idempotency = key::generate();
  const hedged_result r = perform(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.result.response->status, 201);
  EXPECT_EQ(r.report.winner, 1);
  EXPECT_EQ(r.report.sent, 2);
  EXPECT_EQ(r.report.cancelled, 0);
  const auto heads = server.heads();
  ASSERT_EQ(heads.size(), 2U);
  const auto k1 = header_of(heads[0], "Idempotency-Key");
  ASSERT_TRUE(k1);
  EXPECT_EQ(k1, header_of(heads[1], "Idempotency-Key"));
}

TEST_F(HttpHedge, APostWithoutAKeyIsSentOnce) {
  concurrent_server server({{200ms, 201, "created"}});
  const hedged_result r = perform(at(server, "POST"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.sent, 1);
  EXPECT_EQ(server.heads().size(), 1U);
}

TEST_F(HttpHedge, ANegativePushbackStopsFurtherCopies) {
  concurrent_server server({{0ms, 503, "no", "grpc-retry-pushback-ms: -1\r\n"}});
  const hedged_result r = perform(at(server), {.non_fatal_statuses = {503}});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.result.reason, end_reason::server_refused);  // as a retrier says for it
  EXPECT_EQ(r.report.sent, 1);
  EXPECT_EQ(r.report.stop, stormguard::hedge_stop::server_refused);
  EXPECT_EQ(r.result.response->status, 503);
}

TEST_F(HttpHedge, ANonFatalStatusSendsTheNextCopyAtOnce) {
  concurrent_server server({{0ms, 503, "busy"}, {0ms, 200, "ok"}});
  const auto start = steady::now();
  const hedged_result r = perform(at(server), {.non_fatal_statuses = {503}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 2);
  EXPECT_LT(steady::now() - start, 45ms);  // not after the 50 ms delay
}

TEST_F(HttpHedge, AFatalStatusEndsTheCall) {
  concurrent_server server({{0ms, 404, "none"}});
  const hedged_result r = perform(at(server), {.non_fatal_statuses = {503}});
  EXPECT_EQ(r.result.reason, end_reason::not_retryable);
  EXPECT_EQ(r.result.response->status, 404);
  EXPECT_EQ(r.report.sent, 1);
}

TEST_F(HttpHedge, ARetryingClientIsRefused) {
  stormguard::http::client_options o;
  o.retry.max_retries = 2;
  async_client retrying(io.get_executor(), o);
  request req;
  req.url = "http://127.0.0.1:1/";
  EXPECT_THROW(stormguard::http::async_hedge(retrying, hedge, req, {}, {}, [](hedged_result) {}),
               std::invalid_argument);
}

// ----- the lookup of the host's addresses (hedge_http_options::resolver) -----------------------

// A resolver that answers after `after` on a timer of the client's own loop (a slow DNS server
// without the network), recording what it was asked and whether it was cancelled.
struct timer_resolver {
  std::chrono::milliseconds after;
  std::vector<std::string> answer;
  int calls = 0;
  std::string host{};
  int port = 0;
  bool cancelled = false;
  bool on_loop_thread = false;
  std::thread::id loop_thread = std::this_thread::get_id();

  stormguard::http::host_resolver hook() {
    return [this](const asio::any_io_executor& ex, const std::string& h, int p,
                  asio::cancellation_slot cancel, stormguard::http::resolve_completion done) {
      ++calls;
      host = h;
      port = p;
      on_loop_thread = std::this_thread::get_id() == loop_thread;
      auto timer = std::make_shared<asio::steady_timer>(ex, after);
      cancel.assign([this, timer](asio::cancellation_type) {
        cancelled = true;
        timer->cancel();
      });
      timer->async_wait([this, timer, cancel, done](const std::error_code& ec) mutable {
        cancel.clear();
        done(ec ? std::vector<std::string>{} : answer);
      });
    };
  }
};

class HedgeLookup : public ::testing::Test {
 protected:
  HedgeLookup() : server({{1500ms, 200, "slow"}, {0ms, 200, "fast"}}, {"127.0.0.2"}) {}
  [[nodiscard]] request named(const std::string& name = "localhost") const {
    request r;
    r.url = "http://" + name + ":" + std::to_string(server.port()) + "/x";
    return r;
  }
  hedged_result perform(async_client& client, request req,
                        const stormguard::http::hedge_http_options& options,
                        asio::cancellation_slot slot = {}) {
    std::optional<hedged_result> got;
    stormguard::http::async_hedge(client, hedge, std::move(req), options, {},
                                  asio::bind_cancellation_slot(slot, [&](hedged_result r) {
                                    in_flight_at_completion = client.in_flight();
                                    got = std::move(r);
                                  }));
    run_until(io, [&] { return got.has_value(); });
    return got ? std::move(*got) : hedged_result{};
  }

  concurrent_server server;
  asio::io_context io;
  stormguard::real_clock clock;
  stormguard::random_generator rng{7};
  hedger<stormguard::random_generator, stormguard::no_budget> hedge{
      hedging_policy({.max_attempts = 2, .delay = 50ms}), clock, rng};
  timer_resolver dns{200ms, {"127.0.0.1", "127.0.0.2"}};
  std::size_t in_flight_at_completion = 99;
};

TEST_F(HedgeLookup, TheSecondCopyWaitsForASlowLookupWhileTheLoopRunsOnAndGoesPinned) {
  async_client client(io.get_executor(), one_attempt());
  // Another timer on the same loop, due while the lookup runs: it fires on time.
  asio::steady_timer other(io, 100ms);
  std::optional<steady::time_point> other_fired;
  other.async_wait([&](const std::error_code&) { other_fired = steady::now(); });
  const auto start = steady::now();
  const hedged_result r = perform(client, named(), {.resolver = dns.hook(), .resolve_wait = 1s});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 2);
  EXPECT_EQ(r.result.response->body, "fast");
  EXPECT_EQ(dns.calls, 1);
  EXPECT_EQ(dns.host, "localhost");
  EXPECT_EQ(dns.port, server.port());
  EXPECT_TRUE(dns.on_loop_thread);
  EXPECT_FALSE(dns.cancelled);
  // Copy 2 went once the lookup answered (50 + 200 ms), to the 2nd address.
  EXPECT_GE(steady::now() - start, 240ms);
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1", "127.0.0.2"}));
  ASSERT_TRUE(other_fired);
  EXPECT_LT(*other_fired - start, 150ms);
}

TEST_F(HedgeLookup, TheSecondCopyGoesUnpinnedWhenTheWaitEndsFirst) {
  async_client client(io.get_executor(), one_attempt());
  const auto start = steady::now();
  const hedged_result r = perform(client, named(), {.resolver = dns.hook(), .resolve_wait = 20ms});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 2);
  EXPECT_LT(steady::now() - start, 180ms);  // at about 50 + 20 ms, not after the 200 ms lookup
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1", "127.0.0.1"}));
  EXPECT_TRUE(dns.cancelled);  // the call ended before the lookup: it was cancelled
}

TEST_F(HedgeLookup, ACallCancelledWhileItsLookupRunsCompletesAtOnceAndLeavesNothing) {
  asio::cancellation_signal cancel;
  asio::steady_timer at(io, 120ms);  // copy 2 waits for the lookup by then
  at.async_wait([&](const std::error_code&) { cancel.emit(asio::cancellation_type::terminal); });
  const int before = server.client_fds();
  const auto start = steady::now();
  {
    async_client client(io.get_executor(), one_attempt());
    const hedged_result r =
        perform(client, named(), {.resolver = dns.hook(), .resolve_wait = 1s}, cancel.slot());
    EXPECT_LT(steady::now() - start, 200ms);  // not after the 250 ms lookup, nor the 1.5 s copy
    EXPECT_EQ(r.result.reason, end_reason::cancelled);
    EXPECT_EQ(r.report.sent, 2);
    EXPECT_EQ(in_flight_at_completion, 0U);
    EXPECT_TRUE(dns.cancelled);            // the lookup too
    EXPECT_EQ(server.heads().size(), 1U);  // copy 2 never went
    // No handler of the call is left on the loop: it runs out of work at once.
    io.restart();
    const auto idle = steady::now();
    io.run_for(1s);
    EXPECT_LT(steady::now() - idle, 100ms);
  }
  EXPECT_EQ(server.client_fds(), before);
}

TEST_F(HedgeLookup, AResolveEntryOrAnIpLiteralNeedsNoLookup) {
  client_options o = one_attempt();
  o.resolve = {"two.test:" + std::to_string(server.port()) + ":127.0.0.1,127.0.0.2"};
  async_client client(io.get_executor(), o);
  const hedged_result r = perform(client, named("two.test"), {.resolver = dns.hook()});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 2);
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1", "127.0.0.2"}));
  EXPECT_EQ(dns.calls, 0);
  concurrent_server literal({{1000ms, 200, "slow"}, {0ms, 200, "fast"}});
  request at_literal;
  at_literal.url = literal.url();
  ASSERT_TRUE(perform(client, at_literal, {.resolver = dns.hook()}).ok());
  EXPECT_EQ(literal.heads().size(), 2U);
  EXPECT_EQ(dns.calls, 0);
}

TEST_F(HedgeLookup, AResolverThatAnswersAtOncePinsTheSecondCopyAtOnce) {
  async_client client(io.get_executor(), one_attempt());
  int calls = 0;
  const auto instant = [&](const asio::any_io_executor&, const std::string&, int,
                           asio::cancellation_slot, stormguard::http::resolve_completion done) {
    ++calls;
    done({"127.0.0.1", "127.0.0.2"});
  };
  const hedged_result r = perform(client, named(), {.resolver = instant, .resolve_wait = 0ms});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(server.addresses(), (std::vector<std::string>{"127.0.0.1", "127.0.0.2"}));
}

}  // namespace
