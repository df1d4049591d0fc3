// SPDX-License-Identifier: Apache-2.0
// The asynchronous side: async_retry's success path against co_await-ing the operation directly
// (time and allocations per call), and stormguard::http::async_client with 1, 100, 1,000 and
// 10,000 requests in flight on ONE client thread against bare libcurl multi (the same socket /
// timer callbacks on Asio, no retries), the same server, the same run; then the cancellation
// latency and the memory per request at 10,000 in flight. The HTTP server runs in a child process
// (fork, before anything else starts) on its own Asio loop, so the client's CPU time is the
// client's. Figures and commands: docs/performance.md.
//
// Connections are opened before the timed iterations, in batches of 1,000 held open by the
// server (somaxconn is 4,096 here), and then reused: the figures are the clients', not TCP's
// handshakes. RLIMIT_NOFILE is raised to its hard limit (20,000 on the benchmark machine).
#include <benchmark/benchmark.h>
#include <curl/curl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/streambuf.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "counting_allocator.hpp"
#include "stormguard/asio/retry.hpp"
#include "stormguard/http/async_client.hpp"

namespace {

using namespace std::chrono_literals;
using asio::ip::tcp;
using steady = std::chrono::steady_clock;

// ------------------------------------------------------------------------------------------------
// The server (child process): keep-alive HTTP/1.1; "/" answers 200 "ok" at once, "/hold" after
// 2 s (to open connections in batches), "/hang" never (to cancel).
// ------------------------------------------------------------------------------------------------

asio::awaitable<void> serve_connection(tcp::socket socket) {
  asio::streambuf buffer;
  asio::steady_timer timer(socket.get_executor());
  for (;;) {
    auto [ec, n] = co_await asio::async_read_until(
        socket, buffer, "\r\n\r\n", asio::experimental::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    std::string head(asio::buffers_begin(buffer.data()), asio::buffers_begin(buffer.data()) + n);
    buffer.consume(n);
    if (head.find(" /hang ") != std::string::npos) {
      char byte = 0;  // wait for the client to close
      (void)co_await socket.async_read_some(asio::buffer(&byte, 1),
                                            asio::experimental::as_tuple(asio::use_awaitable));
      co_return;
    }
    if (head.find(" /hold ") != std::string::npos) {
      timer.expires_after(2s);
      (void)co_await timer.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    }
    static const std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    auto [wec, written] = co_await asio::async_write(
        socket, asio::buffer(reply), asio::experimental::as_tuple(asio::use_awaitable));
    if (wec) co_return;
  }
}

// A failed accept (EMFILE: the server's open files are used up) is said once on stderr and
// retried 10 ms later, not at once in a loop that starves the connections being served.
asio::awaitable<void> accept_loop(tcp::acceptor& acceptor) {
  asio::steady_timer pause(acceptor.get_executor());
  bool said = false;
  for (;;) {
    auto [ec, socket] =
        co_await acceptor.async_accept(asio::experimental::as_tuple(asio::use_awaitable));
    if (!ec) {
      asio::co_spawn(acceptor.get_executor(), serve_connection(std::move(socket)), asio::detached);
      continue;
    }
    if (!said) {
      std::fprintf(stderr, "async_benchmark: the server's accept failed: %s\n",
                   ec.message().c_str());
      said = true;
    }
    pause.expires_after(10ms);
    (void)co_await pause.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
  }
}

pid_t g_server = -1;
std::uint16_t g_port = 0;

// Forks the server; returns in the parent once it listens.
void start_server() {
  int ready[2];
  if (::pipe(ready) != 0) std::abort();
  g_server = ::fork();
  if (g_server == 0) {
    (void)::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the benchmark
    ::close(ready[0]);
    asio::io_context io;
    tcp::acceptor acceptor(io);
    acceptor.open(tcp::v4());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind({asio::ip::address_v4::loopback(), 0});
    acceptor.listen(4096);
    const std::uint16_t port = acceptor.local_endpoint().port();
    (void)::write(ready[1], &port, sizeof port);
    ::close(ready[1]);
    asio::co_spawn(io, accept_loop(acceptor), asio::detached);
    io.run();
    ::_exit(0);
  }
  ::close(ready[1]);
  if (::read(ready[0], &g_port, sizeof g_port) != sizeof g_port) std::abort();
  ::close(ready[0]);
}

std::string url(const char* path) { return "http://127.0.0.1:" + std::to_string(g_port) + path; }

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Bytes of the heap in use (malloc's arenas and its mmap'd blocks): ours and libcurl's. The
// kernel's socket buffers are not in it.
double heap_bytes() {
  const struct mallinfo2 m = ::mallinfo2();
  return static_cast<double>(m.uordblks) + static_cast<double>(m.hblkhd);
}

// Runs `io` until `done()`; false after `limit`.
template <class F>
bool run_until(asio::io_context& io, F&& done, steady::duration limit = 60s) {
  const auto end = steady::now() + limit;
  while (!done()) {
    if (steady::now() > end) return false;
    if (io.stopped()) io.restart();
    (void)io.run_one_for(10ms);
  }
  return true;
}

// ------------------------------------------------------------------------------------------------
// async_retry's success path
// ------------------------------------------------------------------------------------------------

// An operation that completes at once (posted) with no error: what the retrier wraps.
struct ready_op {
  asio::io_context* io;
  template <class Token>
  auto operator()(const stormguard::attempt_context&, Token&& token) const {
    return asio::async_initiate<Token, void(std::error_code)>(
        [io = io](auto handler) {
          asio::post(*io, [h = std::move(handler)]() mutable { h(std::error_code()); });
        },
        token);
  }
};

// Runs `await_one()` (an awaitable) once per iteration in a coroutine on `io`; reports the
// allocations per call (counting_allocator.hpp).
template <class F>
void await_loop(benchmark::State& state, asio::io_context& io, F await_one) {
  long allocations = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const long before = stormguard_bench::g_allocations.load();
        for (auto _ : state) co_await await_one();
        allocations = stormguard_bench::g_allocations.load() - before;
      },
      asio::detached);
  io.run();
  state.counters["allocs/call"] =
      static_cast<double>(allocations) / static_cast<double>(state.iterations());
}

