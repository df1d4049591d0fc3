// SPDX-License-Identifier: Apache-2.0
// `serve`'s scenario endpoint (stormguard::lab::server) against a bare one-thread libevent
// server (evhttp answering 200 "ok\n" at once), under the same closed-loop load.
//
// Each server runs in a child process pinned to CPU 0 (`serve` on one core: its event loop and
// every other thread of it); the load generator runs in this process pinned to CPU 1: N
// keep-alive connections, each with one `GET /` in flight at a time (a new one as soon as the
// answer is read), driven by epoll. One iteration is 20,000 answers; the `req/s` counter is the
// answers per second of wall time, `server_cpu_us/req` the server process's CPU time (all its
// threads, clock_getcpuclockid) per answer, which other load on the machine does not inflate. The
// scenario given to serve has no incident and no overload, 1,000,000 workers and a 1 ns service
// time: every request goes through the model (admission, a worker, its service timer, the answer),
// and none waits for another.
//
// Read the ratio Serve/N ÷ BareLibevent/N of the same run; the command and the figures are in
// docs/performance.md ("serve against a bare libevent server").
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int k_answers_per_iteration = 20'000;

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof set, &set);
}

std::uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t n = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) return 0;
  return ntohs(a.sin_port);
}

[[noreturn]] void run_bare(int port_pipe) {
  event_base* base = event_base_new();
  evhttp* http = evhttp_new(base);
  evhttp_set_gencb(
      http,
      [](evhttp_request* req, void*) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/plain; charset=utf-8");
        evbuffer_add(evhttp_request_get_output_buffer(req), "ok\n", 3);
        evhttp_send_reply(req, 200, "OK", nullptr);
      },
      nullptr);
  evhttp_bound_socket* bound = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
  const std::uint16_t port = bound != nullptr ? port_of(evhttp_bound_socket_get_fd(bound)) : 0;
  event* term = evsignal_new(
      base, SIGTERM,
      [](evutil_socket_t, short, void* b) { event_base_loopbreak(static_cast<event_base*>(b)); },
      base);
  event_add(term, nullptr);
  (void)!write(port_pipe, &port, sizeof port);
  event_base_dispatch(base);
  _exit(0);
}

[[noreturn]] void run_serve(int port_pipe) {
  stormguard::sim::scenario s = stormguard::sim::friday_night();
  s.name = "throughput";
  s.incident.reset();
  s.overload.reset();
  s.stall.reset();
  s.length = 1h;
  s.workers = 1'000'000;
  s.queue_limit = 1'000'000;
  s.service_time = 1ns;
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);  // the server's thread inherits the mask
  auto started = stormguard::lab::server::start(s, {});
  if (!started) std::fprintf(stderr, "serve_benchmark: %s\n", started.error().c_str());
  const std::uint16_t port = started ? (*started)->port() : 0;
  (void)!write(port_pipe, &port, sizeof port);
  int sig = 0;
  sigwait(&term, &sig);
  if (started) (*started)->stop();
  _exit(0);  // (a profiler such as callgrind writes its output at a normal exit)
}

// A server in a child process pinned to CPU 0; ended (SIGTERM) when this goes out of scope.
class child_server {
 public:
  explicit child_server(bool bare) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      pin_to(0);
      close(fds[0]);
      bare ? run_bare(fds[1]) : run_serve(fds[1]);
    }
    close(fds[1]);
    if (read(fds[0], &port_, sizeof port_) != sizeof port_) port_ = 0;
    close(fds[0]);
  }
  ~child_server() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  child_server(const child_server&) = delete;
  child_server& operator=(const child_server&) = delete;
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  // The CPU time the server process has used, all its threads (ns); -1 when unknown.
  [[nodiscard]] std::int64_t cpu_ns() const noexcept {
    clockid_t id{};
    timespec t{};
    if (clock_getcpuclockid(pid_, &id) != 0 || clock_gettime(id, &t) != 0) return -1;
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
  }

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

// One keep-alive connection of the load generator: sends `GET /`, reads the answer (its head
// and Content-Length bytes of body), sends the next.
struct connection {
  int fd = -1;
  std::string in;
};

constexpr std::string_view k_request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

// The length of the first complete answer in `in`, or 0 while incomplete.
std::size_t answer_length(const std::string& in) {
  const std::size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  const std::size_t field = in.find("Content-Length:");
  if (field == std::string::npos || field > head_end) return head_end + 4;
  const std::size_t body = std::strtoul(in.c_str() + field + 15, nullptr, 10);
  return in.size() >= head_end + 4 + body ? head_end + 4 + body : 0;
}

bool send_request(int fd) {
  return send(fd, k_request.data(), k_request.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(k_request.size());
}

void run_load(benchmark::State& state, bool bare) {
  pin_to(1);
  const child_server server(bare);
  if (server.port() == 0) return state.SkipWithError("the server did not start");
  const int n = static_cast<int>(state.range(0));
  std::vector<connection> conns(static_cast<std::size_t>(n));
  const int ep = epoll_create1(0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(server.port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; ++i) {
    connection& c = conns[static_cast<std::size_t>(i)];
    c.fd = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c.fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
      return state.SkipWithError("connect failed");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  std::int64_t answers = 0;
  std::vector<epoll_event> events(static_cast<std::size_t>(n));
  char buffer[16384];
  bool failed = false;
  const std::int64_t cpu_before = server.cpu_ns();
  for (auto _ : state) {
    int sent = 0;
    int done = 0;
    for (connection& c : conns) {
      if (sent < k_answers_per_iteration && send_request(c.fd)) ++sent;
    }
    while (done < sent && !failed) {
      const int ready = epoll_wait(ep, events.data(), n, 5000);
      if (ready <= 0) {
        failed = true;
        break;
      }
      for (int e = 0; e < ready; ++e) {
        connection& c = conns[events[static_cast<std::size_t>(e)].data.u32];
        const ssize_t got = recv(c.fd, buffer, sizeof buffer, 0);
        if (got <= 0) {
          failed = true;
          break;
        }
        c.in.append(buffer, static_cast<std::size_t>(got));
        while (const std::size_t length = answer_length(c.in)) {
          if (c.in.compare(0, 12, "HTTP/1.1 200") != 0) failed = true;
          c.in.erase(0, length);
          ++done;
          if (sent < k_answers_per_iteration) {
            if (!send_request(c.fd)) failed = true;
            ++sent;
          }
        }
      }
    }
    if (failed) break;
    answers += done;
  }
  const std::int64_t server_cpu = server.cpu_ns() - cpu_before;
  for (connection& c : conns) close(c.fd);
  close(ep);
  if (failed) return state.SkipWithError("an answer was missing, late or not 200");
  state.counters["req/s"] =
      benchmark::Counter(static_cast<double>(answers), benchmark::Counter::kIsRate);
  // The server's own CPU per answer: what one core spends per request, whatever else runs.
  state.counters["server_cpu_us/req"] =
      answers > 0 ? static_cast<double>(server_cpu) / 1000.0 / static_cast<double>(answers) : 0.0;
}

void BM_BareLibevent(benchmark::State& state) { run_load(state, true); }
void BM_Serve(benchmark::State& state) { run_load(state, false); }

BENCHMARK(BM_BareLibevent)->Arg(32)->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Serve)->Arg(32)->Arg(128)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
