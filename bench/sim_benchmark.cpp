// SPDX-License-Identifier: Apache-2.0
// Simulator throughput: events processed per second (items_per_second), on the built-in
// friday-night scenario for one strategy at a time and on a small scenario; the heap allocations
// per event (allocs/event, counted by the replaced operator new below: a few per run, none per
// event); the bare event queue as the baseline; and the whole brooker-occ sweep (19 client counts
// x 5 algorithms x 100 trials) on 1 and 2 threads.
//
//   build/bench/sim_benchmark --benchmark_filter=FridayNight
//   build/bench/sim_benchmark --benchmark_filter=BrookerOcc
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <queue>
#include <vector>

#include "app/occ.hpp"
#include "counting_allocator.hpp"
#include "stormguard/random.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"

using stormguard_bench::g_allocations;

namespace {

using namespace std::chrono_literals;
namespace sim = stormguard::sim;

void run(benchmark::State& state, const sim::scenario& scenario) {
  const auto strategies = sim::builtin_strategies();
  const sim::strategy& strategy = strategies[static_cast<std::size_t>(state.range(0))];
  std::int64_t events = 0;
  const long before = g_allocations.load();
  for (auto _ : state) {
    auto result = sim::simulate(scenario, strategy);
    events += result.events;
    benchmark::DoNotOptimize(result);
  }
  const long allocations = g_allocations.load() - before;
  state.SetItemsProcessed(events);
  state.counters["allocs/run"] =
      benchmark::Counter(static_cast<double>(allocations), benchmark::Counter::kAvgIterations);
  state.counters["allocs/event"] =
      static_cast<double>(allocations) / static_cast<double>(events > 0 ? events : 1);
  state.SetLabel(strategy.name);
}

// friday-night: 60 s of 2,000 req/s from 20 clients with a 10-s incident.
void BM_SimulateFridayNight(benchmark::State& state) { run(state, sim::friday_night()); }
BENCHMARK(BM_SimulateFridayNight)
    ->Arg(0)  // none
    ->Arg(1)  // naive
    ->Arg(4)  // full
    ->Arg(6)  // full+budget
    ->Unit(benchmark::kMillisecond);

// A small storm: 10 s of 500 req/s from 2 clients with a 4-s incident.
void BM_SimulateSmallStorm(benchmark::State& state) {
  sim::scenario s = sim::friday_night();
  s.name = "small-storm";
  s.length = 10s;
  s.requests_per_second = 500;
  s.clients = 2;
  s.workers = 25;
  s.queue_limit = 2'000;
  s.incident = sim::incident{2s, 6s, 1500ms, 0.0, 0.0};
  run(state, s);
}
BENCHMARK(BM_SimulateSmallStorm)->Arg(1)->Arg(6)->Unit(benchmark::kMicrosecond);

// The whole brooker-occ sweep of issue 6: 19 client counts x 5 algorithms x 100 trials, on
// Arg threads. Wall time (UseRealTime): the goal is under 1 s with both cores.
void BM_BrookerOccSweep(benchmark::State& state) {
  sim::occ_options o;
  o.threads = static_cast<unsigned>(state.range(0));
  std::int64_t events = 0;
  for (auto _ : state) {
    const auto report = sim::simulate_occ(o);
    events += report.events;
    benchmark::DoNotOptimize(report);
  }
  state.SetItemsProcessed(events);
}
BENCHMARK(BM_BrookerOccSweep)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// Baseline: the floor of any discrete-event simulator, a binary heap of 24-byte events ordered by
// (time, sequence), each popped event pushing one successor at a random later time. The
// simulator's ns/event divided by this one's is the cost of its model (server, clients, policy,
// budget and statistics) over a bare event queue. Arg = the number of events pending, about what
// the simulator holds in friday-night.
struct bare_event {
  std::int64_t time;
  std::uint64_t seq;
  std::uint64_t payload;
};
struct bare_later {
  bool operator()(const bare_event& a, const bare_event& b) const noexcept {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};
void BM_BaselineEventQueue(benchmark::State& state) {
  stormguard::random_generator rng{42};
  std::vector<bare_event> storage;
  storage.reserve(static_cast<std::size_t>(state.range(0)) * 2);
  std::priority_queue<bare_event, std::vector<bare_event>, bare_later> heap(bare_later{},
                                                                            std::move(storage));
  std::uint64_t seq = 0;
  for (std::int64_t i = 0; i < state.range(0); ++i) {
    heap.push({stormguard::uniform_int(rng, 1'000'000'000), seq++, 0});
  }
  for (auto _ : state) {
    const bare_event e = heap.top();
    heap.pop();
    heap.push({e.time + stormguard::uniform_int(rng, 1'000'000'000), seq++, e.payload + 1});
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BaselineEventQueue)->Arg(1'000)->Arg(20'000);

}  // namespace
