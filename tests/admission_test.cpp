// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/admission/codel.hpp"
#include "stormguard/admission/concurrency_limit.hpp"
#include "stormguard/admission/deadline.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/admission/retry_after_pacer.hpp"
#include "stormguard/admission/retry_shedder.hpp"
#include "stormguard/random.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_info;
using stormguard::duration;
using stormguard::random_generator;
using stormguard::ratio_budget_options;
using stormguard::time_point;
using namespace stormguard::admission;

constexpr time_point t0{};
constexpr attempt_info first{1, false};
constexpr attempt_info second{2, false};
constexpr attempt_info garbage{2, true};

TEST(RetryAdmission, AdmitsRetriesOnlyWithinTheRatioOfFirstAttempts) {
  retry_admission admission(ratio_budget_options{.ratio = 0.1, .min_retries_per_second = 0});
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(admission.admit(t0, first));
  int admitted = 0;
  for (int i = 0; i < 50; ++i) admitted += admission.admit(t0, second) ? 1 : 0;
  EXPECT_EQ(admitted, 10);
  EXPECT_EQ(admission.counts(), (retry_admission_counts{100, 10, 40, 0}));
}

TEST(RetryAdmission, TheFloorIsPerServer) {
  retry_admission admission(ratio_budget_options{.ratio = 0.1, .min_retries_per_second = 2});
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += admission.admit(t0, second) ? 1 : 0;
  EXPECT_EQ(admitted, 20);  // 2/s over the 10 s window, with no first attempt at all
}

TEST(RetryAdmission, AMalformedAttemptHeaderNeverWinsMoreThanItsAbsence) {
  retry_admission admission(ratio_budget_options{.ratio = 0.1, .min_retries_per_second = 0});
  // Malformed headers are retries: they neither pass freely nor deposit.
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(admission.admit(t0, garbage));
  EXPECT_EQ(admission.counts().malformed, 100);
  EXPECT_EQ(admission.counts().first_attempts, 0);
  EXPECT_EQ(admission.balance(t0), 0);
}

TEST(Codel, DropsOnlyWhileOverloadedAndOnlyPastTwiceTheTarget) {
  codel c;  // 5 ms, 100 ms
  time_point now = t0 + 1s;
  // Interval 1: delays of 20 ms or more (minimum 20 ms > 5 ms): not yet judged, no drop.
  EXPECT_FALSE(c.should_drop(now, 20ms));
  EXPECT_FALSE(c.should_drop(now + 10ms, 30ms));
  EXPECT_FALSE(c.overloaded());
  // Interval 2 starts: interval 1 is judged overloaded; its first request is never dropped.
  now += 101ms;
  EXPECT_FALSE(c.should_drop(now, 30ms));
  EXPECT_TRUE(c.overloaded());
  EXPECT_TRUE(c.should_drop(now + 1ms, 11ms));   // > 2 · 5 ms
  EXPECT_FALSE(c.should_drop(now + 2ms, 10ms));  // not above 2 · target
  EXPECT_FALSE(c.should_drop(now + 3ms, 1ms));   // a fast one: the interval's minimum is 1 ms
  // Interval 3: interval 2's minimum (1 ms) is under target: healthy again.
  now += 101ms;
  EXPECT_FALSE(c.should_drop(now, 50ms));
  EXPECT_FALSE(c.overloaded());
  EXPECT_FALSE(c.should_drop(now + 1ms, 50ms));
}

TEST(Codel, BadOptionsNameTheField) {
  EXPECT_THROW(codel({.target = 0ms}), std::invalid_argument);
  try {
    codel c({.target = 5ms, .interval = 1ms});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("interval must be in [1ms, 60s] and >= target, got 1ms"),
              std::string::npos)
        << e.what();
  }
}

