// SPDX-License-Identifier: Apache-2.0
// The gRPC component's cost, against bare gRPC in the same run (docs/performance.md, "gRPC"):
//  - the client's CPU per unary call whose first attempt succeeds: a bare generated stub's
//    callback call, stormguard::grpc::client::async_call (default ratio budget), and
//    async_hedged_call (2 copies, a delay of 1 s no call reaches), at 1 and 1,000 calls in flight;
//  - the server's CPU per call: a bare callback handler, and the same handler calling
//    stormguard::grpc::admit first (retry-budget, drop-expired and concurrency-limit on).
// The two servers are child processes forked at start (before gRPC starts a thread), one per
// kind, so the client's process CPU (getrusage: every gRPC thread of the client included) is the
// client's, and a server's CPU is read from /proc/<pid>/stat around each batch. One iteration is
// one batch of `k_calls` calls; run with repetitions and random interleaving so the sides
// alternate:
//
//   build/bench/grpc_benchmark --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
//   (one command line)
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

#include "stormguard/grpc/admission.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/lab/v1/lab.grpc.pb.h"

namespace {

using namespace std::chrono_literals;
using stormguard::lab::v1::EchoReply;
using stormguard::lab::v1::EchoRequest;
using stormguard::lab::v1::Lab;

constexpr int k_calls = 100'000;  // per batch (one iteration)

// ------------------------------------------------------------------------------------------------
// The servers (child processes)
// ------------------------------------------------------------------------------------------------

// A callback service answering Echo at once, admitting first when `admission` is set.
class echo_service final : public Lab::CallbackService {
 public:
  explicit echo_service(stormguard::grpc::server_admission* admission) : admission_(admission) {}
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx, const EchoRequest* req,
                                 EchoReply* reply) override {
    auto* reactor = ctx->DefaultReactor();
    if (admission_ != nullptr) {
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

struct server_process {
  pid_t pid = -1;
  int port = 0;
};

// Forks a server; returns in the parent once it listens.
server_process start_server(bool admit) {
  int ready[2];
  if (::pipe(ready) != 0) std::abort();
  server_process s;
  s.pid = ::fork();
  if (s.pid == 0) {
    (void)::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the benchmark
    ::close(ready[0]);
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
  if (::read(ready[0], &s.port, sizeof s.port) != sizeof s.port) std::abort();
  ::close(ready[0]);
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

// One call's own memory.
struct call_slot {
  grpc::ClientContext context;
  EchoReply reply;
};

void run_client(benchmark::State& state, side how, const server_process& server, bool server_cpu) {
  const int in_flight = static_cast<int>(state.range(0));
  stormguard::grpc::client_options options;  // the default ratio budget
  options.hedging.policy = {.max_attempts = 2, .delay = 1s};
  stormguard::grpc::client client("127.0.0.1:" + std::to_string(server.port),
                                  grpc::InsecureChannelCredentials(), options);
  const auto stub = Lab::NewStub(client.channel());
  EchoRequest request;
  request.set_text("hello");
  auto rpc = [&stub](grpc::ClientContext* ctx, const EchoRequest* req, EchoReply* resp,
                     std::function<void(grpc::Status)> done) {
    stub->async()->Echo(ctx, req, resp, std::move(done));
  };
  const load::start_fn start = [&](std::function<void(bool)> done) {
    auto* slot = new call_slot;
    switch (how) {
      case side::bare:
        stub->async()->Echo(&slot->context, &request, &slot->reply,
                            [slot, done = std::move(done)](const grpc::Status& s) {
                              delete slot;
                              done(s.ok());
                            });
        break;
      case side::client:
        client.async_call(rpc, request, &slot->reply, {.idempotent = true},
                          [slot, done = std::move(done)](stormguard::grpc::result r) {
                            delete slot;
                            done(r.ok());
                          });
        break;
      case side::hedged:
        client.async_hedged_call(rpc, request, &slot->reply, {.idempotent = true},
                                 [slot, done = std::move(done)](stormguard::grpc::result r) {
                                   delete slot;
                                   done(r.ok() && r.hedges.sent == 1);
                                 });
        break;
    }
  };
  (void)load(1000, std::min(in_flight, 100), start).run();  // connect and warm up
  double cpu = 0;
  double wall = 0;
  for (auto _ : state) {
    const double before = server_cpu ? process_cpu_seconds(server.pid) : self_cpu_seconds();
    const auto began = std::chrono::steady_clock::now();
    const int failed = load(k_calls, in_flight, start).run();
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    cpu += (server_cpu ? process_cpu_seconds(server.pid) : self_cpu_seconds()) - before;
    if (failed > 0) {
      state.SkipWithError((std::to_string(failed) + " calls failed or hedged").c_str());
      return;
    }
  }
  const double calls = static_cast<double>(state.iterations()) * k_calls;
  state.counters["cpu_us/call"] = cpu / calls * 1e6;
  state.counters["calls/s"] = calls / wall;
}

// Client CPU per call.
void BM_ClientBareStub(benchmark::State& state) { run_client(state, side::bare, g_bare, false); }
void BM_ClientAsyncCall(benchmark::State& state) { run_client(state, side::client, g_bare, false); }
void BM_ClientHedgedCall(benchmark::State& state) {
  run_client(state, side::hedged, g_bare, false);
}
// Server CPU per call, the bare stub as client.
void BM_ServerBareHandler(benchmark::State& state) { run_client(state, side::bare, g_bare, true); }
void BM_ServerAdmitFirst(benchmark::State& state) {
  run_client(state, side::bare, g_admitting, true);
}

#define STORMGUARD_GRPC_BENCH(fn) \
  BENCHMARK(fn)->Arg(1)->Arg(1000)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime()
STORMGUARD_GRPC_BENCH(BM_ClientBareStub);
STORMGUARD_GRPC_BENCH(BM_ClientAsyncCall);
STORMGUARD_GRPC_BENCH(BM_ClientHedgedCall);
STORMGUARD_GRPC_BENCH(BM_ServerBareHandler);
STORMGUARD_GRPC_BENCH(BM_ServerAdmitFirst);

}  // namespace

int main(int argc, char** argv) {
  g_bare = start_server(false);  // before gRPC starts a thread: fork copies only this one
  g_admitting = start_server(true);
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
