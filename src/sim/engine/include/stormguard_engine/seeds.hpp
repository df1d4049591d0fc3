// SPDX-License-Identifier: Apache-2.0
// What the simulator's models share (the internal engine target stormguard_sim_engine): seed
// derivation and the budget class behind each kind of budget_config.
#ifndef STORMGUARD_ENGINE_SEEDS_HPP
#define STORMGUARD_ENGINE_SEEDS_HPP

#include <cstdint>
#include <string_view>

#include "stormguard/budget_kinds.hpp"
#include "stormguard/detail/splitmix64.hpp"

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

// The budget class a budget_options alternative stands for: the options type names it
// (O::budget_type, budget_kinds.hpp), so a new kind needs nothing here.
template <class Options>
struct budget_for {
  using type = typename Options::budget_type;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_SEEDS_HPP