TEST(AdaptiveLifoQueue, IsFifoWhenHealthyAndNewestFirstWhenOverloaded) {
  adaptive_lifo_queue<int> q({}, 100);
  std::vector<int> dropped;
  const auto drop = [&](int& i) { dropped.push_back(i); };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.push(t0, i));
  EXPECT_EQ(q.pop(t0 + 1ms, drop), 0);  // FIFO
  EXPECT_EQ(q.pop(t0 + 1ms, drop), 1);
  EXPECT_EQ(q.pop(t0 + 1ms, drop), 2);
  // A standing queue: every request waits 50 ms for a whole interval.
  time_point now = t0 + 1s;
  for (int i = 10; i < 20; ++i) ASSERT_TRUE(q.push(now - 50ms, i));
  EXPECT_EQ(q.pop(now, drop), 10);  // the interval's first: FIFO, kept
  EXPECT_EQ(q.pop(now + 1ms, drop), 11);
  now += 101ms;  // the interval is judged: overloaded, so LIFO and drop past 10 ms
  for (int i = 20; i < 23; ++i) ASSERT_TRUE(q.push(now, i));
  EXPECT_EQ(q.pop(now, drop), 22);  // the next interval's first request: newest first, kept
  EXPECT_EQ(q.pop(now, drop), 21);  // waited 0 ms
  EXPECT_EQ(q.pop(now, drop), 20);
  EXPECT_EQ(q.pop(now, drop), std::nullopt);  // 12..19 waited 151 ms: dropped, never served
  EXPECT_EQ(dropped, (std::vector<int>{19, 18, 17, 16, 15, 14, 13, 12}));
  EXPECT_EQ(q.dropped(), 8);
}

TEST(AdaptiveLifoQueue, RefusesPastItsCapacity) {
  adaptive_lifo_queue<int> q({}, 2);
  EXPECT_TRUE(q.push(t0, 1));
  EXPECT_TRUE(q.push(t0, 2));
  EXPECT_FALSE(q.push(t0, 3));
  EXPECT_EQ(q.size(), 2U);
}

TEST(ConcurrencyLimit, EnvoyStartsInAMinRttWindowAtMinConcurrency) {
  concurrency_limit limit({}, t0);
  EXPECT_TRUE(limit.measuring_min_rtt());
  EXPECT_EQ(limit.limit(), 3);
  EXPECT_TRUE(limit.try_acquire(t0));
  EXPECT_TRUE(limit.try_acquire(t0));
  EXPECT_TRUE(limit.try_acquire(t0));
  EXPECT_FALSE(limit.try_acquire(t0));
  EXPECT_EQ(limit.refused(), 1);
}

TEST(ConcurrencyLimit, MeasuresMinRttThenFollowsTheGradient) {
  random_generator g(1);
  concurrency_limit limit({.initial_limit = 100}, t0);
  time_point now = t0;
  // 50 requests of 10 ms: minRTT = 10 ms, limit stays 100.
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(limit.try_acquire(now));
    limit.release(now + 10ms, now, g);
  }
  EXPECT_FALSE(limit.measuring_min_rtt());
  EXPECT_EQ(limit.min_rtt(), 10ms);
  EXPECT_EQ(limit.limit(), 100);
  // Latency doubles to 25 ms: gradient = 12.5 / 25 = 0.5: limit = 50 + sqrt(50) = 57.
  now += 20ms;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(limit.try_acquire(now));
    limit.release(now + 25ms, now, g);
  }
  now += 200ms;
  (void)limit.try_acquire(now);  // past update_interval: the limit is recomputed
  EXPECT_EQ(limit.limit(), 57);
  limit.cancel();
  // Fast again (10 ms): gradient = 12.5 / 10 = 1.25: 71.25 + 8.44 = 79.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(limit.try_acquire(now));
    limit.release(now + 10ms, now, g);
  }
  now += 200ms;
  (void)limit.try_acquire(now);
  EXPECT_EQ(limit.limit(), 79);
}

