// SPDX-License-Identifier: Apache-2.0
// stormguard::grpc::client::async_call: the synchronous call's steps (client.cpp) in the same
// order, driven by gRPC's callbacks instead of a blocked thread: each attempt ends in the callback
// its RPC was given, each backoff wait in a grpc::Alarm's callback. The budget hears the same
// sequence through request_budget (budget_protocol.hpp), as it does from stormguard::retrier.
//
// One call is one async_call_state, owned by the callbacks in flight (a shared_ptr each): the
// attempt's completion or the alarm's. A stop request reaches it through a std::stop_callback
// holding a weak reference, and cancels whichever is in flight.
#include <grpcpp/alarm.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include "grpc/client_impl.hpp"
#include "stormguard/budget_protocol.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/grpc/client.hpp"

namespace stormguard::grpc {

namespace detail {

class async_call_state : public std::enable_shared_from_this<async_call_state> {
 public:
  async_call_state(client::impl& owner, client::async_attempt rpc, call_options call,
                   std::function<void(result)> done)
      : client_(owner), rpc_(std::move(rpc)), call_(std::move(call)), done_(std::move(done)) {}

  // Registers the stop callback (which needs the shared_ptr to exist) and starts attempt 1.
  void start() {
    on_stop_.emplace(call_.stop, [weak = weak_from_this()] {
      if (const auto self = weak.lock()) self->on_stop();
    });
    try {
      next_attempt();
    } catch (...) {
      // From the caller's rpc or configure, on async_call's own thread: the call is over.
      ticket_.end(*client_.budget, client_.clk->now());
      throw;
    }
  }

 private:
  void next_attempt() {
    if (call_.stop.stop_requested()) return finish(end_reason::cancelled);
    const time_point now = client_.clk->now();
    duration time_left = duration::max();
    if (call_.deadline != time_point::max()) {
      if (now >= call_.deadline) return finish(end_reason::deadline_exceeded);
      time_left = call_.deadline - now;
    }
    if (attempts_ == 0 && !ticket_.admit(*client_.budget, now, client_.random)) {
      return finish(end_reason::throttled);
    }
    ++attempts_;
    auto ctx = std::make_shared<::grpc::ClientContext>();
    const attempt_setup setup =
        prepare_context(*ctx, call_, attempts_, time_left, client_.options, *client_.channel);
    {
      const stormguard::detail::lock hold(mutex_);
      in_flight_ = ctx;  // a stop request from now on cancels it
    }
    // The completion holds the state, not the context: gRPC destroys the callable after its own
    // last use of the call, and a context destroyed there (its call's last reference) freed the
    // call under gRPC's feet (ASan: a double free in the completion queue).
    rpc_(ctx.get(), [self = shared_from_this(), setup](::grpc::Status status) {
      self->attempt_ended(setup, status);
    });
  }

  void attempt_ended(const attempt_setup& setup, const ::grpc::Status& status) {
    std::shared_ptr<::grpc::ClientContext> ctx;
    {
      const stormguard::detail::lock hold(mutex_);
      ctx = std::move(in_flight_);
    }
    const time_point now = client_.clk->now();
    if (status.ok()) {
      ctx.reset();
      ticket_.succeeded(*client_.budget, now, attempts_);
      last_.reset();
      tell({attempts_, attempt_status::success, std::nullopt, std::nullopt, end_reason::success});
      return finish(end_reason::success);
    }
    last_ = read_failure(status, *ctx, setup, client_.options, *client_.channel);
    ctx.reset();  // here, while gRPC still holds the call: not in the callable's destruction
    // Stopped during the attempt: no verdict, no record, no withdrawal (as the retrier does).
    if (call_.stop.stop_requested()) {
      tell({attempts_, attempt_status::failure, std::nullopt, std::nullopt, end_reason::cancelled});
      return finish(end_reason::cancelled);
    }
    const classification verdict = verdict_of(*last_, client_.options, call_.idempotent);
    const retry_decision next = ticket_.failed(client_.policy, *client_.budget, attempts_, verdict,
                                               previous_, client_.random, now, call_.deadline);
    tell(stormguard::detail::make_attempt_event(attempts_, verdict, next));
    if (!next.retry) return finish(next.reason);
    wait(next.delay);
  }

