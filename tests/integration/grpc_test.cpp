// SPDX-License-Identifier: Apache-2.0
// stormguard::grpc against a real in-process gRPC server on 127.0.0.1:0 (the service of
// proto/stormguard/lab/v1/lab.proto, its behaviour scripted per test): the retrying client's
// rules (fresh context per attempt, attempt label, pushback, budget, cancellation, idempotency,
// bad input) and admission at the handler (sync and callback services). The client's backoff runs
// on a manual clock (no real sleeps); real time only where gRPC itself needs it (deadlines, a
// blocked handler), kept short.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
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
#include "stormguard/grpc/admission.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/grpc/policy.hpp"
#include "stormguard/lab/v1/lab.grpc.pb.h"
#include "stormguard/testing/manual_clock.hpp"
#include "support/grpc_lab_service.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::end_reason;
using stormguard::lab::v1::EchoReply;
using stormguard::lab::v1::EchoRequest;
using stormguard::lab::v1::Lab;
namespace sgrpc = stormguard::grpc;

// The value of the first metadata entry `key` of a server call, or nullopt.
std::optional<std::string> metadata(const grpc::ServerContextBase& ctx, const std::string& key) {
  const auto& md = ctx.client_metadata();
  const auto it = md.find(key);
  if (it == md.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

// One call as the server saw it.
struct seen_call {
  std::optional<std::string> previous_attempts;
};

// A synchronous Lab service whose Echo runs the test's handler, and records each call.
class scripted_service final : public Lab::Service {
 public:
  using handler = std::function<grpc::Status(int call, grpc::ServerContext*, EchoReply*)>;
  explicit scripted_service(handler h) : handler_(std::move(h)) {}

  grpc::Status Echo(grpc::ServerContext* ctx, const EchoRequest* req, EchoReply* reply) override {
    int n = 0;
    {
      const std::lock_guard lock(mutex_);
      calls_.push_back({metadata(*ctx, "grpc-previous-rpc-attempts")});
      n = static_cast<int>(calls_.size());
    }
    reply->set_text(req->text());
    return handler_(n, ctx, reply);
  }
  std::vector<seen_call> calls() const {
    const std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  handler handler_;
  mutable std::mutex mutex_;
  std::vector<seen_call> calls_;
};

using stormguard_tests::grpc_lab::test_server;

// A client on a manual clock, over a channel made by make_channel; 3 retries, no budget unless
// the test gives one.
struct client_fixture {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator random{42};
  std::unique_ptr<sgrpc::client> client;
  std::unique_ptr<Lab::Stub> stub;

  explicit client_fixture(const std::string& target, sgrpc::client_options options = no_budget()) {
    auto channel = sgrpc::make_channel(target, grpc::InsecureChannelCredentials());
    client = std::make_unique<sgrpc::client>(channel, sgrpc::c_core_retries::off,
                                             std::move(options), clock, random);
    stub = Lab::NewStub(client->channel());
  }
  static sgrpc::client_options no_budget() {
    sgrpc::client_options o;
    o.budget = stormguard::no_budget{};
    return o;
  }
  sgrpc::result echo(EchoReply* reply, const sgrpc::call_options& call = {}) {
    EchoRequest request;
    request.set_text("hello");
    return client->call([this](grpc::ClientContext& ctx, const EchoRequest& req,
                               EchoReply* resp) { return stub->Echo(&ctx, req, resp); },
                        request, reply, call);
  }
};

grpc::Status unavailable() { return {grpc::StatusCode::UNAVAILABLE, "try again"}; }

TEST(GrpcClient, RetriesUnavailableOnAnIdempotentMethodThenSucceeds) {
  scripted_service service([](int call, grpc::ServerContext*, EchoReply*) {
    return call < 3 ? unavailable() : grpc::Status::OK;
  });
  test_server server(&service);
  stormguard::testing::manual_clock clock;  // backoff sleeps take no real time
  stormguard::random_generator random{42};
  //! [grpc_client]
  sgrpc::client_options options;  // 3 retries, full jitter 100 ms .. 3 s, a ratio budget
  sgrpc::client client(sgrpc::make_channel(server.target(), grpc::InsecureChannelCredentials()),
                       sgrpc::c_core_retries::off, options, clock, random);
  const auto stub = Lab::NewStub(client.channel());
  EchoRequest request;
  request.set_text("hello");
  EchoReply reply;
  const sgrpc::result r = client.call(
      [&](grpc::ClientContext& ctx, const EchoRequest& req, EchoReply* out) {
        return stub->Echo(&ctx, req, out);  // one attempt, on a fresh context
      },
      request, &reply, {.idempotent = true});
  // UNAVAILABLE twice, then OK: three attempts, the answer in `reply`.
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.attempts, 3);
  //! [grpc_client]
  EXPECT_EQ(reply.text(), "hello");
  EXPECT_EQ(service.calls().size(), 3U);
  EXPECT_EQ(clock.sleeps().size(), 2U);  // two backoff sleeps, on the manual clock
}

TEST(GrpcClient, EveryRetryCarriesTheAttemptLabelToTheServer) {
  scripted_service service([](int call, grpc::ServerContext*, EchoReply*) {
    return call < 3 ? unavailable() : grpc::Status::OK;
  });
  test_server server(&service);
  client_fixture c(server.target());
  EchoReply reply;
  ASSERT_TRUE(c.echo(&reply, {.idempotent = true}).ok());
  const auto calls = service.calls();
  ASSERT_EQ(calls.size(), 3U);
  EXPECT_EQ(calls[0].previous_attempts, std::nullopt);  // the first attempt carries none
  EXPECT_EQ(calls[1].previous_attempts, "1");           // attempt 2
  EXPECT_EQ(calls[2].previous_attempts, "2");           // attempt 3
}

TEST(GrpcClient, ANonIdempotentMethodIsNotRetriedAfterTheServerRanIt) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) { return unavailable(); });
  test_server server(&service);
  client_fixture c(server.target());
  EchoReply reply;
  const auto r = c.echo(&reply);  // idempotent = false
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(service.calls().size(), 1U);
}

