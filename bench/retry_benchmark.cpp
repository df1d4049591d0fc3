// SPDX-License-Identifier: Apache-2.0
// The retrier's success path (the operation succeeds at once) against a direct call of the same
// operation, measured in the same run:
//   BM_Baseline_DirectCall             op(ctx), result checked
//   BM_Retrier_SuccessPath             retrier without a budget (the overhead should be a few ns)
//   BM_Retrier_SuccessPath_RatioBudget retrier with a ratio_budget: adds clock.now() + a deposit
//   BM_Retrier_SuccessPath_ErrorCode   the operation returns std::error_code
//   BM_Retrier_SuccessPath_Throwing    the operation returns a plain int (a try block around it)
//   BM_Retrier_SuccessPath_Hooks       on_retry + on_give_up set, a stop token and a deadline
//   BM_Retrier_SuccessPath_Metrics     stormguard::metrics attached (retry_metrics::instrument):
//                                      two prometheus-cpp counter increments per call
//   BM_RetryPolicy_Decide              the pure decision after a failed attempt (draw + budget)
//   BM_RetryPolicy_Decide_RetryAfter   the same with a Retry-After verdict (one more draw)
//   BM_RealClock_StopWakeLatency       from request_stop() to the sleeping thread running again
//
// Every success-path row reports allocs/op, counted by the replaced operator new below: 0.
//
// Reproduce: build/bench/retry_benchmark (see docs/performance.md).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <stop_token>
#include <system_error>
#include <thread>

#include "allocations_per_op.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/metrics/retry_metrics.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"

using stormguard_bench::run_counting_allocations;

namespace {

using namespace std::chrono_literals;

using stormguard::attempt_context;
using stormguard::outcome;

// An operation with a little real work that the optimiser cannot remove.
struct operation {
  int seed = 1;
  outcome<int, int> operator()(const attempt_context& ctx) {
    benchmark::DoNotOptimize(seed);
    return seed + ctx.attempt;
  }
};

void BM_Baseline_DirectCall(benchmark::State& state) {
  operation op;
  const attempt_context first;  // attempt 1, no stop, no deadline
  for (auto _ : state) {
    auto r = op(first);
    int value = r.has_value() ? *r : -1;
    benchmark::DoNotOptimize(value);
  }
}
BENCHMARK(BM_Baseline_DirectCall);

void BM_Retrier_SuccessPath(benchmark::State& state) {
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng);
  operation op;
  run_counting_allocations(state, [&] {
    auto result = retry(op);
    int value = result.ok() ? *result.value : -1;
    benchmark::DoNotOptimize(value);
  });
}
BENCHMARK(BM_Retrier_SuccessPath);

void BM_Retrier_SuccessPath_ErrorCode(benchmark::State& state) {
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng);
  int seed = 0;
  run_counting_allocations(state, [&] {
    auto result = retry([&](const attempt_context&) {
      benchmark::DoNotOptimize(seed);
      return std::error_code{};
    });
    bool ok = result.ok();
    benchmark::DoNotOptimize(ok);
  });
}
BENCHMARK(BM_Retrier_SuccessPath_ErrorCode);

void BM_Retrier_SuccessPath_Throwing(benchmark::State& state) {
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng);
  int seed = 1;
  run_counting_allocations(state, [&] {
    auto result = retry([&](const attempt_context& ctx) {
      benchmark::DoNotOptimize(seed);
      return seed + ctx.attempt;
    });
    int value = result.ok() ? *result.value : -1;
    benchmark::DoNotOptimize(value);
  });
}
BENCHMARK(BM_Retrier_SuccessPath_Throwing);

void BM_Retrier_SuccessPath_Hooks(benchmark::State& state) {
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  int retries = 0;
  int give_ups = 0;
  auto retry = stormguard::retrier(stormguard::retry_policy{}, clock, rng)
                   .on_retry([&](int, const int&, stormguard::duration) { ++retries; })
                   .on_give_up([&](const auto&) { ++give_ups; });
  std::stop_source stop;
  const stormguard::call_options call{.stop = stop.get_token(), .deadline = clock.now() + 1h};
  operation op;
  run_counting_allocations(state, [&] {
    auto result = retry(op, {}, call);
    int value = result.ok() ? *result.value : -1;
    benchmark::DoNotOptimize(value);
  });
}
BENCHMARK(BM_Retrier_SuccessPath_Hooks);

