// SPDX-License-Identifier: Apache-2.0
// stormguard::metrics::instrument_grpc against a real in-process gRPC server on 127.0.0.1:0: the
// gRPC client's attempts, retries, calls by reason, budget denials and hedges, recorded by method
// (the sync, async and hedged calls), and the client's own hooks (on_attempt, on_end) that feed
// them.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/grpc/client.hpp"
#include "stormguard/metrics/grpc.hpp"
#include "stormguard/metrics/retry_metrics.hpp"
#include "support/grpc_lab_service.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::end_reason;
using stormguard::lab::v1::EchoReply;
using stormguard::lab::v1::EchoRequest;
using stormguard::lab::v1::Lab;
using stormguard_tests::grpc_lab::first_copy;
using stormguard_tests::grpc_lab::scripted_service;
using stormguard_tests::grpc_lab::stall;
using stormguard_tests::grpc_lab::test_server;
namespace sgrpc = stormguard::grpc;

constexpr std::string_view k_get = "/stormguard.lab.v1.Lab/Echo";
constexpr std::string_view k_pay = "/stormguard.lab.v1.Lab/Pay";

// The value of the sample `series` exactly as serialised, or 0 when absent.
double sample(prometheus::Registry& registry, const std::string& series) {
  std::istringstream lines(prometheus::TextSerializer().Serialize(registry.Collect()));
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return 0;
}

std::string attempts(std::string_view method, const std::string& outcome) {
  return "stormguard_attempts_total{method=\"" + std::string(method) + "\",outcome=\"" + outcome +
         "\"}";
}
std::string calls(std::string_view method, const std::string& reason) {
  return "stormguard_calls_total{method=\"" + std::string(method) + "\",reason=\"" + reason + "\"}";
}
std::string with_method(const std::string& name, std::string_view method) {
  return name + "{method=\"" + std::string(method) + "\"}";
}

struct instrumented {
  prometheus::Registry registry;
  stormguard::metrics::retry_metrics metrics{registry, {.label = "method"}};
  std::unique_ptr<sgrpc::client> client;
  std::unique_ptr<Lab::Stub> stub;

  instrumented(const std::string& target, sgrpc::client_options options) {
    options.retry.backoff.base = 1ms;
    options.retry.backoff.cap = 1ms;
    stormguard::metrics::instrument_grpc(metrics, options, {k_get, k_pay});
    client = std::make_unique<sgrpc::client>(target, grpc::InsecureChannelCredentials(),
                                             std::move(options));
    stub = Lab::NewStub(client->channel());
  }
  sgrpc::result sync(std::string_view method) {
    EchoRequest request;
    EchoReply reply;
    return client->call([this](grpc::ClientContext& ctx, const EchoRequest& req,
                               EchoReply* resp) { return stub->Echo(&ctx, req, resp); },
                        request, &reply, {.idempotent = true, .method = method});
  }
  auto async_rpc() {
    return [this](grpc::ClientContext* ctx, const EchoRequest* req, EchoReply* resp,
                  std::function<void(grpc::Status)> done) {
      stub->async()->Echo(ctx, req, resp, std::move(done));
    };
  }
  sgrpc::result async(std::string_view method) {
    EchoRequest request;
    EchoReply reply;
    std::promise<sgrpc::result> ended;
    auto answer = ended.get_future();
    client->async_call(async_rpc(), request, &reply, {.idempotent = true, .method = method},
                       [&ended](sgrpc::result r) { ended.set_value(std::move(r)); });
    return answer.get();
  }
  sgrpc::result hedged(std::string_view method) {
    EchoRequest request;
    EchoReply reply;
    return client->hedged_call(async_rpc(), request, &reply,
                               {.idempotent = true, .method = method});
  }
  double at(const std::string& series) { return sample(registry, series); }
};

sgrpc::client_options without_budget() {
  sgrpc::client_options o;
  o.budget = stormguard::no_budget{};
  return o;
}

