// SPDX-License-Identifier: Apache-2.0
/// \file
/// A retrying gRPC client for unary calls: a fresh `grpc::ClientContext` per attempt, the core's
/// retry policy, backoff and budgets, gRFC A6's attempt label and server pushback, cancellation,
/// and the idempotency rule.
///
/// Any unary call of any generated stub goes through `client::call` (or `client::async_call`,
/// on gRPC's callback API): the caller passes what one attempt does with a context the client
/// made for it.
///
/// \code{.cpp}
///  stormguard::grpc::client client("dns:///orders.internal:443",
///                                  grpc::SslCredentials({}));   // C-core's retries off
///  auto stub = orders::v1::Orders::NewStub(client.channel());
///  orders::v1::GetOrderRequest request;
///  orders::v1::Order order;
///  auto r = client.call(
///      [&](grpc::ClientContext& ctx, const auto& req, auto* resp) {
///        return stub->GetOrder(&ctx, req, resp);
///      },
///      request, &order,
///      {.idempotent = true,
///       .deadline = stormguard::real_clock{}.now() + std::chrono::seconds(2),
///       .configure = [](grpc::ClientContext& ctx) { ctx.AddMetadata("x-team", "payments"); }});
///  if (r.ok()) use(order); else log(r.status.error_message(), to_string(r.reason), r.attempts);
/// \endcode
///
/// gRPC C++ has retries of its own (the service config's retryPolicy, gRFC A6): the channels a
/// client makes turn them off (`grpc.enable_retries` 0), so that one loop, this one, decides,
/// spends the budget and labels the attempts. docs/grpc.md says when to use which.
///
/// Inside `namespace stormguard`, `grpc::` names this namespace: name gRPC's own types from the
/// global namespace there (a leading `::`).
#ifndef STORMGUARD_GRPC_CLIENT_HPP
#define STORMGUARD_GRPC_CLIENT_HPP

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "stormguard/budget_kinds.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard/retry_policy.hpp"

namespace stormguard::grpc {

/// True for the 17 status codes gRPC defines, OK (0) to UNAUTHENTICATED (16) ("Status codes and
/// their use in gRPC"). A server may send any number as grpc-status; the client reads one
/// outside that range as UNKNOWN (see classify_attempt). Thread-safe; never throws.
[[nodiscard]] constexpr bool is_known_status_code(int code) noexcept {
  return code >= 0 && code <= 16;
}

/// A set of failure status codes, e.g. the codes a client retries for an idempotent method.
/// A plain value (a bit mask), thread-safe to read; never allocates.
class STORMGUARD_EXPORT status_codes {
 public:
  /// The empty set.
  constexpr status_codes() noexcept = default;
  /// The set of `codes`. Throws std::invalid_argument naming the code for OK (a success is not a
  /// failure to retry) or a value outside 1..16.
  status_codes(std::initializer_list<::grpc::StatusCode> codes);
  /// The set whose bits are set in `mask` (bit c for the code c), bits outside 1..16 dropped:
  /// the inverse of mask() (and of config::grpc_codes::mask(), a policy's codes).
  [[nodiscard]] static constexpr status_codes from_mask(std::uint32_t mask) noexcept {
    status_codes s;
    s.mask_ = mask & 0x1FFFEU;
    return s;
  }

  /// True when `code` is in the set; false for any value outside 1..16.
  [[nodiscard]] constexpr bool contains(::grpc::StatusCode code) const noexcept {
    const int c = static_cast<int>(code);
    return c >= 1 && c <= 16 && (mask_ >> c & 1U) != 0;
  }
  /// The set as a mask: bit c for the code c.
  [[nodiscard]] constexpr std::uint32_t mask() const noexcept { return mask_; }

  /// Two sets are equal when they hold the same codes.
  friend constexpr bool operator==(const status_codes&, const status_codes&) = default;

