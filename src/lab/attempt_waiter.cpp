// SPDX-License-Identifier: Apache-2.0
// The answers to one attempt, by HTTP or by another transport (lab/attempt_waiter.hpp).
#include "lab/attempt_waiter.hpp"

#include <event2/http.h>

#include <string>

#include "lab/evhttp_reply.hpp"
#include "stormguard/retry_headers.hpp"

namespace stormguard::lab::detail {

bool attempt_waiter::gone() const {
  if (http != nullptr) return evhttp_request_get_connection(http) == nullptr;
  return call && call->gone && call->gone();
}

void attempt_waiter::served() {
  if (http != nullptr) return reply_text(http, 200, "OK", "ok\n");
  if (call) complete(*call, {.outcome = admission::outcome::served});
}

void attempt_waiter::unavailable(std::string_view body) {
  if (http != nullptr) return reply_text(http, 503, "Service Unavailable", body);
  if (call) complete(*call, {.outcome = admission::outcome::unavailable});
}

void attempt_waiter::refused(admission::outcome o, std::optional<duration> wait) {
  if (call) return complete(*call, {.outcome = o, .retry_after = wait});
  if (http == nullptr) return;
  const admission::reply r = admission::reply_for(o);
  evkeyvalq* out = evhttp_request_get_output_headers(http);
  // The views of admission::reply are of literals: NUL-terminated.
  if (r.do_not_retry) evhttp_add_header(out, k_pushback_header.data(), r.pushback.data());
  if (wait) {
    const auto seconds = std::to_string(admission::retry_after_seconds(*wait));
    evhttp_add_header(out, "Retry-After", seconds.c_str());
  }
  reply_text(http, r.status, r.reason_phrase.data(), r.body);
}

}  // namespace stormguard::lab::detail
