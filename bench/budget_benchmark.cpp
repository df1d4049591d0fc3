// SPDX-License-Identifier: Apache-2.0
// Every retry budget's per-request cost, on 1 and 2 threads sharing one budget, against a
// baseline measured in the same run. One iteration is one logical request that fails once and
// succeeds on its retry, through the retry_budget calls the retrier makes:
//
//   try_admit(now, g); record(failure, attempt 1); try_withdraw(now, failure, g);
//   record(success, attempt 2)
//
//   BM_Baseline_MutexCounter    a std::mutex-guarded int64: deposit, then withdraw (the simplest
//                               thread-safe budget one could write; two critical sections)
//   BM_Budget<no_budget>        compiles to nothing
//   BM_Budget<ratio_budget>     Finagle: mutex + 11-slot window (record is a no-op)
//   BM_Budget<token_bucket_throttle>   gRPC: one atomic, compare-and-swap
//   BM_Budget<retry_quota>      AWS: one atomic, compare-and-swap
//   BM_Budget<adaptive_throttle>       SRE: mutex + 61-slot window, 3 critical sections
//
// Time advances 1 us per request per thread, so windows slide as under ~1 M requests/s and the
// threads' times arrive slightly out of order, as real ones do.
//
// Reproduce: build/bench/budget_benchmark (see docs/performance.md).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <mutex>

#include "stormguard/budget.hpp"
#include "stormguard/random.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_report;
using stormguard::attempt_status;

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

void BM_Baseline_MutexCounter(benchmark::State& state) {
  static mutex_counter shared;
  for (auto _ : state) {
    shared.deposit();
    benchmark::DoNotOptimize(shared.try_withdraw());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_MutexCounter)->Threads(1)->Threads(2)->UseRealTime();

template <class B>
void BM_Budget(benchmark::State& state) {
  static B shared;  // one budget shared by the benchmark's threads
  stormguard::random_generator g(static_cast<std::uint64_t>(state.thread_index()) + 1);
  stormguard::time_point now{};
  for (auto _ : state) {
    now += 1us;
    benchmark::DoNotOptimize(shared.try_admit(now, g));
    shared.record(now, attempt_report{attempt_status::failure, 1, attempt_status::success});
    benchmark::DoNotOptimize(shared.try_withdraw(now, attempt_status::failure, g));
    shared.record(now, attempt_report{attempt_status::success, 2, attempt_status::failure});
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_TEMPLATE(BM_Budget, stormguard::no_budget)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Budget, stormguard::ratio_budget)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Budget, stormguard::token_bucket_throttle)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK_TEMPLATE(BM_Budget, stormguard::retry_quota)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(BM_Budget, stormguard::adaptive_throttle)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
