// SPDX-License-Identifier: Apache-2.0
// Back-pressure in stormguard::lab::server (server_limits read_ahead_bytes, write_timeout,
// max_unsent_bytes; docs/lab.md "Limits"), on raw loopback sockets whose clients pipeline
// requests and never read the answers: the server stops reading such a connection, closes it
// after write_timeout, and refuses new requests while the answers not yet sent, all connections
// together, exceed max_unsent_bytes. Real time with short limits; each test < 3 s.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "support/lab_scenarios.hpp"
#include "support/raw_http.hpp"
#include "test_util.hpp"

namespace {

namespace lab = stormguard::lab;
namespace sim = stormguard::sim;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

using stormguard::test_support::tiny_scenario;

// A non-blocking client socket with a small receive buffer (4 KiB, set before connect: the
// window the server may fill), which never reads.
struct deaf_client {
  stormguard::test_support::raw_connection connection;
  int fd;
  explicit deaf_client(std::uint16_t port) : connection(port, 4096), fd(connection.fd()) {}

  // Pipelines `request` as fast as the socket takes it, for at most `limit` or until nothing
  // more was taken for `stall` (the server stopped reading), or the server closed. Bytes sent.
  std::size_t pipeline(const std::string& request, milliseconds limit, milliseconds stall,
                       bool* closed = nullptr) const {
    std::string burst;
    for (int i = 0; i < 64; ++i) burst += request;
    std::size_t sent = 0;
    const auto until = clock_type::now() + limit;
    auto last_progress = clock_type::now();
    if (closed != nullptr) *closed = false;
    while (clock_type::now() < until && clock_type::now() - last_progress < stall) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 10) <= 0) continue;
      if ((p.revents & (POLLERR | POLLHUP)) != 0) {
        if (closed != nullptr) *closed = true;
        break;
      }
      const ssize_t n = ::send(fd, burst.data(), burst.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        last_progress = clock_type::now();
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        if (closed != nullptr) *closed = true;
        break;
      }
    }
    return sent;
  }
};

// How long the server may take to fill the kernel's buffers with answers and act on the limit: a
// sanitized build answers several times slower than the release build the figures are for.
#ifdef STORMGUARD_TEST_SANITIZED
constexpr milliseconds k_slack{8000};
#else
constexpr milliseconds k_slack{2000};
#endif

// Whether `done()` holds within `limit`, polled every 10 ms (the server's loop runs beside).
template <class Done>
bool eventually(Done done, milliseconds limit) {
  const auto until = clock_type::now() + limit;
  while (!done()) {
    if (clock_type::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

std::unique_ptr<lab::server> start(const lab::server_limits& limits) {
  lab::server_options o;
  o.limits = limits;
  auto started = lab::server::start(tiny_scenario(), o);
  EXPECT_TRUE(started) << (started ? "" : started.error());
  return started ? *std::move(started) : nullptr;
}

const std::string k_stats = "GET /stats HTTP/1.1\r\nHost: x\r\n\r\n";

TEST(LabBackpressure, AClientThatPipelinesAndNeverReadsIsNoLongerRead) {
  auto srv = start({});
  ASSERT_TRUE(srv);
  deaf_client c(srv->port());
  ASSERT_GE(c.fd, 0);
  // Before back-pressure the server read (and kept) every byte: 35 MB/s from one process.
  const std::size_t sent = c.pipeline(k_stats, milliseconds(2000), milliseconds(300));
  // What the client could send: the server's read-ahead (64 KiB) and the two kernel buffers.
  EXPECT_LT(sent, std::size_t{16} << 20) << "the server kept reading";
  // The answers to what it read fill the kernel's buffers; then one waits in the server.
  EXPECT_TRUE(eventually([&] { return srv->stats().unsent_bytes > 0; }, k_slack))
      << "an answer waits for the client";
  const lab::server_stats s = srv->stats();
  EXPECT_LE(s.unsent_bytes, 4096) << "one answer at a time per connection";
  EXPECT_EQ(s.write_timeouts, 0);
}

TEST(LabBackpressure, AConnectionThatNeverReadsIsClosedAfterWriteTimeout) {
  lab::server_limits limits;
  limits.write_timeout = milliseconds(300);
  auto srv = start(limits);
  ASSERT_TRUE(srv);
  deaf_client c(srv->port());
  ASSERT_GE(c.fd, 0);
  const auto began = clock_type::now();
  bool closed = false;
  (void)c.pipeline(k_stats, k_slack + milliseconds(500), k_slack + milliseconds(500), &closed);
  const auto took = clock_type::now() - began;
  EXPECT_TRUE(closed) << "still open after the slack";
  // The buffers fill, then 300 ms pass without progress: well within the slack.
  EXPECT_LT(took, k_slack);
  EXPECT_EQ(srv->stats().write_timeouts, 1);
  EXPECT_TRUE(eventually([&] { return srv->stats().unsent_bytes == 0; }, k_slack))
      << "the closed connection's answer is freed";
  // Another client is still served.
  stormguard::test_support::raw_connection other(srv->port());
  ASSERT_TRUE(other.send(k_stats));
  EXPECT_EQ(other.read_response().status, 200);
}

TEST(LabBackpressure, NewRequestsAreRefusedWhileUnsentAnswersExceedTheBound) {
  lab::server_limits limits;
  limits.max_unsent_bytes = 65536;  // the smallest bound
  auto srv = start(limits);
  ASSERT_TRUE(srv);
  const std::string metrics = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";  // ~5 KB each
  std::vector<std::unique_ptr<deaf_client>> clients;
  const auto add_deaf_client = [&] {
    clients.push_back(std::make_unique<deaf_client>(srv->port()));
    EXPECT_GE(clients.back()->fd, 0);
    (void)clients.back()->pipeline(metrics, milliseconds(500), milliseconds(100));
  };
  // Up to 150 clients: on a loaded machine the kernel's send buffers take more before they fill.
  for (int i = 0; i < 150 && srv->stats().unsent_bytes <= 65536; ++i) add_deaf_client();
  ASSERT_GT(srv->stats().unsent_bytes, 65536) << "the deaf clients did not fill the bound";
  // A late request is refused while the bound is crossed. The kernel may take a few answers off
  // the count meanwhile (its send buffers grow): then one more deaf client tops it up.
  bool refused = false;
  for (int tries = 0; tries < 20 && !refused; ++tries) {
    if (srv->stats().unsent_bytes <= 65536) {
      add_deaf_client();
      continue;
    }
    stormguard::test_support::raw_connection late(srv->port());
    ASSERT_TRUE(late.send(k_stats));
    const auto r = late.read_response();
    if (r.status == 503) {
      EXPECT_EQ(r.field("Retry-After").value_or(""), "1");
      refused = true;
    }
  }
  EXPECT_TRUE(refused) << "no late request was refused while the unsent answers crossed the bound";
  EXPECT_GE(srv->stats().unsent_refused, 1);
  // The bound is overshot by at most the answers being written when it was crossed: one each.
  EXPECT_LT(srv->stats().unsent_bytes, 65536 + static_cast<std::int64_t>(clients.size()) * 8192);
}

}  // namespace
