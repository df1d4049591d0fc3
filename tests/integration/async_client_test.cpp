// SPDX-License-Identifier: Apache-2.0
// stormguard::http::async_client against real HTTP/1.1 servers on 127.0.0.1 (tests/support/): the
// same rules as the sync client, cancellation during the wait and during the transfer, many
// requests in flight on one thread, and destruction with requests in flight. Backoff is
// 1 ms .. 5 ms unless a test needs a wait to cancel; every wait on the io_context is bounded.
#include "stormguard/http/async_client.hpp"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/asio_run.hpp"
#include "support/http_requests.hpp"
#include "support/http_test_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::end_reason;
using stormguard::http::async_client;
using stormguard::http::client_options;
using stormguard::http::failure_kind;
using stormguard::http::key;
using stormguard::http::request;
using stormguard::http::result;
using stormguard::test_support::delayed;
using stormguard::test_support::fast_options;
using stormguard::test_support::get;
using stormguard::test_support::http_test_server;
using stormguard::test_support::post;
using stormguard::test_support::scripted_response;
using stormguard::test_support::status;
using steady = std::chrono::steady_clock;
using action = scripted_response::action;

using stormguard::test_support::run_until;

// Performs `req` and runs `io` until it completes.
result perform(asio::io_context& io, async_client& client, request req,
               const stormguard::call_options& call = {}) {
  std::optional<result> got;
  client.async_perform(std::move(req), call, [&](result r) { got = std::move(r); });
  run_until(io, [&] { return got.has_value(); });
  return got ? std::move(*got) : result{};
}

TEST(AsyncClient, RetriesTwo503sThenSucceedsInThreeAttempts) {
  http_test_server server;
  server.script({status(503), status(503), status(200)});
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  const result r = perform(io, client, get(server));
  EXPECT_EQ(r.reason, end_reason::success);
  EXPECT_EQ(r.attempts, 3);
  ASSERT_TRUE(r.response);
  EXPECT_EQ(r.response->status, 200);
  EXPECT_EQ(r.response->body, "status 200");
  EXPECT_EQ(server.requests().size(), 3U);
  EXPECT_EQ(client.in_flight(), 0U);
}

TEST(AsyncClient, DoesNotRetry500AndKeepsTheResponse) {
  http_test_server server;
  server.script({status(500)});
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  const result r = perform(io, client, get(server));
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(r.attempts, 1);
  ASSERT_TRUE(r.response);
  EXPECT_EQ(r.response->status, 500);
}

TEST(AsyncClient, RetryAfterIsParsedAndOneAboveTheMaximumEndsAtOnce) {
  http_test_server server;
  scripted_response busy = status(429);
  busy.headers.emplace_back("Retry-After", "120");
  server.script({busy});
  asio::io_context io;
  client_options options = fast_options();
  std::vector<stormguard::http::attempt_info> seen;
  options.on_attempt = [&](const stormguard::http::attempt_info& a) { seen.push_back(a); };
  async_client client(io.get_executor(), options);
  const result r = perform(io, client, get(server));
  EXPECT_EQ(r.reason, end_reason::retry_after_too_long);
  EXPECT_EQ(r.attempts, 1);
  ASSERT_EQ(seen.size(), 1U);
  EXPECT_EQ(seen[0].retry_after, "120");
  EXPECT_EQ(seen[0].retry_after_delay, std::chrono::seconds(120));
}

TEST(AsyncClient, KeyedPostIsRetriedWithTheSameKeyAndBody) {
  http_test_server server;
  server.script({status(503), status(503), status(201)});
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  const result r = perform(io, client, post(server, key::generate()));
  EXPECT_EQ(r.reason, end_reason::success);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3U);
  ASSERT_TRUE(r.idempotency_key);
  for (const auto& q : requests) {
    EXPECT_EQ(q.method, "POST");
    EXPECT_EQ(q.body, R"({"amount":100})");
    EXPECT_EQ(q.header("Idempotency-Key"), *r.idempotency_key);
  }
}

TEST(AsyncClient, PostWithoutKeyIsNeverRetried) {
  http_test_server server;
  server.script({status(503), status(200)});
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  const result r = perform(io, client, post(server));
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(server.count("POST"), 1U);
}

