// SPDX-License-Identifier: Apache-2.0
#include "stormguard/backoff.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "stormguard/random.hpp"
#include "stormguard/testing/scripted_random.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::backoff;
using stormguard::backoff_options;
using stormguard::duration;
using stormguard::jitter;
using stormguard::random_generator;
using stormguard::testing::fraction;
using stormguard::testing::scripted_random;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::uint64_t k_max_draw = std::numeric_limits<std::uint64_t>::max();

backoff make(jitter j, duration base = 100ms, duration cap = 3s, double multiplier = 2.0) {
  return backoff(backoff_options{.base = base, .cap = cap, .multiplier = multiplier, .jitter = j});
}

using stormguard::test_util::invalid_argument_message;

// ---------------------------------------------------------------------------------------------
// Exact delays with a scripted generator. fraction(0) draws the bottom of the range, fraction(1)
// the top, fraction(0.5) floor((span + 1) / 2) and fraction(0.25) floor((span + 1) / 4).
// ---------------------------------------------------------------------------------------------

TEST(NoJitter, DelayIsExactlyTheCeilingAndDrawsNothing) {
  const backoff b = make(jitter::none);
  scripted_random g{};
  EXPECT_EQ(b.delay(1, g), 100ms);
  EXPECT_EQ(b.delay(2, g), 200ms);
  EXPECT_EQ(b.delay(3, g), 400ms);
  EXPECT_EQ(b.delay(5, g), 1600ms);
  EXPECT_EQ(b.delay(6, g), 3s);  // 3.2 s capped
  EXPECT_EQ(b.delay(100, g), 3s);
  EXPECT_EQ(g.drawn(), 0U);
}

TEST(FullJitter, ExactDelaysFromScriptedDraws) {
  const backoff b = make(jitter::full);
  scripted_random g{fraction(0.0),  fraction(1.0), fraction(0.5),
                    fraction(0.25), fraction(1.0), fraction(0.5)};
  EXPECT_EQ(b.delay(1, g), 0ns);
  EXPECT_EQ(b.delay(1, g), 100ms);
  EXPECT_EQ(b.delay(1, g), 50ms);   // floor((100'000'000 + 1) / 2) ns
  EXPECT_EQ(b.delay(3, g), 100ms);  // ceiling 400 ms, a quarter of the way
  EXPECT_EQ(b.delay(7, g), 3s);     // capped ceiling, top of the range
  EXPECT_EQ(b.delay(7, g), 1500ms);
  EXPECT_EQ(g.drawn(), 6U);
}

TEST(EqualJitter, ExactDelaysFromScriptedDraws) {
  const backoff b = make(jitter::equal);
  scripted_random g{fraction(0.0), fraction(1.0), fraction(0.5), fraction(0.0), fraction(1.0)};
  EXPECT_EQ(b.delay(1, g), 50ms);   // ceiling/2 + 0
  EXPECT_EQ(b.delay(1, g), 100ms);  // ceiling/2 + ceiling/2
  EXPECT_EQ(b.delay(1, g), 75ms);   // 50 ms + floor((50'000'000 + 1) / 2) ns
  EXPECT_EQ(b.delay(4, g), 400ms);  // ceiling 800 ms
  EXPECT_EQ(b.delay(9, g), 3s);
  EXPECT_EQ(g.drawn(), 5U);
}

TEST(EqualJitter, OddCeilingReachesTheCeilingExactly) {
  const backoff b = make(jitter::equal, 101ns, 101ns, 1.0);
  scripted_random g{fraction(0.0), fraction(1.0)};
  EXPECT_EQ(b.delay(1, g), 50ns);  // floor(101 / 2)
  EXPECT_EQ(b.delay(1, g), 101ns);
}

