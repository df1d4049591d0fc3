// SPDX-License-Identifier: Apache-2.0
/// \file
/// The asynchronous retry executor, on standalone Asio (1.22).
///
/// `stormguard::async_retry` runs the same loop as the synchronous `stormguard::retrier`
/// (retry.hpp), with the same retrier (policy, clock, generator, budget, hooks), classifier and
/// call_options, but each attempt is an Asio asynchronous operation and each backoff is a timer
/// wait, so one thread can keep thousands of logical requests retrying. The decision is
/// retry_policy::decide and every budget call goes through request_budget
/// (budget_protocol.hpp), so a budget hears exactly what it hears from the sync retrier.
///
/// \code{.cpp}
///  stormguard::retrier retry(policy, clock, rng, budget);     // as for the sync executor
///  auto fetch = [&](const stormguard::attempt_context& ctx, auto&& token) {
///    // socket_op completes with void(std::error_code, T)
///    return socket_op(ctx.time_left, std::forward<decltype(token)>(token));
///  };
///  stormguard::retry_result<T, std::error_code> r = co_await stormguard::async_retry(
///      retry, io.get_executor(), fetch, stormguard::default_classifier{}, {.deadline = d},
///      asio::use_awaitable);
/// \endcode
///
/// Any completion token works (asio::use_awaitable, a callback, asio::use_future,
/// asio::experimental::deferred, ...): the operation completes with void(retry_result<T, E>).
/// Per-operation cancellation (asio::bind_cancellation_slot, parallel_group's wait_for_one, the
/// awaitable operators) ends a backoff wait at once and is forwarded, with its type, to the
/// attempt in flight. Tests use a virtual timer: `async_retry<testing::manual_timer>(...)` with a
/// testing::manual_clock (stormguard/asio/manual_timer.hpp) never sleeps.
#ifndef STORMGUARD_ASIO_RETRY_HPP
#define STORMGUARD_ASIO_RETRY_HPP

#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/experimental/append.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/recycling_allocator.hpp>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <concepts>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>

#include "stormguard/asio/detail/call.hpp"
#include "stormguard/retry.hpp"

