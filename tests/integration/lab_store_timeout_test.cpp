// SPDX-License-Identifier: Apache-2.0
// Charges queued behind a store call that timed out fail at once: lab::server
// in process, on real sockets, in front of a real Redis 7 that is stopped (SIGSTOP: it accepts
// connections and never answers, as a hung server does). The first charge waits for the store's
// timeout (redis_options::timeout, 2 s); the two queued behind it are answered 503 + Retry-After
// right after it, not after a timeout each.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "support/raw_http.hpp"
#include "support/redis_server.hpp"

namespace {

namespace lab = stormguard::lab;
using stormguard::test_support::raw_connection;
using stormguard::test_support::raw_response;
using clock_type = std::chrono::steady_clock;

std::string charge(const std::string& key) {
  const std::string body = R"({"amount": 100, "currency": "eur"})";
  return "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: " + key +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(LabStoreTimeout, ChargesQueuedBehindATimedOutStoreCallFailAtOnce) {
  stormguard::test_support::redis_server redis;  // ours: we stop it
  auto started = lab::server::start(
      *stormguard::sim::builtin_scenario("no-incident"),
      {.payments = lab::payments_options{.idempotency = "redis:" + redis.url()}});
  ASSERT_TRUE(started) << started.error();
  const std::unique_ptr<lab::server> srv = *std::move(started);
  {
    raw_connection warm(srv->port());  // the store's connection is open before it stops
    ASSERT_TRUE(warm.send(charge("warm")));
    ASSERT_EQ(warm.read_response().status, 201);
  }
  ASSERT_EQ(::kill(redis.pid(), SIGSTOP), 0);
  std::vector<std::unique_ptr<raw_connection>> charges;
  const auto sent = clock_type::now();
  for (int i = 0; i < 3; ++i) {  // queued one behind the other at the store's worker
    charges.push_back(std::make_unique<raw_connection>(srv->port()));
    ASSERT_TRUE(charges.back()->send(charge("queued-" + std::to_string(i))));
  }
  std::vector<double> answered_s;
  for (auto& c : charges) {
    const raw_response r = c->read_response(false, std::chrono::milliseconds(15000));
    answered_s.push_back(std::chrono::duration<double>(clock_type::now() - sent).count());
    EXPECT_EQ(r.status, 503) << r.head << r.body;
    EXPECT_EQ(r.field("Retry-After"), "1") << r.head;
  }
  ::kill(redis.pid(), SIGCONT);
  ASSERT_EQ(answered_s.size(), 3U);
  // The first waits for the timeout (2 s); the others follow at once, not 2 s apart each.
  EXPECT_GE(answered_s[0], 1.5);
  EXPECT_LT(answered_s[2] - answered_s[0], 1.0) << "answered after " << answered_s[0] << ", "
                                                << answered_s[1] << ", " << answered_s[2] << " s";
  EXPECT_EQ(srv->stats().charges_unavailable, 3);
}

}  // namespace