TEST(DecorrelatedJitter, ExactDelaysFromScriptedDraws) {
  const backoff b = make(jitter::decorrelated);
  scripted_random g{fraction(0.0), fraction(1.0),  fraction(0.5), fraction(0.5),
                    fraction(1.0), fraction(0.25), fraction(0.5)};
  // Retry 1, no previous delay: U(base, 3 · base) = U(100 ms, 300 ms).
  EXPECT_EQ(b.delay(1, g), 100ms);
  EXPECT_EQ(b.delay(1, g), 300ms);
  EXPECT_EQ(b.delay(1, g), 200ms);
  // `previous` sets the top of the range: U(100 ms, 600 ms) halfway is 100 + 250 ms.
  EXPECT_EQ(b.delay(2, g, 200ms), 350ms);
  // U(100 ms, 6 s) at the top is 6 s, capped to 3 s.
  EXPECT_EQ(b.delay(3, g, 2s), 3s);
  // U(100 ms, 6 s) a quarter of the way: 100 ms + floor((5.9e9 + 1) / 4) ns, below cap.
  EXPECT_EQ(b.delay(3, g, 2s), 1575ms);
  // A zero or negative previous means "start from base".
  EXPECT_EQ(b.delay(2, g, -5s), 200ms);
  EXPECT_EQ(g.drawn(), 7U);
}

TEST(DecorrelatedJitter, ChainsThroughPreviousDelay) {
  // The delay sequence a caller gets by feeding each delay back in as `previous`.
  const backoff b = make(jitter::decorrelated, 10ms, 1h);
  scripted_random g{fraction(1.0), fraction(1.0), fraction(1.0), fraction(0.0), fraction(1.0)};
  duration previous{};
  std::vector<duration> delays;
  for (int retry = 1; retry <= 5; ++retry) {
    previous = b.delay(retry, g, previous);
    delays.push_back(previous);
  }
  EXPECT_EQ(delays, (std::vector<duration>{30ms, 90ms, 270ms, 10ms, 30ms}));
}

TEST(DecorrelatedJitter, PreviousBelowBaseGivesBase) {
  // 3 · previous < base: the range is empty and the draw returns base (and still draws once).
  const backoff b = make(jitter::decorrelated);
  scripted_random g{fraction(1.0)};
  EXPECT_EQ(b.delay(2, g, 1ms), 100ms);
  EXPECT_EQ(g.drawn(), 1U);
}

// ---------------------------------------------------------------------------------------------
// Ceilings.
// ---------------------------------------------------------------------------------------------

TEST(Ceiling, DoublesFromBaseUpToCapWithMultiplierTwo) {
  const backoff b = make(jitter::full, 100ms, 1h, 2.0);
  std::int64_t expected = std::chrono::nanoseconds(100ms).count();
  const std::int64_t cap = std::chrono::nanoseconds(1h).count();
  for (int retry = 1; retry <= 80; ++retry) {
    ASSERT_EQ(b.ceiling(retry).count(), std::min(expected, cap)) << "retry " << retry;
    expected = expected > cap ? expected : expected * 2;
  }
}

TEST(Ceiling, NonIntegerMultiplierIsNotTruncated) {
  const backoff b = make(jitter::full, 100ms, 1h, 1.5);
  EXPECT_EQ(b.ceiling(1), 100ms);
  EXPECT_EQ(b.ceiling(2), 150ms);  // a multiplier truncated to 1 would give 100 ms
  EXPECT_EQ(b.ceiling(3), 225ms);
  EXPECT_EQ(b.ceiling(4), 337500us);
  // Exactly: floor(10^8 · 3^k / 2^k) ns with k = retry - 1. Up to k = 8 the value is an integer
  // and must match to the nanosecond; past that it is a fraction that std::pow may round either
  // way, so allow 1 ns.
  const std::int64_t cap = std::chrono::nanoseconds(1h).count();
  for (int retry = 1; retry <= 60; ++retry) {
    const int k = retry - 1;
    stormguard::detail::uint128 num = 100'000'000;
    stormguard::detail::uint128 den = 1;
    bool capped = false;
    for (int i = 0; i < k && !capped; ++i) {
      num *= 3;
      den *= 2;
      capped = num / den >= static_cast<stormguard::detail::uint128>(cap);
    }
    const std::int64_t expected = capped ? cap : static_cast<std::int64_t>(num / den);
    const std::int64_t actual = b.ceiling(retry).count();
    if (k <= 8 || expected == cap) {
      ASSERT_EQ(actual, expected) << "retry " << retry;
    } else {
      ASSERT_LE(std::llabs(actual - expected), 1) << "retry " << retry;
    }
  }
}