TEST(AsyncClient, ResetAfterTheRequestWasReadIsRetriedForGetButNotForAnUnkeyedPost) {
  http_test_server server;
  scripted_response reset;
  reset.what = action::reset;
  server.script({reset, status(200)});
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  const result got = perform(io, client, get(server));
  EXPECT_EQ(got.reason, end_reason::success);
  EXPECT_EQ(got.attempts, 2);

  server.script({reset, status(200)});
  const result posted = perform(io, client, post(server));
  EXPECT_EQ(posted.reason, end_reason::not_retryable);
  EXPECT_EQ(posted.attempts, 1);
  ASSERT_TRUE(posted.error);
  EXPECT_EQ(posted.error->kind, failure_kind::transport);
  EXPECT_EQ(server.count("POST"), 1U);
}

TEST(AsyncClient, ServerThatNeverAnswersHitsTheAttemptTimeoutOnEveryAttempt) {
  http_test_server server;
  server.set_fallback(delayed(10s));
  asio::io_context io;
  client_options options = fast_options();
  options.retry.max_retries = 1;
  options.attempt_timeout = 100ms;
  async_client client(io.get_executor(), options);
  const auto start = steady::now();
  const result r = perform(io, client, get(server));
  EXPECT_LT(steady::now() - start, 2s);
  EXPECT_EQ(r.reason, end_reason::attempts_exhausted);
  EXPECT_EQ(r.attempts, 2);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->curl_code, CURLE_OPERATION_TIMEDOUT);
}

TEST(AsyncClient, DeadlineCutsTheAttemptAndEndsTheCall) {
  http_test_server server;
  server.set_fallback(delayed(10s));
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  const auto start = steady::now();
  const result r =
      perform(io, client, get(server), {.deadline = stormguard::real_clock{}.now() + 150ms});
  EXPECT_LT(steady::now() - start, 1s);
  EXPECT_EQ(r.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(r.attempts, 1);
}

TEST(AsyncClient, CancellationDuringTheWaitEndsItAtOnceWithoutAnotherAttempt) {
  http_test_server server;
  server.script({status(503)});
  asio::io_context io;
  asio::cancellation_signal cancel;
  client_options options = fast_options();
  options.retry.backoff = {.base = 10s, .cap = 10s, .jitter = stormguard::jitter::none};
  // Reported just before the 10 s wait starts: the emit posted here runs during the wait.
  options.on_attempt = [&](const stormguard::http::attempt_info& a) {
    if (a.delay) asio::post(io, [&] { cancel.emit(asio::cancellation_type::terminal); });
  };
  async_client client(io.get_executor(), options);
  std::optional<result> got;
  const auto start = steady::now();
  client.async_perform(get(server), asio::bind_cancellation_slot(
                                        cancel.slot(), [&](result r) { got = std::move(r); }));
  run_until(
      io, [&] { return got.has_value(); }, 5s);
  ASSERT_TRUE(got);
  EXPECT_LT(steady::now() - start, 1s);
  EXPECT_EQ(got->reason, end_reason::cancelled);
  EXPECT_EQ(got->attempts, 1);
  EXPECT_EQ(server.requests().size(), 1U);
}

TEST(AsyncClient, CancellationDuringTheTransferClosesTheConnectionAtOnce) {
  http_test_server server;
  server.set_fallback(delayed(10s));
  asio::io_context io;
  asio::cancellation_signal cancel;
  async_client client(io.get_executor(), fast_options());
  std::optional<result> got;
  client.async_perform(get(server), asio::bind_cancellation_slot(
                                        cancel.slot(), [&](result r) { got = std::move(r); }));
  run_until(
      io, [&] { return server.requests().size() == 1; }, 5s);
  const auto cancelled_at = steady::now();
  cancel.emit(asio::cancellation_type::terminal);
  run_until(
      io, [&] { return got.has_value(); }, 5s);
  EXPECT_LT(steady::now() - cancelled_at, 100ms);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->reason, end_reason::cancelled);
  EXPECT_EQ(got->attempts, 1);
  ASSERT_TRUE(got->error);
  EXPECT_EQ(got->error->kind, failure_kind::cancelled);
  const auto until = steady::now() + 2s;
  while (server.hang_ups() == 0 && steady::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.hang_ups(), 1) << "the server saw the connection close";
  EXPECT_EQ(server.requests().size(), 1U) << "no attempt after the cancellation";
}

