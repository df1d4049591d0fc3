// SPDX-License-Identifier: Apache-2.0
#include "stormguard/clock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <vector>

#include "stormguard/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::duration;
using stormguard::real_clock;
using stormguard::time_point;
using stormguard::testing::manual_clock;

TEST(ManualClock, StartsAtTheEpochOrTheGivenInstant) {
  EXPECT_EQ(manual_clock().now(), time_point{});
  const time_point start = time_point{} - 5h;  // before the epoch is fine for a virtual clock
  EXPECT_EQ(manual_clock(start).now(), start);
}

TEST(ManualClock, SleepAdvancesTimeAndIsRecorded) {
  manual_clock clock;
  EXPECT_TRUE(clock.sleep_for(250ms, {}));
  EXPECT_TRUE(clock.sleep_for(1s, {}));
  EXPECT_EQ(clock.now(), time_point{} + 1250ms);
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{250ms, 1s}));
}

TEST(ManualClock, NonPositiveSleepReturnsTrueWithoutMovingTime) {
  manual_clock clock;
  EXPECT_TRUE(clock.sleep_for(0ns, {}));
  EXPECT_TRUE(clock.sleep_for(-3s, {}));
  EXPECT_EQ(clock.now(), time_point{});
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{0ns, -3s}));
}

TEST(ManualClock, StopRequestedReturnsFalseWithoutAdvancing) {
  manual_clock clock;
  std::stop_source source;
  source.request_stop();
  EXPECT_FALSE(clock.sleep_for(10s, source.get_token()));
  EXPECT_EQ(clock.now(), time_point{});
  EXPECT_EQ(clock.sleeps(), (std::vector<duration>{10s}));  // the request is still recorded
}

TEST(ManualClock, UnstoppedTokenDoesNotInterrupt) {
  manual_clock clock;
  std::stop_source source;
  EXPECT_TRUE(clock.sleep_for(2s, source.get_token()));
  EXPECT_EQ(clock.now(), time_point{} + 2s);
}

TEST(ManualClock, AdvanceMovesForwardAndRejectsGoingBack) {
  manual_clock clock;
  clock.advance(3s);
  clock.advance(0ns);
  EXPECT_EQ(clock.now(), time_point{} + 3s);
  EXPECT_THROW(clock.advance(-1ns), std::invalid_argument);
  EXPECT_EQ(clock.now(), time_point{} + 3s);
  EXPECT_TRUE(clock.sleeps().empty());  // advance is not a sleep
}

TEST(ManualClock, UsableThroughTheClockInterface) {
  manual_clock manual;
  stormguard::clock& clock = manual;
  EXPECT_TRUE(clock.sleep_for(5ms, {}));
  EXPECT_EQ(clock.now(), time_point{} + 5ms);
}

TEST(RealClock, NowIsMonotonic) {
  real_clock clock;
  time_point last = clock.now();
  for (int i = 0; i < 1000; ++i) {
    const time_point t = clock.now();
    ASSERT_GE(t, last);
    last = t;
  }
}

TEST(RealClock, StopRequestedBeforeTheCallReturnsFalseAtOnce) {
  real_clock clock;
  std::stop_source source;
  source.request_stop();
  const time_point t0 = clock.now();
  EXPECT_FALSE(clock.sleep_for(10s, source.get_token()));
  EXPECT_FALSE(clock.sleep_for(0ns, source.get_token()));
  EXPECT_LT(clock.now() - t0, 200ms);
}

TEST(RealClock, NonPositiveSleepReturnsTrueAtOnce) {
  real_clock clock;
  EXPECT_TRUE(clock.sleep_for(0ns, {}));
  EXPECT_TRUE(clock.sleep_for(-1s, {}));
  EXPECT_TRUE(clock.sleep_for(duration::min(), {}));
}

TEST(RealClock, ShortSleepCompletesAndReturnsTrue) {
  real_clock clock;
  std::stop_source source;  // a token that could be stopped, but is not
  const time_point t0 = clock.now();
  EXPECT_TRUE(clock.sleep_for(1ms, source.get_token()));
  EXPECT_GE(clock.now() - t0, 1ms);
}

// The one test with a real thread and real time: a stop request from another thread ends a long
// sleep at once. Bounded: even if the interruption were broken, the sleep ends after `d`.
void expect_stop_interrupts_sleep(duration d) {
  real_clock clock;
  std::stop_source source;
  std::thread stopper([&source] {
    std::this_thread::sleep_for(20ms);
    source.request_stop();
  });
  const time_point t0 = clock.now();
  const bool completed = clock.sleep_for(d, source.get_token());
  const duration elapsed = clock.now() - t0;
  stopper.join();
  EXPECT_FALSE(completed);
  EXPECT_LT(elapsed, 200ms);
}

TEST(RealClock, StopFromAnotherThreadInterruptsLongSleepQuickly) {
  expect_stop_interrupts_sleep(10s);
}

TEST(RealClock, StopInterruptsSleepOfMaximumDuration) {
  // duration::max() is how stormguard spells "no limit" (a cap of duration::max()): the sleep
  // must last until stopped, not overflow steady_clock::now() + d and return at once.
  expect_stop_interrupts_sleep(duration::max());
  expect_stop_interrupts_sleep(duration::max() - 1h);
}

}  // namespace

TEST(ManualClock, WallTimeStartsAtTheGivenInstantAndMovesWithSleeps) {
  const stormguard::wall_time_point wall{std::chrono::seconds(1'700'000'000)};
  manual_clock clock(time_point{} + std::chrono::seconds(5), wall);
  EXPECT_EQ(clock.wall_now(), wall);
  EXPECT_TRUE(clock.sleep_for(std::chrono::milliseconds(1500), {}));
  EXPECT_EQ(clock.wall_now(), wall + std::chrono::milliseconds(1500));
  clock.advance(std::chrono::seconds(2));
  EXPECT_EQ(clock.wall_now(), wall + std::chrono::milliseconds(3500));
  EXPECT_EQ(manual_clock().wall_now(), manual_clock::default_wall_start);
}

TEST(ManualClock, SetWallTimeStepsTheWallClockAlone) {
  manual_clock clock;
  const time_point before = clock.now();
  const stormguard::wall_time_point target{std::chrono::seconds(946'684'800)};  // 2000-01-01
  clock.set_wall_time(target);
  EXPECT_EQ(clock.wall_now(), target);
  EXPECT_EQ(clock.now(), before);
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(clock.wall_now(), target + std::chrono::seconds(1));
}

TEST(ManualClock, WallTimeSaturatesInsteadOfOverflowing) {
  manual_clock clock(time_point{}, stormguard::wall_time_point::max());
  clock.advance(std::chrono::hours(1));
  EXPECT_EQ(clock.wall_now(), stormguard::wall_time_point::max());
}

TEST(RealClock, WallTimeIsTheSystemClock) {
  stormguard::real_clock clock;
  const auto before = std::chrono::system_clock::now();
  const auto wall = clock.wall_now();
  const auto after = std::chrono::system_clock::now();
  EXPECT_GE(wall, std::chrono::time_point_cast<stormguard::duration>(before));
  EXPECT_LE(wall, std::chrono::time_point_cast<stormguard::duration>(after));
}
