// SPDX-License-Identifier: Apache-2.0
// stormguard::async_hedge on an io_context and virtual time: no test sleeps. A small scheduler
// holds every pending timer wait and every copy's scripted answer in time order; the test loop
// runs the io_context until it is idle, then moves the manual_clock to the next due event.
// Copies honour per-operation cancellation (their answer is withdrawn and operation_aborted is
// posted instead), as real Asio operations do.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <system_error>
#include <utility>
#include <vector>

#include "counting_budget.hpp"
#include "stormguard/asio/hedge.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/random.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_context;
using stormguard::call_options;
using stormguard::classification;
using stormguard::duration;
using stormguard::end_reason;
using stormguard::hedge_stop;
using stormguard::hedger;
using stormguard::hedging_policy;
using stormguard::random_generator;
using stormguard::time_point;
using stormguard::testing::manual_clock;

const std::error_code k_refused = std::make_error_code(std::errc::connection_refused);
const std::error_code k_invalid = std::make_error_code(std::errc::invalid_argument);
const std::error_code k_aborted = make_error_code(asio::error::operation_aborted);

// Events due at instants of a manual_clock. fire(ec) runs (posted to the io_context) at its
// instant with no error, or at once with operation_aborted when cancelled.
class scheduler {
 public:
  explicit scheduler(asio::io_context& io) : io_(&io) {}

  using event = std::function<void(std::error_code)>;

  std::uint64_t at(time_point t, event fire) {
    const std::uint64_t id = next_id_++;
    due_.emplace(key{t, id}, std::move(fire));
    return id;
  }
  void cancel(std::uint64_t id) {
    for (auto it = due_.begin(); it != due_.end(); ++it) {
      if (it->first.id != id) continue;
      event fire = std::move(it->second);
      due_.erase(it);
      asio::post(*io_, [fire = std::move(fire)] { fire(k_aborted); });
      return;
    }
  }
  [[nodiscard]] std::size_t pending() const { return due_.size(); }

  // Runs until nothing is ready and nothing is due.
  void run(manual_clock& clock) {
    for (;;) {
      io_->restart();
      io_->poll();
      if (due_.empty()) return;
      auto it = due_.begin();
      if (it->first.t > clock.now()) clock.advance(it->first.t - clock.now());
      event fire = std::move(it->second);
      due_.erase(it);
      asio::post(*io_, [fire = std::move(fire)] { fire(std::error_code()); });
    }
  }

 private:
  struct key {
    time_point t;
    std::uint64_t id;
    bool operator<(const key& o) const { return t != o.t ? t < o.t : id < o.id; }
  };
  asio::io_context* io_;
  std::map<key, event> due_;
  std::uint64_t next_id_ = 0;
};

thread_local scheduler* current_scheduler = nullptr;

// A backoff_timer on the scheduler and a manual_clock.
class virtual_timer {
 public:
  virtual_timer(const asio::any_io_executor&, stormguard::clock& clk)
      : clock_(&dynamic_cast<manual_clock&>(clk)) {}
  void expires_after(duration d) { expiry_ = clock_->now() + d; }
  template <class Handler>
  void async_wait(Handler&& handler) {
    auto h = std::make_shared<std::decay_t<Handler>>(std::forward<Handler>(handler));
    ids_.push_back(current_scheduler->at(expiry_, [h](std::error_code ec) { (*h)(ec); }));
  }
  void cancel() {
    for (std::uint64_t id : ids_) current_scheduler->cancel(id);
    ids_.clear();
  }

 private:
  manual_clock* clock_;
  time_point expiry_{};
  std::vector<std::uint64_t> ids_;
};

// One scripted copy: answers `error` (none: success with the copy's number * 10) `latency` after
// it starts, unless cancelled first.
struct answer {
  duration latency;
  std::error_code error{};
};

struct copy_log {
  std::vector<attempt_context> started;
  std::vector<int> cancelled;  // copies whose cancellation slot was emitted in flight
  std::vector<int> completed;  // copies whose handler was called, in order
  int live = 0;                // copies started and not yet completed
};