TEST(GrpcClient, CodesOutsideTheRetryableSetAreNotRetried) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "bug");
  });
  test_server server(&service);
  client_fixture c(server.target());
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true});
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(r.attempts, 1);
}

TEST(GrpcClient, PushbackMinusOneEndsTheCallAsServerRefused) {
  scripted_service service([](int, grpc::ServerContext* ctx, EchoReply*) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "-1");
    return unavailable();
  });
  test_server server(&service);
  client_fixture c(server.target());
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true});
  EXPECT_EQ(r.reason, end_reason::server_refused);
  EXPECT_EQ(r.attempts, 1);
  ASSERT_TRUE(r.pushback.has_value());
  EXPECT_TRUE(r.pushback->do_not_retry);
  EXPECT_TRUE(c.clock.sleeps().empty());
}

TEST(GrpcClient, AMalformedPushbackIsReadAsDoNotRetry) {
  scripted_service service([](int, grpc::ServerContext* ctx, EchoReply*) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "soon");
    return unavailable();
  });
  test_server server(&service);
  client_fixture c(server.target());
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true});
  EXPECT_EQ(r.reason, end_reason::server_refused);
  EXPECT_EQ(r.attempts, 1);
}

TEST(GrpcClient, Pushback200msDelaysTheRetryByAtLeast200ms) {
  scripted_service service([](int call, grpc::ServerContext* ctx, EchoReply*) {
    if (call > 1) return grpc::Status::OK;
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "200");
    return unavailable();
  });
  test_server server(&service);
  client_fixture c(server.target());
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true});
  ASSERT_TRUE(r.ok()) << r.status.error_message();
  const auto sleeps = c.clock.sleeps();
  ASSERT_EQ(sleeps.size(), 1U);
  EXPECT_GE(sleeps[0], 200ms);  // at least the pushback, spread upward by at most half of it
  EXPECT_LE(sleeps[0], 300ms);
}

TEST(GrpcClient, APositivePushbackIsRetriedEvenForANonIdempotentMethod) {
  // A server that refused the call at its door and says when to come back never ran it.
  scripted_service service([](int call, grpc::ServerContext* ctx, EchoReply*) {
    if (call > 1) return grpc::Status::OK;
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "50");
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "busy");
  });
  test_server server(&service);
  client_fixture c(server.target());
  EchoReply reply;
  const auto r = c.echo(&reply);
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.attempts, 2);
}

TEST(GrpcClient, ARatioBudgetRefusesTheRetries) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) { return unavailable(); });
  test_server server(&service);
  sgrpc::client_options options;
  options.budget = stormguard::ratio_budget_options{.ratio = 0.0, .min_retries_per_second = 0};
  client_fixture c(server.target(), options);
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true});
  EXPECT_EQ(r.reason, end_reason::budget_exhausted);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(service.calls().size(), 1U);
}

