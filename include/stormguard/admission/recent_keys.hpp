// SPDX-License-Identifier: Apache-2.0
/// \file
/// A fixed-capacity table of recently seen 64-bit keys with the instant each was last seen: the
/// memory behind the retry signals that need one (stormguard/admission/retry_signals.hpp), a
/// repeated Idempotency-Key and a request fingerprint seen again after a failed answer.
///
/// Keys are digests the caller computes (for example the first 8 bytes of a SHA-256 of the
/// request, key_from_digest); the table never sees the request itself and never grows: its
/// memory is fixed at construction (memory_bytes(): 16 bytes per entry plus one mutex per
/// shard). When the entries a key may use are all taken by keys still inside the window, the one
/// seen least recently is evicted (and counted, evictions()); a key whose last sighting is older
/// than the window counts as absent.
///
/// \code{.cpp}
///  stormguard::admission::recent_keys keys({.capacity = 1 << 16, .window =
///  std::chrono::seconds(60)}); const bool repeated = keys.insert(key, now);  // true: `key` was
///  seen within the last 60 s keys.remember(fingerprint, now);              // an answer to
///  `fingerprint` failed at `now` if (keys.take(fingerprint, later)) { ... }    // seen again
///  within the window: a retry
/// \endcode
///
/// Layout: the capacity is rounded up to a power of two and split into shards (at most 16, each
/// with its own mutex) of buckets of k_recent_keys_ways entries; a key may live only in the
/// bucket its (mixed) bits choose, so keys that collide on a bucket evict each other first.
/// Thread-safe: every call locks the one shard of its key for a few compares; no allocation
/// after construction; never throws after construction.
#ifndef STORMGUARD_ADMISSION_RECENT_KEYS_HPP
#define STORMGUARD_ADMISSION_RECENT_KEYS_HPP

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/export.hpp"

namespace stormguard::admission {

/// Entries per bucket: a key may be kept in any of this many entries of its bucket.
inline constexpr std::size_t k_recent_keys_ways = 4;
/// The largest capacity a recent_keys accepts (2^26 entries: 1 GiB).
inline constexpr std::size_t k_recent_keys_max_capacity = std::size_t{1} << 26;

/// The settings of a recent_keys table.
struct recent_keys_options {
  /// Entries kept at most, in [k_recent_keys_ways, k_recent_keys_max_capacity]; rounded up to a
  /// power of two. Each entry is 16 bytes: the default 65,536 entries take 1 MiB.
  std::size_t capacity = std::size_t{1} << 16;
  /// How long a sighting counts, in (0, 24 h]: a key last seen at t is present at instants before
  /// t + window.
  duration window = std::chrono::seconds(60);
};

/// The first 8 bytes of `digest` as a key (little-endian; a shorter digest is padded with zero
/// bytes). For a digest the caller computed with a cryptographic hash (SHA-256: OpenSSL's
/// EVP_Digest), so that two requests share a key with probability 2^-64.
[[nodiscard]] constexpr std::uint64_t key_from_digest(
    std::span<const unsigned char> digest) noexcept {
  std::uint64_t key = 0;
  for (std::size_t i = 0; i < 8 && i < digest.size(); ++i) {
    key |= std::uint64_t{digest[i]} << (8U * i);
  }
  return key;
}

/// A fixed-capacity table of recently seen keys: see the file comment. Thread-safe.
///
/// Key 0 marks a free entry inside the table, so the key 0 is kept as the key
/// 0x9e3779b97f4a7c15 (the two are one key; a digest is either with probability 2^-64).
class STORMGUARD_EXPORT recent_keys {
 public:
  /// Allocates the table. Throws std::invalid_argument naming the field and the value for a
  /// capacity or window out of range; std::bad_alloc.
  explicit recent_keys(recent_keys_options options = {});
  ~recent_keys();
  recent_keys(const recent_keys&) = delete;
  recent_keys& operator=(const recent_keys&) = delete;

  /// Records a sighting of `key` at `now` and says whether it had been seen within the window
  /// before (a repeat). The entry's instant becomes `now` either way (a sliding window: a key
  /// seen every 10 s with a 60-s window stays present). An instant older than the entry's is
  /// within the window.
  [[nodiscard]] bool insert(std::uint64_t key, time_point now) noexcept;
  /// Records `key` at `now` without asking (as insert, the answer dropped).
  void remember(std::uint64_t key, time_point now) noexcept;
  /// Whether `key` was recorded within the window before `now`; if so its entry is freed, so
  /// one recording answers true once.
  [[nodiscard]] bool take(std::uint64_t key, time_point now) noexcept;
  /// Whether `key` was recorded within the window before `now` (nothing changes).
  [[nodiscard]] bool contains(std::uint64_t key, time_point now) const noexcept;
  /// The keys present at `now` (recorded within the window), counted over every shard (each
  /// shard locked in turn: not one instant). At most capacity().
  [[nodiscard]] std::size_t size(time_point now) const noexcept;

  /// Entries, after rounding: a power of two, at least k_recent_keys_ways.
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// The window, as given.
  [[nodiscard]] duration window() const noexcept { return window_; }
  /// Bytes the table holds for its entries and shards (the object itself is a few words more);
  /// fixed at construction: 16 × capacity() + one shard header per shard.
  [[nodiscard]] std::size_t memory_bytes() const noexcept;
  /// Keys evicted while still inside the window to make room for another (bucket full).
  [[nodiscard]] std::int64_t evictions() const noexcept {
    return evictions_.load(std::memory_order_relaxed);
  }

 private:
  struct entry {
    std::uint64_t key = 0;  // 0: free
    std::int64_t seen = 0;  // ns since the clock's epoch
  };
  struct shard {
    mutable detail::mutex mutex;
    std::unique_ptr<entry[]> entries STORMGUARD_GUARDED_BY(mutex);  // read under the lock
  };
  // Where `key` may live: its shard and the first entry of its bucket.
  struct place {
    shard* s;
    std::size_t first;
  };
  [[nodiscard]] place place_of(std::uint64_t key) const noexcept;
  [[nodiscard]] bool fresh(std::int64_t seen, std::int64_t now) const noexcept;

  std::size_t capacity_;
  duration window_;
  std::size_t shard_count_;        // a power of two, at most 16
  std::size_t buckets_per_shard_;  // a power of two
  std::unique_ptr<shard[]> shards_;
  std::atomic<std::int64_t> evictions_{0};
};

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_RECENT_KEYS_HPP
