// SPDX-License-Identifier: Apache-2.0
// bench/allocations_per_op.hpp: the benchmark loop that reports heap allocations per operation
// (counted by bench/counting_allocator.hpp, which this includes: include it in exactly one source
// file of a benchmark program) and items per second.
#ifndef STORMGUARD_BENCH_ALLOCATIONS_PER_OP_HPP
#define STORMGUARD_BENCH_ALLOCATIONS_PER_OP_HPP

#include <benchmark/benchmark.h>

#include "counting_allocator.hpp"

namespace stormguard_bench {

// Runs the benchmark loop `body` and reports allocs/op (operator new calls per iteration) and
// items per second (one item per iteration).
template <class Body>
void run_counting_allocations(benchmark::State& state, Body body) {
  const long before = g_allocations.load();
  for (auto _ : state) body();
  state.counters["allocs/op"] = benchmark::Counter(
      static_cast<double>(g_allocations.load() - before), benchmark::Counter::kAvgIterations);
  state.SetItemsProcessed(state.iterations());
}

}  // namespace stormguard_bench

#endif  // STORMGUARD_BENCH_ALLOCATIONS_PER_OP_HPP
