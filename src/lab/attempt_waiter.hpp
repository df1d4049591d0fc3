// SPDX-License-Identifier: Apache-2.0
// Internal: who waits for the answer to one attempt at lab::server's scenario endpoint — an
// evhttp request, or a call another transport submitted (lab/transport_inbox.hpp) — and the
// answer in each one's words: a status line and fields for HTTP, a transport_answer for the
// other. Private to stormguard::lab; loop thread only.
#ifndef STORMGUARD_SRC_LAB_ATTEMPT_WAITER_HPP
#define STORMGUARD_SRC_LAB_ATTEMPT_WAITER_HPP

#include <memory>
#include <optional>
#include <string_view>

#include "lab/transport_inbox.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/clock.hpp"

struct evhttp_request;

namespace stormguard::lab::detail {

/// At most one of `http` and `call` is set (neither: nobody waits). Each answer is sent once:
/// the waiter is moved from, or dropped, after it.
struct attempt_waiter {
  evhttp_request* http = nullptr;
  std::unique_ptr<transport_call> call;

  /// Its client has gone (closed its connection; the transport's call ended or was cancelled).
  [[nodiscard]] bool gone() const;
  /// Served: 200 "ok", or transport_answer served.
  void served();
  /// An immediate 503 of the server's own (an incident's error, a full queue), with `body`.
  void unavailable(std::string_view body);
  /// A defence's answer `o` (admission::reply_for), with the delay `wait` a Retry-After says
  /// (whole seconds over HTTP; the transport gets the delay itself).
  void refused(admission::outcome o, std::optional<duration> wait);
};

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_SRC_LAB_ATTEMPT_WAITER_HPP
