// SPDX-License-Identifier: Apache-2.0
/// \file
/// The asynchronous hedging executor, on standalone Asio (1.22).
///
/// `stormguard::async_hedge` sends copies of one asynchronous operation as a hedging_policy says
/// (hedging.hpp, gRFC A6 hedging semantics): copy 1 at once, the next copy `delay` later (or at
/// once when a copy failed with a non-fatal outcome), up to max_attempts copies; the first good
/// answer wins and the copies still in flight are cancelled through their own cancellation slots.
/// The operation completes only when every copy has completed (cancelled or not) and the delay
/// timer is done, so nothing of the call runs after the caller has its answer.
///
/// Every copy after the first is charged to the budget (try_charge_hedge): a refused copy is not
/// sent, no further copy is sent, and the copies in flight keep running (a spent budget never
/// cancels work already sent).
///
/// \code{.cpp}
///  stormguard::hedger hedge(policy, clock, rng, budget);
///  auto fetch = [&](const stormguard::attempt_context& ctx, auto&& token) {
///    return socket_op(ctx.time_left, std::forward<decltype(token)>(token));  // void(ec, T)
///  };
///  stormguard::hedge_result<T, std::error_code> r = co_await stormguard::async_hedge(
///      hedge, io.get_executor(), fetch, stormguard::default_classifier{}, {},
///      asio::use_awaitable);
///  // r.report: which copy won, copies sent, refused by the budget, cancelled
/// \endcode
///
/// Any completion token works, as for async_retry (asio/retry.hpp), and the copies are the same
/// kind of asynchronous operation: op(const attempt_context&, token) with one of the completion
/// signatures async_retry accepts. Tests use a virtual timer (testing::manual_timer or their own).
#ifndef STORMGUARD_ASIO_HEDGE_HPP
#define STORMGUARD_ASIO_HEDGE_HPP

#include <array>
#include <asio/defer.hpp>
#include <asio/dispatch.hpp>
#include <asio/recycling_allocator.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <system_error>
#include <type_traits>
#include <utility>

#include "stormguard/asio/retry.hpp"
#include "stormguard/hedging.hpp"

namespace stormguard {

/// The result of async_hedge: the winner's value, or the last copy's error and why the call
/// failed, and the per-call report. A plain value type, not thread-safe.
template <class T, class E>
struct [[nodiscard]] hedge_result {
  std::optional<T> value;       ///< set when reason == success
  std::optional<E> last_error;  ///< the error of the last copy that failed, when the call failed
  /// success; not_retryable (a copy failed with a fatal outcome: the classifier said stop);
  /// attempts_exhausted (every copy failed and max_attempts were sent); server_refused (a
  /// server's "do not retry" pushback stopped further copies); budget_exhausted (the budget refused
  /// the next copy and none was in flight); retry_after_too_long; deadline_exceeded; cancelled;
  /// throttled (the budget rejected the first copy).
  end_reason reason = end_reason::success;
  hedge_report report{};  ///< which copy won, copies sent, refused, cancelled

  /// True when the call succeeded (value is set).
  [[nodiscard]] bool ok() const noexcept { return reason == end_reason::success; }
  /// ok().
  explicit operator bool() const noexcept { return ok(); }
};

/// What a failed copy means for a hedged call, for a classifier that needs more than a
/// classification (the HTTP executor does): async_hedge accepts a classifier returning either.
struct hedge_verdict {
  /// The kinds of verdict.
  enum class kind : unsigned char {
    non_fatal,    ///< the next copy goes at once (gRFC A6's nonFatalStatusCodes)
    fatal,        ///< the call fails with this copy's error; the other copies are cancelled
    pushback,     ///< a server pushback: the next copy no sooner than `delay` from now
    stop_copies,  ///< a server's "do not retry": no further copy; the copies in flight continue
    wait,         ///< not a failure (e.g. another copy holds the idempotency key): wait for the
                  ///< others, plan nothing
  };
  kind what = kind::non_fatal;  ///< the kind
  duration delay{};             ///< for pushback: the server's delay (>= 0)