TEST(GrpcClient, ASharedBudgetIsSpentByEveryClientThatHoldsIt) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) { return unavailable(); });
  test_server server(&service);
  sgrpc::client_options options;
  // One retry a second, over a 10 s window, for both clients together.
  options.shared_budget = stormguard::make_budget(
      stormguard::ratio_budget_options{.ratio = 0.0, .min_retries_per_second = 1});
  options.retry.max_retries = 50;
  client_fixture a(server.target(), options);
  client_fixture b(server.target(), options);
  EchoReply reply;
  const auto ra = a.echo(&reply, {.idempotent = true});
  const auto rb = b.echo(&reply, {.idempotent = true});
  EXPECT_EQ(ra.reason, end_reason::budget_exhausted);
  EXPECT_EQ(rb.reason, end_reason::budget_exhausted);
  // The floor is 1/s over 10 s: 10 retries in all, shared.
  EXPECT_EQ(ra.attempts - 1 + rb.attempts - 1, 10 - 0) << ra.attempts << " " << rb.attempts;
}

TEST(GrpcClient, CancellationEndsTheAttemptInFlight) {
  std::atomic<bool> started{false};
  std::atomic<bool> saw_cancel{false};
  scripted_service service([&](int, grpc::ServerContext* ctx, EchoReply*) {
    started = true;
    for (int i = 0; i < 500 && !ctx->IsCancelled(); ++i) std::this_thread::sleep_for(10ms);
    saw_cancel = ctx->IsCancelled();
    return grpc::Status::OK;
  });
  test_server server(&service);
  client_fixture c(server.target());
  std::stop_source stop;
  std::thread stopper([&] {
    while (!started) std::this_thread::sleep_for(1ms);
    stop.request_stop();
  });
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = c.echo(&reply, {.idempotent = true, .stop = stop.get_token()});
  const auto took = std::chrono::steady_clock::now() - begin;
  stopper.join();
  EXPECT_EQ(r.reason, end_reason::cancelled);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_LT(took, 2s);  // the handler would have held it for 5 s
  for (int i = 0; i < 200 && !saw_cancel; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(saw_cancel);  // the server saw the call cancelled
}

TEST(GrpcClient, AStopRequestedBeforeTheCallSendsNothing) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) { return grpc::Status::OK; });
  test_server server(&service);
  client_fixture c(server.target());
  std::stop_source stop;
  stop.request_stop();
  EchoReply reply;
  const auto r = c.echo(&reply, {.stop = stop.get_token()});
  EXPECT_EQ(r.reason, end_reason::cancelled);
  EXPECT_EQ(r.attempts, 0);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(service.calls().empty());
}

TEST(GrpcClient, ADeadlineInThePastSendsNothing) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) { return grpc::Status::OK; });
  test_server server(&service);
  client_fixture c(server.target());
  c.clock.advance(1s);
  EchoReply reply;
  const auto r = c.echo(&reply, {.deadline = c.clock.now() - 1ms});
  EXPECT_EQ(r.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(r.attempts, 0);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(service.calls().empty());
}

TEST(GrpcClient, TheCallsDeadlineBoundsTheAttemptAndEndsTheCall) {
  scripted_service service([](int, grpc::ServerContext* ctx, EchoReply*) {
    for (int i = 0; i < 200 && !ctx->IsCancelled(); ++i) std::this_thread::sleep_for(5ms);
    return grpc::Status::OK;
  });
  test_server server(&service);
  client_fixture c(server.target());
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true, .deadline = c.clock.now() + 100ms});
  EXPECT_EQ(r.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST(GrpcClient, AnAttemptTimeoutIsRetriedForAnIdempotentMethod) {
  scripted_service service([](int call, grpc::ServerContext* ctx, EchoReply*) {
    if (call == 1) {
      for (int i = 0; i < 200 && !ctx->IsCancelled(); ++i) std::this_thread::sleep_for(5ms);
    }
    return grpc::Status::OK;
  });
  test_server server(&service);
  sgrpc::client_options options = client_fixture::no_budget();
  options.attempt_timeout = 100ms;
  client_fixture c(server.target(), options);
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true});
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.attempts, 2);
}

TEST(GrpcClient, AStatusCodeOutsideGrpcsListIsReadAsUnknown) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) {
    // 20: outside gRPC's 0..16, inside what its StatusCode enum can hold (0..31; a larger number
    // would be undefined behaviour in gRPC's own code, which UBSan reports).
    return grpc::Status(static_cast<grpc::StatusCode>(20), "from the future");
  });
  test_server server(&service);
  sgrpc::client_options options = client_fixture::no_budget();
  options.retryable = {grpc::StatusCode::UNAVAILABLE};
  client_fixture c(server.target(), options);
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true});
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_FALSE(r.ok());
  // gRPC 1.51 passes the number through: the result keeps it as received.
  EXPECT_EQ(static_cast<int>(r.status.error_code()), 20);
}

