// SPDX-License-Identifier: Apache-2.0
/// \file
/// Hedged HTTP requests on http::async_client (gRFC A6 hedging).
///
/// http::async_hedge sends copies of one request as stormguard::async_hedge does (asio/hedge.hpp,
/// hedging.hpp): each copy is one real, concurrent libcurl transfer of `client` (one attempt: the
/// client must not retry by itself, retry.max_retries == 0); the first good answer (2xx, 3xx)
/// wins; the other transfers are cancelled, which removes their easy handles from libcurl's multi
/// handle and closes their connections, before the operation completes.
///
/// How an answer that is not good steers the next copy (gRFC A6):
/// - a `grpc-retry-pushback-ms` field (stormguard::parse_pushback): negative or unparsable stops
///   further copies (the copies in flight continue); a delay postpones the next copy by it;
/// - a Retry-After on a 429 or 503 postpones the next copy by its delay (stormguard::
///   parse_retry_after);
/// - a 409 while the request carries an Idempotency-Key: the server's idempotency guard says
///   another copy holds the key; not a failure, wait for the others;
/// - a status in hedge_http_options::non_fatal_statuses, or a transport failure (no response):
///   non-fatal, the next copy goes at once;
/// - any other status is fatal: the call ends with it.
///
/// A non-idempotent method (RFC 9110 §9.2.2) is hedged only when the request carries an
/// Idempotency-Key, and the same key goes on every copy (key::generate() is resolved once per
/// call); without one, exactly one copy is sent.
///
/// Where the host resolves to several addresses, copy i >= 2 is pinned to address (i - 1) mod n
/// (http/addresses.hpp), looked up once per call when the second copy is due, never on the
/// thread that runs the client's executor:
/// - an IP literal (nothing to spread) and a client_options::resolve entry for the host and port
///   need no lookup: copy 2 is pinned at once, as every later copy;
/// - a name without an entry goes to hedge_http_options::resolver (default asio_host_resolver:
///   getaddrinfo on Asio's resolver thread). While it runs, copy 2 waits for it at most
///   hedge_http_options::resolve_wait (default 10 ms, and never past call.deadline): pinned if
///   the addresses came in time, else sent unpinned when the wait ends (libcurl resolves it as
///   it does copy 1). A later copy uses the addresses if they have come by then, and never
///   waits. A copy cancelled while it waits completes at once (failure_kind::cancelled, nothing
///   sent; the report counts it sent and cancelled); the lookup is cancelled when the call's
///   state is released, just after its completion (see asio_host_resolver for a getaddrinfo
///   that Asio's thread already runs).
///
/// \code{.cpp}
///  stormguard::http::async_client client(io.get_executor(), {.retry = {.max_retries = 0}});
///  stormguard::hedger hedge(stormguard::hedging_policy({.max_attempts = 2, .delay = 50ms}),
///                           clk, rng, budget);
///  http::async_hedge(client, hedge, req, {}, {}, [](http::hedged_result r) { ... });
/// \endcode
#ifndef STORMGUARD_HTTP_HEDGE_HPP
#define STORMGUARD_HTTP_HEDGE_HPP

#include <algorithm>
#include <asio/async_result.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "stormguard/asio/hedge.hpp"
#include "stormguard/http/addresses.hpp"
#include "stormguard/http/async_client.hpp"
#include "stormguard/http/syntax.hpp"
#include "stormguard/idempotency.hpp"
#include "stormguard/retry_after.hpp"
#include "stormguard/retry_headers.hpp"