 private:
  std::uint32_t mask_ = 0;
};

/// Says whether C-core's own retries are off on a channel the caller made (see client's
/// constructor): gRPC C++ cannot read a channel's arguments back, so the caller says it.
enum class c_core_retries {
  off,  ///< the channel was made with grpc.enable_retries 0 (channel_arguments, make_channel)
  on,   ///< they are on (gRPC's default): refused, the two retry loops would multiply
};

struct result;

/// How the client's hedged calls (client::async_hedged_call, client::hedged_call) send their
/// copies: gRFC A6's hedgingPolicy, which C-core itself ignores (docs/grpc.md).
struct hedge_options {
  /// Copies in all (max_attempts, in [2, 5] as A6), the delay between two copies (hedgingDelay;
  /// 0 sends every copy at once; or delay_quantile, a quantile of the client's recent successful
  /// latencies), and the longest pushback the call waits for before its next copy
  /// (max_retry_after). Default: 2 copies, 20 ms apart (hedging.hpp).
  hedging_options policy{};
  /// A6's nonFatalStatusCodes: a copy that fails with one of these sends the next copy at once;
  /// any other failure code is fatal (the call fails with it and the other copies are
  /// cancelled). Empty by default, as A6's.
  status_codes non_fatal{};
};

/// The settings of a client, validated at construction (std::invalid_argument naming the field
/// and the value).
struct client_options {
  /// Retries, backoff with jitter, the longest pushback honoured (max_retry_after): 3 retries,
  /// full jitter from 100 ms up to 3 s, 60 s (retry_policy.hpp).
  retry_options retry{};
  /// The failure codes retried for a method marked idempotent (call_options::idempotent):
  /// UNAVAILABLE by default, as gRFC A6 examples and google-cloud-cpp's defaults do. From a
  /// policy (client_options_for, stormguard/grpc/policy.hpp): its retryable_grpc_codes when it
  /// names them.
  status_codes retryable{::grpc::StatusCode::UNAVAILABLE};
  /// The kind and settings of the client's retry budget when shared_budget is empty: any kind of
  /// the core's list (budget_kinds.hpp). Default: 10 % of requests over 10 s plus 10 retries/s.
  budget_options budget = ratio_budget_options{};
  /// A budget shared with other clients (e.g. one per backend service, shared by the clients of
  /// several threads or stubs); when set, `budget` is not used. Thread-safe (any_budget).
  std::shared_ptr<any_budget> shared_budget{};
  /// The longest one attempt may take, cut to the time left before the call's deadline; an
  /// attempt that runs out of it ends DEADLINE_EXCEEDED and is retried only for an idempotent
  /// method. > 0; duration::max() = no limit of its own (the default).
  duration attempt_timeout = duration::max();
  /// The hedged calls' copies (hedged calls only; call() and async_call() retry). Validated at
  /// construction as hedging_policy validates (std::invalid_argument naming
  /// hedging.max_attempts and the value, ...). The copies after the first draw from the same
  /// budget as retries.
  hedge_options hedging{};
  /// Called after every attempt of call() and async_call() (not the copies of a hedged call)
  /// with call_options::method and the core's attempt_event (retry.hpp): the attempt's outcome,
  /// the delay before the next attempt or why the call ends. On the thread that ran the attempt
  /// (a gRPC callback thread for async_call): it must not block. Empty: nothing. An exception
  /// from it propagates out of call(); in async_call it is caught and ignored, since a gRPC
  /// thread would lose it (a failed diagnostic never changes what is retried).
  std::function<void(std::string_view method, const attempt_event&)> on_attempt{};
  /// Called once per call of every kind (call, async_call, the hedged calls), as it ends, with
  /// call_options::method and the call's result (reason, attempts, result::hedges for a hedged
  /// call), before the result is returned or `done` runs. The same threads and exceptions rule as
  /// on_attempt. stormguard/metrics/grpc.hpp records both into Prometheus metrics by method.
  std::function<void(std::string_view method, const result&)> on_end{};
};

/// The per-call settings.
struct call_options {
  /// True when repeating the call is harmless (a read, a put of a whole value, a call carrying
  /// an idempotency key the server honours): retried on client_options::retryable. False (the
  /// default): retried only when the failure proves the server never ran the method — see
  /// classify_attempt.
  bool idempotent = false;
  /// A stop request ends the call: the attempt in flight is cancelled
  /// (grpc::ClientContext::TryCancel), a backoff sleep is interrupted, no attempt follows
  /// (end_reason::cancelled).
  std::stop_token stop{};
  /// An instant of the client's clock after which no attempt starts and no sleep ends; every
  /// attempt's gRPC deadline is cut to it. time_point::max() = none (the default). A deadline
  /// already passed ends the call before any attempt (deadline_exceeded, no RPC sent).
  time_point deadline = time_point::max();
  /// Called on each attempt's fresh context, before the client adds its own settings: metadata,
  /// credentials, compression, wait_for_ready, a deadline of the caller's (the client's deadline
  /// applies when earlier). A metadata key the client sets itself (grpc-previous-rpc-attempts)
  /// is refused by gRPC's rules only when invalid; do not add it here. Empty: nothing.
  std::function<void(::grpc::ClientContext&)> configure{};
  /// The method's name as the client's hooks see it (client_options::on_attempt, on_end), e.g.
  /// "/orders.v1.Orders/GetOrder" (gRPC's full name) or any fixed name of yours; the client does
  /// nothing else with it. Must stay valid until the call ends (a string literal). Empty: "".
  std::string_view method{};
};

/// What one failed attempt tells the client, for classify_attempt.
struct attempt_failure {
  /// The attempt's status (never OK). Its code may be any number a server sent.
  ::grpc::Status status;
  /// The server's grpc-retry-pushback-ms trailer, read by stormguard::parse_pushback (negative
  /// or unparsable = do not retry); empty when the trailer was absent.
  std::optional<stormguard::pushback> pushback{};
  /// True when the attempt never left the client: UNAVAILABLE while the channel had no
  /// connection (not READY when the attempt started, TRANSIENT_FAILURE when it ended; C-core
  /// fails such a call at the pick, before sending it).
  bool never_sent = false;
  /// True when the attempt ended DEADLINE_EXCEEDED on its own attempt_timeout, while the call's
  /// deadline still had time (a retry may succeed).
  bool attempt_timed_out = false;
};

/// The verdict on a failed attempt (a pure function; thread-safe; never throws). In this order:
///  1. a pushback that says "do not retry" (negative or malformed) ⇒ stop (the call ends
///     server_refused);
///  2. a pushback >= 0 ⇒ retry_after(pushback), whatever the code and the idempotency: the
///     server refused the call before running it and says when to come back (stormguard's
///     admission answers RESOURCE_EXHAUSTED so; gRFC A6 "Pushback");
///  3. never_sent ⇒ retry (sending it is the first delivery);
///  4. a method not idempotent ⇒ stop (the server may have run it);
///  5. attempt_timed_out ⇒ retry, marked as a timeout (budgets that price timeouts see it);
///  6. the code, read as UNKNOWN when outside 0..16, in `retryable` ⇒ retry; otherwise stop.
[[nodiscard]] STORMGUARD_EXPORT classification classify_attempt(const attempt_failure& failure,
                                                                const status_codes& retryable,
                                                                bool idempotent) noexcept;

/// What a call through client::call ended with.
struct result {
  /// OK on success; otherwise the last attempt's status, or, for a call that made no attempt, a
  /// status of the client's (CANCELLED when stopped, DEADLINE_EXCEEDED when the deadline had
  /// passed, UNAVAILABLE when the budget throttled it), whose message starts with "stormguard:".
  ::grpc::Status status;
  /// Why the call ended (retry_policy.hpp): success, not_retryable, attempts_exhausted,
  /// budget_exhausted, retry_after_too_long (a pushback above max_retry_after),
  /// deadline_exceeded, cancelled, throttled or server_refused (pushback "do not retry").
  end_reason reason = end_reason::success;
  /// Attempts sent (0 when the call ended before its first).
  int attempts = 0;
  /// The backoff time waited, in all (saturating).
  duration slept{};
  /// The last attempt's pushback trailer, when it had one.
  std::optional<stormguard::pushback> pushback{};
  /// A hedged call's copies: the winner (0: none succeeded), copies sent (= attempts), refused by
  /// the budget, cancelled when the call was decided, and why no further copy went. All zero
  /// for a retried call.
  hedge_report hedges{};

