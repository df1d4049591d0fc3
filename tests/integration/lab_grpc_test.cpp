// SPDX-License-Identifier: Apache-2.0
// `serve --grpc`'s listener (app/lab_grpc.hpp) on 127.0.0.1 port 0 in front of a real
// lab::server, called by gRPC's own generated stub and by stormguard::grpc::client: the answers
// of each admission (served, the incident's errors and losses, a full queue, the defences with
// their pushback), the counters shared with the HTTP endpoint, the labels read from metadata,
// and a stop with calls held. Real time: tiny scenarios, every bound with a tolerance.
#include "app/lab_grpc.hpp"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "app/lab_fleet.hpp"
#include "stormguard/grpc/admission.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/lab/server.hpp"
#include "stormguard/lab/v1/scenario.grpc.pb.h"
#include "stormguard/retry_headers.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"
#include "support/lab_scenarios.hpp"
#include "test_util.hpp"

namespace {

namespace lab = stormguard::lab;
namespace sim = stormguard::sim;
namespace sg_grpc = stormguard::grpc;
namespace v1 = stormguard::lab::v1;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;
using stormguard::test_support::tiny_scenario;

// A lab::server and its gRPC listener, stopped in serve's order.
struct served {
  std::unique_ptr<lab::server> srv;
  std::unique_ptr<lab::grpc_endpoint> grpc;
  std::unique_ptr<v1::Scenario::Stub> stub;

  explicit served(const sim::scenario& s,
                  std::int64_t max_calls = lab::grpc_endpoint::k_max_calls) {
    auto started = lab::server::start(s, {});
    if (!started) throw std::runtime_error(started.error());
    srv = *std::move(started);
    auto listening = lab::grpc_endpoint::start(*srv, 0, max_calls);
    if (!listening) throw std::runtime_error(listening.error());
    grpc = *std::move(listening);
    // C-core's own retries off (stormguard::grpc::make_channel): with them on, gRPC 1.51 strips
    // a grpc-previous-rpc-attempts the application adds, and the label never reaches serve.
    stub = v1::Scenario::NewStub(
        sg_grpc::make_channel(grpc->address(), ::grpc::InsecureChannelCredentials()));
  }
  ~served() {
    srv->stop();
    grpc->stop();
  }
  served(const served&) = delete;
  served& operator=(const served&) = delete;
};

struct call_result {
  ::grpc::Status status;
  std::string text;
  std::multimap<std::string, std::string> trailers;
  milliseconds took{};
};

// One call by the generated stub with `metadata`, within `limit`.
call_result call(v1::Scenario::Stub& stub, const std::map<std::string, std::string>& metadata = {},
                 milliseconds limit = milliseconds(2000)) {
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + limit);
  for (const auto& [name, value] : metadata) ctx.AddMetadata(name, value);
  v1::CallRequest request;
  v1::CallReply reply;
  const auto began = clock_type::now();
  call_result r;
  r.status = stub.Call(&ctx, request, &reply);
  r.took = std::chrono::duration_cast<milliseconds>(clock_type::now() - began);
  r.text = reply.text();
  for (const auto& [name, value] : ctx.GetServerTrailingMetadata()) {
    r.trailers.emplace(std::string(name.data(), name.size()),
                       std::string(value.data(), value.size()));
  }
  return r;
}

std::string pushback(const call_result& r) {
  const auto it = r.trailers.find(std::string(stormguard::k_pushback_header));
  return it == r.trailers.end() ? "(none)" : it->second;
}

// An incident over the whole scenario with these rates.
sim::scenario with_incident(sim::scenario s, double error_rate, double loss_rate) {
  s.incident = sim::incident{.start = {}, .end = s.length, .service_time = std::nullopt};
  s.incident->error_rate = error_rate;
  s.incident->loss_rate = loss_rate;
  return s;
}

// A call made while another is in service (at most 1 s of waiting for that one to start).
call_result call_beside_one_in_service(served& s) {
  std::thread first([&] { (void)call(*s.stub); });
  const auto until = clock_type::now() + std::chrono::seconds(1);
  while (s.srv->stats().in_service < 1 && clock_type::now() < until) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  call_result r = call(*s.stub);
  first.join();
  return r;
}

