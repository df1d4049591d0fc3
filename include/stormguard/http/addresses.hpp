// SPDX-License-Identifier: Apache-2.0
/// \file
/// The addresses of a request's host, for hedged copies that go to
/// different ones (gRFC A6: "if the server name resolves to multiple addresses, hedged requests
/// should be sent to distinct backends").
///
/// The hedging executors (http::async_hedge, http::client with client_options::hedging) look the
/// host up once per call, when a second copy is about to go (a call whose first copy answers in
/// time looks nothing up), and pin copy i >= 2 to address (i - 1) mod n through
/// request::connect_address; copy 1 is not pinned, so libcurl sends it where its own resolution
/// does, the first address (or on a kept-alive connection made so, never on a pinned one).
///
/// Where the addresses come from, without blocking the event loop: known_host_addresses answers
/// at once for an IP literal (nothing to spread) and for a client_options::resolve entry (no DNS
/// at all); only a name without an entry goes to a host_resolver, asynchronously (by default
/// asio_host_resolver: getaddrinfo on Asio's internal resolver thread, never on the thread that
/// runs the client's executor). host_addresses is the blocking form, for code off any event loop.
///
/// \code{.cpp}
///  const auto addresses = stormguard::http::host_addresses("http://api.example:8080/x", {});
///  req.connect_address = stormguard::http::copy_address(addresses, 2);  // "" or the 2nd address
/// \endcode
#ifndef STORMGUARD_HTTP_ADDRESSES_HPP
#define STORMGUARD_HTTP_ADDRESSES_HPP

#include <asio/any_io_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <functional>
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

/// The host and port of an absolute URL.
struct url_host {
  std::string host{};  ///< lowercase; an IPv6 literal without its brackets
  int port = 0;        ///< the URL's port, or its scheme's default
};

/// The host and port of `url` (libcurl's URL parser); std::nullopt when it cannot be parsed.
/// Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::optional<url_host> host_of_url(const std::string& url);

/// The addresses of `url`'s host and port that are known without asking the system's resolver,
/// numeric, without duplicates, in order: empty when the host is an IP literal (one address:
/// nothing to spread) or the URL cannot be parsed; the first entry of `resolve` naming that host
/// and port. std::nullopt when only the system's resolver can say (a name without an entry).
/// Never blocks; thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::optional<std::vector<std::string>> known_host_addresses(
    const std::string& url, const std::vector<std::string>& resolve);

/// The addresses of `url`'s host and port, numeric, without duplicates, in order:
/// known_host_addresses, else the system's resolver (getaddrinfo, TCP). Empty when the host is an
/// IP literal, when the URL cannot be parsed, or when the name does not resolve. Blocks the calling
/// thread while getaddrinfo runs (up to the resolver's time-outs, seconds when a DNS server does
/// not answer): never call it on a thread that runs an event loop; the hedging executors use a
/// host_resolver instead. Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::vector<std::string> host_addresses(
    const std::string& url, const std::vector<std::string>& resolve);

/// The address copy `copy` (from 1) of a hedged call is pinned to: addresses[(copy - 1) mod n]
/// for copy >= 2 when there are at least 2 addresses; empty otherwise (not pinned). Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::string copy_address(const std::vector<std::string>& addresses,
                                                         int copy);

/// The completion of a host_resolver: the host's addresses, numeric, without duplicates, in the
/// resolver's order; empty when the name does not resolve or the resolution was cancelled.
using resolve_completion = std::function<void(std::vector<std::string> addresses)>;

/// An asynchronous lookup of a host name for hedged copies (hedge_http_options::resolver):
/// resolver(ex, host, port, cancel, done) starts the lookup of `host` (lowercase, never an IP
/// literal) and `port` (1..65535) and returns without blocking. It is called on the thread that
/// runs `ex` (the client's executor) and must call `done` exactly once, on that executor's thread
/// (from a handler it dispatched or posted, or inside the call), also after `cancel` was emitted
/// (then with what it has: usually nothing). `cancel` (any cancellation type: the call ended, the
/// addresses are no longer wanted) stays valid until `done` is called; an implementation that
/// cannot stop a lookup may ignore it. An exception thrown by the resolver counts as a name that
/// did not resolve (the copies go unpinned). The default is asio_host_resolver; tests give their
/// own (a lookup that completes after a timer, say).
using host_resolver =
    std::function<void(const ::asio::any_io_executor& ex, const std::string& host, int port,
                       ::asio::cancellation_slot cancel, resolve_completion done)>;

/// The default host_resolver: asio::ip::tcp::resolver::async_resolve on `ex` (Asio 1.22 runs
/// getaddrinfo on its internal resolver thread, one per execution context, started at the first
/// lookup; the thread that runs `ex` never blocks), TCP, numeric service, no AI_ADDRCONFIG (as
/// host_addresses); `done` runs on `ex`. `cancel` calls resolver::cancel: a lookup that
/// getaddrinfo has not begun ends at once (done with nothing); one that getaddrinfo is running
/// cannot be interrupted, so it finishes on Asio's thread and its handler then runs on `ex` (it
/// only frees its memory: the hedged call completed long before). Until then the executor's
/// io_context has work (run() does not return), and destroying the io_context joins Asio's
/// resolver thread. The resolver object lives as long as its lookup. Thread-safety: as a
/// host_resolver (called on `ex`'s thread).
STORMGUARD_EXPORT void asio_host_resolver(const ::asio::any_io_executor& ex,
                                          const std::string& host, int port,
                                          ::asio::cancellation_slot cancel,
                                          resolve_completion done);

}  // namespace stormguard::http

#endif  // STORMGUARD_HTTP_ADDRESSES_HPP
