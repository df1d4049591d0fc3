// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/recent_keys.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using stormguard::duration;
using stormguard::time_point;
using namespace stormguard::admission;

constexpr time_point t0{};

TEST(RecentKeys, ARepeatWithinTheWindowIsSeenAgain) {
  recent_keys keys({.capacity = 64, .window = 10s});
  EXPECT_FALSE(keys.insert(42, t0));
  EXPECT_TRUE(keys.insert(42, t0 + 9s));
  EXPECT_TRUE(keys.contains(42, t0 + 9s));
  EXPECT_FALSE(keys.insert(7, t0 + 9s)) << "another key is new";
}

TEST(RecentKeys, TheWindowSlidesWithEverySighting) {
  recent_keys keys({.capacity = 64, .window = 10s});
  EXPECT_FALSE(keys.insert(42, t0));
  EXPECT_TRUE(keys.insert(42, t0 + 9s));
  EXPECT_TRUE(keys.insert(42, t0 + 18s)) << "9 s after the last sighting";
}

TEST(RecentKeys, ASightingExpiresAtTheEndOfItsWindow) {
  recent_keys keys({.capacity = 64, .window = 10s});
  keys.remember(42, t0);
  EXPECT_TRUE(keys.contains(42, t0 + 10s - 1ns));
  EXPECT_FALSE(keys.contains(42, t0 + 10s)) << "at t + window it is gone";
  EXPECT_FALSE(keys.insert(42, t0 + 10s)) << "expired: a first sighting again";
  EXPECT_TRUE(keys.insert(42, t0 + 11s));
}

TEST(RecentKeys, AnInstantBeforeTheSightingIsWithinTheWindow) {
  recent_keys keys({.capacity = 64, .window = 10s});
  keys.remember(42, t0 + 5s);
  EXPECT_TRUE(keys.contains(42, t0)) << "another thread's older clock reading";
  EXPECT_TRUE(keys.contains(42, time_point::min()));
  EXPECT_FALSE(keys.contains(42, time_point::max())) << "no overflow at the extremes";
}

TEST(RecentKeys, TakeAnswersOncePerRecording) {
  recent_keys keys({.capacity = 64, .window = 10s});
  EXPECT_FALSE(keys.take(42, t0)) << "never recorded";
  keys.remember(42, t0);
  EXPECT_TRUE(keys.take(42, t0 + 1s));
  EXPECT_FALSE(keys.take(42, t0 + 2s)) << "used up";
  keys.remember(42, t0 + 3s);
  EXPECT_FALSE(keys.take(42, t0 + 13s)) << "outside the window";
}

TEST(RecentKeys, KeyZeroIsAKeyLikeAnyOther) {
  recent_keys keys({.capacity = 64, .window = 10s});
  EXPECT_FALSE(keys.insert(0, t0));
  EXPECT_TRUE(keys.insert(0, t0 + 1s));
  EXPECT_EQ(keys.size(t0 + 1s), 1U);
}

TEST(RecentKeys, AtCapacityTheOldestOfABucketIsEvicted) {
  // Capacity 4: one shard, one bucket of 4 entries, so every key collides.
  recent_keys keys({.capacity = 4, .window = 60s});
  ASSERT_EQ(keys.capacity(), 4U);
  for (std::uint64_t k = 1; k <= 4; ++k) keys.remember(k, t0 + std::chrono::seconds(k));
  EXPECT_EQ(keys.size(t0 + 5s), 4U);
  EXPECT_EQ(keys.evictions(), 0);
  keys.remember(5, t0 + 5s);
  EXPECT_EQ(keys.evictions(), 1);
  EXPECT_EQ(keys.size(t0 + 5s), 4U) << "never more than the capacity";
  EXPECT_FALSE(keys.contains(1, t0 + 5s)) << "the oldest went";
  for (std::uint64_t k = 2; k <= 5; ++k) EXPECT_TRUE(keys.contains(k, t0 + 5s)) << k;
  // A refreshed key is no longer the oldest: 2 is seen again, so 3 goes next.
  EXPECT_TRUE(keys.insert(2, t0 + 6s));
  keys.remember(6, t0 + 6s);
  EXPECT_FALSE(keys.contains(3, t0 + 6s));
  EXPECT_TRUE(keys.contains(2, t0 + 6s));
}