TEST(Ceiling, MultiplierOneIsConstant) {
  const backoff b = make(jitter::none, 250ms, 3s, 1.0);
  for (int retry : {1, 2, 31, 32, 33, 1000, INT_MAX}) EXPECT_EQ(b.ceiling(retry), 250ms);
}

TEST(Ceiling, ConstantBackoffReturnsItsDelayEveryTime) {
  const backoff b = backoff::constant(750ms);
  scripted_random g{};
  for (int retry : {1, 2, 10, 64, INT_MAX}) EXPECT_EQ(b.delay(retry, g), 750ms);
  EXPECT_EQ(b.options().jitter, jitter::none);
  EXPECT_EQ(backoff::constant(1s, jitter::full).options().jitter, jitter::full);
}

// ---------------------------------------------------------------------------------------------
// Range and distribution properties over 10^5 seeded draws.
// ---------------------------------------------------------------------------------------------

constexpr int k_draws = 100'000;

TEST(FullJitter, NeverExceedsCeiling) {
  const backoff b = make(jitter::full);
  random_generator g(1);
  for (int i = 0; i < k_draws; ++i) {
    const int retry = 1 + i % 8;
    const duration d = b.delay(retry, g);
    ASSERT_GE(d, 0ns);
    ASSERT_LE(d, b.ceiling(retry));
  }
}

TEST(EqualJitter, StaysBetweenHalfCeilingAndCeiling) {
  const backoff b = make(jitter::equal);
  random_generator g(2);
  for (int i = 0; i < k_draws; ++i) {
    const int retry = 1 + i % 8;
    const duration c = b.ceiling(retry);
    const duration d = b.delay(retry, g);
    ASSERT_GE(d, c / 2);
    ASSERT_LE(d, c);
  }
}

TEST(DecorrelatedJitter, StaysBetweenBaseAndMinOfCapAndThreeTimesPrevious) {
  const backoff b = make(jitter::decorrelated);
  random_generator g(3);
  duration previous{};
  for (int i = 0; i < k_draws; ++i) {
    const int retry = 1 + i % 8;
    if (retry == 1) previous = duration::zero();
    const duration from = previous > duration::zero() ? previous : b.options().base;
    const duration d = b.delay(retry, g, previous);
    ASSERT_GE(d, b.options().base);
    ASSERT_LE(d, std::min(b.options().cap, 3 * from));
    previous = d;
  }
}

// The mean of full jitter must be c/2; 2 % of c/2 is ~11 standard errors of the mean over 10^5
// draws (sd of U(0, c) is c/√12), so a correct formula passes with a fixed seed every time.
bool mean_is_half_of_ceiling(const std::vector<duration>& draws, duration c) {
  long double sum = 0;
  for (duration d : draws) sum += static_cast<long double>(d.count());
  const long double mean = sum / static_cast<long double>(draws.size());
  const long double half = static_cast<long double>(c.count()) / 2;
  return std::fabs(static_cast<double>(mean - half)) <= 0.02 * static_cast<double>(half);
}