namespace stormguard::http {

/// The HTTP side of a hedging policy.
struct hedge_http_options {
  /// The statuses after which the next copy goes at once (gRFC A6's nonFatalStatusCodes; policy
  /// files' hedging.non_fatal_statuses). Default: none.
  std::vector<int> non_fatal_statuses{};
  /// How a host name without a client_options::resolve entry is looked up for the copies' addresses
  /// (see the file comment and http/addresses.hpp). Empty (the default): asio_host_resolver, the
  /// system's resolver on Asio's resolver thread.
  host_resolver resolver{};
  /// The longest copy 2 waits for a lookup still running before it goes unpinned (steady time;
  /// 0 = never waits: copy 2 goes at once, pinned only when the addresses are already known).
  /// Bounded by the time left to call.deadline. Default 10 ms: a name in /etc/hosts or the
  /// resolver's cache answers in well under 1 ms, a DNS server that does not answer delays the
  /// hedge by this much at most. Negative counts as 0.
  duration resolve_wait = std::chrono::milliseconds(10);
};

/// The outcome of a hedged request: the winner's result (or the last failed copy's), with
/// reason the hedged call's reason and attempts the copies sent, and the per-call report.
struct hedged_result {
  http::result result{};  ///< the returned copy's result (see above)
  hedge_report report{};  ///< which copy won, copies sent, refused, cancelled
  [[nodiscard]] bool ok() const noexcept { return result.ok(); }  ///< result.ok()
};

namespace detail {

// One copy's result as an expected-like value for async_hedge: has_value() when ok().
struct copy_outcome {
  http::result r;
  [[nodiscard]] bool has_value() const noexcept { return r.ok(); }
  http::result& operator*() & noexcept { return r; }
  http::result&& operator*() && noexcept { return std::move(r); }
  [[nodiscard]] const http::result& error() const& noexcept { return r; }
  http::result&& error() && noexcept { return std::move(r); }
};

// The lookup of the host's addresses for one call (see the file comment): started at the second
// copy, finished by the resolver's completion, cancelled when the call's state is released. Owned
// by the call's hedged_request and by the resolver's completion. The executor's thread only.
struct host_resolution {
  ::asio::cancellation_signal cancel{};
  bool done = false;
  bool ended = false;  // the call no longer wants the addresses
  std::vector<std::string> addresses{};
  std::vector<std::function<void()>> waiters{};  // wake the copies that wait for the addresses

  void finish(std::vector<std::string> found) {
    if (done) return;
    done = true;
    if (!ended) addresses = std::move(found);
    std::vector<std::function<void()>> wake = std::move(waiters);
    waiters.clear();
    for (const auto& w : wake) w();
  }
  void end() noexcept {
    if (done || ended) return;
    ended = true;
    waiters.clear();
    cancel.emit(::asio::cancellation_type::terminal);
  }
};

// The shared request of every copy (the body and the resolved key, kept once).
struct hedged_request {
  http::request req;
  bool hedge = true;  // false: a non-idempotent method without a key (one copy only)
  host_resolver resolver{};
  duration resolve_wait{};
  // The host's addresses when known without a lookup (known_host_addresses), from the second
  // copy; else the lookup, started then.
  mutable std::optional<std::vector<std::string>> addresses{};
  mutable std::shared_ptr<host_resolution> resolution{};

  hedged_request() = default;
  hedged_request(const hedged_request&) = delete;
  hedged_request& operator=(const hedged_request&) = delete;
  ~hedged_request() {
    if (resolution) resolution->end();  // the call is over: the lookup is no longer wanted
  }

  // The addresses, when known now (else null: the lookup runs).
  [[nodiscard]] const std::vector<std::string>* addresses_now() const noexcept {
    if (addresses) return &*addresses;
    if (resolution && resolution->done) return &resolution->addresses;
    return nullptr;
  }

  // From the second copy: the addresses if known without a lookup, else starts the lookup once.
  void look_up(const async_client& client) const {
    if (addresses || resolution) return;
    addresses = known_host_addresses(req.url, client.options().resolve);
    if (addresses) return;
    const std::optional<url_host> where = host_of_url(req.url);
    if (!where) {
      addresses.emplace();
      return;
    }
    auto r = std::make_shared<host_resolution>();
    resolution = r;
    resolve_completion done = [r](std::vector<std::string> found) { r->finish(std::move(found)); };
    try {
      if (resolver) {
        resolver(client.get_executor(), where->host, where->port, r->cancel.slot(),
                 std::move(done));
      } else {
        asio_host_resolver(client.get_executor(), where->host, where->port, r->cancel.slot(),
                           std::move(done));
      }
    } catch (...) {
      r->finish({});  // as a name that does not resolve: the copies go unpinned
    }
  }
};

// Copy `copy`'s request: the shared one, with its attempt number (not pinned yet).
inline http::request copy_request(const hedged_request& shared, int copy) {
  http::request r = shared.req;
  // Copy N (from 1) says it is attempt N (x-envoy-attempt-count: N, as gRFC A6 numbers hedged
  // attempts), so that a server's retry budget counts copies after the first as retries. A
  // request that carries its own count B (a caller that numbers attempts itself) is copy 1; copy
  // N then says B + N - 1, never B again.
  if (copy > 1) {
    for (header& h : r.headers) {
      if (!iequals_ascii(h.name, k_attempt_count_header)) continue;
      const stormguard::attempt_info own = parse_attempt(h.value, std::nullopt);
      const std::int64_t base = own.malformed ? 1 : own.attempt;
      h.value = std::to_string(base + copy - 1);
      return r;
    }
    r.headers.push_back({std::string(k_attempt_count_header), std::to_string(copy)});
  }
  return r;
}

// Sends one copy through the client, cancelled through the copy's slot.
template <class Handler>
void perform_copy(async_client& client, http::request r, const call_options& call,
                  Handler handler) {
  auto slot = ::asio::get_associated_cancellation_slot(handler);
  client.async_perform(
      std::move(r), call,
      ::asio::bind_cancellation_slot(slot, [h = std::move(handler)](http::result res) mutable {
        std::move(h)(copy_outcome{std::move(res)});
      }));
}

// A copy waiting for the host's lookup, at most a bounded time (see the file comment): it goes
// when the lookup completes (woken by host_resolution::finish), when its timer expires
// (unpinned), or completes cancelled when its slot is emitted. Owned by its timer's handler.
template <class Handler>
class waiting_copy : public std::enable_shared_from_this<waiting_copy<Handler>> {
 public:
  waiting_copy(async_client& client, std::shared_ptr<const hedged_request> shared,
               const call_options& call, int copy, http::request req, Handler handler)
      : client_(&client),
        shared_(std::move(shared)),
        call_(call),
        copy_(copy),
        req_(std::move(req)),
        handler_(std::move(handler)),
        timer_(client.get_executor()) {}