TEST(AsyncClient, ThousandConcurrentRequestsHalfFailing503AllEndWithinTheBudget) {
  http_test_server server;
  std::vector<scripted_response> script;
  for (int i = 0; i < 1'000; ++i) script.push_back(status(i % 2 == 0 ? 503 : 200));
  server.script(std::move(script));
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  int ended = 0;
  int ok = 0;
  int budget_exhausted = 0;
  for (int i = 0; i < 1'000; ++i) {
    client.async_perform(get(server), [&](result r) {
      ++ended;
      ok += r.ok() ? 1 : 0;
      budget_exhausted += r.reason == end_reason::budget_exhausted ? 1 : 0;
    });
  }
  EXPECT_EQ(client.in_flight(), 1'000U);
  run_until(
      io, [&] { return ended == 1'000; }, 60s);
  EXPECT_EQ(ended, 1'000);
  EXPECT_EQ(client.in_flight(), 0U);
  // The host's ratio budget: 10 % of 1,000 requests plus the floor's reserve of 10/s x 10 s.
  const std::size_t sent = server.requests().size();
  EXPECT_LE(sent, 1'000U + 200U);
  EXPECT_EQ(static_cast<std::size_t>(ok), 1'000U - static_cast<std::size_t>(budget_exhausted));
  EXPECT_GT(budget_exhausted, 0);
  EXPECT_LE(client.easy_handles(), 1'000U);
}

// 600 in flight take three of the client's libcurl multi handles (256 transfers each at most);
// the next round of 600 reuses every connection of the first.
TEST(AsyncClient, SixHundredInFlightReuseTheirConnectionsInTheNextRound) {
  http_test_server server;
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  const auto round = [&] {
    int ended = 0;
    int ok = 0;
    for (int i = 0; i < 600; ++i) {
      client.async_perform(get(server), [&](result r) {
        ++ended;
        ok += r.ok() && r.attempts == 1 ? 1 : 0;
      });
    }
    run_until(
        io, [&] { return ended == 600; }, 60s);
    EXPECT_EQ(ok, 600);
  };
  round();
  const int opened = server.connections();
  EXPECT_LE(opened, 600);
  round();
  EXPECT_EQ(server.connections(), opened);
  EXPECT_EQ(client.easy_handles(), 600U);
  EXPECT_EQ(client.in_flight(), 0U);
}

TEST(AsyncClient, DestructionWithRequestsInFlightCallsNoHandlerAndClosesTheConnections) {
  http_test_server slow;
  slow.set_fallback(delayed(10s));
  http_test_server failing;
  failing.set_fallback(status(503));
  asio::io_context io;
  client_options options = fast_options();
  options.retry.backoff = {.base = 10s, .cap = 10s, .jitter = stormguard::jitter::none};
  int waiting = 0;
  options.on_attempt = [&](const stormguard::http::attempt_info& a) { waiting += a.delay ? 1 : 0; };
  int called = 0;
  {
    async_client client(io.get_executor(), options);
    for (int i = 0; i < 5; ++i) client.async_perform(get(slow), [&](result) { ++called; });
    for (int i = 0; i < 5; ++i) client.async_perform(get(failing), [&](result) { ++called; });
    run_until(
        io, [&] { return waiting == 5 && !slow.requests().empty(); }, 5s);
    EXPECT_EQ(client.in_flight(), 10U);
  }
  const auto start = steady::now();
  io.restart();
  io.run_for(2s);  // returns once the handlers left behind have run: nothing waits any more
  EXPECT_LT(steady::now() - start, 1s);
  EXPECT_TRUE(io.stopped());
  EXPECT_EQ(called, 0);
  const auto until = steady::now() + 2s;
  while (slow.hang_ups() == 0 && steady::now() < until) std::this_thread::sleep_for(5ms);
  EXPECT_GE(slow.hang_ups(), 1);
}

TEST(AsyncClient, ReusesOneConnectionAcrossRequests) {
  http_test_server server;
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(perform(io, client, get(server)).ok());
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(client.easy_handles(), 1U);
}

TEST(AsyncClient, InvalidRequestThrowsBeforeAnythingStarts) {
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  request bad;
  bad.method = "GET /";
  bad.url = "http://127.0.0.1:1/";
  EXPECT_THROW(client.async_perform(bad, [](result) { FAIL(); }), std::invalid_argument);
  EXPECT_EQ(client.in_flight(), 0U);
  EXPECT_THROW(async_client(io.get_executor(), {.attempt_timeout = 0s}), std::invalid_argument);
}

TEST(AsyncClient, CoroutinesAwaitResults) {
  http_test_server server;
  server.script({status(503), status(200)});
  asio::io_context io;
  async_client client(io.get_executor(), fast_options());
  std::optional<result> got;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        got = co_await client.async_perform(get(server), asio::use_awaitable);
      },
      asio::detached);
  run_until(io, [&] { return got.has_value(); });
  ASSERT_TRUE(got);
  EXPECT_EQ(got->reason, end_reason::success);
  EXPECT_EQ(got->attempts, 2);
}

}  // namespace
