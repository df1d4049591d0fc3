// SPDX-License-Identifier: Apache-2.0
// The idempotency guard's cost per request, per store (docs/performance.md "Idempotency guard"):
//   Bare      the handler's own write (one INSERT / RPUSH) with no guard — the baseline;
//   RoundTrip the store's minimal round trip (SELECT 1 / PING) — what one step costs at least;
//   Guarded   guard.handle with a new key: begin + complete (the handler's write inside);
//   Replay    guard.handle with a key already completed: begin returns the stored response.
// Each store runs against a real server started for the run (SQLite: a file in a temporary
// directory; PostgreSQL and Redis: tests/support's servers on loopback).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <string>

#include "stormguard/guard/guard.hpp"
#include "stormguard/guard/stores.hpp"
#include "stormguard/idempotency.hpp"
#include "support/postgres_server.hpp"
#include "support/redis_server.hpp"

namespace {

namespace sg = stormguard::guard;

const std::filesystem::path& scratch() {
  static const struct dir {
    std::filesystem::path path;
    dir() {
      std::string tmpl =
          (std::filesystem::temp_directory_path() / "sg-guard-bench-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
      path = tmpl;
    }
    ~dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } d;
  return d.path;
}

enum class kind { sqlite, postgres, redis };

/// One store per kind for the whole run, with the ledger table created.
sg::store& store_of(kind k) {
  static std::unique_ptr<sg::store> stores[3];
  auto& s = stores[static_cast<int>(k)];
  if (!s) {
    switch (k) {
      case kind::sqlite:
        s = sg::make_sqlite_store({.path = (scratch() / "bench.db").string()});
        break;
      case kind::postgres:
        s = sg::make_postgres_store(
            {.url = stormguard::test_support::shared_postgres_server().url()});
        break;
      case kind::redis:
        s = sg::make_redis_store({.url = stormguard::test_support::redis_server::shared().url()});
        break;
    }
    if (s->kind() != sg::store_kind::redis) {
      s->query("CREATE TABLE IF NOT EXISTS bench_ledger (k TEXT NOT NULL)", {});
    }
  }
  return *s;
}

void write_ledger(sg::transaction& tx, std::string_view key) {
  if (tx.kind() == sg::store_kind::redis) {
    tx.execute("RPUSH", {"bench_ledger", key});
  } else {
    tx.execute("INSERT INTO bench_ledger (k) VALUES ($1)", {key});
  }
}

/// A key never used before in this run or an earlier one (the stores outlive a run: the
/// PostgreSQL and Redis servers are fresh, the SQLite file too, but Google Benchmark calls each
/// function several times).
std::string fresh_key(std::string_view prefix) {
  static const std::string run = stormguard::make_idempotency_key();
  static std::int64_t n = 0;
  return std::string(prefix) + "-" + run + "-" + std::to_string(n++);
}

void Bare(benchmark::State& state, kind k) {
  sg::store& s = store_of(k);
  for (auto _ : state) {
    const std::string key = fresh_key("bare");
    if (s.kind() == sg::store_kind::redis) {
      benchmark::DoNotOptimize(s.query("RPUSH", {"bench_ledger", key}));
    } else {
      benchmark::DoNotOptimize(s.query("INSERT INTO bench_ledger (k) VALUES ($1)", {key}));
    }
  }
}

void RoundTrip(benchmark::State& state, kind k) {
  sg::store& s = store_of(k);
  for (auto _ : state) {
    if (s.kind() == sg::store_kind::redis) {
      benchmark::DoNotOptimize(s.query("PING", {}));
    } else {
      benchmark::DoNotOptimize(s.query("SELECT 1", {}));
    }
  }
}

void Guarded(benchmark::State& state, kind k) {
  sg::store& s = store_of(k);
  sg::idempotency_guard g(s);
  for (auto _ : state) {
    const std::string key = fresh_key("g");
    const auto r =
        g.handle({"bench", "POST", "/charges", "{\"amount\":1}", key}, [&](sg::transaction& tx) {
          write_ledger(tx, key);
          return sg::stored_response{201, {}, "{}"};
        });
    if (r.decision != sg::decision::ran) state.SkipWithError("not ran");
  }
}

void Replay(benchmark::State& state, kind k) {
  sg::store& s = store_of(k);
  sg::idempotency_guard g(s);
  const std::string key = fresh_key("replay");
  const sg::request req{"bench", "POST", "/charges", "{\"amount\":1}", key};
  auto h = [&](sg::transaction& tx) {
    write_ledger(tx, key);
    return sg::stored_response{201, {{"Content-Type", "application/json"}}, "{\"id\":1}"};
  };
  (void)g.handle(req, h);
  for (auto _ : state) {
    const auto r = g.handle(req, h);
    if (r.decision != sg::decision::replayed) state.SkipWithError("not replayed");
  }
}

#define STORE_BENCHMARKS(k)                                                \
  BENCHMARK_CAPTURE(Bare, k, kind::k)->Unit(benchmark::kMicrosecond);      \
  BENCHMARK_CAPTURE(RoundTrip, k, kind::k)->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(Guarded, k, kind::k)->Unit(benchmark::kMicrosecond);   \
  BENCHMARK_CAPTURE(Replay, k, kind::k)->Unit(benchmark::kMicrosecond)

STORE_BENCHMARKS(sqlite);
STORE_BENCHMARKS(postgres);
STORE_BENCHMARKS(redis);

}  // namespace