TEST(GrpcClient, AServerThatIsGoneIsRetriedEvenForANonIdempotentMethodThenGivesUp) {
  // A port nobody listens on: every attempt fails UNAVAILABLE at the pick, before it is sent.
  std::string target;
  {
    scripted_service service(
        [](int, grpc::ServerContext*, EchoReply*) { return grpc::Status::OK; });
    test_server gone(&service);
    target = gone.target();
  }
  client_fixture c(target);
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = c.echo(&reply);  // not idempotent: retried only because nothing was sent
  EXPECT_EQ(r.reason, end_reason::attempts_exhausted);
  EXPECT_EQ(r.attempts, 4);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);
}

TEST(GrpcClient, BadOptionsAndChannelsAreRefusedAtConstruction) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator random{1};
  const auto channel = sgrpc::make_channel("127.0.0.1:1", grpc::InsecureChannelCredentials());
  EXPECT_THROW(sgrpc::client(nullptr, sgrpc::c_core_retries::off, {}, clock, random),
               std::invalid_argument);
  EXPECT_THROW(sgrpc::client(channel, sgrpc::c_core_retries::on, {}, clock, random),
               std::invalid_argument);
  sgrpc::client_options zero;
  zero.attempt_timeout = 0ms;
  EXPECT_THROW(sgrpc::client(channel, sgrpc::c_core_retries::off, zero, clock, random),
               std::invalid_argument);
  sgrpc::client_options bad_budget;
  bad_budget.budget = stormguard::ratio_budget_options{.ratio = -1.0};
  EXPECT_THROW(sgrpc::client(channel, sgrpc::c_core_retries::off, bad_budget, clock, random),
               std::invalid_argument);
  EXPECT_THROW(sgrpc::status_codes({grpc::StatusCode::OK}), std::invalid_argument);
  EXPECT_THROW(sgrpc::status_codes({static_cast<grpc::StatusCode>(17)}), std::invalid_argument);
}

