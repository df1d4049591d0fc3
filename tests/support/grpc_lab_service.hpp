// SPDX-License-Identifier: Apache-2.0
// A real gRPC server for the tests of stormguard::grpc: the Lab service of
// proto/stormguard/lab/v1/lab.proto on 127.0.0.1:0 in the test process, each call's answer
// scripted by the test.
#ifndef STORMGUARD_TESTS_SUPPORT_GRPC_LAB_SERVICE_HPP
#define STORMGUARD_TESTS_SUPPORT_GRPC_LAB_SERVICE_HPP

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "stormguard/lab/v1/lab.grpc.pb.h"

namespace stormguard_tests::grpc_lab {

using namespace std::chrono_literals;
using stormguard::lab::v1::EchoReply;
using stormguard::lab::v1::EchoRequest;
using stormguard::lab::v1::Lab;

// A synchronous Lab service whose Echo runs handler(n, ctx) for its n-th call (from 1) and
// answers the call number as the reply's text, recording each call's attempt label.
class scripted_service final : public Lab::Service {
 public:
  using handler = std::function<grpc::Status(int call, grpc::ServerContext*)>;
  explicit scripted_service(handler h) : handler_(std::move(h)) {}

  grpc::Status Echo(grpc::ServerContext* ctx, const EchoRequest*, EchoReply* reply) override {
    int n = 0;
    {
      const std::lock_guard lock(mutex_);
      const auto& md = ctx->client_metadata();
      const auto it = md.find("grpc-previous-rpc-attempts");
      labels_.push_back(it == md.end() ? "" : std::string(it->second.data(), it->second.size()));
      n = static_cast<int>(labels_.size());
    }
    reply->set_text(std::to_string(n));
    const grpc::Status status = handler_(n, ctx);
    if (ctx->IsCancelled()) ++cancelled_;
    return status;
  }
  [[nodiscard]] std::vector<std::string> labels() const {
    const std::lock_guard lock(mutex_);
    return labels_;
  }
  [[nodiscard]] int calls() const { return static_cast<int>(labels().size()); }
  [[nodiscard]] int cancelled() const { return cancelled_.load(); }

 private:
  handler handler_;
  mutable std::mutex mutex_;
  std::vector<std::string> labels_;
  std::atomic<int> cancelled_{0};
};

// A server on 127.0.0.1:0 running `service`, shut down at destruction.
class test_server {
 public:
  explicit test_server(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) throw std::runtime_error("the test server did not start");
  }
  ~test_server() { server_->Shutdown(std::chrono::system_clock::now() + 1s); }
  test_server(const test_server&) = delete;
  test_server& operator=(const test_server&) = delete;
  [[nodiscard]] std::string target() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Waits in a handler until `limit` has passed or the client cancelled the call.
// True for a call without gRFC A6's attempt label: a first attempt, or a hedged call's first
// copy (which may reach the server after a later copy when the connection is slow to open).
inline bool first_copy(const grpc::ServerContext* ctx) {
  return ctx->client_metadata().count("grpc-previous-rpc-attempts") == 0;
}

inline void stall(grpc::ServerContext* ctx, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until && !ctx->IsCancelled()) {
    std::this_thread::sleep_for(1ms);
  }
}

}  // namespace stormguard_tests::grpc_lab

#endif  // STORMGUARD_TESTS_SUPPORT_GRPC_LAB_SERVICE_HPP
