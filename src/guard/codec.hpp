// SPDX-License-Identifier: Apache-2.0
// The byte encodings the stores share (src/guard/*_store.cpp): times as integers, and a stored
// response's headers as one length-prefixed blob. Internal.
#ifndef STORMGUARD_SRC_GUARD_CODEC_HPP
#define STORMGUARD_SRC_GUARD_CODEC_HPP

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/guard/store.hpp"

namespace stormguard::guard::internal {

/// A wall time as integer nanoseconds since the Unix epoch (what the stores keep).
[[nodiscard]] inline std::int64_t to_ns(wall_time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
[[nodiscard]] inline wall_time_point from_ns(std::int64_t ns) noexcept {
  return wall_time_point(std::chrono::duration_cast<duration>(std::chrono::nanoseconds(ns)));
}
/// now + d, saturating at the int64 range (a ttl of 366 days never overflows, but stay safe).
[[nodiscard]] inline std::int64_t add_ns(wall_time_point now, duration d) noexcept {
  const std::int64_t a = to_ns(now);
  const std::int64_t b = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? INT64_MAX : INT64_MIN;
  return out;
}

/// Headers as: for each, 4-byte big-endian name length, name, 4-byte value length, value.
[[nodiscard]] inline std::string encode_headers(
    const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out;
  auto put = [&](std::string_view s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    for (int shift = 24; shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((n >> static_cast<unsigned>(shift)) & 0xffU));
    }
    out.append(s);
  };
  for (const auto& [name, value] : headers) {
    put(name);
    put(value);
  }
  return out;
}

/// The inverse of encode_headers; nullopt when `blob` is not such an encoding (a corrupt row).
[[nodiscard]] inline std::optional<std::vector<std::pair<std::string, std::string>>> decode_headers(
    std::string_view blob) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t i = 0;
  auto take = [&](std::string& s) {
    if (blob.size() - i < 4) return false;
    std::uint32_t n = 0;
    for (int k = 0; k < 4; ++k) n = (n << 8U) | static_cast<unsigned char>(blob[i++]);
    if (blob.size() - i < n) return false;
    s.assign(blob.substr(i, n));
    i += n;
    return true;
  };
  while (i < blob.size()) {
    std::pair<std::string, std::string> h;
    if (!take(h.first) || !take(h.second)) return std::nullopt;
    out.push_back(std::move(h));
  }
  return out;
}

/// The version of the stored records' layout (a SQL store's table, a Redis store's hashes). Every
/// store keeps it beside its records (SQL: the one row of the table `<table>_schema`; Redis: the
/// key `<prefix>:schema`), written when the store is first opened. A store that holds no version
/// was written before versions were kept, in layout 1 (the only layout so far), and is marked
/// version 1 when opened. A store of any other version is refused at open (schema_check), so that
/// two builds never read each other's records as their own. Bump it, with a changelog line, when
/// the layout changes.
inline constexpr int k_record_schema_version = 1;

/// Checks the version a store holds (its text as read, e.g. "1"): throws store_error naming
/// `where` (the store), the version found and the version this build uses unless they agree.
inline void schema_check(std::string_view where, std::string_view found) {
  if (found == std::to_string(k_record_schema_version)) return;
  throw store_error(std::string(where) + " holds records of schema version " +
                    detail::quote_for_message(found, 20) +
                    "; this build of stormguard reads and writes " + "schema version " +
                    std::to_string(k_record_schema_version) +
                    ": open it with a build of its version, or give this build another " +
                    "table (SQL) or prefix (Redis)");
}

}  // namespace stormguard::guard::internal

#endif  // STORMGUARD_SRC_GUARD_CODEC_HPP
