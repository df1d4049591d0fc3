// SPDX-License-Identifier: Apache-2.0
// stormguard::grpc in one program: a gRPC server on 127.0.0.1 (a free port) whose handler admits
// every call first (the server's retry budget, its defaults: retries within 10 % of first
// attempts plus 10 a second; and drop-expired) and fails its first two calls with UNAVAILABLE,
// as a backend does during a blip; and a retrying client with a ratio budget that rides through
// the blip. Then one hedged call (gRFC A6 hedging, which C-core ignores): the server holds its
// first copy, the client sends a second copy 20 ms later, and that one answers. It prints what
// happened and exits 0 when both behaved as described.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>

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
    if (req->text() == "slow" && !held_.exchange(true)) {
      // The first copy of the hedged call is stuck (a slow disk, a pause): until cancelled.
      for (int i = 0; i < 2000 && !ctx->IsCancelled(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return {grpc::StatusCode::CANCELLED, "held"};
    }
    if (++calls_ <= 2) return {grpc::StatusCode::UNAVAILABLE, "warming up"};
    reply->set_text(req->text());
    return grpc::Status::OK;
  }

 private:
  stormguard::grpc::server_admission* admission_;
  std::atomic<int> calls_{0};
  std::atomic<bool> held_{false};
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

  // A hedged call: a second copy 20 ms after the first when the first has not answered; the
  // first answer wins, the other copy is cancelled. Hedges draw from the same budget as retries.
  options.hedging.policy = {.max_attempts = 2, .delay = std::chrono::milliseconds(20)};
  stormguard::grpc::client hedging("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), options);
  request.set_text("slow");
  EchoReply hedged_reply;
  const auto h = hedging.hedged_call(
      [&](grpc::ClientContext* ctx, const EchoRequest* req, EchoReply* out,
          std::function<void(grpc::Status)> done) {
        stub->async()->Echo(ctx, req, out, std::move(done));
      },
      request, &hedged_reply, {.idempotent = true});
  std::printf("client: hedged call %s, won by copy %d of %d, %d cancelled\n",
              std::string(to_string(h.reason)).c_str(), h.hedges.winner, h.hedges.sent,
              h.hedges.cancelled);
  server->Shutdown();
  const bool retried = r.ok() && r.attempts == 3 && reply.text() == "hello" && counts.admitted == 3;
  const bool hedged = h.ok() && h.hedges.winner == 2 && hedged_reply.text() == "slow";
  return retried && hedged ? 0 : 1;
}
