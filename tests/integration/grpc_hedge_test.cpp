// SPDX-License-Identifier: Apache-2.0
// stormguard::grpc::client's hedged calls against a real in-process gRPC server on 127.0.0.1:0
// (proto/stormguard/lab/v1/lab.proto, each call's behaviour scripted by the test): gRFC A6's
// hedging rules (delay, non-fatal and fatal codes, pushback, max_attempts), the budget, the
// losers' cancellation, a stop request, bad input, and the tail a hedge cuts (p99.9 of a server
// with 1 % stalls of 1 s). The hedging delay is the client's timer thread (real time), so these
// tests run on real time: where a test is about an answer, not the delay, the delay is 10 s; where
// it is about the delay, the server holds the other copy far longer than the delay.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/config/policy.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/grpc/policy.hpp"
#include "stormguard/lab/v1/lab.grpc.pb.h"
#include "support/grpc_lab_service.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::end_reason;
using stormguard::hedge_stop;
using stormguard::lab::v1::EchoReply;
using stormguard::lab::v1::EchoRequest;
using stormguard::lab::v1::Lab;
namespace sgrpc = stormguard::grpc;
using stormguard_tests::grpc_lab::first_copy;
using stormguard_tests::grpc_lab::scripted_service;
using stormguard_tests::grpc_lab::stall;
using stormguard_tests::grpc_lab::test_server;

grpc::Status unavailable() { return {grpc::StatusCode::UNAVAILABLE, "try again"}; }

// Hedging settings: `copies` copies `delay` apart, no budget unless the test sets one.
sgrpc::client_options hedging(int copies, stormguard::duration delay,
                              sgrpc::status_codes non_fatal = {}) {
  sgrpc::client_options o;
  o.budget = stormguard::no_budget{};
  o.hedging.policy.max_attempts = copies;
  o.hedging.policy.delay = delay;
  o.hedging.non_fatal = non_fatal;
  return o;
}

// A client of `target` and its stub, running hedged Echo calls.
struct hedging_client {
  std::unique_ptr<sgrpc::client> client;
  std::unique_ptr<Lab::Stub> stub;

  hedging_client(const std::string& target, sgrpc::client_options options)
      : client(std::make_unique<sgrpc::client>(target, grpc::InsecureChannelCredentials(),
                                               std::move(options))),
        stub(Lab::NewStub(client->channel())) {}

  // The callback-API attempt of every copy.
  [[nodiscard]] auto rpc() {
    return [this](grpc::ClientContext* ctx, const EchoRequest* req, EchoReply* resp,
                  std::function<void(grpc::Status)> done) {
      stub->async()->Echo(ctx, req, resp, std::move(done));
    };
  }
  sgrpc::result echo(EchoReply* reply, sgrpc::call_options call = {.idempotent = true}) {
    EchoRequest request;
    request.set_text("hello");
    return client->hedged_call(rpc(), request, reply, call);
  }
};

TEST(GrpcHedge, AFirstCopyThatAnswersBeforeTheDelaySendsNoOther) {
  scripted_service service([](int, grpc::ServerContext*) { return grpc::Status::OK; });
  test_server server(&service);
  hedging_client c(server.target(), hedging(3, 2s));
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = c.echo(&reply);
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.hedges, (stormguard::hedge_report{.winner = 1, .sent = 1}));
  EXPECT_EQ(reply.text(), "1");
  EXPECT_EQ(service.calls(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 1s);  // the delay's alarm did not hold it
}

TEST(GrpcHedge, ASlowFirstCopyIsHedgedTheSecondWinsAndTheFirstIsCancelled) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    if (first_copy(ctx)) stall(ctx, 5s);
    return grpc::Status::OK;
  });
  test_server server(&service);
  hedging_client c(server.target(), hedging(2, 20ms));
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = c.echo(&reply);
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.hedges.winner, 2);
  EXPECT_EQ(r.hedges.sent, 2);
  EXPECT_EQ(r.hedges.cancelled, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2s);
  // gRFC A6's label on copy 2, whichever reached the server first; the reply is the number of
  // the server call that copy 2 was (the winner's own response, not the loser's).
  auto labels = service.labels();
  const auto second = std::find(labels.begin(), labels.end(), "1");
  ASSERT_NE(second, labels.end());
  EXPECT_EQ(reply.text(), std::to_string(second - labels.begin() + 1));
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<std::string>{"", "1"}));
  for (int i = 0; i < 2000 && service.cancelled() == 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(service.cancelled(), 1);  // the server saw the loser cancelled
}