namespace stormguard {

/// A timer that async_retry can wait on between attempts: Asio's `asio::steady_timer` (the
/// default) or `testing::manual_timer` (virtual time), or any type with
///  - a constructor from (Executor) or from (Executor, stormguard::clock&): async_retry passes the
///    retrier's clock when the timer takes one;
///  - `expires_after(duration)`: arms it `d` (>= 0) from now, on the timer's own clock;
///  - `async_wait(handler)`: completes once with void(std::error_code) on the handler's associated
///    executor: no error when the time elapsed, asio::error::operation_aborted after cancel();
///  - `cancel()`: ends a pending wait early (operation_aborted).
///
/// The timer's clock must be the retrier's clock: asio::steady_timer runs on
/// std::chrono::steady_clock, which is what stormguard::real_clock reads.
template <class T, class Executor>
concept backoff_timer =
    (std::constructible_from<T, const Executor&> ||
     std::constructible_from<T, const Executor&, clock&>)&&requires(T& t, duration d) {
  t.expires_after(d);
  t.cancel();
};

namespace detail {

template <class R>
struct retrier_types;
template <bit_generator G, retry_budget<G> B, class OnRetry, class OnGiveUp, class OnAttempt,
          class OnEnd>
struct retrier_types<retrier<G, B, OnRetry, OnGiveUp, OnAttempt, OnEnd>> {
  using budget_type = B;
  using on_retry_type = OnRetry;
  using on_give_up_type = OnGiveUp;
  using on_attempt_type = OnAttempt;
  using on_end_type = OnEnd;
};

// A completion token that only reveals an operation's completion signature: decltype(op(ctx,
// signature_probe{})) is probed_signature<Sig> (see the asio::async_result specialisation below).
// Never run.
struct signature_probe {};
template <class Sig>
struct probed_signature;
template <class R, class... A>
struct probed_signature<R(A...)> {
  using args = probed_signature;
};

// How the arguments of an attempt's completion become one outcome<value_type, error_type>.
template <class... A>
struct attempt_completion {
  static_assert(sizeof...(A) < 0,
                "stormguard::async_retry: the operation must complete with void(std::error_code), "
                "void(std::error_code, T), void(std::exception_ptr), void(std::exception_ptr, T) "
                "or void(R) with R expected-like (has_value(), *r, error())");
};
template <>
struct attempt_completion<std::error_code> {
  using value_type = done_t;
  using error_type = std::error_code;
  static outcome<done_t, std::error_code> make(const std::error_code& ec) {
    if (!ec) return done;
    return failure<std::error_code>{ec};
  }
};
template <class V>
struct attempt_completion<std::error_code, V> {
  using value_type = V;
  using error_type = std::error_code;
  template <class U>
  static outcome<V, std::error_code> make(const std::error_code& ec, U&& value) {
    if (!ec) return outcome<V, std::error_code>(V(std::forward<U>(value)));
    return failure<std::error_code>{ec};
  }
};
template <>
struct attempt_completion<std::exception_ptr> {
  using value_type = done_t;
  using error_type = std::exception_ptr;
  static outcome<done_t, std::exception_ptr> make(std::exception_ptr e) {
    if (!e) return done;
    return failure<std::exception_ptr>{std::move(e)};
  }
};
template <class V>
struct attempt_completion<std::exception_ptr, V> {
  using value_type = V;
  using error_type = std::exception_ptr;
  template <class U>
  static outcome<V, std::exception_ptr> make(std::exception_ptr e, U&& value) {
    if (!e) return outcome<V, std::exception_ptr>(V(std::forward<U>(value)));
    return failure<std::exception_ptr>{std::move(e)};
  }
};
template <class R>
requires expected_like<R>
struct attempt_completion<R> {
  using deref = decltype(*std::declval<R>());
  using value_type = std::conditional_t<std::is_void_v<deref>, done_t, std::remove_cvref_t<deref>>;
  using error_type = std::remove_cvref_t<decltype(std::declval<R>().error())>;
  template <class U>
  static outcome<value_type, error_type> make(U&& r) {
    if (r.has_value()) {
      if constexpr (std::is_void_v<deref>) {
        return done;
      } else {
        return outcome<value_type, error_type>(value_type(*std::forward<U>(r)));
      }
    }
    return failure<error_type>{std::forward<U>(r).error()};
  }
};

template <class Probed>
struct completion_of;
template <class R, class... A>
struct completion_of<probed_signature<R(A...)>> {
  using type = attempt_completion<std::decay_t<A>...>;
};

// The attempt_completion of `Op`, whose completion signature is probed without running it.
template <class Op>
using attempt_completion_of = typename completion_of<
    std::remove_cvref_t<std::invoke_result_t<Op&, const attempt_context&, signature_probe>>>::type;

}  // namespace detail
}  // namespace stormguard

namespace asio {
// The signature probe: an initiating function called with signature_probe returns
// probed_signature<Sig> and starts nothing (only ever used inside decltype).
template <class Sig>
class async_result<stormguard::detail::signature_probe, Sig> {
 public:
  using return_type = stormguard::detail::probed_signature<Sig>;
  template <class Initiation, class... Args>
  static return_type initiate(Initiation&&, stormguard::detail::signature_probe, Args&&...) {
    return {};
  }
};
}  // namespace asio

