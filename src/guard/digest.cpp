// SPDX-License-Identifier: Apache-2.0
// The guard's digests (include/stormguard/guard/guard.hpp): a request's fingerprint and a
// principal's stored form, on OpenSSL's libcrypto (EVP SHA-256, HMAC).
#include <openssl/evp.h>
#include <openssl/hmac.h>

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
std::string principal_digest(std::string_view principal, std::string_view key) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  unsigned int size = 0;
  if (key.empty()) {
    if (EVP_Digest(principal.data(), principal.size(), out.data(), &size, EVP_sha256(), nullptr) !=
        1) {
      throw std::runtime_error("principal_digest: EVP_Digest(SHA-256) failed");
    }
  } else if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(principal.data()), principal.size(),
                  out.data(), &size) == nullptr) {
    throw std::runtime_error("principal_digest: HMAC(SHA-256) failed");
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string text;
  text.reserve(size * 2U);
  for (unsigned int i = 0; i < size; ++i) {
    text += hex[out[i] >> 4U];
    text += hex[out[i] & 0xfU];
  }
  return text;
}

}  // namespace stormguard::guard
