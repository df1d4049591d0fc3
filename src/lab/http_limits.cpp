// SPDX-License-Identifier: Apache-2.0
// The limits of lab::server's HTTP connections (src/lab/http_limits.hpp).
//
// How the bookkeeping follows evhttp's connections (libevent 2.1, which has no per-connection
// hooks of its own): evhttp asks us for each new connection's bufferevent (evhttp_set_bevcb); we
// keep one reference of our own on it (bufferevent_incref), so the pointer stays valid after
// evhttp frees the connection — evhttp's bufferevent_free then clears the bufferevent's callbacks,
// which is how the sweep learns that the connection is gone and drops our reference (the
// descriptor closes then). Callbacks on its input and output buffers tell when a request's
// first byte arrives and when libevent answers an error itself; the server tells on_request()
// when a request has been read whole, and evhttp's on-complete callback when its answer is out.
// A connection we close is closed with evhttp_connection_free, from the sweep's timer (never
// from inside one of its own callbacks), and only while no request of it waits for an answer
// (the server's queue holds such requests).
#include "lab/http_limits.hpp"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "stormguard/detail/http_syntax.hpp"
#include "stormguard/detail/mutex.hpp"

namespace stormguard::lab::detail {

namespace {

using stormguard::detail::equals_ignoring_case;
using stormguard::detail::to_lower_ascii;
using stormguard::detail::trim_ows;

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr std::int64_t k_sweep_ns = 250'000'000;         // the sweep's period
constexpr std::int64_t k_accept_pause_ns = 100'000'000;  // accept() paused after EMFILE
constexpr std::size_t k_descriptor_reserve = 64;

}  // namespace

void validate(const http_limits& limits) {
  const auto bad = [](const std::string& field, const std::string& why) {
    throw std::invalid_argument("server_limits." + field + ": " + why);
  };
  if (limits.head_bytes < 1024) bad("head_bytes", "must be at least 1024 bytes");
  if (limits.header_fields < 1) bad("header_fields", "must be at least 1");
  if (limits.read_timeout <= duration::zero()) bad("read_timeout", "must be > 0");
  if (limits.idle_timeout <= duration::zero()) bad("idle_timeout", "must be > 0");
  if (limits.read_ahead_bytes < limits.head_bytes) {
    bad("read_ahead_bytes", std::to_string(limits.read_ahead_bytes) +
                                ": must be at least head_bytes (" +
                                std::to_string(limits.head_bytes) + ")");
  }
  if (limits.write_timeout <= duration::zero()) bad("write_timeout", "must be > 0");
  if (limits.max_unsent_bytes < 65536) {
    bad("max_unsent_bytes", std::to_string(limits.max_unsent_bytes) + ": must be at least 65536");
  }
}

bool near_payments_path(std::string_view path) {
  std::string collapsed;
  for (const char c : path) {
    if (c == '/' && !collapsed.empty() && collapsed.back() == '/') continue;
    collapsed.push_back(c);
  }
  for (const std::string_view base : {std::string_view("/charges"), std::string_view("/ledger")}) {
    if (collapsed.starts_with(base) &&
        (collapsed.size() == base.size() || collapsed[base.size()] == '/')) {
      return true;
    }
  }
  return false;
}

head_problem check_head(const std::vector<std::pair<std::string_view, std::string_view>>& fields,
                        const http_limits& limits) noexcept {
  if (fields.size() > limits.header_fields) return head_problem::too_many_fields;
  std::size_t content_lengths = 0;
  std::size_t transfer_encodings = 0;
  bool chunked_only = true;
  for (const auto& [name, value] : fields) {
    if (equals_ignoring_case(name, "Content-Length")) {
      ++content_lengths;
      // evhttp reads it with strtoll, which takes a sign and leading spaces.
      const std::string_view digits = trim_ows(value);
      if (digits.empty() ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return head_problem::bad_content_length;
      }
    } else if (equals_ignoring_case(name, "Transfer-Encoding")) {
      ++transfer_encodings;
      if (!equals_ignoring_case(trim_ows(value), "chunked")) chunked_only = false;
    }
  }
  if (content_lengths > 1) return head_problem::repeated_content_length;
  if (transfer_encodings > 0 && content_lengths > 0) {
    return head_problem::content_length_and_chunked;
  }
  if (transfer_encodings > 1 || !chunked_only) return head_problem::unknown_transfer_coding;
  return head_problem::none;
}

std::pair<int, std::string_view> describe(head_problem p) noexcept {
  switch (p) {
    case head_problem::none:
      return {0, ""};
    case head_problem::too_many_fields:
      return {431, "too many header fields\n"};
    case head_problem::repeated_content_length:
      return {400, "Content-Length given more than once (RFC 9112 6.3)\n"};
    case head_problem::bad_content_length:
      return {400, "Content-Length must be decimal digits only (RFC 9112 6.3)\n"};
    case head_problem::content_length_and_chunked:
      return {400, "Transfer-Encoding and Content-Length together (RFC 9112 6.1)\n"};
    case head_problem::unknown_transfer_coding:
      return {501, "the only transfer coding accepted is a single \"chunked\"\n"};
  }
  return {400, "bad request\n"};
}

struct connection_limits::state {
  struct connection {
    state* owner = nullptr;
    bufferevent* bev = nullptr;
    evbuffer_cb_entry* input_cb = nullptr;
    evbuffer_cb_entry* output_cb = nullptr;
    std::int64_t last_active_ns = 0;
    std::int64_t reading_since_ns = 0;  // 0: not reading a request
    int pending = 0;                    // requests read and not yet answered
    std::size_t unsent = 0;             // bytes in its output buffer
    std::int64_t unsent_since_ns = 0;   // the last time a byte of its output was sent, or added to
                                        // an empty output
    bool parser_answer_counted = false;
    framing_scan scan{0};  // the bytes evhttp has not parsed yet (http_framing.hpp)
  };

