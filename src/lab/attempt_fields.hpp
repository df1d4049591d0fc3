// SPDX-License-Identifier: Apache-2.0
// Internal: a request's attempt number read from every one of its attempt fields, for the lab
// server (`stormguard serve`, `stormguard lab`). HTTP lets a field appear more than once; a
// request that repeats x-envoy-attempt-count (or grpc-previous-rpc-attempts) with values that read
// differently ("1" and "2") does not say which attempt it is: it is malformed (attempt 2, a retry
// of unknown number), as when the two fields disagree (stormguard/retry_headers.hpp). A field
// repeated with values that read the same ("1" and " 1") reads as one. Header-only; no
// allocation; each field is parsed where it stands (libevent's NUL-terminated value).
#ifndef STORMGUARD_LAB_ATTEMPT_FIELDS_HPP
#define STORMGUARD_LAB_ATTEMPT_FIELDS_HPP

#include <event2/keyvalq_struct.h>
#include <event2/util.h>

#include <optional>
#include <string_view>

#include "stormguard/retry_headers.hpp"

namespace stormguard::lab::detail {

/// The attempt a request's header fields say it is (see the file comment): parse_attempt of the
/// first x-envoy-attempt-count and the first grpc-previous-rpc-attempts, or malformed when either
/// field is repeated with a value that reads differently from its first. `headers` may be null
/// (no fields: a first attempt).
[[nodiscard]] inline attempt_info read_attempt_fields(const evkeyvalq* headers) noexcept {
  std::optional<std::string_view> count;
  std::optional<std::string_view> previous;
  bool disagree = false;
  // The names are literals (retry_headers.hpp): data() is NUL-terminated.
  for (const evkeyval* h = headers != nullptr ? headers->tqh_first : nullptr; h != nullptr;
       h = h->next.tqe_next) {
    if (h->key == nullptr || h->value == nullptr) continue;
    if (evutil_ascii_strcasecmp(h->key, k_attempt_count_header.data()) == 0) {
      if (!count) {
        count = h->value;
      } else if (parse_attempt(count, std::nullopt) !=
                 parse_attempt(std::string_view(h->value), std::nullopt)) {
        disagree = true;
      }
    } else if (evutil_ascii_strcasecmp(h->key, k_previous_attempts_header.data()) == 0) {
      if (!previous) {
        previous = h->value;
      } else if (parse_attempt(std::nullopt, previous) !=
                 parse_attempt(std::nullopt, std::string_view(h->value))) {
        disagree = true;
      }
    }
  }
  if (disagree) return attempt_info{2, true};
  return parse_attempt(count, previous);
}

}  // namespace stormguard::lab::detail

#endif  // STORMGUARD_LAB_ATTEMPT_FIELDS_HPP
