// SPDX-License-Identifier: Apache-2.0
// The examples of the API reference's pages for the HTTP clients and the Asio executors (Doxygen
// `\snippet`s between `//! [name]` markers), against real servers on 127.0.0.1: the loopback test
// server of tests/support/ and plain TCP sockets. Backoff is a few milliseconds, so the file runs
// in well under a second; the assertions after each example check what its comments say.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <system_error>

#include "stormguard/asio/hedge.hpp"
#include "stormguard/asio/retry.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/http/async_client.hpp"
#include "stormguard/http/client.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "support/http_test_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::test_support::http_test_server;
using stormguard::test_support::scripted_response;

TEST(ReferenceExamples, HttpClient) {
  http_test_server server;  // answers 503, 503, then 201
  server.script({{.status = 503}, {.status = 503}, {.status = 201, .body = R"({"id":"ch_1"})"}});
  const std::string url = server.url("/charges");
  //! [http_client]
  // Up to 3 retries, backoff from 10 ms to 100 ms with full jitter, a ratio budget per host.
  stormguard::http::client client(
      {.retry = {.max_retries = 3, .backoff = {.base = 10ms, .cap = 100ms}},
       .attempt_timeout = 2s});
  // A POST is retried only with an Idempotency-Key: one key, the same on every attempt.
  const stormguard::http::result r =
      client.perform({.method = "POST",
                      .url = url,
                      .body = R"({"amount":100})",
                      .idempotency = stormguard::http::key::generate()});
  // The server answered 503 twice, then 201: r.ok(), r.attempts == 3, r.response->status == 201.
  // On failure: r.reason says why (attempts_exhausted, budget_exhausted, not_retryable, ...),
  // r.response holds the last response if there was one, r.error the last transport error.
  //! [http_client]
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.attempts, 3);
  ASSERT_TRUE(r.response.has_value());
  EXPECT_EQ(r.response->status, 201);
  EXPECT_EQ(r.response->body, R"({"id":"ch_1"})");
  std::set<std::string> keys;
  for (const auto& seen : server.requests())
    keys.insert(seen.header("Idempotency-Key").value_or(""));
  EXPECT_EQ(keys.size(), 1u);
  EXPECT_FALSE(keys.begin()->empty());
}

TEST(ReferenceExamples, HttpAsyncClient) {
  http_test_server server;  // answers 502, then 200
  server.script({{.status = 502}, {.status = 200, .body = "hello"}});
  const std::string url = server.url("/greeting");
  std::optional<stormguard::http::result> got;
  //! [http_async_client]
  asio::io_context io;
  stormguard::http::async_client client(
      io.get_executor(),
      {.retry = {.backoff = {.base = 10ms, .cap = 100ms}}, .attempt_timeout = 2s});
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        stormguard::http::request req;  // named: GCC 12 mishandles a braced temporary here
        req.url = url;
        stormguard::http::result r =
            co_await client.async_perform(std::move(req), asio::use_awaitable);
        // A 502, then 200 after one backoff wait (a timer: the thread serves other requests).
        got = std::move(r);  // r.ok(), r.attempts == 2, r.response->body == "hello"
      },
      asio::detached);
  io.run();
  //! [http_async_client]
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok());
  EXPECT_EQ(got->attempts, 2);
  ASSERT_TRUE(got->response.has_value());
  EXPECT_EQ(got->response->body, "hello");
}

TEST(ReferenceExamples, AsyncRetry) {
  asio::io_context io;
  // A service that is not up yet: its port is bound but not listening, so connects are refused.
  asio::ip::tcp::acceptor service(io);
  service.open(asio::ip::tcp::v4());
  service.bind({asio::ip::address_v4::loopback(), 0});
  const asio::ip::tcp::endpoint endpoint = service.local_endpoint();
  std::optional<stormguard::retry_result<stormguard::done_t, std::error_code>> refused, connected;
  //! [async_retry]
  stormguard::real_clock clock;
  stormguard::random_generator rng;
  stormguard::ratio_budget budget;
  stormguard::retrier retry(
      stormguard::retry_policy({.max_retries = 2, .backoff = {.base = 5ms, .cap = 20ms}}), clock,
      rng, budget);

  // One attempt: an asynchronous connect, completing with void(std::error_code).
  asio::ip::tcp::socket socket(io);
  auto connect = [&](const stormguard::attempt_context&, auto&& token) {
    socket.close();  // a fresh connection per attempt
    return socket.async_connect(endpoint, std::forward<decltype(token)>(token));
  };
  // Asio reports socket errors in its own category, which the default classifier does not
  // recognise (it would stop at once): say which errors are worth another attempt.
  auto refused_only = [](const std::error_code& ec) {
    return ec == asio::error::connection_refused;
  };
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        refused = co_await stormguard::async_retry(retry, io.get_executor(), connect, refused_only,
                                                   asio::use_awaitable);
        // Nothing listens: 3 attempts refused (a transient error), end_reason::attempts_exhausted.
        service.listen();  // the service comes up
        connected = co_await stormguard::async_retry(retry, io.get_executor(), connect,
                                                     refused_only, asio::use_awaitable);
        // connected->ok() after one attempt
      },
      asio::detached);
  io.run();
  //! [async_retry]
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->reason, stormguard::end_reason::attempts_exhausted);
  EXPECT_EQ(refused->attempts, 3);
  ASSERT_TRUE(refused->last_error.has_value());
  EXPECT_EQ(*refused->last_error, asio::error::connection_refused);
  ASSERT_TRUE(connected.has_value());
  EXPECT_TRUE(connected->ok());
  EXPECT_EQ(connected->attempts, 1);
}

TEST(ReferenceExamples, AsyncHedge) {
  std::optional<stormguard::hedge_result<int, std::exception_ptr>> got;
  //! [async_hedge]
  asio::io_context io;
  stormguard::real_clock clock;
  stormguard::random_generator rng;
  stormguard::ratio_budget budget;  // every copy after the first is charged to it
  stormguard::hedger hedge(stormguard::hedging_policy({.max_attempts = 2, .delay = 20ms}), clock,
                           rng, budget);

  // One copy of the request, as a coroutine: the first replica is slow (2 s), the second fast.
  auto fetch = [&](const stormguard::attempt_context& ctx, auto&& token) {
    return asio::co_spawn(
        io,
        [copy = ctx.attempt]() -> asio::awaitable<int> {
          asio::steady_timer replica(co_await asio::this_coro::executor, copy == 1 ? 2s : 1ms);
          co_await replica.async_wait(asio::use_awaitable);
          co_return copy;
        },
        std::forward<decltype(token)>(token));
  };
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        got =
            co_await stormguard::async_hedge(hedge, io.get_executor(), fetch, asio::use_awaitable);
      },
      asio::detached);
  io.run();
  // The second copy went out 20 ms after the first and won (*got->value == 2,
  // got->report.winner == 2); the first was cancelled (got->report.cancelled == 1), so the call
  // took about 21 ms, not 2 s.
  //! [async_hedge]
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok());
  EXPECT_EQ(*got->value, 2);
  EXPECT_EQ(got->report.winner, 2);
  EXPECT_EQ(got->report.sent, 2);
  EXPECT_EQ(got->report.cancelled, 1);
}

}  // namespace
