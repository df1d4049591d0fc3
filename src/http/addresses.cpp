// SPDX-License-Identifier: Apache-2.0
// The addresses of a request's host, for hedged copies spread over them (see addresses.hpp).
#include "stormguard/http/addresses.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <asio/ip/tcp.hpp>
#include <charconv>
#include <memory>
#include <system_error>
#include <utility>

#include "stormguard/http/syntax.hpp"

namespace stormguard::http {

namespace {

void add_unique(std::vector<std::string>& out, std::string address) {
  if (std::find(out.begin(), out.end(), address) == out.end()) out.push_back(std::move(address));
}

// getaddrinfo's TCP addresses of host:port, numeric, in its order, without duplicates.
std::vector<std::string> system_addresses(const url_host& where) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(where.port);
  std::vector<std::string> out;
  if (::getaddrinfo(where.host.c_str(), service.c_str(), &hints, &found) != 0) return out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    std::array<char, NI_MAXHOST> text{};
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, text.data(), text.size(), nullptr, 0,
                      NI_NUMERICHOST) != 0) {
      continue;
    }
    add_unique(out, text.data());
  }
  ::freeaddrinfo(found);
  return out;
}

}  // namespace

std::optional<url_host> host_of_url(const std::string& url) {
  const std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> u(curl_url(), &curl_url_cleanup);
  if (u == nullptr || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) {
    return std::nullopt;
  }
  const auto part = [&](CURLUPart which, unsigned flags) -> std::optional<std::string> {
    char* text = nullptr;
    std::optional<std::string> value;
    if (curl_url_get(u.get(), which, &text, flags) == CURLUE_OK && text != nullptr) value = text;
    curl_free(text);
    return value;
  };
  const auto host = part(CURLUPART_HOST, 0);
  const auto port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if (!host || !port) return std::nullopt;
  url_host out{to_lower_ascii(*host), 0};
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  const auto [end, ec] = std::from_chars(port->data(), port->data() + port->size(), out.port);
  if (ec != std::errc{} || end != port->data() + port->size()) return std::nullopt;
  return out;
}

bool is_ip_literal(std::string_view text) noexcept {
  std::array<char, INET6_ADDRSTRLEN + 1> z{};
  if (text.empty() || text.size() >= z.size()) return false;
  std::copy(text.begin(), text.end(), z.begin());
  std::array<unsigned char, sizeof(in6_addr)> binary{};
  return ::inet_pton(AF_INET, z.data(), binary.data()) == 1 ||
         ::inet_pton(AF_INET6, z.data(), binary.data()) == 1;
}

std::optional<resolve_entry> parse_resolve_entry(std::string_view entry) {
  const std::size_t first = entry.find(':');
  if (first == std::string_view::npos || first == 0) return std::nullopt;
  const std::size_t second = entry.find(':', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  resolve_entry out;
  out.host = to_lower_ascii(entry.substr(0, first));
  const std::string_view port = entry.substr(first + 1, second - first - 1);
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
  if (ec != std::errc{} || end != port.data() + port.size() || out.port < 1 || out.port > 65535) {
    return std::nullopt;
  }
  std::string_view rest = entry.substr(second + 1);
  while (true) {
    const std::size_t comma = rest.find(',');
    std::string_view address = rest.substr(0, comma);
    const bool bracketed = address.size() > 2 && address.front() == '[' && address.back() == ']';
    if (bracketed) address = address.substr(1, address.size() - 2);
    // An IPv6 address must be in brackets, as curl reads the entry.
    if (!is_ip_literal(address) || (!bracketed && address.find(':') != std::string_view::npos)) {
      return std::nullopt;
    }
    out.addresses.emplace_back(address);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::optional<std::vector<std::string>> known_host_addresses(
    const std::string& url, const std::vector<std::string>& resolve) {
  const std::optional<url_host> where = host_of_url(url);
  if (!where || is_ip_literal(where->host)) return std::vector<std::string>{};
  for (const std::string& line : resolve) {
    std::optional<resolve_entry> e = parse_resolve_entry(line);
    if (e && e->host == where->host && e->port == where->port) {
      std::vector<std::string> out;
      for (std::string& a : e->addresses) add_unique(out, std::move(a));
      return out;
    }
  }
  return std::nullopt;
}

std::vector<std::string> host_addresses(const std::string& url,
                                        const std::vector<std::string>& resolve) {
  if (std::optional<std::vector<std::string>> known = known_host_addresses(url, resolve)) {
    return std::move(*known);
  }
  const std::optional<url_host> where = host_of_url(url);
  return where ? system_addresses(*where) : std::vector<std::string>{};
}

void asio_host_resolver(const ::asio::any_io_executor& ex, const std::string& host, int port,
                        ::asio::cancellation_slot cancel, resolve_completion done) {
  using ::asio::ip::tcp;
  // Shared by the lookup's handler (which keeps it alive until the lookup ends) and, weakly, by
  // the cancellation handler.
  auto resolver = std::make_shared<tcp::resolver>(ex);
  if (cancel.is_connected()) {
    cancel.assign([weak = std::weak_ptr<tcp::resolver>(resolver)](::asio::cancellation_type) {
      if (const auto r = weak.lock()) r->cancel();
    });
  }
  resolver->async_resolve(
      host, std::to_string(port), tcp::resolver::numeric_service,
      [resolver, cancel, done = std::move(done)](const std::error_code& ec,
                                                 const tcp::resolver::results_type& found) mutable {
        if (cancel.is_connected()) cancel.clear();
        std::vector<std::string> out;
        if (!ec) {
          for (const auto& entry : found) add_unique(out, entry.endpoint().address().to_string());
        }
        done(std::move(out));
      });
}

std::string copy_address(const std::vector<std::string>& addresses, int copy) {
  if (copy < 2 || addresses.size() < 2) return {};
  return addresses[static_cast<std::size_t>(copy - 1) % addresses.size()];
}

}  // namespace stormguard::http
