// SPDX-License-Identifier: Apache-2.0
/// \file
/// The asynchronous HTTP client: libcurl's multi interface
/// driven by Asio, so that one thread keeps thousands of logical requests in flight, with the same
/// retry rules as stormguard::http::client.
///
/// One call of async_perform is one logical request, retried by stormguard::async_retry
/// (stormguard/asio/retry.hpp) with the rules of http::client (client.hpp, docs/http.md): the
/// statuses, Retry-After, methods and Idempotency-Key (the same on every attempt), per-host
/// budgets, attempt time-out, deadline, the body re-sent intact, max_body_bytes. libcurl's sockets
/// are watched by Asio (CURLMOPT_SOCKETFUNCTION and CURLMOPT_TIMERFUNCTION with
/// curl_multi_socket_action, as curl's own asio example), and connections are reused across
/// requests: the client's transfers are spread over libcurl multi handles of at most 256
/// transfers in flight each (a new transfer goes to the first with room, and reuses its idle
/// connections), because libcurl 7.88's connection cache costs O(its connections) per request.
///
/// \code{.cpp}
///  asio::io_context io;
///  stormguard::http::async_client client(io.get_executor(), {.attempt_timeout = 5s});
///  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
///    stormguard::http::request req;   // a named request: GCC 12 mishandles a braced temporary
///    req.url = "http://127.0.0.1:8080/x";                      // inside a co_await expression
///    stormguard::http::result r =
///        co_await client.async_perform(std::move(req), asio::use_awaitable);
///    if (r.ok()) use(r.response->body);
///  }, asio::detached);
///  io.run();
/// \endcode
///
/// Threads and executors: an async_client belongs to its executor (one thread, or a strand), like
/// an Asio I/O object: construct it, call async_perform and destroy it on that executor's thread;
/// libcurl's callbacks, the retry steps, the classifier and client_options::on_attempt all run
/// there. A completion handler runs on its own associated executor (the client's when it has
/// none), never inside async_perform. Per-host budgets may be shared with clients on other threads
/// (client_options::shared_budgets).
#ifndef STORMGUARD_HTTP_ASYNC_CLIENT_HPP
#define STORMGUARD_HTTP_ASYNC_CLIENT_HPP

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/dispatch.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/experimental/append.hpp>
#include <asio/prefer.hpp>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "stormguard/export.hpp"
#include "stormguard/http/client.hpp"

namespace stormguard::http {

namespace detail {

struct async_call;  // one logical request of an async_client (src/http/async_client.cpp)

// The caller's completion handler of one async_perform, type-erased for the compiled client.
class result_handler {
 public:
  virtual ~result_handler() = default;
  // Calls the handler once with `r` on its associated executor (dispatched).
  virtual void complete(result r) = 0;
};

template <class Handler>
class result_handler_for final : public result_handler {
 public:
  result_handler_for(Handler handler, const ::asio::any_io_executor& ex)
      : handler_(std::move(handler)),
        work_(::asio::prefer(::asio::get_associated_executor(handler_, ex),
                             ::asio::execution::outstanding_work.tracked)) {}
  void complete(result r) override {
    auto work = std::move(work_);
    ::asio::dispatch(work, ::asio::experimental::append(std::move(handler_), std::move(r)));
  }

 private:
  Handler handler_;
  std::decay_t<decltype(::asio::prefer(
      std::declval<::asio::associated_executor_t<Handler, ::asio::any_io_executor>>(),
      ::asio::execution::outstanding_work.tracked))>
      work_;
};

}  // namespace detail

/// The asynchronous HTTP client (see the file comment). Owns libcurl multi handles (one per 256
/// transfers in flight at most, each with its connection cache), a pool of easy handles (one per
/// request in flight, reused) and the Asio watches of libcurl's sockets. Not thread-safe: use it on
/// its executor only. Not copyable or movable (libcurl's callbacks hold its address).
///
/// Example (tests/integration/reference_http_examples_test.cpp, run by the tests):
/// \snippet reference_http_examples_test.cpp http_async_client
class STORMGUARD_EXPORT async_client {
 public:
  /// The executor type (Asio's polymorphic I/O executor).
  using executor_type = ::asio::any_io_executor;