struct scripted_copies {
  manual_clock* clock;
  std::vector<answer> script;
  copy_log* log;

  template <class Token>
  auto operator()(const attempt_context& ctx, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, int)>(
        [this, ctx](auto handler) {
          log->started.push_back(ctx);
          ++log->live;
          const answer a = script.at(static_cast<std::size_t>(ctx.attempt - 1));
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto h = std::make_shared<decltype(handler)>(std::move(handler));
          copy_log* l = log;
          const int copy = ctx.attempt;
          const std::uint64_t id =
              current_scheduler->at(clock->now() + a.latency, [h, a, l, copy](std::error_code ec) {
                --l->live;
                l->completed.push_back(copy);
                if (ec) return (*h)(ec, 0);
                (*h)(a.error, a.error ? 0 : copy * 10);
              });
          if (slot.is_connected()) {
            slot.assign([id, l, copy](asio::cancellation_type) {
              l->cancelled.push_back(copy);
              current_scheduler->cancel(id);
            });
          }
        },
        token);
  }
};

using result_t = stormguard::hedge_result<int, std::error_code>;

// A budget that also hears the end of every granted copy and of the request.
struct ending_budget : stormguard::test_util::counting_budget {
  using counting_budget::counting_budget;
  int retries_ended = 0;
  int requests_ended = 0;
  void retry_ended(time_point) { ++retries_ended; }
  void request_ended(time_point) { ++requests_ended; }
};

class AsyncHedge : public ::testing::Test {
 protected:
  AsyncHedge() : sched(io) { current_scheduler = &sched; }
  ~AsyncHedge() override { current_scheduler = nullptr; }

  template <class H>
  result_t run(H& hedge, std::vector<answer> script, call_options call = {}) {
    std::optional<result_t> out;
    stormguard::async_hedge<virtual_timer>(hedge, io.get_executor(),
                                           scripted_copies{&clock, std::move(script), &log},
                                           stormguard::default_classifier{}, call, [&](result_t r) {
                                             // Nothing of the call is left when the caller has its
                                             // answer.
                                             EXPECT_EQ(log.live, 0);
                                             EXPECT_EQ(sched.pending(), 0U);
                                             out = std::move(r);
                                           });
    sched.run(clock);
    EXPECT_TRUE(out.has_value());
    return out ? std::move(*out) : result_t{};
  }

  asio::io_context io;
  scheduler sched;
  manual_clock clock;
  random_generator rng{7};
  copy_log log;
};

hedging_policy policy(int copies = 2, duration delay = 20ms) {
  return hedging_policy({.max_attempts = copies, .delay = delay});
}

