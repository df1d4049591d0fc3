// SPDX-License-Identifier: Apache-2.0
// A test-only HTTP/1.1 server on 127.0.0.1 for the integration tests of stormguard::http and
// `stormguard http`: real sockets, a real port, scripted per-request behaviour.
//
//   stormguard::test_support::http_test_server server;           // 127.0.0.1, port chosen by the
//   OS server.script({{.status = 503}, {.status = 503}, {.status = 200, .body = "ok"}});
//   ... client.perform({.url = server.url("/x")}) ...
//   EXPECT_EQ(server.requests().size(), 3U);
//
// Each request the server reads takes the next scripted_response in order; when the script is
// used up, it answers with the fallback (200 "ok" unless set_fallback says otherwise). A scripted
// response may delay its answer, or close or reset the connection after reading the request
// instead of answering. Every request read is recorded (method, target, headers, body, the
// connection it came on, when it was read): for a POST that is the side effect a duplicate
// would repeat.
//
// One thread accepts connections and serves them (keep-alive, several at once, one request at a
// time). Request bodies need Content-Length (chunked bodies are answered 501). Every wait is
// bounded (polls of at most 50 ms that re-check the stop flag); the destructor stops and joins the
// thread. Thread-safe: the accessors may be called from any thread while it serves.
#ifndef STORMGUARD_TESTS_SUPPORT_HTTP_TEST_SERVER_HPP
#define STORMGUARD_TESTS_SUPPORT_HTTP_TEST_SERVER_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "stormguard/detail/mutex.hpp"

namespace stormguard::test_support {

/// What the server does with one request.
struct scripted_response {
  /// What happens after the request was read.
  enum class action {
    respond,  ///< send the response below
    close,    ///< close the connection without a response (FIN: the client sees an empty reply)
    reset,    ///< close with SO_LINGER 0 (RST: the client sees a connection reset)
  };
  int status = 200;
  /// Extra response headers, e.g. {"Retry-After", "1"}. Content-Length is always added.
  std::vector<std::pair<std::string, std::string>> headers{};
  std::string body{};
  /// A wait before answering (or closing). It ends early when the client hangs up.
  std::chrono::milliseconds delay{0};
  action what = action::respond;
};

/// One request as the server read it.
struct recorded_request {
  std::string method;
  std::string target;                                        ///< the request target, e.g. "/x?y=1"
  std::vector<std::pair<std::string, std::string>> headers;  ///< in order, names as sent
  std::string body;
  int connection = 0;  ///< 1 for the first connection accepted, 2 for the next, ...
  std::chrono::steady_clock::time_point received;  ///< when the whole request had been read

  /// The value of the first header named `name` (case-insensitive), if any.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

class http_test_server {
 public:
  /// Binds 127.0.0.1 port 0 and starts serving. Throws std::system_error if a socket call fails.
  http_test_server();
  /// Stops the thread (within about 50 ms plus any response in progress) and closes every socket.
  ~http_test_server();

  http_test_server(const http_test_server&) = delete;
  http_test_server& operator=(const http_test_server&) = delete;

  /// The port the server listens on.
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  /// "http://127.0.0.1:<port><path>".
  [[nodiscard]] std::string url(std::string_view path = "/") const;

  /// Replaces the script: the next requests get these responses, in order.
  void script(std::vector<scripted_response> responses);
  /// The response for every request after the script is used up (default: 200 "ok").
  void set_fallback(scripted_response response);

  /// Every request read so far, oldest first.
  [[nodiscard]] std::vector<recorded_request> requests() const;
  /// How many requests with this method were read (the side effects a server would have made).
  [[nodiscard]] std::size_t count(std::string_view method) const;
  /// How many connections were accepted.
  [[nodiscard]] int connections() const noexcept { return connections_.load(); }
  /// How many delayed responses were abandoned because the client closed the connection first
  /// (a cancelled request, seen from the server).
  [[nodiscard]] int hang_ups() const noexcept { return hang_ups_.load(); }

 private:
  struct connection;
  void serve();
  // Reads what is available on `c`; handles every complete request in its buffer. False when the
  // connection must be closed.
  bool on_readable(connection& c);
  bool handle(connection& c, const std::string& head, std::string body);
  scripted_response next_response();
  // Waits up to `d`; returns false early when the peer hung up on `fd` or the server stops.
  bool wait_unless_hung_up(int fd, std::chrono::milliseconds d);

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> hang_ups_{0};
  mutable stormguard::detail::mutex mutex_;
  std::deque<scripted_response> script_ STORMGUARD_GUARDED_BY(mutex_);
  scripted_response fallback_ STORMGUARD_GUARDED_BY(mutex_){.status = 200, .body = "ok"};
  std::vector<recorded_request> requests_ STORMGUARD_GUARDED_BY(mutex_);
  std::thread thread_;
};

/// A port on 127.0.0.1 that refuses connections: bound, then closed (nothing listens on it,
/// unless another process takes it in between, which is unlikely within a test).
[[nodiscard]] std::uint16_t closed_port();

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_HTTP_TEST_SERVER_HPP
