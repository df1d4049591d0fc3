// SPDX-License-Identifier: Apache-2.0
// The load a fleet budget puts on its Redis (stormguard::fleet::redis_sync against a real
// redis-server started in a temporary directory, tests/support/redis_server.hpp):
//
//   BM_FleetStoreLoad/200    200 processes' budgets (one syncer each, its own thread, the
//                            default sync_interval 100 ms), each budget fed 10 requests/s, for
//                            5 s: Redis commands/s (INFO's total_commands_processed) and
//                            syncs/s. Expected: 200 ÷ 100 ms = 2,000 syncs/s, one EVALSHA (and its
//                            script's 3 commands) each.
//   BM_FleetStoreSaturation  T threads each forcing syncs of its 50 budgets back to back as fast
//                            as Redis answers: the syncs/s one Redis serves on this machine (the
//                            fleet size at which it saturates is that × sync_interval). With one
//                            thread also the Redis commands per sync (INFO's count, the EVALSHA
//                            and the script's calls; the INFO itself excluded) and the script's
//                            Redis CPU per sync; at every thread count Redis's busy share of one
//                            core (INFO cpu) and the syncs/s that would fill it.
//   BM_FleetStoreSaturationProtocol2  the same with the script of fleet protocol 2 (stormguard
//                            0.2: three keys, a sorted set of heartbeats, 19 commands per
//                            sync), sent by hiredis with the arguments redis_sync sent: the
//                            baseline of the same run. Each sync is one budget's round trip.
//
// redis-server runs on a core of its own (give_redis_a_core, below; the context line
// "redis_server_core" says which).
//
// Reproduce: cmake --build build --target fleet_store_benchmark &&
//            build/bench/fleet_store_benchmark (docs/performance.md).
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// What a busy process reports per sync in the saturation benchmarks' busy variants: 10 requests
// and one retry (100 requests/s at the default sync_interval of 100 ms, 10 % of them retried).
constexpr int k_busy_requests = 10;
constexpr int k_busy_retries = 1;

// The script of fleet protocol 2, as src/fleet/redis_sync.cpp had it before protocol 3: the
// baseline of BM_FleetStoreSaturationProtocol2 (KEYS window, clients, claims, version; ARGV
// client id, requests, retries, slice ms, slices, ttl ms, largest delta, own requests, deposit,
// reserve, protocol).
constexpr std::string_view k_protocol_2_script = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local slice = tonumber(ARGV[4])
local slices = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local maxd = tonumber(ARGV[7])
local ours = ARGV[11]
local marker = redis.call('GET', KEYS[4])
if marker then
  if marker ~= ours then return redis.error_reply('STORMGUARD_FLEET_PROTOCOL ' .. marker) end
  local live = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
  if live > 0 then
    local marked = redis.call('HLEN', KEYS[3]) - redis.call('HEXISTS', KEYS[3], 't')
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
      marked = marked - redis.call('HEXISTS', KEYS[3], 'c:' .. id)
    end
    if live > marked then return redis.error_reply('STORMGUARD_FLEET_PROTOCOL 1') end
  end
elseif redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) > 0 then
  return redis.error_reply('STORMGUARD_FLEET_PROTOCOL 1')
end
local function clampto(v, most)
  v = tonumber(v) or 0
  if v < 0 then return 0 end
  if v > most then return most end
  return math.floor(v)