  event_base* base = nullptr;
  evhttp* http = nullptr;
  evconnlistener* listener = nullptr;
  http_limits limits;
  limit_counters counters;
  event* sweep = nullptr;
  event* resume_accept = nullptr;
  event* refuse_event = nullptr;
  std::vector<bufferevent*> to_refuse;  // accepted at the cap: closed on the next turn
  event* framing_event = nullptr;
  std::vector<bufferevent*> bad_framing;  // a framing_scan problem: answered and closed
  std::unordered_map<bufferevent*, std::unique_ptr<connection>> connections;
  std::size_t unsent_total = 0;  // the connections' `unsent`, summed

  // The connection of a live bufferevent, nullptr when evhttp has freed it.
  static evhttp_connection* evcon_of(bufferevent* bev) noexcept {
    void* arg = nullptr;
    bufferevent_getcb(bev, nullptr, nullptr, nullptr, &arg);
    return static_cast<evhttp_connection*>(arg);
  }

  // Drops our reference on a connection evhttp has freed (or that we free now).
  void forget(std::unordered_map<bufferevent*, std::unique_ptr<connection>>::iterator it) {
    connection& c = *it->second;
    if (c.input_cb != nullptr) evbuffer_remove_cb_entry(bufferevent_get_input(c.bev), c.input_cb);
    if (c.output_cb != nullptr) {
      evbuffer_remove_cb_entry(bufferevent_get_output(c.bev), c.output_cb);
    }
    unsent_changed(c, 0);
    std::erase(to_refuse, c.bev);
    std::erase(bad_framing, c.bev);
    bufferevent_disable(c.bev, EV_READ | EV_WRITE);
    bufferevent_decref(c.bev);  // the last reference: closes the descriptor
    connections.erase(it);
  }

  // Closes a connection that waits for no answer (evhttp frees it and its request being read).
  void close(std::unordered_map<bufferevent*, std::unique_ptr<connection>>::iterator it) {
    if (evhttp_connection* evcon = evcon_of(it->first)) evhttp_connection_free(evcon);
    forget(it);
  }

