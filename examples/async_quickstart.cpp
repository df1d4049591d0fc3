// SPDX-License-Identifier: Apache-2.0
// The README's asynchronous example: 100 logical requests in flight on one thread, each retried
// by stormguard::http::async_client, against a loopback server (started here, on the same
// io_context) that answers 503 to every other request. Takes no arguments; exits 0 when every
// request ended and the successes add up.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/streambuf.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "stormguard/http/async_client.hpp"

using namespace std::chrono_literals;
using asio::ip::tcp;

namespace {

int g_served = 0;  // requests answered by the server, 503s included

// One keep-alive connection of the loopback server: every other response is a 503.
asio::awaitable<void> serve(tcp::socket socket) {
  asio::streambuf buffer;
  for (;;) {
    const auto [ec, n] = co_await asio::async_read_until(
        socket, buffer, "\r\n\r\n", asio::experimental::as_tuple(asio::use_awaitable));
    if (ec) co_return;  // the client closed the connection
    buffer.consume(n);  // GET requests: no body
    const bool busy = g_served++ % 2 == 0;
    const std::string reply = busy ? "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
                                   : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    co_await asio::async_write(socket, asio::buffer(reply), asio::use_awaitable);
  }
}

asio::awaitable<void> listen(tcp::acceptor& acceptor) {
  for (;;) {
    auto [ec, socket] =
        co_await acceptor.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
    if (ec) co_return;  // closed: the example is over
    asio::co_spawn(acceptor.get_executor(), serve(std::move(socket)), asio::detached);
  }
}

struct tally {
  int ok = 0;
  int failed = 0;  // budget_exhausted: once 10 % of requests + 10/s of retries are spent
  std::function<void()> on_last;
};

// One logical request: sent, retried on 503 with backoff and jitter, awaited.
asio::awaitable<void> fetch(stormguard::http::async_client& client, std::string url,
                            tally& counts) {
  stormguard::http::request req;  // GET; a named object, not a braced temporary in co_await
  req.url = std::move(url);       // (GCC 12 mishandles those: ASan reports a bad free)
  stormguard::http::result r = co_await client.async_perform(std::move(req), asio::use_awaitable);
  ++(r.ok() ? counts.ok : counts.failed);
  if (counts.ok + counts.failed == 100) counts.on_last();
}

}  // namespace

int main() {
  asio::io_context io;
  tcp::acceptor acceptor(io, {asio::ip::address_v4::loopback(), 0});
  asio::co_spawn(io, listen(acceptor), asio::detached);
  const std::string url = "http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());

  stormguard::http::client_options options;  // 429/502/503/504, Retry-After, budgets per host
  options.retry.backoff = {.base = 5ms, .cap = 50ms};
  options.attempt_timeout = 2s;
  std::optional<stormguard::http::async_client> client;  // one thread, many calls
  client.emplace(io.get_executor(), options);

  tally counts;
  for (int i = 0; i < 100; ++i) {
    asio::co_spawn(io, fetch(*client, url + "/items/" + std::to_string(i), counts), asio::detached);
  }
  counts.on_last = [&] {  // close the server, and the client with its kept-alive connections
    acceptor.close();
    client.reset();
  };
  io.run();  // returns when every request has ended and the server is closed

  std::printf("%d of 100 requests succeeded, %d failed; the server answered %d attempts\n",
              counts.ok, counts.failed, g_served);
  return counts.ok + counts.failed == 100 && counts.ok > 0 ? 0 : 1;
}
