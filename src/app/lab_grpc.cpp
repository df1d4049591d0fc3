// SPDX-License-Identifier: Apache-2.0
// The scenario's server over gRPC (app/lab_grpc.hpp): a callback service that reads each call's
// attempt label, deadline and incident label, hands the attempt to lab::server::submit and
// finishes the call with the answer, on whichever thread the answer comes.
#include "app/lab_grpc.hpp"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
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
  scenario_service(server& srv, std::int64_t max_calls) : srv_(srv), max_calls_(max_calls) {}

  ::grpc::ServerUnaryReactor* Call(::grpc::CallbackServerContext* ctx, const v1::CallRequest*,
                                   v1::CallReply* reply) override {
    ::grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (held_.fetch_add(1, std::memory_order_relaxed) >= max_calls_) {
      held_.fetch_sub(1, std::memory_order_relaxed);
      reactor->Finish(::grpc::Status(
          ::grpc::StatusCode::RESOURCE_EXHAUSTED,
          "serve holds " + std::to_string(max_calls_) + " calls already; try again later"));
      return reactor;
    }
    // The context, the reply and the reactor live until Finish; `gone` is never asked after
    // `done`, which comes once (lab::server::submit).
    srv_.submit(
        read_call(*ctx), [ctx] { return ctx->IsCancelled(); },
        [this, ctx, reactor, reply](const transport_answer& answer) {
          held_.fetch_sub(1, std::memory_order_relaxed);
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
  std::int64_t max_calls_;
  std::atomic<std::int64_t> held_{0};  // calls handed to srv_ and not yet answered
};

// A listening socket on 127.0.0.1:port (non-blocking, close-on-exec), or the system's reason.
outcome<int, std::string> listen_on(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return failure{std::string(std::strerror(errno))};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // no SO_REUSEPORT
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, SOMAXCONN) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return failure{why};
  }
  return fd;
}

std::uint16_t port_of(int fd) {
  sockaddr_in address{};
  socklen_t size = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) return 0;
  return ntohs(address.sin_port);
}

}  // namespace

// The listening socket is ours, not gRPC's: gRPC 1.51's listener stops accepting for good the
// first time accept() fails for want of descriptors (EMFILE), so this accepts on a thread of its
// own, pausing k_accept_pause after such a failure as the HTTP listener does, and hands each
// connection to the gRPC server (grpc::AddInsecureChannelFromFd), which reads and frames it with
// the server's channel arguments.
class grpc_endpoint::impl {
 public:
  impl(server& srv, std::int64_t max_calls) : service_(srv, max_calls) {}
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl() { stop(); }

  std::string open(std::uint16_t port) {
    const std::string where = "127.0.0.1:" + std::to_string(port);
    auto listening = listen_on(port);
    if (!listening) return where + ": " + listening.error();
    listen_fd_ = *listening;
    port_ = port_of(listen_fd_);
    int wake[2];
    if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) return where + ": " + std::strerror(errno);
    wake_read_ = wake[0];
    wake_write_ = wake[1];
    ::grpc::ServerBuilder builder;
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
    if (!server_ || port_ == 0) {
      server_.reset();
      return where + ": gRPC could not start its server";
    }
    acceptor_ = std::thread([this] { accept_loop(); });
    return {};
  }

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] std::int64_t accept_pauses() const noexcept {
    return accept_pauses_.load(std::memory_order_relaxed);
  }

  void stop() noexcept {
    if (acceptor_.joinable()) {
      const char byte = 0;
      while (::write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
      }
      acceptor_.join();
    }
    for (int* fd : {&listen_fd_, &wake_read_, &wake_write_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    if (!server_) return;
    // A grace for the answers already given (the server's stop finishes every call it held):
    // at once, gRPC would cancel the calls whose status is not sent yet, and their clients would
    // read UNAVAILABLE ("Cancelling all calls"), a retryable code, instead of CANCELLED.
    server_->Shutdown(std::chrono::system_clock::now() + k_shutdown_grace);
    server_->Wait();
    server_.reset();
  }

 private:
  // Until stop(): waits for connections (or the wake-up), accepts every one waiting and hands it
  // to gRPC; after a failure for want of descriptors or memory, waits k_accept_pause first.
  void accept_loop() noexcept {
    int wait_ms = -1;
    for (;;) {
      pollfd fds[2] = {{wake_read_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      const int ready = ::poll(fds, wait_ms < 0 ? 2 : 1, wait_ms);
      if (ready > 0 && (fds[0].revents & POLLIN) != 0) return;  // stop()
      if (ready < 0 && errno != EINTR) {  // ENOMEM: never a reason to stop accepting for good
        wait_ms = static_cast<int>(k_accept_pause.count());
        continue;
      }
      wait_ms = -1;
      for (;;) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
          const int one = 1;
          (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          ::grpc::AddInsecureChannelFromFd(server_.get(), fd);  // gRPC owns and closes it
          continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accept_pauses_.fetch_add(1, std::memory_order_relaxed);
          wait_ms = static_cast<int>(k_accept_pause.count());
        }
        break;  // EAGAIN: nothing more waits; anything else: poll again
      }
    }
  }

  scenario_service service_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::atomic<std::int64_t> accept_pauses_{0};
  std::unique_ptr<::grpc::Server> server_;
  std::thread acceptor_;
};

outcome<std::unique_ptr<grpc_endpoint>, std::string> grpc_endpoint::start(server& srv,
                                                                          std::uint16_t port,
                                                                          std::int64_t max_calls) {
  if (max_calls < 1) {
    throw std::invalid_argument(
        "stormguard::lab::grpc_endpoint::start: max_calls must be >= 1, got " +
        std::to_string(max_calls));
  }
  auto p = std::make_unique<impl>(srv, max_calls);
  if (std::string error = p->open(port); !error.empty()) return failure{std::move(error)};
  return std::unique_ptr<grpc_endpoint>(new grpc_endpoint(std::move(p)));
}

grpc_endpoint::grpc_endpoint(std::unique_ptr<impl> p) noexcept : impl_(std::move(p)) {}
grpc_endpoint::~grpc_endpoint() { stop(); }

std::uint16_t grpc_endpoint::port() const noexcept { return impl_->port(); }
std::int64_t grpc_endpoint::accept_pauses() const noexcept { return impl_->accept_pauses(); }
std::string grpc_endpoint::address() const { return "127.0.0.1:" + std::to_string(port()); }
void grpc_endpoint::stop() noexcept { impl_->stop(); }

}  // namespace stormguard::lab
