// SPDX-License-Identifier: Apache-2.0
// A keep-alive HTTP/1.1 server on 127.0.0.1 port 0 that serves every connection concurrently (an
// Asio server on its own thread), with scripted answers and delays: the shared test server
// (http_test_server.hpp) answers one request at a time, so a slow first answer would hold a
// hedged copy back. Header-only (the test support library links the core alone; Asio is
// header-only).
#ifndef STORMGUARD_TEST_SUPPORT_CONCURRENT_HTTP_SERVER_HPP
#define STORMGUARD_TEST_SUPPORT_CONCURRENT_HTTP_SERVER_HPP

#include <asio/buffers_iterator.hpp>
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
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "open_fds.hpp"

namespace stormguard::test_support {

// One scripted answer: after `delay`, `status` with `headers` and `body`.
struct reply {
  std::chrono::milliseconds delay{0};
  int status = 200;
  std::string body = "ok";
  std::string headers{};  // extra header lines, each ending in \r\n
};

// Keep-alive HTTP/1.1 on 127.0.0.1, every connection served at once; the n-th request read (from
// 0, over all connections) gets script[n] (200 "ok" past its end). Records each request's head.
class concurrent_server {
 public:
  explicit concurrent_server(std::vector<reply> script)
      : script_(std::move(script)), acceptor_(io_, {::asio::ip::address_v4::loopback(), 0}) {
    ::asio::co_spawn(io_, accept_loop(acceptor_), ::asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  // The same, listening also on each of `more` (loopback addresses such as 127.0.0.2: all of
  // 127/8 is loopback on Linux) at the same port.
  concurrent_server(std::vector<reply> script, const std::vector<std::string>& more)
      : script_(std::move(script)), acceptor_(io_, {::asio::ip::address_v4::loopback(), 0}) {
    const unsigned short port = acceptor_.local_endpoint().port();
    for (const std::string& a : more) {
      more_.push_back(std::make_unique<::asio::ip::tcp::acceptor>(
          io_, ::asio::ip::tcp::endpoint(::asio::ip::make_address(a), port)));
      ::asio::co_spawn(io_, accept_loop(*more_.back()), ::asio::detached);
    }
    ::asio::co_spawn(io_, accept_loop(acceptor_), ::asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~concurrent_server() {
    io_.stop();
    thread_.join();
  }
  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/x";
  }
  // The server's own connection sockets open now (they are descriptors of this process too).
  [[nodiscard]] int open_sockets() const noexcept { return open_.load(); }
  // This process's descriptors that are not the server's sockets: the client's. The server
  // thread closes a socket and then counts it closed, so one reading can fall between the two;
  // this reads until two readings 2 ms apart agree (at most 250 readings).
  [[nodiscard]] int client_fds() const {
    int last = open_fds() - open_sockets();
    for (int i = 0; i < 250; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const int now = open_fds() - open_sockets();
      if (now == last) return now;
      last = now;
    }
    return last;
  }
  [[nodiscard]] std::vector<std::string> heads() const {
    const std::lock_guard hold(mutex_);
    return heads_;
  }
  [[nodiscard]] unsigned short port() const { return acceptor_.local_endpoint().port(); }
  // The local address each request arrived at, in the order of heads().
  [[nodiscard]] std::vector<std::string> addresses() const {
    const std::lock_guard hold(mutex_);
    return addresses_;
  }

 private:
  ::asio::awaitable<void> accept_loop(::asio::ip::tcp::acceptor& acceptor) {
    for (;;) {
      auto [ec, socket] =
          co_await acceptor.async_accept(::asio::experimental::as_tuple(::asio::use_awaitable));
      if (ec) co_return;
      ++open_;
      ::asio::co_spawn(io_, serve(std::move(socket)), ::asio::detached);
    }
  }
  ::asio::awaitable<void> serve(::asio::ip::tcp::socket socket) {
    struct closer {
      ::asio::ip::tcp::socket& s;
      std::atomic<int>& n;
      ~closer() {
        std::error_code ignored;
        (void)s.close(ignored);
        --n;
      }
    } close_at_end{socket, open_};
    ::asio::streambuf buffer;
    ::asio::steady_timer timer(io_);
    for (;;) {
      auto [ec, n] = co_await ::asio::async_read_until(
          socket, buffer, "\r\n\r\n", ::asio::experimental::as_tuple(::asio::use_awaitable));
      if (ec) co_return;
      std::string head(::asio::buffers_begin(buffer.data()),
                       ::asio::buffers_begin(buffer.data()) + n);
      buffer.consume(n);
      std::size_t length = 0;
      if (const auto at = head.find("Content-Length: "); at != std::string::npos) {
        length = std::stoul(head.substr(at + 16));
      }
      if (buffer.size() < length) {
        auto [rec, got] = co_await ::asio::async_read(
            socket, buffer, ::asio::transfer_exactly(length - buffer.size()),
            ::asio::experimental::as_tuple(::asio::use_awaitable));
        if (rec) co_return;
      }
      buffer.consume(length);
      reply r;
      {
        const std::lock_guard hold(mutex_);
        if (heads_.size() < script_.size()) r = script_[heads_.size()];
        heads_.push_back(head);
        std::error_code ignored;
        addresses_.push_back(socket.local_endpoint(ignored).address().to_string());
      }
      if (r.delay > std::chrono::milliseconds(0)) {
        timer.expires_after(r.delay);
        (void)co_await timer.async_wait(::asio::experimental::as_tuple(::asio::use_awaitable));
      }
      const std::string out = "HTTP/1.1 " + std::to_string(r.status) + " X\r\n" + r.headers +
                              "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n" +
                              r.body;
      auto [wec, written] = co_await ::asio::async_write(
          socket, ::asio::buffer(out), ::asio::experimental::as_tuple(::asio::use_awaitable));
      if (wec) co_return;
    }
  }

  std::vector<reply> script_;
  ::asio::io_context io_;
  ::asio::ip::tcp::acceptor acceptor_;
  std::vector<std::unique_ptr<::asio::ip::tcp::acceptor>> more_;
  std::thread thread_;
  std::atomic<int> open_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> heads_;
  std::vector<std::string> addresses_;
};

// The value of header `name` in a recorded request head (the first such field; exact case),
// or nothing when the head has none.
inline std::optional<std::string> header_of(const std::string& head, const std::string& name) {
  const auto at = head.find(name + ": ");
  if (at == std::string::npos) return std::nullopt;
  const auto end = head.find("\r\n", at);
  return head.substr(at + name.size() + 2, end - at - name.size() - 2);
}

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TEST_SUPPORT_CONCURRENT_HTTP_SERVER_HPP
