// SPDX-License-Identifier: Apache-2.0
// Request and response framing of stormguard::lab::server (`serve`) on raw loopback sockets, as a
// hostile client sends it (docs/lab.md "Limits"): RFC 9112 §5.1
// (whitespace before the colon), §5.2 (obs-fold), §6.1 (Transfer-Encoding with Content-Length,
// chunked in HTTP/1.0), §6.3 (a sign in Content-Length), §7.1 (chunk extensions, chunk sizes), a
// head over the limit, and HEAD answers (RFC 9110 §9.3.2: no content, GET's Content-Length). Each
// test reads whole answers by their framing (tests/support/raw_http.hpp): an answer that is late
// is a failure after 3 s, never a sleep.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "support/lab_scenarios.hpp"
#include "support/raw_http.hpp"

namespace {

namespace lab = stormguard::lab;
namespace sim = stormguard::sim;
using std::chrono::milliseconds;
using stormguard::test_support::k_ledger_token;
using stormguard::test_support::ledger_authorization;
using stormguard::test_support::raw_connection;
using stormguard::test_support::raw_response;
using stormguard::test_support::tiny_scenario;

const std::string k_body = R"({"amount": 100, "currency": "eur"})";  // 34 bytes

std::string hex_size(std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[n % 16]);
    n /= 16;
  } while (n != 0);
  return out;
}

class LabFraming : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stormguard-framing-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    srv_.reset();
    std::filesystem::remove_all(dir_);
  }
  lab::server& start(lab::server_limits limits = {}) {
    lab::server_options o;
    o.limits = limits;
    o.payments = lab::payments_options{.idempotency = "sqlite:" + (dir_ / "f.db").string(),
                                       .ledger_token = std::string(k_ledger_token)};
    auto started = lab::server::start(tiny_scenario(1, 10, milliseconds(1)), o);
    EXPECT_TRUE(started) << (started ? "" : started.error());
    srv_ = *std::move(started);
    return *srv_;
  }
  // Sends `request` on a new connection; expects `status` and then the connection closed with
  // nothing more (a request hidden in the body is never answered); no charge, no attempt.
  void expect_refused_and_closed(const std::string& request, int status) {
    raw_connection c(srv_->port());
    ASSERT_TRUE(c.send(request));
    const raw_response r = c.read_response();
    EXPECT_EQ(r.status, status) << r.head << r.body;
    std::string extra;
    EXPECT_TRUE(c.closed_without_more(&extra)) << "after the refusal: " << extra;
    EXPECT_EQ(srv_->stats().charges, 0);
    EXPECT_EQ(srv_->stats().attempts, 0);
    EXPECT_GE(srv_->stats().requests_refused, 1);
  }

  std::filesystem::path dir_;
  std::unique_ptr<lab::server> srv_;
};

// A request hidden in a body that Content-Length announces.
const std::string k_hidden = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";

// ---- RFC 9112 §5.1, §5.2: field syntax ------------------------------------------------------

TEST_F(LabFraming, WhitespaceBeforeTheColonIs400AndTheRequestHiddenInTheBodyIsNotAnswered) {
  start();
  expect_refused_and_closed(
      "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
      "Content-Length : " +
          std::to_string(k_hidden.size()) + "\r\n\r\n" + k_hidden,
      400);
}

TEST_F(LabFraming, TransferEncodingWithWhitespaceBeforeTheColonBesideContentLengthIs400) {
  start();
  expect_refused_and_closed(
      "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
      "Transfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
      400);
}

TEST_F(LabFraming, AnObsFoldedFieldIs400) {
  start();
  expect_refused_and_closed("GET /x HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n", 400);
}

TEST_F(LabFraming, AContentLengthHiddenInAnObsFoldIs400) {
  start();
  expect_refused_and_closed(
      "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
      "X-A: 1\r\n\tContent-Length: " +
          std::to_string(k_hidden.size()) + "\r\n\r\n" + k_hidden,
      400);
}

// RFC 9110 §5.1 (a field name is a token) and §5.5 (NUL, CR or another control character in a
// value: reject).
TEST_F(LabFraming, AnEmptyOrNonTokenFieldNameIs400) {
  start();
  expect_refused_and_closed("GET /stats HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", 400);
  expect_refused_and_closed("GET /stats HTTP/1.1\r\nHost: x\r\nX(a): v\r\n\r\n", 400);
}