void BM_AwaitOperationDirectly(benchmark::State& state) {
  asio::io_context io;
  ready_op op{&io};
  await_loop(state, io, [&]() -> asio::awaitable<void> {
    co_await op(stormguard::attempt_context{}, asio::use_awaitable);  // throws on error
  });
}
BENCHMARK(BM_AwaitOperationDirectly);

void BM_AwaitThroughAsyncRetry(benchmark::State& state) {
  asio::io_context io;
  ready_op op{&io};
  stormguard::real_clock clock;
  stormguard::random_generator rng(1);
  stormguard::retrier retry(stormguard::retry_policy{}, clock, rng);
  await_loop(state, io, [&]() -> asio::awaitable<void> {
    auto r = co_await stormguard::async_retry(retry, io.get_executor(), op, asio::use_awaitable);
    if (!r.ok()) state.SkipWithError("an attempt failed");
    benchmark::DoNotOptimize(r);
  });
}
BENCHMARK(BM_AwaitThroughAsyncRetry);

// ------------------------------------------------------------------------------------------------
// Bare libcurl multi on Asio: the same socket and timer plumbing as async_client, nothing else.
// ------------------------------------------------------------------------------------------------

class bare_multi {
 public:
  explicit bare_multi(asio::io_context& io) : io_(io), timer_(io), multi_(curl_multi_init()) {
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &bare_multi::on_socket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &bare_multi::on_timer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  }
  ~bare_multi() {
    for (auto& [fd, w] : sockets_) {
      w->closed = true;
      std::error_code ignored;
      (void)w->sd.cancel(ignored);
      (void)w->sd.release();
    }
    for (CURL* e : easies_) {
      curl_multi_remove_handle(multi_, e);
      curl_easy_cleanup(e);
    }
    curl_multi_cleanup(multi_);
  }