TEST(RecentKeys, ExpiredEntriesAreReusedBeforeLiveOnesAreEvicted) {
  recent_keys keys({.capacity = 4, .window = 10s});
  for (std::uint64_t k = 1; k <= 3; ++k) keys.remember(k, t0);
  keys.remember(4, t0 + 5s);
  keys.remember(5, t0 + 12s);  // 1, 2, 3 have expired
  EXPECT_EQ(keys.evictions(), 0);
  EXPECT_TRUE(keys.contains(4, t0 + 12s));
  EXPECT_TRUE(keys.contains(5, t0 + 12s));
}

TEST(RecentKeys, MemoryStaysFixedAtTenTimesTheCapacityInKeys) {
  recent_keys keys({.capacity = 1000, .window = 60s});
  ASSERT_EQ(keys.capacity(), 1024U) << "rounded up to a power of two";
  const std::size_t bytes = keys.memory_bytes();
  EXPECT_GE(bytes, 1024U * 16U);
  EXPECT_LT(bytes, 1024U * 16U + 4096U);
  std::int64_t repeats = 0;
  // One key per nanosecond: every sighting is inside the window, each later than the one before.
  const auto at = [](std::uint64_t k) { return t0 + std::chrono::nanoseconds(k); };
  const auto key = [](std::uint64_t k) { return k * 0x100000001ULL; };
  for (std::uint64_t k = 1; k <= 10'240; ++k) repeats += keys.insert(key(k), at(k)) ? 1 : 0;
  const time_point end = at(10'240);
  EXPECT_EQ(repeats, 0) << "distinct keys never read as repeats";
  EXPECT_EQ(keys.size(end), 1024U) << "full, never more";
  EXPECT_EQ(keys.evictions(), 10'240 - 1024);
  EXPECT_EQ(keys.memory_bytes(), bytes);
  // The most recent keys of a full table are still there (each bucket keeps its newest 4).
  std::size_t recent = 0;
  for (std::uint64_t k = 10'240 - 99; k <= 10'240; ++k)
    recent += keys.contains(key(k), end) ? 1U : 0U;
  EXPECT_GE(recent, 90U);
  EXPECT_FALSE(keys.contains(key(1), end)) << "the first went long ago";
}

TEST(RecentKeys, RefusesCapacityAndWindowOutOfRange) {
  EXPECT_THROW(recent_keys({.capacity = 3, .window = 1s}), std::invalid_argument);
  EXPECT_THROW(recent_keys({.capacity = k_recent_keys_max_capacity + 1, .window = 1s}),
               std::invalid_argument);
  EXPECT_THROW(recent_keys({.capacity = 64, .window = 0s}), std::invalid_argument);
  EXPECT_THROW(recent_keys({.capacity = 64, .window = -1s}), std::invalid_argument);
  EXPECT_THROW(recent_keys({.capacity = 64, .window = 25h}), std::invalid_argument);
  try {
    recent_keys bad({.capacity = 0, .window = 1s});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("recent_keys_options.capacity: 0"), std::string::npos)
        << e.what();
  }
}

TEST(RecentKeys, KeyFromDigestReadsTheFirstEightBytesLittleEndian) {
  const std::array<unsigned char, 10> digest{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(key_from_digest(digest), 0x0807060504030201ULL);
  const std::array<unsigned char, 2> short_digest{0xff, 0x01};
  EXPECT_EQ(key_from_digest(short_digest), 0x01ffULL);
  EXPECT_EQ(key_from_digest({}), 0U);
}

TEST(RecentKeys, ManyThreadsNeverExceedTheCapacity) {
  recent_keys keys({.capacity = 256, .window = 60s});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&keys, t] {
      for (std::uint64_t k = 0; k < 5000; ++k) {
        (void)keys.insert((static_cast<std::uint64_t>(t) << 32U) | k,
                          t0 + std::chrono::microseconds(k));
        (void)keys.take(k, t0);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(keys.size(t0), 256U);
}

}  // namespace
