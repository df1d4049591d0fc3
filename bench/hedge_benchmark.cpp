// SPDX-License-Identifier: Apache-2.0
// The cost of hedging when it is not needed: a hedged call whose first copy answers before the
// hedging delay (async_hedge, delay 20 ms, on a real asio::steady_timer) against an unhedged
// async call (async_retry) of the same operation, in the same run: time and allocations per
// call. The operation completes at once (posted). And the same over HTTP: a hedged
// http::async_hedge call whose first copy answers before the delay against an unhedged
// async_client call, to a loopback server named by an IP literal or by a name (localhost, no
// client_options::resolve entry: the hedge would look it up if a second copy went). Figures and
// command: docs/performance.md.
#include <benchmark/benchmark.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>
#include <system_error>

#include "../tests/support/concurrent_http_server.hpp"
#include "counting_allocator.hpp"
#include "stormguard/asio/hedge.hpp"
#include "stormguard/asio/retry.hpp"
#include "stormguard/http/hedge.hpp"

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

// The loopback server of the HTTP benchmarks (keep-alive, 200 "ok" at once).
stormguard::test_support::concurrent_server& http_server() {
  static stormguard::test_support::concurrent_server instance({});
  return instance;
}

// The URL: state.range(0) == 0: http://127.0.0.1:PORT/x; 1: http://localhost:PORT/x.
std::string http_url(const benchmark::State& state) {
  return std::string("http://") + (state.range(0) == 0 ? "127.0.0.1" : "localhost") + ":" +
         std::to_string(http_server().port()) + "/x";
}

stormguard::http::client_options one_attempt() {
  stormguard::http::client_options o;
  o.retry.max_retries = 0;
  o.budget = stormguard::no_budget{};
  return o;
}

void BM_HttpUnhedged(benchmark::State& state) {
  asio::io_context io;
  stormguard::http::async_client client(io.get_executor(), one_attempt());
  stormguard::http::request req;
  req.url = http_url(state);
  await_loop(state, io, [&]() -> asio::awaitable<void> {
    auto r = co_await client.async_perform(req, asio::use_awaitable);
    if (!r.ok()) state.SkipWithError("the call failed");
    benchmark::DoNotOptimize(r);
  });
}
BENCHMARK(BM_HttpUnhedged)->Arg(0)->Arg(1)->ArgName("name");

void BM_HttpHedgedFirstCopyWins(benchmark::State& state) {
  asio::io_context io;
  stormguard::http::async_client client(io.get_executor(), one_attempt());
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  stormguard::hedger hedge(stormguard::hedging_policy({.max_attempts = 2, .delay = 20ms}), clock,
                           rng);
  stormguard::http::request req;
  req.url = http_url(state);
  await_loop(state, io, [&]() -> asio::awaitable<void> {
    auto r =
        co_await stormguard::http::async_hedge(client, hedge, req, {}, {}, asio::use_awaitable);
    if (!r.ok() || r.report.sent != 1) state.SkipWithError("a copy was sent or the call failed");
    benchmark::DoNotOptimize(r);
  });
}
BENCHMARK(BM_HttpHedgedFirstCopyWins)->Arg(0)->Arg(1)->ArgName("name");

}  // namespace