  /// A non-fatal outcome: the next copy goes at once.
  [[nodiscard]] static constexpr hedge_verdict non_fatal() noexcept { return {}; }
  /// A fatal outcome: the call fails with it.
  [[nodiscard]] static constexpr hedge_verdict fatal() noexcept { return {kind::fatal, {}}; }
  /// A pushback of `d` (negative counts as 0).
  [[nodiscard]] static constexpr hedge_verdict pushback(duration d) noexcept {
    return {kind::pushback, d < duration::zero() ? duration::zero() : d};
  }
  /// A server's "do not retry": no further copy.
  [[nodiscard]] static constexpr hedge_verdict stop_copies() noexcept {
    return {kind::stop_copies, {}};
  }
  /// Not a failure: wait for the other copies.
  [[nodiscard]] static constexpr hedge_verdict wait() noexcept { return {kind::wait, {}}; }
  /// A classification's meaning for hedging: retry = non_fatal, retry_after(d) = pushback(d),
  /// stop = fatal.
  [[nodiscard]] static constexpr hedge_verdict of(classification c) noexcept {
    switch (c.action()) {
      case classification::kind::retry:
        return non_fatal();
      case classification::kind::retry_after:
        return pushback(c.delay());
      case classification::kind::stop:
        break;
    }
    return fatal();
  }
  friend constexpr bool operator==(const hedge_verdict&, const hedge_verdict&) = default;
};

/// The configuration of hedged calls, as a retrier is for retried calls: the policy, the clock
/// (deadlines, budget calls, the tracker's latencies), the generator and the budget every copy
/// after the first draws from (no_budget: every copy is granted), and optionally a
/// latency_tracker for an adaptive delay (policy.options().delay_quantile > 0). The clock,
/// generator, budget and tracker are referenced and must outlive every call; the budget and the
/// tracker may be shared with other threads; the generator is used on the calls' executor.
///
/// Example (tests/integration/reference_http_examples_test.cpp, run by the tests):
/// \snippet reference_http_examples_test.cpp async_hedge
template <bit_generator G, retry_budget<G> B = no_budget>
class hedger {
 public:
  /// `tracker` may be null (a fixed delay, or the policy's delay until it knows enough).
  hedger(hedging_policy policy, clock& clk, G& rng, B& budget, latency_tracker* tracker = nullptr)
      : policy_(std::move(policy)), clock_(&clk), rng_(&rng), budget_(&budget), tracker_(tracker) {}

  /// A hedger without a budget: every copy is granted.
  hedger(hedging_policy policy, clock& clk, G& rng,
         latency_tracker* tracker = nullptr) requires std::same_as<B, no_budget>
      : policy_(std::move(policy)),
        clock_(&clk),
        rng_(&rng),
        budget_(&shared_no_budget()),
        tracker_(tracker) {}

  [[nodiscard]] const hedging_policy& policy() const noexcept { return policy_; }  ///< the policy
  [[nodiscard]] clock& clk() const noexcept { return *clock_; }                    ///< the clock
  [[nodiscard]] G& random() const noexcept { return *rng_; }                    ///< the generator
  [[nodiscard]] B& budget() const noexcept { return *budget_; }                 ///< the budget
  [[nodiscard]] latency_tracker* tracker() const noexcept { return tracker_; }  ///< or null

  /// The hook called once at the end of every hedged call: hook(reason, report), on the call's
  /// executor, after every copy and the timer are done and just before the completion handler
  /// runs. An empty hook (the default) costs one test per call. An exception thrown by the hook
  /// propagates out of the executor's run() and the handler is not called.
  using end_hook = std::function<void(end_reason, const hedge_report&)>;

  /// A copy of this hedger whose end hook is `hook` (replacing the current one; chain it
  /// yourself, as stormguard::metrics::instrument does). Copies share the clock, generator,
  /// budget and tracker.
  [[nodiscard]] hedger on_end(end_hook hook) const {
    hedger copy = *this;
    copy.on_end_ = std::move(hook);
    return copy;
  }
  /// The end hook (empty by default).
  [[nodiscard]] const end_hook& end_hook_function() const noexcept { return on_end_; }

