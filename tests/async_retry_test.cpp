// SPDX-License-Identifier: Apache-2.0
// stormguard::async_retry on an io_context and virtual time (testing::manual_timer over a
// testing::manual_clock): no test sleeps. The attempts are small asynchronous operations that
// complete through the io_context with scripted results.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "counting_budget.hpp"
#include "stormguard/asio/manual_timer.hpp"
#include "stormguard/asio/retry.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_context;
using stormguard::call_options;
using stormguard::duration;
using stormguard::end_reason;
using stormguard::random_generator;
using stormguard::retrier;
using stormguard::retry_policy;
using stormguard::time_point;
using stormguard::testing::manual_clock;
using stormguard::testing::manual_timer;

const std::error_code k_refused = std::make_error_code(std::errc::connection_refused);
const std::error_code k_invalid = std::make_error_code(std::errc::invalid_argument);
const std::error_code k_aborted = make_error_code(asio::error::operation_aborted);

retry_policy policy(int retries = 3) {
  return retry_policy({.max_retries = retries, .backoff = {.base = 100ms, .cap = 1s}});
}

// An asynchronous operation completing with void(std::error_code, int): each attempt takes the
// next scripted error (no error = success with the attempt number), posted to the io_context.
// Records every attempt's context.
struct scripted_op {
  asio::io_context* io;
  std::vector<std::error_code> script;
  std::vector<attempt_context>* seen;

  template <class Token>
  auto operator()(const attempt_context& ctx, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, int)>(
        [this, ctx](auto handler) {
          seen->push_back(ctx);
          const std::size_t i = static_cast<std::size_t>(ctx.attempt - 1);
          const std::error_code ec = i < script.size() ? script[i] : std::error_code();
          auto ex = asio::get_associated_executor(handler, io->get_executor());
          asio::post(ex, [h = std::move(handler), ec, n = ctx.attempt]() mutable { h(ec, n); });
        },
        token);
  }
};

// An attempt that never completes by itself: it keeps its handler and ends only when its
// cancellation slot is emitted (recording the type), completing with operation_aborted.
struct hanging_op {
  asio::io_context* io;
  std::vector<asio::cancellation_type>* cancellations;
  int* attempts;

  template <class Token>
  auto operator()(const attempt_context&, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [this](auto handler) {
          ++*attempts;
          auto slot = asio::get_associated_cancellation_slot(handler);
          ASSERT_TRUE(slot.is_connected());
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          slot.template emplace<std::function<void(asio::cancellation_type)>>(
              [this, shared](asio::cancellation_type type) {
                cancellations->push_back(type);
                asio::post(io->get_executor(), [shared] { (*shared)(k_aborted); });
              });
        },
        token);
  }
};

// A budget that logs the protocol's calls in order, to compare executors.
struct logging_budget {
  std::vector<std::string> log;
  int grants = 1'000;
  template <class G>
  bool try_admit(time_point, G&) {
    log.emplace_back("admit");
    return true;
  }
  template <class G>
  bool try_withdraw(time_point, stormguard::attempt_status, G&) {
    log.emplace_back("withdraw");
    return grants-- > 0;
  }
  void record(time_point, const stormguard::attempt_report& r) {
    log.push_back("record " + std::to_string(r.attempt) + " " +
                  std::to_string(static_cast<int>(r.status)));
  }
  void retry_ended(time_point) { log.emplace_back("retry_ended"); }
  void request_ended(time_point) { log.emplace_back("request_ended"); }
};

TEST(AsyncRetry, RetriesWithTheSyncRetriersDelaysAndSucceeds) {
  std::vector<duration> sync_sleeps;
  {
    manual_clock clock;
    random_generator rng(7);
    retrier retry(policy(), clock, rng);
    int n = 0;
    auto r = retry([&](const attempt_context&) { return ++n < 3 ? k_refused : std::error_code(); });
    ASSERT_TRUE(r.ok());
    sync_sleeps = clock.sleeps();
  }
  manual_clock clock;
  random_generator rng(7);
  retrier retry(policy(), clock, rng);
  asio::io_context io;
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  stormguard::async_retry<manual_timer>(retry, io.get_executor(),
                                        scripted_op{&io, {k_refused, k_refused}, &seen},
                                        [&](auto r) { result = std::move(r); });
  EXPECT_FALSE(result) << "never completes inside the initiating call";
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::success);
  EXPECT_EQ(result->value, 3);
  EXPECT_EQ(result->attempts, 3);
  EXPECT_EQ(result->previous_errors, (std::vector{k_refused, k_refused}));
  EXPECT_EQ(clock.sleeps(), sync_sleeps) << "same seed, same decide: the same delays";
  EXPECT_EQ(result->slept, sync_sleeps[0] + sync_sleeps[1]);
  ASSERT_EQ(seen.size(), 3U);
  EXPECT_EQ(seen[2].attempt, 3);
}

