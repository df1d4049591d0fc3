// SPDX-License-Identifier: Apache-2.0
#include "stormguard/classify.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>

namespace {

using namespace std::chrono_literals;
using stormguard::classification;
using stormguard::default_classifier;
using stormguard::error_code_of;
using stormguard::is_transient;
using stormguard::never_retry;
using stormguard::retry_only;

constexpr std::errc k_transient[] = {
    std::errc::connection_refused,
    std::errc::connection_reset,
    std::errc::connection_aborted,
    std::errc::timed_out,
    std::errc::host_unreachable,
    std::errc::network_unreachable,
    std::errc::resource_unavailable_try_again,
    std::errc::interrupted,
};

constexpr std::errc k_not_transient[] = {
    std::errc::operation_canceled,
    std::errc::permission_denied,
    std::errc::no_such_file_or_directory,
    std::errc::invalid_argument,
    std::errc::not_enough_memory,
    std::errc::address_in_use,
    std::errc::broken_pipe,
    std::errc::protocol_error,
    std::errc::value_too_large,
};

std::exception_ptr thrown_system_error(std::errc c) {
  return std::make_exception_ptr(std::system_error(std::make_error_code(c), "op"));
}

TEST(IsTransient, TheSeedsTransientIoErrors) {
  for (const std::errc c : k_transient) {
    EXPECT_TRUE(is_transient(std::make_error_code(c))) << std::make_error_code(c).message();
  }
}

TEST(IsTransient, MatchesSystemCategoryCodesFromErrno) {
  EXPECT_TRUE(is_transient(std::error_code(ECONNRESET, std::system_category())));
  EXPECT_TRUE(is_transient(std::error_code(EAGAIN, std::system_category())));
  EXPECT_TRUE(is_transient(std::error_code(EWOULDBLOCK, std::system_category())));
  EXPECT_FALSE(is_transient(std::error_code(ECANCELED, std::system_category())));
}

TEST(IsTransient, FalseForEverythingElseIncludingCancellationAndSuccess) {
  for (const std::errc c : k_not_transient) {
    EXPECT_FALSE(is_transient(std::make_error_code(c))) << std::make_error_code(c).message();
  }
  EXPECT_FALSE(is_transient(std::error_code{}));
  EXPECT_FALSE(is_transient(std::make_error_code(std::io_errc::stream)));
}

TEST(DefaultClassifier, RetriesTransientErrorCodesAndStopsOnTheRest) {
  const default_classifier classify;
  for (const std::errc c : k_transient) {
    const classification expected =
        c == std::errc::timed_out ? classification::retry().as_timeout() : classification::retry();
    EXPECT_EQ(classify(std::make_error_code(c)), expected) << std::make_error_code(c).message();
  }
  for (const std::errc c : k_not_transient) {
    EXPECT_EQ(classify(std::make_error_code(c)), classification::stop());
  }
}

TEST(DefaultClassifier, MarksOnlyATimeoutAsATimeout) {
  const default_classifier classify;
  EXPECT_TRUE(classify(std::make_error_code(std::errc::timed_out)).timeout());
  EXPECT_TRUE(classify(std::error_code(ETIMEDOUT, std::system_category())).timeout());
  EXPECT_TRUE(classify(thrown_system_error(std::errc::timed_out)).timeout());
  EXPECT_FALSE(classify(std::make_error_code(std::errc::connection_reset)).timeout());
  EXPECT_FALSE(classify(std::make_error_code(std::errc::permission_denied)).timeout());
}

TEST(DefaultClassifier, ExceptionsRetryOnlyTransientSystemErrors) {
  const default_classifier classify;
  EXPECT_EQ(classify(thrown_system_error(std::errc::connection_reset)), classification::retry());
  EXPECT_EQ(classify(thrown_system_error(std::errc::operation_canceled)), classification::stop());
  EXPECT_EQ(classify(thrown_system_error(std::errc::permission_denied)), classification::stop());
  EXPECT_EQ(classify(std::make_exception_ptr(std::runtime_error("boom"))), classification::stop());
  EXPECT_EQ(classify(std::make_exception_ptr(42)), classification::stop());
  EXPECT_EQ(classify(std::exception_ptr{}), classification::stop());
}

TEST(DefaultClassifier, OtherErrorTypesAreRetried) {
  const default_classifier classify;
  EXPECT_EQ(classify(7), classification::retry());
  EXPECT_EQ(classify(std::string("busy")), classification::retry());
}

TEST(ErrorCodeOf, ExtractsTheCodeOfASystemErrorOnly) {
  EXPECT_EQ(error_code_of(thrown_system_error(std::errc::timed_out)),
            std::make_error_code(std::errc::timed_out));
  EXPECT_EQ(error_code_of(std::make_exception_ptr(std::logic_error("x"))), std::error_code{});
  EXPECT_EQ(error_code_of(nullptr), std::error_code{});
}

TEST(RetryOnly, RetriesExactlyTheListedConditions) {
  constexpr auto classify = retry_only(std::errc::timed_out, std::errc::permission_denied);
  const classification timeout = classification::retry().as_timeout();
  EXPECT_EQ(classify(std::make_error_code(std::errc::timed_out)), timeout);
  EXPECT_EQ(classify(std::make_error_code(std::errc::permission_denied)), classification::retry());
  EXPECT_EQ(classify(std::make_error_code(std::errc::connection_reset)), classification::stop());
  EXPECT_EQ(classify(std::error_code(ETIMEDOUT, std::system_category())), timeout);
  EXPECT_EQ(classify(thrown_system_error(std::errc::timed_out)), timeout);
  EXPECT_EQ(classify(std::make_exception_ptr(std::runtime_error("x"))), classification::stop());
}

TEST(RetryOnly, NeverRetriesCancellationEvenWhenListed) {
  const auto classify = retry_only(std::errc::operation_canceled);
  EXPECT_EQ(classify(std::make_error_code(std::errc::operation_canceled)), classification::stop());
  EXPECT_EQ(classify(std::error_code{}), classification::stop());
}

TEST(NeverRetry, StopsOnTheListedConditionsAndRetriesTheRest) {
  const auto classify = never_retry(std::errc::permission_denied);
  EXPECT_EQ(classify(std::make_error_code(std::errc::permission_denied)), classification::stop());
  EXPECT_EQ(classify(std::make_error_code(std::errc::invalid_argument)), classification::retry());
  EXPECT_EQ(classify(std::make_error_code(std::errc::timed_out)),
            classification::retry().as_timeout());
  EXPECT_EQ(classify(std::make_error_code(std::errc::operation_canceled)), classification::stop());
  EXPECT_EQ(classify(std::make_exception_ptr(std::runtime_error("x"))), classification::stop());
  EXPECT_EQ(classify(thrown_system_error(std::errc::invalid_argument)), classification::retry());
}

TEST(NeverRetry, WithNoCodesRetriesEveryErrorButCancellation) {
  const auto classify = never_retry();
  EXPECT_EQ(classify(std::make_error_code(std::errc::permission_denied)), classification::retry());
  EXPECT_EQ(classify(std::make_error_code(std::errc::operation_canceled)), classification::stop());
}

TEST(Classification, RetryAfterKeepsItsDelay) {
  EXPECT_EQ(classification::retry_after(3s).delay(), 3s);
  EXPECT_EQ(classification::retry_after(3s).action(), classification::kind::retry_after);
  EXPECT_EQ(classification::stop().action(), classification::kind::stop);
}

TEST(Classification, AsTimeoutKeepsTheVerdictAndTheDelay) {
  EXPECT_FALSE(classification::retry().timeout());
  const classification c = classification::retry_after(3s).as_timeout();
  EXPECT_TRUE(c.timeout());
  EXPECT_EQ(c.action(), classification::kind::retry_after);
  EXPECT_EQ(c.delay(), 3s);
  EXPECT_NE(c, classification::retry_after(3s));
}

}  // namespace