TEST(GrpcMetrics, AttemptsRetriesAndCallsAreCountedByMethodSyncAndAsync) {
  scripted_service service([](int call, grpc::ServerContext*) {
    return call % 2 == 1 ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "again") : grpc::Status::OK;
  });
  test_server server(&service);
  instrumented m(server.target(), without_budget());
  EXPECT_TRUE(m.sync(k_get).ok());   // calls 1-2: a failure, a retry that succeeds
  EXPECT_TRUE(m.async(k_pay).ok());  // calls 3-4: the same, asynchronously
  EXPECT_TRUE(m.sync(k_get).ok());   // calls 5-6
  EXPECT_EQ(m.at(attempts(k_get, "failure")), 2);
  EXPECT_EQ(m.at(attempts(k_get, "success")), 2);
  EXPECT_EQ(m.at(with_method("stormguard_retries_total", k_get)), 2);
  EXPECT_EQ(m.at(calls(k_get, "success")), 2);
  EXPECT_EQ(m.at(attempts(k_pay, "failure")), 1);
  EXPECT_EQ(m.at(attempts(k_pay, "success")), 1);
  EXPECT_EQ(m.at(with_method("stormguard_retries_total", k_pay)), 1);
  EXPECT_EQ(m.at(calls(k_pay, "success")), 1);
}

TEST(GrpcMetrics, AMethodNotGivenIsCountedAsOther) {
  scripted_service service([](int, grpc::ServerContext*) { return grpc::Status::OK; });
  test_server server(&service);
  instrumented m(server.target(), without_budget());
  EXPECT_TRUE(m.sync("/some.Unlisted/Method").ok());
  EXPECT_TRUE(m.async("").ok());
  EXPECT_EQ(m.at(calls("other", "success")), 2);
  EXPECT_EQ(m.at(calls(k_get, "success")), 0);
}

TEST(GrpcMetrics, GiveUpsAndBudgetDenialsAreCountedByReason) {
  scripted_service service([](int call, grpc::ServerContext*) {
    return call == 1 ? grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad")
                     : grpc::Status(grpc::StatusCode::UNAVAILABLE, "again");
  });
  test_server server(&service);
  sgrpc::client_options options;
  options.budget = stormguard::ratio_budget_options{.ratio = 0.0, .min_retries_per_second = 0};
  instrumented m(server.target(), options);
  EXPECT_EQ(m.sync(k_get).reason, end_reason::not_retryable);
  EXPECT_EQ(m.async(k_get).reason, end_reason::budget_exhausted);
  EXPECT_EQ(m.at(calls(k_get, "not_retryable")), 1);
  EXPECT_EQ(m.at(calls(k_get, "budget_exhausted")), 1);
  EXPECT_EQ(m.at(attempts(k_get, "not_retryable")), 1);
  EXPECT_EQ(m.at("stormguard_budget_denials_total{budget=\"ratio\",method=\"" + std::string(k_get) +
                 "\"}"),
            1);
}

TEST(GrpcMetrics, HedgedCallsCountTheirCopies) {
  scripted_service service([](int, grpc::ServerContext* ctx) {
    if (first_copy(ctx)) stall(ctx, 5s);
    return grpc::Status::OK;
  });
  test_server server(&service);
  sgrpc::client_options options = without_budget();
  options.hedging.policy = {.max_attempts = 2, .delay = 20ms};
  instrumented m(server.target(), options);
  const auto r = m.hedged(k_get);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.hedges.winner, 2);
  EXPECT_EQ(m.at(calls(k_get, "success")), 1);
  EXPECT_EQ(m.at(with_method("stormguard_hedges_sent_total", k_get)), 1);
  EXPECT_EQ(m.at(with_method("stormguard_hedges_won_total", k_get)), 1);
  EXPECT_EQ(m.at(with_method("stormguard_hedges_cancelled_total", k_get)), 1);
}

TEST(GrpcMetrics, TheCallersOwnHooksStillRunAndAThrowingOneChangesNothingAsync) {
  scripted_service service([](int call, grpc::ServerContext*) {
    return call == 1 ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "again") : grpc::Status::OK;
  });
  test_server server(&service);
  sgrpc::client_options options = without_budget();
  std::vector<int> seen;
  int ends = 0;
  options.on_attempt = [&seen](std::string_view, const stormguard::attempt_event& e) {
    seen.push_back(e.attempt);
    throw std::runtime_error("a broken diagnostic");
  };
  options.on_end = [&ends](std::string_view, const sgrpc::result&) {
    ++ends;
    throw std::runtime_error("a broken diagnostic");
  };
  instrumented m(server.target(), options);
  const auto r = m.async(k_get);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.attempts, 2);  // the retry happened although the hook threw
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  EXPECT_EQ(ends, 1);
  EXPECT_EQ(m.at(calls(k_get, "success")), 1);
}

TEST(GrpcMetrics, AnEmptyMethodNameIsRefused) {
  prometheus::Registry registry;
  stormguard::metrics::retry_metrics metrics(registry);
  sgrpc::client_options options;
  EXPECT_THROW(stormguard::metrics::instrument_grpc(metrics, options, {k_get, ""}),
               std::invalid_argument);
}

}  // namespace
