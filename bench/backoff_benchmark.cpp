// SPDX-License-Identifier: Apache-2.0
// Delay computation per jitter, against baselines measured in the same run:
//   BM_Baseline_RandomGenerator    one bare stormguard::random_generator call (the floor)
//   BM_Baseline_NaiveFullJitter    a typical hand-written full jitter: std::pow for the ceiling,
//                                  std::uniform_real_distribution over std::mt19937_64
//   BM_Delay/<jitter>              stormguard::backoff::delay, retries cycling 1..8
//   BM_Delay_LargeRetry/<jitter>   the same past the precomputed table (retry 1000)
//
// Reproduce: build/bench/backoff_benchmark (see docs/performance.md).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>

#include "stormguard/backoff.hpp"
#include "stormguard/random.hpp"

namespace {

using namespace std::chrono_literals;

void BM_Baseline_RandomGenerator(benchmark::State& state) {
  stormguard::random_generator rng(1);
  for (auto _ : state) benchmark::DoNotOptimize(rng());
}
BENCHMARK(BM_Baseline_RandomGenerator);

// What a retry loop written by hand often looks like.
void BM_Baseline_NaiveFullJitter(benchmark::State& state) {
  std::mt19937_64 rng(1);
  const double base_ms = 100.0;
  const double cap_ms = 3000.0;
  int retry = 0;
  for (auto _ : state) {
    retry = (retry & 7) + 1;
    const double ceiling = std::min(cap_ms, base_ms * std::pow(2.0, retry - 1));
    std::uniform_real_distribution<double> dist(0.0, ceiling);
    const auto delay = std::chrono::duration<double, std::milli>(dist(rng));
    benchmark::DoNotOptimize(delay);
  }
}
BENCHMARK(BM_Baseline_NaiveFullJitter);

stormguard::backoff make_backoff(int jitter_index) {
  return stormguard::backoff({.base = 100ms,
                              .cap = 3s,
                              .multiplier = 2.0,
                              .jitter = static_cast<stormguard::jitter>(jitter_index)});
}

void set_jitter_label(benchmark::State& state) {
  state.SetLabel(std::string(to_string(static_cast<stormguard::jitter>(state.range(0)))));
}

void BM_Delay(benchmark::State& state) {
  const stormguard::backoff b = make_backoff(static_cast<int>(state.range(0)));
  stormguard::random_generator rng(1);
  stormguard::duration previous{};
  int retry = 0;
  for (auto _ : state) {
    retry = (retry & 7) + 1;
    previous = b.delay(retry, rng, retry == 1 ? stormguard::duration::zero() : previous);
    benchmark::DoNotOptimize(previous);
  }
  set_jitter_label(state);
}
// 0 none, 1 equal, 2 full, 3 decorrelated (the enum's order).
BENCHMARK(BM_Delay)->DenseRange(0, 3);

void BM_Delay_LargeRetry(benchmark::State& state) {
  const stormguard::backoff b = make_backoff(static_cast<int>(state.range(0)));
  stormguard::random_generator rng(1);
  stormguard::duration previous{};
  int retry = 1000;
  benchmark::DoNotOptimize(retry);
  for (auto _ : state) {
    previous = b.delay(retry, rng, previous);
    benchmark::DoNotOptimize(previous);
  }
  set_jitter_label(state);
}
BENCHMARK(BM_Delay_LargeRetry)->DenseRange(0, 3);

}  // namespace