  // Sets a connection's count of bytes not yet sent (its output buffer's length).
  void unsent_changed(connection& c, std::size_t now_unsent) {
    if (now_unsent == c.unsent) return;
    const auto delta = static_cast<std::int64_t>(now_unsent) - static_cast<std::int64_t>(c.unsent);
    unsent_total = unsent_total - c.unsent + now_unsent;
    c.unsent = now_unsent;
    if (counters.unsent_changed) counters.unsent_changed(delta);
  }

  [[nodiscard]] bool idle(const connection& c) const noexcept {
    return c.pending == 0 && c.reading_since_ns == 0;
  }

  // Closes up to `n` connections idle the longest; how many it closed.
  std::size_t close_idle(std::size_t n) {
    std::size_t closed = 0;
    while (closed < n) {
      auto oldest = connections.end();
      for (auto it = connections.begin(); it != connections.end(); ++it) {
        if (evcon_of(it->first) == nullptr || !idle(*it->second)) continue;
        if (oldest == connections.end() ||
            it->second->last_active_ns < oldest->second->last_active_ns) {
          oldest = it;
        }
      }
      if (oldest == connections.end()) break;
      // Counted first: whoever sees the connection end sees the count.
      if (counters.idle_closed) counters.idle_closed();
      close(oldest);
      ++closed;
    }
    return closed;
  }

  void purge_freed() {
    for (auto it = connections.begin(); it != connections.end();) {
      auto next = std::next(it);
      if (evcon_of(it->first) == nullptr) forget(it);
      it = next;
    }
  }

  static bufferevent* make_bufferevent(event_base* base, void* arg) {
    return static_cast<state*>(arg)->accepted(base);
  }

  bufferevent* accepted(event_base* b) {
    bufferevent* bev = bufferevent_socket_new(b, -1, BEV_OPT_CLOSE_ON_FREE);
    if (bev == nullptr) return nullptr;
    bool refuse = false;
    if (connections.size() >= limits.max_connections) {
      purge_freed();
      if (connections.size() >= limits.max_connections && close_idle(1) == 0) refuse = true;
    }
    auto c = std::make_unique<connection>();
    c->owner = this;
    c->bev = bev;
    c->last_active_ns = steady_ns();
    c->scan = framing_scan(limits.head_bytes);
    c->input_cb = evbuffer_add_cb(bufferevent_get_input(bev), &state::on_input, c.get());
    c->output_cb = evbuffer_add_cb(bufferevent_get_output(bev), &state::on_output, c.get());
    bufferevent_incref(bev);
    connections.emplace(bev, std::move(c));
    if (refuse) {
      // evhttp sets the connection up after this returns: close it on the next turn.
      if (counters.refused) counters.refused();
      to_refuse.push_back(bev);
      const timeval now{0, 0};
      if (refuse_event != nullptr) evtimer_add(refuse_event, &now);
    }
    return bev;
  }

  static void on_refuse(evutil_socket_t, short, void* arg) {
    auto& s = *static_cast<state*>(arg);
    for (bufferevent* bev : std::exchange(s.to_refuse, {})) {
      auto it = s.connections.find(bev);
      if (it != s.connections.end() && it->second->pending == 0) s.close(it);
    }
  }

  static void on_input(evbuffer* buffer, const evbuffer_cb_info* info, void* arg) {
    if (info->n_added == 0) return;
    auto& c = *static_cast<connection*>(arg);
    c.last_active_ns = steady_ns();
    if (c.reading_since_ns == 0 && c.pending == 0) c.reading_since_ns = c.last_active_ns;
    // The new bytes are the buffer's last n_added: evhttp parses them after this returns.
    const std::size_t length = evbuffer_get_length(buffer);
    c.owner->scan_input(c, buffer, length - std::min(length, info->n_added));
  }

