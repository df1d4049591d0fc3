// SPDX-License-Identifier: Apache-2.0
// A small HTTP server (standalone Asio) with stormguard::admission in front of its handler: a
// retry the server's budget cannot afford is answered 503 with `grpc-retry-pushback-ms: -1` (do
// not retry) before any work, and a request whose caller's deadline (grpc-timeout) has passed is
// never started. The program then plays a client against itself on 127.0.0.1 and checks the
// answers: exit 0 when the server behaved as described.
#include <asio.hpp>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "stormguard/admission/defences.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/retry_headers.hpp"

namespace {

using asio::ip::tcp;

// `c` with A-Z mapped to a-z, every other byte unchanged (no locale).
constexpr char lower_ascii(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
}

// The value of header `name` (lower case) in an HTTP/1.1 request head, if present: the names are
// compared case-insensitively in place (no copy), the value is a view into `head`.
std::optional<std::string_view> header(std::string_view head, std::string_view name) {
  std::size_t line = head.find("\r\n");
  while (line != std::string_view::npos && line + 2 < head.size()) {
    const std::size_t start = line + 2;
    const std::size_t end = head.find("\r\n", start);
    const std::string_view field = head.substr(start, end - start);
    const std::size_t colon = field.find(':');
    if (colon != std::string_view::npos && colon == name.size()) {
      bool same = true;
      for (std::size_t i = 0; i < colon; ++i) {
        same = same && lower_ascii(field[i]) == name[i];
      }
      if (same) {  // the value without the optional white space around it (RFC 9110 §5.5)
        std::string_view value = field.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
          value.remove_prefix(1);
        }
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) {
          value.remove_suffix(1);
        }
        return value;
      }
    }
    line = end;
  }
  return std::nullopt;
}

// The server: admission first, then the handler (here: "hello").
void serve(tcp::acceptor& acceptor, int requests) {
  stormguard::real_clock clock;
  // A budget with no floor, so that the example's one retry is refused: 10 % of first attempts.
  stormguard::admission::retry_admission admission({.ratio = 0.1, .min_retries_per_second = 0});
  for (int i = 0; i < requests; ++i) {
    tcp::socket socket = acceptor.accept();
    std::string head;
    asio::error_code ec;
    asio::read_until(socket, asio::dynamic_buffer(head), "\r\n\r\n", ec);
    if (ec) continue;
    const stormguard::time_point now = clock.now();
    const auto attempt =
        stormguard::parse_attempt(header(head, stormguard::k_attempt_count_header),
                                  header(head, stormguard::k_previous_attempts_header));
    const auto timeout = header(head, stormguard::k_grpc_timeout_header);
    const auto deadline = stormguard::admission::deadline_of(
        now, timeout ? stormguard::parse_grpc_timeout(*timeout) : std::nullopt);
    // Decide (drop-expired, then the retry budget), then answer as reply_for says.
    using stormguard::admission::outcome;
    const outcome decided = stormguard::admission::expired(now, deadline) ? outcome::expired
                            : admission.admit(now, attempt)               ? outcome::served
                                                                          : outcome::retry_refused;
    const stormguard::admission::reply r = stormguard::admission::reply_for(decided);
    std::string response =
        "HTTP/1.1 " + std::to_string(r.status) + " " + std::string(r.reason_phrase) + "\r\n";
    if (r.do_not_retry) {
      response +=
          std::string(stormguard::k_pushback_header) + ": " + std::string(r.pushback) + "\r\n";
    }
    const std::string body = decided == outcome::served ? "hello" : std::string(r.body);
    response += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    response += body;
    asio::write(socket, asio::buffer(response), ec);
  }
}

// One request with `fields`; returns the status line and the pushback, if any.
std::string call(unsigned short port, const std::string& fields) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port));
  const std::string request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + "\r\n";
  asio::write(socket, asio::buffer(request));
  std::string answer;
  asio::error_code ec;
  asio::read(socket, asio::dynamic_buffer(answer), ec);  // until the server closes
  std::string out = answer.substr(0, answer.find("\r\n"));
  if (const auto p = header(answer, stormguard::k_pushback_header)) {
    out += " pushback " + std::string(*p);
  }
  return out;
}

}  // namespace

int main() {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const unsigned short port = acceptor.local_endpoint().port();
  std::thread server([&] { serve(acceptor, 4); });

  const std::string first = call(port, "x-envoy-attempt-count: 1\r\ngrpc-timeout: 1S\r\n");
  const std::string retry = call(port, "x-envoy-attempt-count: 2\r\n");
  const std::string hostile = call(port, "x-envoy-attempt-count: -1\r\n");
  const std::string expired = call(port, "grpc-timeout: 0m\r\n");
  server.join();

  std::printf("first attempt:      %s\n", first.c_str());
  std::printf("retry:              %s\n", retry.c_str());
  std::printf("hostile attempt -1: %s\n", hostile.c_str());
  std::printf("deadline passed:    %s\n", expired.c_str());
  const bool ok = first == "HTTP/1.1 200 OK" &&
                  retry == "HTTP/1.1 503 Service Unavailable pushback -1" &&
                  hostile == "HTTP/1.1 503 Service Unavailable pushback -1" &&
                  expired == "HTTP/1.1 503 Service Unavailable pushback -1";
  return ok ? 0 : 1;
}