  void start(duration wait) {
    const std::weak_ptr<waiting_copy> weak = this->weak_from_this();
    auto slot = ::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) {
      slot.assign([weak](::asio::cancellation_type) {
        if (const auto self = weak.lock()) {
          self->cancelled_ = true;
          self->timer_.cancel();
        }
      });
    }
    shared_->resolution->waiters.push_back([weak] {
      if (const auto self = weak.lock()) self->timer_.cancel();
    });
    timer_.expires_after(wait);
    timer_.async_wait([self = this->shared_from_this()](const std::error_code&) { self->go(); });
  }

 private:
  void go() {
    auto slot = ::asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected()) slot.clear();
    if (cancelled_) {
      http::result r;
      r.reason = end_reason::cancelled;
      r.error =
          transport_error{42,  // CURLE_ABORTED_BY_CALLBACK, as for a transfer cut short
                          failure_kind::cancelled,
                          "cancelled while the host's addresses were looked up", std::nullopt};
      std::move(handler_)(copy_outcome{std::move(r)});
      return;
    }
    if (const std::vector<std::string>* a = shared_->addresses_now()) {
      req_.connect_address = copy_address(*a, copy_);
    }
    perform_copy(*client_, std::move(req_), call_, std::move(handler_));
  }

  async_client* client_;
  std::shared_ptr<const hedged_request> shared_;
  call_options call_;
  int copy_;
  http::request req_;
  Handler handler_;
  ::asio::steady_timer timer_;
  bool cancelled_ = false;
};

// One copy: one async_perform of the client, cancelled through the copy's slot; from the second
// copy, pinned to its address of the host, or waiting a bounded time for the lookup.
struct copy_op {
  async_client* client;
  std::shared_ptr<const hedged_request> shared;
  call_options call;

  template <class Token>
  auto operator()(const attempt_context& ctx, Token&& token) const {
    return ::asio::async_initiate<Token, void(copy_outcome)>(
        [client = client, shared = shared, call = call, copy = ctx.attempt,
         time_left = ctx.time_left](auto handler) {
          http::request r = copy_request(*shared, copy);
          if (copy >= 2 && r.connect_address.empty()) {  // the caller's own pin stays
            shared->look_up(*client);
            if (const std::vector<std::string>* a = shared->addresses_now()) {
              r.connect_address = copy_address(*a, copy);
            } else if (const duration wait = std::min(shared->resolve_wait, time_left);
                       copy == 2 && wait > duration::zero()) {
              std::make_shared<waiting_copy<decltype(handler)>>(*client, shared, call, copy,
                                                                std::move(r), std::move(handler))
                  ->start(wait);
              return;
            }
          }
          perform_copy(*client, std::move(r), call, std::move(handler));
        },
        token);
  }
};

// The verdict on a copy that did not succeed (see the file comment).
struct copy_classifier {
  std::shared_ptr<const hedged_request> shared;
  std::vector<int> non_fatal;
  clock* clk;