TEST(AsyncRetry, BudgetHearsTheSameSequenceAsFromTheSyncRetrier) {
  const auto run = [](bool async, int grants, std::vector<std::error_code> script) {
    manual_clock clock;
    random_generator rng(1);
    logging_budget budget;
    budget.grants = grants;
    retrier retry(policy(), clock, rng, budget);
    if (!async) {
      std::size_t i = 0;
      (void)retry([&](const attempt_context&) {
        return i < script.size() ? script[i++] : std::error_code();
      });
    } else {
      asio::io_context io;
      std::vector<attempt_context> seen;
      stormguard::async_retry<manual_timer>(retry, io.get_executor(),
                                            scripted_op{&io, script, &seen}, [](auto) {});
      io.run();
    }
    return budget.log;
  };
  for (const int grants : {0, 1, 5}) {
    for (const auto& script : {std::vector<std::error_code>{},
                               {k_refused, k_refused},
                               {k_refused, k_invalid},
                               {k_refused, k_refused, k_refused, k_refused}}) {
      const auto sync_log = run(false, grants, script);
      EXPECT_EQ(run(true, grants, script), sync_log) << grants << " grants";
      EXPECT_EQ(sync_log.back(), "request_ended");
    }
  }
}

TEST(AsyncRetry, ConcurrencyBudgetIsBackToZeroAfterEveryEnd) {
  manual_clock clock;
  random_generator rng(3);
  stormguard::concurrency_budget budget;
  retrier retry(policy(), clock, rng, budget);
  asio::io_context io;
  std::vector<attempt_context> seen;
  int ended = 0;
  for (int i = 0; i < 50; ++i) {
    std::vector<std::error_code> script(static_cast<std::size_t>(i % 5), k_refused);
    stormguard::async_retry<manual_timer>(retry, io.get_executor(), scripted_op{&io, script, &seen},
                                          [&](auto) { ++ended; });
  }
  io.poll_one();  // the first step of the first call: admitted, attempt 1 in flight
  EXPECT_EQ(budget.active(), 1);
  io.run();
  EXPECT_EQ(ended, 50);
  EXPECT_EQ(budget.active(), 0);
  EXPECT_EQ(budget.retries_in_flight(), 0);
}

TEST(AsyncRetry, CancellationDuringTheWaitEndsItAtOnceWithoutAnotherAttempt) {
  manual_clock clock;
  random_generator rng(5);
  stormguard::test_util::counting_budget budget;
  asio::io_context io;
  asio::cancellation_signal signal;
  // The hook runs just before the wait starts; the emit it posts runs while the wait is pending.
  auto retry =
      retrier(policy(), clock, rng, budget).on_retry([&](int, const std::error_code&, duration) {
        asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
      });
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  stormguard::async_retry<manual_timer>(
      retry, io.get_executor(), scripted_op{&io, {k_refused, k_refused}, &seen},
      asio::bind_cancellation_slot(signal.slot(), [&](auto r) { result = std::move(r); }));
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::cancelled);
  EXPECT_EQ(result->attempts, 1);
  EXPECT_EQ(seen.size(), 1U);
  EXPECT_EQ(result->last_error, k_refused);
  EXPECT_EQ(result->slept, 0ns) << "the wait ended before any virtual time passed";
  EXPECT_EQ(clock.now(), time_point{});
  EXPECT_EQ(budget.withdrawals, 1);
}

