// SPDX-License-Identifier: Apache-2.0
#include "stormguard/idempotency.hpp"

#include <exception>
#include <random>
#include <stdexcept>
#include <system_error>

#include "stormguard/detail/format.hpp"

namespace stormguard {

namespace {

constexpr bool is_printable(char c) noexcept { return c >= 0x20 && c <= 0x7E; }

// The key for a message: quoted, escaped and cut as every echoed value (quote_for_message).
std::string quoted_for_message(std::string_view key) { return detail::quote_for_message(key); }

// Opens the OS CSPRNG through std::random_device (see make_idempotency_key's comment).
std::random_device open_os_random() {
  try {
    return std::random_device("getentropy");
  } catch (const std::exception&) {
    // Unsupported token (libc++ takes a file name; libstdc++ built without getentropy).
  }
  try {
    return std::random_device("/dev/urandom");
  } catch (const std::system_error&) {
    throw;
  } catch (const std::exception& e) {
    throw std::system_error(std::make_error_code(std::errc::io_error),
                            std::string("idempotency key: no OS random source: ") + e.what());
  }
}

}  // namespace

bool is_idempotent_method(std::string_view method) noexcept {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "TRACE" ||
         method == "PUT" || method == "DELETE";
}

std::string format_uuid_v4(const std::array<std::uint8_t, 16>& random_bytes) {
  std::array<std::uint8_t, 16> b = random_bytes;
  b[6] = static_cast<std::uint8_t>((b[6] & 0x0F) | 0x40);  // version 4 (RFC 9562 §5.4)
  b[8] = static_cast<std::uint8_t>((b[8] & 0x3F) | 0x80);  // variant 10 (RFC 9562 §4.1)
  constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += hex[b[i] >> 4];
    out += hex[b[i] & 0x0F];
  }
  return out;
}

std::string make_idempotency_key() {
  std::array<std::uint8_t, 16> bytes{};
  try {
    std::random_device device = open_os_random();
    for (std::size_t i = 0; i < bytes.size(); i += 4) {
      const std::uint32_t word = device();  // 32 random bits per call
      bytes[i] = static_cast<std::uint8_t>(word);
      bytes[i + 1] = static_cast<std::uint8_t>(word >> 8);
      bytes[i + 2] = static_cast<std::uint8_t>(word >> 16);
      bytes[i + 3] = static_cast<std::uint8_t>(word >> 24);
    }
  } catch (const std::system_error&) {
    throw;
  } catch (const std::exception& e) {
    throw std::system_error(std::make_error_code(std::errc::io_error),
                            std::string("idempotency key: OS random source failed: ") + e.what());
  }
  return format_uuid_v4(bytes);
}

void validate_idempotency_key(std::string_view key) {
  if (key.empty()) {
    throw std::invalid_argument("idempotency key \"\" is empty (1 to " +
                                std::to_string(max_idempotency_key_length) + " characters)");
  }
  if (key.size() > max_idempotency_key_length) {
    throw std::invalid_argument("idempotency key " + quoted_for_message(key) + " is " +
                                std::to_string(key.size()) + " characters long (at most " +
                                std::to_string(max_idempotency_key_length) + ")");
  }
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (!is_printable(key[i])) {
      constexpr char hex[] = "0123456789abcdef";
      const auto byte = static_cast<unsigned char>(key[i]);
      throw std::invalid_argument("idempotency key " + quoted_for_message(key) +
                                  " has the byte 0x" + hex[byte >> 4] + hex[byte & 0x0F] +
                                  " at position " + std::to_string(i) +
                                  ", outside printable ASCII 0x20..0x7E");
    }
  }
}

std::string idempotency_key_field_value(std::string_view key, idempotency_key_format format) {
  validate_idempotency_key(key);
  if (format == idempotency_key_format::bare) {
    if (key.front() == ' ' || key.back() == ' ') {
      throw std::invalid_argument("idempotency key " + quoted_for_message(key) +
                                  " begins or ends with a space, which HTTP strips from a bare "
                                  "field value (send it structured instead)");
    }
    return std::string(key);
  }
  std::string out;
  out.reserve(key.size() + 2);
  out += '"';
  for (const char c : key) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace stormguard
