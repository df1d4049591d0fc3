// SPDX-License-Identifier: Apache-2.0
// Secrets out of messages (include/stormguard/detail/redact.hpp).
#include "stormguard/detail/redact.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace stormguard {
namespace {

char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

bool is_alpha(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_word(char c) noexcept {
  return is_alpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '-';
}
bool is_space(char c) noexcept { return c == ' ' || c == '\t'; }

constexpr std::array<std::string_view, 13> k_secret_keys = {
    "password",      "passwd",  "pwd",    "pass", "secret",      "token",        "access_token",
    "refresh_token", "api_key", "apikey", "auth", "sslpassword", "client_secret"};

constexpr std::array<std::string_view, 7> k_credential_headers = {
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key",
    "api-key",       "x-auth-token"};

constexpr std::array<std::string_view, 2> k_bare_schemes = {"bearer", "basic"};

/// scheme://USERINFO@host: the userinfo's password (or the whole userinfo without ':') → ***.
std::string redact_userinfo(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  for (;;) {
    const std::size_t sep = text.find("://", i);
    if (sep == std::string_view::npos) break;
    const std::size_t start = sep + 3;
    std::size_t end = start;
    while (end < text.size() &&
           std::string_view("/?# \t\r\n\"'<>").find(text[end]) == std::string_view::npos) {
      ++end;
    }
    const std::string_view authority = text.substr(start, end - start);
    const std::size_t at = authority.rfind('@');
    out.append(text.substr(i, start - i));
    if (at == std::string_view::npos || at == 0) {
      out.append(authority);
    } else {
      const std::string_view info = authority.substr(0, at);
      const std::size_t colon = info.find(':');
      if (colon != std::string_view::npos) out.append(info.substr(0, colon + 1));
      out.append(redacted_text);
      out.append(authority.substr(at));
    }
    i = end;
  }
  out.append(text.substr(i));
  return out;
}

/// KEY=VALUE (libpq conninfo, URL query) with a secret KEY → KEY=***.
std::string redact_pairs(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (!is_alpha(text[i]) || (i > 0 && is_word(text[i - 1]))) {
      out.push_back(text[i++]);
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && is_word(text[end])) ++end;
    const std::string_view word = text.substr(i, end - i);
    std::size_t eq = end;
    while (eq < text.size() && is_space(text[eq])) ++eq;
    const bool secret = eq < text.size() && text[eq] == '=' &&
                        std::any_of(k_secret_keys.begin(), k_secret_keys.end(),
                                    [&](std::string_view k) { return iequals(k, word); });
    if (!secret) {
      out.append(word);
      i = end;
      continue;
    }
    std::size_t v = eq + 1;
    while (v < text.size() && is_space(text[v])) ++v;
    std::size_t v_end = v;
    if (v < text.size() && text[v] == '\'') {  // libpq: 'quoted value', \' escapes
      for (v_end = v + 1; v_end < text.size() && text[v_end] != '\''; ++v_end) {
        if (text[v_end] == '\\') ++v_end;
      }
      v_end = std::min(text.size(), v_end + 1);
    } else {
      while (v_end < text.size() &&
             std::string_view(" \t\r\n&;,#\"'").find(text[v_end]) == std::string_view::npos) {
        ++v_end;
      }
    }
    out.append(text.substr(i, v - i));
    if (v_end > v) out.append(redacted_text);
    i = v_end;
  }
  return out;
}

/// "Scheme rest" → "Scheme ***" when the value starts with an authentication scheme word
/// followed by a credential, else "***".
std::string hide_value(std::string_view value) {
  std::size_t word = 0;
  while (word < value.size() && is_alpha(value[word])) ++word;
  if (word > 0 && word < value.size() && is_space(value[word])) {
    return std::string(value.substr(0, word + 1)) + std::string(redacted_text);
  }
  return std::string(redacted_text);
}

/// NAME: VALUE with a credential header NAME → NAME: *** (to the end of the line).
std::string redact_headers(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (!is_alpha(text[i]) || (i > 0 && is_word(text[i - 1]))) {
      out.push_back(text[i++]);
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && is_word(text[end])) ++end;
    const std::string_view name = text.substr(i, end - i);
    std::size_t colon = end;
    while (colon < text.size() && is_space(text[colon])) ++colon;
    if (colon >= text.size() || text[colon] != ':' || !is_credential_header(name)) {
      out.append(name);
      i = end;
      continue;
    }
    std::size_t v = colon + 1;
    while (v < text.size() && is_space(text[v])) ++v;
    std::size_t v_end = v;
    while (v_end < text.size() && text[v_end] != '\r' && text[v_end] != '\n') ++v_end;
    out.append(text.substr(i, v - i));
    if (v_end > v) out.append(hide_value(text.substr(v, v_end - v)));
    i = v_end;
  }
  return out;
}

/// "Bearer TOKEN" / "Basic TOKEN" anywhere → "Bearer ***".
std::string redact_bare_schemes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (!is_alpha(text[i]) || (i > 0 && is_word(text[i - 1]))) {
      out.push_back(text[i++]);
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && is_alpha(text[end])) ++end;
    const std::string_view word = text.substr(i, end - i);
    out.append(word);
    i = end;
    if (end >= text.size() || text[end] != ' ' ||
        std::none_of(k_bare_schemes.begin(), k_bare_schemes.end(),
                     [&](std::string_view s) { return iequals(s, word); })) {
      continue;
    }
    std::size_t t = end + 1;
    std::size_t t_end = t;
    while (t_end < text.size() &&
           std::string_view(" \t\r\n,;\"'").find(text[t_end]) == std::string_view::npos) {
      ++t_end;
    }
    // A credential, not prose ("the bearer of bad news"): at least one character that is not a
    // letter, or 16 letters and more.
    const std::string_view token = text.substr(t, t_end - t);
    const bool credential_like =
        token.size() >= 16 ||
        std::any_of(token.begin(), token.end(), [](char c) { return !is_alpha(c); });
    if (token.empty() || token == redacted_text || !credential_like) continue;
    out.push_back(' ');
    out.append(redacted_text);
    i = t_end;
  }
  return out;
}

}  // namespace

bool is_credential_header(std::string_view name) noexcept {
  return std::any_of(k_credential_headers.begin(), k_credential_headers.end(),
                     [&](std::string_view h) { return iequals(h, name); });
}

std::string redact(std::string_view text) {
  return redact_bare_schemes(redact_headers(redact_pairs(redact_userinfo(text))));
}

std::string redact_header_value(std::string_view name, std::string_view value) {
  if (is_credential_header(name)) return value.empty() ? std::string() : hide_value(value);
  return redact(value);
}

}  // namespace stormguard
