// SPDX-License-Identifier: Apache-2.0
// The scenario's server over gRPC (`stormguard serve --grpc`): a gRPC listener on 127.0.0.1 whose
// one call, stormguard.lab.v1.Scenario/Call (proto/stormguard/lab/v1/scenario.proto), is the
// scenario's endpoint of a running lab::server, through lab::server::submit: the same model,
// defences and counters as its HTTP endpoint, whose GET /stats and /metrics count both.
//
//   auto srv = *stormguard::lab::server::start(scenario, {});
//   auto grpc = stormguard::lab::grpc_endpoint::start(*srv, 0);  // outcome: or a message
//   ... point gRPC clients at (*grpc)->address() ...
//   srv->stop();          // first: every call it holds is answered CANCELLED at once
//   (*grpc)->stop();      // then gRPC's own shutdown has nothing left to wait for
//
// The answers (transport_answer in gRPC's words): served is OK, "ok"; a refusal is
// stormguard::grpc::status_for's status with stormguard::grpc::pushback_for's trailer; an attempt
// the incident lost is never answered (its caller's deadline ends it; the server frees it within
// a second of the cancellation); one the server still holds when it stops is CANCELLED.
//
// Hostile clients: gRPC C++ (HTTP/2) reads and frames every call; a request message is at most
// 4 KiB (the call's message is a short text), a connection carries at most 1,000 calls at once
// and is closed after 30 s without one. The listening socket is this endpoint's own (gRPC 1.51's
// listener stops accepting for good the first time accept() fails for want of descriptors): out
// of descriptors, it pauses 100 ms and accepts again, as the HTTP listener does, and hands each
// connection to gRPC. It holds at most 10,000 calls at once (answering RESOURCE_EXHAUSTED beyond
// them), which bounds the memory of the calls held (a lost call without a deadline is held until
// its client cancels it or the server stops) and the time stop() takes; the number of
// connections is bounded by the descriptors alone. Internal to the application layer.
#ifndef STORMGUARD_APP_LAB_GRPC_HPP
#define STORMGUARD_APP_LAB_GRPC_HPP

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "stormguard/lab/server.hpp"
#include "stormguard/outcome.hpp"

namespace stormguard::lab {

class grpc_endpoint {
 public:
  /// The largest request message a call may carry, in bytes (gRPC answers RESOURCE_EXHAUSTED).
  static constexpr int k_max_request_bytes = 4 * 1024;
  /// The most calls one connection carries at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
  static constexpr int k_max_streams = 1000;
  /// A connection without a call for this long is closed (steady clock).
  static constexpr std::chrono::seconds k_idle_timeout{30};
  /// How long stop() lets the answers already given reach their clients before gRPC cancels
  /// what is left.
  static constexpr std::chrono::milliseconds k_shutdown_grace{1000};
  /// After accept() fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM),
  /// the listener waits this long (steady clock) before it accepts again; the connections
  /// meanwhile wait in the system's backlog.
  static constexpr std::chrono::milliseconds k_accept_pause{100};

  /// The most calls the endpoint holds at once (waiting, in service or lost, until answered):
  /// a call beyond it is answered RESOURCE_EXHAUSTED at once and is not an attempt. It bounds
  /// the memory of the calls held (about 16 KB each) and the time stop() takes.
  static constexpr std::int64_t k_max_calls = 10'000;
  /// Listens on 127.0.0.1:port (0: the system chooses) for calls to `srv`'s endpoint, holding
  /// at most `max_calls` at once; `srv` must outlive this object. An error naming the address
  /// when it cannot listen; std::invalid_argument when max_calls < 1.
  [[nodiscard]] static outcome<std::unique_ptr<grpc_endpoint>, std::string> start(
      server& srv, std::uint16_t port, std::int64_t max_calls = k_max_calls);
  /// stop()s.
  ~grpc_endpoint();
  grpc_endpoint(const grpc_endpoint&) = delete;
  grpc_endpoint& operator=(const grpc_endpoint&) = delete;

  /// The port it listens on.
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// How many times accept() failed for want of descriptors or memory and the listener paused
  /// (k_accept_pause) since start.
  [[nodiscard]] std::int64_t accept_pauses() const noexcept;
  /// "127.0.0.1:PORT", as a gRPC target.
  [[nodiscard]] std::string address() const;
  /// Shuts the gRPC server down at once (calls in flight are cancelled) and waits for every
  /// call the server still holds to end: stop the lab::server first, or this waits for their
  /// answers (at most a second for a lost one once cancelled). Idempotent.
  void stop() noexcept;

  class impl;  ///< private (lab_grpc.cpp)

 private:
  explicit grpc_endpoint(std::unique_ptr<impl> p) noexcept;
  std::unique_ptr<impl> impl_;
};

}  // namespace stormguard::lab

#endif  // STORMGUARD_APP_LAB_GRPC_HPP