  // Starts a GET of `u`; `done(error)` when it ends (error empty: a 200).
  void get(const std::string& u, std::function<void(std::string)> done) {
    CURL* e = nullptr;
    if (idle_.empty()) {
      e = curl_easy_init();
      easies_.push_back(e);
      curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &bare_multi::discard);
      curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
      curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(easies_.size()));
    } else {
      e = idle_.back();
      idle_.pop_back();
    }
    curl_easy_setopt(e, CURLOPT_URL, u.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, e);
    pending_[e] = std::move(done);
    curl_multi_add_handle(multi_, e);
  }

 private:
  struct watch {
    watch(asio::io_context& io, curl_socket_t s) : sd(io), fd(s) { sd.assign(s); }
    asio::posix::stream_descriptor sd;
    curl_socket_t fd;
    int what = 0;
    bool reading = false;
    bool writing = false;
    bool closed = false;
  };

  static std::size_t discard(char*, std::size_t size, std::size_t count, void*) {
    return size * count;
  }
  static int on_socket(CURL*, curl_socket_t s, int what, void* self_ptr, void*) {
    auto& self = *static_cast<bare_multi*>(self_ptr);
    if (what == CURL_POLL_REMOVE) {
      if (auto it = self.sockets_.find(s); it != self.sockets_.end()) {
        it->second->closed = true;
        std::error_code ignored;
        (void)it->second->sd.cancel(ignored);
        (void)it->second->sd.release();
        self.sockets_.erase(it);
      }
      return 0;
    }
    auto it = self.sockets_.find(s);
    if (it == self.sockets_.end()) {
      it = self.sockets_.emplace(s, std::make_shared<watch>(self.io_, s)).first;
    }
    it->second->what = what;
    self.arm(it->second);
    return 0;
  }
  static int on_timer(CURLM*, long ms, void* self_ptr) {
    auto& self = *static_cast<bare_multi*>(self_ptr);
    if (ms < 0) {
      self.timer_.cancel();
      return 0;
    }
    self.timer_.expires_after(std::chrono::milliseconds(ms));
    self.timer_.async_wait([&self](const std::error_code& ec) {
      if (!ec) self.act(CURL_SOCKET_TIMEOUT, 0);
    });
    return 0;
  }
  void arm(const std::shared_ptr<watch>& w) {
    if ((w->what & CURL_POLL_IN) != 0 && !w->reading) {
      w->reading = true;
      w->sd.async_wait(asio::posix::stream_descriptor::wait_read,
                       [this, w](const std::error_code& ec) {
                         w->reading = false;
                         if (w->closed || (w->what & CURL_POLL_IN) == 0) return;
                         act(w->fd, ec ? CURL_CSELECT_ERR : CURL_CSELECT_IN);
                         if (!w->closed) arm(w);
                       });
    }
    if ((w->what & CURL_POLL_OUT) != 0 && !w->writing) {
      w->writing = true;
      w->sd.async_wait(asio::posix::stream_descriptor::wait_write,
                       [this, w](const std::error_code& ec) {
                         w->writing = false;
                         if (w->closed || (w->what & CURL_POLL_OUT) == 0) return;
                         act(w->fd, ec ? CURL_CSELECT_ERR : CURL_CSELECT_OUT);
                         if (!w->closed) arm(w);
                       });
    }
  }
  void act(curl_socket_t s, int event) {
    int running = 0;
    curl_multi_socket_action(multi_, s, event, &running);
    int queued = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &queued)) {
      if (m->msg != CURLMSG_DONE) continue;
      CURL* e = m->easy_handle;
      long status = 0;
      curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
      std::string error;
      if (m->data.result != CURLE_OK || status != 200) {
        error = "curl code " + std::to_string(m->data.result) + " (" +
                curl_easy_strerror(m->data.result) + "), HTTP status " + std::to_string(status);
      }
      curl_multi_remove_handle(multi_, e);
      idle_.push_back(e);
      auto node = pending_.extract(e);
      node.mapped()(std::move(error));
    }
  }

  asio::io_context& io_;
  asio::steady_timer timer_;
  CURLM* multi_;
  std::unordered_map<curl_socket_t, std::shared_ptr<watch>> sockets_;
  std::vector<CURL*> easies_;
  std::vector<CURL*> idle_;
  std::unordered_map<CURL*, std::function<void(std::string)>> pending_;
};

// ------------------------------------------------------------------------------------------------
// N requests in flight: the client under test, and the baseline
// ------------------------------------------------------------------------------------------------

// One client (kept across the benchmark's runs, so its connections stay open) and its loop.
struct stormguard_side {
  asio::io_context io;
  stormguard::http::async_client client{io.get_executor(), options()};
  // Time-outs longer than the benchmark's own limit (run_until, 60 s): a request slowed by a
  // loaded machine shows as slow, or as "did not end", never as a failure of its own (the bare
  // baseline sets none).
  static stormguard::http::client_options options() {
    stormguard::http::client_options o;
    o.attempt_timeout = 120s;
    o.connect_timeout = 120s;
    return o;
  }
  void get(const std::string& u, std::function<void(std::string)> done) {
    stormguard::http::request req;
    req.url = u;
    client.async_perform(std::move(req), [done = std::move(done)](stormguard::http::result r) {
      done(r.ok() && r.attempts == 1 ? std::string() : describe(r));
    });
  }
  // What went wrong with `r`: why the call ended, its attempts, the last attempt's transport
  // error (curl code, kind, phase, libcurl's message) or HTTP status.
  static std::string describe(const stormguard::http::result& r) {
    std::string out = "ended " + std::string(stormguard::to_string(r.reason)) + " after " +
                      std::to_string(r.attempts) + " attempt(s)";
    if (r.response) out += ", HTTP status " + std::to_string(r.response->status);
    if (r.error) {
      out += ", curl code " + std::to_string(r.error->curl_code) + " (" +
             std::string(stormguard::http::to_string(r.error->kind));
      if (r.error->phase) {
        out +=
            r.error->phase == stormguard::transport_phase::not_sent ? ", not sent" : ", maybe sent";
      }
      out += "): " + r.error->message;
    }
    return out;
  }
};

