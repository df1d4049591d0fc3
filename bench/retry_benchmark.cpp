// The retrier's success path (the operation succeeds at once) against a direct call of the same
// operation, measured in the same run:
//   BM_Baseline_DirectCall             op(ctx), result checked
//   BM_Retrier_SuccessPath             retrier without a budget (the overhead should be a few ns)
//   BM_Retrier_SuccessPath_RatioBudget retrier with a ratio_budget: adds clock.now() + a deposit
//   BM_RetryPolicy_Decide              the pure decision after a failed attempt (draw + budget)
//
// Reproduce: build/bench/retry_benchmark (see docs/performance.md).
#include <benchmark/benchmark.h>

#include <chrono>

#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"

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
  for (auto _ : state) {
    auto result = retry(op);
    int value = result.ok() ? *result.value : -1;
    benchmark::DoNotOptimize(value);
  }
}
BENCHMARK(BM_Retrier_SuccessPath);

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

}  // namespace