  /// True when the call succeeded (reason success; status OK).
  [[nodiscard]] bool ok() const noexcept { return reason == end_reason::success; }
};

/// `args` with C-core's retries turned off (`grpc.enable_retries` = 0, GRPC_ARG_ENABLE_RETRIES),
/// whatever `args` said: for a caller who makes its own channel and passes it to client with
/// c_core_retries::off.
[[nodiscard]] STORMGUARD_EXPORT ::grpc::ChannelArguments channel_arguments(
    ::grpc::ChannelArguments args = {});

/// A channel to `target` (gRPC's naming: "dns:///host:port", "ipv4:127.0.0.1:50051", ...) with
/// `credentials` and channel_arguments(args). Connects lazily, as every gRPC channel.
[[nodiscard]] STORMGUARD_EXPORT std::shared_ptr<::grpc::Channel> make_channel(
    const std::string& target, const std::shared_ptr<::grpc::ChannelCredentials>& credentials,
    ::grpc::ChannelArguments args = {});

namespace detail {
class async_call_state;   // src/grpc/async_call.cpp
class hedged_call_state;  // src/grpc/hedged_call.cpp

/// One attempt, type-erased without allocation: a reference to the caller's callable.
class attempt_ref {
 public:
  template <class F>
  requires(!std::same_as<std::remove_cvref_t<F>, attempt_ref>) explicit attempt_ref(F& f) noexcept
      : object_(&f), call_([](void* o, ::grpc::ClientContext& ctx) -> ::grpc::Status {
          return (*static_cast<F*>(o))(ctx);
        }) {}
  ::grpc::Status operator()(::grpc::ClientContext& ctx) const { return call_(object_, ctx); }

