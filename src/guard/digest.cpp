// SPDX-License-Identifier: Apache-2.0
// The guard's digests (include/stormguard/guard/guard.hpp): a request's fingerprint and a
// principal's stored form, on OpenSSL's libcrypto (EVP SHA-256, HMAC).
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "stormguard/guard/guard.hpp"

namespace stormguard::guard {

namespace {

struct md_ctx_deleter {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};

void digest_part(EVP_MD_CTX* ctx, std::string_view part) {
  std::array<unsigned char, 8> length{};
  auto n = static_cast<std::uint64_t>(part.size());
  for (int i = 7; i >= 0; --i) {
    length[static_cast<std::size_t>(i)] = static_cast<unsigned char>(n & 0xffU);
    n >>= 8U;
  }
  if (EVP_DigestUpdate(ctx, length.data(), length.size()) != 1 ||
      EVP_DigestUpdate(ctx, part.data(), part.size()) != 1) {
    throw std::runtime_error("fingerprint: EVP_DigestUpdate failed");
  }
}

}  // namespace

fingerprint fingerprint_of(std::string_view method, std::string_view target,
                           std::string_view body) {
  std::unique_ptr<EVP_MD_CTX, md_ctx_deleter> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("fingerprint: EVP_DigestInit_ex(SHA-256) failed");
  }
  digest_part(ctx.get(), method);
  digest_part(ctx.get(), target);
  digest_part(ctx.get(), body);
  fingerprint out{};
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(ctx.get(), out.data(), &size) != 1 || size != out.size()) {
    throw std::runtime_error("fingerprint: EVP_DigestFinal_ex failed");
  }
  return out;
}
namespace {

// The domain of the principal's digest: no other use of the key (or of SHA-256) hashes a
// message that begins with it, so no other digest can be replayed as a principal's.
constexpr std::string_view k_principal_domain{"stormguard principal v1\0", 24};

std::string hex_of(const unsigned char* bytes, unsigned int size) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string text;
  text.reserve(size * 2U);
  for (unsigned int i = 0; i < size; ++i) {
    text += hex[bytes[i] >> 4U];
    text += hex[bytes[i] & 0xfU];
  }
  return text;
}

// 64 hex digits of HMAC-SHA-256(key, message), or of SHA-256(message) when `key` is empty.
std::string keyed_hex(std::string_view message, std::string_view key) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  unsigned int size = 0;
  if (key.empty()) {
    if (EVP_Digest(message.data(), message.size(), out.data(), &size, EVP_sha256(), nullptr) != 1) {
      throw std::runtime_error("principal_digest: EVP_Digest(SHA-256) failed");
    }
  } else if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                  out.data(), &size) == nullptr) {
    throw std::runtime_error("principal_digest: HMAC(SHA-256) failed");
  }
  return hex_of(out.data(), size);
}

bool is_hex_digit(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

std::string principal_digest(std::string_view principal, std::string_view key) {
  std::string message;
  message.reserve(k_principal_domain.size() + principal.size());
  message.append(k_principal_domain).append(principal);
  return std::string(principal_digest_prefix) + keyed_hex(message, key);
}

std::string unprefixed_principal_digest(std::string_view principal, std::string_view key) {
  return keyed_hex(principal, key);
}

bool has_principal_digest_form(std::string_view principal) noexcept {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  if (principal.size() >= principal_digest_prefix.size() &&
      std::equal(principal_digest_prefix.begin(), principal_digest_prefix.end(), principal.begin(),
                 [&](char a, char b) { return a == lower(b); })) {
    return true;
  }
  return principal.size() == 64 && std::all_of(principal.begin(), principal.end(), is_hex_digit);
}

}  // namespace stormguard::guard