TEST_F(LabFraming, AControlCharacterInAFieldValueIs400) {
  start();
  const char with_nul[] = "GET /stats HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n";
  expect_refused_and_closed(std::string(with_nul, sizeof with_nul - 1), 400);
  expect_refused_and_closed("GET /stats HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", 400);
  // A tab is whitespace, not a control character to refuse.
  raw_connection c(srv_->port());
  ASSERT_TRUE(c.send("GET /stats HTTP/1.1\r\nHost: x\r\nX-A: a\tb\r\n\r\n"));
  EXPECT_EQ(c.read_response().status, 200);
}

// ---- RFC 9112 §6.1, §6.3: framing -----------------------------------------------------------

TEST_F(LabFraming, TransferEncodingWithContentLengthIs400AndClosed) {
  start();
  expect_refused_and_closed(
      "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
      "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      400);
}

TEST_F(LabFraming, ChunkedInHttp10Is400AndClosedWithoutACharge) {
  start();
  expect_refused_and_closed(
      "POST /charges HTTP/1.0\r\nHost: x\r\nIdempotency-Key: k1\r\n"
      "Transfer-Encoding: chunked\r\n\r\n" +
          hex_size(k_body.size()) + "\r\n" + k_body + "\r\n0\r\n\r\n",
      400);
}

TEST_F(LabFraming, ASignInContentLengthIs400) {
  start();
  expect_refused_and_closed(
      "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
      "Content-Length: +34\r\n\r\n" +
          k_body,
      400);
}

// ---- RFC 9112 §7.1: chunked bodies ----------------------------------------------------------

TEST_F(LabFraming, AValidChunkExtensionIsAcceptedAndCharged) {
  lab::server& srv = start();
  raw_connection c(srv.port());
  ASSERT_TRUE(
      c.send("POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
             "Transfer-Encoding: chunked\r\n\r\n" +
             hex_size(k_body.size()) + ";ext=1\r\n" + k_body + "\r\n0\r\n\r\n"));
  const raw_response r = c.read_response();
  EXPECT_EQ(r.status, 201) << r.head << r.body;
  EXPECT_NE(r.body.find("\"amount\":100"), std::string::npos) << r.body;
  EXPECT_EQ(srv.stats().charges_committed, 1);
  // The connection stays usable.
  ASSERT_TRUE(c.send("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(c.read_response().status, 200);
}

TEST_F(LabFraming, AChunkedChargeWithATrailerAndPipelinedRequestsAfterItAreAnsweredInOrder) {
  lab::server& srv = start();
  raw_connection c(srv.port());
  // Two chunks (one with an extension after whitespace), a trailer field, then two requests in
  // the same packet: the scan follows the chunked body to its end and the next heads after it.
  const std::string first = k_body.substr(0, 10);
  const std::string rest = k_body.substr(10);
  ASSERT_TRUE(c.send(
      "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
      "Transfer-Encoding: chunked\r\n\r\n" +
      hex_size(first.size()) + "\r\n" + first + "\r\n" + hex_size(rest.size()) + " ;a=\"b c\"\r\n" +
      rest + "\r\n0\r\nX-Trailer: t\r\n\r\n" + "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n" +
      "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k2\r\n"
      "Content-Length: " +
      std::to_string(k_body.size()) + "\r\n\r\n" + k_body));
  const raw_response charged = c.read_response();
  EXPECT_EQ(charged.status, 201) << charged.head << charged.body;
  const raw_response stats = c.read_response();
  EXPECT_EQ(stats.status, 200) << stats.head;
  EXPECT_NE(stats.body.find("\"charges_committed\":1"), std::string::npos) << stats.body;
  const raw_response second = c.read_response();
  EXPECT_EQ(second.status, 201) << second.head << second.body;
  EXPECT_EQ(srv.stats().charges_committed, 2);
  EXPECT_EQ(srv.stats().requests_refused, 0);
}

TEST_F(LabFraming, ANegativeChunkSizeIs400) {
  start();
  expect_refused_and_closed(
      "POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k1\r\n"
      "Transfer-Encoding: chunked\r\n\r\n-1\r\n" +
          k_body + "\r\n0\r\n\r\n",
      400);
}

// ---- the head's size (docs/lab.md "Limits") ----------------------------------------------------

TEST_F(LabFraming, AHeadOverTheLimitIs431AndClosed) {
  start({.head_bytes = 4096});
  std::string filler;
  for (int i = 0; i < 64; ++i) filler += "X-Filler: " + std::string(100, 'a') + "\r\n";
  raw_connection c(srv_->port());
  (void)c.send("GET / HTTP/1.1\r\nHost: x\r\n" + filler);  // the server may close before the end
  const raw_response r = c.read_response();
  EXPECT_EQ(r.status, 431) << r.head;
  std::string extra;
  EXPECT_TRUE(c.closed_without_more(&extra)) << extra;
  EXPECT_EQ(srv_->stats().requests_refused, 1);
  EXPECT_EQ(srv_->stats().attempts, 0);
}

TEST_F(LabFraming, ARequestLineOverTheLimitIs414AndClosed) {
  start({.head_bytes = 4096});
  raw_connection c(srv_->port());
  (void)c.send("GET /" + std::string(5000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  const raw_response r = c.read_response();
  EXPECT_EQ(r.status, 414) << r.head;
  EXPECT_TRUE(c.closed_without_more());
  EXPECT_EQ(srv_->stats().requests_refused, 1);
}

TEST_F(LabFraming, AHeadJustUnderTheLimitIsServed) {
  lab::server& srv = start({.head_bytes = 4096});
  const std::string head_start = "GET /stats HTTP/1.1\r\nHost: x\r\nX-Pad: ";
  const std::string pad(4096 - head_start.size() - 4, 'p');  // "\r\n\r\n" ends it at 4096
  raw_connection c(srv.port());
  ASSERT_TRUE(c.send(head_start + pad + "\r\n\r\n"));
  EXPECT_EQ(c.read_response().status, 200);
}

// ---- HEAD (RFC 9110 §9.3.2) -------------------------------------------------------------------

TEST_F(LabFraming, HeadAnswersCarryNoBodyAndTheContentLengthOfTheGet) {
  lab::server& srv = start();
  raw_connection c(srv.port());
  ASSERT_TRUE(c.send("GET /ledger HTTP/1.1\r\nHost: x\r\n" + ledger_authorization() + "\r\n"));
  const raw_response get = c.read_response();
  ASSERT_EQ(get.status, 200);
  ASSERT_FALSE(get.body.empty());
  // HEAD then GET pipelined on the kept-alive connection: excess bytes after the HEAD answer
  // would come before the second status line.
  ASSERT_TRUE(c.send("HEAD /ledger HTTP/1.1\r\nHost: x\r\n" + ledger_authorization() +
                     "\r\nGET /ledger HTTP/1.1\r\nHost: x\r\n" + ledger_authorization() + "\r\n"));
  const raw_response head = c.read_response(/*head_request=*/true);
  EXPECT_EQ(head.status, 200) << head.head;
  EXPECT_EQ(head.field("Content-Length"), std::to_string(get.body.size())) << head.head;
  const raw_response next = c.read_response();
  EXPECT_EQ(next.status, 200) << "bytes after the HEAD answer: " << next.head;
  EXPECT_EQ(next.body, get.body);
  EXPECT_EQ(c.pending(milliseconds(50)), "");
}

TEST_F(LabFraming, HeadOfStatsOfAnErrorAndOfTheScenarioCarryNoBody) {
  lab::server& srv = start();
  raw_connection c(srv.port());
  for (const std::string target : {"/stats", "/metrics", "/charges", "/control/x", "/"}) {
    ASSERT_TRUE(c.send("HEAD " + target + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    const raw_response head = c.read_response(/*head_request=*/true);
    EXPECT_NE(head.status, 0) << target;
    EXPECT_TRUE(head.field("Content-Length").has_value()) << target << ": " << head.head;
    EXPECT_FALSE(head.closed) << target;
  }
  ASSERT_TRUE(c.send("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n"));
  const raw_response next = c.read_response();
  EXPECT_EQ(next.status, 200) << "bytes after the HEAD answers: " << next.head;
}

}  // namespace