 private:
  void* object_;
  ::grpc::Status (*call_)(void*, ::grpc::ClientContext&);
};
}  // namespace detail

/// The retrying client of one channel: runs each unary call through the core's retrier
/// (retry.hpp) with a fresh grpc::ClientContext per attempt, the client's retry policy and
/// budget, and gRFC A6's rules:
///  - attempt N >= 2 carries `grpc-previous-rpc-attempts: N-1` (k_previous_attempts_header);
///  - the call's deadline bounds every attempt (ClientContext::set_deadline, also cut to
///    client_options::attempt_timeout), and no attempt starts after it;
///  - a `grpc-retry-pushback-ms` trailer is honoured: negative or malformed ends the call
///    (server_refused), a delay is the least wait before the next attempt (retry_policy::decide
///    waits max(backoff, pushback) plus an upward spread), above max_retry_after it ends the
///    call (retry_after_too_long);
///  - the budget is asked through the one budget protocol (budget_protocol.hpp): admitted before
///    the first attempt, told how every attempt ended, one retry withdrawn before each retry;
///  - classify_attempt says which failures are retried (idempotency included).
///
/// Thread-safe: call() and async_call() may run on any number of threads at once (the generator is
/// used under a mutex, the budget and the clock are thread-safe). Neither copyable nor movable.
///
/// Example (tests/integration/grpc_test.cpp, run by the tests against a real server):
/// \snippet grpc_test.cpp grpc_client
class STORMGUARD_EXPORT client {
 public:
  /// A client with its own channel to `target` (make_channel: C-core's retries off), the real
  /// clock and a generator seeded from the operating system. Throws std::invalid_argument for
  /// invalid options (naming the field and the value).
  client(const std::string& target, const std::shared_ptr<::grpc::ChannelCredentials>& credentials,
         client_options options = {});
  /// A client over a channel the caller made. `retries` says whether C-core's retries are off on
  /// it; gRPC C++ cannot read a channel's arguments back, so the caller must say, and
  /// c_core_retries::on is refused (std::invalid_argument): with both loops, every attempt of
  /// ours is up to 5 of C-core's, unbudgeted, and C-core strips the attempt label. Make it with
  /// channel_arguments() or make_channel(). A null channel throws std::invalid_argument.
  client(std::shared_ptr<::grpc::Channel> channel, c_core_retries retries,
         client_options options = {});
  /// As the constructor above, on an injected clock (backoff sleeps, deadlines, budgets) and
  /// generator (jitter), which must outlive the client. gRPC's own deadlines run on real time.
  client(std::shared_ptr<::grpc::Channel> channel, c_core_retries retries, client_options options,
         clock& clk, random_generator& random);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// The channel: make stubs from it.
  [[nodiscard]] const std::shared_ptr<::grpc::Channel>& channel() const noexcept;
  /// The validated options.
  [[nodiscard]] const client_options& options() const noexcept;
  /// The budget every call spends from (the shared one, or the client's own).
  [[nodiscard]] any_budget& budget() noexcept;