TEST(ConcurrencyLimit, RefusalRetryAfterIsSpreadOverTheWindow) {
  concurrency_limit limit({}, t0);
  random_generator g(3);
  std::vector<int> seen(6, 0);
  for (int i = 0; i < 10'000; ++i) {
    const auto s =
        std::chrono::duration_cast<std::chrono::seconds>(limit.retry_after_for_refusal(g));
    ASSERT_GE(s.count(), 1);
    ASSERT_LE(s.count(), 5);
    ++seen[static_cast<std::size_t>(s.count())];
  }
  // Uniform over 1..5: each about 2,000 (σ ≈ 40); a constant would put 10,000 in one.
  for (int s = 1; s <= 5; ++s) EXPECT_NEAR(seen[static_cast<std::size_t>(s)], 2000, 250) << s;
}

TEST(ConcurrencyLimit, BadOptionsNameTheField) {
  try {
    concurrency_limit limit({.min_concurrency = 0}, t0);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("min_concurrency must be in [1, 1000], got 0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(concurrency_limit({.sample_percentile = 0.0}, t0), std::invalid_argument);
  EXPECT_THROW(concurrency_limit({.initial_limit = 2}, t0), std::invalid_argument);
  EXPECT_THROW(concurrency_limit({.retry_after_max = 500ms}, t0), std::invalid_argument);
}

TEST(Deadlines, SaturateAndCompare) {
  EXPECT_EQ(deadline_of(t0, std::nullopt), time_point::max());
  EXPECT_EQ(deadline_of(t0 + 1s, 250ms), t0 + 1250ms);
  EXPECT_EQ(deadline_of(t0 + 1s, duration::max()), time_point::max());
  EXPECT_TRUE(expired(t0 + 1s, t0 + 1s));
  EXPECT_FALSE(expired(t0 + 1s - 1ns, t0 + 1s));
}

TEST(Deadlines, AServiceEstimateDropsWhatCannotFinishInTime) {
  // An answer exactly at the deadline is late: now + estimate >= deadline is expired.
  EXPECT_TRUE(expired(t0 + 1s, t0 + 1s + 20ms, 20ms));
  EXPECT_FALSE(expired(t0 + 1s, t0 + 1s + 20ms + 1ns, 20ms));
  EXPECT_TRUE(expired(t0 + 2s, t0 + 1s, 20ms));  // passed
  // Zero or negative: only a passed deadline.
  EXPECT_FALSE(expired(t0 + 1s - 1ns, t0 + 1s, duration::zero()));
  EXPECT_FALSE(expired(t0 + 1s - 1ns, t0 + 1s, -1s));
  // No deadline never expires, whatever the estimate; extreme values do not overflow.
  EXPECT_FALSE(expired(t0, time_point::max(), duration::max()));
  EXPECT_FALSE(expired(time_point::min(), t0, duration::max()));  // min + max = -1 ns < t0
  EXPECT_TRUE(expired(time_point::min(), t0 - 1ns, duration::max()));
  EXPECT_TRUE(expired(time_point::max() - 1ns, time_point::max() - 1ns + 0ns, 1ns));
}

}  // namespace

namespace {

// The lock-free first-attempt path hands its counts to the ratio budget in bulk: a single thread
// must see exactly the decisions of a plain ratio_budget fed one call at a time.
TEST(RetryAdmission, DecidesAsThePlainRatioBudgetAcrossSlicesAndWindows) {
  const stormguard::ratio_budget_options options{
      .ratio = 0.1, .window = std::chrono::seconds(10), .min_retries_per_second = 1};
  stormguard::admission::retry_admission admission(options);
  stormguard::ratio_budget reference(options);
  stormguard::random_generator g(7);
  stormguard::time_point now{};
  for (int i = 0; i < 200'000; ++i) {
    now += std::chrono::microseconds(1 + stormguard::uniform_int(g, 2'000));
    const bool retry = stormguard::uniform_int(g, 9) < 3;  // 30 %: the budget runs dry at times
    const stormguard::attempt_info attempt{retry ? 2 : 1, false};
    bool expected = true;
    if (retry) {
      expected = reference.try_withdraw(now);
    } else {
      reference.deposit(now);
    }
    ASSERT_EQ(admission.admit(now, attempt), expected) << "request " << i;
  }
  EXPECT_EQ(admission.balance(now), reference.balance(now));
  const auto counts = admission.counts();
  EXPECT_GT(counts.retries_refused, 0);
  EXPECT_GT(counts.retries_admitted, 0);
}

TEST(RetryAdmission, ConcurrentRequestsLoseNoFirstAttemptAndGrantNoExtraRetry) {
  // Four threads share one admission and one advancing clock, within one window (nothing
  // expires), across the slice ends (slices of 100 ms; 880 ms of virtual time in 11-us steps).
  // Afterwards every first attempt must have reached the budget: the retries granted plus the
  // balance left equal 10 % of the first attempts exactly (no floor).
  retry_admission admission({.ratio = 0.1, .window = 1s, .min_retries_per_second = 0});
  std::atomic<std::int64_t> clock_us{0};
  constexpr int k_threads = 4;
  constexpr int k_requests = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      random_generator g(100 + static_cast<std::uint64_t>(t));
      for (int i = 0; i < k_requests; ++i) {
        const time_point now = t0 + std::chrono::microseconds(clock_us.fetch_add(1) * 11);
        const bool retry = stormguard::uniform_int(g, 9) < 2;
        (void)admission.admit(now, retry ? second : first);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const time_point end = t0 + std::chrono::microseconds(clock_us.load() * 11);
  ASSERT_LT(end - t0, 1s);
  const auto counts = admission.counts();
  EXPECT_EQ(counts.first_attempts + counts.retries_admitted + counts.retries_refused,
            k_threads * k_requests);
  EXPECT_GT(counts.retries_refused, 0);
  EXPECT_EQ(counts.retries_admitted + admission.balance(end), counts.first_attempts / 10);
}

TEST(Reply, EachOutcomeHasItsStatusAndHeaders) {
  static_assert(reply_for(outcome::expired).do_not_retry);  // usable at compile time
  EXPECT_EQ(reply_for(outcome::served).status, 200);
  for (const outcome o : {outcome::unavailable, outcome::retry_refused, outcome::over_limit,
                          outcome::expired, outcome::codel_dropped}) {
    const reply r = reply_for(o);
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(r.reason_phrase, "Service Unavailable");
    EXPECT_FALSE(r.body.empty());
    EXPECT_EQ(r.body.back(), '\n');
    // "Do not retry" exactly for the retry budget and drop-expired; Retry-After exactly for the
    // concurrency limit; never both.
    const bool refusal = o == outcome::retry_refused || o == outcome::expired;
    EXPECT_EQ(r.do_not_retry, refusal);
    EXPECT_EQ(r.pushback, refusal ? std::string_view("-1") : std::string_view());
    EXPECT_EQ(r.retry_after, o == outcome::over_limit);
  }
  EXPECT_EQ(reply_for(outcome::expired).body, "deadline passed\n");
  EXPECT_EQ(reply_for(outcome::codel_dropped).body, "dropped: waited too long\n");
  // The pushback the server sends reads back as "do not retry" (gRFC A6).
  EXPECT_TRUE(stormguard::parse_pushback(reply_for(outcome::retry_refused).pushback).do_not_retry);
}

TEST(Reply, AClientThatHonoursTheHeadersStopsOrWaitsAndOneThatIgnoresThemRetries) {
  const auto client = [](std::string_view name) { return *stormguard::find_client_profile(name); };
  const auto step = [&](outcome o, std::string_view name) {
    return client_step_for(reply_for(o), client(name));
  };
  EXPECT_EQ(step(outcome::served, "stormguard"), client_step::done);
  EXPECT_EQ(step(outcome::served, "curl"), client_step::done);
  EXPECT_EQ(step(outcome::retry_refused, "stormguard"), client_step::stop);
  EXPECT_EQ(step(outcome::expired, "stormguard"), client_step::stop);
  EXPECT_EQ(step(outcome::over_limit, "stormguard"), client_step::retry_after);
  EXPECT_EQ(step(outcome::unavailable, "stormguard"), client_step::retry);
  EXPECT_EQ(step(outcome::codel_dropped, "stormguard"), client_step::retry);
  // gRPC honours the pushback but reads no HTTP Retry-After.
  EXPECT_EQ(step(outcome::retry_refused, "grpc"), client_step::stop);
  EXPECT_EQ(step(outcome::over_limit, "grpc"), client_step::retry);
  // go-retryablehttp and curl ignore the pushback but obey Retry-After.
  EXPECT_EQ(step(outcome::retry_refused, "go-retryablehttp"), client_step::retry);
  EXPECT_EQ(step(outcome::expired, "curl"), client_step::retry);
  EXPECT_EQ(step(outcome::over_limit, "go-retryablehttp"), client_step::retry_after);
  EXPECT_EQ(step(outcome::over_limit, "curl"), client_step::retry_after);
  // Envoy's defaults and a browser ignore both.
  for (const outcome o : {outcome::unavailable, outcome::retry_refused, outcome::over_limit,
                          outcome::expired, outcome::codel_dropped}) {
    EXPECT_EQ(step(o, "envoy"), client_step::retry);
    EXPECT_EQ(step(o, "browser-fetch"), client_step::retry);
  }
  // Pushback wins over Retry-After when a server sends both.
  EXPECT_EQ(client_step_for(reply{.status = 503, .do_not_retry = true, .retry_after = true},
                            client("stormguard")),
            client_step::stop);
}

TEST(Reply, RetryAfterIsWholeSecondsRoundedDown) {
  EXPECT_EQ(retry_after_seconds(3s), 3);
  EXPECT_EQ(retry_after_seconds(2999ms), 2);
  EXPECT_EQ(retry_after_seconds(-1s), 0);
  static_assert(retry_after_seconds(duration::max()) > 0);
}

}  // namespace

namespace shedding {

using stormguard::admission::retry_shedder;
using stormguard::admission::retry_shedder_options;

TEST(RetryShedder, ShedsRecognisedRetriesOnlyWhileAnotherDefenceRefusesOrDrops) {
  retry_shedder shedder;  // hold 100 ms
  // Calm: nothing is shed, retries included (a weak signal never refuses a healthy server's
  // request).
  EXPECT_FALSE(shedder.shed(time_point(0s), true));
  EXPECT_FALSE(shedder.shed(time_point(0s), false));
  shedder.engaged(time_point(1s));
  EXPECT_TRUE(shedder.overloaded(time_point(1s)));
  EXPECT_TRUE(shedder.shed(time_point(1s + 99ms), true));
  EXPECT_FALSE(shedder.shed(time_point(1s + 99ms), false));  // a first attempt: never
  // At the instant + hold the overload is over.
  EXPECT_FALSE(shedder.overloaded(time_point(1s + 100ms)));
  EXPECT_FALSE(shedder.shed(time_point(1s + 100ms), true));
  EXPECT_EQ(shedder.shed_count(), 1);
  // A report older than the last one changes nothing.
  shedder.engaged(time_point(500ms));
  EXPECT_FALSE(shedder.overloaded(time_point(1s + 100ms)));
}

TEST(RetryShedder, RejectsAHoldOutOfRangeNamingIt) {
  for (const duration bad : {duration::zero(), duration(999us), duration(2h)}) {
    try {
      const retry_shedder s(retry_shedder_options{.hold = bad});
      ADD_FAILURE() << "accepted hold " << bad.count();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("hold must be in [1ms, 1h]"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace shedding

namespace pacing {

using stormguard::admission::retry_after_pacer;
using stormguard::admission::retry_after_pacer_options;

// Refusals every 100 ms from 0 to `until` (exclusive), the last one's Retry-After returned.
duration refuse_until(retry_after_pacer& pacer, duration until, random_generator& rng) {
  duration last{};
  for (duration t{}; t < until; t += 100ms) last = pacer.refusal(time_point(t), rng);
  return last;
}

TEST(RetryAfterPacer, TheRetryAfterGrowsWithTheOverloadsAgeInWholeSeconds) {
  random_generator rng(1);
  retry_after_pacer pacer;  // factor 2, 1 s .. 60 s, spread 0.5, calm 2 s
  const duration first = pacer.refusal(time_point(0s), rng);
  EXPECT_GE(first, 1s);
  EXPECT_LE(first, 2s);  // ceil(1 s x [1, 1.5))
  EXPECT_EQ(pacer.overload_began(time_point(1s)), time_point(0s));
  // 10 s into the overload: 2 x 10 s, spread up to 30 s.
  const duration at_10s = refuse_until(pacer, 10100ms, rng);
  EXPECT_GE(at_10s, 20s);
  EXPECT_LE(at_10s, 30s);
  EXPECT_EQ(at_10s % 1s, duration::zero());
  // Long overloads are capped at max.
  EXPECT_EQ(refuse_until(pacer, 100s, rng), 60s);
}

TEST(RetryAfterPacer, CalmEndsTheOverloadAndTheNextOneStartsAgainAtTheMinimum) {
  random_generator rng(2);
  retry_after_pacer pacer;
  (void)refuse_until(pacer, 20s, rng);
  EXPECT_TRUE(pacer.overload_began(time_point(21s)));
  EXPECT_FALSE(pacer.overload_began(time_point(22s)));  // 2 s without a refusal: calm
  EXPECT_LE(pacer.refusal(time_point(22s), rng), 2s);
  EXPECT_EQ(pacer.overload_began(time_point(22s)), time_point(22s));
  // A clock that runs back is taken as the last refusal's time: no negative age.
  EXPECT_LE(pacer.refusal(time_point(5s), rng), 2s);
}

TEST(RetryAfterPacer, TheSpreadIsUniformOverItsRangeBeforeRounding) {
  // At age 10 s with factor 1 and spread 1: ceil(10 s x U[1, 2)) in [11, 20] s, each second
  // equally likely, mean 15.5 s (the ceiling adds half a second on average). 20,000 draws: the
  // mean's standard error is about 0.02 s; a spread of 0.5 (mean 13 s) or none (10 s) is far
  // outside 0.1 s.
  random_generator rng(3);
  std::vector<int> counts(21, 0);
  double sum = 0;
  constexpr int k_draws = 20'000;
  for (int i = 0; i < k_draws; ++i) {
    retry_after_pacer pacer({.factor = 1.0, .spread = 1.0});
    (void)pacer.refusal(time_point(0s), rng);
    for (duration t = 1s; t < 10s; t += 1s) (void)pacer.refusal(time_point(t), rng);
    const duration d = pacer.refusal(time_point(10s), rng);
    ASSERT_GE(d, 10s);
    ASSERT_LE(d, 20s);
    sum += std::chrono::duration<double>(d).count();
    ++counts[static_cast<std::size_t>(std::chrono::duration_cast<std::chrono::seconds>(d).count())];
  }
  EXPECT_NEAR(sum / k_draws, 15.5, 0.1);
  for (int s = 11; s <= 20; ++s) {
    EXPECT_NEAR(counts[static_cast<std::size_t>(s)], k_draws / 10, k_draws / 40) << s;
  }
}

TEST(RetryAfterPacer, BadSettingsNameTheFieldAndTheValue) {
  const auto message = [](retry_after_pacer_options o) {
    try {
      retry_after_pacer p(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({.min = 500ms}).find("min must be in [1s, 1h], got 500ms"), std::string::npos);
  EXPECT_NE(message({.min = 10s, .max = 5s}).find("min (10s) must be at most max (5s)"),
            std::string::npos);
  EXPECT_NE(message({.min = 120s}).find("min (120s) must be at most max (60s, the default)"),
            std::string::npos);
  EXPECT_NE(message({.max = 2h}).find("max must be in [1s, 1h], got 7200s"), std::string::npos);
  EXPECT_NE(message({.factor = 0.0}).find("factor must be in [0.1, 100], got 0"),
            std::string::npos);
  EXPECT_NE(message({.spread = -0.1}).find("spread must be in [0, 1], got -0.1"),
            std::string::npos);
  EXPECT_NE(message({.calm = 0s}).find("calm must be in (0, 1h], got 0s"), std::string::npos);
  EXPECT_EQ(message({}), "accepted");
}

}  // namespace pacing