struct bare_side {
  asio::io_context io;
  bare_multi multi{io};
  void get(const std::string& u, std::function<void(std::string)> done) {
    multi.get(u, std::move(done));
  }
};

// Opens `n` connections: requests to /hold (answered after 2 s) in batches of 1,000, 100 ms
// apart, all in flight together, so that each gets its own connection; they stay in the pool.
template <class Side>
bool open_connections(Side& side, int n) {
  int ended = 0;
  std::string first_error;
  for (int started = 0; started < n;) {
    const int batch = std::min(1'000, n - started);
    for (int i = 0; i < batch; ++i) {
      side.get(url("/hold"), [&, request = started + i](std::string error) {
        ++ended;
        if (!error.empty() && first_error.empty()) {
          first_error = "opening connection " + std::to_string(request) + ": " + error;
        }
      });
    }
    started += batch;
    const auto pause = steady::now() + 100ms;
    run_until(side.io, [&] { return steady::now() >= pause; });
  }
  if (!run_until(side.io, [&] { return ended == n; })) {
    first_error = std::to_string(n - ended) + " of the requests opening connections did not end";
  }
  if (!first_error.empty()) std::fprintf(stderr, "async_benchmark: %s\n", first_error.c_str());
  return first_error.empty();
}

// The side (client and loop) of the benchmark running now, and which one it is. One for all
// the Side types: a static inside side_for<Side> would be one per type, and the bare side's
// 10,000 connections would stay open beside the client's (and the server's 20,000 would pass
// the 20,000 open files allowed: its accept fails, and requests wait in its backlog until they
// time out).
std::shared_ptr<void> g_current_side;
std::string g_current_key;

// The side (client and loop) of the benchmark running now, with n connections open; null when
// they could not be opened. Only one side lives at a time: two with 10,000 connections each
// would exceed the 20,000 open files allowed here.
template <class Side>
Side* side_for(int n) {
  std::shared_ptr<void>& current = g_current_side;
  std::string& current_key = g_current_key;
  const std::string key = typeid(Side).name() + std::to_string(n);
  if (key != current_key) {
    current.reset();
    current_key = key;
    auto side = std::make_shared<Side>();
    const double cpu_before = thread_cpu_seconds();
    const auto wall_before = steady::now();
    if (n >= 100 && !open_connections(*side, n)) {
      current_key.clear();
      return nullptr;
    }
    if (n >= 1'000) {
      std::fprintf(stderr, "async_benchmark: %s opened %d connections in %.2f s (%.2f s CPU)\n",
                   typeid(Side).name(), n,
                   std::chrono::duration<double>(steady::now() - wall_before).count(),
                   thread_cpu_seconds() - cpu_before);
    }
    current = side;
  }
  return static_cast<Side*>(current.get());
}

template <class Side>
void in_flight(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Side* found = side_for<Side>(n);
  if (found == nullptr) {
    state.SkipWithError("could not open the connections");
    return;
  }
  Side& side = *found;
  const std::string target = url("/");
  std::int64_t requests = 0;
  double cpu = 0;
  double wall = 0;
  std::int64_t batch = 0;
  for (auto _ : state) {
    int ended = 0;
    int failed = 0;
    std::string first_error;
    const double cpu_before = thread_cpu_seconds();
    const auto wall_before = steady::now();
    for (int i = 0; i < n; ++i) {
      side.get(target, [&, i](std::string error) {
        ++ended;
        if (error.empty()) return;
        if (failed++ == 0) first_error = "request " + std::to_string(i) + ": " + error;
      });
    }
    if (!run_until(side.io, [&] { return ended == n; })) {
      const std::string message = std::to_string(n - ended) + " of " + std::to_string(n) +
                                  " requests did not end within 60 s";
      std::fprintf(stderr, "async_benchmark: %s\n", message.c_str());
      state.SkipWithError(message.c_str());
      break;
    }
    cpu += thread_cpu_seconds() - cpu_before;
    wall += std::chrono::duration<double>(steady::now() - wall_before).count();
    if (failed > 0) {
      // Which request, and why (the curl code and phase, or the HTTP status), on stderr too:
      // the skip message is all a reader of the table sees.
      const std::string message = std::to_string(failed) + " of " + std::to_string(n) +
                                  " requests failed in batch " + std::to_string(batch) +
                                  "; first: " + first_error;
      std::fprintf(stderr, "async_benchmark: %s\n", message.c_str());
      state.SkipWithError(message.c_str());
      break;
    }
    requests += n;
    ++batch;
  }
  // Per request, from this thread's CPU clock and the wall clock around each batch.
  state.counters["cpu_us/req"] = requests > 0 ? cpu * 1e6 / static_cast<double>(requests) : 0;
  state.counters["req/s"] = wall > 0 ? static_cast<double>(requests) / wall : 0;
}

void BM_AsyncClientInFlight(benchmark::State& state) { in_flight<stormguard_side>(state); }
void BM_BareCurlMultiInFlight(benchmark::State& state) { in_flight<bare_side>(state); }
BENCHMARK(BM_BareCurlMultiInFlight)
    ->Arg(1)
    ->Arg(100)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AsyncClientInFlight)
    ->Arg(1)
    ->Arg(100)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Unit(benchmark::kMillisecond);

