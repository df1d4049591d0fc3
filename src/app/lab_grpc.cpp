// SPDX-License-Identifier: Apache-2.0
// The scenario's server over gRPC (app/lab_grpc.hpp): a callback service that reads each call's
// attempt label, deadline and incident label, hands the attempt to lab::server::submit and
// finishes the call with the answer, on whichever thread the answer comes.
#include "app/lab_grpc.hpp"

#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "stormguard/admission/retry_signals.hpp"
#include "stormguard/grpc/admission.hpp"
#include "stormguard/lab/v1/scenario.grpc.pb.h"
#include "stormguard/retry_headers.hpp"

namespace stormguard::lab {

namespace {

namespace v1 = ::stormguard::lab::v1;

// The time left until a call's deadline (gRPC's system-clock instant), or none for gRPC's "no
// deadline" (gpr_inf_future, near the end of time).
std::optional<duration> time_left(std::chrono::system_clock::time_point deadline) {
  using namespace std::chrono;
  if (deadline >= system_clock::time_point::max() - hours(24 * 365)) return std::nullopt;
  return duration_cast<duration>(deadline - system_clock::now());
}

// What a call's metadata says: its attempt (every attempt field, as attempt_fields reads
// them) and the incident label (the first x-stormguard-incident, value "1").
transport_attempt read_call(const ::grpc::CallbackServerContext& ctx) {
  transport_attempt a;
  attempt_fields reader;
  bool incident_seen = false;
  for (const auto& [key, value] : ctx.client_metadata()) {
    const std::string_view name(key.data(), key.size());
    const std::string_view text(value.data(), value.size());
    reader.field(name, text);
    if (admission::retry_labels::reads(name)) a.retry_label_fields.emplace_back(name, text);
    if (!incident_seen && name == k_incident_label_header) {
      incident_seen = true;
      a.incident = text == "1";
    }
  }
  a.attempt = reader.result();
  a.time_left = time_left(ctx.deadline());
  return a;
}

class scenario_service final : public v1::Scenario::CallbackService {
 public:
  explicit scenario_service(server& srv) : srv_(srv) {}

  ::grpc::ServerUnaryReactor* Call(::grpc::CallbackServerContext* ctx, const v1::CallRequest*,
                                   v1::CallReply* reply) override {
    ::grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    // The context, the reply and the reactor live until Finish; `gone` is never asked after
    // `done` (lab::server::submit).
    srv_.submit(
        read_call(*ctx), [ctx] { return ctx->IsCancelled(); },
        [ctx, reactor, reply](const transport_answer& answer) {
          if (answer.unanswered) {
            return reactor->Finish(::grpc::Status(::grpc::StatusCode::CANCELLED,
                                                  "the scenario's server stopped or lost it"));
          }
          if (answer.outcome == admission::outcome::served) {
            reply->set_text("ok");
            return reactor->Finish(::grpc::Status::OK);
          }
          if (auto pushback = grpc::pushback_for(answer.outcome, answer.retry_after)) {
            ctx->AddTrailingMetadata(std::string(k_pushback_header), *pushback);
          }
          reactor->Finish(grpc::status_for(answer.outcome));
        });
    return reactor;
  }

 private:
  server& srv_;
};

// The system's reason why 127.0.0.1:port cannot be bound now, or "".
std::string bind_error(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as gRPC binds
  std::string why;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    why = std::strerror(errno);
  }
  ::close(fd);
  return why;
}

}  // namespace

class grpc_endpoint::impl {
 public:
  explicit impl(server& srv) : service_(srv) {}

  std::string open(std::uint16_t port) {
    const std::string where = "127.0.0.1:" + std::to_string(port);
    // gRPC says only "cannot listen" (and logs its own error): a bind of our own first gives
    // the system's reason for a port that is taken or not permitted.
    if (port != 0) {
      if (std::string why = bind_error(port); !why.empty()) return where + ": " + why;
    }
    ::grpc::ServerBuilder builder;
    // One listener per port: without SO_REUSEPORT, a second server on the port fails to bind
    // instead of sharing its calls.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort(where, ::grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    builder.SetMaxReceiveMessageSize(k_max_request_bytes);
    // At most k_max_streams calls at once on one connection (HTTP/2 SETTINGS; a client's further
    // calls wait in its own queue), and a connection with no call for k_idle_timeout is closed,
    // as the HTTP listener closes idle connections (server_limits::idle_timeout).
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, k_max_streams);
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_IDLE_MS,
        static_cast<int>(
            std::chrono::duration_cast<std::chrono::milliseconds>(k_idle_timeout).count()));
    server_ = builder.BuildAndStart();
    if (!server_ || port_ <= 0) {
      server_.reset();
      return where + ": cannot listen (in use, or not permitted)";
    }
    return {};
  }

  [[nodiscard]] std::uint16_t port() const noexcept { return static_cast<std::uint16_t>(port_); }

  void stop() noexcept {
    if (!server_) return;
    // A grace for the answers already given (the server's stop finishes every call it held):
    // at once, gRPC would cancel the calls whose status is not sent yet, and their clients would
    // read UNAVAILABLE ("Cancelling all calls"), a retryable code, instead of CANCELLED.
    server_->Shutdown(std::chrono::system_clock::now() + k_shutdown_grace);
    server_->Wait();
    server_.reset();
  }

 private:
  scenario_service service_;
  int port_ = 0;
  std::unique_ptr<::grpc::Server> server_;
};

outcome<std::unique_ptr<grpc_endpoint>, std::string> grpc_endpoint::start(server& srv,
                                                                          std::uint16_t port) {
  auto p = std::make_unique<impl>(srv);
  if (std::string error = p->open(port); !error.empty()) return failure{std::move(error)};
  return std::unique_ptr<grpc_endpoint>(new grpc_endpoint(std::move(p)));
}

grpc_endpoint::grpc_endpoint(std::unique_ptr<impl> p) noexcept : impl_(std::move(p)) {}
grpc_endpoint::~grpc_endpoint() { stop(); }

std::uint16_t grpc_endpoint::port() const noexcept { return impl_->port(); }
std::string grpc_endpoint::address() const { return "127.0.0.1:" + std::to_string(port()); }
void grpc_endpoint::stop() noexcept { impl_->stop(); }

}  // namespace stormguard::lab
