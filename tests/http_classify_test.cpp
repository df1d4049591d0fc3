// SPDX-License-Identifier: Apache-2.0
#include "stormguard/http_classify.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::classification;
using stormguard::classify_http_status;
using stormguard::classify_transport_failure;
using stormguard::duration;
using stormguard::may_resend;
using stormguard::retryable_statuses;
using stormguard::transport_phase;
using stormguard::test_util::invalid_argument_message;

const char* const k_idempotent[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};
const char* const k_not_idempotent[] = {"POST", "PATCH", "CONNECT", "get"};

// ---------------------------------------------------------------------------------------------
// retryable_statuses
// ---------------------------------------------------------------------------------------------

TEST(RetryableStatuses, DefaultIsExactly429And502To504) {
  const retryable_statuses statuses;
  EXPECT_EQ(statuses.to_vector(), (std::vector<int>{429, 502, 503, 504}));
  for (int s = 100; s <= 599; ++s) {
    EXPECT_EQ(statuses.contains(s), s == 429 || s == 502 || s == 503 || s == 504) << s;
  }
}

TEST(RetryableStatuses, DefaultExcludes500And501AndOther4xx) {
  const retryable_statuses statuses;
  for (const int s : {400, 401, 403, 404, 408, 409, 422, 500, 501, 505}) {
    EXPECT_FALSE(statuses.contains(s)) << s;
  }
}

TEST(RetryableStatuses, ContainsIsFalseOutsideTheValidRange) {
  const retryable_statuses statuses;
  for (const int s : {-503, 0, 99, 600, 1503, 429 + 1000}) EXPECT_FALSE(statuses.contains(s)) << s;
}

TEST(RetryableStatuses, ConfiguredSetIsExactlyTheList) {
  const retryable_statuses statuses{500, 503};
  EXPECT_EQ(statuses.to_vector(), (std::vector<int>{500, 503}));
  EXPECT_FALSE(statuses.contains(429));
}

TEST(RetryableStatuses, SpanConstructorMatchesTheInitializerList) {
  const std::vector<int> list{503, 429, 429};
  EXPECT_EQ(retryable_statuses(std::span<const int>(list)), (retryable_statuses{429, 503}));
}

TEST(RetryableStatuses, EmptyListRetriesNoStatus) {
  const retryable_statuses none{};
  // `retryable_statuses none{}` value-initialises: the default set. An empty list needs a span.
  const retryable_statuses empty(std::span<const int>{});
  EXPECT_TRUE(empty.to_vector().empty());
  EXPECT_EQ(empty.to_string(), "");
  EXPECT_EQ(none, retryable_statuses());
}

TEST(RetryableStatuses, RejectsAStatusOutsideTheRangeNamingIt) {
  for (const int s : {99, 600, 0, -1}) {
    const std::string message = invalid_argument_message([&] { retryable_statuses{429, s}; });
    EXPECT_NE(message.find("retryable status"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(s)), std::string::npos) << message;
  }
  EXPECT_NO_THROW((retryable_statuses{100, 599}));
}

TEST(RetryableStatuses, AddAndRemove) {
  retryable_statuses statuses;
  statuses.add(500);
  statuses.remove(429);
  statuses.remove(418);  // absent: no effect
  EXPECT_EQ(statuses.to_string(), "500,502,503,504");
  EXPECT_THROW(statuses.add(600), std::invalid_argument);
  EXPECT_THROW(statuses.remove(42), std::invalid_argument);
}

TEST(RetryableStatuses, ToStringIsAscendingAndCommaSeparated) {
  EXPECT_EQ(retryable_statuses().to_string(), "429,502,503,504");
  EXPECT_EQ((retryable_statuses{504, 408}).to_string(), "408,504");
}

// ---------------------------------------------------------------------------------------------
// may_resend
// ---------------------------------------------------------------------------------------------

TEST(MayResend, IdempotentMethodsWithOrWithoutKey) {
  for (const char* m : k_idempotent) {
    EXPECT_TRUE(may_resend(m, false)) << m;
    EXPECT_TRUE(may_resend(m, true)) << m;
  }
}

TEST(MayResend, NonIdempotentMethodsOnlyWithAKey) {
  for (const char* m : k_not_idempotent) {
    EXPECT_FALSE(may_resend(m, false)) << m;
    EXPECT_TRUE(may_resend(m, true)) << m;
  }
}

// ---------------------------------------------------------------------------------------------
// classify_http_status
// ---------------------------------------------------------------------------------------------

TEST(ClassifyHttpStatus, RetriesTheDefaultStatusesForIdempotentMethods) {
  for (const int s : {429, 502, 503, 504}) {
    for (const char* m : k_idempotent) {
      EXPECT_EQ(classify_http_status(s, m, false, std::nullopt), classification::retry())
          << s << " " << m;
    }
  }
}

TEST(ClassifyHttpStatus, NeverRetriesOther4xxEvenWithRetryAfterOrKey) {
  for (const int s : {400, 401, 403, 404, 405, 410, 413, 422}) {
    EXPECT_EQ(classify_http_status(s, "GET", true, 1s), classification::stop()) << s;
  }
}

