// SPDX-License-Identifier: Apache-2.0
/// \file
/// Which requests may be sent twice, and the Idempotency-Key that
/// makes a non-idempotent request (POST, PATCH) safe to retry.
///
/// A retried request can reach the server twice. For the idempotent methods of RFC 9110 §9.2.2
/// that is harmless; for a POST it may charge a card twice, unless the request carries an
/// Idempotency-Key that the server uses to recognise the repeat
/// (draft-ietf-httpapi-idempotency-key-header). The key is made once per logical request and sent
/// unchanged on every attempt:
///
/// \code{.cpp}
///  const std::string key = stormguard::make_idempotency_key();  // "1b4e28ba-2fa1-41d2-883f-..."
///  headers.emplace_back(stormguard::idempotency_key_header,
///                       stormguard::idempotency_key_field_value(key));   // "\"1b4e28ba-...\""
///  stormguard::is_idempotent_method("POST");                     // false
/// \endcode
///
/// All functions are thread-safe (no shared state).
#ifndef STORMGUARD_IDEMPOTENCY_HPP
#define STORMGUARD_IDEMPOTENCY_HPP

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "stormguard/export.hpp"

namespace stormguard {

/// RFC 9110 §9.2.2 idempotent methods: GET, HEAD, OPTIONS, TRACE, PUT, DELETE. Methods are
/// case-sensitive (RFC 9110 §9.1): "get" is not GET. Every other method (POST, PATCH, CONNECT,
/// an extension method, "") is not idempotent. Never throws.
[[nodiscard]] STORMGUARD_EXPORT bool is_idempotent_method(std::string_view method) noexcept;

/// A new idempotency key: a random (version 4) UUID, RFC 9562 §5.4, from the OS CSPRNG,
/// lowercase 8-4-4-4-12 hex (36 chars). Throws std::system_error when the OS source fails.
///
/// The 122 random bits come from std::random_device constructed with the token "getentropy"
/// (libstdc++: getentropy(3), i.e. the getrandom(2) system call on Linux), falling back to
/// "/dev/urandom" where that token is not supported (libc++, older libstdc++). The default token
/// is not used: libstdc++ maps it to the CPU's RDSEED/RDRAND instructions when present, which are
/// not the OS CSPRNG. Constructs the device on each call (no hidden global state); costs a few
/// system calls, fine once per logical request.
[[nodiscard]] STORMGUARD_EXPORT std::string make_idempotency_key();

/// Formats 16 random bytes as a version 4 UUID (RFC 9562 §5.4): sets the version nibble (the
/// high four bits of byte 6) to 0100 and the variant (the high two bits of byte 8) to 10, and
/// writes the result as lowercase 8-4-4-4-12 hex (36 chars). The other 122 bits are the input's.
/// make_idempotency_key() is this function applied to bytes from the OS CSPRNG; tests use it to
/// check the formatting with known bytes. Never throws except std::bad_alloc.
[[nodiscard]] STORMGUARD_EXPORT std::string format_uuid_v4(
    const std::array<std::uint8_t, 16>& random_bytes);

/// The longest idempotency key accepted, in characters.
inline constexpr std::size_t max_idempotency_key_length = 255;

/// Throws std::invalid_argument naming "idempotency key" and quoting the value (shortened)
/// when `key` is empty, longer than 255 characters, or has a character outside printable
/// ASCII 0x20..0x7E.
///
/// The message quotes the key as every echoed value is (control
/// bytes as `\xNN`, cut after 80 bytes with "... (N bytes)"), and names the position of the first
/// bad character. Every key that passes
/// can be sent in both formats of idempotency_key_format (except as noted there).
STORMGUARD_EXPORT void validate_idempotency_key(std::string_view key);

/// How the Idempotency-Key header value is written.
enum class idempotency_key_format {
  structured,  ///< a structured-field sf-string: "key" with \" and \\ escaped
               ///< (draft-ietf-httpapi-idempotency-key-header; RFC 8941 §3.3.3). Default.
  bare,        ///< the key as is (Stripe's form)
};

/// The header's field value for `key` in `format`; validates the key first (throws as
/// validate_idempotency_key).
///
/// structured: DQUOTE, the key with every '"' and '\' preceded by '\', DQUOTE (RFC 8941 §3.3.3
/// sf-string; the printable range validate_idempotency_key enforces is exactly its character set).
/// bare: the key itself; additionally throws std::invalid_argument when the key begins or ends
/// with a space, because HTTP strips leading and trailing whitespace from a field value (RFC 9110
/// §5.5) and the server would see a different key.
[[nodiscard]] STORMGUARD_EXPORT std::string idempotency_key_field_value(
    std::string_view key, idempotency_key_format format = idempotency_key_format::structured);

/// The header's name.
inline constexpr std::string_view idempotency_key_header = "Idempotency-Key";

}  // namespace stormguard

#endif  // STORMGUARD_IDEMPOTENCY_HPP
