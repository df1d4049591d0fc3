// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/recent_keys.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>
#include <string>

namespace stormguard::admission {

namespace {

constexpr std::uint64_t k_zero_key = 0x9e3779b97f4a7c15ULL;
constexpr std::size_t k_max_shards = 16;

// The key as stored (0 is the free mark).
constexpr std::uint64_t stored(std::uint64_t key) noexcept { return key == 0 ? k_zero_key : key; }

// Spreads the key's bits over the index (splitmix64's finaliser), so that keys that are small
// integers, not digests, still fill every bucket. Not a digest of anything: the keys are.
constexpr std::uint64_t mix(std::uint64_t x) noexcept {
  x ^= x >> 30U;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27U;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31U;
  return x;
}

std::int64_t ns(time_point t) noexcept { return t.time_since_epoch().count(); }

}  // namespace

recent_keys::recent_keys(recent_keys_options options) : window_(options.window) {
  if (options.capacity < k_recent_keys_ways || options.capacity > k_recent_keys_max_capacity) {
    throw std::invalid_argument(
        "recent_keys_options.capacity: " + std::to_string(options.capacity) + " is outside [" +
        std::to_string(k_recent_keys_ways) + ", " + std::to_string(k_recent_keys_max_capacity) +
        "]");
  }
  if (options.window <= duration::zero() || options.window > std::chrono::hours(24)) {
    throw std::invalid_argument(
        "recent_keys_options.window: " + std::to_string(options.window.count()) +
        " ns is outside (0, 24 h]");
  }
  capacity_ = std::bit_ceil(options.capacity);
  const std::size_t buckets = capacity_ / k_recent_keys_ways;
  shard_count_ = std::min(k_max_shards, buckets);
  buckets_per_shard_ = buckets / shard_count_;
  shards_ = std::make_unique<shard[]>(shard_count_);
  for (std::size_t i = 0; i < shard_count_; ++i) {
    const detail::lock hold(shards_[i].mutex);
    shards_[i].entries = std::make_unique<entry[]>(buckets_per_shard_ * k_recent_keys_ways);
  }
}

recent_keys::~recent_keys() = default;

recent_keys::place recent_keys::place_of(std::uint64_t key) const noexcept {
  const std::uint64_t h = mix(key);
  const std::size_t s = static_cast<std::size_t>(h) & (shard_count_ - 1);
  const std::size_t bucket = static_cast<std::size_t>(h >> 4U) & (buckets_per_shard_ - 1);
  return {&shards_[s], bucket * k_recent_keys_ways};
}

bool recent_keys::fresh(std::int64_t seen, std::int64_t now) const noexcept {
  if (now <= seen) return true;  // an instant older than the entry's: within the window
  // now - seen without overflow: both are instants of one clock, but the caller chooses them.
  const auto elapsed = static_cast<std::uint64_t>(now) - static_cast<std::uint64_t>(seen);
  return elapsed < static_cast<std::uint64_t>(window_.count());
}

bool recent_keys::insert(std::uint64_t key, time_point now) noexcept {
  key = stored(key);
  const std::int64_t t = ns(now);
  const place p = place_of(key);
  const detail::lock hold(p.s->mutex);
  entry* const bucket = p.s->entries.get() + p.first;
  entry* free = nullptr;    // a free entry, or one whose sighting left the window
  entry* oldest = nullptr;  // else the entry seen least recently: evicted
  for (std::size_t i = 0; i < k_recent_keys_ways; ++i) {
    entry& e = bucket[i];
    if (e.key == key) {
      const bool repeated = fresh(e.seen, t);
      e.seen = repeated ? std::max(e.seen, t) : t;
      return repeated;
    }
    if (e.key == 0 || !fresh(e.seen, t)) {
      if (free == nullptr) free = &e;
    } else if (oldest == nullptr || e.seen < oldest->seen) {
      oldest = &e;
    }
  }
  entry* const target = free != nullptr ? free : oldest;
  if (free == nullptr) evictions_.fetch_add(1, std::memory_order_relaxed);
  *target = entry{key, t};
  return false;
}

void recent_keys::remember(std::uint64_t key, time_point now) noexcept { (void)insert(key, now); }

bool recent_keys::take(std::uint64_t key, time_point now) noexcept {
  key = stored(key);
  const place p = place_of(key);
  const detail::lock hold(p.s->mutex);
  entry* const bucket = p.s->entries.get() + p.first;
  for (std::size_t i = 0; i < k_recent_keys_ways; ++i) {
    if (bucket[i].key != key) continue;
    const bool present = fresh(bucket[i].seen, ns(now));
    bucket[i] = entry{};
    return present;
  }
  return false;
}

bool recent_keys::contains(std::uint64_t key, time_point now) const noexcept {
  key = stored(key);
  const place p = place_of(key);
  const detail::lock hold(p.s->mutex);
  const entry* const bucket = p.s->entries.get() + p.first;
  for (std::size_t i = 0; i < k_recent_keys_ways; ++i) {
    if (bucket[i].key == key) return fresh(bucket[i].seen, ns(now));
  }
  return false;
}

std::size_t recent_keys::size(time_point now) const noexcept {
  std::size_t n = 0;
  const std::int64_t t = ns(now);
  for (std::size_t s = 0; s < shard_count_; ++s) {
    const detail::lock hold(shards_[s].mutex);
    const entry* const entries = shards_[s].entries.get();
    for (std::size_t i = 0; i < buckets_per_shard_ * k_recent_keys_ways; ++i) {
      if (entries[i].key != 0 && fresh(entries[i].seen, t)) ++n;
    }
  }
  return n;
}

std::size_t recent_keys::memory_bytes() const noexcept {
  return capacity_ * sizeof(entry) + shard_count_ * sizeof(shard);
}

}  // namespace stormguard::admission
