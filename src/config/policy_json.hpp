// SPDX-License-Identifier: Apache-2.0
// Internal to stormguard (stormguard::config and stormguard::sim's scenario parser): one policy
// object of the file format as a JSON value, both ways, and the checks the importers share.
#ifndef STORMGUARD_SRC_CONFIG_POLICY_JSON_HPP
#define STORMGUARD_SRC_CONFIG_POLICY_JSON_HPP

#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detail/strict_json.hpp"
#include "stormguard/config/policy.hpp"

namespace stormguard::config::detail {

/// The deepest nesting of arrays and objects a policy file may have (a policy needs 4).
inline constexpr int k_max_depth = 64;

/// Reads one policy object at `path` ("policies[0]"); throws strict_json::failure.
[[nodiscard]] policy read_policy(const nlohmann::json& value, const std::string& path);

/// The policy as an ordered JSON object in the file format, normalized (see to_json(policy)).
[[nodiscard]] nlohmann::ordered_json policy_json(const policy& p);

/// Reads a client profile (a built-in's name or an object of its fields) at `path`
/// (client_profile.cpp). Throws strict_json::failure.
[[nodiscard]] client_profile read_client_profile(const nlohmann::json& value,
                                                 const std::string& path);

/// The profile in the file format: a built-in's name when it is that built-in, else the object.
[[nodiscard]] nlohmann::ordered_json client_profile_json(const client_profile& p);

/// Checks a policy name (see policy::name); `field` is its path. Throws strict_json::failure.
void check_name(const std::string& field, std::string_view name);

/// Checks that no two policies share a name; `path` is the list's path ("policies"). Throws
/// strict_json::failure naming the second.
void check_unique_names(const std::vector<policy>& policies, const std::string& path);

/// Checks `retry` with the library's own validation (retry_policy), as a backstop to the
/// reader's checks; `field` is the policy's path. Throws strict_json::failure.
void check_retry(const std::string& field, const retry_options& retry);

/// The `hedging` object of the policy `policy_reader` reads (hedging.cpp): checks that the policy
/// has no retries, reads the object into p.hedging (its budget into p.budget). Throws
/// strict_json::failure.
void read_hedging(const nlohmann::json& value,
                  const stormguard::detail::strict_json::object_reader& policy_reader, policy& p);
/// Writes p.hedging into the policy object `j` (policy_json's output): its budget moves inside.
void write_hedging(const policy& p, nlohmann::ordered_json& j);
/// A percentile as a hedging delay is written: 0.95 -> "p95".
[[nodiscard]] std::string format_percentile(double q);
/// A list of HTTP statuses at `path`, and a budget value at `path` (policy.cpp's readers).
[[nodiscard]] retryable_statuses read_status_list(const nlohmann::json& value,
                                                  const std::string& path);
[[nodiscard]] budget_options read_budget_value(const nlohmann::json& value,
                                               const std::string& path);

/// A list of gRPC status codes at `path` (checks.cpp): names as gRPC writes them ("UNAVAILABLE";
/// in any case when `any_case`, as the gRPC importer reads service configs) or numbers 1..16, no
/// repeats, OK refused. Throws strict_json::failure naming the element and quoting the value.
[[nodiscard]] grpc_codes read_grpc_code_list(const nlohmann::json& value, const std::string& path,
                                             bool any_case = false);
/// The codes as a policy file writes them: their names, ascending.
[[nodiscard]] nlohmann::ordered_json grpc_code_names_json(const grpc_codes& codes);

/// An Envoy hedge_policy (RouteAction or VirtualHost) at `path`, applied to the policy `p` read
/// from the retry_policy beside it (hedging.cpp): hedge_on_per_try_timeout maps to hedging with
/// the per-try timeout as delay; the rest are warnings. Throws strict_json::failure.
void apply_envoy_hedge_policy(const nlohmann::json& hedge, const std::string& path, policy& p);

/// The library's message without its "stormguard::type: " prefix (strict_json.hpp).
using stormguard::detail::strict_json::library_message;

/// A protobuf JSON Duration ("0.1s", "25s") at `key` of `r`: decimal seconds with the suffix s,
/// in (0, max], or [0, max] when `zero_allowed`. Throws strict_json::failure.
[[nodiscard]] duration proto_duration(const stormguard::detail::strict_json::object_reader& r,
                                      std::string_view key, duration max,
                                      bool zero_allowed = false);
/// A protobuf integer at `key` of `r`, in [lo, hi]. Throws strict_json::failure.
[[nodiscard]] std::int64_t proto_integer(const stormguard::detail::strict_json::object_reader& r,
                                         std::string_view key, std::int64_t lo, std::int64_t hi);

/// The importers (import.cpp, import_envoy.cpp): every policy found in `text`. Throw
/// strict_json::failure.
[[nodiscard]] std::vector<policy> import_grpc(std::string_view text);
[[nodiscard]] std::vector<policy> import_envoy(std::string_view text);
/// The policy a gRPC name selects among imported gRPC policies: the one of that name, else for
/// "service/method" the service-wide one ("service", with a warning saying so); nullopt if none.
[[nodiscard]] std::optional<policy> select_grpc_policy(const std::vector<policy>& policies,
                                                       std::string_view name);

}  // namespace stormguard::config::detail

#endif  // STORMGUARD_SRC_CONFIG_POLICY_JSON_HPP
