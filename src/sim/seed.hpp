// Seed derivation shared by the simulator's models (private to stormguard::sim).
#ifndef STORMGUARD_SRC_SIM_SEED_HPP
#define STORMGUARD_SRC_SIM_SEED_HPP

#include <cstdint>
#include <string_view>

namespace stormguard::sim::seeds {

// SplitMix64's finaliser (Steele, Lea and Flood 2014), used to derive independent seeds.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
constexpr std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept { return mix(a ^ mix(b)); }

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

#endif  // STORMGUARD_SRC_SIM_SEED_HPP
