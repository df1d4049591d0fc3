// SPDX-License-Identifier: Apache-2.0
// Internal to stormguard::config: what the three writers of `policy export` (export_envoy.cpp,
// export_grpc.cpp, export_linkerd.cpp) and the policy writer (policy.cpp) share, defined in
// export_format.cpp (which calls none of them): compact JSON arrays, durations in the targets'
// spellings, the budget's ratio settings, words for warnings.
#ifndef STORMGUARD_SRC_CONFIG_EXPORT_FORMAT_HPP
#define STORMGUARD_SRC_CONFIG_EXPORT_FORMAT_HPP

#include <optional>
#include <string>
#include <vector>

#include "stormguard/config/policy.hpp"

namespace stormguard::config::detail {

/// JSON text (as nlohmann's dump(2) writes it) with every array of plain numbers or of code names
/// ([A-Z0-9_]) on one line ("[429, 502, 503, 504]", "[\"UNAVAILABLE\"]") rather than one item per
/// line: policy files (policy.cpp's to_json) and the exports' JSON.
[[nodiscard]] std::string compact_arrays(const std::string& text);

/// A protobuf JSON Duration: decimal seconds with the suffix s, at most 9 decimals, trailing
/// zeros dropped ("0.1s", "3s", "0.000000001s"). `d` >= 0.
[[nodiscard]] std::string proto_seconds(duration d);

/// A Go duration as Kubernetes resources write it ("10s", "250ms", "1500us", "7ns"): the largest
/// of s, ms, us, ns that gives a whole number. `d` >= 0.
[[nodiscard]] std::string go_duration(duration d);

/// The ratio budget of `budget` (a ratio budget, or a fleet budget's ratio), or nullopt.
[[nodiscard]] std::optional<ratio_budget_options> ratio_of(const budget_options& budget);

/// "ratio", "token_bucket", ... and, for a fleet budget, "ratio with a fleet".
[[nodiscard]] std::string budget_words(const budget_options& budget);

/// HTTP statuses as a list for a message: "429, 502, 503, 504" ("none" when empty).
[[nodiscard]] std::string status_list(const std::vector<int>& statuses);

/// gRPC codes by name for a message: "UNAVAILABLE, ABORTED" ("none" when empty).
[[nodiscard]] std::string code_list(const grpc_codes& codes);

/// The HTTP statuses the importers give for `codes`: 429, 502, 503, 504 when they hold
/// UNAVAILABLE (gRPC's HTTP-to-gRPC status table), else none.
[[nodiscard]] retryable_statuses statuses_implied_by(const grpc_codes& codes);

/// True when the policy's max_retry_after is the default (60 s), which every import gives back.
[[nodiscard]] bool default_max_retry_after(const policy& p);

}  // namespace stormguard::config::detail

#endif  // STORMGUARD_SRC_CONFIG_EXPORT_FORMAT_HPP