  /// Runs one logical request: `rpc(context, request, response)` once per attempt, with a fresh
  /// context configured by call.configure, until an attempt returns OK or the rules above stop
  /// the call. `rpc` is typically a lambda calling a stub's synchronous unary method. `response`
  /// holds the answer of the attempt that succeeded (gRPC fills it only on OK). Exceptions from
  /// `rpc` or `configure` propagate (the budget's protocol still ends).
  template <class Rpc, class Request, class Response>
  requires std::invocable<Rpc&, ::grpc::ClientContext&, const Request&, Response*> result
  call(Rpc&& rpc, const Request& request, Response* response, const call_options& call = {}) {
    auto attempt = [&](::grpc::ClientContext& ctx) -> ::grpc::Status {
      return std::invoke(rpc, ctx, request, response);
    };
    return run(detail::attempt_ref(attempt), call);
  }

  /// The signature of one copy of a hedged call, type-erased: start copy number `copy` (from 1)
  /// on `context` and call `finished` once with its status.
  using hedge_attempt = std::function<void(int copy, ::grpc::ClientContext* context,
                                           std::function<void(::grpc::Status)> finished)>;

  /// Runs one logical request as a hedged call (gRFC A6 "Hedging Policy"; Dean and Barroso, "The
  /// Tail at Scale", CACM 2013) on gRPC's callback API: copy 1 at once, the next copy
  /// options().hedging.policy.delay after the previous one (at once after a copy failed with a
  /// non-fatal code), up to max_attempts copies, each on a fresh context with the attempt label
  /// (copy N carries `grpc-previous-rpc-attempts: N-1`) and the call's deadline (cut to
  /// attempt_timeout). The first success commits: its response is moved into `*response`, the
  /// copies still in flight are cancelled (ClientContext::TryCancel), and `done(result)` runs once
  /// every copy has ended and no thread is still handling an event of the call, so that nothing
  /// of the call runs after it (done runs on the thread of the call's last event: a gRPC thread,
  /// the client's timer thread, a stopping thread, or this one before async_hedged_call returns). A
  /// fatal code commits too: the call fails with it (not_retryable). A pushback trailer of d
  /// postpones the next copy to d from now (above max_retry_after: no further copy,
  /// retry_after_too_long); "do not retry" (negative, malformed) stops further copies, those in
  /// flight go on (server_refused if none succeeds). A copy that never left the client, or ran
  /// out of its attempt_timeout, is non-fatal.
  ///
  /// Budget (budget_protocol.hpp): the call is admitted before copy 1 (refused: throttled, no
  /// RPC sent); every later copy draws one retry (try_charge_hedge) — a refused copy is not sent
  /// and no further copy is, while the copies in flight keep running (budget_exhausted if none
  /// succeeds); every copy that ended before the decision is recorded.
  ///
  /// Only for a method marked idempotent (call.idempotent): copies run on the server at once, so
  /// a call not marked so throws std::invalid_argument, before anything is sent. `rpc(context,
  /// &request, copy_response, finished)` starts one copy on the stub's callback API; each copy has
  /// a Response of its own (default-constructed), so Response must be default-constructible and
  /// move-assignable (every generated message is). A stop on call.stop cancels every copy in
  /// flight and the alarm (cancelled). Exceptions: as async_call (on copy 1, out of this function,
  /// and `done` is not called; on a later copy the call fails not_retryable with an UNKNOWN
  /// status saying so). `request`, `response` and the client must stay valid until `done` runs;
  /// `done` must not block or throw. The delay's waits are real time (the client's timer thread,
  /// started by its first hedged call), also with an injected clock, which still drives
  /// deadlines, budgets and the adaptive delay.
  template <class Rpc, class Request, class Response, class Done>
  requires std::invocable<Rpc&, ::grpc::ClientContext*, const Request*, Response*,
                          std::function<void(::grpc::Status)>> && std::invocable<Done&, result> &&
      std::default_initializable<Response> && std::is_move_assignable_v<Response>
  void async_hedged_call(Rpc&& rpc, const Request& request, Response* response, call_options call,
                         Done&& done) {
    struct copies {
      std::optional<Response> slot[5];
    };
    auto own = std::make_shared<copies>();
    start_hedge(
        [rpc = std::forward<Rpc>(rpc), req = &request, own](
            int copy, ::grpc::ClientContext* ctx,
            std::function<void(::grpc::Status)> finished) mutable {
          Response& r = own->slot[copy - 1].emplace();
          std::invoke(rpc, ctx, req, &r, std::move(finished));
        },
        [own, response](int copy) { *response = std::move(*own->slot[copy - 1]); }, std::move(call),
        std::function<void(result)>(std::forward<Done>(done)));
  }

