// SPDX-License-Identifier: Apache-2.0
// stormguard::grpc::client::async_hedged_call: gRFC A6 hedging on gRPC's callback API, decided by
// hedging_policy::plan_next (the one decision every hedging executor and the simulator call), with
// the steps of stormguard::async_hedge (asio/hedge.hpp) in the same order: copy 1, the delay's
// delay's wake-up, a copy at once after a non-fatal failure, the first success or fatal failure
// commits, losers cancelled, the call completes when every copy has ended.
//
// gRPC runs the copies' completions on its own threads, and the client's hedge_timer the
// wake-ups on its thread, two of them at once when two events come together: every event takes
// the state's mutex, changes the state and notes what must follow (copies to start, contexts to
// cancel, a wake-up to arm or disarm, the end); the notes are carried out after the mutex is
// released, since gRPC may run a callback of this call inline on the thread that starts or
// cancels something.

#include <algorithm>
#include <array>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "grpc/client_impl.hpp"
#include "stormguard/budget_protocol.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/hedging.hpp"

namespace stormguard::grpc {

namespace detail {

namespace {

// What a failed copy means for the hedged call.
enum class copy_verdict : unsigned char {
  non_fatal,    // the next copy at once
  fatal,        // the call fails with it
  pushback,     // the next copy no sooner than the pushback
  stop_copies,  // a server's "do not retry": no further copy, those in flight go on
  deadline,     // the call's deadline ended it: the call is over
};

copy_verdict verdict_of_copy(const failed_attempt& f, const status_codes& non_fatal) noexcept {
  if (f.cut_by_deadline) return copy_verdict::deadline;
  if (f.failure.pushback) {
    return f.failure.pushback->do_not_retry ? copy_verdict::stop_copies : copy_verdict::pushback;
  }
  if (f.failure.never_sent || f.failure.attempt_timed_out) return copy_verdict::non_fatal;
  const int code = static_cast<int>(f.failure.status.error_code());
  const auto read =
      is_known_status_code(code) ? f.failure.status.error_code() : ::grpc::StatusCode::UNKNOWN;
  return non_fatal.contains(read) ? copy_verdict::non_fatal : copy_verdict::fatal;
}

}  // namespace

class hedged_call_state final : public timer_target,
                                public std::enable_shared_from_this<hedged_call_state> {
 public:
  hedged_call_state(client::impl& owner, client::hedge_attempt rpc, std::function<void(int)> commit,
                    call_options call, std::function<void(result)> done)
      : client_(owner),
        rpc_(std::move(rpc)),
        commit_(std::move(commit)),
        call_(std::move(call)),
        done_(std::move(done)) {}

  // Registers the stop callback, then decides and sends copy 1 on the caller's thread. An
  // exception from the caller's rpc or configure on copy 1 propagates, and done is not called.
  void start() {
    on_stop_.emplace(call_.stop, [weak = weak_from_this()] {
      if (const auto self = weak.lock()) self->on_stop();
    });
    notes n;
    {
      const stormguard::detail::lock hold(mutex_);
      ++busy_;
      initiating_ = true;
      first_copy(n);
    }
    carry_out(n);  // copy 1's exception propagates (launch)
    const stormguard::detail::lock hold(mutex_);
    initiating_ = false;
  }

 private:
  static constexpr int k_max_copies = 5;

  struct copy_slot {
    std::shared_ptr<::grpc::ClientContext> context;
    attempt_setup setup{};
    bool in_flight = false;
    bool cancelled = false;
  };

  // What gRPC must be told once the mutex is released.
  struct notes {
    std::array<int, k_max_copies> send{};  // copies to start, in order
    int sends = 0;
    std::array<std::shared_ptr<::grpc::ClientContext>, k_max_copies> cancel{};
    int cancels = 0;
    std::optional<hedge_timer::key> disarm;  // the wake-up armed in an earlier step
    bool arm = false;                        // arm a wake-up after arm_after
    duration arm_after{};
    std::uint32_t arm_generation = 0;
  };

  any_budget& budget() const noexcept { return *client_.budget; }
  time_point now() const { return client_.clk->now(); }

  void first_copy(notes& n) STORMGUARD_REQUIRES(mutex_) {
    start_ = now();
    if (call_.stop.stop_requested()) {
      decide(end_reason::cancelled, n);
    } else if (call_.deadline != time_point::max() && start_ >= call_.deadline) {
      decide(end_reason::deadline_exceeded, n);
    } else if (!ticket_.admit(budget(), start_, client_.random)) {
      decide(end_reason::throttled, n);
    } else {
      delay_ = client_.hedging.delay(client_.tracker.get());
      send_copy(start_, n);
    }
    settle();
  }

  // Notes copy sent+1 to start at `now` (already charged when not the first), then plans the one
  // after it.
  void send_copy(time_point now, notes& n) STORMGUARD_REQUIRES(mutex_) {
    const int copy = report_.sent + 1;
    report_.sent = copy;
    copy_slot& c = copies_[static_cast<std::size_t>(copy - 1)];
    c.context = std::make_shared<::grpc::ClientContext>();  // registered: a decision cancels it
    c.in_flight = true;
    ++in_flight_;
    last_sent_ = now;
    pushback_.reset();  // a pushback postpones only the copy after it
    n.send[static_cast<std::size_t>(n.sends++)] = copy;
    plan(now, false, n);
  }

  // Plans the next copy after the state changed at `now`: notes it to be sent, arms a wake-up,
  // or notes why none will go.
  void plan(time_point now, bool non_fatal, notes& n) STORMGUARD_REQUIRES(mutex_) {
    const hedge_stop stop = report_.stop;
    if (decided_ || refused_ ||
        (stop != hedge_stop::none && stop != hedge_stop::deadline_exceeded)) {
      return;
    }
    const hedge_plan next = client_.hedging.plan_next(report_.sent, last_sent_, now, pushback_,
                                                      call_.deadline, delay_, non_fatal);
    if (!next.send) {
      report_.stop = next.reason;
      disarm(n);
      return;
    }
    report_.stop = hedge_stop::none;
    if (next.at <= now) {
      disarm(n);
      return charge_and_send(now, n);
    }
    arm(next.at - now, n);
  }

  void charge_and_send(time_point now, notes& n) STORMGUARD_REQUIRES(mutex_) {
    if (!try_charge_hedge(budget(), now, client_.random)) {
      ++report_.refused;
      refused_ = true;  // no further copy; the copies in flight keep running
      return;
    }
    send_copy(now, n);
  }

  void arm(duration d, notes& n) STORMGUARD_REQUIRES(mutex_) {
    disarm(n);
    armed_ = true;
    keep_ = shared_from_this();  // the timer holds only a weak reference
    n.arm = true;
    n.arm_after = d;
    n.arm_generation = generation_;
  }

  void disarm(notes& n) STORMGUARD_REQUIRES(mutex_) {
    ++generation_;  // a wake-up still armed is stale
    armed_ = false;
    keep_.reset();  // never the last reference: every event's caller holds one
    n.arm = false;  // one noted in this same step is never armed
    if (wake_) n.disarm = std::exchange(wake_, std::nullopt);
  }

  // The call's outcome is known: cancel what still runs (the call completes in settle()).
  void decide(end_reason reason, notes& n) STORMGUARD_REQUIRES(mutex_) {
    if (decided_ && !(caller_cancelled_ && reason == end_reason::success)) return;
    decided_ = true;
    reason_ = reason;
    disarm(n);
    if (reason != end_reason::cancelled) cancel_copies(n);
  }

  void cancel_copies(notes& n) STORMGUARD_REQUIRES(mutex_) {
    for (copy_slot& c : copies_) {
      if (!c.in_flight || c.cancelled) continue;
      c.cancelled = true;
      ++report_.cancelled;
      n.cancel[static_cast<std::size_t>(n.cancels++)] = c.context;
    }
  }

  // Whether a wake-up is armed for a copy still to be sent.
  [[nodiscard]] bool waits_pending_copy() const noexcept STORMGUARD_REQUIRES(mutex_) {
    return armed_ && report_.stop == hedge_stop::none && !refused_;
  }

  [[nodiscard]] end_reason failure_reason() const STORMGUARD_REQUIRES(mutex_) {
    if (refused_) return end_reason::budget_exhausted;
    switch (report_.stop) {
      case hedge_stop::retry_after_too_long:
        return end_reason::retry_after_too_long;
      case hedge_stop::deadline_exceeded:
        return end_reason::deadline_exceeded;
      case hedge_stop::server_refused:
        return end_reason::server_refused;
      default:
        if (call_.deadline != time_point::max() && now() >= call_.deadline) {
          return end_reason::deadline_exceeded;
        }
        return end_reason::attempts_exhausted;
    }
  }

  // Marks the call finished once it is decided and no copy is in flight.
  void settle() STORMGUARD_REQUIRES(mutex_) {
    if (!decided_ || in_flight_ > 0 || finished_) return;
    finished_ = true;  // done runs when the last step in progress ends (end_step)
  }

  void on_copy(int copy, const ::grpc::Status& status) {
    notes n;
    {
      const stormguard::detail::lock hold(mutex_);
      ++busy_;
      copy_slot& c = copies_[static_cast<std::size_t>(copy - 1)];
      // Released here, while gRPC still holds the call: not in the callable's destruction.
      const std::shared_ptr<::grpc::ClientContext> context = std::move(c.context);
      c.in_flight = false;
      --in_flight_;
      copy_ended(copy, c, status, *context, n);
      settle();
    }
    carry_out(n);
  }

  void copy_ended(int copy, const copy_slot& c, const ::grpc::Status& status,
                  const ::grpc::ClientContext& context, notes& n) STORMGUARD_REQUIRES(mutex_) {
    const time_point t = now();
    if (copy > 1) hedge_ended(budget(), t);
    const bool open = !decided_ || (caller_cancelled_ && report_.winner == 0);
    if ((c.cancelled && !caller_cancelled_) || !open) return;  // a loser's late answer
    if (status.ok()) {
      ticket_.succeeded(budget(), t, copy);
      if (latency_tracker* tracker = client_.tracker.get()) tracker->record(t - start_);
      commit_(copy);
      last_.reset();
      report_.winner = copy;
      return decide(end_reason::success, n);
    }
    last_ = read_failure(status, context, c.setup, client_.options, *client_.channel);
    if (caller_cancelled_) return;
    const copy_verdict verdict = verdict_of_copy(*last_, client_.options.hedging.non_fatal);
    budget().record(t, attempt_report{verdict == copy_verdict::fatal ? attempt_status::not_retryable
                                                                     : attempt_status::failure,
                                      copy, attempt_status::success});
    switch (verdict) {
      case copy_verdict::fatal:
        return decide(end_reason::not_retryable, n);  // the call fails with it (gRFC A6)
      case copy_verdict::deadline:
        return decide(end_reason::deadline_exceeded, n);
      case copy_verdict::stop_copies:
        if (report_.stop == hedge_stop::none || report_.stop == hedge_stop::deadline_exceeded) {
          report_.stop = hedge_stop::server_refused;
        }
        disarm(n);
        break;
      case copy_verdict::pushback:
        pushback_ = stormguard::pushback{false, last_->failure.pushback->delay};
        plan(t, true, n);
        break;
      case copy_verdict::non_fatal:
        plan(t, true, n);
        break;
    }
    if (in_flight_ == 0 && !waits_pending_copy() && !decided_) decide(failure_reason(), n);
  }

  void on_timer(std::uint32_t generation) override {
    notes n;
    {
      const stormguard::detail::lock hold(mutex_);
      if (generation != generation_ || decided_) return;  // disarmed since, or decided
      ++busy_;
      armed_ = false;
      wake_.reset();
      keep_.reset();  // the timer's caller holds the state
      charge_and_send(now(), n);
      if (in_flight_ == 0 && !waits_pending_copy() && !decided_) decide(failure_reason(), n);
      settle();
    }
    carry_out(n);
  }

  void on_stop() {
    notes n;
    {
      const stormguard::detail::lock hold(mutex_);
      if (finished_ || decided_) return;
      if (report_.sent == 0) return;  // start() is deciding copy 1 and sees the stop
      ++busy_;
      caller_cancelled_ = true;
      decided_ = true;
      reason_ = end_reason::cancelled;
      disarm(n);
      cancel_copies(n);
    }
    carry_out(n);
  }

  // Tells gRPC what the step noted, outside the mutex, then ends the step (also when the
  // caller's rpc throws out of copy 1's launch).
  void carry_out(notes& n) {
    struct step_end {
      hedged_call_state* self;
      notes* n;
      ~step_end() { self->end_step(*n); }
    } const ending{this, &n};
    for (int i = 0; i < n.cancels; ++i) n.cancel[static_cast<std::size_t>(i)]->TryCancel();
    if (n.disarm) client_.timer.disarm(*n.disarm);
    if (n.arm) {
      const auto at = hedge_timer::clock::now() +
                      std::chrono::duration_cast<hedge_timer::clock::duration>(
                          std::min<duration>(n.arm_after, std::chrono::hours(24 * 365)));
      const hedge_timer::key k = client_.timer.arm(at, weak_from_this(), n.arm_generation);
      const stormguard::detail::lock hold(mutex_);
      if (n.arm_generation == generation_) {
        wake_ = k;
      } else {
        client_.timer.disarm(k);  // disarmed by another thread's step before it was armed
      }
    }
    for (int i = 0; i < n.sends; ++i) launch(n.send[static_cast<std::size_t>(i)]);
  }

  // A step (an event's handling) ends: it drops what it held of the copies, and the last step
  // of a finished call runs done. done waits for every step in progress, so that no thread of
  // the call still holds a copy's context (and, through it, the client's channel) or touches
  // the client once the caller has its result and may destroy the client: a context's last
  // reference dropped after that, on a gRPC thread, destroyed the channel there (ASan: a double
  // free inside gRPC).
  void end_step(notes& n) noexcept {
    for (auto& context : n.cancel) context.reset();
    bool run_done = false;
    {
      const stormguard::detail::lock hold(mutex_);
      --busy_;
      if (busy_ == 0 && finished_ && !ended_) {
        ended_ = true;
        run_done = true;
      }
    }
    if (run_done) finish();
  }

  // Starts copy `copy` on the context send_copy registered for it.
  void launch(int copy) {
    std::shared_ptr<::grpc::ClientContext> context;
    duration time_left = duration::max();
    {
      const stormguard::detail::lock hold(mutex_);
      context = copies_[static_cast<std::size_t>(copy - 1)].context;
      if (call_.deadline != time_point::max()) time_left = call_.deadline - last_sent_;
    }
    attempt_setup setup{};
    try {
      setup = prepare_context(*context, call_, copy, time_left, client_.options, *client_.channel);
      {
        const stormguard::detail::lock hold(mutex_);
        copies_[static_cast<std::size_t>(copy - 1)].setup = setup;
      }
      rpc_(copy, context.get(), [self = shared_from_this(), copy](::grpc::Status status) {
        self->on_copy(copy, status);
      });
    } catch (...) {
      // Copy 1 inside async_hedged_call: the caller has the exception, and done is not called.
      const bool rethrow = copy == 1 && drop_done_if_initiating();
      threw(copy);
      if (rethrow) throw;
    }
  }

  [[nodiscard]] bool drop_done_if_initiating() {
    const stormguard::detail::lock hold(mutex_);
    if (!initiating_) return false;
    done_ = nullptr;
    return true;
  }

  // The caller's rpc or configure threw for copy `copy`: the copy never started, and the call
  // fails (on a gRPC thread, which would swallow the exception and leave the call without end).
  void threw(int copy) {
    notes n;
    {
      const stormguard::detail::lock hold(mutex_);
      ++busy_;
      copy_slot& c = copies_[static_cast<std::size_t>(copy - 1)];
      c.context.reset();
      c.in_flight = false;
      --in_flight_;
      if (copy > 1) hedge_ended(budget(), now());
      if (!decided_) {
        thrown_ = ::grpc::Status(
            ::grpc::StatusCode::UNKNOWN,
            "stormguard: the call's rpc or configure threw on copy " + std::to_string(copy));
        decide(end_reason::not_retryable, n);
      }
      settle();
    }
    carry_out(n);
  }

  void finish() noexcept {
    std::function<void(result)> done;
    result r;
    {
      const stormguard::detail::lock hold(mutex_);
      ticket_.end(budget(), now());
      if (!done_) return;  // copy 1 threw: the caller has the exception
      done = std::move(done_);
      r = finish_result(reason_, report_.sent, duration::zero(), last_ ? &*last_ : nullptr);
      if (thrown_) r.status = *thrown_;
      r.hedges = report_;
      if (reason_ == end_reason::success) r.status = ::grpc::Status::OK;
    }
    tell_end(client_.options, call_.method, r);
    done(std::move(r));
  }

  client::impl& client_;
  client::hedge_attempt rpc_;
  std::function<void(int)> commit_;
  call_options call_;
  stormguard::detail::mutex mutex_;
  std::function<void(result)> done_ STORMGUARD_GUARDED_BY(mutex_);
  request_budget ticket_ STORMGUARD_GUARDED_BY(mutex_);
  hedge_report report_ STORMGUARD_GUARDED_BY(mutex_){};
  end_reason reason_ STORMGUARD_GUARDED_BY(mutex_) = end_reason::success;
  std::optional<failed_attempt> last_ STORMGUARD_GUARDED_BY(mutex_);
  std::optional<::grpc::Status> thrown_ STORMGUARD_GUARDED_BY(mutex_);
  std::array<copy_slot, k_max_copies> copies_ STORMGUARD_GUARDED_BY(mutex_){};
  std::optional<hedge_timer::key> wake_ STORMGUARD_GUARDED_BY(mutex_);  // the one armed
  bool armed_ STORMGUARD_GUARDED_BY(mutex_) = false;  // a wake-up is noted or armed
  // The state itself while a wake-up is armed: when no copy is in flight (a pushback's wait),
  // nothing else holds it.
  std::shared_ptr<hedged_call_state> keep_ STORMGUARD_GUARDED_BY(mutex_);
  std::optional<stormguard::pushback> pushback_ STORMGUARD_GUARDED_BY(mutex_);
  time_point start_ STORMGUARD_GUARDED_BY(mutex_){};
  time_point last_sent_ STORMGUARD_GUARDED_BY(mutex_){};
  duration delay_ STORMGUARD_GUARDED_BY(mutex_){};
  std::uint32_t generation_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  int in_flight_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  bool decided_ STORMGUARD_GUARDED_BY(mutex_) = false;
  bool finished_ STORMGUARD_GUARDED_BY(mutex_) = false;  // decided, no copy in flight
  bool ended_ STORMGUARD_GUARDED_BY(mutex_) = false;     // finish() has run or is running
  int busy_ STORMGUARD_GUARDED_BY(mutex_) = 0;           // steps in progress
  bool refused_ STORMGUARD_GUARDED_BY(mutex_) = false;
  bool caller_cancelled_ STORMGUARD_GUARDED_BY(mutex_) = false;
  bool initiating_ STORMGUARD_GUARDED_BY(mutex_) = false;
  // Last: deregistered (waiting for a running on_stop) before the members it reads go.
  std::optional<std::stop_callback<std::function<void()>>> on_stop_;
};

}  // namespace detail

void client::start_hedge(hedge_attempt attempt, std::function<void(int)> commit, call_options call,
                         std::function<void(result)> done) {
  if (!call.idempotent) {
    throw std::invalid_argument(
        "stormguard::grpc::client::async_hedged_call: call_options::idempotent is false; hedged "
        "copies of one call may all run on the server, so only a method marked idempotent is "
        "hedged");
  }
  const auto state = std::make_shared<detail::hedged_call_state>(
      *impl_, std::move(attempt), std::move(commit), std::move(call), std::move(done));
  state->start();
}

}  // namespace stormguard::grpc
