// SPDX-License-Identifier: Apache-2.0
// The gRPC component's cost, against bare gRPC in the same run (docs/performance.md, "gRPC"):
//  - the client's CPU per unary call whose first attempt succeeds: a bare generated stub's
//    callback call, stormguard::grpc::client::async_call (default ratio budget), and
//    async_hedged_call (2 copies, a delay of 1 s no call reaches), at 1 and 1,000 calls in flight;
//  - the server's CPU per call: a bare callback handler, and the same handler calling
//    stormguard::grpc::admit first (retry-budget, drop-expired and concurrency-limit on).
// The servers are child processes forked at start (before gRPC starts a thread), so the client's
// process CPU (getrusage: every gRPC thread of the client included) is the client's, and a
// server's CPU is read from /proc/<pid>/stat around each batch. The server comparison runs both
// sides on one server process, one channel and one connection, switching the handler's admission
// on and off between batches (a control pipe): two server processes, or two channels, differ by
// more than the admission costs (their thread pools and pollers settle differently).
// Each benchmark compares two sides in pairs of adjacent batches of `k_calls` calls (one pair per
// iteration, the order alternating), so that the machine's drifting load falls on both halves of
// a pair alike: it reports each side's CPU per call and the median, lowest and highest of the
// pairs' ratios. Repetitions between separate runs of each side varied by 11-28 % on a 2-core
// machine; the pairs' ratios are what the targets are read from:
//
//   build/bench/grpc_benchmark --benchmark_repetitions=3 --benchmark_out=grpc.json
//       --benchmark_out_format=json   (one command line)
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/grpc/admission.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/lab/v1/lab.grpc.pb.h"

namespace {

using namespace std::chrono_literals;
using stormguard::lab::v1::EchoReply;
using stormguard::lab::v1::EchoRequest;
using stormguard::lab::v1::Lab;

constexpr int k_calls = 50'000;  // per batch (one side of a pair)
constexpr int k_pairs = 10;      // pairs of batches per run (iterations)

// ------------------------------------------------------------------------------------------------
// The servers (child processes)
// ------------------------------------------------------------------------------------------------

// In a server process: whether its handler admits first (switched by the control pipe).
std::atomic<bool> g_admitting_now{false};

// A callback service answering Echo at once, admitting first when `admission` is set and
// switched on.
class echo_service final : public Lab::CallbackService {
 public:
  explicit echo_service(stormguard::grpc::server_admission* admission) : admission_(admission) {}
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx, const EchoRequest* req,
                                 EchoReply* reply) override {
    auto* reactor = ctx->DefaultReactor();
    if (admission_ != nullptr && g_admitting_now.load(std::memory_order_relaxed)) {
      auto ticket = stormguard::grpc::admit(*ctx, *admission_);
      if (!ticket) {
        reactor->Finish(ticket.refusal());
        return reactor;
      }
      reply->set_text(req->text());
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }
    reply->set_text(req->text());
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  stormguard::grpc::server_admission* admission_;
};

// On a machine of 2 CPUs or more, the client on CPU 0 and the servers on CPU 1 (each process
// before it starts a thread: gRPC's threads inherit it), so that the two sides never take turns
// on one CPU and every batch runs on the same placement: unpinned, the CPU per call of two
// adjacent batches of the same side differed by up to 30 %.
void pin_to_cpu(int cpu) {
  if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)::sched_setaffinity(0, sizeof set, &set);
}

struct server_process {
  pid_t pid = -1;
  int port = 0;
  int control = -1;  // write '1' (admit) or '0' (bare); the server answers on `ack`
  int ack = -1;

  // Switches the server's handler between admitting first and bare; returns once it has.
  void set_admitting(bool on) const {
    const char c = on ? '1' : '0';
    char reply = 0;
    if (::write(control, &c, 1) != 1 || ::read(ack, &reply, 1) != 1) std::abort();
  }
};

// The server's side of the control pipe: sets g_admitting_now per byte read, acknowledges each.
void serve_control(int control, int ack) {
  char c = 0;
  while (::read(control, &c, 1) == 1) {
    g_admitting_now.store(c == '1', std::memory_order_relaxed);
    if (::write(ack, &c, 1) != 1) return;
  }
}