end
local function clamp(v) return clampto(v, maxd) end
local n = math.floor(now / slice)
local dr, dw = clamp(ARGV[2]), clamp(ARGV[3])
if dr > 0 then redis.call('HINCRBY', KEYS[1], 'r:' .. n, dr) end
if dw > 0 then redis.call('HINCRBY', KEYS[1], 'w:' .. n, dw) end
local all = redis.call('HGETALL', KEYS[1])
local req, ret = 0, 0
local stale = {}
for i = 1, #all, 2 do
  local f = all[i]
  local slot = tonumber(string.sub(f, 3))
  if slot == nil or slot < n - slices then
    stale[#stale + 1] = f
  elseif string.sub(f, 1, 1) == 'r' then
    req = req + tonumber(all[i + 1])
  else
    ret = ret + tonumber(all[i + 1])
  end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
redis.call('PEXPIRE', KEYS[1], 2 * slice * (slices + 1))
-- Claims: no live client, no claim; those of clients whose heartbeat expired are freed.
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('DEL', KEYS[3]) end
local claimed = tonumber(redis.call('HGET', KEYS[3], 't') or 0) or 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
  local c = redis.call('HGET', KEYS[3], 'c:' .. id)
  if c then
    claimed = claimed - (tonumber(c) or 0)
    redis.call('HDEL', KEYS[3], 'c:' .. id)
  end
end
claimed = claimed - (tonumber(redis.call('HGET', KEYS[3], 'c:' .. ARGV[1]) or 0) or 0)
if claimed < 0 then claimed = 0 end
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('PEXPIRE', KEYS[2], 2 * ttl)
local live = redis.call('ZCARD', KEYS[2])
-- fleet_budget::claim: the share of the allowance, never more than the others left unclaimed.
local own = clampto(ARGV[8], maxd * 1000)
local deposit = clampto(ARGV[9], 1000000000)
local reserve = clampto(ARGV[10], 60000000000000)
local allowance = req * deposit + reserve - ret * 1000000
local share
if req > 0 and own > 0 then
  share = math.min(1000000, math.floor(own * 1000000 / req))
elseif req > 0 then
  share = math.floor(1000000 / (req + 1))
else
  share = math.floor(1000000 / math.max(1, live))
end
local target
if allowance >= 0 then
  target = math.floor(allowance * share / 1000000)
else
  target = -math.floor(-allowance * share / 1000000)
end
local credit = math.min(target, math.max(0, allowance - claimed))
local bound = 4000000000000000
if credit > bound then credit = bound end
if credit < -bound then credit = -bound end
local keep = math.max(credit, 0)
redis.call('HSET', KEYS[3], 'c:' .. ARGV[1], keep, 't', claimed + keep)
redis.call('PEXPIRE', KEYS[3], 2 * ttl)
redis.call('SET', KEYS[4], ours, 'PX', math.max(2 * slice * (slices + 1), 2 * ttl) + 1000)
return {req, ret, live, credit}
)lua";

// INFO commandstats' "usec" of the scripts (EVALSHA and EVAL) on the shared server: the Redis
// CPU time the syncs took, their own calls included.
double script_usec() {
  redisContext* c = redisConnect("127.0.0.1", redis_server::shared().port());
  if (c == nullptr || c->err != 0) return -1;
  auto* r = static_cast<redisReply*>(redisCommand(c, "INFO commandstats"));
  double usec = 0;
  if (r != nullptr && r->type == REDIS_REPLY_STRING) {
    const std::string text(r->str, r->len);
    for (const std::string name : {"cmdstat_evalsha:", "cmdstat_eval:"}) {
      const auto at = text.find(name);
      if (at == std::string::npos) continue;
      const auto u = text.find("usec=", at);
      if (u != std::string::npos) usec += std::stod(text.substr(u + 5));
    }
  }
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  return usec;
}

// INFO cpu's used_cpu_sys + used_cpu_user of the shared server: the CPU seconds Redis has used.
double redis_cpu_s() {
  redisContext* c = redisConnect("127.0.0.1", redis_server::shared().port());
  if (c == nullptr || c->err != 0) return -1;
  auto* r = static_cast<redisReply*>(redisCommand(c, "INFO cpu"));
  double s = 0;
  if (r != nullptr && r->type == REDIS_REPLY_STRING) {
    const std::string text(r->str, r->len);
    for (const std::string name : {"used_cpu_sys:", "used_cpu_user:"}) {
      if (const auto at = text.find(name); at != std::string::npos) {
        s += std::stod(text.substr(at + name.size()));
      }
    }
  }
  if (r != nullptr) freeReplyObject(r);
  redisFree(c);
  return s;
}

