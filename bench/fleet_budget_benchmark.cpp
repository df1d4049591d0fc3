// SPDX-License-Identifier: Apache-2.0
// The fleet budget's per-request cost against ratio_budget, measured in the same run, on 1 and 2
// threads sharing one budget. One iteration is one logical request that fails once and retries:
//
//   try_admit(now, g); try_withdraw(now, failure, g)
//
//   BM_RatioBudget        Finagle's ratio budget kept per process (the baseline)
//   BM_FleetBudget        the same budget kept for a fleet (joined: credit from the last sync);
//                         a sync with an in-memory store every 100 ms of virtual time runs on
//                         thread 0, off the measured calls' path as the Redis syncer's thread is
//
// Each row reports allocs/op (counted by the replaced operator new): 0 for both.
//
// Reproduce: build/bench/fleet_budget_benchmark (see docs/performance.md).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

#include "allocations_per_op.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/random.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_status;
using stormguard_bench::run_counting_allocations;

void BM_RatioBudget(benchmark::State& state) {
  static stormguard::ratio_budget shared;
  stormguard::random_generator g(static_cast<std::uint64_t>(state.thread_index()) + 1);
  stormguard::time_point now{};
  run_counting_allocations(state, [&] {
    now += 1us;
    benchmark::DoNotOptimize(shared.try_admit(now, g));
    benchmark::DoNotOptimize(shared.try_withdraw(now, attempt_status::failure, g));
  });
}
BENCHMARK(BM_RatioBudget)->Threads(1)->Threads(2)->UseRealTime();

void BM_FleetBudget(benchmark::State& state) {
  static stormguard::fleet_budget shared;
  // The store's answer: a fleet of 100 clients with room for retries (this process 1 %).
  stormguard::random_generator g(static_cast<std::uint64_t>(state.thread_index()) + 1);
  stormguard::time_point now{};
  std::int64_t calls = 0;
  run_counting_allocations(state, [&] {
    now += 1us;
    if (state.thread_index() == 0 && ++calls % 100'000 == 0) {
      // Every 100 ms of virtual time: one sync (its cost is the syncer thread's, not a request's;
      // it is inside the loop here only so the budget stays joined).
      const auto out = shared.begin_sync(now);
      benchmark::DoNotOptimize(out);
      shared.end_sync(now, stormguard::fleet_view{10'000'000, 100'000, 100});
    }
    benchmark::DoNotOptimize(shared.try_admit(now, g));
    benchmark::DoNotOptimize(shared.try_withdraw(now, attempt_status::failure, g));
  });
}
BENCHMARK(BM_FleetBudget)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