TEST(GrpcHedge, ANonFatalCodeSendsTheNextCopyAtOnce) {
  scripted_service service(
      [](int call, grpc::ServerContext*) { return call < 3 ? unavailable() : grpc::Status::OK; });
  test_server server(&service);
  hedging_client c(server.target(), hedging(3, 10s, {grpc::StatusCode::UNAVAILABLE}));
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = c.echo(&reply);
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.hedges.winner, 3);
  EXPECT_EQ(r.hedges.sent, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);  // not 10 s apart
  EXPECT_EQ(service.labels(), (std::vector<std::string>{"", "1", "2"}));
}

TEST(GrpcHedge, EveryCopyFailingNonFatallyEndsAttemptsExhausted) {
  scripted_service service([](int, grpc::ServerContext*) { return unavailable(); });
  test_server server(&service);
  hedging_client c(server.target(), hedging(3, 10s, {grpc::StatusCode::UNAVAILABLE}));
  EchoReply reply;
  const auto r = c.echo(&reply);
  EXPECT_EQ(r.reason, end_reason::attempts_exhausted);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(r.hedges.sent, 3);
  EXPECT_EQ(r.hedges.stop, hedge_stop::max_attempts);
  EXPECT_EQ(service.calls(), 3);
}

TEST(GrpcHedge, AFatalCodeCommitsTheCallAndCancelsTheOtherCopies) {
  scripted_service service([](int call, grpc::ServerContext* ctx) {
    if (call == 1) {
      stall(ctx, 5s);
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no such order");
  });
  test_server server(&service);
  hedging_client c(server.target(), hedging(2, 20ms, {grpc::StatusCode::UNAVAILABLE}));
  EchoReply reply;
  const auto r = c.echo(&reply);
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r.status.error_message(), "no such order");
  EXPECT_EQ(r.hedges.winner, 0);
  EXPECT_EQ(r.hedges.sent, 2);
  EXPECT_EQ(r.hedges.cancelled, 1);
}

TEST(GrpcHedge, PushbackMinusOneStopsFurtherCopiesButNotThoseInFlight) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    if (first_copy(ctx)) {
      stall(ctx, 1000ms);
      return grpc::Status::OK;  // the copy in flight still wins
    }
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "-1");
    return unavailable();
  });
  test_server server(&service);
  hedging_client c(server.target(), hedging(4, 300ms, {grpc::StatusCode::UNAVAILABLE}));
  EchoReply reply;
  const auto r = c.echo(&reply);
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.hedges.winner, 1);
  EXPECT_EQ(r.hedges.sent, 2);
  EXPECT_EQ(r.hedges.stop, hedge_stop::server_refused);
  EXPECT_EQ(service.calls(), 2);
}

TEST(GrpcHedge, PushbackMinusOneOnTheOnlyCopyEndsServerRefused) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "-1");
    return unavailable();
  });
  test_server server(&service);
  hedging_client c(server.target(), hedging(3, 10s, {grpc::StatusCode::UNAVAILABLE}));
  EchoReply reply;
  const auto r = c.echo(&reply);
  EXPECT_EQ(r.reason, end_reason::server_refused);
  EXPECT_EQ(r.hedges.sent, 1);
  EXPECT_EQ(service.calls(), 1);
}

TEST(GrpcHedge, AMalformedPushbackIsReadAsDoNotRetry) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "soon");
    return unavailable();
  });
  test_server server(&service);
  hedging_client c(server.target(), hedging(3, 10s, {grpc::StatusCode::UNAVAILABLE}));
  EchoReply reply;
  const auto r = c.echo(&reply);
  EXPECT_EQ(r.reason, end_reason::server_refused);
  EXPECT_EQ(r.hedges.stop, hedge_stop::server_refused);
  EXPECT_EQ(r.hedges.sent, 1);
}

