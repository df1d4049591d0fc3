// SPDX-License-Identifier: Apache-2.0
// OpenSSL 3 marks the low-level SHA256_* functions deprecated in favour of the EVP layer; they
// are kept for their cost (the file comment of retry_signal_reader.hpp).
#define OPENSSL_SUPPRESS_DEPRECATED
#include "lab/retry_signal_reader.hpp"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string_view>

#include "stormguard/detail/http_syntax.hpp"

namespace stormguard::lab::detail {

namespace {

constexpr std::string_view k_fingerprint_domain = "stormguard retry fingerprint v2";
constexpr std::string_view k_key_domain = "stormguard retry idempotency key v2";

// The method as one byte (0 for one libevent does not name).
unsigned char method_code(evhttp_cmd_type m) noexcept {
  switch (m) {
    case EVHTTP_REQ_GET:
      return 1;
    case EVHTTP_REQ_POST:
      return 2;
    case EVHTTP_REQ_HEAD:
      return 3;
    case EVHTTP_REQ_PUT:
      return 4;
    case EVHTTP_REQ_DELETE:
      return 5;
    case EVHTTP_REQ_OPTIONS:
      return 6;
    case EVHTTP_REQ_PATCH:
      return 7;
    default:
      return 0;
  }
}

// A length as 4 bytes, big-endian; false for 4 GiB or more.
bool update_length(SHA256_CTX& ctx, std::size_t size) noexcept {
  if (size > std::numeric_limits<std::uint32_t>::max()) return false;
  const auto n = static_cast<std::uint32_t>(size);
  const std::array<unsigned char, 4> length{
      static_cast<unsigned char>(n >> 24U), static_cast<unsigned char>(n >> 16U),
      static_cast<unsigned char>(n >> 8U), static_cast<unsigned char>(n)};
  return SHA256_Update(&ctx, length.data(), length.size()) == 1;
}

bool update_part(SHA256_CTX& ctx, std::string_view part) noexcept {
  return update_length(ctx, part.size()) && SHA256_Update(&ctx, part.data(), part.size()) == 1;
}

// A state that has hashed `domain` padded with zero bytes to one block.
SHA256_CTX prefixed(std::string_view domain) noexcept {
  std::array<unsigned char, SHA256_CBLOCK> block{};
  std::copy_n(domain.begin(), std::min(domain.size(), block.size()), block.begin());
  SHA256_CTX ctx{};
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, block.data(), block.size());
  return ctx;
}

// The key cut from the digest of what `ctx` hashed.
std::uint64_t finish(SHA256_CTX& ctx) noexcept {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> out{};
  SHA256_Final(out.data(), &ctx);
  return admission::key_from_digest(out);
}

// The body, chunk by chunk (no copy, no linearising of libevent's buffer).
bool update_body(SHA256_CTX& ctx, evbuffer* body) noexcept {
  const std::size_t length = body != nullptr ? evbuffer_get_length(body) : 0;
  if (!update_length(ctx, length)) return false;
  if (length == 0) return true;
  evbuffer_ptr at{};
  if (evbuffer_ptr_set(body, &at, 0, EVBUFFER_PTR_SET) != 0) return false;
  std::array<evbuffer_iovec, 8> chunks{};
  std::size_t left = length;
  while (left > 0) {
    const int n = evbuffer_peek(body, static_cast<ev_ssize_t>(left), &at, chunks.data(),
                                static_cast<int>(chunks.size()));
    if (n <= 0) return false;
    const std::size_t used = std::min<std::size_t>(static_cast<std::size_t>(n), chunks.size());
    for (std::size_t i = 0; i < used && left > 0; ++i) {
      const std::size_t take = std::min(left, chunks[i].iov_len);
      if (SHA256_Update(&ctx, chunks[i].iov_base, take) != 1) return false;
      left -= take;
      if (evbuffer_ptr_set(body, &at, take, EVBUFFER_PTR_ADD) != 0 && left > 0) return false;
    }
  }
  return true;
}

// The principal (`authorization`, the Authorization field's value, when the request has one) or
// the peer's address; nullopt when neither is known.
std::optional<std::string_view> who(evhttp_request* req, const char* authorization) noexcept {
  if (authorization != nullptr) return std::string_view(authorization);
  evhttp_connection* connection = evhttp_request_get_connection(req);
  if (connection == nullptr) return std::nullopt;
  char* address = nullptr;
  ev_uint16_t port = 0;
  evhttp_connection_get_peer(connection, &address, &port);
  return std::string_view(address != nullptr ? address : "");
}

}  // namespace