// Thread 0's view of one saturation run: Redis's CPU and the wall clock from before the loop;
// at the end, "redis_cpu" (Redis's busy share of one core) and "redis_saturation/s", the syncs/s
// at which that core would be fully busy (syncs/s ÷ redis_cpu): what one Redis serves when its
// clients are not on its cores.
struct redis_busy {
  double cpu = 0;
  std::chrono::steady_clock::time_point start{};
  explicit redis_busy(const benchmark::State& state) {
    if (state.thread_index() != 0) return;
    cpu = redis_cpu_s();
    start = std::chrono::steady_clock::now();
  }
  void report(benchmark::State& state) const {
    if (state.thread_index() != 0) return;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double busy = (redis_cpu_s() - cpu) / wall;
    // Every thread ran about as many iterations as thread 0 over the same time.
    const double syncs = static_cast<double>(state.iterations()) * state.threads() / wall;
    state.counters["redis_cpu"] = busy;
    state.counters["redis_saturation/s"] = busy > 0 ? syncs / busy : 0;
  }
};

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

// The runs of both saturation benchmarks: idle and busy syncs, from 1, 2 and 4 threads.
void saturation_runs(benchmark::internal::Benchmark* b) {
  b->ArgName("busy")->Arg(0)->Arg(1)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();
}

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
  for (auto& s : syncs) (void)s->sync_once(true);  // every budget has joined
  const std::int64_t before = state.threads() == 1 ? commands_processed() : 0;
  const double before_usec = state.threads() == 1 ? script_usec() : 0;
  // Busy (range 1): each sync reports 10 requests and a retry, as a process that syncs because
  // it acts does (k_busy_requests, k_busy_retries); idle (range 0): nothing to report.
  const bool active = state.range(0) == 1;
  stormguard::random_generator g(static_cast<std::uint64_t>(state.thread_index()) + 1);
  const redis_busy busy(state);
  std::size_t i = 0;
  for (auto _ : state) {
    if (active) {
      const auto now = clock.now();
      for (int r = 0; r < k_busy_requests; ++r) (void)budgets[i]->try_admit(now, g);
      for (int r = 0; r < k_busy_retries; ++r) {
        (void)budgets[i]->try_withdraw(now, stormguard::attempt_status::failure, g);
      }
    }
    benchmark::DoNotOptimize(syncs[i]->sync_once(true));
    i = (i + 1) % syncs.size();
  }
  state.SetItemsProcessed(state.iterations());
  busy.report(state);
  if (state.threads() == 1) {
    state.counters["redis_cmds/sync"] = static_cast<double>(commands_processed() - before - 1) /
                                        static_cast<double>(state.iterations());
    // Redis's CPU per sync: 10^6 ÷ this is what one Redis core could serve, clients apart.
    state.counters["redis_us/sync"] =
        (script_usec() - before_usec) / static_cast<double>(state.iterations());
  }
}
BENCHMARK(BM_FleetStoreSaturation)->Apply(saturation_runs);