TEST(GrpcClassify, TheRulesInOrder) {
  using stormguard::classification;
  const sgrpc::status_codes retryable{grpc::StatusCode::UNAVAILABLE};
  const auto failure = [](grpc::StatusCode code) {
    return sgrpc::attempt_failure{grpc::Status(code, "")};
  };
  auto f = failure(grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(sgrpc::classify_attempt(f, retryable, true), classification::retry());
  EXPECT_EQ(sgrpc::classify_attempt(f, retryable, false), classification::stop());
  f.never_sent = true;
  EXPECT_EQ(sgrpc::classify_attempt(f, retryable, false), classification::retry());
  f.pushback = stormguard::pushback{true, {}};
  EXPECT_EQ(sgrpc::classify_attempt(f, retryable, true), classification::stop());
  f.pushback = stormguard::pushback{false, 200ms};
  EXPECT_EQ(sgrpc::classify_attempt(f, retryable, false), classification::retry_after(200ms));
  auto t = failure(grpc::StatusCode::DEADLINE_EXCEEDED);
  t.attempt_timed_out = true;
  EXPECT_EQ(sgrpc::classify_attempt(t, retryable, true), classification::retry().as_timeout());
  EXPECT_EQ(sgrpc::classify_attempt(t, retryable, false), classification::stop());
  const auto odd = failure(static_cast<grpc::StatusCode>(31));
  EXPECT_EQ(sgrpc::classify_attempt(odd, retryable, true), classification::stop());
  EXPECT_EQ(sgrpc::classify_attempt(odd, {grpc::StatusCode::UNKNOWN}, true),
            classification::retry());
}

// ---------------------------------------------------------------------------------------------
// The asynchronous call (gRPC's callback API); its waits are real time, so the backoff is short
// ---------------------------------------------------------------------------------------------

sgrpc::client_options short_backoff(stormguard::duration base = 1ms) {
  sgrpc::client_options o = client_fixture::no_budget();
  o.retry.backoff.base = base;
  o.retry.backoff.cap = base;
  o.retry.backoff.jitter = stormguard::jitter::none;
  return o;
}

// Starts c's async call and waits (at most 10 s) for its result.
sgrpc::result echo_async(client_fixture& c, EchoReply* reply, sgrpc::call_options call = {}) {
  EchoRequest request;
  request.set_text("hello");
  std::promise<sgrpc::result> ended;
  auto future = ended.get_future();
  c.client->async_call(
      [&c](grpc::ClientContext* ctx, const EchoRequest* req, EchoReply* resp,
           std::function<void(grpc::Status)> done) {
        c.stub->async()->Echo(ctx, req, resp, std::move(done));
      },
      request, reply, std::move(call),
      [&ended](sgrpc::result r) { ended.set_value(std::move(r)); });
  if (future.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "the async call did not end";
    std::abort();  // the callbacks still reference this frame
  }
  return future.get();
}

TEST(GrpcAsyncClient, RetriesUnavailableThenSucceedsWithTheAttemptLabel) {
  scripted_service service([](int call, grpc::ServerContext*, EchoReply*) {
    return call < 3 ? unavailable() : grpc::Status::OK;
  });
  test_server server(&service);
  client_fixture c(server.target(), short_backoff());
  EchoReply reply;
  const auto r = echo_async(c, &reply, {.idempotent = true});
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(r.slept, 2ms);
  EXPECT_EQ(reply.text(), "hello");
  const auto calls = service.calls();
  ASSERT_EQ(calls.size(), 3U);
  EXPECT_EQ(calls[0].previous_attempts, std::nullopt);
  EXPECT_EQ(calls[1].previous_attempts, "1");
  EXPECT_EQ(calls[2].previous_attempts, "2");
}

TEST(GrpcAsyncClient, FollowsTheSameRules) {
  scripted_service service([](int call, grpc::ServerContext* ctx, EchoReply*) {
    if (call == 2) ctx->AddTrailingMetadata("grpc-retry-pushback-ms", "-1");
    return unavailable();
  });
  test_server server(&service);
  client_fixture c(server.target(), short_backoff());
  EchoReply reply;
  const auto not_idempotent = echo_async(c, &reply);  // call 1: the server ran it
  EXPECT_EQ(not_idempotent.reason, end_reason::not_retryable);
  EXPECT_EQ(not_idempotent.attempts, 1);
  const auto refused = echo_async(c, &reply, {.idempotent = true});  // call 2: pushback -1
  EXPECT_EQ(refused.reason, end_reason::server_refused);
  EXPECT_EQ(refused.attempts, 1);
  c.clock.advance(1s);
  const auto late = echo_async(c, &reply, {.deadline = c.clock.now() - 1ns});
  EXPECT_EQ(late.reason, end_reason::deadline_exceeded);
  EXPECT_EQ(late.attempts, 0);
  EXPECT_EQ(service.calls().size(), 2U);
}

TEST(GrpcAsyncClient, AnExceptionOnALaterAttemptEndsTheCallInsteadOfLosingIt) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) { return unavailable(); });
  test_server server(&service);
  client_fixture c(server.target(), short_backoff());
  EchoRequest request;
  EchoReply reply;
  std::promise<sgrpc::result> ended;
  int attempts = 0;
  c.client->async_call(
      [&](grpc::ClientContext* ctx, const EchoRequest* req, EchoReply* resp,
          std::function<void(grpc::Status)> done) {
        if (++attempts == 2) throw std::runtime_error("no stub today");
        c.stub->async()->Echo(ctx, req, resp, std::move(done));
      },
      request, &reply, {.idempotent = true},
      [&ended](sgrpc::result r) { ended.set_value(std::move(r)); });
  auto future = ended.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  const auto r = future.get();
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNKNOWN);
}

TEST(GrpcAsyncClient, ARatioBudgetRefusesTheRetries) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) { return unavailable(); });
  test_server server(&service);
  sgrpc::client_options options = short_backoff();
  options.budget = stormguard::ratio_budget_options{.ratio = 0.0, .min_retries_per_second = 0};
  client_fixture c(server.target(), options);
  EchoReply reply;
  const auto r = echo_async(c, &reply, {.idempotent = true});
  EXPECT_EQ(r.reason, end_reason::budget_exhausted);
  EXPECT_EQ(r.attempts, 1);
}

TEST(GrpcAsyncClient, CancellationEndsTheAttemptInFlight) {
  std::atomic<bool> started{false};
  scripted_service service([&](int, grpc::ServerContext* ctx, EchoReply*) {
    started = true;
    for (int i = 0; i < 500 && !ctx->IsCancelled(); ++i) std::this_thread::sleep_for(10ms);
    return grpc::Status::OK;
  });
  test_server server(&service);
  client_fixture c(server.target(), short_backoff());
  std::stop_source stop;
  std::thread stopper([&] {
    while (!started) std::this_thread::sleep_for(1ms);
    stop.request_stop();
  });
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = echo_async(c, &reply, {.idempotent = true, .stop = stop.get_token()});
  stopper.join();
  EXPECT_EQ(r.reason, end_reason::cancelled);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2s);
}

