// SPDX-License-Identifier: Apache-2.0
// stormguard/http/addresses.hpp: the addresses of a request's host, for hedged copies that go to
// different ones (gRFC A6: "if the server name resolves to multiple addresses, hedged requests
// should be sent to distinct backends").
//
// The hedging executors (http::async_hedge, http::client with client_options::hedging) resolve
// the host once per call, when a second copy is about to go (a call whose first copy answers in
// time resolves nothing), and pin copy i >= 2 to address (i - 1) mod n through
// request::connect_address; copy 1 is not pinned, so libcurl sends it where its own resolution
// does, the first address (or on a kept-alive connection made so, never on a pinned one).
//
//   const auto addresses = stormguard::http::host_addresses("http://api.example:8080/x", {});
//   req.connect_address = stormguard::http::copy_address(addresses, 2);  // "" or the 2nd address
#ifndef STORMGUARD_HTTP_ADDRESSES_HPP
#define STORMGUARD_HTTP_ADDRESSES_HPP

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/export.hpp"

namespace stormguard::http {

/// One client_options::resolve entry, "HOST:PORT:ADDRESS[,ADDRESS...]" (curl's --resolve).
struct resolve_entry {
  std::string host{};                    ///< the host name, lowercase
  int port = 0;                          ///< 1..65535
  std::vector<std::string> addresses{};  ///< IP literals, without brackets, in the order given
};

/// Whether `text` is an IPv4 literal ("127.0.0.2") or an IPv6 literal without brackets ("::1").
/// Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT bool is_ip_literal(std::string_view text) noexcept;

/// Parses one resolve entry; std::nullopt when it is malformed (no host, a port outside
/// 1..65535, an address that is not an IP literal; an IPv6 address must be in brackets, as curl
/// wants it). Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::optional<resolve_entry> parse_resolve_entry(
    std::string_view entry);

/// The addresses of `url`'s host and port, numeric, without duplicates, in order: the first entry
/// of `resolve` naming that host and port, else the system's resolver (getaddrinfo, TCP; it blocks
/// the calling thread while it runs). Empty when the host is an IP literal (one address: nothing
/// to spread), when the URL cannot be parsed, or when the name does not resolve. Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::vector<std::string> host_addresses(
    const std::string& url, const std::vector<std::string>& resolve);

/// The address copy `copy` (from 1) of a hedged call is pinned to: addresses[(copy - 1) mod n]
/// for copy >= 2 when there are at least 2 addresses; empty otherwise (not pinned). Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::string copy_address(const std::vector<std::string>& addresses,
                                                         int copy);

}  // namespace stormguard::http

#endif  // STORMGUARD_HTTP_ADDRESSES_HPP