retry_signal_reader::retry_signal_reader(admission::retry_signals_options options)
    : recognizer_(options),
      fingerprint_prefix_(prefixed(k_fingerprint_domain)),
      key_prefix_(prefixed(k_key_domain)) {}

std::optional<std::uint64_t> retry_signal_reader::fingerprint(evhttp_request* req) noexcept {
  const char* authorization = nullptr;
  const evkeyvalq* headers = evhttp_request_get_input_headers(req);
  for (const evkeyval* h = headers != nullptr ? headers->tqh_first : nullptr;
       h != nullptr && authorization == nullptr; h = h->next.tqe_next) {
    if (h->key != nullptr && stormguard::detail::equals_ignoring_case(h->key, "authorization")) {
      authorization = h->value;
    }
  }
  return fingerprint(req, who(req, authorization));
}

std::optional<std::uint64_t> retry_signal_reader::fingerprint(
    evhttp_request* req, std::optional<std::string_view> from) noexcept {
  if (!from) return std::nullopt;
  const char* target = evhttp_request_get_uri(req);
  SHA256_CTX ctx = fingerprint_prefix_;
  const unsigned char method = method_code(evhttp_request_get_command(req));
  if (!update_part(ctx, *from) || SHA256_Update(&ctx, &method, 1) != 1 ||
      !update_part(ctx, target != nullptr ? target : "") ||
      !update_body(ctx, evhttp_request_get_input_buffer(req))) {
    return std::nullopt;
  }
  return finish(ctx);
}

namespace {

// The attempt number the other ecosystems' labels say, when they say retry (0 otherwise), and
// 2 for a repeated Idempotency-Key: what recognition::retry_attempt holds.
std::int64_t retry_attempt_of(const admission::request_signals& seen,
                              const admission::retry_labels& labels) noexcept {
  std::int64_t attempt = 0;
  if (seen.shows(admission::retry_signal::amz_sdk_request)) {
    attempt = labels.reading(admission::retry_signal::amz_sdk_request).attempt;
  }
  if (seen.shows(admission::retry_signal::graph_retry_attempt)) {
    attempt =
        std::max(attempt, labels.reading(admission::retry_signal::graph_retry_attempt).attempt);
  }
  if (seen.repeated_idempotency_key) attempt = std::max<std::int64_t>(attempt, 2);
  return attempt;
}

}  // namespace

retry_signal_reader::recognition retry_signal_reader::recognise_labels(
    std::span<const std::pair<std::string, std::string>> fields, time_point now) noexcept {
  admission::retry_labels labels;
  for (const auto& [name, value] : fields) {
    if (admission::retry_labels::reads(name)) labels.field(name, value);
  }
  const admission::request_signals seen =
      recognizer_.recognise(now, labels, std::nullopt, std::nullopt);
  recognition r;
  r.retry_attempt = retry_attempt_of(seen, labels);
  return r;
}

retry_signal_reader::recognition retry_signal_reader::recognise(evhttp_request* req,
                                                                time_point now) noexcept {
  admission::retry_labels labels;
  const evkeyvalq* headers = evhttp_request_get_input_headers(req);
  const char* key = nullptr;
  const char* authorization = nullptr;
  // One pass over the fields: the labels, the first Idempotency-Key and Authorization.
  for (const evkeyval* h = headers != nullptr ? headers->tqh_first : nullptr; h != nullptr;
       h = h->next.tqe_next) {
    if (h->key == nullptr || h->value == nullptr) continue;
    const std::string_view name(h->key);
    if (admission::retry_labels::reads(name)) labels.field(name, h->value);
    if (key == nullptr && stormguard::detail::equals_ignoring_case(name, "idempotency-key")) {
      key = h->value;
    }
    if (authorization == nullptr &&
        stormguard::detail::equals_ignoring_case(name, "authorization")) {
      authorization = h->value;
    }
  }
  std::optional<std::uint64_t> key_digest;
  const std::optional<std::string_view> from = who(req, authorization);
  if (key != nullptr && from) {
    SHA256_CTX ctx = key_prefix_;
    if (update_part(ctx, *from) && update_part(ctx, key)) key_digest = finish(ctx);
  }
  recognition r;
  r.fingerprint = fingerprint(req, from);
  const admission::request_signals seen =
      recognizer_.recognise(now, labels, key_digest, r.fingerprint);
  // The other ecosystems' labels say which attempt this is (Graph's counts the retries).
  r.retry_attempt = retry_attempt_of(seen, labels);
  r.weak_retry = seen.fingerprint_after_failure;
  return r;
}

}  // namespace stormguard::lab::detail