TEST(AsyncRetry, CancellationDuringTheAttemptIsForwardedWithItsTypeAndEndsTheCall) {
  for (const auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial,
                          asio::cancellation_type::total}) {
    manual_clock clock;
    random_generator rng(5);
    stormguard::test_util::counting_budget budget;
    retrier retry(policy(), clock, rng, budget);
    asio::io_context io;
    asio::cancellation_signal signal;
    std::vector<asio::cancellation_type> forwarded;
    int attempts = 0;
    std::optional<stormguard::retry_result<stormguard::done_t, std::error_code>> result;
    stormguard::async_retry<manual_timer>(
        retry, io.get_executor(), hanging_op{&io, &forwarded, &attempts},
        asio::bind_cancellation_slot(signal.slot(), [&](auto r) { result = std::move(r); }));
    io.poll();  // the first attempt starts and hangs
    ASSERT_EQ(attempts, 1);
    signal.emit(type);
    io.run();
    ASSERT_TRUE(result);
    EXPECT_EQ(forwarded, std::vector{type});
    EXPECT_EQ(result->reason, end_reason::cancelled);
    EXPECT_EQ(result->attempts, 1);
    EXPECT_EQ(attempts, 1) << "no attempt after the cancellation";
    EXPECT_EQ(result->last_error, k_aborted);
    EXPECT_TRUE(budget.records.empty()) << "an attempt cancelled by the caller is not recorded";
    EXPECT_EQ(budget.withdrawals, 0);
  }
}

TEST(AsyncRetry, StopTokenFromAnotherThreadEndsTheWait) {
  manual_clock clock;
  random_generator rng(5);
  asio::io_context io;
  std::stop_source stop;
  // The stop is requested on another thread while the wait is pending (the hook waits for it).
  auto retry = retrier(policy(), clock, rng).on_retry([&](int, const std::error_code&, duration) {
    std::thread([&] { stop.request_stop(); }).join();
  });
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  stormguard::async_retry<manual_timer>(
      retry, io.get_executor(), scripted_op{&io, {k_refused, k_refused}, &seen},
      stormguard::default_classifier{}, {.stop = stop.get_token()},
      [&](auto r) { result = std::move(r); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::cancelled);
  EXPECT_EQ(result->attempts, 1);
  EXPECT_EQ(seen.size(), 1U);
  EXPECT_EQ(seen[0].stop, stop.get_token()) << "the attempt sees the call's stop token";
}

TEST(AsyncRetry, StoppedBeforeTheFirstAttemptMakesNone) {
  manual_clock clock;
  random_generator rng(5);
  retrier retry(policy(), clock, rng);
  asio::io_context io;
  std::stop_source stop;
  stop.request_stop();
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  stormguard::async_retry<manual_timer>(
      retry, io.get_executor(), scripted_op{&io, {}, &seen}, stormguard::default_classifier{},
      {.stop = stop.get_token()}, [&](auto r) { result = std::move(r); });
  EXPECT_FALSE(result);
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::cancelled);
  EXPECT_EQ(result->attempts, 0);
  EXPECT_TRUE(seen.empty());
}