TEST_F(AsyncHedge, FirstCopyAnswersBeforeTheDelayNoOtherCopyIsSent) {
  stormguard::test_util::counting_budget budget;
  hedger hedge(policy(), clock, rng, budget);
  const result_t r = run(hedge, {{5ms}, {5ms}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r.value, 10);
  EXPECT_EQ(r.report, (stormguard::hedge_report{1, 1, 0, 0, hedge_stop::none}));
  EXPECT_EQ(log.started.size(), 1U);
  EXPECT_EQ(budget.admits, 1);
  EXPECT_EQ(budget.withdrawals, 0);
  ASSERT_EQ(budget.records.size(), 1U);
  EXPECT_EQ(budget.records[0].status, stormguard::attempt_status::success);
  EXPECT_EQ(clock.now(), time_point{} + 5ms);  // the timer's wait was cancelled, not waited
}

TEST_F(AsyncHedge, ASlowFirstCopyLosesToTheHedgeWhichIsCancelledBeforeCompletion) {
  stormguard::test_util::counting_budget budget;
  hedger hedge(policy(), clock, rng, budget);
  const result_t r = run(hedge, {{1s}, {10ms}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r.value, 20);
  EXPECT_EQ(r.report, (stormguard::hedge_report{2, 2, 0, 1, hedge_stop::max_attempts}));
  ASSERT_EQ(log.started.size(), 2U);
  EXPECT_EQ(log.started[1].attempt, 2);
  EXPECT_EQ(log.cancelled, std::vector<int>{1});
  EXPECT_EQ(log.completed, (std::vector<int>{2, 1}));  // the loser ended before the completion
  EXPECT_EQ(clock.now(), time_point{} + 30ms);         // the 1 s answer was never waited for
  EXPECT_EQ(budget.withdrawals, 1);
  ASSERT_EQ(budget.records.size(), 1U);  // the cancelled copy is not recorded
  EXPECT_EQ(budget.records[0].attempt, 2);
}

TEST_F(AsyncHedge, CopiesLeaveAtEachDelayUpToMaxAttempts) {
  hedger hedge(policy(4, 20ms), clock, rng);
  const result_t r = run(hedge, {{1s}, {1s}, {1s}, {15ms}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 4);
  EXPECT_EQ(r.report.sent, 4);
  EXPECT_EQ(r.report.cancelled, 3);
  EXPECT_EQ(r.report.stop, hedge_stop::max_attempts);
  EXPECT_EQ(clock.now(), time_point{} + 75ms);
}

TEST_F(AsyncHedge, ZeroDelaySendsEveryCopyAtOnce) {
  hedger hedge(policy(3, 0ms), clock, rng);
  const result_t r = run(hedge, {{30ms}, {10ms}, {20ms}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 2);
  EXPECT_EQ(r.report.sent, 3);
  EXPECT_EQ(r.report.cancelled, 2);
  for (const attempt_context& c : log.started) EXPECT_EQ(c.time_left, duration::max());
}

TEST_F(AsyncHedge, ANonFatalFailureSendsTheNextCopyAtOnce) {
  hedger hedge(policy(3, 100ms), clock, rng);
  const result_t r = run(hedge, {{5ms, k_refused}, {7ms}, {1s}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 2);
  EXPECT_EQ(r.report.sent, 2);
  EXPECT_EQ(clock.now(), time_point{} + 12ms);
}

TEST_F(AsyncHedge, AFatalFailureEndsTheCallAndCancelsTheOthers) {
  hedger hedge(policy(2, 10ms), clock, rng);
  const result_t r = run(hedge, {{50ms, k_invalid}, {1s}});
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(r.last_error, k_invalid);
  EXPECT_EQ(r.report.sent, 2);
  EXPECT_EQ(r.report.cancelled, 1);
  EXPECT_EQ(r.report.winner, 0);
}

TEST_F(AsyncHedge, EveryCopyFailingNonFatallyExhaustsTheAttempts) {
  hedger hedge(policy(2, 10ms), clock, rng);
  const result_t r = run(hedge, {{5ms, k_refused}, {5ms, k_refused}});
  EXPECT_EQ(r.reason, end_reason::attempts_exhausted);
  EXPECT_EQ(r.last_error, k_refused);
  EXPECT_EQ(r.report.sent, 2);
  EXPECT_EQ(r.report.stop, hedge_stop::max_attempts);
}

// failsafe-go #141: a spent budget refuses the next copy; the copy in flight keeps running and
// its answer is the call's answer.
TEST_F(AsyncHedge, ARefusedCopyIsNotSentAndNeverCancelsTheCopyInFlight) {
  stormguard::test_util::counting_budget budget(0);
  hedger hedge(policy(3, 20ms), clock, rng, budget);
  const result_t r = run(hedge, {{500ms}, {1ms}, {1ms}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report, (stormguard::hedge_report{1, 1, 1, 0, hedge_stop::none}));
  EXPECT_EQ(log.started.size(), 1U);
  EXPECT_TRUE(log.cancelled.empty());
  EXPECT_EQ(budget.withdrawals, 1);  // one refusal, then no further copy is asked for
  EXPECT_EQ(clock.now(), time_point{} + 500ms);
}

TEST_F(AsyncHedge, ARefusalWithNothingInFlightFailsTheCallAsBudgetExhausted) {
  stormguard::test_util::counting_budget budget(0);
  hedger hedge(policy(3, 20ms), clock, rng, budget);
  const result_t r = run(hedge, {{5ms, k_refused}, {1ms}});
  EXPECT_EQ(r.reason, end_reason::budget_exhausted);
  EXPECT_EQ(r.report.refused, 1);
  EXPECT_EQ(r.report.sent, 1);
}

TEST_F(AsyncHedge, TheBudgetHearsEveryGrantedCopyEndAndTheRequestEnd) {
  ending_budget budget;
  hedger hedge(policy(3, 10ms), clock, rng, budget);
  const result_t r = run(hedge, {{1s}, {1s}, {5ms}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(budget.withdrawals, 2);
  EXPECT_EQ(budget.retries_ended, 2);
  EXPECT_EQ(budget.requests_ended, 1);
}

TEST_F(AsyncHedge, ARejectedFirstCopyIsThrottledAndNothingIsSent) {
  stormguard::test_util::counting_budget budget;
  budget.admit = false;
  hedger hedge(policy(), clock, rng, budget);
  const result_t r = run(hedge, {{1ms}});
  EXPECT_EQ(r.reason, end_reason::throttled);
  EXPECT_EQ(r.report.sent, 0);
  EXPECT_TRUE(log.started.empty());
}

TEST_F(AsyncHedge, APushbackPostponesOnlyTheNextCopy) {
  hedger hedge(policy(3, 10ms), clock, rng);
  std::optional<result_t> out;
  std::vector<time_point> starts;
  auto classify = [](const std::error_code&) { return classification::retry_after(50ms); };
  stormguard::async_hedge<virtual_timer>(
      hedge, io.get_executor(), scripted_copies{&clock, {{2ms, k_refused}, {1s}, {5ms}}, &log},
      classify, call_options{}, [&](result_t r) { out = std::move(r); });
  sched.run(clock);
  ASSERT_TRUE(out && out->ok());
  EXPECT_EQ(out->report.winner, 3);
  ASSERT_EQ(log.started.size(), 3U);
  // copy 1 fails at 2 ms with a 50 ms pushback: copy 2 at 52 ms, copy 3 at 62 ms (delay after it)
  EXPECT_EQ(clock.now(), time_point{} + 67ms);
}

TEST_F(AsyncHedge, APushbackAboveMaxRetryAfterStopsFurtherCopies) {
  hedger hedge(hedging_policy({.max_attempts = 3, .delay = 10ms, .max_retry_after = 1s}), clock,
               rng);
  std::optional<result_t> out;
  auto classify = [](const std::error_code&) { return classification::retry_after(5s); };
  stormguard::async_hedge<virtual_timer>(
      hedge, io.get_executor(), scripted_copies{&clock, {{2ms, k_refused}, {1ms}}, &log}, classify,
      call_options{}, [&](result_t r) { out = std::move(r); });
  sched.run(clock);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->reason, end_reason::retry_after_too_long);
  EXPECT_EQ(out->report.stop, hedge_stop::retry_after_too_long);
  EXPECT_EQ(log.started.size(), 1U);
}

TEST_F(AsyncHedge, TheDeadlineStopsCopiesAndEachGetsItsTimeLeft) {
  hedger hedge(policy(3, 20ms), clock, rng);
  const result_t r =
      run(hedge, {{30ms, k_refused}, {1ms, k_refused}, {1ms}}, {.deadline = time_point{} + 35ms});
  // copy 1 at 0 (35 ms left), copy 2 at 20 ms (15 ms left) fails at 21 ms: copy 3 at 21 ms
  ASSERT_EQ(log.started.size(), 3U);
  EXPECT_EQ(log.started[0].time_left, 35ms);
  EXPECT_EQ(log.started[1].time_left, 15ms);
  EXPECT_EQ(log.started[2].time_left, 14ms);
  EXPECT_TRUE(r.ok());
}

TEST_F(AsyncHedge, NoCopyStartsAtOrAfterTheDeadline) {
  hedger hedge(policy(3, 20ms), clock, rng);
  const result_t r = run(hedge, {{30ms, k_refused}, {1ms}}, {.deadline = time_point{} + 20ms});
  EXPECT_EQ(r.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(r.report.stop, hedge_stop::deadline_exceeded);
  EXPECT_EQ(log.started.size(), 1U);
}

// Every copy sent (max_attempts) and every one failed at the deadline (each runs against it, as
// an HTTP copy's time-out does): the deadline ended the call, not the number of copies.
TEST_F(AsyncHedge, CopiesThatAllFailAtTheDeadlineEndWithDeadlineExceeded) {
  hedger hedge(policy(2, 10ms), clock, rng);
  const result_t r =
      run(hedge, {{30ms, k_refused}, {20ms, k_refused}}, {.deadline = time_point{} + 30ms});
  EXPECT_EQ(r.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(r.report.sent, 2);
  // The same copies failing before the deadline: the copies ran out.
  hedger again(policy(2, 10ms), clock, rng);
  const result_t early =
      run(again, {{5ms, k_refused}, {5ms, k_refused}}, {.deadline = clock.now() + 1s});
  EXPECT_EQ(early.reason, end_reason::attempts_exhausted);
}

TEST_F(AsyncHedge, CancellingTheCallCancelsEveryCopyAndTheTimer) {
  hedger hedge(policy(3, 20ms), clock, rng);
  asio::cancellation_signal signal;
  std::optional<result_t> out;
  stormguard::async_hedge<virtual_timer>(
      hedge, io.get_executor(), scripted_copies{&clock, {{1s}, {1s}, {1s}}, &log},
      stormguard::default_classifier{}, call_options{},
      asio::bind_cancellation_slot(signal.slot(), [&](result_t r) {
        EXPECT_EQ(log.live, 0);
        EXPECT_EQ(sched.pending(), 0U);
        out = std::move(r);
      }));
  // At 25 ms (copies 1 and 2 in flight, copy 3's timer pending) the caller cancels.
  sched.at(time_point{} + 25ms,
           [&](std::error_code) { signal.emit(asio::cancellation_type::terminal); });
  sched.run(clock);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->reason, end_reason::cancelled);
  EXPECT_EQ(out->last_error, k_aborted);
  EXPECT_EQ(out->report.sent, 2);
  EXPECT_EQ(out->report.cancelled, 2);
  EXPECT_EQ(log.cancelled, (std::vector<int>{1, 2}));
  EXPECT_EQ(clock.now(), time_point{} + 25ms);
}

TEST_F(AsyncHedge, AStopTokenCancelsTheCall) {
  hedger hedge(policy(2, 20ms), clock, rng);
  std::stop_source stop;
  std::optional<result_t> out;
  stormguard::async_hedge<virtual_timer>(
      hedge, io.get_executor(), scripted_copies{&clock, {{1s}, {1s}}, &log},
      stormguard::default_classifier{}, call_options{.stop = stop.get_token()},
      [&](result_t r) { out = std::move(r); });
  sched.at(time_point{} + 5ms, [&](std::error_code) { stop.request_stop(); });
  sched.run(clock);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->reason, end_reason::cancelled);
  EXPECT_EQ(out->report.sent, 1);
  EXPECT_EQ(clock.now(), time_point{} + 5ms);
}

// Copies that watch the call's stop themselves, as an HTTP transfer given call.stop does: the
// stop ends a copy at once, inside request_stop(), before the call's own stop callback (which
// only posts) has run. Cancelled through their slots, they complete posted.
struct stop_watching_copies {
  asio::io_context* io;
  copy_log* log;
  std::vector<std::unique_ptr<std::stop_callback<std::function<void()>>>>* watches;

  template <class Token>
  auto operator()(const attempt_context& ctx, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, int)>(
        [this, ctx](auto handler) {
          log->started.push_back(ctx);
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto h = std::make_shared<std::optional<decltype(handler)>>(std::move(handler));
          const auto finish = [h, l = log, copy = ctx.attempt] {
            if (!*h) return;
            auto done = std::move(**h);
            h->reset();
            l->completed.push_back(copy);
            std::move(done)(k_aborted, 0);
          };
          if (slot.is_connected()) {
            slot.assign([finish, l = log, copy = ctx.attempt, io = io](asio::cancellation_type) {
              l->cancelled.push_back(copy);
              asio::post(*io, finish);
            });
          }
          watches->push_back(
              std::make_unique<std::stop_callback<std::function<void()>>>(ctx.stop, finish));
        },
        token);
  }
};

TEST_F(AsyncHedge, ACopyThatSeesTheStopFirstStillEndsTheCallCancelled) {
  hedger hedge(policy(2, 20ms), clock, rng);
  std::stop_source stop;
  std::vector<std::unique_ptr<std::stop_callback<std::function<void()>>>> watches;
  std::optional<result_t> out;
  stormguard::async_hedge<virtual_timer>(
      hedge, io.get_executor(), stop_watching_copies{&io, &log, &watches},
      stormguard::default_classifier{}, call_options{.stop = stop.get_token()},
      [&](result_t r) { out = std::move(r); });
  sched.at(time_point{} + 30ms, [&](std::error_code) { stop.request_stop(); });
  sched.run(clock);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->reason, end_reason::cancelled);  // not the stopped copy's error as a verdict
  EXPECT_EQ(out->report.sent, 2);
  EXPECT_EQ(out->report.cancelled, 2);  // both copies were in flight when the stop came
  EXPECT_EQ(log.completed.size(), 2U);
  watches.clear();
}

TEST_F(AsyncHedge, CancelledBeforeTheFirstCopySendsNothing) {
  hedger hedge(policy(), clock, rng);
  std::stop_source stop;
  stop.request_stop();
  const result_t r = run(hedge, {{1ms}}, {.stop = stop.get_token()});
  EXPECT_EQ(r.reason, end_reason::cancelled);
  EXPECT_EQ(r.report.sent, 0);
  EXPECT_TRUE(log.started.empty());
}

TEST_F(AsyncHedge, NoHandlerIsPendingAfterTheCompletion) {
  hedger hedge(policy(5, 10ms), clock, rng);
  bool done = false;
  stormguard::async_hedge<virtual_timer>(
      hedge, io.get_executor(), scripted_copies{&clock, {{1s}, {1s}, {1s}, {12ms}, {1s}}, &log},
      stormguard::default_classifier{}, call_options{}, [&](result_t r) {
        EXPECT_EQ(r.report.winner, 4);
        done = true;
      });
  sched.run(clock);
  ASSERT_TRUE(done);
  EXPECT_EQ(sched.pending(), 0U);
  io.restart();
  EXPECT_EQ(io.poll(), 0U);  // nothing was left to run after the caller had its answer
  EXPECT_EQ(log.live, 0);
}

TEST_F(AsyncHedge, StopCopiesSendsNoFurtherCopyButKeepsTheOnesInFlight) {
  hedger hedge(policy(3, 10ms), clock, rng);
  std::optional<result_t> out;
  // copy 2 fails at 11 ms with "do not retry": no copy 3, copy 1 still answers at 40 ms.
  auto classify = [](const std::error_code&) { return stormguard::hedge_verdict::stop_copies(); };
  stormguard::async_hedge<virtual_timer>(
      hedge, io.get_executor(), scripted_copies{&clock, {{40ms}, {1ms, k_refused}, {1ms}}, &log},
      classify, call_options{}, [&](result_t r) { out = std::move(r); });
  sched.run(clock);
  ASSERT_TRUE(out && out->ok());
  EXPECT_EQ(out->report.winner, 1);
  EXPECT_EQ(out->report.sent, 2);
  EXPECT_EQ(out->report.stop, hedge_stop::server_refused);
  EXPECT_TRUE(log.cancelled.empty());
  EXPECT_EQ(clock.now(), time_point{} + 40ms);
}

TEST_F(AsyncHedge, AWaitVerdictIsNotAFailureAndPlansNothing) {
  stormguard::test_util::counting_budget budget;
  hedger hedge(policy(3, 10ms), clock, rng, budget);
  std::optional<result_t> out;
  // copy 2 answers "in progress" at 11 ms: copy 3 still goes at 20 ms, 10 ms after copy 2.
  auto classify = [](const std::error_code&) { return stormguard::hedge_verdict::wait(); };
  stormguard::async_hedge<virtual_timer>(
      hedge, io.get_executor(), scripted_copies{&clock, {{1s}, {1ms, k_refused}, {5ms}}, &log},
      classify, call_options{}, [&](result_t r) { out = std::move(r); });
  sched.run(clock);
  ASSERT_TRUE(out && out->ok());
  EXPECT_EQ(out->report.winner, 3);
  ASSERT_EQ(log.started.size(), 3U);
  EXPECT_EQ(clock.now(), time_point{} + 25ms);
  ASSERT_EQ(budget.records.size(), 1U);  // the winner only: "wait" is not recorded
}

TEST_F(AsyncHedge, WorksWithACoroutineToken) {
  hedger hedge(policy(2, 20ms), clock, rng);
  std::optional<result_t> out;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        // A named operation: GCC 12 mishandles a braced temporary inside a co_await expression.
        scripted_copies copies{&clock, {{1s}, {3ms}}, &log};
        out = co_await stormguard::async_hedge<virtual_timer>(hedge, io.get_executor(), copies,
                                                              stormguard::default_classifier{},
                                                              call_options{}, asio::use_awaitable);
      },
      asio::detached);
  sched.run(clock);
  ASSERT_TRUE(out && out->ok());
  EXPECT_EQ(out->report.winner, 2);
  EXPECT_EQ(log.live, 0);
}

// Called from a handler on the executor's thread, the first copy starts inside the call (no step
// of its own); the handler still never runs inside it, also when the call is decided there.
TEST_F(AsyncHedge, OnTheExecutorsThreadTheFirstCopyStartsInsideTheCall) {
  hedger hedge(policy(2, 20ms), clock, rng);
  std::optional<result_t> out;
  asio::post(io, [&] {
    stormguard::async_hedge<virtual_timer>(
        hedge, io.get_executor(), scripted_copies{&clock, {{5ms}, {5ms}}, &log},
        stormguard::default_classifier{}, call_options{}, [&](result_t r) { out = std::move(r); });
    EXPECT_EQ(log.started.size(), 1U);  // initiated here
    EXPECT_FALSE(out.has_value());
  });
  sched.run(clock);
  ASSERT_TRUE(out && out->ok());
  EXPECT_EQ(out->report, (stormguard::hedge_report{1, 1, 0, 0, hedge_stop::none}));
}

TEST_F(AsyncHedge, ACallDecidedInsideTheInitiatingCallCompletesAfterIt) {
  stormguard::test_util::counting_budget refusing(0);
  refusing.admit = false;
  hedger throttled(policy(), clock, rng, refusing);
  hedger plain(policy(), clock, rng);
  std::stop_source stop;
  stop.request_stop();
  std::optional<result_t> refused;
  std::optional<result_t> cancelled;
  asio::post(io, [&] {
    stormguard::async_hedge<virtual_timer>(
        throttled, io.get_executor(), scripted_copies{&clock, {{5ms}}, &log},
        stormguard::default_classifier{}, call_options{}, [&](result_t r) { refused = r; });
    stormguard::async_hedge<virtual_timer>(
        plain, io.get_executor(), scripted_copies{&clock, {{5ms}}, &log},
        stormguard::default_classifier{}, call_options{.stop = stop.get_token()},
        [&](result_t r) { cancelled = r; });
    EXPECT_FALSE(refused.has_value());
    EXPECT_FALSE(cancelled.has_value());
  });
  sched.run(clock);
  ASSERT_TRUE(refused && cancelled);
  EXPECT_EQ(refused->reason, end_reason::throttled);
  EXPECT_EQ(cancelled->reason, end_reason::cancelled);
  EXPECT_TRUE(log.started.empty());
}

TEST_F(AsyncHedge, TheAdaptiveDelayFollowsTheTrackersQuantile) {
  stormguard::latency_tracker tracker(0.5);
  for (int i = 0; i < 64; ++i) tracker.record(40ms);
  hedger hedge(hedging_policy({.max_attempts = 2, .delay = 5ms, .delay_quantile = 0.5}), clock, rng,
               &tracker);
  const result_t r = run(hedge, {{30ms}, {1ms}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report.winner, 1);  // the delay is 40 ms, not 5 ms: no copy was sent
  EXPECT_EQ(r.report.sent, 1);
}

}  // namespace
