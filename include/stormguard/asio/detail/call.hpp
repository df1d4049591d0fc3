// SPDX-License-Identifier: Apache-2.0
// Internal: the Asio plumbing that every asynchronous call of stormguard::asio shares
// (async_retry in retry.hpp, async_hedge in hedge.hpp): the call's state allocated in one block
// with the completion handler's associated allocator, the outstanding work kept on the handler's
// executor, the caller's two ways to cancel (the handler's cancellation slot and
// call_options::stop), and the completion.
//
// An operation type Op that uses it: is owned by std::shared_ptr (enable_shared_from_this), has
// `void start()`, and `void on_cancel(asio::cancellation_type)` run on its executor (befriend
// call_cancellation<Op, Executor> when it is private).
//
//   start_call<op_type>(handler, config, ex, op, classify, call, std::move(handler));
//   ...in Op::start():  cancellation_.install(*this, handler_, call_.stop, ex_);
//   ...when done:       cancellation_.clear(); complete_call(work_, handler_, result_);
#ifndef STORMGUARD_ASIO_DETAIL_CALL_HPP
#define STORMGUARD_ASIO_DETAIL_CALL_HPP

#include <asio/associated_allocator.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/dispatch.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/experimental/append.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/recycling_allocator.hpp>
#include <memory>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

namespace stormguard::detail {

// The allocator of a call's state: the handler's associated allocator, Asio's thread-local
// recycling allocator when it has none (no malloc per call once warm).
template <class Handler>
using call_allocator_t = ::asio::associated_allocator_t<Handler, ::asio::recycling_allocator<void>>;

template <class Handler>
call_allocator_t<Handler> call_allocator(const Handler& handler) noexcept {
  return ::asio::get_associated_allocator(handler, ::asio::recycling_allocator<void>());
}

// Creates the call's state, Op(args...), in one block from `handler`'s associated allocator
// (read before `args`, which may hold the handler moved, are used) and starts it.
template <class Op, class Handler, class... Args>
void start_call(const Handler& handler, Args&&... args) {
  using alloc_type =
      typename std::allocator_traits<call_allocator_t<Handler>>::template rebind_alloc<Op>;
  const alloc_type alloc(call_allocator(handler));
  std::allocate_shared<Op>(alloc, std::forward<Args>(args)...)->start();
}

// Outstanding work on the handler's associated executor (`ex` when it has none), held from the
// initiation to the completion.
template <class Handler, class Executor>
using call_work_t = std::decay_t<decltype(::asio::prefer(
    std::declval<::asio::associated_executor_t<Handler, Executor>>(),
    ::asio::execution::outstanding_work.tracked))>;

template <class Handler, class Executor>
call_work_t<Handler, Executor> call_work(const Handler& handler, const Executor& ex) {
  return ::asio::prefer(::asio::get_associated_executor(handler, ex),
                        ::asio::execution::outstanding_work.tracked);
}

// Completes the call: `handler(result)` dispatched on the work's executor (inline when this
// thread runs it: every step runs from a handler, never inside the initiating function), the
// work released afterwards.
template <class Work, class Handler, class Result>
void complete_call(Work& work, Handler& handler, Result& result) {
  auto held = std::move(work);
  ::asio::dispatch(held, ::asio::experimental::append(std::move(handler), std::move(result)));
}

// The caller's two ways to cancel a call, both ending in op.on_cancel(type) on the call's
// executor: the completion handler's associated cancellation slot (emitted on the executor's
// thread, Asio's rule; installed on the caller's thread) and call_options::stop (from any thread:
// posted to the executor, terminal; ignored once the call's state is gone).
template <class Op, class Executor>
class call_cancellation {
 public:
  call_cancellation() = default;
  call_cancellation(const call_cancellation&) = delete;
  call_cancellation& operator=(const call_cancellation&) = delete;
  // A call whose step threw ends without clear(): no cancellation handler stays installed.
  ~call_cancellation() {
    if (slot_.is_connected()) slot_.clear();
  }

  template <class Handler>
  void install(Op& op, const Handler& handler, const std::stop_token& stop, const Executor& ex) {
    slot_ = ::asio::get_associated_cancellation_slot(handler);
    if (slot_.is_connected()) slot_.template emplace<canceller>(&op);
    if (stop.stop_possible()) stop_.emplace(stop, stop_requester{op.weak_from_this(), ex});
  }

  // Before the completion: the handler leaves the slot, and no stop request reaches the call.
  void clear() noexcept {
    if (slot_.is_connected()) {
      slot_.clear();
      slot_ = {};  // the slot's signal may die with the handler (the destructor must not touch it)
    }
    stop_.reset();
  }

 private:
  struct canceller {
    Op* self;
    void operator()(::asio::cancellation_type type) { self->on_cancel(type); }
  };
  struct stop_requester {
    std::weak_ptr<Op> weak;
    Executor ex;
    void operator()() noexcept {
      if (std::shared_ptr<Op> self = weak.lock()) {
        ::asio::post(
            ex, [self = std::move(self)] { self->on_cancel(::asio::cancellation_type::terminal); });
      }
    }
  };

  ::asio::cancellation_slot slot_{};
  std::optional<std::stop_callback<stop_requester>> stop_{};
};

}  // namespace stormguard::detail

#endif  // STORMGUARD_ASIO_DETAIL_CALL_HPP