TEST(GrpcAsyncClient, CancellationEndsTheBackoffWait) {
  std::atomic<int> calls{0};
  scripted_service service([&](int, grpc::ServerContext*, EchoReply*) {
    ++calls;
    return unavailable();
  });
  test_server server(&service);
  client_fixture c(server.target(), short_backoff(3s));  // a wait of exactly 3 s
  std::stop_source stop;
  std::thread stopper([&] {
    while (calls.load() == 0) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);  // the answer is back, the wait has begun
    stop.request_stop();
  });
  EchoReply reply;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = echo_async(c, &reply, {.idempotent = true, .stop = stop.get_token()});
  stopper.join();
  EXPECT_EQ(r.reason, end_reason::cancelled);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2s);
  EXPECT_EQ(calls.load(), 1);
}

// ---------------------------------------------------------------------------------------------
// Admission at the handler
// ---------------------------------------------------------------------------------------------

// A synchronous service that admits every call first.
class admitting_service final : public Lab::Service {
 public:
  explicit admitting_service(
      sgrpc::server_admission& admission, std::function<void()> work = [] {})
      : admission_(&admission), work_(std::move(work)) {}
  grpc::Status Echo(grpc::ServerContext* ctx, const EchoRequest* req, EchoReply* reply) override {
    //! [grpc_admit]
    auto ticket = sgrpc::admit(*ctx, *admission_);  // the handler's first line
    if (!ticket) return ticket.refusal();  // UNAVAILABLE or RESOURCE_EXHAUSTED, pushback trailer
    work_();                               // the ticket holds a concurrency slot until it ends
    reply->set_text(req->text());
    return grpc::Status::OK;
    //! [grpc_admit]
  }

 private:
  sgrpc::server_admission* admission_;
  std::function<void()> work_;
};

// One raw call with the given metadata, on a channel with C-core's retries off (so that the
// label reaches the server); returns the status and the pushback trailer.
std::pair<grpc::Status, std::optional<std::string>> raw_call(
    const std::string& target, const std::vector<std::pair<std::string, std::string>>& md,
    std::chrono::milliseconds timeout = 5000ms) {
  const auto stub = Lab::NewStub(sgrpc::make_channel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  for (const auto& [k, v] : md) ctx.AddMetadata(k, v);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  EchoRequest req;
  EchoReply reply;
  const grpc::Status status = stub->Echo(&ctx, req, &reply);
  const auto& trailers = ctx.GetServerTrailingMetadata();
  const auto it = trailers.find("grpc-retry-pushback-ms");
  std::optional<std::string> pushback;
  if (it != trailers.end()) pushback = std::string(it->second.data(), it->second.size());
  return {status, pushback};
}

// ---------------------------------------------------------------------------------------------
// A policy's gRPC codes (retryable_grpc_codes; a service config's retryableStatusCodes) decide
// what the client retries, through the adapter (stormguard/grpc/policy.hpp)
// ---------------------------------------------------------------------------------------------

stormguard::config::policy policy_of(
    const std::string& text,
    stormguard::config::policy_format format = stormguard::config::policy_format::stormguard) {
  auto policies = stormguard::config::parse_policies(text, format);
  if (!policies) throw std::runtime_error(policies.error().message);
  return policies->front();
}

// A server that answers `code` on the first call of each pair and OK on the second.
scripted_service fails_once_with(grpc::StatusCode code) {
  return scripted_service([code](int call, grpc::ServerContext*, EchoReply*) {
    return call % 2 == 1 ? grpc::Status(code, "scripted") : grpc::Status::OK;
  });
}

TEST(GrpcPolicy, ACodeThePolicyNamesIsRetriedAndOneItDoesNotNameIsNot) {
  const auto p = policy_of(R"({"policies": [{"name": "orders", "retries": 2, "budget": "none",
      "retryable_grpc_codes": ["ABORTED", "RESOURCE_EXHAUSTED"]}]})");
  const sgrpc::client_options options = sgrpc::client_options_for(p);
  EXPECT_TRUE(options.retryable.contains(grpc::StatusCode::ABORTED));
  EXPECT_FALSE(options.retryable.contains(grpc::StatusCode::UNAVAILABLE));
  {
    auto service = fails_once_with(grpc::StatusCode::ABORTED);  // named: retried
    test_server server(&service);
    client_fixture c(server.target(), options);
    EchoReply reply;
    const auto r = c.echo(&reply, {.idempotent = true});
    EXPECT_TRUE(r.ok()) << r.status.error_message();
    EXPECT_EQ(r.attempts, 2);
    EXPECT_EQ(service.calls().size(), 2U);
  }
  {
    // UNAVAILABLE, the client's default, is not named by this policy: not retried.
    auto service = fails_once_with(grpc::StatusCode::UNAVAILABLE);
    test_server server(&service);
    client_fixture c(server.target(), options);
    EchoReply reply;
    const auto r = c.echo(&reply, {.idempotent = true});
    EXPECT_EQ(r.reason, end_reason::not_retryable);
    EXPECT_EQ(r.attempts, 1);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(service.calls().size(), 1U);
  }
}