void BM_FleetStoreSaturationProtocol2(benchmark::State& state) {
  constexpr int k_budgets = 50;
  redisContext* c = redisConnect("127.0.0.1", redis_server::shared().port());
  if (c == nullptr || c->err != 0) {
    state.SkipWithError("cannot connect to redis-server");
    if (c != nullptr) redisFree(c);
    return;
  }
  auto* loaded = static_cast<redisReply*>(
      redisCommand(c, "SCRIPT LOAD %b", k_protocol_2_script.data(), k_protocol_2_script.size()));
  const std::string sha = loaded != nullptr && loaded->type == REDIS_REPLY_STRING
                              ? std::string(loaded->str, loaded->len)
                              : std::string();
  if (loaded != nullptr) freeReplyObject(loaded);
  // The arguments redis_sync sent (default budget: 10-s window, 1-s slices, 6-s heartbeat,
  // ratio 0.1, floor 10/s), as BM_FleetStoreSaturation's: idle (range 0) no deltas; busy
  // (range 1) k_busy_requests requests and k_busy_retries retries per sync, and the process's own
  // requests of the window (its 10 slices of k_busy_requests per sync: 10 syncs per slice at
  // 100 ms).
  const bool active = state.range(0) == 1;
  const std::string requests = active ? std::to_string(k_busy_requests) : "0";
  const std::string retries = active ? std::to_string(k_busy_retries) : "0";
  const std::string own = active ? std::to_string(k_busy_requests * 100) : "0";
  std::vector<std::vector<std::string>> calls;
  for (int i = 0; i < k_budgets; ++i) {
    calls.push_back({"EVALSHA", sha, "4", "{bench-protocol-2}:window", "{bench-protocol-2}:clients",
                     "{bench-protocol-2}:claims", "{bench-protocol-2}:version",
                     "t" + std::to_string(state.thread_index()) + "-c" + std::to_string(i),
                     requests, retries, "1000", "10", "6000", "10000000", own, "100000",
                     "100000000", "2"});
  }
  std::vector<std::vector<const char*>> argv(calls.size());
  std::vector<std::vector<std::size_t>> lens(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    for (const auto& a : calls[i]) {
      argv[i].push_back(a.data());
      lens[i].push_back(a.size());
    }
  }
  // One connection per budget, as each process's redis_sync keeps its own (BM_FleetStoreSaturation
  // too): Redis serves as many connections with either protocol.
  std::vector<redisContext*> connections;
  for (int i = 0; i < k_budgets; ++i) {
    redisContext* own = redisConnect("127.0.0.1", redis_server::shared().port());
    if (own == nullptr || own->err != 0) {
      state.SkipWithError("cannot connect to redis-server");
      if (own != nullptr) redisFree(own);
      for (redisContext* o : connections) redisFree(o);
      redisFree(c);
      return;
    }
    connections.push_back(own);
  }
  const auto sync = [&](std::size_t i) {
    auto* r = static_cast<redisReply*>(redisCommandArgv(
        connections[i], static_cast<int>(argv[i].size()), argv[i].data(), lens[i].data()));
    const bool ok = r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 4;
    if (r != nullptr) freeReplyObject(r);
    return ok;
  };
  for (std::size_t i = 0; i < calls.size(); ++i) (void)sync(i);
  const std::int64_t before = state.threads() == 1 ? commands_processed() : 0;
  const double before_usec = state.threads() == 1 ? script_usec() : 0;
  const redis_busy busy(state);
  std::size_t i = 0;
  std::int64_t errors = 0;
  for (auto _ : state) {
    if (!sync(i)) ++errors;
    i = (i + 1) % calls.size();
  }
  state.SetItemsProcessed(state.iterations());
  busy.report(state);
  state.counters["errors"] = static_cast<double>(errors);
  if (state.threads() == 1) {
    state.counters["redis_cmds/sync"] = static_cast<double>(commands_processed() - before - 1) /
                                        static_cast<double>(state.iterations());
    // Redis's CPU per sync: 10^6 ÷ this is what one Redis core could serve, clients apart.
    state.counters["redis_us/sync"] =
        (script_usec() - before_usec) / static_cast<double>(state.iterations());
  }
  for (redisContext* o : connections) redisFree(o);
  redisFree(c);
}
BENCHMARK(BM_FleetStoreSaturationProtocol2)->Apply(saturation_runs);

// Gives redis-server a core of its own, as a production Redis has: the last CPU this process may
// run on goes to Redis, the others to the benchmark's threads (which inherit the main thread's
// set). On a machine of two cores shared with its own clients, Redis's saturation otherwise
// measures the clients' scheduling as much as Redis. STORMGUARD_BENCH_SHARED_CORES=1 leaves
// every thread on every core. Returns what was done, for the report's context.
std::string give_redis_a_core() {
  if (const char* shared = std::getenv("STORMGUARD_BENCH_SHARED_CORES");
      shared != nullptr && std::string_view(shared) == "1") {
    return "no (STORMGUARD_BENCH_SHARED_CORES=1)";
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) {
    return "no (fewer than 2 CPUs)";
  }
  int last = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) last = cpu;
  }
  cpu_set_t redis_set;
  CPU_ZERO(&redis_set);
  CPU_SET(last, &redis_set);
  cpu_set_t ours = allowed;
  CPU_CLR(last, &ours);
  if (sched_setaffinity(redis_server::shared().pid(), sizeof redis_set, &redis_set) != 0 ||
      sched_setaffinity(0, sizeof ours, &ours) != 0) {
    return std::string("no (sched_setaffinity: ") + std::strerror(errno) + ")";
  }
  return "CPU " + std::to_string(last) + " (the benchmark: the other " +
         std::to_string(CPU_COUNT(&ours)) + ")";
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("redis_server_core", give_redis_a_core());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