TEST(AsyncRetry, DeadlineGivesTimeLeftAndEndsWithoutAPointlessWait) {
  manual_clock clock;
  random_generator rng(5);
  // Delays are >= 1 s (no jitter): after one 1 s wait, a second would end past the deadline.
  retrier retry(
      retry_policy({.max_retries = 5,
                    .backoff = {.base = 1s, .cap = 1s, .jitter = stormguard::jitter::none}}),
      clock, rng);
  asio::io_context io;
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  stormguard::async_retry<manual_timer>(
      retry, io.get_executor(), scripted_op{&io, {k_refused, k_refused, k_refused}, &seen},
      stormguard::default_classifier{}, {.deadline = time_point{} + 1500ms},
      [&](auto r) { result = std::move(r); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::deadline_exceeded);
  EXPECT_EQ(result->attempts, 2);
  ASSERT_EQ(seen.size(), 2U);
  EXPECT_EQ(seen[0].time_left, 1500ms);
  EXPECT_EQ(seen[1].time_left, 500ms);
  EXPECT_EQ(clock.sleeps(), std::vector<duration>{1s});
  EXPECT_EQ(result->error_count(), 2U);
}

TEST(AsyncRetry, DeadlinePassedAtTheStartMakesNoAttempt) {
  manual_clock clock(time_point{} + 10s);
  random_generator rng(5);
  retrier retry(policy(), clock, rng);
  asio::io_context io;
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  stormguard::async_retry<manual_timer>(
      retry, io.get_executor(), scripted_op{&io, {}, &seen}, stormguard::default_classifier{},
      {.deadline = time_point{} + 10s}, [&](auto r) { result = std::move(r); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::deadline_exceeded);
  EXPECT_EQ(result->attempts, 0);
}

TEST(AsyncRetry, ThrottledRequestMakesNoAttempt) {
  manual_clock clock;
  random_generator rng(5);
  stormguard::test_util::counting_budget budget;
  budget.admit = false;
  retrier retry(policy(), clock, rng, budget);
  asio::io_context io;
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  stormguard::async_retry<manual_timer>(retry, io.get_executor(), scripted_op{&io, {}, &seen},
                                        [&](auto r) { result = std::move(r); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::throttled);
  EXPECT_EQ(result->attempts, 0);
  EXPECT_TRUE(seen.empty());
}

TEST(AsyncRetry, HooksAndClassifierAsForTheSyncRetrier) {
  manual_clock clock;
  random_generator rng(5);
  std::vector<int> retried;
  int gave_up = 0;
  auto retry = retrier(policy(2), clock, rng)
                   .on_retry([&](int n, const std::error_code&, duration) { retried.push_back(n); })
                   .on_give_up([&](const auto& r) {
                     ++gave_up;
                     EXPECT_EQ(r.reason, end_reason::attempts_exhausted);
                   });
  asio::io_context io;
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  // A classifier that retries everything (bool form), so that k_invalid is retried too.
  stormguard::async_retry<manual_timer>(
      retry, io.get_executor(), scripted_op{&io, {k_invalid, k_invalid, k_invalid}, &seen},
      [](const std::error_code&) { return true; }, [&](auto r) { result = std::move(r); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::attempts_exhausted);
  EXPECT_EQ(result->attempts, 3);
  EXPECT_EQ(retried, (std::vector{1, 2}));
  EXPECT_EQ(gave_up, 1);
}

TEST(AsyncRetry, ExpectedLikeOperationsKeepTheirValueAndErrorTypes) {
  manual_clock clock;
  random_generator rng(5);
  retrier retry(policy(), clock, rng);
  asio::io_context io;
  int n = 0;
  auto op = [&](const attempt_context&, auto&& token) {
    using result_type = stormguard::outcome<std::string, std::error_code>;
    return asio::async_initiate<decltype(token), void(result_type)>(
        [&](auto handler) {
          result_type r = ++n < 2 ? result_type(stormguard::failure{k_refused})
                                  : result_type(std::string("hello"));
          asio::post(io, [h = std::move(handler), r = std::move(r)]() mutable { h(std::move(r)); });
        },
        token);
  };
  std::optional<stormguard::retry_result<std::string, std::error_code>> result;
  stormguard::async_retry<manual_timer>(retry, io.get_executor(), op,
                                        [&](auto r) { result = std::move(r); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->value, "hello");
  EXPECT_EQ(result->attempts, 2);
}

asio::awaitable<int> flaky_coroutine(int attempt) {
  if (attempt < 3) throw std::system_error(k_refused);
  co_return attempt * 10;
}

TEST(AsyncRetry, CoroutineAttemptsAndUseAwaitable) {
  manual_clock clock;
  random_generator rng(5);
  retrier retry(policy(), clock, rng);
  asio::io_context io;
  std::optional<stormguard::retry_result<int, std::exception_ptr>> result;
  auto op = [&](const attempt_context& ctx, auto&& token) {
    return asio::co_spawn(io, flaky_coroutine(ctx.attempt), std::forward<decltype(token)>(token));
  };
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        result = co_await stormguard::async_retry<manual_timer>(retry, io.get_executor(), op,
                                                                asio::use_awaitable);
      },
      asio::detached);
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::success);
  EXPECT_EQ(result->value, 30);
  EXPECT_EQ(result->previous_errors.size(), 2U);
}

TEST(AsyncRetry, CallsOnAttemptAndOnEndAtTheSamePointsAsTheSyncRetrier) {
  const auto run = [](bool async, std::vector<std::error_code> script) {
    manual_clock clock;
    random_generator rng(11);
    std::vector<std::string> order;
    auto retry =
        retrier(policy(2), clock, rng)
            .on_attempt([&](const stormguard::attempt_event& e) {
              order.push_back("attempt " + std::to_string(e.attempt) + (e.delay ? " retry" : "") +
                              (e.reason ? " " + std::string(to_string(*e.reason)) : ""));
            })
            .on_retry([&](int, const std::error_code&, duration) { order.push_back("retry"); })
            .on_give_up([&](const auto&) { order.push_back("give_up"); })
            .on_end(
                [&](const auto& r) { order.push_back("end " + std::string(to_string(r.reason))); });
    if (async) {
      asio::io_context io;
      std::vector<attempt_context> seen;
      stormguard::async_retry<manual_timer>(retry, io.get_executor(),
                                            scripted_op{&io, script, &seen}, [](auto) {});
      io.run();
    } else {
      std::size_t i = 0;
      (void)retry([&](const attempt_context&) {
        return i < script.size() ? script[i++] : std::error_code();
      });
    }
    return order;
  };
  for (const auto& script :
       {std::vector<std::error_code>{}, std::vector<std::error_code>{k_refused},
        std::vector<std::error_code>{k_refused, k_refused, k_refused},
        std::vector<std::error_code>{k_invalid}}) {
    EXPECT_EQ(run(true, script), run(false, script)) << script.size();
  }
  EXPECT_EQ(run(true, {k_refused}), (std::vector<std::string>{"attempt 1 retry", "retry",
                                                              "attempt 2 success", "end success"}));
  EXPECT_EQ(run(true, {k_invalid}),
            (std::vector<std::string>{"attempt 1 not_retryable", "give_up", "end not_retryable"}));
}

TEST(AsyncRetry, UseFutureFromAThreadThatDoesNotRunTheExecutor) {
  manual_clock clock;
  random_generator rng(5);
  retrier retry(policy(), clock, rng);
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  std::vector<attempt_context> seen;
  auto future = stormguard::async_retry<manual_timer>(
      retry, io.get_executor(), scripted_op{&io, {k_refused}, &seen}, asio::use_future);
  const auto result = future.get();
  guard.reset();
  runner.join();
  EXPECT_EQ(result.reason, end_reason::success);
  EXPECT_EQ(result.attempts, 2);
}

TEST(AsyncRetry, ThousandConcurrentCallsOnOneThreadAllEnd) {
  manual_clock clock;
  random_generator rng(9);
  stormguard::ratio_budget budget;
  retrier retry(policy(), clock, rng, budget);
  asio::io_context io;
  std::vector<attempt_context> seen;
  seen.reserve(10'000);
  int ok = 0;
  int failed = 0;
  for (int i = 0; i < 1'000; ++i) {
    std::vector<std::error_code> script(static_cast<std::size_t>(i % 2), k_refused);
    stormguard::async_retry<manual_timer>(retry, io.get_executor(), scripted_op{&io, script, &seen},
                                          [&](auto r) { ++(r.ok() ? ok : failed); });
  }
  io.run();
  EXPECT_EQ(ok + failed, 1'000);
  // 10 % of 1,000 requests plus the floor of 10/s over 10 s: at most 200 retries for 500
  // failures; every other failed request ends with budget_exhausted.
  EXPECT_LE(seen.size(), 1'000U + 200U);
  EXPECT_GE(failed, 300);
}

TEST(AsyncRetry, SteadyTimerIsTheDefault) {
  stormguard::real_clock clock;
  random_generator rng(5);
  retrier retry(retry_policy({.max_retries = 1, .backoff = {.base = 0ms, .cap = 0ms}}), clock, rng);
  asio::io_context io;
  std::vector<attempt_context> seen;
  std::optional<stormguard::retry_result<int, std::error_code>> result;
  stormguard::async_retry(retry, io.get_executor(), scripted_op{&io, {k_refused}, &seen},
                          [&](auto r) { result = std::move(r); });
  io.run();
  ASSERT_TRUE(result);
  EXPECT_EQ(result->reason, end_reason::success);
  EXPECT_EQ(result->slept, 0ms) << "a zero delay: no real time waited";
}

}  // namespace