TEST(GrpcPolicy, AServiceConfigsCodesReachTheClientAsWritten) {
  // The importer keeps RESOURCE_EXHAUSTED for the gRPC client (it has no HTTP status).
  const auto p = policy_of(R"({"methodConfig": [{"name": [{"service": "s"}],
      "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
                      "backoffMultiplier": 2, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]})",
                           stormguard::config::policy_format::grpc);
  auto options = sgrpc::client_options_for(p);
  options.budget = stormguard::no_budget{};
  auto service = fails_once_with(grpc::StatusCode::RESOURCE_EXHAUSTED);
  test_server server(&service);
  client_fixture c(server.target(), options);
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true});
  EXPECT_TRUE(r.ok()) << r.status.error_message();
  EXPECT_EQ(r.attempts, 2);
  // The same over the callback API.
  const auto again = echo_async(c, &reply, {.idempotent = true});
  EXPECT_TRUE(again.ok()) << again.status.error_message();
  EXPECT_EQ(again.attempts, 2);
}

TEST(GrpcPolicy, APolicyThatNamesNoCodesRetriesTheClientsDefaultUnavailable) {
  const auto p = policy_of(R"({"policies": [{"name": "plain", "retries": 2, "budget": "none",
      "retryable_statuses": [500]}]})");
  const auto options = sgrpc::client_options_for(p);
  EXPECT_EQ(options.retryable, sgrpc::status_codes{grpc::StatusCode::UNAVAILABLE});
  EXPECT_EQ(options.retry.max_retries, 2);
  auto service = fails_once_with(grpc::StatusCode::UNAVAILABLE);
  test_server server(&service);
  client_fixture c(server.target(), options);
  EchoReply reply;
  EXPECT_EQ(c.echo(&reply, {.idempotent = true}).attempts, 2);
}

TEST(GrpcChannel, CCoresOwnRetriesStripTheAttemptLabelSoTheClientsChannelsTurnThemOff) {
  scripted_service service([](int, grpc::ServerContext*, EchoReply*) { return grpc::Status::OK; });
  test_server server(&service);
  const auto call_with_label = [&](const std::shared_ptr<grpc::Channel>& channel) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("grpc-previous-rpc-attempts", "1");
    EchoRequest req;
    EchoReply reply;
    return Lab::NewStub(channel)->Echo(&ctx, req, &reply);
  };
  // gRPC's default channel (C-core's retries on): the label does not reach the server.
  ASSERT_TRUE(
      call_with_label(grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()))
          .ok());
  // A channel of make_channel (grpc.enable_retries 0): it does.
  ASSERT_TRUE(
      call_with_label(sgrpc::make_channel(server.target(), grpc::InsecureChannelCredentials()))
          .ok());
  const auto calls = service.calls();
  ASSERT_EQ(calls.size(), 2U);
  EXPECT_EQ(calls[0].previous_attempts, std::nullopt);
  EXPECT_EQ(calls[1].previous_attempts, "1");
}