  void wait(duration delay) {
    auto alarm = std::make_shared<::grpc::Alarm>();
    {
      const stormguard::detail::lock hold(mutex_);
      alarm_ = alarm;  // a stop request from now on cancels it
    }
    wait_started_ = client_.clk->now();
    const auto until = std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(delay);
    alarm->Set(until,
               [self = shared_from_this(), delay](bool fired) { self->wait_ended(fired, delay); });
    // A stop request between the store above and Set found nothing to cancel yet.
    if (call_.stop.stop_requested()) alarm->Cancel();
  }

  void wait_ended(bool fired, duration delay) {
    // The alarm's callable holds this state: drop the state's hold on the alarm (gRPC keeps its
    // own until the callable has returned), or the two would keep each other alive.
    std::shared_ptr<::grpc::Alarm> done_alarm;
    {
      const stormguard::detail::lock hold(mutex_);
      done_alarm = std::move(alarm_);
    }
    if (!fired || call_.stop.stop_requested()) {
      slept_ = stormguard::detail::saturating_add(slept_, client_.clk->now() - wait_started_);
      return finish(end_reason::cancelled);
    }
    slept_ = stormguard::detail::saturating_add(slept_, delay);
    previous_ = delay;
    try {
      next_attempt();
    } catch (...) {
      // The caller's rpc or configure threw on a gRPC thread, which would swallow it and leave
      // the call without an end: it ends here, said in its status.
      finish(end_reason::not_retryable,
             ::grpc::Status(::grpc::StatusCode::UNKNOWN,
                            "stormguard: the call's rpc or configure threw on attempt " +
                                std::to_string(attempts_)));
    }
  }

  // The caller's on_attempt hook; an exception from it is dropped (a gRPC thread would lose it).
  void tell(const attempt_event& e) noexcept {
    if (!client_.options.on_attempt) return;
    try {
      client_.options.on_attempt(call_.method, e);
    } catch (...) {  // NOLINT(bugprone-empty-catch): a failed diagnostic changes nothing
    }
  }

  void on_stop() {
    std::shared_ptr<::grpc::ClientContext> ctx;
    std::shared_ptr<::grpc::Alarm> alarm;
    {
      const stormguard::detail::lock hold(mutex_);
      ctx = in_flight_;
      alarm = alarm_;
    }
    // Outside the lock: gRPC may run the attempt's or the alarm's callback on this thread.
    if (ctx) ctx->TryCancel();
    if (alarm) alarm->Cancel();
  }

  void finish(end_reason reason, std::optional<::grpc::Status> status = std::nullopt) {
    if (!done_) return;  // ended already (an exception from the caller's done)
    ticket_.end(*client_.budget, client_.clk->now());
    result r = finish_result(reason, attempts_, slept_, last_ ? &*last_ : nullptr);
    if (status) r.status = std::move(*status);
    tell_end(client_.options, call_.method, r);
    const auto done = std::move(done_);
    done(std::move(r));
  }

  client::impl& client_;
  client::async_attempt rpc_;
  call_options call_;
  std::function<void(result)> done_;
  // The call's progress: touched by one callback at a time (each step starts the next).
  request_budget ticket_;
  int attempts_ = 0;
  duration previous_{};
  duration slept_{};
  time_point wait_started_{};
  std::optional<failed_attempt> last_;
  // What a stop request cancels, set by the steps and read by on_stop (any thread).
  stormguard::detail::mutex mutex_;
  std::shared_ptr<::grpc::ClientContext> in_flight_ STORMGUARD_GUARDED_BY(mutex_);
  std::shared_ptr<::grpc::Alarm> alarm_ STORMGUARD_GUARDED_BY(mutex_);
  // Last: deregistered (waiting for a running on_stop) before the members it reads go.
  std::optional<std::stop_callback<std::function<void()>>> on_stop_;
};

}  // namespace detail

void client::start_async(async_attempt attempt, call_options call,
                         std::function<void(result)> done) {
  const auto state = std::make_shared<detail::async_call_state>(*impl_, std::move(attempt),
                                                                std::move(call), std::move(done));
  state->start();
}

}  // namespace stormguard::grpc
