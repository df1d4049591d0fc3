// SPDX-License-Identifier: Apache-2.0
// The retry state the HTTP clients exchange with a server (stormguard/retry_headers.hpp), against
// a real HTTP/1.1 server on 127.0.0.1: every attempt says which attempt it is
// (x-envoy-attempt-count) and how long its caller waits (grpc-timeout), and the clients honour
// grpc-retry-pushback-ms as gRFC A6 does (negative or unparsable: stop, end reason
// server_refused; non-negative: a minimum delay). Sync and async clients.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "stormguard/http/async_client.hpp"
#include "stormguard/http/client.hpp"
#include "stormguard/retry_headers.hpp"
#include "support/http_requests.hpp"
#include "support/http_test_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::end_reason;
using stormguard::http::client;
using stormguard::test_support::fast_options;
using stormguard::test_support::get;
using stormguard::test_support::http_test_server;
using stormguard::test_support::status;
using stormguard::test_support::status_with;

TEST(HttpRetryState, EveryAttemptSaysItsNumberAndItsTimeout) {
  http_test_server server;
  server.script({status(503), status(503), status(200)});
  client c(fast_options());  // attempt_timeout 2 s, no deadline
  const auto r = c.perform(get(server));
  ASSERT_EQ(r.reason, end_reason::success);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3U);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].header("x-envoy-attempt-count"), std::to_string(i + 1));
    const auto timeout = requests[i].header("grpc-timeout");
    ASSERT_TRUE(timeout);
    const auto parsed = stormguard::parse_grpc_timeout(*timeout);
    ASSERT_TRUE(parsed) << *timeout;
    EXPECT_EQ(*parsed, 2s);  // the attempt's time-out: 2 s, no deadline closer
  }
}

TEST(HttpRetryState, AClientToldNotToSendsNeitherItsNumberNorItsTimeout) {
  http_test_server server;
  server.script({status(503), status(200)});
  auto options = fast_options();
  options.send_attempt_count = false;
  options.send_timeout = false;
  client c(options);
  ASSERT_EQ(c.perform(get(server)).reason, end_reason::success);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2U);
  for (const auto& r : requests) {
    EXPECT_FALSE(r.header("x-envoy-attempt-count"));
    EXPECT_FALSE(r.header("grpc-timeout"));
  }
  // Each one alone.
  options.send_timeout = true;
  client numbered_not(options);
  ASSERT_EQ(numbered_not.perform(get(server)).reason, end_reason::success);
  EXPECT_FALSE(server.requests().back().header("x-envoy-attempt-count"));
  EXPECT_TRUE(server.requests().back().header("grpc-timeout"));
}

TEST(HttpRetryState, AClientThatReusesNoConnectionOpensOnePerAttempt) {
  http_test_server server;
  server.script({status(503), status(503), status(200), status(200)});
  auto options = fast_options();
  options.reuse_connections = false;
  client c(options);
  ASSERT_EQ(c.perform(get(server)).reason, end_reason::success);
  ASSERT_EQ(c.perform(get(server)).reason, end_reason::success);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 4U);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].connection, static_cast<int>(i + 1));
  }
  // The default keeps one connection for all of them.
  http_test_server kept;
  kept.script({status(503), status(200), status(200)});
  client reusing(fast_options());
  ASSERT_EQ(reusing.perform(get(kept)).reason, end_reason::success);
  ASSERT_EQ(reusing.perform(get(kept)).reason, end_reason::success);
  EXPECT_EQ(kept.connections(), 1);
}

TEST(HttpRetryState, TheTimeoutIsTheTimeLeftBeforeTheDeadline) {
  http_test_server server;
  client c(fast_options());
  stormguard::call_options call;
  call.deadline = stormguard::real_clock().now() + 500ms;
  const auto r = c.perform(get(server), call);
  ASSERT_EQ(r.reason, end_reason::success);
  const auto timeout = server.requests().at(0).header("grpc-timeout");
  ASSERT_TRUE(timeout);
  const auto parsed = stormguard::parse_grpc_timeout(*timeout);
  ASSERT_TRUE(parsed) << *timeout;
  EXPECT_LE(*parsed, 500ms);
  EXPECT_GT(*parsed, 0ms);
}

TEST(HttpRetryState, DoNotRetryPushbackEndsTheCallAsServerRefused) {
  for (const char* value : {"-1", "garbage", ""}) {
    http_test_server server;
    server.script({status_with(503, "grpc-retry-pushback-ms", value), status(200)});
    client c(fast_options());
    const auto r = c.perform(get(server));
    EXPECT_EQ(r.reason, end_reason::server_refused) << value;
    EXPECT_EQ(r.attempts, 1) << value;
    EXPECT_EQ(server.requests().size(), 1U) << value;
  }
}

// A pushback beyond the int64 range of milliseconds saturates, and the client's max_retry_after
// then ends the call at once: never a wrapped (negative or tiny) delay that would retry sooner.
TEST(HttpRetryState, AHugePushbackEndsTheCallAsRetryAfterTooLong) {
  for (const char* value : {"99999999999999999999999", "9223372036854775807"}) {
    http_test_server server;
    server.script({status_with(503, "grpc-retry-pushback-ms", value), status(200)});
    client c(fast_options());
    const auto r = c.perform(get(server));
    EXPECT_EQ(r.reason, end_reason::retry_after_too_long) << value;
    EXPECT_EQ(r.attempts, 1) << value;
    EXPECT_EQ(server.requests().size(), 1U) << value;
  }
}

TEST(HttpRetryState, ANonNegativePushbackIsAMinimumDelay) {
  http_test_server server;
  server.script({status_with(503, "grpc-retry-pushback-ms", "60"), status(200)});
  client c(fast_options());  // its own backoff: at most 5 ms
  const auto r = c.perform(get(server));
  ASSERT_EQ(r.reason, end_reason::success);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2U);
  EXPECT_GE(requests[1].received - requests[0].received, 60ms);
}

TEST(HttpRetryState, TheAsyncClientSendsTheFieldsAndHonoursThePushback) {
  http_test_server server;
  server.script({status(503), status_with(503, "grpc-retry-pushback-ms", "-1"), status(200)});
  asio::io_context io;
  stormguard::http::async_client c(io.get_executor(), fast_options());
  std::optional<stormguard::http::result> got;
  c.async_perform(get(server), {}, [&](stormguard::http::result r) { got = std::move(r); });
  for (int i = 0; i < 500 && !got; ++i) io.run_for(10ms);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->reason, end_reason::server_refused);
  EXPECT_EQ(got->attempts, 2);
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2U);
  EXPECT_EQ(requests[0].header("x-envoy-attempt-count"), "1");
  EXPECT_EQ(requests[1].header("x-envoy-attempt-count"), "2");
  EXPECT_TRUE(requests[1].header("grpc-timeout"));
}

}  // namespace