namespace stormguard {

/// An asynchronous attempt for async_retry: `op(const attempt_context&, token)` initiates one
/// attempt with one of the completion signatures async_retry accepts (checked by probing it).
template <class Op>
// clang-format off
#ifdef STORMGUARD_DOXYGEN  // the reference shows the concept without the internal probe
concept async_attempt = std::invocable<std::decay_t<Op>&, const attempt_context&, token>;
// clang-format on
#else
concept async_attempt = std::invocable < std::decay_t<Op>
&, const attempt_context&, detail::signature_probe > ;
#endif

/// The result type of async_retry for an operation of type Op (a retry_result<T, E>; see
/// async_retry for how T and E follow from Op's completion signature).
template <class Op>
#ifdef STORMGUARD_DOXYGEN  // the reference shows the type without the internal helper
using async_retry_result_t = retry_result<T, E>;
#else
using async_retry_result_t = retry_result<typename detail::attempt_completion_of<Op>::value_type,
                                          typename detail::attempt_completion_of<Op>::error_type>;
#endif

namespace detail {

// One asynchronous logical request: the state that lives from the initiation to the completion.
// Owned by shared_ptrs held by the handlers of the steps in flight (the attempt, the timer wait,
// a posted stop request), allocated with the completion handler's associated allocator (Asio's
// recycling allocator by default: no malloc per call once warm). Every member function runs on
// `ex_` except the constructor's caller and the stop callback, which only posts.
template <class Timer, class Executor, class Retrier, class Op, class Classifier, class Handler>
class async_retry_op : public std::enable_shared_from_this<
                           async_retry_op<Timer, Executor, Retrier, Op, Classifier, Handler>> {
 public:
  using completion = attempt_completion_of<Op>;
  using value_type = typename completion::value_type;
  using error_type = typename completion::error_type;
  using result_type = retry_result<value_type, error_type>;
  using budget_type = typename retrier_types<Retrier>::budget_type;
  using allocator_type = call_allocator_t<Handler>;

  template <class O, class C, class H>
  async_retry_op(Retrier& config, const Executor& ex, O&& op, C&& classify,
                 const call_options& call, H&& handler)
      : config_(&config),
        ex_(ex),
        op_(std::forward<O>(op)),
        classify_(std::forward<C>(classify)),
        call_(call),
        handler_(std::forward<H>(handler)),
        work_(call_work(handler_, ex_)) {}

  async_retry_op(const async_retry_op&) = delete;
  async_retry_op& operator=(const async_retry_op&) = delete;

  ~async_retry_op() {
    // Only when a step threw (an exception from the operation, the classifier or a hook
    // propagates out of the executor's run()): the budget protocol still ends, no dangling
    // cancellation handler stays installed, and the handler is destroyed without being called.
    if (ticket_.template has_pending_end<budget_type>()) {
      ticket_.end(retrier_access::budget(*config_), retrier_access::clk(*config_).now());
    }
  }

  // Installs the caller's cancellation handler (on the caller's thread, as Asio requires) and
  // posts the first step to ex_.
  void start() {
    cancellation_.install(*this, handler_, call_.stop, ex_);
    ::asio::post(ex_, step_handler{{this->shared_from_this()}});
  }

  [[nodiscard]] allocator_type get_allocator() const noexcept { return call_allocator(handler_); }

 private:
  enum class phase : unsigned char { between, attempting, waiting, finished };
  using self_ptr = std::shared_ptr<async_retry_op>;
  friend class call_cancellation<async_retry_op, Executor>;  // calls on_cancel

  // The handlers of the steps. Each keeps the operation alive and runs on ex_, with the
  // operation's allocator.
  struct handler_base {
    self_ptr self;
    using executor_type = Executor;
    executor_type get_executor() const noexcept { return self->ex_; }
    using allocator_type = typename async_retry_op::allocator_type;
    allocator_type get_allocator() const noexcept { return self->get_allocator(); }
  };
  struct step_handler : handler_base {
    void operator()() { this->self->next_attempt(); }
  };
  struct attempt_handler : handler_base {
    using cancellation_slot_type = ::asio::cancellation_slot;
    cancellation_slot_type get_cancellation_slot() const noexcept {
      return this->self->attempt_signal_.slot();
    }
    template <class... A>
    void operator()(A&&... args) {
      this->self->on_attempt(completion::make(std::forward<A>(args)...));
    }
  };
  struct wait_handler : handler_base {
    void operator()(const std::error_code& ec) { this->self->on_wait(ec); }
  };

  clock& clk() const noexcept { return retrier_access::clk(*config_); }
  budget_type& budget() noexcept { return retrier_access::budget(*config_); }

  void next_attempt() {
    phase_ = phase::between;
    if (cancelled_ || call_.stop.stop_requested()) return finish(end_reason::cancelled);
    const int attempt = attempt_ + 1;
    attempt_context context{attempt, call_.stop, duration::max()};
    if (call_.deadline != time_point::max()) {
      const time_point now = clk().now();
      if (now >= call_.deadline) return finish(end_reason::deadline_exceeded);
      context.time_left = call_.deadline - now;
    }
    if constexpr (!std::same_as<budget_type, no_budget>) {
      if (attempt == 1 && !ticket_.admit(budget(), clk().now(), retrier_access::random(*config_))) {
        return finish(end_reason::throttled);
      }
    }
    attempt_ = attempt;
    phase_ = phase::attempting;
    op_(std::as_const(context), attempt_handler{{this->shared_from_this()}});
  }

  void on_attempt(outcome<value_type, error_type> r) {
    phase_ = phase::between;
    attempt_signal_.slot().clear();
    result_.attempts = attempt_;
    if (r.has_value()) {
      if constexpr (!std::same_as<budget_type, no_budget>) {
        ticket_.succeeded(budget(), clk().now(), attempt_);
      }
      if (result_.last_error) {
        result_.previous_errors.push_back(std::move(*result_.last_error));
        result_.last_error.reset();
      }
      result_.value.emplace(*std::move(r));
      if constexpr (!std::same_as<typename retrier_types<Retrier>::on_attempt_type, no_hook>) {
        const attempt_event event{attempt_, attempt_status::success, std::nullopt, std::nullopt,
                                  end_reason::success};
        retrier_access::on_attempt (*config_)(event);
      }
      return finish(end_reason::success);
    }
    if (result_.last_error) result_.previous_errors.push_back(std::move(*result_.last_error));
    result_.last_error.emplace(std::move(r).error());
    // Cancelled during the attempt: no verdict, no record, no withdrawal, no on_retry (as the
    // sync retrier after a stop during an attempt).
    if (cancelled_ || call_.stop.stop_requested()) {
      if constexpr (!std::same_as<typename retrier_types<Retrier>::on_attempt_type, no_hook>) {
        const attempt_event event{attempt_, attempt_status::failure, std::nullopt, std::nullopt,
                                  end_reason::cancelled};
        retrier_access::on_attempt (*config_)(event);
      }
      return finish(end_reason::cancelled);
    }
    const classification verdict =
        retrier_access::to_classification<Retrier>(classify_, std::as_const(*result_.last_error));
    wait_start_ = clk().now();
    const retry_decision next =
        ticket_.failed(retrier_access::policy(*config_), budget(), attempt_, verdict, previous_,
                       retrier_access::random(*config_), wait_start_, call_.deadline);
    if constexpr (!std::same_as<typename retrier_types<Retrier>::on_attempt_type, no_hook>) {
      const attempt_event event = make_attempt_event(attempt_, verdict, next);
      retrier_access::on_attempt (*config_)(event);
    }
    if (!next.retry) return finish(next.reason);
    if constexpr (!std::same_as<typename retrier_types<Retrier>::on_retry_type, no_hook>) {
      retrier_access::on_retry (*config_)(attempt_, std::as_const(*result_.last_error), next.delay);
    }
    if (cancelled_) return finish(end_reason::cancelled);  // cancelled by the hook itself
    if (!timer_) {
      if constexpr (std::constructible_from<Timer, const Executor&, clock&>) {
        timer_.emplace(ex_, clk());
      } else {
        timer_.emplace(ex_);
      }
    }
    delay_ = next.delay;
    timer_->expires_after(next.delay);
    phase_ = phase::waiting;
    timer_->async_wait(wait_handler{{this->shared_from_this()}});
  }

  void on_wait(const std::error_code& ec) {
    phase_ = phase::between;
    if (ec || cancelled_ || call_.stop.stop_requested()) {
      // Interrupted: count the time actually waited, then end without another attempt.
      result_.slept = saturating_add(result_.slept, clk().now() - wait_start_);
      return finish(end_reason::cancelled);
    }
    result_.slept = saturating_add(result_.slept, delay_);
    previous_ = delay_;
    next_attempt();
  }

  void on_cancel(::asio::cancellation_type type) {
    if (phase_ == phase::finished || cancelled_) return;
    cancelled_ = true;
    if (phase_ == phase::attempting) {
      attempt_signal_.emit(type);  // the attempt in flight decides how fast it ends
    } else if (phase_ == phase::waiting) {
      timer_->cancel();
    }
  }

  void finish(end_reason reason) {
    phase_ = phase::finished;
    result_.reason = reason;
    if constexpr (!std::same_as<typename retrier_types<Retrier>::on_give_up_type, no_hook>) {
      if (reason != end_reason::success)
        retrier_access::on_give_up (*config_)(std::as_const(result_));
    }
    if constexpr (!std::same_as<typename retrier_types<Retrier>::on_end_type, no_hook>) {
      retrier_access::on_end (*config_)(std::as_const(result_));
    }
    if (ticket_.template has_pending_end<budget_type>()) ticket_.end(budget(), clk().now());
    cancellation_.clear();
    // Every step runs from a handler (never inside the initiating function), so the completion
    // may be dispatched: inline when the handler's executor is ex_ and this thread runs it.
    complete_call(work_, handler_, result_);
  }

  static duration saturating_add(duration a, duration b) noexcept {
    return stormguard::detail::saturating_add(a, b);
  }

  Retrier* config_;
  Executor ex_;
  Op op_;
  Classifier classify_;
  call_options call_;
  Handler handler_;
  call_work_t<Handler, Executor> work_;
  result_type result_{};
  request_budget ticket_{};
  phase phase_ = phase::between;
  bool cancelled_ = false;
  int attempt_ = 0;
  duration previous_{};
  duration delay_{};
  time_point wait_start_{};
  std::optional<Timer> timer_{};
  ::asio::cancellation_signal attempt_signal_{};
  call_cancellation<async_retry_op, Executor> cancellation_{};
};

template <class Timer, class Executor, class Retrier>
struct initiate_async_retry {
  Retrier* config;
  Executor ex;
  template <class Handler, class Op, class Classifier>
  void operator()(Handler&& handler, Op&& op, Classifier&& classify,
                  const call_options& call) const {
    using op_type = async_retry_op<Timer, Executor, Retrier, std::decay_t<Op>,
                                   std::decay_t<Classifier>, std::decay_t<Handler>>;
    start_call<op_type>(handler, *config, ex, std::forward<Op>(op),
                        std::forward<Classifier>(classify), call, std::forward<Handler>(handler));
  }
};

}  // namespace detail

/// Retries the asynchronous operation `op` with `config`'s policy, clock, generator, budget and
/// hooks (on_attempt, on_retry, on_give_up, on_end: called at the same points and in the same
/// order as by the sync retrier, on `ex`), as config(op, classify, call) would synchronously (see
/// retrier::operator() for every rule: the order of the checks, the budget protocol, the hooks, the
/// result), and completes with void(retry_result<T, E>) through `token`.
///
/// `op(const attempt_context&, CompletionToken&&)` initiates one attempt and completes with one of
///  - void(std::error_code): T = done_t, E = std::error_code (success = !ec);
///  - void(std::error_code, V): T = V, E = std::error_code (V is ignored on error);
///  - void(std::exception_ptr) or void(std::exception_ptr, V): E = std::exception_ptr, e.g.
///    asio::co_spawn(ex, coroutine(ctx), token) for an attempt written as a coroutine;
///  - void(R) with R expected-like (stormguard::outcome, std::expected): as R.
///
/// Write it generic in the token (`auto&& token`, forwarded to an Asio initiating function or
/// asio::async_initiate): async_retry calls it once with a probe token, inside decltype only, to
/// learn that signature. `classify(const E&)` returns a classification or a bool, as for retrier.
///
/// Time: clock() of `config` (deadline, budgets, time_left, slept); the backoff waits on a
/// `Timer` built on `ex` (default asio::steady_timer, which assumes config's clock is
/// real_clock; testing::manual_timer for a testing::manual_clock).
///
/// Cancellation and deadline:
///  - the token's associated cancellation slot (terminal, partial or total): during a backoff wait,
///    the wait ends at once (the timer is cancelled); during an attempt, the signal is forwarded
///    with its type to the attempt's handler's slot, and the call ends when the attempt completes
///    (the attempt's own result is kept: its error becomes last_error, a success is a success).
///    Either way no further attempt starts and reason is end_reason::cancelled. The slot is
///    emitted on ex's thread (Asio's rule for cancellation slots);
///  - call.stop (std::stop_token): the same, from any thread (the request is posted to `ex`);
///  - call.deadline: no attempt starts at or after it and no wait would end past it
///    (deadline_exceeded); each attempt gets the time left in attempt_context::time_left and must
///    bound itself by it (http::async_client does). To cut an attempt that ignores it, race the
///    call against a timer (asio::experimental::make_parallel_group(...).async_wait(
///    wait_for_one(), ...)): the loser is cancelled as above.
///
/// Threads and executors: every step (the attempts' initiation, the classifier, the hooks, the
/// budget calls) runs on `ex`, which must not run two of them at once (one thread, or a
/// strand); the first step is posted to `ex`, so async_retry itself may be called from any thread
/// (with use_future, from one that does not run `ex`). The completion handler runs on its
/// associated executor (`ex` when it has none), and never inside async_retry. `config` (with its
/// clock, generator and budget) must outlive the operation; the budget may be shared with other
/// threads. An exception thrown by `op`'s initiation, the classifier or a hook propagates out of
/// `ex`'s run(); the budget protocol is ended and the handler is destroyed without being called.
///
/// Memory: one block per call, from the handler's associated allocator (Asio's thread-local
/// recycling allocator by default: no malloc once warm), plus previous_errors from the second
/// failed attempt on, as for the sync retrier (bench/async_benchmark.cpp counts them).
///
/// Example (tests/integration/reference_http_examples_test.cpp, run by the tests):
/// \snippet reference_http_examples_test.cpp async_retry
template <class Timer = ::asio::steady_timer, class Executor, bit_generator G, retry_budget<G> B,
          class OnRetry, class OnGiveUp, class OnAttempt, class OnEnd, async_attempt Op,
          class Classifier, class CompletionToken>
requires backoff_timer<Timer, Executor>
auto async_retry(retrier<G, B, OnRetry, OnGiveUp, OnAttempt, OnEnd>& config, const Executor& ex,
                 Op&& op, Classifier&& classify, const call_options& call,
                 CompletionToken&& token) {
  using config_type = retrier<G, B, OnRetry, OnGiveUp, OnAttempt, OnEnd>;
  return ::asio::async_initiate<CompletionToken, void(async_retry_result_t<std::decay_t<Op>>)>(
      detail::initiate_async_retry<Timer, Executor, config_type>{&config, ex}, token,
      std::forward<Op>(op), std::forward<Classifier>(classify), call);
}

/// async_retry(config, ex, op, classify, call_options{}, token).
template <class Timer = ::asio::steady_timer, class Executor, bit_generator G, retry_budget<G> B,
          class OnRetry, class OnGiveUp, class OnAttempt, class OnEnd, async_attempt Op,
          class Classifier, class CompletionToken>
requires backoff_timer<Timer, Executor>
auto async_retry(retrier<G, B, OnRetry, OnGiveUp, OnAttempt, OnEnd>& config, const Executor& ex,
                 Op&& op, Classifier&& classify, CompletionToken&& token) {
  return async_retry<Timer>(config, ex, std::forward<Op>(op), std::forward<Classifier>(classify),
                            call_options{}, std::forward<CompletionToken>(token));
}

/// async_retry(config, ex, op, default_classifier{}, call_options{}, token).
template <class Timer = ::asio::steady_timer, class Executor, bit_generator G, retry_budget<G> B,
          class OnRetry, class OnGiveUp, class OnAttempt, class OnEnd, async_attempt Op,
          class CompletionToken>
requires backoff_timer<Timer, Executor>
auto async_retry(retrier<G, B, OnRetry, OnGiveUp, OnAttempt, OnEnd>& config, const Executor& ex,
                 Op&& op, CompletionToken&& token) {
  return async_retry<Timer>(config, ex, std::forward<Op>(op), default_classifier{}, call_options{},
                            std::forward<CompletionToken>(token));
}

}  // namespace stormguard

#endif  // STORMGUARD_ASIO_RETRY_HPP