// Forks a server; returns in the parent once it listens. With `admit`, the handler can admit
// first (switched on with set_admitting).
server_process start_server(bool admit) {
  int ready[2];
  int control[2];
  int ack[2];
  if (::pipe(ready) != 0 || ::pipe(control) != 0 || ::pipe(ack) != 0) std::abort();
  server_process s;
  s.pid = ::fork();
  if (s.pid == 0) {
    (void)::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the benchmark
    ::close(ready[0]);
    ::close(control[1]);
    ::close(ack[0]);
    pin_to_cpu(1);
    std::thread(serve_control, control[0], ack[1]).detach();
    std::unique_ptr<stormguard::grpc::server_admission> admission;
    if (admit) {
      admission = std::make_unique<stormguard::grpc::server_admission>(
          stormguard::grpc::server_admission_options{
              .retry_budget = stormguard::ratio_budget_options{},
              .drop_expired = 1ms,
              .concurrency_limit = stormguard::admission::concurrency_limit_options{}});
    }
    echo_service service(admission.get());
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    const auto server = builder.BuildAndStart();
    if (!server || port == 0) ::_exit(1);
    (void)::write(ready[1], &port, sizeof port);
    ::close(ready[1]);
    server->Wait();
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(control[0]);
  ::close(ack[1]);
  if (::read(ready[0], &s.port, sizeof s.port) != sizeof s.port) std::abort();
  ::close(ready[0]);
  s.control = control[1];
  s.ack = ack[0];
  return s;
}

server_process g_bare;
server_process g_admitting;

// A process's CPU time (user + system) in seconds, from /proc/<pid>/stat (clock ticks).
double process_cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  double utime = 0;
  double stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double self_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// ------------------------------------------------------------------------------------------------
// The client side: `calls` calls, `in_flight` at a time, each started by `start(done)`
// ------------------------------------------------------------------------------------------------

class load {
 public:
  using start_fn = std::function<void(std::function<void(bool ok)>)>;
  load(int calls, int in_flight, start_fn start)
      : calls_(calls), in_flight_(in_flight), start_(std::move(start)) {}

  // Runs every call; returns the failed ones.
  int run() {
    for (int i = 0; i < in_flight_; ++i) next();
    std::unique_lock lock(mutex_);
    ended_.wait(lock, [this] { return finished_ == calls_; });
    return failed_;
  }

 private:
  void next() {
    if (started_.fetch_add(1) >= calls_) return;
    start_([this](bool ok) {
      next();  // first: once the last call is counted, run() returns and this object goes
      const std::lock_guard lock(mutex_);
      if (!ok) ++failed_;
      if (++finished_ == calls_) ended_.notify_one();
    });
  }

  int calls_;
  int in_flight_;
  start_fn start_;
  std::atomic<int> started_{0};
  std::mutex mutex_;
  std::condition_variable ended_;
  int finished_ = 0;
  int failed_ = 0;
};

enum class side { bare, client, hedged };

// One call's own memory: the bare stub's context and reply (the stormguard client makes a context
// per attempt itself, so its calls take only the reply: a context made and never used would be
// charged to the client's side).
struct call_slot {
  grpc::ClientContext context;
  EchoReply reply;
};

// One side of a comparison: a way of making calls against one server, built once, measured in
// batches. `cpu_of` is the process whose CPU is counted: the server's, or (-1) this process's.
class side_runner {
 public:
  side_runner(side how, const server_process& server, bool server_cpu)
      : how_(how),
        cpu_pid_(server_cpu ? server.pid : -1),
        client_("127.0.0.1:" + std::to_string(server.port), grpc::InsecureChannelCredentials(),
                options()),
        stub_(Lab::NewStub(client_.channel())) {
    request_.set_text("hello");
  }

  // Connects and warms up: 1,000 calls, not measured.
  void warm_up(int in_flight) { (void)load(1000, std::min(in_flight, 100), starter()).run(); }

  // Runs `calls` calls, `in_flight` at a time; returns the CPU seconds they took, or a negative
  // value when a call failed (or, for the hedged side, sent a second copy).
  double batch(int calls, int in_flight) {
    const double before = cpu();
    const int failed = load(calls, in_flight, starter()).run();
    const double used = cpu() - before;
    return failed > 0 ? -1.0 : used;
  }

 private:
  static stormguard::grpc::client_options options() {
    stormguard::grpc::client_options o;  // the default ratio budget
    o.hedging.policy = {.max_attempts = 2, .delay = 1s};
    return o;
  }
  double cpu() const { return cpu_pid_ > 0 ? process_cpu_seconds(cpu_pid_) : self_cpu_seconds(); }

  load::start_fn starter() {
    return [this](std::function<void(bool)> done) { start(std::move(done)); };
  }
  void start(std::function<void(bool)> done) {
    auto rpc = [this](grpc::ClientContext* ctx, const EchoRequest* req, EchoReply* resp,
                      std::function<void(grpc::Status)> end) {
      stub_->async()->Echo(ctx, req, resp, std::move(end));
    };
    switch (how_) {
      case side::bare: {
        auto* slot = new call_slot;
        stub_->async()->Echo(&slot->context, &request_, &slot->reply,
                             [slot, done = std::move(done)](const grpc::Status& s) {
                               delete slot;
                               done(s.ok());
                             });
        break;
      }
      case side::client: {
        auto* reply = new EchoReply;
        client_.async_call(rpc, request_, reply, {.idempotent = true},
                           [reply, done = std::move(done)](stormguard::grpc::result r) {
                             delete reply;
                             done(r.ok());
                           });
        break;
      }
      case side::hedged: {
        auto* reply = new EchoReply;
        client_.async_hedged_call(rpc, request_, reply, {.idempotent = true},
                                  [reply, done = std::move(done)](stormguard::grpc::result r) {
                                    delete reply;
                                    done(r.ok() && r.hedges.sent == 1);
                                  });
        break;
      }
    }
  }

  side how_;
  pid_t cpu_pid_;
  stormguard::grpc::client client_;
  std::unique_ptr<Lab::Stub> stub_;
  EchoRequest request_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Side `b` against side `a`, in pairs of adjacent batches: each iteration runs one batch of
// `k_calls` on each side, the order alternating, so the machine's load drifts under both halves of
// a pair alike. Reports each side's CPU per call (the sums) and the median of the pairs' ratios
// b / a with the pairs' lowest and highest.
using batch_fn = std::function<double(int calls, int in_flight)>;
void run_pairs(benchmark::State& state, const batch_fn& batch_a, const batch_fn& batch_b) {
  const int in_flight = static_cast<int>(state.range(0));
  double cpu_a = 0;
  double cpu_b = 0;
  std::vector<double> ratios;
  for (auto _ : state) {
    const bool a_first = ratios.size() % 2 == 0;
    const double first = (a_first ? batch_a : batch_b)(k_calls, in_flight);
    const double second = (a_first ? batch_b : batch_a)(k_calls, in_flight);
    if (first < 0 || second < 0) {
      state.SkipWithError("a call failed (or the hedged side sent a second copy)");
      return;
    }
    const double on_a = a_first ? first : second;
    const double on_b = a_first ? second : first;
    cpu_a += on_a;
    cpu_b += on_b;
    if (on_a > 0) ratios.push_back(on_b / on_a);
  }
  const double calls = static_cast<double>(state.iterations()) * k_calls;
  state.counters["a_us/call"] = cpu_a / calls * 1e6;
  state.counters["b_us/call"] = cpu_b / calls * 1e6;
  if (!ratios.empty()) {
    state.counters["b/a_median"] = median(ratios);
    state.counters["b/a_min"] = *std::min_element(ratios.begin(), ratios.end());
    state.counters["b/a_max"] = *std::max_element(ratios.begin(), ratios.end());
  }
}

void run_pairs(benchmark::State& state, side_runner& a, side_runner& b) {
  const int in_flight = static_cast<int>(state.range(0));
  a.warm_up(in_flight);
  b.warm_up(in_flight);
  run_pairs(
      state, [&a](int calls, int n) { return a.batch(calls, n); },
      [&b](int calls, int n) { return b.batch(calls, n); });
}

// Client CPU per call: a = the bare stub, b = async_call (same server, channel made alike).
void BM_ClientAsyncCallVsBareStub(benchmark::State& state) {
  side_runner a(side::bare, g_bare, false);
  side_runner b(side::client, g_bare, false);
  run_pairs(state, a, b);
}
// Client CPU per call: a = async_call, b = async_hedged_call whose first copy answers.
void BM_ClientHedgedVsAsyncCall(benchmark::State& state) {
  side_runner a(side::client, g_bare, false);
  side_runner b(side::hedged, g_bare, false);
  run_pairs(state, a, b);
}
// Server CPU per call, the bare stub as client: a = the bare handler, b = the handler that admits;
// one server process, one channel, the admission switched between batches.
void BM_ServerAdmitVsBareHandler(benchmark::State& state) {
  side_runner stub(side::bare, g_admitting, true);
  const auto on = [&stub](bool admitting) {
    return [&stub, admitting](int calls, int in_flight) {
      g_admitting.set_admitting(admitting);
      return stub.batch(calls, in_flight);
    };
  };
  g_admitting.set_admitting(true);
  stub.warm_up(static_cast<int>(state.range(0)));
  run_pairs(state, on(false), on(true));
  g_admitting.set_admitting(false);
}

// One iteration is a pair of batches; k_pairs pairs per run (2 x 500,000 calls).
#define STORMGUARD_GRPC_BENCH(fn) \
  BENCHMARK(fn)->Arg(1)->Arg(1000)->Iterations(k_pairs)->Unit(benchmark::kSecond)->UseRealTime()
STORMGUARD_GRPC_BENCH(BM_ClientAsyncCallVsBareStub);
STORMGUARD_GRPC_BENCH(BM_ClientHedgedVsAsyncCall);
STORMGUARD_GRPC_BENCH(BM_ServerAdmitVsBareHandler);

}  // namespace

int main(int argc, char** argv) {
  g_bare = start_server(false);  // before gRPC starts a thread: fork copies only this one
  g_admitting = start_server(true);
  pin_to_cpu(0);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (const pid_t pid : {g_bare.pid, g_admitting.pid}) {
    ::kill(pid, SIGTERM);
    (void)::waitpid(pid, nullptr, 0);
  }
  return 0;
}