  // Feeds the input from `from` to its end to the connection's framing_scan. At a problem the
  // input is dropped (evhttp never parses the rest of the request) and the connection answered
  // and closed on this turn of the loop (on_bad_framing).
  void scan_input(connection& c, evbuffer* input, std::size_t from) {
    if (!c.scan.reading()) return;  // a body, or a request waiting for its answer
    const std::size_t length = evbuffer_get_length(input);
    if (from < length) {
      evbuffer_ptr at{};
      if (evbuffer_ptr_set(input, &at, from, EVBUFFER_PTR_SET) != 0) return;
      const int n = evbuffer_peek(input, static_cast<ev_ssize_t>(length - from), &at, nullptr, 0);
      std::vector<evbuffer_iovec> extents(static_cast<std::size_t>(std::max(n, 0)));
      (void)evbuffer_peek(input, static_cast<ev_ssize_t>(length - from), &at, extents.data(), n);
      std::size_t left = length - from;
      for (const evbuffer_iovec& e : extents) {  // the last extent may run past the end
        const std::size_t take = std::min(left, e.iov_len);
        c.scan.feed(static_cast<char*>(e.iov_base), take);
        left -= take;
      }
    }
    if (c.scan.problem() == framing_problem::none) return;
    evbuffer_drain(input, evbuffer_get_length(input));
    bad_framing.push_back(c.bev);
    if (framing_event != nullptr) event_active(framing_event, EV_TIMEOUT, 0);
  }

  // Answers each connection whose framing_scan found a problem with the problem's status,
  // written straight to the socket (no request of it waits for an answer), and closes it.
  static void on_bad_framing(evutil_socket_t, short, void* arg) {
    auto& s = *static_cast<state*>(arg);
    for (bufferevent* bev : std::exchange(s.bad_framing, {})) {
      auto it = s.connections.find(bev);
      if (it == s.connections.end() || it->second->pending != 0) continue;
      if (evcon_of(bev) == nullptr) {
        s.forget(it);
        continue;
      }
      if (s.counters.rejected_by_parser) s.counters.rejected_by_parser();  // seen with the answer
      const framing_answer a = describe(it->second->scan.problem());
      const std::string answer = "HTTP/1.1 " + std::to_string(a.status) + " " +
                                 std::string(a.reason) +
                                 "\r\nConnection: close\r\nContent-Type: text/plain; "
                                 "charset=utf-8\r\nContent-Length: " +
                                 std::to_string(a.body.size()) + "\r\n\r\n" + std::string(a.body);
      if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        (void)::send(bufferevent_getfd(bev), answer.data(), answer.size(),
                     MSG_DONTWAIT | MSG_NOSIGNAL);
      }
      s.close(it);
    }
  }

  // libevent answers a request it cannot read (a head over the limit, a bad request line, a bad
  // Content-Length, a body over the limit) with an error of its own, before any request of that
  // connection reached the server: counted once per connection.
  static void on_output(evbuffer* buffer, const evbuffer_cb_info* info, void* arg) {
    auto& c = *static_cast<connection*>(arg);
    if (info->n_deleted > 0 || (info->orig_size == 0 && info->n_added > 0)) {
      c.unsent_since_ns = steady_ns();  // a byte sent, or the first of an answer written
    }
    c.owner->unsent_changed(c, evbuffer_get_length(buffer));
    if (info->n_added == 0 || info->orig_size != 0 || c.pending != 0 || c.parser_answer_counted) {
      return;
    }
    char head[10] = {};
    if (evbuffer_copyout(buffer, head, sizeof head) != static_cast<ev_ssize_t>(sizeof head)) return;
    if (std::memcmp(head, "HTTP/1.", 7) == 0 && head[9] == '4') {
      c.parser_answer_counted = true;
      if (c.owner->counters.rejected_by_parser) c.owner->counters.rejected_by_parser();
    }
  }

  static void on_complete(evhttp_request* req, void* arg) {
    (void)req;
    auto& c = *static_cast<connection*>(arg);
    c.pending = std::max(0, c.pending - 1);
    c.last_active_ns = steady_ns();
    if (c.pending == 0) {
      // Read freely again: evhttp keeps a request's body in the input until it is whole (up to
      // the body limit), so the read-ahead bound holds only while an answer is awaited.
      bufferevent_setwatermark(c.bev, EV_READ, 0, 0);
      // The next request begins with the first byte evhttp has not read (it reads it next).
      c.scan.restart();
      evbuffer* input = bufferevent_get_input(c.bev);
      c.owner->scan_input(c, input, 0);
      if (evbuffer_get_length(input) > 0) {
        c.reading_since_ns = c.last_active_ns;  // a pipelined request waits in the buffer
      }
    }
  }