TEST(GrpcAdmission, ARetryOverTheServersBudgetIsRefusedWithPushbackMinusOne) {
  sgrpc::server_admission admission({.retry_budget = stormguard::ratio_budget_options{
                                         .ratio = 0.0, .min_retries_per_second = 0}});
  admitting_service service(admission);
  test_server server(&service);
  const auto [first, first_pushback] = raw_call(server.target(), {});
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(first_pushback, std::nullopt);
  const auto [retry, pushback] = raw_call(server.target(), {{"grpc-previous-rpc-attempts", "1"}});
  EXPECT_EQ(retry.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(pushback, "-1");
  const auto [envoy, envoy_pushback] = raw_call(server.target(), {{"x-envoy-attempt-count", "2"}});
  EXPECT_EQ(envoy.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(envoy_pushback, "-1");
  const auto [hostile, hostile_pushback] =
      raw_call(server.target(), {{"x-envoy-attempt-count", "-1"}});
  EXPECT_EQ(hostile.error_code(), grpc::StatusCode::UNAVAILABLE);  // malformed: a retry
  // gRPC 1.51 parses grpc-previous-rpc-attempts itself and drops a value that is not a number:
  // the handler never sees it, and the call reads as a first attempt (as if the label were
  // absent, which is all a label can ever win).
  const auto [dropped, dropped_pushback] =
      raw_call(server.target(), {{"grpc-previous-rpc-attempts", "-1"}});
  EXPECT_TRUE(dropped.ok()) << dropped.error_message();
  const auto counts = admission.counts();
  EXPECT_EQ(counts.admitted, 2);
  EXPECT_EQ(counts.retry_refused, 3);
  EXPECT_EQ(counts.malformed, 1);
}

TEST(GrpcAdmission, TheStormguardClientStopsOnTheRefusal) {
  sgrpc::server_admission admission({.retry_budget = stormguard::ratio_budget_options{
                                         .ratio = 0.0, .min_retries_per_second = 0}});
  std::atomic<int> calls{0};
  admitting_service service(admission, [&] { ++calls; });
  test_server server(&service);
  // The first attempt is admitted and served; a client whose first attempt failed would be
  // refused on its retry. Here: a retry is forced by a label the caller adds.
  client_fixture c(server.target());
  EchoReply reply;
  const auto r = c.echo(&reply, {.idempotent = true, .configure = [](grpc::ClientContext& ctx) {
                                   ctx.AddMetadata("x-envoy-attempt-count", "2");
                                 }});
  EXPECT_EQ(r.reason, end_reason::server_refused);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(calls.load(), 0);
}

TEST(GrpcAdmission, ACallWhoseDeadlineIsTooNearIsDropped) {
  sgrpc::server_admission admission({.drop_expired = 10s});
  admitting_service service(admission);
  test_server server(&service);
  const auto [near, pushback] = raw_call(server.target(), {}, 2000ms);
  EXPECT_EQ(near.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(pushback, "-1");
  const auto [far, far_pushback] = raw_call(server.target(), {}, 60000ms);
  EXPECT_TRUE(far.ok()) << far.error_message();
  EXPECT_EQ(admission.counts().expired, 1);
}

TEST(GrpcAdmission, OverTheConcurrencyLimitIsResourceExhaustedWithAPositivePushback) {
  sgrpc::server_admission admission(
      {.concurrency_limit =
           stormguard::admission::concurrency_limit_options{
               .min_concurrency = 1, .max_limit = 1, .initial_limit = 1},
       .seed = 7});
  std::mutex mutex;
  std::condition_variable cv;
  bool inside = false;
  bool go = false;
  admitting_service service(admission, [&] {
    std::unique_lock lock(mutex);
    inside = true;
    cv.notify_all();
    cv.wait_for(lock, 5s, [&] { return go; });
  });
  test_server server(&service);
  std::thread holder([&] { (void)raw_call(server.target(), {}); });
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return inside; }));
  }
  const auto [over, pushback] = raw_call(server.target(), {});
  {
    const std::lock_guard lock(mutex);
    go = true;
  }
  cv.notify_all();
  holder.join();
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_TRUE(pushback.has_value());
  const auto ms = std::stoll(*pushback);
  EXPECT_GE(ms, 1000);  // whole seconds in [1 s, 5 s] (the limit's Retry-After range)
  EXPECT_LE(ms, 5000);
  EXPECT_EQ(admission.counts().over_limit, 1);
  EXPECT_EQ(admission.counts().admitted, 1);
}

// A callback service that admits every call first; the ticket lives until Finish.
class admitting_callback_service final : public Lab::CallbackService {
 public:
  explicit admitting_callback_service(sgrpc::server_admission& admission)
      : admission_(&admission) {}
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx, const EchoRequest* req,
                                 EchoReply* reply) override {
    auto* reactor = ctx->DefaultReactor();
    auto ticket = sgrpc::admit(*ctx, *admission_);
    if (!ticket) {
      reactor->Finish(ticket.refusal());
      return reactor;
    }
    reply->set_text(req->text());
    ticket.release();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  sgrpc::server_admission* admission_;
};

TEST(GrpcAdmission, WorksInACallbackService) {
  sgrpc::server_admission admission({.retry_budget = stormguard::ratio_budget_options{
                                         .ratio = 0.0, .min_retries_per_second = 0}});
  admitting_callback_service service(admission);
  test_server server(&service);
  EXPECT_TRUE(raw_call(server.target(), {}).first.ok());
  const auto [retry, pushback] = raw_call(server.target(), {{"grpc-previous-rpc-attempts", "2"}});
  EXPECT_EQ(retry.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(pushback, "-1");
}

TEST(GrpcAdmission, BadOptionsAreRefused) {
  EXPECT_THROW(sgrpc::server_admission({.drop_expired = -1ms}), std::invalid_argument);
  EXPECT_THROW(sgrpc::server_admission({.drop_expired = 2h}), std::invalid_argument);
  EXPECT_THROW(
      sgrpc::server_admission({.retry_budget = stormguard::ratio_budget_options{.ratio = -1}}),
      std::invalid_argument);
}

}  // namespace
