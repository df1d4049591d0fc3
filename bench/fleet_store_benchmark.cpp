// SPDX-License-Identifier: Apache-2.0
// The load a fleet budget puts on its Redis (stormguard::fleet::redis_sync against a real
// redis-server started in a temporary directory, tests/support/redis_server.hpp):
//
//   BM_FleetStoreLoad/200    200 processes' budgets (one syncer each, its own thread, the
//                            default sync_interval 100 ms), each budget fed 10 requests/s, for
//                            5 s: Redis commands/s (INFO's total_commands_processed) and
//                            syncs/s. Expected: 200 ÷ 100 ms = 2,000 syncs/s, one command each.
//   BM_FleetStoreSaturation  T threads each forcing syncs of its 50 budgets back to back as fast
//                            as Redis answers: the syncs/s one Redis serves on this machine (the
//                            fleet size at which it saturates is that × sync_interval).
//
// Reproduce: cmake --build build --target fleet_store_benchmark &&
//            build/bench/fleet_store_benchmark (docs/performance.md).
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/fleet/redis_sync.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/random.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::test_support::redis_server;

// INFO stats' total_commands_processed of the shared server.
std::int64_t commands_processed() {
  redisContext* c = redisConnect("127.0.0.1", redis_server::shared().port());
  if (c == nullptr || c->err != 0) return -1;
  auto* r = static_cast<redisReply*>(redisCommand(c, "INFO stats"));
  std::int64_t n = -1;
  if (r != nullptr && r->type == REDIS_REPLY_STRING) {
    const std::string text(r->str, r->len);
    const std::string key = "total_commands_processed:";
    if (const auto at = text.find(key); at != std::string::npos) {
      n = std::stoll(text.substr(at + key.size()));
    }
  }
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  return n;
}

void BM_FleetStoreLoad(benchmark::State& state) {
  const auto clients = static_cast<int>(state.range(0));
  stormguard::real_clock clock;
  const std::string key = "bench-load-" + std::to_string(clients);
  for (auto _ : state) {
    std::vector<std::unique_ptr<stormguard::fleet_budget>> budgets;
    std::vector<std::unique_ptr<stormguard::fleet::redis_sync>> syncs;
    for (int i = 0; i < clients; ++i) {
      budgets.push_back(std::make_unique<stormguard::fleet_budget>());
      stormguard::fleet::redis_sync_options o;
      o.url = redis_server::shared().url();
      o.key = key;
      o.client_id = "c" + std::to_string(i);
      syncs.push_back(
          std::make_unique<stormguard::fleet::redis_sync>(*budgets.back(), std::move(o), clock));
    }
    // Each budget gets 10 requests/s (so that its syncer syncs every sync_interval).
    std::atomic<bool> done{false};
    std::thread feeder([&] {
      stormguard::random_generator g(1);
      while (!done.load()) {
        for (auto& b : budgets) (void)b->try_admit(clock.now(), g);
        std::this_thread::sleep_for(100ms);
      }
    });
    std::this_thread::sleep_for(1s);  // every syncer has joined
    const std::int64_t before_commands = commands_processed();
    std::int64_t before_syncs = 0;
    for (auto& s : syncs) before_syncs += s->stats().syncs;
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(5s);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::int64_t after_syncs = 0;
    std::int64_t errors = 0;
    for (auto& s : syncs) {
      after_syncs += s->stats().syncs;
      errors += s->stats().errors;
    }
    const std::int64_t after_commands = commands_processed();
    done.store(true);
    feeder.join();
    state.counters["redis_cmds/s"] =
        static_cast<double>(after_commands - before_commands - 1) / seconds;
    state.counters["syncs/s"] = static_cast<double>(after_syncs - before_syncs) / seconds;
    state.counters["errors"] = static_cast<double>(errors);
    syncs.clear();
  }
}
BENCHMARK(BM_FleetStoreLoad)->Arg(200)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_FleetStoreSaturation(benchmark::State& state) {
  stormguard::real_clock clock;
  constexpr int k_budgets = 50;
  std::vector<std::unique_ptr<stormguard::fleet_budget>> budgets;
  std::vector<std::unique_ptr<stormguard::fleet::redis_sync>> syncs;
  for (int i = 0; i < k_budgets; ++i) {
    budgets.push_back(std::make_unique<stormguard::fleet_budget>());
    stormguard::fleet::redis_sync_options o;
    o.url = redis_server::shared().url();
    o.key = "bench-saturation";
    o.client_id = "t" + std::to_string(state.thread_index()) + "-c" + std::to_string(i);
    o.start_thread = false;
    syncs.push_back(
        std::make_unique<stormguard::fleet::redis_sync>(*budgets.back(), std::move(o), clock));
  }
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(syncs[i]->sync_once(true));
    i = (i + 1) % syncs.size();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FleetStoreSaturation)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

}  // namespace