  static void on_sweep(evutil_socket_t, short, void* arg) { static_cast<state*>(arg)->sweep_now(); }

  void sweep_now() {
    const std::int64_t now = steady_ns();
    const std::int64_t read_ns = limits.read_timeout.count();
    const std::int64_t idle_ns = limits.idle_timeout.count();
    const std::int64_t write_ns = limits.write_timeout.count();
    for (auto it = connections.begin(); it != connections.end();) {
      auto next = std::next(it);
      connection& c = *it->second;
      if (evcon_of(it->first) == nullptr) {
        forget(it);
      } else if (c.unsent > 0 && now - c.unsent_since_ns > write_ns) {
        // An answer its client does not take (evhttp reads nothing more from the connection
        // until it is sent): the request is evhttp's now, freed with the connection.
        if (counters.write_timeout) counters.write_timeout();
        close(it);
      } else if (c.pending == 0 && c.reading_since_ns != 0 && now - c.reading_since_ns > read_ns) {
        if (counters.read_timeout) counters.read_timeout();  // first: seen with the 408
        // RFC 9110 §15.5.9: 408, then close; written straight to the socket, as nothing else
        // is being written on it (no request waits for an answer).
        if (evbuffer_get_length(bufferevent_get_output(c.bev)) == 0) {
          static constexpr char k_408[] =
              "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
          (void)::send(bufferevent_getfd(c.bev), k_408, sizeof k_408 - 1,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
        }
        close(it);
      } else if (idle(c) && now - c.last_active_ns > idle_ns) {
        if (counters.idle_closed) counters.idle_closed();
        close(it);
      }
      it = next;
    }
  }

  // The states by their evhttp: the listener's error callback gets evhttp's argument (the
  // evhttp), not ours. A few entries a process (one per server); any thread.
  struct registry {
    stormguard::detail::mutex mutex;
    std::unordered_map<const evhttp*, state*> by_http STORMGUARD_GUARDED_BY(mutex);
  };
  static registry& listeners() {
    static registry r;
    return r;
  }

  static void on_accept_error(evconnlistener* l, void* arg) {
    const int error = EVUTIL_SOCKET_ERROR();
    state* found = nullptr;
    {
      registry& r = listeners();
      const stormguard::detail::lock hold(r.mutex);
      const auto it = r.by_http.find(static_cast<const evhttp*>(arg));
      if (it != r.by_http.end()) found = it->second;
    }
    if (found == nullptr) return;
    state& s = *found;
    if (s.counters.accept_failed) s.counters.accept_failed();
    if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
      // Out of descriptors: free some, and pause accept() rather than spin on the listener.
      s.purge_freed();
      s.close_idle(8);
      evconnlistener_disable(l);
      const timeval pause{0, static_cast<suseconds_t>(k_accept_pause_ns / 1000)};
      evtimer_add(s.resume_accept, &pause);
    }
  }

  static void on_resume_accept(evutil_socket_t, short, void* arg) {
    evconnlistener_enable(static_cast<state*>(arg)->listener);
  }
};