TEST(LabGrpc, ServedCallIsOkAndCountedWithTheHttpEndpoint) {
  served s(tiny_scenario(1, 10, milliseconds(30)));
  const call_result r = call(*s.stub);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text, "ok");
  EXPECT_GE(r.took, milliseconds(25)) << "the scenario's service time is the answer's delay";
  EXPECT_EQ(pushback(r), "(none)");
  const lab::server_stats st = s.srv->stats();
  EXPECT_EQ(st.attempts, 1);
  EXPECT_EQ(st.served, 1);
  EXPECT_EQ(st.served_in_time, 1);
  EXPECT_EQ(st.in_service, 0);
}

TEST(LabGrpc, IncidentErrorIsUnavailableAtOnceWithoutPushback) {
  served s(with_incident(tiny_scenario(1, 10, milliseconds(300)), 1.0, 0.0));
  const call_result r = call(*s.stub);
  EXPECT_EQ(r.status.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(r.took, milliseconds(250)) << "an incident error does not wait for a worker";
  EXPECT_EQ(pushback(r), "(none)") << "the client may retry an incident's error";
  EXPECT_EQ(s.srv->stats().errors, 1);
  EXPECT_EQ(s.srv->stats().served, 0);
}

TEST(LabGrpc, FullQueueIsUnavailable) {
  // One worker, no queue: the second of two calls at once finds no room.
  served s(tiny_scenario(1, 0, milliseconds(400)));
  const call_result r = call_beside_one_in_service(s);
  EXPECT_EQ(r.status.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.srv->stats().rejected, 1);
  EXPECT_EQ(s.srv->stats().served, 1);
}

TEST(LabGrpc, LostCallEndsAtTheCallersDeadlineAndIsFreedOnceCancelled) {
  served s(with_incident(tiny_scenario(), 0.0, 1.0));
  const call_result r = call(*s.stub, {}, milliseconds(200));
  EXPECT_EQ(r.status.error_code(), ::grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GE(r.took, milliseconds(190));
  EXPECT_EQ(s.srv->stats().lost, 1);
  // The listener's stop waits for the call the server holds: the sweep answers it within a
  // second of its cancellation, so a stop of the listener alone returns.
  const auto began = clock_type::now();
  s.grpc->stop();
  EXPECT_LT(clock_type::now() - began, std::chrono::milliseconds(1800));
}

// At most max_calls held at once: the next call is RESOURCE_EXHAUSTED at once (not an attempt),
// and once the held ones have ended (their deadline, then the server's sweep) calls are held again.
TEST(LabGrpc, CallsBeyondTheMostHeldAreResourceExhaustedAtOnce) {
  served s(with_incident(tiny_scenario(), 0.0, 1.0), 3);
  std::vector<std::thread> held;
  for (int i = 0; i < 3; ++i)
    held.emplace_back([&] { (void)call(*s.stub, {}, milliseconds(300)); });
  const auto until = clock_type::now() + std::chrono::seconds(2);
  while (s.srv->stats().lost < 3 && clock_type::now() < until) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_EQ(s.srv->stats().lost, 3);
  const call_result beyond = call(*s.stub, {}, milliseconds(2000));
  EXPECT_EQ(beyond.status.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(beyond.status.error_message(), "serve holds 3 calls already; try again later");
  EXPECT_LT(beyond.took, milliseconds(1000));
  EXPECT_EQ(s.srv->stats().lost, 3) << "not an attempt";
  for (std::thread& t : held) t.join();
  // Freed within a second of their cancellation: a call is held (lost) again.
  ::grpc::StatusCode again = ::grpc::StatusCode::RESOURCE_EXHAUSTED;
  const auto freed_by = clock_type::now() + std::chrono::seconds(3);
  while (again == ::grpc::StatusCode::RESOURCE_EXHAUSTED && clock_type::now() < freed_by) {
    again = call(*s.stub, {}, milliseconds(100)).status.error_code();
    if (again == ::grpc::StatusCode::RESOURCE_EXHAUSTED)
      std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(again, ::grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST(LabGrpc, RetryOverTheServersBudgetIsRefusedWithDoNotRetry) {
  sim::scenario sc = tiny_scenario(1, 10, milliseconds(5));
  sc.defences.enabled = sc.defences.enabled.with<sim::retry_budget_defence>();
  sc.defences.of<sim::retry_budget_defence>() = {.ratio = 0.0, .min_retries_per_second = 0};
  served s(sc);
  EXPECT_TRUE(call(*s.stub).status.ok()) << "a first attempt passes the retry budget";
  const call_result r = call(*s.stub, {{"grpc-previous-rpc-attempts", "1"}});
  EXPECT_EQ(r.status.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(pushback(r), "-1");
  EXPECT_NE(r.status.error_message().find("stormguard admission"), std::string::npos);
  const auto st = s.srv->stats();
  EXPECT_EQ(st.defence_decisions[sim::defence_index<sim::retry_budget_defence>], 1);
  // The other ecosystem's label reads the same (x-envoy-attempt-count 2 is attempt 2).
  EXPECT_EQ(pushback(call(*s.stub, {{"x-envoy-attempt-count", "2"}})), "-1");
  // A malformed label is a retry of unknown number: refused too. (A malformed
  // grpc-previous-rpc-attempts never reaches a handler: C-core drops it, docs/grpc.md.)
  EXPECT_EQ(pushback(call(*s.stub, {{"x-envoy-attempt-count", "two"}})), "-1");
}

TEST(LabGrpc, DeadlineNearerThanTheServiceIsDroppedWithDoNotRetry) {
  sim::scenario sc = tiny_scenario(1, 10, milliseconds(300));
  sc.defences.enabled = sc.defences.enabled.with<sim::drop_expired_defence>();
  served s(sc);
  const call_result near = call(*s.stub, {}, milliseconds(100));
  EXPECT_EQ(near.status.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(pushback(near), "-1");
  EXPECT_EQ(s.srv->stats().dropped_expired(), 1);
  EXPECT_TRUE(call(*s.stub, {}, milliseconds(2000)).status.ok()) << "time enough: served";
}

TEST(LabGrpc, ConcurrencyLimitIsResourceExhaustedWithAPositivePushback) {
  sim::scenario sc = tiny_scenario(1, 10, milliseconds(400));
  sc.defences.enabled = sc.defences.enabled.with<sim::concurrency_limit_defence>();
  auto& limit = sc.defences.of<sim::concurrency_limit_defence>();
  limit.initial_limit = 1;
  limit.min_concurrency = 1;
  limit.max_limit = 1;
  served s(sc);
  const call_result r = call_beside_one_in_service(s);
  EXPECT_EQ(r.status.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_NE(pushback(r), "(none)");
  EXPECT_GT(std::stoll(pushback(r)), 0) << "retry no sooner than the limiter's delay";
}

TEST(LabGrpc, IncidentLabelCountsTheAttemptsThatTookAWorker) {
  served s(tiny_scenario(2, 10, milliseconds(5)));
  EXPECT_TRUE(call(*s.stub, {{"x-stormguard-incident", "1"}}).status.ok());
  EXPECT_TRUE(call(*s.stub, {{"x-stormguard-incident", "true"}}).status.ok());
  EXPECT_TRUE(call(*s.stub).status.ok());
  EXPECT_EQ(s.srv->stats().incident_served, 1) << "only the value 1 counts";
}

TEST(LabGrpc, RetryLabelsAreCountedAsTheHttpEndpointCountsThem) {
  served s(tiny_scenario(2, 10, milliseconds(2)));
  EXPECT_TRUE(call(*s.stub).status.ok());
  EXPECT_TRUE(call(*s.stub, {{"grpc-previous-rpc-attempts", "2"}}).status.ok());
  EXPECT_TRUE(call(*s.stub, {{"amz-sdk-request", "attempt=3; max=3"}}).status.ok());
  EXPECT_TRUE(call(*s.stub, {{"x-envoy-attempt-count", "x"}}).status.ok());
  const lab::server_stats st = s.srv->stats();
  using stormguard::admission::retry_signal;
  const auto at = [](retry_signal sig) { return stormguard::admission::index_of(sig); };
  EXPECT_EQ(st.retry_signals[at(retry_signal::grpc_previous_attempts)], 1);
  EXPECT_EQ(st.retry_signals[at(retry_signal::amz_sdk_request)], 1);
  EXPECT_EQ(st.retry_signals_malformed[at(retry_signal::envoy_attempt_count)], 1);
  EXPECT_EQ(st.attempts, 4);
}

TEST(LabGrpc, AnotherEcosystemsRetryLabelIsARetryToTheServersBudget) {
  sim::scenario sc = tiny_scenario(1, 10, milliseconds(2));
  sc.defences.enabled = sc.defences.enabled.with<sim::retry_budget_defence>();
  sc.defences.of<sim::retry_budget_defence>() = {.ratio = 0.0, .min_retries_per_second = 0};
  served s(sc);
  EXPECT_EQ(pushback(call(*s.stub, {{"amz-sdk-request", "attempt=2; max=3"}})), "-1");
  EXPECT_EQ(pushback(call(*s.stub, {{"amz-sdk-request", "attempt=1; max=3"}})), "(none)");
}

TEST(LabGrpc, StopAnswersTheCallsInServiceCancelledAtOnce) {
  auto s = std::make_unique<served>(tiny_scenario(2, 10, milliseconds(5000)));
  std::vector<call_result> results(3);
  std::vector<std::thread> callers;
  for (auto& r : results) callers.emplace_back([&] { r = call(*s->stub, {}, milliseconds(8000)); });
  const auto until = clock_type::now() + std::chrono::seconds(2);
  while (s->srv->stats().in_service + s->srv->stats().queued < 3 && clock_type::now() < until) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  const auto began = clock_type::now();
  s.reset();  // the server, then the listener
  for (auto& t : callers) t.join();
  EXPECT_LT(clock_type::now() - began, std::chrono::milliseconds(1500));
  for (const auto& r : results) EXPECT_EQ(r.status.error_code(), ::grpc::StatusCode::CANCELLED);
}

TEST(LabGrpc, CallAfterTheServerStoppedIsCancelledNotHeld) {
  served s(tiny_scenario());
  s.srv->stop();
  const call_result r = call(*s.stub, {}, milliseconds(2000));
  EXPECT_EQ(r.status.error_code(), ::grpc::StatusCode::CANCELLED);
  EXPECT_LT(r.took, milliseconds(1000));
}

// Out of descriptors: connections wait in the backlog while accept() fails with EMFILE. The
// listener pauses (gRPC 1.51's own listener stopped accepting for good here) and, once
// descriptors are free again, accepts the waiting connections and new calls are answered.
TEST(LabGrpc, OutOfDescriptorsTheListenerPausesAndAcceptsAgain) {
#ifdef STORMGUARD_TEST_SANITIZED
  // In a sanitizer build the test runs in a child of this program with
  // k_out_of_descriptors_env: out of descriptors, UBSan's vptr check cannot probe memory (it needs
  // a pipe) and reports a false "invalid vptr" on a valid object (CI saw it in gRPC's callback
  // code on a poller thread), which CI's UBSAN_OPTIONS would halt on.
  const char* options = std::getenv("UBSAN_OPTIONS");
  if (options == nullptr ||
      std::string_view(stormguard::test_util::k_out_of_descriptors_env).substr(14) != options) {
    std::array<char, 4096> self{};
    const ssize_t n = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
    ASSERT_GT(n, 0);
    const std::string command =
        std::string("/usr/bin/env ") + stormguard::test_util::k_out_of_descriptors_env + " '" +
        std::string(self.data(), static_cast<std::size_t>(n)) +
        "' --gtest_filter=LabGrpc.OutOfDescriptorsTheListenerPausesAndAcceptsAgain";
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command << ": " << status;
    return;
  }
#endif
  served s(tiny_scenario(1, 10, milliseconds(1)));
  ASSERT_TRUE(call(*s.stub).status.ok());
  // Sockets for five connections first, then every free descriptor taken (a lower soft limit
  // keeps that small), then the connections: they reach the backlog, and accept() has no
  // descriptor to give them.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  std::vector<int> clients;
  for (int i = 0; i < 5; ++i) clients.push_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  std::vector<int> fillers;
  const int probe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  fillers.push_back(probe);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(probe) + 64;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  for (int i = 0; i < 100'000; ++i) {
    const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    fillers.push_back(fd);
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(s.grpc->port());
  for (const int fd : clients) {
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
  }
  const auto until = clock_type::now() + std::chrono::seconds(3);
  while (s.grpc->accept_pauses() == 0 && clock_type::now() < until) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  const std::int64_t pauses = s.grpc->accept_pauses();
  for (const int fd : fillers) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_GT(pauses, 0) << "accept() never failed for want of descriptors";
  // A new connection (a channel of its own subchannel pool: gRPC would share the first
  // channel's connection otherwise) is answered.
  ::grpc::ChannelArguments own_connection;
  own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const auto fresh = v1::Scenario::NewStub(sg_grpc::make_channel(
      s.grpc->address(), ::grpc::InsecureChannelCredentials(), own_connection));
  const call_result after = call(*fresh, {}, milliseconds(5000));
  EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  for (const int fd : clients) ::close(fd);
}

TEST(LabGrpc, StormguardClientRetriesTheIncidentsErrorsAndEveryAttemptIsCounted) {
  // Half the attempts fail at once; the client retries with its own labels until one is
  // served. The server counts every attempt the client made, and reads its labels as retries.
  sim::scenario sc = with_incident(tiny_scenario(4, 10, milliseconds(2)), 0.5, 0.0);
  served s(sc);
  sg_grpc::client_options options;
  options.retry.max_retries = 4;
  options.retry.backoff.base = milliseconds(1);
  options.retry.backoff.cap = milliseconds(5);
  options.budget = stormguard::ratio_budget_options{.ratio = 1.0, .min_retries_per_second = 1000};
  sg_grpc::client client(s.grpc->address(), ::grpc::InsecureChannelCredentials(), options);
  const auto stub = v1::Scenario::NewStub(client.channel());
  int attempts = 0;
  int succeeded = 0;
  for (int i = 0; i < 40; ++i) {
    v1::CallRequest request;
    v1::CallReply reply;
    const auto r = client.call([&](::grpc::ClientContext& ctx, const v1::CallRequest& req,
                                   v1::CallReply* out) { return stub->Call(&ctx, req, out); },
                               request, &reply, {.idempotent = true});
    attempts += r.attempts;
    succeeded += r.ok() ? 1 : 0;
  }
  const auto st = s.srv->stats();
  EXPECT_EQ(st.attempts, attempts);
  EXPECT_EQ(st.served, succeeded);
  EXPECT_EQ(st.errors, attempts - succeeded);
  EXPECT_GE(succeeded, 36) << "at most 5 attempts at 50 % each: a call fails with p = 1/32";
  EXPECT_GT(attempts, 50) << "about 2 attempts per call";
}

// lab --transport grpc: the fleet's attempts over gRPC against the listener of a real server, as
// tests/integration/lab_fleet_test.cpp runs them over HTTP: 3 s at 100 req/s, an incident of 1 s
// at a service time far above the 200 ms timeout (about 3 s per strategy).
sim::scenario tiny_storm() {
  sim::scenario s = sim::friday_night();
  s.name = "tiny-storm";
  s.length = std::chrono::seconds(3);
  s.requests_per_second = 100;
  s.clients = 2;
  s.timeout = milliseconds(200);
  s.workers = 4;
  s.queue_limit = 100;
  s.service_time = milliseconds(10);
  s.incident =
      sim::incident{std::chrono::seconds(1), std::chrono::seconds(2), std::chrono::seconds(1)};
  return s;
}

TEST(LabGrpcFleet, MeasuresNoneAndNaiveOverGrpcNextToTheSimulator) {
  const sim::scenario s = tiny_storm();
  const std::vector<sim::strategy> strategies{*sim::find_strategy("none"),
                                              *sim::find_strategy("naive")};
  lab::fleet_options options;
  options.transport = lab::lab_transport_kind::grpc;
  const auto report = lab::run_lab(s, strategies, options);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ((*report).transport, lab::lab_transport_kind::grpc);
  EXPECT_NE(lab::format_table(*report).find("; over gRPC;"), std::string::npos);
  ASSERT_EQ((*report).strategies.size(), 2U);
  const lab::lab_comparison& none = (*report).strategies[0];
  EXPECT_TRUE(none.valid) << none.invalid_reason;
  EXPECT_EQ(none.lab.logical_requests, none.sim.logical_requests);
  ASSERT_TRUE(none.lab.amplification);
  EXPECT_NEAR(*none.lab.amplification, 1.0, 0.01);
  ASSERT_TRUE(none.lab.success_ratio);
  EXPECT_GT(*none.lab.success_ratio, 0.5);
  EXPECT_GT(none.lab.timeouts, 0) << "the incident's attempts end at the 200 ms deadline";
  const lab::lab_comparison& naive = (*report).strategies[1];
  EXPECT_TRUE(naive.valid) << naive.invalid_reason;
  ASSERT_TRUE(naive.lab.incident_amplification);
  ASSERT_TRUE(naive.sim.incident_amplification);
  EXPECT_GT(*naive.lab.incident_amplification, 1.5);
  EXPECT_GT(*naive.sim.incident_amplification, 1.5);
}

TEST(LabGrpcFleet, ServerRefusalsReachTheFleetAsDoNotRetry) {
  // The server's retry budget refuses every retry with pushback -1: a client that honours it
  // (the full strategy) stops at its first refusal, over gRPC as over HTTP.
  sim::scenario s = tiny_storm();
  s.defences.enabled = s.defences.enabled.with<sim::retry_budget_defence>();
  s.defences.of<sim::retry_budget_defence>() = {.ratio = 0.0, .min_retries_per_second = 0};
  const std::vector<sim::strategy> strategies{*sim::find_strategy("full")};
  lab::fleet_options options;
  options.transport = lab::lab_transport_kind::grpc;
  const auto report = lab::run_lab(s, strategies, options);
  ASSERT_TRUE(report) << report.error();
  const lab::lab_comparison& full = (*report).strategies.at(0);
  EXPECT_TRUE(full.valid) << full.invalid_reason;
  EXPECT_GT(full.lab.server_refused, 0);
  EXPECT_GT(full.sim.server_refused, 0);
}

TEST(LabGrpcFleet, HedgedCopiesThatLoseAreCancelledWithoutTransportFailures) {
  const sim::scenario s = tiny_storm();
  const std::vector<sim::strategy> strategies{*sim::find_strategy("hedged")};
  lab::fleet_options options;
  options.transport = lab::lab_transport_kind::grpc;
  const auto report = lab::run_lab(s, strategies, options);
  ASSERT_TRUE(report) << report.error();
  const lab::lab_comparison& hedged = (*report).strategies.at(0);
  EXPECT_TRUE(hedged.valid) << hedged.invalid_reason;
  ASSERT_TRUE(hedged.lab.amplification);
  EXPECT_GT(*hedged.lab.amplification, 1.0) << "copies were sent";
}

TEST(GrpcStatusFor, MapsEachOutcomeAndItsPushback) {
  using stormguard::admission::outcome;
  EXPECT_TRUE(sg_grpc::status_for(outcome::served).ok());
  EXPECT_EQ(sg_grpc::status_for(outcome::over_limit).error_code(),
            ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  for (const outcome o : {outcome::unavailable, outcome::retry_refused, outcome::expired,
                          outcome::codel_dropped, outcome::retry_shed}) {
    EXPECT_EQ(sg_grpc::status_for(o).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(sg_grpc::pushback_for(outcome::retry_refused, std::nullopt), "-1");
  EXPECT_EQ(sg_grpc::pushback_for(outcome::expired, milliseconds(50)), "-1")
      << "do not retry wins over a delay";
  EXPECT_EQ(sg_grpc::pushback_for(outcome::unavailable, std::nullopt), std::nullopt);
  EXPECT_EQ(sg_grpc::pushback_for(outcome::over_limit, milliseconds(1500)), "1500");
  EXPECT_EQ(sg_grpc::pushback_for(outcome::over_limit, std::chrono::microseconds(1200)), "2")
      << "rounded up: never sooner than asked";
  EXPECT_EQ(sg_grpc::pushback_for(outcome::over_limit, milliseconds(-5)), "0");
  EXPECT_EQ(sg_grpc::pushback_for(outcome::over_limit, std::chrono::hours(24 * 365)), "2147483647")
      << "the trailer is an int32";
}

}  // namespace
