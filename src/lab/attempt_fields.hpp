// SPDX-License-Identifier: Apache-2.0
// Internal: a request's attempt number read from every one of its attempt fields, for the lab
// server (`stormguard serve`, `stormguard lab`). HTTP lets a field appear more than once; a
// request that repeats x-envoy-attempt-count (or grpc-previous-rpc-attempts) with values that read
// differently ("1" and "2") does not say which attempt it is: it is malformed (attempt 2, a retry
// of unknown number), as when the two fields disagree (stormguard/retry_headers.hpp). A field
// repeated with values that read the same ("1" and " 1") reads as one. Header-only; no
// allocation; each field is parsed where it stands (libevent's NUL-terminated value), by
// stormguard::attempt_fields.
#ifndef STORMGUARD_LAB_ATTEMPT_FIELDS_HPP
#define STORMGUARD_LAB_ATTEMPT_FIELDS_HPP

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "stormguard/detail/saturate.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard_engine/attempt.hpp"

namespace stormguard::lab::detail {

/// The attempt a request's header fields say it is (see the file comment): parse_attempt of the
/// first x-envoy-attempt-count and the first grpc-previous-rpc-attempts, or malformed when either
/// field is repeated with a value that reads differently from its first. `headers` may be null
/// (no fields: a first attempt).
[[nodiscard]] inline attempt_info read_attempt_fields(const evkeyvalq* headers) noexcept {
  attempt_fields reader;
  for (const evkeyval* h = headers != nullptr ? headers->tqh_first : nullptr; h != nullptr;
       h = h->next.tqe_next) {
    if (h->key != nullptr && h->value != nullptr) reader.field(h->key, h->value);
  }
  return reader.result();
}

/// What a request's header fields say to the defences (the engine's attempt_labels): its attempt
/// number (read_attempt_fields) and its caller's deadline, `now` (ns of the scenario's clock) +
/// grpc-timeout, saturating; none when grpc-timeout is absent or malformed (hostile values
/// included, as stormguard/retry_headers.hpp reads them).
[[nodiscard]] inline sim::engine::attempt_labels read_attempt_labels(const evkeyvalq* headers,
                                                                     std::int64_t now) noexcept {
  sim::engine::attempt_labels labels;
  labels.attempt = read_attempt_fields(headers);  // a repeated field that disagrees: malformed
  // The name is a literal (retry_headers.hpp): .data() ends with a NUL.
  const char* timeout =
      headers != nullptr ? evhttp_find_header(headers, k_grpc_timeout_header.data()) : nullptr;
  if (timeout != nullptr) {
    if (const auto left = parse_grpc_timeout(timeout)) {
      labels.deadline = stormguard::detail::saturating_add(duration(now), *left).count();
    }
  }
  return labels;
}

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_LAB_ATTEMPT_FIELDS_HPP