TEST(FullJitter, MeanIsHalfTheCeiling) {
  const backoff b = make(jitter::full);
  const duration c = b.ceiling(4);  // 800 ms
  random_generator g(4);
  std::vector<duration> draws;
  draws.reserve(k_draws);
  for (int i = 0; i < k_draws; ++i) draws.push_back(b.delay(4, g));
  EXPECT_TRUE(mean_is_half_of_ceiling(draws, c));
}

TEST(FullJitter, MeanCheckRejectsBrokenFormulas) {
  // The same check fails for U(0, c/2) (mean c/4) and for U(c/2, c) (equal jitter, mean 3c/4).
  const duration c = 800ms;
  random_generator g(4);
  std::vector<duration> low;
  std::vector<duration> high;
  for (int i = 0; i < k_draws; ++i) {
    low.push_back(stormguard::uniform_duration(g, c / 2));
    high.push_back(c / 2 + stormguard::uniform_duration(g, c / 2));
  }
  EXPECT_FALSE(mean_is_half_of_ceiling(low, c));
  EXPECT_FALSE(mean_is_half_of_ceiling(high, c));
}

// ---------------------------------------------------------------------------------------------
// Overflow: any retry number, huge base and cap, huge multipliers.
// ---------------------------------------------------------------------------------------------

