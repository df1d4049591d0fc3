// SPDX-License-Identifier: Apache-2.0
// Internal to stormguard::config: the `fleet` object of a ratio budget in policy files (a
// stormguard::fleet_budget_options), both ways. Reading never contacts the store.
#ifndef STORMGUARD_SRC_CONFIG_FLEET_JSON_HPP
#define STORMGUARD_SRC_CONFIG_FLEET_JSON_HPP

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "stormguard/budget_kinds.hpp"

namespace stormguard::config::detail {

/// The budget object at `path` (`fields`, a JSON object or empty) when it is a fleet budget:
/// kind "ratio" (or "fleet") with a `fleet` object. nullopt when it is not one (no `fleet`,
/// another kind: read as usual). Throws strict_json::failure naming the field for a `fleet` on
/// another kind, kind "fleet" without `fleet`, and every bad fleet setting (missing key, a URL
/// that is not redis://, an interval outside [10ms, 10s], ...).
[[nodiscard]] std::optional<budget_options> read_fleet_budget(std::string_view kind,
                                                              const nlohmann::json& fields,
                                                              const std::string& path,
                                                              const std::string& kind_field);

/// Writes a fleet budget as policy files do: {"kind": "ratio", ratio fields..., "fleet": {...}}
/// into `b` (which holds the kind and the ratio fields already); the store URL's password, if
/// any, as "***" (stormguard::redact). Nothing for another kind.
void write_fleet_budget(const budget_options& options, nlohmann::ordered_json& b);

}  // namespace stormguard::config::detail

#endif  // STORMGUARD_SRC_CONFIG_FLEET_JSON_HPP