TEST(GrpcHedge, AStatusOutsideGrpcsListIsReadAsUnknownAndKeptAsSent) {
  // 20 is no code of gRPC's (0..16); gRPC C++ passes the number through.
  scripted_service service([](int call, grpc::ServerContext*) {
    return call == 1 ? grpc::Status(static_cast<grpc::StatusCode>(20), "odd") : grpc::Status::OK;
  });
  test_server server(&service);
  hedging_client fatal(server.target(), hedging(2, 10s, {grpc::StatusCode::UNAVAILABLE}));
  EchoReply reply;
  const auto r = fatal.echo(&reply);
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(static_cast<int>(r.status.error_code()), 20);
  scripted_service again([](int call, grpc::ServerContext*) {
    return call == 1 ? grpc::Status(static_cast<grpc::StatusCode>(20), "odd") : grpc::Status::OK;
  });
  test_server server2(&again);
  hedging_client non_fatal(server2.target(), hedging(2, 10s, {grpc::StatusCode::UNKNOWN}));
  const auto h = non_fatal.echo(&reply);
  EXPECT_TRUE(h.ok()) << h.status.error_message();
  EXPECT_EQ(h.hedges.winner, 2);  // UNKNOWN is non-fatal: the next copy at once, not in 10 s
}

TEST(GrpcHedge, APositivePushbackPostponesTheNextCopy) {
  scripted_service service([](int call, grpc::ServerContext* ctx) {
    if (call == 1) {
      ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "300");
      return unavailable();
    }
    return grpc::Status::OK;
  });
  test_server server(&service);
  EchoReply reply;  // a delay of 5 s: only the pushback can send copy 2 sooner
  hedging_client postponed(server.target(), hedging(2, 5s, {grpc::StatusCode::UNAVAILABLE}));
  const auto begin = std::chrono::steady_clock::now();
  const auto r = postponed.echo(&reply);
  const auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.hedges.winner, 2);
  EXPECT_GE(took, 300ms);  // not at once, as a non-fatal code alone would send it
  EXPECT_LT(took, 4s);     // and not after the 5-s delay
}

TEST(GrpcHedge, APushbackAboveMaxRetryAfterStopsFurtherCopies) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "120000");
    return unavailable();
  });
  test_server server(&service);
  auto options = hedging(3, 10s, {grpc::StatusCode::UNAVAILABLE});
  options.hedging.policy.max_retry_after = 1s;
  hedging_client c(server.target(), options);
  EchoReply reply;
  const auto r = c.echo(&reply);
  EXPECT_EQ(r.reason, end_reason::retry_after_too_long);
  EXPECT_EQ(r.hedges.stop, hedge_stop::retry_after_too_long);
  EXPECT_EQ(r.hedges.sent, 1);
}

TEST(GrpcHedge, TheBudgetRefusesACopyAndTheCopyInFlightGoesOn) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    stall(ctx, 100ms);
    return grpc::Status::OK;
  });
  test_server server(&service);
  auto options = hedging(3, 10ms);
  options.budget = stormguard::ratio_budget_options{.ratio = 0.0, .min_retries_per_second = 0};
  hedging_client c(server.target(), options);
  EchoReply reply;
  const auto r = c.echo(&reply);
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.hedges, (stormguard::hedge_report{.winner = 1, .sent = 1, .refused = 1}));
  EXPECT_EQ(service.calls(), 1);
}

TEST(GrpcHedge, EveryCopyIsChargedToABudgetSharedByTwoClients) {
  // Copy 1 of every call stalls 300 ms; a hedge (labelled) answers at once.
  scripted_service service([](int, grpc::ServerContext* ctx) {
    if (ctx->client_metadata().count("grpc-previous-rpc-attempts") == 0) stall(ctx, 300ms);
    return grpc::Status::OK;
  });
  test_server server(&service);
  auto options = hedging(2, 10ms);
  // Each call deposits half a retry, no floor: every second call of the two clients together
  // may hedge.
  options.shared_budget = std::make_shared<stormguard::any_budget>(
      stormguard::ratio_budget_options{.ratio = 0.5, .min_retries_per_second = 0});
  hedging_client a(server.target(), options);
  hedging_client b(server.target(), options);
  EchoReply reply;
  std::vector<int> refused;
  for (int i = 0; i < 4; ++i) refused.push_back((i % 2 == 0 ? a : b).echo(&reply).hedges.refused);
  EXPECT_EQ(refused, (std::vector<int>{1, 0, 1, 0}));
  EXPECT_EQ(service.calls(), 6);
}