  /// A client on `ex` with its own real_clock and OS-seeded random_generator. Validates
  /// `options` as http::client does (std::invalid_argument naming the field and the value);
  /// std::runtime_error when libcurl cannot be initialised.
  explicit async_client(const executor_type& ex, client_options options = {});
  /// A client that reads time through `clk` (now(): deadlines, budgets; wall_now(): HTTP-date
  /// Retry-After) and draws jitter from `random`; both must outlive the client and every
  /// operation it started. The backoff waits are asio::steady_timer waits (steady time), and
  /// libcurl's time-outs run on real time.
  async_client(const executor_type& ex, client_options options, clock& clk,
               random_generator& random);

  /// Abandons every request in flight: each transfer's easy handle is removed from libcurl at
  /// once (the connection is closed: the server sees it), each backoff wait is cancelled, and
  /// each completion handler is destroyed without being called (as Asio does with the handlers
  /// of a destroyed io_context). Internal handlers still queued on the executor find the client
  /// gone and do nothing; nothing leaks, whether the executor runs again or is destroyed.
  ~async_client();

  async_client(const async_client&) = delete;
  async_client& operator=(const async_client&) = delete;

  /// Starts `req` as one logical request with the rules of http::client::perform and completes
  /// with void(http::result) through `token` (asio::use_awaitable, a callback, asio::use_future
  /// when another thread runs the executor, ...). Throws std::invalid_argument for a bad request
  /// (as http::client::perform), before anything starts.
  ///
  /// Cancellation: the token's associated cancellation slot (any type), or call.stop from any
  /// thread, ends a backoff wait at once, and ends a transfer in progress at once by removing its
  /// easy handle (the connection is closed, so the server sees the request abandoned); no further
  /// attempt starts and the result is end_reason::cancelled (with a failure_kind::cancelled
  /// error when a transfer was cut). call.deadline (an instant of the client's clock) bounds the
  /// call: libcurl's time-outs of each attempt are cut to the time left, and no retry is made
  /// whose wait would end past it (end_reason::deadline_exceeded).
  ///
  /// `req` is copied into the operation (the body is re-sent intact from that copy); must be
  /// called on the client's executor.
  template <class CompletionToken>
  auto async_perform(request req, const call_options& call, CompletionToken&& token) {
    return ::asio::async_initiate<CompletionToken, void(result)>(
        [this](auto handler, request&& r, const call_options& c) {
          auto slot = ::asio::get_associated_cancellation_slot(handler);
          start(std::make_unique<detail::result_handler_for<decltype(handler)>>(std::move(handler),
                                                                                get_executor()),
                std::move(r), c, slot);
        },
        token, std::move(req), call);
  }

  /// async_perform(req, call_options{}, token).
  template <class CompletionToken>
  auto async_perform(request req, CompletionToken&& token) {
    return async_perform(std::move(req), call_options{}, std::forward<CompletionToken>(token));
  }

  /// The executor every step runs on.
  [[nodiscard]] executor_type get_executor() const noexcept;
  /// The validated settings.
  [[nodiscard]] const client_options& options() const noexcept;
  /// The per-host budgets this client spends from.
  [[nodiscard]] host_budgets& budgets() noexcept;
  /// Logical requests started and not yet completed.
  [[nodiscard]] std::size_t in_flight() const noexcept;
  /// libcurl easy handles created so far (each is reused by later requests once its request
  /// ends): the most requests that were in flight at once.
  [[nodiscard]] std::size_t easy_handles() const noexcept;

 private:
  void start(std::unique_ptr<detail::result_handler> handler, request req, const call_options& call,
             ::asio::cancellation_slot slot);

  friend struct detail::async_call;
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace stormguard::http

#endif  // STORMGUARD_HTTP_ASYNC_CLIENT_HPP