TEST(ClassifyHttpStatus, Retries409OnlyOnAKeyedRequestHonouringRetryAfter) {
  // The server's idempotency guard: "a request with this key is in progress".
  EXPECT_EQ(classify_http_status(409, "POST", true, 3s), classification::retry_after(3s));
  EXPECT_EQ(classify_http_status(409, "POST", true, std::nullopt), classification::retry());
  EXPECT_EQ(classify_http_status(409, "POST", true, 3s, retryable_statuses{}),
            classification::retry_after(3s))
      << "whatever the configured set holds";
  EXPECT_EQ(classify_http_status(409, "POST", false, 3s), classification::stop());
  EXPECT_EQ(classify_http_status(409, "GET", false, 3s), classification::stop())
      << "without a key a 409 is a lasting conflict";
}

TEST(ClassifyHttpStatus, DoesNotRetry500Or501ByDefault) {
  EXPECT_EQ(classify_http_status(500, "GET", false, std::nullopt), classification::stop());
  EXPECT_EQ(classify_http_status(501, "GET", false, 2s), classification::stop());
}

TEST(ClassifyHttpStatus, RetriesWhatTheConfiguredSetSays) {
  const retryable_statuses with_500{500};
  EXPECT_EQ(classify_http_status(500, "GET", false, std::nullopt, with_500),
            classification::retry());
  EXPECT_EQ(classify_http_status(503, "GET", false, std::nullopt, with_500),
            classification::stop());
}

TEST(ClassifyHttpStatus, HonoursRetryAfterOn429And503) {
  EXPECT_EQ(classify_http_status(429, "GET", false, 7s), classification::retry_after(7s));
  EXPECT_EQ(classify_http_status(503, "GET", false, 120s), classification::retry_after(120s));
}

TEST(ClassifyHttpStatus, RetryAfterZeroIsRetryAfterZeroNotStop) {
  EXPECT_EQ(classify_http_status(503, "GET", false, duration::zero()),
            classification::retry_after(duration::zero()));
}

TEST(ClassifyHttpStatus, HugeRetryAfterIsPassedOnForThePolicyToJudge) {
  EXPECT_EQ(classify_http_status(503, "GET", false, duration::max()),
            classification::retry_after(duration::max()));
}

TEST(ClassifyHttpStatus, UnparsableRetryAfterMeansOwnBackoff) {
  // The caller passes nullopt for an unparsable value: retry with backoff, not "at once".
  const auto c = classify_http_status(429, "GET", false, std::nullopt);
  EXPECT_EQ(c.action(), classification::kind::retry);
}

TEST(ClassifyHttpStatus, PostWithoutKeyIsNeverRetriedWhateverTheStatus) {
  for (const char* m : {"POST", "PATCH"}) {
    for (const int s : {429, 502, 503, 504}) {
      EXPECT_EQ(classify_http_status(s, m, false, std::nullopt), classification::stop()) << m;
      EXPECT_EQ(classify_http_status(s, m, false, 1s), classification::stop()) << m;
    }
  }
}

TEST(ClassifyHttpStatus, PostWithKeyIsRetriedLikeGet) {
  EXPECT_EQ(classify_http_status(503, "POST", true, std::nullopt), classification::retry());
  EXPECT_EQ(classify_http_status(429, "PATCH", true, 3s), classification::retry_after(3s));
  EXPECT_EQ(classify_http_status(404, "POST", true, std::nullopt), classification::stop());
}

TEST(ClassifyHttpStatus, LowercaseMethodIsNotIdempotent) {
  EXPECT_EQ(classify_http_status(503, "get", false, std::nullopt), classification::stop());
}

TEST(ClassifyHttpStatus, NegativeRetryAfterCountsAsZero) {
  EXPECT_EQ(classify_http_status(503, "GET", false, -5s), classification::retry_after(0s));
}

// ---------------------------------------------------------------------------------------------
// classify_transport_failure
// ---------------------------------------------------------------------------------------------

TEST(ClassifyTransportFailure, NotSentIsRetriedForEveryMethod) {
  for (const char* m : k_idempotent) {
    EXPECT_EQ(classify_transport_failure(transport_phase::not_sent, m, false),
              classification::retry());
  }
  for (const char* m : k_not_idempotent) {
    EXPECT_EQ(classify_transport_failure(transport_phase::not_sent, m, false),
              classification::retry())
        << m;
  }
}

TEST(ClassifyTransportFailure, MaybeSentIsRetriedOnlyForIdempotentOrKeyed) {
  for (const char* m : k_idempotent) {
    EXPECT_EQ(classify_transport_failure(transport_phase::maybe_sent, m, false),
              classification::retry())
        << m;
  }
  for (const char* m : k_not_idempotent) {
    EXPECT_EQ(classify_transport_failure(transport_phase::maybe_sent, m, false),
              classification::stop())
        << m;
    EXPECT_EQ(classify_transport_failure(transport_phase::maybe_sent, m, true),
              classification::retry())
        << m;
  }
}

}  // namespace