  hedge_verdict operator()(const http::result& r) const {
    if (!r.response) {
      if (r.error && r.error->kind == failure_kind::cancelled) return hedge_verdict::fatal();
      return hedge_verdict::non_fatal();
    }
    const http::response& resp = *r.response;
    if (const auto pb = find_header(resp.headers, "grpc-retry-pushback-ms")) {
      const pushback p = parse_pushback(*pb);
      if (p.do_not_retry) return hedge_verdict::stop_copies();
      return hedge_verdict::pushback(p.delay);
    }
    if (resp.status == 429 || resp.status == 503) {
      if (const auto ra = find_header(resp.headers, "Retry-After")) {
        const auto now = std::chrono::time_point_cast<std::chrono::system_clock::duration>(
            std::chrono::system_clock::time_point(clk->wall_now().time_since_epoch()));
        if (const auto d = parse_retry_after(*ra, now)) return hedge_verdict::pushback(*d);
      }
    }
    if (resp.status == 409 && shared->req.idempotency.what() != key::kind::none) {
      return hedge_verdict::wait();  // another copy holds the key
    }
    for (int s : non_fatal) {
      if (s == resp.status) return hedge_verdict::non_fatal();
    }
    return hedge_verdict::fatal();
  }
};

}  // namespace detail

/// Sends `req` hedged through `client` with `config` (see the file comment) and completes with
/// void(hedged_result) through `token`; the handler runs on the client's executor (its own
/// associated executor is not used). The token's cancellation slot is honoured. `client` must be
/// configured with retry.max_retries == 0 (std::invalid_argument otherwise: each copy is one
/// attempt) and must outlive the operation, as must `config`. A non-idempotent method without an
/// Idempotency-Key is sent once (report.sent == 1). call.stop, call.deadline and the token's
/// cancellation slot act as for stormguard::async_hedge; each copy also gets call.deadline.
/// The result: the winner's (reason success), or the last failed copy's with the hedged call's
/// reason; when no copy was sent, an empty result with that reason.
template <bit_generator G, retry_budget<G> B, class CompletionToken>
auto async_hedge(async_client& client, hedger<G, B>& config, request req,
                 const hedge_http_options& options, const call_options& call,
                 CompletionToken&& token) {
  if (client.options().retry.max_retries != 0) {
    throw std::invalid_argument(
        "stormguard::http::async_hedge: the client must not retry (retry.max_retries == 0), got " +
        std::to_string(client.options().retry.max_retries));
  }
  auto shared = std::make_shared<detail::hedged_request>();
  if (req.idempotency.what() == key::kind::generate) {
    req.idempotency = key::use(make_idempotency_key());  // the same key on every copy
  }
  shared->hedge = is_idempotent_method(req.method) || req.idempotency.what() != key::kind::none;
  shared->req = std::move(req);
  shared->resolver = options.resolver;
  shared->resolve_wait = std::max(options.resolve_wait, duration::zero());
  return ::asio::async_initiate<CompletionToken, void(hedged_result)>(
      [&client, &config, non_fatal = options.non_fatal_statuses, call, shared](auto handler) {
        detail::copy_classifier classify{shared, non_fatal, &config.clk()};
        auto slot = ::asio::get_associated_cancellation_slot(handler);
        auto done = [h = std::move(handler)](hedge_result<http::result, http::result> r) mutable {
          hedged_result out;
          out.report = r.report;
          if (r.value) {
            out.result = std::move(*r.value);
          } else if (r.last_error) {
            out.result = std::move(*r.last_error);
          }
          out.result.reason = r.reason;
          out.result.attempts = r.report.sent;
          std::move(h)(std::move(out));
        };
        if (!shared->hedge) {
          // One copy, without the hedging machinery: the client's own single attempt.
          client.async_perform(
              shared->req, call,
              ::asio::bind_cancellation_slot(slot, [d = std::move(done)](http::result r) mutable {
                hedge_result<http::result, http::result> h;
                h.reason = r.reason;
                h.report.sent = r.attempts;
                if (r.ok()) {
                  h.report.winner = 1;
                  h.value = std::move(r);
                } else {
                  h.last_error = std::move(r);
                }
                std::move(d)(std::move(h));
              }));
          return;
        }
        stormguard::async_hedge(config, client.get_executor(),
                                detail::copy_op{&client, shared, call}, std::move(classify), call,
                                ::asio::bind_cancellation_slot(slot, std::move(done)));
      },
      token);
}

}  // namespace stormguard::http

#endif  // STORMGUARD_HTTP_HEDGE_HPP
