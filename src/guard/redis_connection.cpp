// SPDX-License-Identifier: Apache-2.0
// The Redis store's connection layer (src/guard/redis_connection.hpp).
#include "guard/redis_connection.hpp"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <limits>
#include <stdexcept>

#include "stormguard/detail/format.hpp"

namespace stormguard::guard::internal {

endpoint parse_url(const std::string& url) {
  auto bad = [&](std::string_view why) {
    return std::invalid_argument("redis_options.url " + detail::quote_for_message(url) + ": " +
                                 std::string(why));
  };
  constexpr std::string_view scheme = "redis://";
  std::string_view rest = url;
  if (rest.substr(0, scheme.size()) != scheme) {
    throw bad("expected redis://HOST[:PORT][/DB]");
  }
  rest.remove_prefix(scheme.size());
  if (rest.find_first_of("@?#") != std::string_view::npos) {
    throw bad("user info, query and fragment are not supported: redis://HOST[:PORT][/DB]");
  }
  endpoint e;
  std::string_view path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (path.empty()) throw bad("an empty DB after '/' (write redis://HOST:PORT/0, or no '/')");
  }
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) throw bad("'[' without ']' around an IPv6 host");
    e.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw bad("expected ':' PORT after the IPv6 host");
      port = rest.substr(1);
      if (port.empty()) throw bad("an empty PORT after ':'");
    }
  } else {
    const auto colon = rest.find(':');
    e.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) throw bad("an empty PORT after ':'");
    }
  }
  if (e.host.empty()) throw bad("no HOST");
  auto parse_number = [](std::string_view digits, long long& out) {
    if (digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc{} && end == digits.data() + digits.size();
  };
  if (!port.empty()) {
    long long p = 0;
    if (!parse_number(port, p) || p < 1 || p > 65535) {
      throw bad("PORT " + detail::quote_for_message(port) + " is not 1..65535");
    }
    e.port = static_cast<int>(p);
  }
  if (!path.empty()) {
    if (!parse_number(path, e.db) || e.db > std::numeric_limits<int>::max()) {
      throw bad("DB " + detail::quote_for_message(path) + " is not a database number 0..2^31-1");
    }
  }
  return e;
}

}  // namespace stormguard::guard::internal
