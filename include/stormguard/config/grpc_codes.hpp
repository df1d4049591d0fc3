// SPDX-License-Identifier: Apache-2.0
/// \file
/// gRPC status codes in a policy: the set a policy retries over gRPC
/// (`retryable_grpc_codes`, gRFC A6's retryPolicy.retryableStatusCodes) and the set after which
/// a hedged call sends its next copy at once (`hedging.non_fatal_grpc_codes`, A6's
/// hedgingPolicy.nonFatalStatusCodes).
///
/// \code{.unparsed}
///  {"policies": [{"name": "orders", "retries": 3,
///                 "retryable_grpc_codes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]}]}
/// \endcode
///
/// \code{.cpp}
///  stormguard::config::grpc_codes codes;
///  codes.insert(*stormguard::config::grpc_code_of("UNAVAILABLE"));     // 14
///  codes.contains(14);                                                 // true
///  stormguard::config::grpc_code_name(14);                             // "UNAVAILABLE"
/// \endcode
///
/// The names are gRPC's own ("Status codes and their use in gRPC"; grpc/status.h), written in
/// upper case as a service config writes them. The config layer does not link gRPC: the gRPC
/// client's adapter (stormguard/grpc/policy.hpp) turns a set into its status_codes. Plain values
/// and pure functions: thread-safe, never throw, never allocate (but to_vector).
#ifndef STORMGUARD_CONFIG_GRPC_CODES_HPP
#define STORMGUARD_CONFIG_GRPC_CODES_HPP

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace stormguard::config {

/// The 17 gRPC status codes by number: OK (0) to UNAUTHENTICATED (16).
inline constexpr std::array<std::string_view, 17> k_grpc_code_names = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

/// UNAVAILABLE (14): the code of a transient failure, and the one gRPC code that the importers
/// map to HTTP statuses (429, 502, 503, 504: gRPC's HTTP-to-gRPC status table).
inline constexpr int k_grpc_unavailable = 14;

/// The name of `code` ("UNAVAILABLE" for 14), or "" for a number outside 0..16.
[[nodiscard]] constexpr std::string_view grpc_code_name(int code) noexcept {
  return code >= 0 && code <= 16 ? k_grpc_code_names[static_cast<std::size_t>(code)]
                                 : std::string_view();
}

/// The number of the code named `name`, exactly as gRPC writes it ("UNAVAILABLE" → 14; case
/// matters: "unavailable" is no name), or nullopt.
[[nodiscard]] constexpr std::optional<int> grpc_code_of(std::string_view name) noexcept {
  for (std::size_t c = 0; c < k_grpc_code_names.size(); ++c) {
    if (k_grpc_code_names[c] == name) return static_cast<int>(c);
  }
  return std::nullopt;
}

/// A set of gRPC failure codes (1..16; OK is never a failure), as a bit mask: bit c for code c.
class grpc_codes {
 public:
  /// The empty set.
  constexpr grpc_codes() noexcept = default;

  /// The set whose bits are set in `mask`, bits outside 1..16 dropped.
  [[nodiscard]] static constexpr grpc_codes from_mask(std::uint32_t mask) noexcept {
    grpc_codes s;
    s.mask_ = mask & k_valid;
    return s;
  }
  /// Adds `code`; false (and no change) for a number outside 1..16.
  constexpr bool insert(int code) noexcept {
    if (code < 1 || code > 16) return false;
    mask_ |= std::uint32_t{1} << code;
    return true;
  }
  /// True when `code` is in the set (false for any number outside 1..16).
  [[nodiscard]] constexpr bool contains(int code) const noexcept {
    return code >= 1 && code <= 16 && (mask_ >> code & 1U) != 0;
  }
  /// True when the set holds no code.
  [[nodiscard]] constexpr bool empty() const noexcept { return mask_ == 0; }
  /// The set as a mask: bit c for code c.
  [[nodiscard]] constexpr std::uint32_t mask() const noexcept { return mask_; }
  /// The codes, ascending.
  [[nodiscard]] std::vector<int> to_vector() const {
    std::vector<int> out;
    for (int c = 1; c <= 16; ++c) {
      if (contains(c)) out.push_back(c);
    }
    return out;
  }

  /// Two sets are equal when they hold the same codes.
  friend constexpr bool operator==(const grpc_codes&, const grpc_codes&) = default;

 private:
  static constexpr std::uint32_t k_valid = 0x1FFFEU;  // bits 1..16
  std::uint32_t mask_ = 0;
};

/// {UNAVAILABLE}: what the gRPC client retries for an idempotent method when a policy names no
/// codes (gRFC A6's examples; google-cloud-cpp's default).
[[nodiscard]] constexpr grpc_codes default_retryable_grpc_codes() noexcept {
  grpc_codes s;
  s.insert(k_grpc_unavailable);
  return s;
}

}  // namespace stormguard::config

#endif  // STORMGUARD_CONFIG_GRPC_CODES_HPP