 private:
  static no_budget& shared_no_budget() noexcept {
    static no_budget none;  // stateless
    return none;
  }
  hedging_policy policy_;
  clock* clock_;
  G* rng_;
  B* budget_;
  latency_tracker* tracker_;
  end_hook on_end_{};
};

/// A hedger without a budget: hedger(policy, clock, rng) is a hedger<G, no_budget>.
template <bit_generator G>
hedger(hedging_policy, clock&, G&, latency_tracker* = nullptr) -> hedger<G, no_budget>;

/// The result type of async_hedge for an operation of type Op (a hedge_result<T, E>; T and E
/// follow from Op's completion signature as for async_retry).
template <class Op>
#ifdef STORMGUARD_DOXYGEN  // the reference shows the type without the internal helper
using async_hedge_result_t = hedge_result<T, E>;
#else
using async_hedge_result_t = hedge_result<typename detail::attempt_completion_of<Op>::value_type,
                                          typename detail::attempt_completion_of<Op>::error_type>;
#endif

namespace detail {

// Room for a call's one deferred arming step inside the call's own block (Asio's "custom memory
// allocation" example): arming costs no allocation and leaves the thread's recycling cache to
// the call's other blocks. A step that does not fit, or finds the room taken, gets its memory
// from Asio's recycling allocator. Not thread-safe (the call's executor only).
class step_memory {
 public:
  step_memory() = default;
  step_memory(const step_memory&) = delete;
  step_memory& operator=(const step_memory&) = delete;

  void* allocate(std::size_t size) {
    if (!in_use_ && size <= sizeof(room_)) {
      in_use_ = true;
      return room_;
    }
    return fallback().allocate(blocks(size));
  }
  void deallocate(void* p, std::size_t size) noexcept {
    if (p == room_) {
      in_use_ = false;
      return;
    }
    fallback().deallocate(static_cast<std::max_align_t*>(p), blocks(size));
  }

