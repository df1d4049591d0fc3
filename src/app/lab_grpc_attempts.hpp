// SPDX-License-Identifier: Apache-2.0
// The lab's attempts over gRPC (`stormguard lab --transport grpc`): one attempt per call, through
// stormguard::grpc::client (its channel has C-core's retries off, so the attempt label reaches
// the server; no retries and no budget of its own: the lab's fleet decides, as over HTTP), to
// `serve --grpc`'s stormguard.lab.v1.Scenario/Call. Each answer comes back on the Asio
// io_context's thread as an attempt_heard, the same words the HTTP transport's answers are put
// in (app/lab_fleet.cpp classifies both).
//
//   grpc_attempts attempts(io, "127.0.0.1:50051", timeout);
//   attempts.send(key, {{"grpc-previous-rpc-attempts", "1"}}, [](const attempt_heard& h) {...});
//   attempts.cancel(key);            // a hedged copy that lost: ends CANCELLED, heard.cancelled
//   attempts.stop();                 // cancels every call in flight, waits for their ends
//
// Internal to the application layer; not thread-safe but for the gRPC threads it handles
// itself (send, cancel and stop on the io_context's thread).
#ifndef STORMGUARD_APP_LAB_GRPC_ATTEMPTS_HPP
#define STORMGUARD_APP_LAB_GRPC_ATTEMPTS_HPP

#include <asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/attempt_heard.hpp"
#include "stormguard/clock.hpp"

namespace stormguard::lab {

class grpc_attempts {
 public:
  /// Metadata of one attempt: name, value.
  using metadata = std::vector<std::pair<std::string, std::string>>;

  /// A client for the server at `address` ("127.0.0.1:PORT") whose attempts end after `timeout`
  /// (their gRPC deadline); answers are posted to `io`, which must outlive this object.
  grpc_attempts(asio::io_context& io, const std::string& address, duration timeout);
  /// stop()s.
  ~grpc_attempts();
  grpc_attempts(const grpc_attempts&) = delete;
  grpc_attempts& operator=(const grpc_attempts&) = delete;

  /// Sends one attempt under `key` (unique among those in flight) with `md`; `done` runs once,
  /// on the io_context's thread, unless stop() came first.
  void send(std::uint64_t key, const metadata& md, std::function<void(attempt_heard)> done);
  /// Cancels the attempt in flight under `key` (nothing when there is none).
  void cancel(std::uint64_t key);
  /// Cancels every attempt in flight and waits until gRPC has ended each; their `done` never
  /// runs. Idempotent.
  void stop() noexcept;

  struct impl;  ///< private (lab_grpc_attempts.cpp)

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace stormguard::lab

#endif  // STORMGUARD_APP_LAB_GRPC_ATTEMPTS_HPP
