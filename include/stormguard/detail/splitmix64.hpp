// SPDX-License-Identifier: Apache-2.0
// Internal: SplitMix64 (Steele, Lea and Flood, "Fast Splittable Pseudorandom Number
// Generators", OOPSLA 2014), the one implementation used to expand a seed into a generator's
// state (random_generator) and to derive independent seeds (the simulator's clients).
#ifndef STORMGUARD_DETAIL_SPLITMIX64_HPP
#define STORMGUARD_DETAIL_SPLITMIX64_HPP

#include <cstdint>

namespace stormguard::detail {

/// Advances `state` by the golden-ratio increment and returns the mixed output: one step of
/// the SplitMix64 generator.
constexpr std::uint64_t splitmix64_next(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// The SplitMix64 output for state `x` (a pure function: a well-mixed hash of x).
constexpr std::uint64_t splitmix64_mix(std::uint64_t x) noexcept { return splitmix64_next(x); }

}  // namespace stormguard::detail

#endif  // STORMGUARD_DETAIL_SPLITMIX64_HPP
