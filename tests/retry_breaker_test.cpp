// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry_breaker.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "stormguard/random.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_report;
using stormguard::attempt_status;
using stormguard::random_generator;
using stormguard::retry_breaker;
using stormguard::retry_breaker_options;
using stormguard::time_point;

constexpr time_point t0{};

std::string error_of(const retry_breaker_options& o) {
  try {
    retry_breaker b(o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RetryBreaker, BadOptionsNameTheField) {
  EXPECT_NE(error_of({.threshold = 0.0}).find("threshold must be in (0, 1], got 0"),
            std::string::npos);
  EXPECT_NE(error_of({.threshold = 1.5}).find("threshold"), std::string::npos);
  EXPECT_NE(error_of({.window = 500ms}).find("window must be in [1s, 60s], got 500ms"),
            std::string::npos);
  EXPECT_EQ(error_of({}), "");
}

TEST(RetryBreaker, RetriesOnlyWhileTheFailureRateIsBelowTheThreshold) {
  retry_breaker b({.threshold = 0.1, .window = 10s});
  random_generator g(1);
  EXPECT_TRUE(b.try_admit(t0, g));
  EXPECT_TRUE(b.try_withdraw(t0, attempt_status::failure, g));  // nothing recorded: rate 0
  for (int i = 0; i < 91; ++i) b.record(t0, attempt_report{attempt_status::success});
  for (int i = 0; i < 9; ++i) b.record(t0, attempt_report{attempt_status::failure});
  EXPECT_DOUBLE_EQ(b.failure_rate(t0), 0.09);
  EXPECT_TRUE(b.try_withdraw(t0, attempt_status::failure, g));
  b.record(t0, attempt_report{attempt_status::timeout});  // 10 of 101: still below 10 %
  EXPECT_TRUE(b.try_withdraw(t0, attempt_status::failure, g));
  b.record(t0, attempt_report{attempt_status::timeout});  // 11 of 102: open
  EXPECT_FALSE(b.try_withdraw(t0, attempt_status::failure, g));
  EXPECT_TRUE(b.try_admit(t0, g));  // first attempts always go
  // The failures leave the window: retries again.
  EXPECT_TRUE(b.try_withdraw(t0 + 12s, attempt_status::failure, g));
}

TEST(RetryBreaker, OneFailureOpensABreakerThatHasSeenNothingElse) {
  // Brooker's finding for small clients: a client with few calls judges the rate from them.
  retry_breaker b;
  random_generator g(1);
  b.record(t0, attempt_report{attempt_status::failure});
  EXPECT_FALSE(b.try_withdraw(t0, attempt_status::failure, g));
}

}  // namespace