// ------------------------------------------------------------------------------------------------
// Cancellation latency and memory at N in flight
// ------------------------------------------------------------------------------------------------

// N requests to /hang (never answered) in flight on connections opened before; then each is
// cancelled in turn and the time from the emit to its handler is measured. Reports the
// percentiles of the latency, the allocations and the heap bytes per request in flight.
void BM_AsyncClientCancelInFlight(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    (void)side_for<stormguard_side>(0);  // a fresh client: the other sides' memory is freed
    const double heap_empty = heap_bytes();
    stormguard_side* side = side_for<stormguard_side>(n);
    if (side == nullptr) {
      state.SkipWithError("could not open the connections");
      return;
    }
    std::vector<asio::cancellation_signal> signals(static_cast<std::size_t>(n));
    std::vector<char> ended(static_cast<std::size_t>(n), 0);
    int cancelled = 0;
    const double heap_before = heap_bytes();
    const long allocations_before = stormguard_bench::g_allocations.load();
    for (int i = 0; i < n; ++i) {
      stormguard::http::request req;
      req.url = url("/hang");
      side->client.async_perform(
          std::move(req),
          asio::bind_cancellation_slot(
              signals[static_cast<std::size_t>(i)].slot(), [&, i](stormguard::http::result r) {
                ended[static_cast<std::size_t>(i)] = 1;
                cancelled += r.reason == stormguard::end_reason::cancelled ? 1 : 0;
              }));
    }
    // Every request sent (the server holds them all): run the loop until it is idle a while.
    run_until(
        side->io, [] { return false; }, 1s);
    const double heap_in_flight = heap_bytes();
    const long allocations = stormguard_bench::g_allocations.load() - allocations_before;
    std::vector<double> latencies;
    latencies.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      const auto start = steady::now();
      signals[static_cast<std::size_t>(i)].emit(asio::cancellation_type::terminal);
      if (!run_until(
              side->io, [&] { return ended[static_cast<std::size_t>(i)] != 0; }, 5s)) {
        state.SkipWithError("a cancelled request did not end");
        return;
      }
      latencies.push_back(std::chrono::duration<double, std::micro>(steady::now() - start).count());
    }
    if (cancelled != n) state.SkipWithError("not every request ended cancelled");
    std::sort(latencies.begin(), latencies.end());
    const auto at = [&](double q) {
      return latencies[static_cast<std::size_t>(q * static_cast<double>(latencies.size() - 1))];
    };
    state.counters["cancel_us_p50"] = at(0.5);
    state.counters["cancel_us_p99"] = at(0.99);
    state.counters["cancel_us_max"] = latencies.back();
    // The request alone (its connection and easy handle were open before), and with them (from
    // a fresh client, before the connections were opened).
    state.counters["heap_bytes/req"] = (heap_in_flight - heap_before) / n;
    state.counters["heap_bytes/req+conn"] = (heap_in_flight - heap_empty) / n;
    state.counters["allocs/req"] = static_cast<double>(allocations) / n;
  }
}
BENCHMARK(BM_AsyncClientCancelInFlight)->Arg(10'000)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);
  }
  start_server();  // before any thread starts: fork copies only this one
  curl_global_init(CURL_GLOBAL_DEFAULT);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  ::kill(g_server, SIGTERM);
  (void)::waitpid(g_server, nullptr, 0);
  return 0;
}
