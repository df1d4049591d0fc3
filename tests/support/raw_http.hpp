// SPDX-License-Identifier: Apache-2.0
// A raw HTTP/1.1 client socket for the tests of `serve`'s framing (tests/integration/): sends bytes
// exactly as given, and reads one response by its own framing (the head, then Content-Length
// bytes of body, or none for a HEAD request), so that a test sees excess bytes, a missing
// Content-Length or a connection that was closed, instead of waiting for a timer.
//
//   stormguard::test_support::raw_connection c(port);
//   ASSERT_TRUE(c.send("HEAD /stats HTTP/1.1\r\nHost: x\r\n\r\n"));
//   const auto r = c.read_response(/*head_request=*/true);
//   EXPECT_EQ(r.status, 200);
//
// Header-only. Not thread-safe (one test thread per connection).
#ifndef STORMGUARD_TESTS_SUPPORT_RAW_HTTP_HPP
#define STORMGUARD_TESTS_SUPPORT_RAW_HTTP_HPP

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace stormguard::test_support {

/// One response as read from the socket.
struct raw_response {
  int status = 0;         ///< the status code; 0 when no status line arrived
  std::string head;       ///< the status line and header fields, up to the blank line
  std::string body;       ///< Content-Length bytes (none for a HEAD request)
  bool complete = false;  ///< the head and the whole body arrived
  bool closed = false;    ///< the server closed the connection while this was read
  /// The value of the first field named `name` (case-insensitive), or nullopt.
  [[nodiscard]] std::optional<std::string> field(std::string_view name) const {
    std::size_t at = head.find("\r\n");
    while (at != std::string::npos && at + 2 < head.size()) {
      const std::size_t end = head.find("\r\n", at + 2);
      const std::string line = head.substr(at + 2, end == std::string::npos ? end : end - at - 2);
      const std::size_t colon = line.find(':');
      if (colon == name.size() &&
          std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
          })) {
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(" \t"));
        return value;
      }
      at = end;
    }
    return std::nullopt;
  }
};

/// A connected socket to 127.0.0.1:port (fd -1 on failure); closed by the destructor.
/// `receive_buffer_bytes` > 0 sets SO_RCVBUF before connecting (the window a server may fill
/// for a client that does not read).
class raw_connection {
 public:
  explicit raw_connection(std::uint16_t port, int receive_buffer_bytes = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ >= 0 && receive_buffer_bytes > 0) {
      (void)::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes,
                         sizeof receive_buffer_bytes);
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~raw_connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  [[nodiscard]] bool connected() const noexcept { return fd_ >= 0; }
  /// The socket (-1 when not connected), for a test that drives it itself.
  [[nodiscard]] int fd() const noexcept { return fd_; }

  /// Sends every byte of `data`; false when the server has closed the connection.
  bool send(std::string_view data) const {
    std::size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  /// Reads one response: its head, then Content-Length bytes of body (none when
  /// `head_request`, or without a Content-Length). Gives up after `limit` (a safety net: a
  /// server that answers returns at once); what arrived after the response stays buffered for
  /// the next call.
  raw_response read_response(bool head_request = false,
                             std::chrono::milliseconds limit = std::chrono::milliseconds(3000)) {
    raw_response r;
    const auto until = std::chrono::steady_clock::now() + limit;
    std::size_t head_end = std::string::npos;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(until)) {
        r.closed = closed_;
        r.head = std::exchange(buffer_, {});
        r.status = status_of(r.head);
        return r;
      }
    }
    r.head = buffer_.substr(0, head_end);
    buffer_.erase(0, head_end + 4);
    r.status = status_of(r.head);
    std::size_t length = 0;
    if (const auto cl = r.field("Content-Length"); cl && !head_request) {
      length = static_cast<std::size_t>(std::stoull(*cl));
    }
    while (buffer_.size() < length) {
      if (!fill(until)) break;
    }
    r.body = buffer_.substr(0, std::min(length, buffer_.size()));
    buffer_.erase(0, r.body.size());
    r.complete = r.body.size() == length;
    r.closed = closed_;
    return r;
  }

  /// Whether the server closes the connection within `limit` with no byte sent after what was
  /// read so far (`extra` receives any byte that came).
  bool closed_without_more(std::string* extra = nullptr,
                           std::chrono::milliseconds limit = std::chrono::milliseconds(3000)) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!closed_ && fill(until)) {
    }
    if (extra != nullptr) *extra = buffer_;
    return closed_ && buffer_.empty();
  }

  /// Everything that arrives until the server closes or `limit` passes (with what was buffered
  /// before); `closed` says whether the server closed.
  std::string read_all(std::chrono::milliseconds limit, bool* closed = nullptr) {
    std::string out = pending(limit);
    if (closed != nullptr) *closed = closed_;
    return out;
  }

  /// Bytes that arrived within `wait` beyond the responses read (a safety net for excess bytes).
  std::string pending(std::chrono::milliseconds wait) {
    const auto until = std::chrono::steady_clock::now() + wait;
    while (fill(until)) {
    }
    return std::exchange(buffer_, {});
  }

 private:
  static int status_of(const std::string& head) {
    if (head.size() < 12 || head.rfind("HTTP/1.", 0) != 0) return 0;
    return std::atoi(head.substr(9, 3).c_str());
  }
  // Appends what the socket has; false at the deadline or at the end of the stream.
  bool fill(std::chrono::steady_clock::time_point until) {
    while (!closed_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        closed_ = true;
        return false;
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
    return false;
  }

  int fd_ = -1;
  std::string buffer_;
  bool closed_ = false;
};

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_RAW_HTTP_HPP
