// SPDX-License-Identifier: Apache-2.0
// Internal: the one parser of Redis URLs, shared by the idempotency guard's Redis store and the
// fleet budget's Redis syncer (header-only, standard library only).
//
//   redis://[[USER:]PASSWORD@]HOST[:PORT][/DB]
//   redis+sentinel://[[USER:]PASSWORD@]HOST[:PORT][,HOST[:PORT]]...]/MASTER[/DB]
//
// The second form names Redis Sentinels (PORT default 26379, at most 16) and the name of the
// master they monitor (1 to 200 of A-Z a-z 0-9 . _ -): a client asks them for the master's
// address (SENTINEL get-master-addr-by-name) and asks again after a failover. USER and PASSWORD
// are the master's (the sentinels are asked without them).
//
// USER and PASSWORD may be percent-encoded (RFC 3986 §2.1; "%40" for '@'); HOST may be an IPv6
// address in brackets ([::1]); PORT is 1..65535 (default 6379); DB is 0..2147483647 (default 0).
// A USER without a password is refused (Redis's AUTH takes a password, or a user and a password,
// the ACL form). `rediss://` is refused with a message that TLS needs hiredis >= 1.0, which
// Debian 12 does not have. Errors never contain the password: every message shows the URL
// through redacted().
#ifndef STORMGUARD_DETAIL_REDIS_URL_HPP
#define STORMGUARD_DETAIL_REDIS_URL_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stormguard::detail {

/// A parsed Redis URL.
struct redis_url {
  std::string host;      ///< a name, an IPv4 address, or an IPv6 address without brackets
  int port = 6379;       ///< 1..65535
  std::int64_t db = 0;   ///< the database SELECTed after connecting
  std::string user;      ///< the ACL user; empty = the default user
  std::string password;  ///< empty when has_password is false
  bool has_password = false;
  /// redis+sentinel://: the sentinels' addresses (host, port) in the URL's order, and the name
  /// of the master they monitor; host and port above are then the first sentinel's. Empty for
  /// redis://.
  std::vector<std::pair<std::string, int>> sentinels;
  std::string sentinel_master;  ///< the monitored master's name; empty for redis://
};

/// `url` with the password (if any) replaced by "***": safe to print. Works on unparsable text
/// too: whatever sits between "://" and the last '@' of the text is the user info (a password
/// holding an unencoded '/', '?', '#', '@', space or quote is hidden whole), its part after the
/// first ':' hidden, or all of it when it has no ':'. Text without "://", or whose last '@'
/// precedes "://", is shown from that '@' on, "***" before it.
[[nodiscard]] inline std::string redact_redis_url(std::string_view url) {
  const auto at = url.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos || at < scheme_end + 3) {
    // Not a URL, or its last '@' before "://" ("redis:/u:pw@h", "u:pw@h", "u:pw@h://x"):
    // whatever precedes that '@' may hold a password.
    return "***" + std::string(url.substr(at));
  }
  const std::size_t authority = scheme_end + 3;
  const std::string_view userinfo = url.substr(authority, at - authority);
  const auto colon = userinfo.find(':');
  std::string out(url.substr(0, authority));
  if (colon == std::string_view::npos) {
    out += "***";  // redis://PASSWORD@HOST: the whole userinfo is the password
  } else {
    out += userinfo.substr(0, colon);
    out += ":***";
  }
  out += url.substr(at);
  return out;
}