TEST(Backoff, NeverOverflowsNegativeOrAboveCapForAnyRetryNumber) {
  const std::vector<int> retries{1,    2,       3,           31,          32,     33,   62,
                                 63,   64,      65,          127,         128,    1023, 1024,
                                 1025, 100'000, INT_MAX / 2, INT_MAX - 1, INT_MAX};
  const std::vector<duration> bases{0ns, 1ns, 100ms, 1h};
  const std::vector<duration> caps{3s, 1h, std::chrono::hours(24 * 365 * 100), duration::max()};
  const std::vector<double> multipliers{1.0, 1.000001, 1.5, 2.0, 10.0, 1e300};
  const std::vector<duration> previous{
      0ns, 1ns, 100ms, 1h, duration::max() / 3 + 1ns, duration::max()};
  random_generator g(5);
  for (jitter j : {jitter::none, jitter::equal, jitter::full, jitter::decorrelated}) {
    for (duration base : bases) {
      if (j == jitter::decorrelated && base == 0ns) continue;
      for (duration cap : caps) {
        if (cap < base) continue;
        for (double m : multipliers) {
          const backoff b = make(j, base, cap, m);
          duration last_ceiling = base;
          for (int retry : retries) {
            const duration c = b.ceiling(retry);
            ASSERT_GE(c, base) << to_string(j) << " retry " << retry << " m " << m;
            ASSERT_LE(c, cap) << to_string(j) << " retry " << retry << " m " << m;
            ASSERT_GE(c, last_ceiling) << "ceiling must not shrink; retry " << retry;
            last_ceiling = c;
            for (duration prev : previous) {
              const duration d = b.delay(retry, g, prev);
              ASSERT_GE(d, j == jitter::decorrelated ? base : 0ns) << to_string(j);
              ASSERT_LE(d, cap) << to_string(j) << " retry " << retry;
              if (j == jitter::none) {
                ASSERT_EQ(d, c);
              }
              if (j == jitter::equal) {
                ASSERT_GE(d, c / 2);
              }
              if (j == jitter::full || j == jitter::equal) {
                ASSERT_LE(d, c);
              }
            }
          }
        }
      }
    }
  }
}

TEST(Backoff, HugeRetryNumbersReachTheCapExactly) {
  const backoff b = make(jitter::none, 1h, duration::max(), 2.0);
  scripted_random g{};
  for (int retry : {63, 64, 65, 1023, 1024, INT_MAX}) {
    EXPECT_EQ(b.delay(retry, g), duration::max()) << retry;
  }
  // 1 h · 2^21 ≈ 7.6e18 ns still fits below 2^63 ≈ 9.2e18 ns; 2^22 does not.
  EXPECT_EQ(b.ceiling(22), std::chrono::duration_cast<duration>(1h) * (1LL << 21));
  EXPECT_EQ(b.ceiling(23), duration::max());
}

TEST(Backoff, ZeroBaseStaysZeroForAnyRetryNumber) {
  // base 0 · multiplier^n: the power overflows to infinity from retry 1025 (multiplier 2), and
  // 0 · infinity must not saturate to the cap (it did: 100 ms from retry 1025 on).
  scripted_random g{};
  for (const double m : {1.5, 2.0, 10.0, 1e300}) {
    for (const auto e :
         {stormguard::ceiling_exponent::retry_minus_one, stormguard::ceiling_exponent::retry}) {
      const backoff b(backoff_options{
          .base = 0ns, .cap = 100ms, .multiplier = m, .jitter = jitter::none, .exponent = e});
      for (int retry : {1, 2, 63, 64, 1023, 1024, 1025, 1026, 1030, 100'000, INT_MAX}) {
        EXPECT_EQ(b.ceiling(retry), 0ns) << "retry " << retry << " m " << m;
        EXPECT_EQ(b.delay(retry, g), 0ns) << "retry " << retry << " m " << m;
      }
    }
  }
}

TEST(FullJitter, TopDrawAtMaximumCapIsTheCap) {
  const backoff b = make(jitter::full, 1h, duration::max());
  scripted_random g{k_max_draw, k_max_draw};
  EXPECT_EQ(b.delay(INT_MAX, g), duration::max());
  const backoff e = make(jitter::equal, 1h, duration::max());
  EXPECT_EQ(e.delay(INT_MAX, g), duration::max());
}

// ---------------------------------------------------------------------------------------------
// Validation: every invalid setting is rejected with a message naming the field and the value.
// ---------------------------------------------------------------------------------------------

TEST(BackoffValidation, RejectsNegativeBase) {
  EXPECT_THAT(invalid_argument_message([] { (void)make(jitter::full, -1ms, 3s); }),
              AllOf(HasSubstr("base"), HasSubstr("-1ms")));
  EXPECT_THAT(invalid_argument_message([] { (void)backoff::constant(-2s); }),
              AllOf(HasSubstr("delay"), HasSubstr("-2s")));
}

TEST(BackoffValidation, RejectsCapBelowBase) {
  EXPECT_THAT(invalid_argument_message([] { (void)make(jitter::full, 100ms, 50ms); }),
              AllOf(HasSubstr("cap"), HasSubstr("50ms")));
}

TEST(BackoffValidation, RejectsMultiplierBelowOne) {
  EXPECT_THAT(invalid_argument_message([] { (void)make(jitter::full, 100ms, 3s, 0.5); }),
              AllOf(HasSubstr("multiplier"), HasSubstr("0.5")));
  EXPECT_THAT(invalid_argument_message([] { (void)make(jitter::full, 100ms, 3s, -2.0); }),
              AllOf(HasSubstr("multiplier"), HasSubstr("-2")));
}

TEST(BackoffValidation, RejectsNaNAndInfiniteMultiplier) {
  EXPECT_THAT(invalid_argument_message([] {
                (void)make(jitter::full, 100ms, 3s, std::numeric_limits<double>::quiet_NaN());
              }),
              AllOf(HasSubstr("multiplier"), HasSubstr("nan")));
  EXPECT_THAT(invalid_argument_message([] {
                (void)make(jitter::full, 100ms, 3s, std::numeric_limits<double>::infinity());
              }),
              AllOf(HasSubstr("multiplier"), HasSubstr("inf")));
  EXPECT_THAT(invalid_argument_message([] {
                (void)make(jitter::full, 100ms, 3s, -std::numeric_limits<double>::infinity());
              }),
              AllOf(HasSubstr("multiplier"), HasSubstr("-inf")));
}

TEST(BackoffValidation, RejectsJitterOutsideTheEnum) {
  EXPECT_THAT(invalid_argument_message([] { (void)make(static_cast<jitter>(42)); }),
              AllOf(HasSubstr("jitter"), HasSubstr("42")));
  EXPECT_THAT(invalid_argument_message([] { (void)make(static_cast<jitter>(-1)); }),
              AllOf(HasSubstr("jitter"), HasSubstr("-1")));
}

TEST(BackoffValidation, RejectsDecorrelatedWithZeroBase) {
  EXPECT_THAT(invalid_argument_message([] { (void)make(jitter::decorrelated, 0ns, 3s); }),
              AllOf(HasSubstr("decorrelated"), HasSubstr("base"), HasSubstr("0s")));
  // Base 0 is allowed with the other jitters (the retry-at-once anti-pattern, for simulations).
  EXPECT_NO_THROW((void)make(jitter::full, 0ns, 3s));
}

TEST(BackoffValidation, RejectsRetryBelowOneForEveryJitter) {
  for (jitter j : {jitter::none, jitter::equal, jitter::full, jitter::decorrelated}) {
    const backoff b = make(j);
    random_generator g(6);
    for (int retry : {0, -5, INT_MIN}) {
      EXPECT_THAT(invalid_argument_message([&] { (void)b.delay(retry, g); }),
                  AllOf(HasSubstr("retry"), HasSubstr(std::to_string(retry))))
          << to_string(j);
      EXPECT_THAT(invalid_argument_message([&] { (void)b.ceiling(retry); }),
                  AllOf(HasSubstr("retry"), HasSubstr(std::to_string(retry))));
    }
  }
}

TEST(BackoffValidation, AcceptsTheBoundaries) {
  EXPECT_NO_THROW((void)make(jitter::none, 0ns, 0ns, 1.0));
  EXPECT_NO_THROW((void)make(jitter::full, 1h, duration::max(), 1.0));
  EXPECT_NO_THROW((void)make(jitter::decorrelated, 1ns, 1ns, 1.0));
  EXPECT_NO_THROW((void)make(jitter::full, 100ms, 3s, std::numeric_limits<double>::max()));
  EXPECT_EQ(backoff().options(), backoff_options{});
}

// ---------------------------------------------------------------------------------------------
// ceiling_exponent::retry: the convention of Brooker's published code (base · 2^n, n from 1).
// ---------------------------------------------------------------------------------------------

backoff brooker(jitter j) {
  return backoff(backoff_options{.base = 5ms,
                                 .cap = 2000ms,
                                 .multiplier = 2.0,
                                 .jitter = j,
                                 .exponent = stormguard::ceiling_exponent::retry});
}

TEST(CeilingExponent, DefaultIsRetryMinusOne) {
  EXPECT_EQ(backoff_options{}.exponent, stormguard::ceiling_exponent::retry_minus_one);
  EXPECT_EQ(make(jitter::none, 5ms, 2000ms).ceiling(1), 5ms);
}

TEST(CeilingExponent, RetryGivesBaseTimesTwoToTheNCappedAsInBrookersCode) {
  const backoff b = brooker(jitter::none);
  // min(2000, 5 · 2^n): 10, 20, 40, ..., 1280, then capped at 2000 from n = 9 (2560).
  for (int n = 1; n <= 8; ++n) {
    EXPECT_EQ(b.ceiling(n), 5ms * (std::int64_t{1} << n)) << n;
  }
  EXPECT_EQ(b.ceiling(9), 2000ms);
  EXPECT_EQ(b.ceiling(40), 2000ms);  // past the precomputed table
  EXPECT_EQ(b.ceiling(INT_MAX), 2000ms);
  scripted_random g{};
  EXPECT_EQ(b.delay(1, g), 10ms);  // no jitter: exactly the ceiling, no draw
  EXPECT_EQ(g.drawn(), 0U);
}

TEST(CeilingExponent, FullAndEqualJitterDrawUnderTheShiftedCeiling) {
  scripted_random g{fraction(1.0), fraction(0.0), fraction(1.0), fraction(0.0)};
  const backoff full = brooker(jitter::full);
  EXPECT_EQ(full.delay(1, g), 10ms);  // U(0, 10): the top
  EXPECT_EQ(full.delay(3, g), 0ms);   // U(0, 40): the bottom
  const backoff equal = brooker(jitter::equal);
  EXPECT_EQ(equal.delay(2, g), 20ms);  // 10 + U(0, 10): the top
  EXPECT_EQ(equal.delay(2, g), 10ms);  // the bottom
}

TEST(CeilingExponent, DecorrelatedIsUnchangedByTheExponent) {
  // Brooker's decorrelated jitter starts from sleep = base: U(base, 3 · base), then
  // U(base, 3 · previous sleep), capped.
  backoff_options with_default{.base = 5ms, .cap = 2000ms, .jitter = jitter::decorrelated};
  backoff_options with_retry = with_default;
  with_retry.exponent = stormguard::ceiling_exponent::retry;
  random_generator a(3), b(3);
  duration previous_a{}, previous_b{};
  for (int n = 1; n <= 20; ++n) {
    previous_a = backoff(with_default).delay(n, a, previous_a);
    previous_b = backoff(with_retry).delay(n, b, previous_b);
    EXPECT_EQ(previous_a, previous_b) << n;
  }
  scripted_random g{fraction(1.0)};
  EXPECT_EQ(backoff(with_retry).delay(1, g), 15ms);  // U(5, 3 · 5): the top
}

TEST(CeilingExponent, NeverAboveCapNorOverflowingForAnyRetryNumber) {
  for (jitter j : {jitter::none, jitter::equal, jitter::full}) {
    const backoff b(backoff_options{.base = 1ns,
                                    .cap = duration::max(),
                                    .multiplier = 3.0,
                                    .jitter = j,
                                    .exponent = stormguard::ceiling_exponent::retry});
    random_generator g(5);
    for (int n : {1, 2, 39, 40, 41, 1000, INT_MAX}) {
      const duration d = b.delay(n, g);
      EXPECT_GE(d, 0ns) << n;
      EXPECT_GE(b.ceiling(n), b.ceiling(1)) << n;
    }
    EXPECT_EQ(b.ceiling(1), 3ns);
    EXPECT_EQ(b.ceiling(INT_MAX), duration::max());
  }
}

TEST(BackoffValidation, RejectsExponentOutsideTheEnum) {
  backoff_options o;
  o.exponent = static_cast<stormguard::ceiling_exponent>(7);
  EXPECT_THAT(invalid_argument_message([&] { (void)backoff(o); }),
              AllOf(HasSubstr("exponent"), HasSubstr("7")));
}

// ---------------------------------------------------------------------------------------------
// Names.
// ---------------------------------------------------------------------------------------------

TEST(JitterNames, ToStringAndParseRoundTrip) {
  for (jitter j : {jitter::none, jitter::equal, jitter::full, jitter::decorrelated}) {
    const auto parsed = stormguard::parse_jitter(stormguard::to_string(j));
    ASSERT_TRUE(parsed.has_value()) << stormguard::to_string(j);
    EXPECT_EQ(*parsed, j);
  }
  EXPECT_EQ(stormguard::to_string(jitter::full), "full");
  EXPECT_EQ(stormguard::to_string(jitter::decorrelated), "decorrelated");
}

TEST(JitterNames, ParseRejectsAnythingElse) {
  for (const char* text :
       {"", "Full", "FULL", " full", "full ", "decorrelate", "unknown", "jitter"}) {
    EXPECT_FALSE(stormguard::parse_jitter(text).has_value()) << '"' << text << '"';
  }
  EXPECT_EQ(stormguard::to_string(static_cast<jitter>(99)), "unknown");
}

}  // namespace

// The ceiling table is filled only up to the cap (and with exact power-of-two scaling for
// multiplier 2): every ceiling must still equal the formula min(cap, base · m^(n-1)) computed
// independently in long double, on both sides of the table's end (32) and of the cap.
TEST(Ceiling, TableShortcutMatchesTheFormulaForEveryRetry) {
  struct param {
    stormguard::duration base, cap;
    double multiplier;
  };
  const param params[] = {{100ms, 3s, 2.0},  {1ns, 3s, 2.0},
                          {7ms, 1h, 1.5},    {3ns, stormguard::duration::max(), 2.0},
                          {1us, 10min, 3.0}, {250ms, 250ms, 2.0},
                          {1ms, 40s, 1.1}};
  for (const auto& p : params) {
    const stormguard::backoff b({.base = p.base, .cap = p.cap, .multiplier = p.multiplier});
    for (int n = 1; n <= 80; ++n) {
      const long double exact = static_cast<long double>(p.base.count()) *
                                std::pow(static_cast<long double>(p.multiplier), n - 1);
      const long double capped = std::min(exact, static_cast<long double>(p.cap.count()));
      const auto got = static_cast<long double>(b.ceiling(n).count());
      // double vs long double rounding: within 1 ns per 2^52 of the value.
      EXPECT_LE(std::abs(got - capped), 1.0L + capped * 0x1.0p-50L)
          << "base " << p.base.count() << " m " << p.multiplier << " retry " << n;
      if (n > 1) {
        EXPECT_GE(b.ceiling(n), b.ceiling(n - 1)) << "retry " << n;
      }
    }
  }
}

// The table is filled without a std::pow per entry (the power is carried from entry to entry
// while that is exact): every ceiling must still be bit-identical to the one formula in double,
// base · std::pow(m, e) saturated at cap, which the simulator's recorded outputs depend on.
TEST(Ceiling, TableIsBitIdenticalToThePowFormulaForEveryMultiplier) {
  const double multipliers[] = {1.0, 1.0001, 1.1, 1.25, 1.3, 1.5,  1.6,  1.75,
                                2.0, 2.5,    3.0, 4.0,  7.0, 10.0, 1e10, 1e300};
  // 2^53 ns and above: a double no longer holds every base exactly (the multiplier-2 shortcut
  // shifts integers only below that).
  const stormguard::duration bases[] = {1ns,
                                        3ns,
                                        7ms,
                                        100ms,
                                        1s,
                                        stormguard::duration{(std::int64_t{1} << 53) - 1},
                                        stormguard::duration{std::int64_t{1} << 53},
                                        stormguard::duration{(std::int64_t{1} << 53) + 1},
                                        stormguard::duration{(std::int64_t{1} << 62) + 3}};
  const stormguard::duration caps[] = {3s, 1h, stormguard::duration{std::int64_t{1} << 55},
                                       stormguard::duration::max()};
  for (const auto e :
       {stormguard::ceiling_exponent::retry_minus_one, stormguard::ceiling_exponent::retry}) {
    for (const double m : multipliers) {
      for (const auto base : bases) {
        for (const auto cap : caps) {
          if (cap < base) continue;
          const stormguard::backoff b({.base = base, .cap = cap, .multiplier = m, .exponent = e});
          for (int n = 1; n <= 40; ++n) {
            const int k = e == stormguard::ceiling_exponent::retry ? n : n - 1;
            stormguard::duration expected = base;
            if (k > 0 && m != 1.0) {
              const double value = static_cast<double>(base.count()) * std::pow(m, k);
              expected =
                  !(value < 0x1.0p63)
                      ? cap
                      : std::min(cap, stormguard::duration{static_cast<std::int64_t>(value)});
            }
            ASSERT_EQ(b.ceiling(n).count(), expected.count())
                << "base " << base.count() << " cap " << cap.count() << " m " << m << " retry "
                << n;
          }
        }
      }
    }
  }
}
