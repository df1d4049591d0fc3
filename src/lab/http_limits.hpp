// SPDX-License-Identifier: Apache-2.0
// The limits of lab::server's HTTP connections (docs/lab.md "Limits"): what keeps `serve` up on
// a hostile network. Private to stormguard::lab; src/lab/server.cpp owns one connection_limits
// per server and calls it from its event-loop thread.
//
//   - the request head (request line and header fields): at most head_bytes, else 431 (414 for
//     the request line) and closed (framing_scan, http_framing.hpp; evhttp_set_max_headers_size
//     behind it); at most header_fields fields, else 431 (check_head);
//   - the raw bytes' framing (framing_scan): whitespace before a colon, obs-fold, Transfer-Encoding
//     in HTTP/1.0, bad chunk sizes — 400 and closed; chunk extensions accepted;
//   - framing (RFC 9112 §6): exactly one Content-Length field of decimal digits, never with
//     Transfer-Encoding, and Transfer-Encoding only "chunked" — else 400 (501 for another
//     coding) and the connection is closed (check_head);
//   - time: a request must arrive whole (head and body) within read_timeout of its first byte,
//     and a connection with nothing to read or answer is closed after idle_timeout;
//   - connections: at most max_connections at once; at the cap the connection idle the longest
//     is closed to make room, and a new one is closed at once when none is idle;
//   - accept(): on EMFILE/ENFILE (descriptors exhausted) the listener pauses for 100 ms instead
//     of spinning, and idle connections are closed to free descriptors;
//   - output (back-pressure): a connection's input is read at most read_ahead_bytes ahead of the
//     request being answered (a read high-watermark; evhttp answers one request of a connection
//     at a time, so a client that pipelines and never reads holds one answer and that much
//     input); a connection whose answer no byte of which was sent for write_timeout is closed;
//     while the answers not yet sent, all connections together, exceed max_unsent_bytes, every
//     new request is answered 503 and closed (over_unsent_limit);
//   - libevent's own log lines go to stderr at most 10 a second (the rest counted and said).
// Every limit hit is counted in server_stats (GET /stats and /metrics).
#ifndef STORMGUARD_SRC_LAB_HTTP_LIMITS_HPP
#define STORMGUARD_SRC_LAB_HTTP_LIMITS_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "lab/http_framing.hpp"
#include "stormguard/lab/server.hpp"

struct bufferevent;
struct event_base;
struct evconnlistener;
struct evhttp;
struct evhttp_request;

namespace stormguard::lab::detail {

/// The limits (stormguard/lab/server.hpp).
using http_limits = server_limits;

/// Throws std::invalid_argument naming the field of `limits` out of its range (server_limits).
void validate(const http_limits& limits);

/// Whether `path` is a spelling of a payments path that is not one: "/charges/", "//charges",
/// "/charges/x", "/ledger/" (repeated or trailing slashes, a sub-path).
[[nodiscard]] bool near_payments_path(std::string_view path);

/// What check_head found wrong with a request's header fields.
enum class head_problem : std::uint8_t {
  none,
  too_many_fields,          ///< 431
  repeated_content_length,  ///< 400: more than one Content-Length field (even equal ones)
  bad_content_length,       ///< 400: a Content-Length that is not 1*DIGIT ("+31", RFC 9112 §6.3)
  content_length_and_chunked,  ///< 400: Transfer-Encoding with Content-Length (RFC 9112 §6.1)
  unknown_transfer_coding,     ///< 501: a Transfer-Encoding other than "chunked"
};

/// The check of a request's header fields (name, value pairs in order) against `limits`.
[[nodiscard]] head_problem check_head(
    const std::vector<std::pair<std::string_view, std::string_view>>& fields,
    const http_limits& limits) noexcept;

/// The status and a one-line reason of a problem (400, 431, 501); {0, ""} for none.
[[nodiscard]] std::pair<int, std::string_view> describe(head_problem p) noexcept;

/// Counts of limit hits (each a server_stats member), called on the loop thread.
struct limit_counters {
  std::function<void()> read_timeout;   ///< a request not whole within read_timeout
  std::function<void()> idle_closed;    ///< closed after idle_timeout, or to make room
  std::function<void()> refused;        ///< a new connection closed at the cap
  std::function<void()> accept_failed;  ///< accept() failed (EMFILE, ENFILE, ...)
  /// A request refused before it reached the server: libevent answered 400/413 itself, or a
  /// framing_scan problem was answered (http_framing.hpp).
  std::function<void()> rejected_by_parser;
  std::function<void()> write_timeout;  ///< an answer not taken within write_timeout: closed
  /// The answers not yet sent changed by this many bytes (all connections together).
  std::function<void(std::int64_t)> unsent_changed;
};

/// The connection bookkeeping of one server (see the file comment). Loop thread only, but for
/// construction and destruction, which run while the loop does not.
class connection_limits {
 public:
  /// Installs itself on `http` (a bufferevent per connection) and `listener` (its error
  /// callback), and a sweep timer on `base`. All three must outlive it but for release().
  connection_limits(event_base* base, evhttp* http, evconnlistener* listener, http_limits limits,
                    limit_counters counters);
  ~connection_limits();
  connection_limits(const connection_limits&) = delete;
  connection_limits& operator=(const connection_limits&) = delete;

  /// A request was read whole (the server's request callback, first thing): its connection is
  /// no longer reading, and waits for the answer until evhttp has sent it.
  void on_request(evhttp_request* req);

  /// Whether the answers not yet sent, all connections together, exceed max_unsent_bytes.
  [[nodiscard]] bool over_unsent_limit() const noexcept;

  /// Frees the bookkeeping of connections evhttp has freed; call after evhttp_free, with the
  /// loop stopped. Idempotent.
  void release() noexcept;

  /// The limits in force (max_connections resolved).
  [[nodiscard]] const http_limits& limits() const noexcept;

  struct state;  ///< private (http_limits.cpp)

 private:
  std::unique_ptr<state> state_;
};

/// Routes libevent's log (event_set_log_callback, process-wide) to stderr at most 10 lines a
/// second, prefixed "stormguard: libevent: "; once a second the count of lines left out. Once
/// per process; thread-safe.
void install_rate_limited_libevent_log();

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_SRC_LAB_HTTP_LIMITS_HPP