void BM_Retrier_SuccessPath_Metrics(benchmark::State& state) {
  prometheus::Registry registry;
  stormguard::metrics::retry_metrics metrics(registry);
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  auto retry = metrics.instrument(stormguard::retrier(stormguard::retry_policy{}, clock, rng),
                                  "bench");  // the label set is created here, before the loop
  operation op;
  run_counting_allocations(state, [&] {
    auto result = retry(op);
    int value = result.ok() ? *result.value : -1;
    benchmark::DoNotOptimize(value);
  });
}
BENCHMARK(BM_Retrier_SuccessPath_Metrics);

void BM_Retrier_SuccessPath_RatioBudget(benchmark::State& state) {
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  stormguard::ratio_budget budget;
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng, budget);
  operation op;
  for (auto _ : state) {
    auto result = retry(op);
    int value = result.ok() ? *result.value : -1;
    benchmark::DoNotOptimize(value);
  }
}
BENCHMARK(BM_Retrier_SuccessPath_RatioBudget);

void BM_RetryPolicy_Decide(benchmark::State& state) {
  const stormguard::retry_policy policy;
  stormguard::random_generator rng(1);
  stormguard::no_budget budget;
  int attempt = 0;
  for (auto _ : state) {
    attempt = attempt % 3 + 1;
    auto decision = policy.decide(attempt, stormguard::classification::retry(),
                                  stormguard::duration::zero(), rng, budget, {});
    benchmark::DoNotOptimize(decision);
  }
}
BENCHMARK(BM_RetryPolicy_Decide);

void BM_RetryPolicy_Decide_RetryAfter(benchmark::State& state) {
  const stormguard::retry_policy policy;
  stormguard::random_generator rng(1);
  stormguard::no_budget budget;
  for (auto _ : state) {
    auto decision = policy.decide(1, stormguard::classification::retry_after(2s),
                                  stormguard::duration::zero(), rng, budget, {});
    benchmark::DoNotOptimize(decision);
  }
}
BENCHMARK(BM_RetryPolicy_Decide_RetryAfter);

// Building a policy per call (the natural pattern when the options come with the request)
// against copying one built once: the cost of validation and of the ceiling table.
void BM_RetryPolicy_Construct(benchmark::State& state) {
  stormguard::retry_options options;
  for (auto _ : state) {
    benchmark::DoNotOptimize(options);
    stormguard::retry_policy policy(options);
    benchmark::DoNotOptimize(policy);
  }
}
BENCHMARK(BM_RetryPolicy_Construct);

// Multiplier 1.5: std::pow per ceiling until the cap (9 of them for 100 ms .. 3 s).
void BM_RetryPolicy_Construct_Multiplier1_5(benchmark::State& state) {
  stormguard::retry_options options{.backoff = {.multiplier = 1.5}};
  for (auto _ : state) {
    benchmark::DoNotOptimize(options);
    stormguard::retry_policy policy(options);
    benchmark::DoNotOptimize(policy);
  }
}
BENCHMARK(BM_RetryPolicy_Construct_Multiplier1_5);

void BM_RetryPolicy_Copy(benchmark::State& state) {
  const stormguard::retry_policy built;
  for (auto _ : state) {
    benchmark::DoNotOptimize(&built);
    stormguard::retry_policy policy(built);
    benchmark::DoNotOptimize(policy);
  }
}
BENCHMARK(BM_RetryPolicy_Copy);

// A thread sleeps 10 s on real_clock; the time from request_stop() to that thread running again
// (manual time: only that interval is measured).
void BM_RealClock_StopWakeLatency(benchmark::State& state) {
  stormguard::real_clock clock;
  for (auto _ : state) {
    std::stop_source stop;
    std::atomic<bool> started{false};
    std::chrono::steady_clock::time_point woke;
    std::thread sleeper([&] {
      started = true;
      (void)clock.sleep_for(10s, stop.get_token());
      woke = std::chrono::steady_clock::now();
    });
    while (!started) std::this_thread::yield();
    std::this_thread::sleep_for(1ms);  // let it reach the wait
    const auto requested = std::chrono::steady_clock::now();
    stop.request_stop();
    sleeper.join();
    state.SetIterationTime(std::chrono::duration<double>(woke - requested).count());
  }
}
BENCHMARK(BM_RealClock_StopWakeLatency)
    ->UseManualTime()
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
