// SPDX-License-Identifier: Apache-2.0
// The cost of hedging when it is not needed: a hedged call whose first copy answers before the
// hedging delay (async_hedge, delay 20 ms, on a real asio::steady_timer) against an unhedged
// async call (async_retry) of the same operation, in the same run: time and allocations per
// call. The operation completes at once (posted). Figures and command: docs/performance.md.
#include <benchmark/benchmark.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <system_error>

#include "counting_allocator.hpp"
#include "stormguard/asio/hedge.hpp"
#include "stormguard/asio/retry.hpp"

namespace {

using namespace std::chrono_literals;

// An operation that completes at once (posted) with no error.
struct ready_op {
  asio::io_context* io;
  template <class Token>
  auto operator()(const stormguard::attempt_context&, Token&& token) const {
    return asio::async_initiate<Token, void(std::error_code)>(
        [io = io](auto handler) {
          asio::post(*io, [h = std::move(handler)]() mutable { h(std::error_code()); });
        },
        token);
  }
};

// Runs `await_one()` once per iteration in a coroutine on `io`; reports allocations per call.
template <class F>
void await_loop(benchmark::State& state, asio::io_context& io, F await_one) {
  long allocations = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const long before = stormguard_bench::g_allocations.load();
        for (auto _ : state) co_await await_one();
        allocations = stormguard_bench::g_allocations.load() - before;
      },
      asio::detached);
  io.run();
  state.counters["allocs/call"] =
      static_cast<double>(allocations) / static_cast<double>(state.iterations());
}

void BM_UnhedgedAsyncRetry(benchmark::State& state) {
  asio::io_context io;
  ready_op op{&io};
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng);
  await_loop(state, io, [&]() -> asio::awaitable<void> {
    auto r = co_await stormguard::async_retry(retry, io.get_executor(), op, asio::use_awaitable);
    if (!r.ok()) state.SkipWithError("the call failed");
    benchmark::DoNotOptimize(r);
  });
}
BENCHMARK(BM_UnhedgedAsyncRetry);

void BM_HedgedFirstCopyWins(benchmark::State& state) {
  asio::io_context io;
  ready_op op{&io};
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  stormguard::hedger hedge(stormguard::hedging_policy({.max_attempts = 2, .delay = 20ms}), clock,
                           rng);
  await_loop(state, io, [&]() -> asio::awaitable<void> {
    auto r = co_await stormguard::async_hedge(hedge, io.get_executor(), op, asio::use_awaitable);
    if (!r.ok() || r.report.sent != 1) state.SkipWithError("a copy was sent or the call failed");
    benchmark::DoNotOptimize(r);
  });
}
BENCHMARK(BM_HedgedFirstCopyWins);

}  // namespace
