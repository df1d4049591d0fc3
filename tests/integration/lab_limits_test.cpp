// SPDX-License-Identifier: Apache-2.0
// The limits of stormguard::lab::server's connections (server_limits; docs/lab.md "Limits"), on
// raw loopback sockets, as a hostile client sends them: ambiguous framing (two Content-Length
// fields, Transfer-Encoding with Content-Length), too many header fields, a head over the size
// limit, a request that never ends, idle connections, the connection cap, two Idempotency-Key
// fields, paths near the payments endpoint, 405's Allow, and pipelined requests answered in
// order. Real time with short limits; each test < 2 s.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "support/lab_scenarios.hpp"
#include "support/raw_http.hpp"

namespace {

namespace lab = stormguard::lab;
namespace sim = stormguard::sim;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

using connection = stormguard::test_support::raw_connection;
using stormguard::test_support::tiny_scenario;

std::string status_line(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

const std::string k_body = R"({"amount": 100, "currency": "eur"})";

std::string charge(const std::string& extra_fields, const std::string& body = k_body,
                   const std::string& target = "/charges") {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         extra_fields + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class LabLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stormguard-limits-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    srv_.reset();
    std::filesystem::remove_all(dir_);
  }
  lab::server& start(lab::server_limits limits = {}, bool payments = true,
                     milliseconds service = milliseconds(20)) {
    lab::server_options o;
    o.limits = limits;
    if (payments)
      o.payments = lab::payments_options{.idempotency = "sqlite:" + (dir_ / "l.db").string()};
    auto started = lab::server::start(tiny_scenario(1, 10, service), o);
    EXPECT_TRUE(started) << (started ? "" : started.error());
    srv_ = *std::move(started);
    return *srv_;
  }
  std::filesystem::path dir_;
  std::unique_ptr<lab::server> srv_;
};

TEST_F(LabLimits, TwoContentLengthFieldsAre400AndCloseTheConnectionWithoutACharge) {
  lab::server& srv = start();
  connection c(srv.port());
  ASSERT_TRUE(c.send(charge("Idempotency-Key: k1\r\nContent-Length: 5\r\n")));
  bool closed = false;
  const std::string r = c.read_all(milliseconds(1500), &closed);
  EXPECT_EQ(status_line(r), "HTTP/1.1 400 Bad Request");
  EXPECT_TRUE(closed);
  EXPECT_EQ(srv.stats().charges_committed, 0);
  EXPECT_EQ(srv.stats().requests_refused, 1);
}

TEST_F(LabLimits, EqualRepeatedContentLengthFieldsAre400Too) {
  lab::server& srv = start();
  connection c(srv.port());
  ASSERT_TRUE(c.send(
      charge("Idempotency-Key: k1\r\nContent-Length: " + std::to_string(k_body.size()) + "\r\n")));
  EXPECT_EQ(status_line(c.read_all(milliseconds(1500))), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(srv.stats().charges_committed, 0);
}

TEST_F(LabLimits, TransferEncodingWithContentLengthIs400) {
  lab::server& srv = start();
  connection c(srv.port());
  ASSERT_TRUE(
      c.send("POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\nTransfer-Encoding: "
             "chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"));
  bool closed = false;
  EXPECT_EQ(status_line(c.read_all(milliseconds(1500), &closed)), "HTTP/1.1 400 Bad Request");
  EXPECT_TRUE(closed);
  EXPECT_EQ(srv.stats().charges, 0);
}

TEST_F(LabLimits, MoreHeaderFieldsThanTheLimitIs431) {
  lab::server& srv = start({.header_fields = 20});
  connection c(srv.port());
  std::string fields;
  for (int i = 0; i < 21; ++i) fields += "X-F" + std::to_string(i) + ": a\r\n";
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\n" + fields + "\r\n"));
  EXPECT_EQ(status_line(c.read_all(milliseconds(1500))),
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(srv.stats().attempts, 0);
  EXPECT_EQ(srv.stats().requests_refused, 1);
}

TEST_F(LabLimits, AHeadOverTheLimitIsRefusedAndClosedWhileStatsStillAnswers) {
  lab::server& srv = start({.head_bytes = 4096});
  connection c(srv.port());
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\n"));
  std::string filler;
  for (int i = 0; i < 64; ++i) filler += "X-Filler: " + std::string(100, 'a') + "\r\n";
  (void)c.send(filler);  // 7 KB: the server may close before it has it all
  bool closed = false;
  const std::string r = c.read_all(milliseconds(1500), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(r.rfind("HTTP/1.1 4", 0), 0u) << r;
  connection stats(srv.port());
  ASSERT_TRUE(stats.send("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(status_line(stats.read_all(milliseconds(300))), "HTTP/1.1 200 OK");
  EXPECT_EQ(srv.stats().requests_refused, 1);
  EXPECT_EQ(srv.stats().attempts, 0);
}

TEST_F(LabLimits, ARequestNotWholeWithinTheReadTimeoutIs408) {
  lab::server& srv = start({.read_timeout = milliseconds(300)});
  connection c(srv.port());
  const auto began = clock_type::now();
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\n"));  // the head never ends
  bool closed = false;
  const std::string r = c.read_all(milliseconds(1500), &closed);
  EXPECT_EQ(status_line(r), "HTTP/1.1 408 Request Timeout");
  EXPECT_TRUE(closed);
  EXPECT_LT(clock_type::now() - began, milliseconds(1000));
  EXPECT_EQ(srv.stats().read_timeouts, 1);
}

TEST_F(LabLimits, ASlowBodyIs408Too) {
  lab::server& srv = start({.read_timeout = milliseconds(300)});
  connection c(srv.port());
  ASSERT_TRUE(
      c.send("POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k\r\nContent-Length: "
             "100\r\n\r\n{\"amount\""));
  bool closed = false;
  EXPECT_EQ(status_line(c.read_all(milliseconds(1500), &closed)), "HTTP/1.1 408 Request Timeout");
  EXPECT_TRUE(closed);
  EXPECT_EQ(srv.stats().charges, 0);
}

TEST_F(LabLimits, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  lab::server& srv = start({.idle_timeout = milliseconds(300)});
  connection c(srv.port());
  ASSERT_TRUE(c.send("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  const std::string r = c.read_all(milliseconds(1500), &closed);
  EXPECT_EQ(status_line(r), "HTTP/1.1 200 OK");
  EXPECT_TRUE(closed);
  EXPECT_EQ(srv.stats().idle_closed, 1);
}

TEST_F(LabLimits, AtTheCapTheConnectionIdleTheLongestMakesRoom) {
  lab::server& srv = start({.max_connections = 4});
  std::vector<std::unique_ptr<connection>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<connection>(srv.port()));
    std::this_thread::sleep_for(milliseconds(20));  // accepted in this order
  }
  connection c(srv.port());
  ASSERT_TRUE(c.send("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(status_line(c.read_all(milliseconds(300))), "HTTP/1.1 200 OK");
  bool closed = false;
  (void)idle.front()->read_all(milliseconds(500), &closed);
  EXPECT_TRUE(closed) << "the oldest idle connection is closed";
  EXPECT_EQ(srv.stats().idle_closed, 1);
}

TEST_F(LabLimits, TwoIdempotencyKeyFieldsOrTwoKeysInOneAre400BadKey) {
  lab::server& srv = start();
  for (const std::string fields :
       {"Idempotency-Key: A1\r\nIdempotency-Key: B1\r\n", "Idempotency-Key: A1, B1\r\n"}) {
    connection c(srv.port());
    ASSERT_TRUE(c.send(charge(fields)));
    const std::string r = c.read_all(milliseconds(500));
    EXPECT_EQ(status_line(r), "HTTP/1.1 400 Bad Request") << fields;
    EXPECT_NE(r.find("\"bad_key\""), std::string::npos) << r;
  }
  EXPECT_EQ(srv.stats().charges_committed, 0);
}

TEST_F(LabLimits, PathsNearThePaymentsEndpointAre404NeverTheScenario) {
  lab::server& srv = start();
  for (const std::string target : {"/charges/", "//charges", "/charges/x", "/ledger/"}) {
    connection c(srv.port());
    ASSERT_TRUE(c.send(
        charge("Idempotency-Key: k-" + std::to_string(target.size()) + "\r\n", k_body, target)));
    EXPECT_EQ(status_line(c.read_all(milliseconds(250))), "HTTP/1.1 404 Not Found") << target;
  }
  EXPECT_EQ(srv.stats().attempts, 0);
  EXPECT_EQ(srv.stats().charges, 0);
}

TEST_F(LabLimits, A405SaysWhichMethodsAreAllowed) {
  lab::server& srv = start();
  connection c(srv.port());
  ASSERT_TRUE(c.send("POST /stats HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
  const std::string r = c.read_all(milliseconds(500));
  EXPECT_EQ(status_line(r), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_NE(r.find("Allow: GET, HEAD\r\n"), std::string::npos) << r;
}

TEST_F(LabLimits, PipelinedRequestsAreAllAnsweredInOrder) {
  lab::server& srv = start({}, true, milliseconds(30));
  connection c(srv.port());
  std::string pipeline;
  for (int i = 1; i <= 3; ++i) {
    pipeline += charge("Idempotency-Key: p" + std::to_string(i) + "\r\n",
                       R"({"amount": )" + std::to_string(i) + R"(, "currency": "eur"})");
    pipeline += "GET /x" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";  // served later
  }
  ASSERT_TRUE(c.send(pipeline));
  std::string r;
  const auto until = clock_type::now() + milliseconds(1500);
  while (count_of(r, "HTTP/1.1 ") < 6 && clock_type::now() < until) {
    r += c.read_all(milliseconds(50));
  }
  ASSERT_EQ(count_of(r, "HTTP/1.1 "), 6) << r;
  const auto a1 = r.find("\"amount\":1,");
  const auto a2 = r.find("\"amount\":2,");
  const auto a3 = r.find("\"amount\":3,");
  ASSERT_NE(a3, std::string::npos) << r;
  EXPECT_LT(a1, a2);
  EXPECT_LT(a2, a3);
  EXPECT_EQ(count_of(r, "ok\n"), 3);
  EXPECT_EQ(srv.stats().charges_committed, 3);
}

}  // namespace
