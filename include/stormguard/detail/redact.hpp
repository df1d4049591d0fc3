// SPDX-License-Identifier: Apache-2.0
// stormguard/detail/redact.hpp: one place that takes secrets out of a message before it is
// printed, logged or sent to a client — passwords and tokens in URLs, in libpq key=value
// connection strings, in query parameters, and in the values of credential header fields.
//
//   redact("postgresql://app:hunter2@db:5432/app")   // "postgresql://app:***@db:5432/app"
//   redact("host=db password=hunter2 dbname=app")    // "host=db password=*** dbname=app"
//   redact("Authorization: Bearer abc.def")          // "Authorization: Bearer ***"
//   redact_header_value("Authorization", "Basic dXNlcjpwdw==")  // "Basic ***"
//
// Every message that may quote a URL, a connection string, a header or a store's error goes
// through redact() before it leaves the process (stderr, a log callback, a response body). The
// rules err on the side of hiding: a URL's whole userinfo is hidden when it has no ':' (a bare
// token such as https://TOKEN@host), its password part otherwise.
//
// Thread-safety: pure functions. Never throw except std::bad_alloc.
#ifndef STORMGUARD_DETAIL_REDACT_HPP
#define STORMGUARD_DETAIL_REDACT_HPP

#include <string>
#include <string_view>

#include "stormguard/export.hpp"

namespace stormguard {

/// What a secret is replaced with.
inline constexpr std::string_view redacted_text = "***";

/// `text` with every secret replaced by "***":
///   - URL userinfo (RFC 3986 §3.2.1) after "scheme://": "user:password@" → "user:***@",
///     "token@" → "***@";
///   - key=value pairs whose key names a secret (password, passwd, pwd, pass, secret, token,
///     access_token, refresh_token, api_key, apikey, auth, sslpassword; case-insensitive), as in
///     libpq connection strings ("password=x", "password='x y'") and URL queries ("?token=x&");
///   - the value after a credential header name followed by ':' (Authorization,
///     Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key, Api-Key, X-Auth-Token), keeping an
///     authentication scheme word (Bearer, Basic, Digest, Token, ...): "Authorization: Bearer ***";
///   - a bare "Bearer TOKEN" or "Basic TOKEN" anywhere: "Bearer ***".
/// Text without secrets is returned unchanged.
[[nodiscard]] STORMGUARD_EXPORT std::string redact(std::string_view text);

/// Whether a header field of this name carries credentials (the names listed for redact();
/// case-insensitive).
[[nodiscard]] STORMGUARD_EXPORT bool is_credential_header(std::string_view name) noexcept;

/// A header field's value as a message may show it: "***" for a credential header (keeping its
/// scheme word: "Bearer ***"), else redact(value).
[[nodiscard]] STORMGUARD_EXPORT std::string redact_header_value(std::string_view name,
                                                                std::string_view value);

}  // namespace stormguard

namespace stormguard::detail {
// The helpers are public (exported from a shared core, used by every library); these names keep
// the internal callers' spelling.
using stormguard::is_credential_header;
using stormguard::redact;
using stormguard::redact_header_value;
using stormguard::redacted_text;
}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_REDACT_HPP