connection_limits::connection_limits(event_base* base, evhttp* http, evconnlistener* listener,
                                     http_limits limits, limit_counters counters)
    : state_(std::make_unique<state>()) {
  state& s = *state_;
  s.base = base;
  s.http = http;
  s.listener = listener;
  s.limits = limits;
  s.counters = std::move(counters);
  if (s.limits.max_connections == 0) {
    rlimit r{};
    std::size_t soft = 1024;
    if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
      soft = static_cast<std::size_t>(r.rlim_cur);
    } else if (r.rlim_cur == RLIM_INFINITY) {
      soft = 1 << 20;
    }
    s.limits.max_connections =
        soft > 2 * k_descriptor_reserve ? soft - k_descriptor_reserve : k_descriptor_reserve;
  }
  evhttp_set_max_headers_size(http, static_cast<ev_ssize_t>(s.limits.head_bytes));
  evhttp_set_bevcb(http, &state::make_bufferevent, &s);
  if (listener != nullptr) {
    {
      state::registry& r = state::listeners();
      const stormguard::detail::lock hold(r.mutex);
      r.by_http[http] = &s;
    }
    evconnlistener_set_error_cb(listener, &state::on_accept_error);
  }
  s.sweep = event_new(base, -1, EV_PERSIST, &state::on_sweep, &s);
  s.resume_accept = evtimer_new(base, &state::on_resume_accept, &s);
  s.refuse_event = evtimer_new(base, &state::on_refuse, &s);
  s.framing_event = evtimer_new(base, &state::on_bad_framing, &s);
  if (s.sweep != nullptr) {
    const timeval period{0, static_cast<suseconds_t>(k_sweep_ns / 1000)};
    event_add(s.sweep, &period);
  }
}

connection_limits::~connection_limits() { release(); }

void connection_limits::on_request(evhttp_request* req) {
  evhttp_connection* evcon = evhttp_request_get_connection(req);
  if (evcon == nullptr) return;
  auto it = state_->connections.find(evhttp_connection_get_bufferevent(evcon));
  if (it == state_->connections.end()) return;
  state::connection& c = *it->second;
  ++c.pending;
  // Back-pressure: while its answer is awaited, the connection is read no further than
  // read_ahead_bytes of pipelined requests (a read high-watermark on its bufferevent).
  bufferevent_setwatermark(c.bev, EV_READ, 0, state_->limits.read_ahead_bytes);
  c.reading_since_ns = 0;
  c.last_active_ns = steady_ns();
  evhttp_request_set_on_complete_cb(req, &state::on_complete, &c);
}

void connection_limits::release() noexcept {
  state& s = *state_;
  {
    state::registry& r = state::listeners();
    const stormguard::detail::lock hold(r.mutex);
    const auto it = r.by_http.find(s.http);
    if (it != r.by_http.end() && it->second == &s) r.by_http.erase(it);
  }
  if (s.sweep != nullptr) event_free(std::exchange(s.sweep, nullptr));
  if (s.resume_accept != nullptr) event_free(std::exchange(s.resume_accept, nullptr));
  if (s.refuse_event != nullptr) event_free(std::exchange(s.refuse_event, nullptr));
  if (s.framing_event != nullptr) event_free(std::exchange(s.framing_event, nullptr));
  while (!s.connections.empty()) s.forget(s.connections.begin());
}

const http_limits& connection_limits::limits() const noexcept { return state_->limits; }

bool connection_limits::over_unsent_limit() const noexcept {
  return state_->unsent_total > state_->limits.max_unsent_bytes;
}

namespace {

void rate_limited_log(int severity, const char* message) {
  (void)severity;
  // The lines of the current second, for every thread of the process.
  struct window {
    stormguard::detail::mutex mutex;
    std::int64_t second STORMGUARD_GUARDED_BY(mutex) = 0;
    int printed STORMGUARD_GUARDED_BY(mutex) = 0;
    std::int64_t left_out STORMGUARD_GUARDED_BY(mutex) = 0;
  };
  static window w;
  const stormguard::detail::lock hold(w.mutex);
  std::int64_t& second = w.second;
  int& printed = w.printed;
  std::int64_t& left_out = w.left_out;
  const std::int64_t now = steady_ns() / 1'000'000'000;
  if (now != second) {
    if (left_out > 0) {
      std::fprintf(stderr, "stormguard: libevent: %lld more lines left out (at most 10 a second)\n",
                   static_cast<long long>(left_out));
    }
    second = now;
    printed = 0;
    left_out = 0;
  }
  if (printed < 10) {
    ++printed;
    std::fprintf(stderr, "stormguard: libevent: %s\n", message);
  } else {
    ++left_out;
  }
}

}  // namespace

void install_rate_limited_libevent_log() {
  static std::once_flag once;
  std::call_once(once, [] { event_set_log_callback(&rate_limited_log); });
}

}  // namespace stormguard::lab::detail
