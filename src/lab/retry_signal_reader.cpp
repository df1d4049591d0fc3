// SPDX-License-Identifier: Apache-2.0
#include "lab/retry_signal_reader.hpp"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace stormguard::lab::detail {

namespace {

constexpr std::string_view k_fingerprint_domain = "stormguard retry fingerprint v1";
constexpr std::string_view k_key_domain = "stormguard retry idempotency key v1";

std::string_view method_name(evhttp_cmd_type m) noexcept {
  switch (m) {
    case EVHTTP_REQ_GET:
      return "GET";
    case EVHTTP_REQ_POST:
      return "POST";
    case EVHTTP_REQ_HEAD:
      return "HEAD";
    case EVHTTP_REQ_PUT:
      return "PUT";
    case EVHTTP_REQ_DELETE:
      return "DELETE";
    case EVHTTP_REQ_OPTIONS:
      return "OPTIONS";
    case EVHTTP_REQ_PATCH:
      return "PATCH";
    default:
      return "OTHER";
  }
}

bool update_length(EVP_MD_CTX* ctx, std::size_t size) noexcept {
  std::array<unsigned char, 8> length{};
  auto n = static_cast<std::uint64_t>(size);
  for (int i = 7; i >= 0; --i) {
    length[static_cast<std::size_t>(i)] = static_cast<unsigned char>(n & 0xffU);
    n >>= 8U;
  }
  return EVP_DigestUpdate(ctx, length.data(), length.size()) == 1;
}

bool update_part(EVP_MD_CTX* ctx, std::string_view part) noexcept {
  return update_length(ctx, part.size()) && EVP_DigestUpdate(ctx, part.data(), part.size()) == 1;
}

// The body, chunk by chunk (no copy, no linearising of libevent's buffer).
bool update_body(EVP_MD_CTX* ctx, evbuffer* body) noexcept {
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
      if (EVP_DigestUpdate(ctx, chunks[i].iov_base, take) != 1) return false;
      left -= take;
      if (evbuffer_ptr_set(body, &at, take, EVBUFFER_PTR_ADD) != 0 && left > 0) return false;
    }
  }
  return true;
}

// The principal (Authorization) or the peer's address; nullopt when neither is known.
std::optional<std::string_view> who(evhttp_request* req) noexcept {
  if (const char* a = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization")) {
    return std::string_view(a);
  }
  evhttp_connection* connection = evhttp_request_get_connection(req);
  if (connection == nullptr) return std::nullopt;
  char* address = nullptr;
  ev_uint16_t port = 0;
  evhttp_connection_get_peer(connection, &address, &port);
  return std::string_view(address != nullptr ? address : "");
}

}  // namespace

void retry_signal_reader::ctx_deleter::operator()(evp_md_ctx_st* c) const noexcept {
  EVP_MD_CTX_free(c);
}

std::unique_ptr<evp_md_ctx_st, retry_signal_reader::ctx_deleter> retry_signal_reader::prefixed(
    std::string_view domain) noexcept {
  std::unique_ptr<evp_md_ctx_st, ctx_deleter> ctx(EVP_MD_CTX_new());
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  const bool ok = ctx && md != nullptr && EVP_DigestInit_ex(ctx.get(), md, nullptr) == 1 &&
                  update_part(ctx.get(), domain);
  EVP_MD_free(md);  // the context keeps its own reference
  if (!ok) ctx.reset();
  return ctx;
}

retry_signal_reader::retry_signal_reader(admission::retry_signals_options options)
    : recognizer_(options),
      ctx_(EVP_MD_CTX_new()),
      fingerprint_prefix_(prefixed(k_fingerprint_domain)),
      key_prefix_(prefixed(k_key_domain)) {}

retry_signal_reader::~retry_signal_reader() = default;

std::optional<std::uint64_t> retry_signal_reader::fingerprint(evhttp_request* req) noexcept {
  const std::optional<std::string_view> from = who(req);
  if (!ctx_ || !fingerprint_prefix_ || !from) return std::nullopt;
  const char* target = evhttp_request_get_uri(req);
  EVP_MD_CTX* ctx = ctx_.get();
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  unsigned int size = 0;
  if (EVP_MD_CTX_copy_ex(ctx, fingerprint_prefix_.get()) != 1 || !update_part(ctx, *from) ||
      !update_part(ctx, method_name(evhttp_request_get_command(req))) ||
      !update_part(ctx, target != nullptr ? target : "") ||
      !update_body(ctx, evhttp_request_get_input_buffer(req)) ||
      EVP_DigestFinal_ex(ctx, out.data(), &size) != 1) {
    return std::nullopt;
  }
  return admission::key_from_digest({out.data(), size});
}

retry_signal_reader::recognition retry_signal_reader::recognise(evhttp_request* req,
                                                                time_point now) noexcept {
  admission::retry_labels labels;
  const evkeyvalq* headers = evhttp_request_get_input_headers(req);
  const char* key = nullptr;
  for (const evkeyval* h = headers != nullptr ? headers->tqh_first : nullptr; h != nullptr;
       h = h->next.tqe_next) {
    if (h->key == nullptr || h->value == nullptr) continue;
    labels.field(h->key, h->value);
    if (key == nullptr && evutil_ascii_strcasecmp(h->key, "Idempotency-Key") == 0) key = h->value;
  }
  std::optional<std::uint64_t> key_digest;
  const std::optional<std::string_view> from = who(req);
  if (key != nullptr && from && ctx_ && key_prefix_) {
    EVP_MD_CTX* ctx = ctx_.get();
    std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
    unsigned int size = 0;
    if (EVP_MD_CTX_copy_ex(ctx, key_prefix_.get()) == 1 && update_part(ctx, *from) &&
        update_part(ctx, key) && EVP_DigestFinal_ex(ctx, out.data(), &size) == 1) {
      key_digest = admission::key_from_digest({out.data(), size});
    }
  }
  recognition r;
  r.fingerprint = fingerprint(req);
  const admission::request_signals seen =
      recognizer_.recognise(now, labels, key_digest, r.fingerprint);
  // The other ecosystems' labels say which attempt this is (Graph's counts the retries).
  if (seen.shows(admission::retry_signal::amz_sdk_request)) {
    r.retry_attempt = labels.reading(admission::retry_signal::amz_sdk_request).attempt;
  }
  if (seen.shows(admission::retry_signal::graph_retry_attempt)) {
    r.retry_attempt = std::max(
        r.retry_attempt, labels.reading(admission::retry_signal::graph_retry_attempt).attempt);
  }
  if (seen.repeated_idempotency_key) r.retry_attempt = std::max<std::int64_t>(r.retry_attempt, 2);
  r.weak_retry = seen.fingerprint_after_failure;
  return r;
}

}  // namespace stormguard::lab::detail