namespace redis_url_detail {

inline int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `text`; false on a bad escape.
inline bool percent_decode(std::string_view text, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return false;  // "%" or "%X" at the end
    const int hi = hex_value(text[i + 1]);
    const int lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

// 1*DIGIT within [lo, hi].
inline bool decimal(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  if (text.empty() || text.size() > 10) return false;
  std::int64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  out = v;
  return true;
}

}  // namespace redis_url_detail

/// Parses `url` (see the file comment). Throws std::invalid_argument "FIELD \"URL\": why", with
/// `field` naming the setting the URL came from (e.g. "budget.fleet.store") and the URL redacted.
[[nodiscard]] inline redis_url parse_redis_url(std::string_view url, std::string_view field) {
  using namespace redis_url_detail;
  const auto bad = [&](std::string_view why) {
    return std::invalid_argument(std::string(field) + " \"" + redact_redis_url(url) +
                                 "\": " + std::string(why));
  };
  constexpr std::string_view scheme = "redis://";
  constexpr std::string_view sentinel_scheme = "redis+sentinel://";
  if (url.substr(0, 9) == "rediss://") {
    throw bad("TLS (rediss://) needs hiredis >= 1.0, which Debian 12 does not have: use redis://");
  }
  const bool sentinel = url.substr(0, sentinel_scheme.size()) == sentinel_scheme;
  if (!sentinel && url.substr(0, scheme.size()) != scheme) {
    throw bad(
        "expected redis://[[USER:]PASSWORD@]HOST[:PORT][/DB] or "
        "redis+sentinel://[[USER:]PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]");
  }
  std::string_view rest = url.substr(sentinel ? sentinel_scheme.size() : scheme.size());
  if (const auto at = rest.rfind('@');
      at != std::string_view::npos && rest.find_first_of("/?#") < at) {
    throw bad("the user info holds '/', '?' or '#': percent-encode them (%2F, %3F, %23)");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    throw bad("a query or fragment is not supported: redis://[[USER:]PASSWORD@]HOST[:PORT][/DB]");
  }
  redis_url r;
  std::string_view path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (path.empty() && !sentinel) throw bad("an empty DB after '/' (write /0, or no '/')");
  }
  if (sentinel) {
    // /MASTER[/DB]
    const auto slash = path.find('/');
    const std::string_view name = path.substr(0, slash);
    if (name.empty() || name.size() > 200) {
      throw bad(
          "redis+sentinel:// needs /MASTER, the monitored master's name (1 to 200 characters)");
    }
    for (const char c : name) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
      if (!ok) throw bad("MASTER may hold only A-Z a-z 0-9 . _ -");
    }
    r.sentinel_master = std::string(name);
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
    if (slash != std::string_view::npos && path.empty()) {
      throw bad("an empty DB after '/' (write /0, or no '/')");
    }
  }
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = userinfo.find(':');
    const std::string_view user =
        colon == std::string_view::npos ? std::string_view{} : userinfo.substr(0, colon);
    const std::string_view password =
        colon == std::string_view::npos ? userinfo : userinfo.substr(colon + 1);
    if (password.empty()) throw bad("an empty password before '@'");
    if (!percent_decode(user, r.user) || !percent_decode(password, r.password)) {
      throw bad("a bad percent-escape in the user info");
    }
    r.has_password = true;
  }
  // HOST[:PORT] (an IPv6 HOST in brackets) into host and port.
  const auto host_port = [&bad](std::string_view text, std::string& host, int& port_out) {
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
      const auto close = text.find(']');
      if (close == std::string_view::npos) throw bad("'[' without ']' around an IPv6 host");
      host = std::string(text.substr(1, close - 1));
      text.remove_prefix(close + 1);
      if (!text.empty()) {
        if (text.front() != ':') throw bad("expected ':' PORT after the IPv6 host");
        port = text.substr(1);
        if (port.empty()) throw bad("an empty PORT after ':'");
      }
    } else {
      const auto colon = text.find(':');
      host = std::string(text.substr(0, colon));
      if (colon != std::string_view::npos) {
        port = text.substr(colon + 1);
        if (port.empty()) throw bad("an empty PORT after ':'");
      }
    }
    if (host.empty()) throw bad("no HOST");
    for (const char c : host) {
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == ',' || c == '@') {
        throw bad("HOST holds a space, a control character, ',' or '@'");
      }
    }
    std::int64_t value = 0;
    if (!port.empty()) {
      if (!decimal(port, 1, 65535, value)) throw bad("PORT must be a number in [1, 65535]");
      port_out = static_cast<int>(value);
    }
  };
  if (sentinel) {
    constexpr std::size_t k_max_sentinels = 16;
    for (;;) {
      const auto comma = rest.find(',');
      std::pair<std::string, int> one{std::string(), 26379};
      host_port(rest.substr(0, comma), one.first, one.second);
      if (r.sentinels.size() == k_max_sentinels) throw bad("at most 16 sentinels");
      r.sentinels.push_back(std::move(one));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    r.host = r.sentinels.front().first;
    r.port = r.sentinels.front().second;
  } else {
    host_port(rest, r.host, r.port);
  }
  std::int64_t value = 0;
  if (!path.empty()) {
    if (!decimal(path, 0, 2147483647, value)) throw bad("DB must be a number in [0, 2147483647]");
    r.db = value;
  }
  return r;
}

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_REDIS_URL_HPP