  /// async_hedged_call, waited for on the calling thread: the same copies, rules and result.
  /// `rpc` is the callback form (a blocking stub cannot run two copies at once on one thread).
  template <class Rpc, class Request, class Response>
  requires std::invocable<Rpc&, ::grpc::ClientContext*, const Request*, Response*,
                          std::function<void(::grpc::Status)>> &&
      std::default_initializable<Response> && std::is_move_assignable_v<Response>
          result hedged_call(Rpc&& rpc, const Request& request, Response* response,
                             const call_options& call = {}) {
    // Held by the callback too: the waiter may return (and its frame go) while set_value runs.
    auto ended = std::make_shared<std::promise<result>>();
    auto answer = ended->get_future();
    async_hedged_call(std::forward<Rpc>(rpc), request, response, call,
                      [ended](result r) { ended->set_value(std::move(r)); });
    return answer.get();
  }

  /// The signature of one asynchronous attempt, type-erased: start the RPC on `context` and call
  /// `finished` once with its status (gRPC's callback API does: `stub->async()->Method(context,
  /// &request, response, std::move(finished))`).
  using async_attempt =
      std::function<void(::grpc::ClientContext* context, std::function<void(::grpc::Status)>)>;

  /// Runs one logical request with gRPC's callback API: the same rules as call(), without
  /// blocking a thread. `rpc(context, &request, response, finished)` starts one attempt (a
  /// lambda around `stub->async()->Method(...)`); the client calls it again after each backoff
  /// wait, on a fresh context. `done(result)` is called exactly once when the call ends: on one
  /// of gRPC's callback threads (it must not block), or before async_call returns when the call
  /// ends without an attempt (a stop already requested, a deadline already passed, throttled).
  ///
  /// `request` and `response` must stay valid until `done` runs, and so must the client (its
  /// budget, clock and generator). A stop request on call.stop cancels the attempt in flight or
  /// the backoff wait at once. The waits are real time (a `grpc::Alarm`), also with an injected
  /// clock, which still drives deadlines and budgets. An exception from `rpc` or `configure`
  /// propagates out of async_call for the first attempt; on a later one (a gRPC thread) it ends
  /// the call with not_retryable and an UNKNOWN status saying so. `done` must not throw.
  template <class Rpc, class Request, class Response, class Done>
  requires std::invocable<Rpc&, ::grpc::ClientContext*, const Request*, Response*,
                          std::function<void(::grpc::Status)>> && std::invocable<Done&, result>
  void async_call(Rpc&& rpc, const Request& request, Response* response, call_options call,
                  Done&& done) {
    start_async(
        [rpc = std::forward<Rpc>(rpc), req = &request, response](
            ::grpc::ClientContext* ctx, std::function<void(::grpc::Status)> finished) mutable {
          std::invoke(rpc, ctx, req, response, std::move(finished));
        },
        std::move(call), std::function<void(result)>(std::forward<Done>(done)));
  }

 private:
  friend class detail::async_call_state;
  friend class detail::hedged_call_state;
  result run(detail::attempt_ref attempt, const call_options& call);
  void start_async(async_attempt attempt, call_options call, std::function<void(result)> done);
  void start_hedge(hedge_attempt attempt, std::function<void(int)> commit, call_options call,
                   std::function<void(result)> done);
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace stormguard::grpc

#endif  // STORMGUARD_GRPC_CLIENT_HPP
