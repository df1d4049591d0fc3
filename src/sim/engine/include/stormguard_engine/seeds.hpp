// SPDX-License-Identifier: Apache-2.0
// What the simulator's models share (the internal engine target stormguard_sim_engine): seed
// derivation and the budget class behind each kind of budget_config.
#ifndef STORMGUARD_ENGINE_SEEDS_HPP
#define STORMGUARD_ENGINE_SEEDS_HPP

#include <cstdint>
#include <string_view>

#include "stormguard/budget.hpp"
#include "stormguard/detail/splitmix64.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/retry_breaker.hpp"

namespace stormguard::sim::seeds {

// SplitMix64 (Steele, Lea and Flood 2014; the core's one implementation), used to derive
// independent seeds.
constexpr std::uint64_t mix(std::uint64_t x) noexcept { return detail::splitmix64_mix(x); }
constexpr std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept { return mix(a ^ mix(b)); }

// Domain tags so that the streams derived from one scenario seed never coincide. The lab's server
// (src/lab/server.cpp) draws its service times and incident draws from the same streams.
inline constexpr std::uint64_t k_tag_arrivals = 0x6172726976616c73ULL;  // "arrivals"
inline constexpr std::uint64_t k_tag_service = 0x73657276696365ULL;     // "service"
inline constexpr std::uint64_t k_tag_incident = 0x696e636964656e74ULL;  // "incident"
inline constexpr std::uint64_t k_tag_stall = 0x7374616c6cULL;           // "stall"

// FNV-1a: a stable hash of a name (std::hash differs between standard libraries).
constexpr std::uint64_t fnv1a(std::string_view text) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace stormguard::sim::seeds

namespace stormguard::sim {

// The budget class a budget_config alternative stands for. A new kind of budget (a strategy such
// as full+throttle) adds its options type to budget_config and a specialisation here.
template <class Config>
struct budget_for;
template <>
struct budget_for<no_budget> {
  using type = no_budget;
};
template <>
struct budget_for<ratio_budget_options> {
  using type = ratio_budget;
};
template <>
struct budget_for<token_bucket_throttle_options> {
  using type = token_bucket_throttle;
};
template <>
struct budget_for<retry_quota_options> {
  using type = retry_quota;
};
template <>
struct budget_for<adaptive_throttle_options> {
  using type = adaptive_throttle;
};
template <>
struct budget_for<concurrency_budget_options> {
  using type = concurrency_budget;
};
template <>
struct budget_for<fleet_budget_options> {
  using type = fleet_budget;
};
template <>
struct budget_for<retry_breaker_options> {
  using type = retry_breaker;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_SEEDS_HPP