 private:
  static ::asio::recycling_allocator<std::max_align_t> fallback() noexcept { return {}; }
  static std::size_t blocks(std::size_t size) noexcept {
    return (size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  }
  alignas(std::max_align_t) unsigned char room_[128];
  bool in_use_ = false;
};

// The allocator of step_memory, for a handler's associated allocator.
template <class T>
struct step_allocator {
  using value_type = T;
  step_memory* memory;
  explicit step_allocator(step_memory& m) noexcept : memory(&m) {}
  template <class U>
  step_allocator(const step_allocator<U>& other) noexcept  // implicit: allocator rebinding
      : memory(other.memory) {}
  T* allocate(std::size_t n) { return static_cast<T*>(memory->allocate(sizeof(T) * n)); }
  void deallocate(T* p, std::size_t n) noexcept { memory->deallocate(p, sizeof(T) * n); }
  template <class U>
  bool operator==(const step_allocator<U>& other) const noexcept {
    return memory == other.memory;
  }
};

// One hedged call: the state from the initiation to the completion, owned by shared_ptrs held by
// the handlers in flight (the copies, the timer wait, a posted step), allocated with the
// completion handler's associated allocator. Every member function runs on ex_ except the
// constructor's caller and the stop callback, which only posts.
template <class Timer, class Executor, class G, class B, class Op, class Classifier, class Handler>
class async_hedge_op : public std::enable_shared_from_this<
                           async_hedge_op<Timer, Executor, G, B, Op, Classifier, Handler>> {
 public:
  using completion = attempt_completion_of<Op>;
  using value_type = typename completion::value_type;
  using error_type = typename completion::error_type;
  using result_type = hedge_result<value_type, error_type>;
  using allocator_type = call_allocator_t<Handler>;
  static constexpr int k_max_copies = 5;

  template <class O, class C, class H>
  async_hedge_op(hedger<G, B>& config, const Executor& ex, O&& op, C&& classify,
                 const call_options& call, H&& handler)
      : config_(&config),
        ex_(ex),
        op_(std::forward<O>(op)),
        classify_(std::forward<C>(classify)),
        call_(call),
        handler_(std::forward<H>(handler)),
        work_(call_work(handler_, ex_)) {}

  async_hedge_op(const async_hedge_op&) = delete;
  async_hedge_op& operator=(const async_hedge_op&) = delete;

  ~async_hedge_op() {
    // Only when a step threw: the budget protocol still ends and no cancellation handler stays
    // installed; the handler is destroyed without being called.
    if (!finished_) end_budget();
  }

  void start() {
    cancellation_.install(*this, handler_, call_.stop, ex_);
    // Dispatched: on the thread that runs ex_ (a coroutine, a handler) the first copy is
    // initiated here, as Asio's composed operations initiate their first step, and the call
    // costs no step of its own; from any other thread the step is posted. Either way the
    // handler never runs inside the initiating call: settle() defers the completion while
    // initiating_ is set.
    initiating_ = true;
    ::asio::dispatch(ex_, step_handler{{this->shared_from_this()}});
    initiating_ = false;
  }

  [[nodiscard]] allocator_type get_allocator() const noexcept { return call_allocator(handler_); }

 private:
  using self_ptr = std::shared_ptr<async_hedge_op>;
  friend class call_cancellation<async_hedge_op, Executor>;  // calls on_cancel

  struct handler_base {
    self_ptr self;
    using executor_type = Executor;
    executor_type get_executor() const noexcept { return self->ex_; }
    using allocator_type = typename async_hedge_op::allocator_type;
    allocator_type get_allocator() const noexcept { return self->get_allocator(); }
  };
  // The call's own steps, dispatched or deferred to ex_ itself: no associated executor (which
  // would wrap each in a work-counting dispatcher for nothing).
  struct step_base {
    self_ptr self;
    using allocator_type = typename async_hedge_op::allocator_type;
    allocator_type get_allocator() const noexcept { return self->get_allocator(); }
  };
  struct step_handler : step_base {
    void operator()() { this->self->first_copy(); }
  };
  struct copy_handler : handler_base {
    int copy;
    using cancellation_slot_type = ::asio::cancellation_slot;
    cancellation_slot_type get_cancellation_slot() const noexcept {
      return this->self->copies_[static_cast<std::size_t>(copy - 1)].signal.slot();
    }
    template <class... A>
    void operator()(A&&... args) {
      this->self->on_copy(copy, completion::make(std::forward<A>(args)...));
    }
  };
  struct wait_handler : handler_base {
    std::uint32_t generation;
    void operator()(const std::error_code& ec) { this->self->on_wait(generation, ec); }
  };
  struct arm_handler : step_base {
    std::uint32_t generation;
    // From the call's own block (step_memory), not the handler's allocator.
    using allocator_type = step_allocator<void>;
    allocator_type get_allocator() const noexcept {
      return allocator_type(this->self->arm_memory_);
    }
    void operator()() { this->self->on_arm(generation); }
  };
  struct settle_handler : step_base {
    void operator()() { this->self->settle(); }
  };
  struct copy_state {
    ::asio::cancellation_signal signal{};
    bool in_flight = false;
    bool cancelled = false;
  };

  clock& clk() const noexcept { return config_->clk(); }
  hedge_verdict to_verdict(const error_type& error) {
    using verdict_type = std::remove_cvref_t<std::invoke_result_t<Classifier&, const error_type&>>;
    if constexpr (std::same_as<verdict_type, bool>) {
      return classify_(error) ? hedge_verdict::non_fatal() : hedge_verdict::fatal();
    } else if constexpr (std::same_as<verdict_type, hedge_verdict>) {
      return classify_(error);
    } else {
      return hedge_verdict::of(classify_(error));
    }
  }
  B& budget() const noexcept { return config_->budget(); }
  const hedging_policy& policy() const noexcept { return config_->policy(); }

  // Whether the call needs the time of its first copy: for the deadline, the budget, the
  // latency tracker, or a copy planned at once (delay 0). Otherwise the clock is first read when
  // the timer is armed, a step later in the same turn of the loop (on_arm): a call whose first
  // copy answers before that never reads it.
  [[nodiscard]] bool needs_start_time() const noexcept {
    return call_.deadline != time_point::max() || !std::same_as<B, no_budget> ||
           config_->tracker() != nullptr || policy().options().delay == duration::zero();
  }

  void first_copy() {
    if (needs_start_time()) {
      start_ = clk().now();
    } else {
      lazy_start_ = true;
    }
    if (cancelled_ || call_.stop.stop_requested()) {
      decide(end_reason::cancelled);
    } else if (call_.deadline != time_point::max() && start_ >= call_.deadline) {
      decide(end_reason::deadline_exceeded);
    } else if (!admit()) {
      decide(end_reason::throttled);
    } else {
      delay_ = policy().delay(config_->tracker());
      send_copy(start_);
    }
    settle();
  }

  bool admit() {
    if constexpr (std::same_as<B, no_budget>) {
      return true;
    } else {
      return ticket_.admit(budget(), start_, config_->random());
    }
  }

  // Sends the next copy at `now` (already charged when it is not the first) and plans the one
  // after it.
  void send_copy(time_point now) {
    const int copy = result_.report.sent + 1;
    result_.report.sent = copy;
    copy_state& c = copies_[static_cast<std::size_t>(copy - 1)];
    c.in_flight = true;
    ++in_flight_;
    last_sent_ = now;
    attempt_context context{copy, call_.stop, duration::max()};
    if (call_.deadline != time_point::max()) context.time_left = call_.deadline - now;
    pushback_.reset();  // a pushback postpones only the copy after it
    op_(std::as_const(context), copy_handler{{this->shared_from_this()}, copy});
    if (copy == 1 && policy().options().delay > duration::zero()) {
      // The timer is armed from a deferred step (a continuation: on an io_context it goes to the
      // running thread's private queue, no lock), at the same expiry (last_sent_ + delay): a
      // first copy that answers within this turn of the loop never touches the timer.
      ++waits_;
      ::asio::defer(ex_, arm_handler{{this->shared_from_this()}, generation_});
      return;
    }
    plan(now, false);
  }

  void on_arm(std::uint32_t generation) {
    --waits_;
    if (generation == generation_ && result_.report.sent == 1) {
      const time_point now = clk().now();
      if (lazy_start_) {
        // The first copy left a step ago, in this turn of the loop: its time is now.
        lazy_start_ = false;
        start_ = now;
        last_sent_ = now;
      }
      plan(now, false);
    }
    settle();
  }

  // Plans the next copy after the state changed at `now`: sends it at once, arms the timer, or
  // notes why none will go.
  void plan(time_point now, bool non_fatal) {
    // A copy past the deadline on the delay may still go sooner after a non-fatal failure;
    // the other stops are final.
    const hedge_stop stop = result_.report.stop;
    if (decided_ || refused_ ||
        (stop != hedge_stop::none && stop != hedge_stop::deadline_exceeded)) {
      return;
    }
    const hedge_plan next = policy().plan_next(result_.report.sent, last_sent_, now, pushback_,
                                               call_.deadline, delay_, non_fatal);
    if (!next.send) {
      result_.report.stop = next.reason;
      disarm();
      return;
    }
    result_.report.stop = hedge_stop::none;
    if (next.at <= now) {
      disarm();
      return charge_and_send(now);
    }
    arm(next.at - now);
  }

  void charge_and_send(time_point now) {
    if (!try_charge_hedge(budget(), now, config_->random())) {
      ++result_.report.refused;
      refused_ = true;  // no further copy; the copies in flight keep running
      return;
    }
    send_copy(now);
  }

  void arm(duration d) {
    if (!timer_) {
      if constexpr (std::constructible_from<Timer, const Executor&, clock&>) {
        timer_.emplace(ex_, clk());
      } else {
        timer_.emplace(ex_);
      }
    }
    if (waits_ > 0 && timer_) timer_->cancel();
    ++generation_;
    ++waits_;
    timer_->expires_after(d);
    timer_->async_wait(wait_handler{{this->shared_from_this()}, generation_});
  }

  void disarm() {
    ++generation_;  // a wait still pending is stale
    if (waits_ > 0 && timer_) timer_->cancel();
  }

  void on_wait(std::uint32_t generation, const std::error_code& ec) {
    --waits_;
    if (!ec && generation == generation_ && !decided_) {
      charge_and_send(clk().now());
      if (in_flight_ == 0 && !waits_pending_copy() && !decided_) decide(failure_reason());
    }
    settle();
  }

  void on_copy(int copy, outcome<value_type, error_type> r) {
    copy_state& c = copies_[static_cast<std::size_t>(copy - 1)];
    c.in_flight = false;
    c.signal.slot().clear();
    --in_flight_;
    // The clock is read only when something needs the time: a budget, a tracker, a failure.
    std::optional<time_point> now_read;
    const auto now = [&] { return now_read ? *now_read : now_read.emplace(clk().now()); };
    if (copy > 1) {
      if constexpr (hears_retry_end<B>) hedge_ended(budget(), now());
    }
    const bool open = !decided_ || (caller_cancelled_ && result_.report.winner == 0);
    if (c.cancelled && !caller_cancelled_) return settle();  // a loser's late answer
    if (r.has_value()) {
      if (!open) return settle();
      if constexpr (!std::same_as<B, no_budget>) ticket_.succeeded(budget(), now(), copy);
      if (latency_tracker* t = config_->tracker()) t->record(now() - start_);
      result_.value.emplace(*std::move(r));
      result_.last_error.reset();
      result_.report.winner = copy;
      decide(end_reason::success);
      return settle();
    }
    if (!open) return settle();
    result_.last_error.emplace(std::move(r).error());
    if (caller_cancelled_) return settle();
    if (call_.stop.stop_requested()) {
      // The stop reached this copy (its operation sees call.stop too) before the stop callback's
      // post reached the call: the call is cancelled, this copy with it, as if in that order
      // (no verdict, no record).
      on_cancel(::asio::cancellation_type::terminal);
      ++result_.report.cancelled;
      return settle();
    }
    const hedge_verdict verdict = to_verdict(std::as_const(*result_.last_error));
    if constexpr (!std::same_as<B, no_budget>) {
      if (verdict.what != hedge_verdict::kind::wait) {
        budget().record(now(), attempt_report{verdict.what == hedge_verdict::kind::fatal
                                                  ? attempt_status::not_retryable
                                                  : attempt_status::failure,
                                              copy, attempt_status::success});
      }
    }
    switch (verdict.what) {
      case hedge_verdict::kind::fatal:
        decide(end_reason::not_retryable);  // the call fails with it (gRFC A6)
        return settle();
      case hedge_verdict::kind::wait:
        break;
      case hedge_verdict::kind::stop_copies:
        if (result_.report.stop == hedge_stop::none ||
            result_.report.stop == hedge_stop::deadline_exceeded) {
          result_.report.stop = hedge_stop::server_refused;
        }
        disarm();
        break;
      case hedge_verdict::kind::pushback:
        pushback_ = pushback{false, verdict.delay};
        plan(now(), true);
        break;
      case hedge_verdict::kind::non_fatal:
        plan(now(), true);
        break;
    }
    if (in_flight_ == 0 && !waits_pending_copy() && !decided_) decide(failure_reason());
    settle();
  }

  // Whether the timer is armed for a copy still to be sent.
  [[nodiscard]] bool waits_pending_copy() const noexcept {
    return waits_ > 0 && result_.report.stop == hedge_stop::none && !refused_;
  }

  [[nodiscard]] end_reason failure_reason() const noexcept {
    if (refused_) return end_reason::budget_exhausted;
    switch (result_.report.stop) {
      case hedge_stop::retry_after_too_long:
        return end_reason::retry_after_too_long;
      case hedge_stop::deadline_exceeded:
        return end_reason::deadline_exceeded;
      case hedge_stop::server_refused:
        return end_reason::server_refused;  // as a retrier ends on the same pushback
      default:
        // Every copy sent failed once the deadline had passed (each copy runs against it): the
        // deadline ended the call, not the number of copies.
        if (call_.deadline != time_point::max() && clk().now() >= call_.deadline) {
          return end_reason::deadline_exceeded;
        }
        return end_reason::attempts_exhausted;
    }
  }

  // The call's outcome is known: cancel what still runs (the call completes in settle()).
  void decide(end_reason reason) {
    if (decided_ && !(caller_cancelled_ && reason == end_reason::success)) return;
    decided_ = true;
    result_.reason = reason;
    disarm();
    if (reason != end_reason::cancelled) cancel_copies(::asio::cancellation_type::terminal);
  }

  void cancel_copies(::asio::cancellation_type type) {
    for (copy_state& c : copies_) {
      if (!c.in_flight || c.cancelled) continue;
      c.cancelled = true;
      ++result_.report.cancelled;
      c.signal.emit(type);
    }
  }

  void on_cancel(::asio::cancellation_type type) {
    if (finished_ || decided_) return;
    cancelled_ = true;
    if (result_.report.sent == 0) return;  // the first step, still queued, ends the call
    caller_cancelled_ = true;
    decided_ = true;
    result_.reason = end_reason::cancelled;
    disarm();
    cancel_copies(type);
  }

  // Completes the call once it is decided, no copy is in flight and no timer wait is pending.
  void settle() {
    if (!decided_ || in_flight_ > 0 || waits_ > 0 || finished_) return;
    if (initiating_) {
      // Decided inside the initiating call (cancelled, past the deadline, throttled): the
      // completion continues the caller's, never runs inside it.
      ::asio::defer(ex_, settle_handler{{this->shared_from_this()}});
      return;
    }
    finished_ = true;
    end_budget();
    cancellation_.clear();
    if (const auto& hook = config_->end_hook_function()) hook(result_.reason, result_.report);
    complete_call(work_, handler_, result_);
  }

  void end_budget() {
    if constexpr (!std::same_as<B, no_budget>) {
      if (ticket_.template has_pending_end<B>()) ticket_.end(budget(), clk().now());
    }
  }

  hedger<G, B>* config_;
  Executor ex_;
  Op op_;
  Classifier classify_;
  call_options call_;
  Handler handler_;
  call_work_t<Handler, Executor> work_;
  result_type result_{};
  request_budget ticket_{};
  bool decided_ = false;
  bool finished_ = false;
  bool cancelled_ = false;         // a cancellation was requested
  bool caller_cancelled_ = false;  // ... while copies were in flight
  bool refused_ = false;
  int in_flight_ = 0;
  int waits_ = 0;
  std::uint32_t generation_ = 0;
  time_point start_{};
  time_point last_sent_{};
  bool lazy_start_ = false;  // start_ and last_sent_ are read when the timer is armed (on_arm)
  bool initiating_ = false;  // inside start(): the call must not complete yet
  duration delay_{};
  std::optional<pushback> pushback_{};
  std::optional<Timer> timer_{};
  std::array<copy_state, k_max_copies> copies_{};
  call_cancellation<async_hedge_op, Executor> cancellation_{};
  step_memory arm_memory_{};  // the arming step's (arm_handler)
};

template <class Timer, class Executor, class G, class B>
struct initiate_async_hedge {
  hedger<G, B>* config;
  Executor ex;
  template <class Handler, class Op, class Classifier>
  void operator()(Handler&& handler, Op&& op, Classifier&& classify,
                  const call_options& call) const {
    using op_type = async_hedge_op<Timer, Executor, G, B, std::decay_t<Op>,
                                   std::decay_t<Classifier>, std::decay_t<Handler>>;
    start_call<op_type>(handler, *config, ex, std::forward<Op>(op),
                        std::forward<Classifier>(classify), call, std::forward<Handler>(handler));
  }
};

}  // namespace detail

/// Hedges the asynchronous operation `op` with `config`'s policy, clock, generator, budget and
/// tracker (see the file comment), and completes with void(hedge_result<T, E>) through `token`.
///
/// `op(const attempt_context&, CompletionToken&&)` initiates one copy (ctx.attempt is the copy's
/// number, from 1; ctx.time_left the time to call.deadline) and completes with one of the
/// signatures async_retry accepts. It must honour per-operation cancellation (terminal): a copy
/// that ignores it delays the call's completion until it ends by itself. `classify(const E&)`
/// returns a classification or a bool, as for async_retry, or a hedge_verdict: retry = a
/// non-fatal outcome (the next copy goes at once, if the policy and the budget allow);
/// retry_after(d) = a server pushback of d (the next copy no sooner than d from now; above
/// max_retry_after, no further copy); stop = a fatal outcome (the call fails with it and the other
/// copies are cancelled, as in gRFC A6); hedge_verdict::stop_copies and wait as documented there.
/// When every copy failed: attempts_exhausted (deadline_exceeded when call.deadline had passed
/// by then), or server_refused after stop_copies.
///
/// Budget: the first copy is admitted (budget.try_admit; refused: end_reason::throttled, nothing
/// sent); each later copy draws one retry (try_charge_hedge) and is ended (hedge_ended) when its
/// handler runs; each copy that completes before the call is decided is recorded
/// (budget.record: success, or the verdict's status); cancelled copies are not recorded.
///
/// The first success wins: the other copies are cancelled (terminal) and the delay timer too, and
/// the handler runs only after all of them have completed. The token's cancellation slot and
/// call.stop cancel every copy in flight with the type received (call.stop: terminal) and no
/// further copy is sent (end_reason::cancelled, unless a copy still answers with a success before
/// the call completes: that value is kept, reason success). call.deadline: no copy starts at or
/// after it (deadline_exceeded when every copy sent failed).
///
/// Threads and executors: as async_retry (every step on `ex`, which must not run two of them at
/// once; the handler never runs inside async_hedge). Called on a thread that runs `ex` (from a
/// handler or a coroutine), the first copy is initiated inside async_hedge, as Asio's composed
/// operations initiate their first step; from any other thread, from a step posted to `ex`. Memory:
/// one block per call from the handler's associated allocator; a call whose first copy answers
/// before the delay creates no other copy (the timer's wait is cancelled).
///
/// Example (tests/integration/reference_http_examples_test.cpp, run by the tests):
/// \snippet reference_http_examples_test.cpp async_hedge
template <class Timer = ::asio::steady_timer, class Executor, bit_generator G, retry_budget<G> B,
          async_attempt Op, class Classifier, class CompletionToken>
requires backoff_timer<Timer, Executor>
auto async_hedge(hedger<G, B>& config, const Executor& ex, Op&& op, Classifier&& classify,
                 const call_options& call, CompletionToken&& token) {
  return ::asio::async_initiate<CompletionToken, void(async_hedge_result_t<std::decay_t<Op>>)>(
      detail::initiate_async_hedge<Timer, Executor, G, B>{&config, ex}, token, std::forward<Op>(op),
      std::forward<Classifier>(classify), call);
}

/// async_hedge(config, ex, op, default_classifier{}, call_options{}, token).
template <class Timer = ::asio::steady_timer, class Executor, bit_generator G, retry_budget<G> B,
          async_attempt Op, class CompletionToken>
requires backoff_timer<Timer, Executor>
auto async_hedge(hedger<G, B>& config, const Executor& ex, Op&& op, CompletionToken&& token) {
  return async_hedge<Timer>(config, ex, std::forward<Op>(op), default_classifier{}, call_options{},
                            std::forward<CompletionToken>(token));
}

}  // namespace stormguard

#endif  // STORMGUARD_ASIO_HEDGE_HPP
