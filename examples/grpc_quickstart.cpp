// SPDX-License-Identifier: Apache-2.0
// stormguard::grpc in one program: a gRPC server on 127.0.0.1 (a free port) whose handler admits
// every call first (the server's retry budget, its defaults: retries within 10 % of first
// attempts plus 10 a second; and drop-expired) and fails its first two calls with UNAVAILABLE,
// as a backend does during a blip; and a retrying client with a ratio budget that rides through
// the blip. It prints what happened and exits 0 when both behaved as described.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "stormguard/grpc/admission.hpp"
#include "stormguard/grpc/client.hpp"
#include "stormguard/lab/v1/lab.grpc.pb.h"

namespace {

using stormguard::lab::v1::EchoReply;
using stormguard::lab::v1::EchoRequest;
using stormguard::lab::v1::Lab;

class echo_service final : public Lab::Service {
 public:
  explicit echo_service(stormguard::grpc::server_admission& admission) : admission_(&admission) {}

  grpc::Status Echo(grpc::ServerContext* ctx, const EchoRequest* req, EchoReply* reply) override {
    // Admission first: a retry over the server's budget, or a call whose caller has given up,
    // is refused here with grpc-retry-pushback-ms: -1, before any work.
    auto ticket = stormguard::grpc::admit(*ctx, *admission_);
    if (!ticket) return ticket.refusal();
    if (++calls_ <= 2) return {grpc::StatusCode::UNAVAILABLE, "warming up"};
    reply->set_text(req->text());
    return grpc::Status::OK;
  }

 private:
  stormguard::grpc::server_admission* admission_;
  std::atomic<int> calls_{0};
};

}  // namespace

int main() {
  // The server.
  stormguard::grpc::server_admission admission({.retry_budget = stormguard::ratio_budget_options{},
                                                .drop_expired = std::chrono::milliseconds(1)});
  echo_service service(admission);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  const std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) return 1;

  // The client: its own channel (C-core's retries off), 3 retries with full jitter, a ratio
  // budget with a floor of 10 retries a second (the defaults).
  stormguard::grpc::client_options options;
  options.retry.backoff.base = std::chrono::milliseconds(10);
  stormguard::grpc::client client("127.0.0.1:" + std::to_string(port),
                                  grpc::InsecureChannelCredentials(), options);
  const auto stub = Lab::NewStub(client.channel());

  EchoRequest request;
  request.set_text("hello");
  EchoReply reply;
  const auto r = client.call(
      [&](grpc::ClientContext& ctx, const EchoRequest& req, EchoReply* out) {
        return stub->Echo(&ctx, req, out);
      },
      request, &reply,
      {.idempotent = true, .deadline = stormguard::real_clock{}.now() + std::chrono::seconds(5)});
  std::printf("client: %s after %d attempts: \"%s\"\n", std::string(to_string(r.reason)).c_str(),
              r.attempts, reply.text().c_str());

  // Each attempt said which it was (grpc-previous-rpc-attempts), and the server's budget had
  // room for the two retries.
  const auto counts = admission.counts();
  std::printf("server: %lld admitted, %lld retries refused\n",
              static_cast<long long>(counts.admitted),
              static_cast<long long>(counts.retry_refused));
  server->Shutdown();
  return r.ok() && r.attempts == 3 && reply.text() == "hello" && counts.admitted == 3 ? 0 : 1;
}