TEST(GrpcHedge, AStopRequestCancelsEveryCopyInFlight) {
  std::atomic<int> started{0};
  scripted_service service([&](int, grpc::ServerContext* ctx) {
    ++started;
    stall(ctx, 5s);
    return grpc::Status::OK;
  });
  test_server server(&service);
  hedging_client c(server.target(), hedging(3, 10ms));
  std::stop_source stop;
  std::thread stopper([&] {
    while (started.load() < 3) std::this_thread::sleep_for(1ms);
    stop.request_stop();
  });
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = c.echo(&reply, {.idempotent = true, .stop = stop.get_token()});
  stopper.join();
  EXPECT_EQ(r.reason, end_reason::cancelled);
  EXPECT_EQ(r.hedges.sent, 3);
  EXPECT_EQ(r.hedges.cancelled, 3);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 3s);
}

TEST(GrpcHedge, ACallsDeadlineBoundsEveryCopy) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    stall(ctx, 5s);
    return grpc::Status::OK;
  });
  test_server server(&service);
  hedging_client c(server.target(), hedging(5, 50ms));
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r =
      c.echo(&reply, {.idempotent = true, .deadline = stormguard::real_clock{}.now() + 300ms});
  EXPECT_EQ(r.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 3s);
  EXPECT_LE(r.hedges.sent, 5);
}

TEST(GrpcHedge, AMethodNotMarkedIdempotentIsRefusedBeforeAnythingIsSent) {
  scripted_service service([](int, grpc::ServerContext*) { return grpc::Status::OK; });
  test_server server(&service);
  hedging_client c(server.target(), hedging(2, 10ms));
  EchoReply reply;
  try {
    (void)c.echo(&reply, {});
    ADD_FAILURE() << "a hedged call of a method not marked idempotent was sent";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("idempotent"), std::string::npos) << e.what();
  }
  EXPECT_EQ(service.calls(), 0);
}

TEST(GrpcHedge, BadHedgingOptionsAreRefusedAtConstructionNamingTheField) {
  for (const int copies : {1, 6}) {
    try {
      hedging_client c("127.0.0.1:1", hedging(copies, 10ms));
      ADD_FAILURE() << copies << " copies were accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("max_attempts"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(copies)), std::string::npos);
    }
  }
  EXPECT_THROW(hedging_client("127.0.0.1:1", hedging(2, -1ms)), std::invalid_argument);
}

TEST(GrpcHedge, AnExceptionOnTheFirstCopyPropagatesAndOnALaterOneEndsTheCall) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    stall(ctx, 2s);
    return grpc::Status::OK;
  });
  test_server server(&service);
  hedging_client c(server.target(), hedging(2, 10ms));
  EchoRequest request;
  EchoReply reply;
  auto throws_on = [&c](int bad) {
    return [&c, bad, copy = std::make_shared<int>(0)](grpc::ClientContext* ctx,
                                                      const EchoRequest* req, EchoReply* resp,
                                                      std::function<void(grpc::Status)> done) {
      if (++*copy == bad) throw std::runtime_error("the caller's rpc failed");
      c.stub->async()->Echo(ctx, req, resp, std::move(done));
    };
  };
  EXPECT_THROW((void)c.client->hedged_call(throws_on(1), request, &reply, {.idempotent = true}),
               std::runtime_error);
  const auto r = c.client->hedged_call(throws_on(2), request, &reply, {.idempotent = true});
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_NE(r.status.error_message().find("copy 2"), std::string::npos) << r.status.error_message();
}

TEST(GrpcHedge, AHedgingPolicyGivesTheHedgedCallsTheirSettings) {
  const auto policies = stormguard::config::parse_policies(
      R"({"policies": [{"name": "h", "max_retry_after": "2s",
          "hedging": {"max_attempts": 3, "delay": "15ms",
                      "non_fatal_grpc_codes": ["UNAVAILABLE", "ABORTED"]}}]})");
  ASSERT_TRUE(policies) << policies.error().message;
  const auto o = sgrpc::client_options_for(policies->front());
  EXPECT_EQ(o.hedging.policy.max_attempts, 3);
  EXPECT_EQ(o.hedging.policy.delay, 15ms);
  EXPECT_EQ(o.hedging.policy.max_retry_after, 2s);
  EXPECT_EQ(o.hedging.non_fatal,
            (sgrpc::status_codes{grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::ABORTED}));
}

