// ratio_budget deposit + try_withdraw (one logical request that asks for one retry), on 1 and
// 2 threads sharing one budget, against baselines measured in the same run:
//   BM_Baseline_MutexCounter       the same two operations on a std::mutex-guarded int64
//   BM_NoBudget                    stormguard::no_budget (compiles to nothing)
//   BM_RatioBudget                 stormguard::ratio_budget, time advancing 1 us per request
//
// Reproduce: build/bench/budget_benchmark (see docs/performance.md).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <mutex>

#include "stormguard/budget.hpp"

namespace {

using namespace std::chrono_literals;

// The simplest thread-safe budget one could write: a counter under a mutex, with the same
// deposit-then-withdraw pattern (and no window at all).
class mutex_counter {
 public:
  void deposit() {
    std::lock_guard lock(mutex_);
    micro_ += 100'000;
  }
  bool try_withdraw() {
    std::lock_guard lock(mutex_);
    if (micro_ < 1'000'000) return false;
    micro_ -= 1'000'000;
    return true;
  }

 private:
  std::mutex mutex_;
  std::int64_t micro_ = 0;
};

mutex_counter shared_counter;
stormguard::ratio_budget shared_budget;
stormguard::no_budget shared_no_budget;

void BM_Baseline_MutexCounter(benchmark::State& state) {
  for (auto _ : state) {
    shared_counter.deposit();
    benchmark::DoNotOptimize(shared_counter.try_withdraw());
  }
  state.SetItemsProcessed(state.iterations());  // requests (deposit + withdraw pairs)
}
BENCHMARK(BM_Baseline_MutexCounter)->Threads(1)->Threads(2)->UseRealTime();

void BM_NoBudget(benchmark::State& state) {
  stormguard::time_point now{};
  for (auto _ : state) {
    now += 1us;
    shared_no_budget.deposit(now);
    benchmark::DoNotOptimize(shared_no_budget.try_withdraw(now));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NoBudget)->Threads(1)->Threads(2)->UseRealTime();

void BM_RatioBudget(benchmark::State& state) {
  // Each thread's clock advances 1 us per request, so the window slides (slices expire) as it
  // would under ~1 M requests/s; threads interleave slightly out of order, as real ones do.
  stormguard::time_point now{};
  for (auto _ : state) {
    now += 1us;
    shared_budget.deposit(now);
    benchmark::DoNotOptimize(shared_budget.try_withdraw(now));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RatioBudget)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