// ---------------------------------------------------------------------------------------------
// The tail: p99.9 of a server whose every 100th call stalls 1 s ("The Tail at Scale")
// ---------------------------------------------------------------------------------------------

// Runs `calls` calls, `in_flight` at a time, hedged or not; returns each call's latency.
std::vector<std::chrono::steady_clock::duration> run_load(hedging_client& c, bool hedged, int calls,
                                                          int in_flight) {
  std::mutex mutex;
  std::condition_variable ended;
  std::vector<std::chrono::steady_clock::duration> latencies;
  int running = 0;
  int failed = 0;
  EchoRequest request;
  std::vector<EchoReply> replies(static_cast<std::size_t>(calls));
  for (int i = 0; i < calls; ++i) {
    {
      std::unique_lock lock(mutex);
      ended.wait(lock, [&] { return running < in_flight; });
      ++running;
    }
    const auto begin = std::chrono::steady_clock::now();
    auto done = [&, begin](sgrpc::result r) {
      const std::lock_guard lock(mutex);
      if (!r.ok()) ++failed;
      latencies.push_back(std::chrono::steady_clock::now() - begin);
      --running;
      ended.notify_all();
    };
    EchoReply* reply = &replies[static_cast<std::size_t>(i)];
    if (hedged) {
      c.client->async_hedged_call(c.rpc(), request, reply, {.idempotent = true}, done);
    } else {
      c.client->async_call(c.rpc(), request, reply, {.idempotent = true}, done);
    }
  }
  std::unique_lock lock(mutex);
  ended.wait(lock, [&] { return running == 0; });
  EXPECT_EQ(failed, 0);
  return latencies;
}

std::chrono::steady_clock::duration p999(std::vector<std::chrono::steady_clock::duration> v) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(static_cast<double>(v.size() - 1) * 0.999)];
}

TEST(GrpcHedgeTail, AHedgeCutsP999OfOnePercentStallsTenfoldForFewerThanFivePercentMoreAttempts) {
  constexpr int k_calls = 2000;
  scripted_service service([](int call, grpc::ServerContext* ctx) {
    if (call % 100 == 0) stall(ctx, 1000ms);  // 1 % of the calls
    return grpc::Status::OK;
  });
  test_server server(&service);
  hedging_client plain(server.target(), hedging(2, 20ms));
  std::vector<std::chrono::steady_clock::duration> plain_latencies =
      run_load(plain, false, k_calls, 32);
  const auto unhedged = p999(plain_latencies);
  const int plain_calls = service.calls();
  // The delay as a user would set it, above the healthy calls' latency: 20 ms, or twice the
  // unhedged p95 on a machine slow enough (a sanitizer build under load) that 20 ms would hedge
  // healthy calls too. At most 60 ms, so that a hedged p99.9 can still be 10x below 1 s.
  std::sort(plain_latencies.begin(), plain_latencies.end());
  const auto healthy = plain_latencies[plain_latencies.size() * 95 / 100];
  const auto delay = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(healthy * 2),
                                std::chrono::milliseconds(20), std::chrono::milliseconds(60));
  hedging_client hedger(server.target(), hedging(2, delay));
  const auto hedged = p999(run_load(hedger, true, k_calls, 32));
  const int hedged_attempts = service.calls() - plain_calls;
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf(
      "p99.9: unhedged %.1f ms, hedged %.1f ms (delay %lld ms); attempts: %d for %d calls\n",
      ms(unhedged), ms(hedged), static_cast<long long>(delay.count()), hedged_attempts, k_calls);
  EXPECT_GE(ms(unhedged), 900.0);
  EXPECT_LE(ms(hedged) * 10, ms(unhedged))
      << "p99.9 hedged " << ms(hedged) << " ms, unhedged " << ms(unhedged) << " ms";
  EXPECT_LE(hedged_attempts, k_calls * 105 / 100) << hedged_attempts << " attempts";
}

}  // namespace
