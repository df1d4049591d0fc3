// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/retry_signals.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string_view>

namespace {

using namespace std::chrono_literals;
using stormguard::time_point;
using namespace stormguard::admission;

constexpr time_point t0{};
constexpr label_reading absent{};
constexpr label_reading malformed{label_state::malformed, 0};
constexpr label_reading first{label_state::first_attempt, 1};
constexpr label_reading attempt(std::int64_t n) { return {label_state::retry, n}; }

label_reading envoy(std::string_view v) {
  return read_retry_label(retry_signal::envoy_attempt_count, v);
}
label_reading grpc(std::string_view v) {
  return read_retry_label(retry_signal::grpc_previous_attempts, v);
}
label_reading amz(std::string_view v) { return read_retry_label(retry_signal::amz_sdk_request, v); }
label_reading graph(std::string_view v) {
  return read_retry_label(retry_signal::graph_retry_attempt, v);
}

TEST(RetrySignalNames, AreTheHeaderNamesAndStableInOrder) {
  EXPECT_EQ(signal_name(retry_signal::envoy_attempt_count), "x-envoy-attempt-count");
  EXPECT_EQ(signal_name(retry_signal::grpc_previous_attempts), "grpc-previous-rpc-attempts");
  EXPECT_EQ(signal_name(retry_signal::amz_sdk_request), "amz-sdk-request");
  EXPECT_EQ(signal_name(retry_signal::graph_retry_attempt), "retry-attempt");
  EXPECT_EQ(signal_name(retry_signal::idempotency_key), "idempotency-key");
  EXPECT_EQ(signal_name(retry_signal::fingerprint), "fingerprint");
  for (std::size_t i = 0; i < k_retry_signal_count; ++i) EXPECT_EQ(index_of(k_retry_signals[i]), i);
  EXPECT_FALSE(is_strong(retry_signal::fingerprint));
  EXPECT_TRUE(is_strong(retry_signal::idempotency_key));
  EXPECT_FALSE(is_label(retry_signal::idempotency_key));
  EXPECT_TRUE(is_label(retry_signal::graph_retry_attempt));
}

TEST(EnvoyAttemptCount, CountsTheFirstAttemptAsOne) {
  EXPECT_EQ(envoy("1"), first);
  EXPECT_EQ(envoy("2"), attempt(2));
  EXPECT_EQ(envoy(" 3\t"), attempt(3));
  EXPECT_EQ(envoy("1000000"), attempt(1'000'000));
}

TEST(EnvoyAttemptCount, BadValuesAreMalformed) {
  for (std::string_view v : {"", " ", "0", "-1", "+2", "1.0", "0x2", "two", "1, 2", "2 2",
                             "1000001", "99999999999", "99999999999999999999999"}) {
    EXPECT_EQ(envoy(v), malformed) << '"' << v << '"';
  }
}

TEST(GrpcPreviousRpcAttempts, CountsAttemptsBeforeThisOne) {
  EXPECT_EQ(grpc("0"), first);
  EXPECT_EQ(grpc("1"), attempt(2));
  EXPECT_EQ(grpc("4"), attempt(5));
  for (std::string_view v : {"", "-1", "one", "1.5", "1000000", "18446744073709551616"}) {
    EXPECT_EQ(grpc(v), malformed) << '"' << v << '"';
  }
}

TEST(GraphRetryAttempt, IsTheRetryNumber) {
  EXPECT_EQ(graph("0"), first);
  EXPECT_EQ(graph("1"), attempt(2));
  EXPECT_EQ(graph(" 3 "), attempt(4));
  for (std::string_view v : {"", "-1", "x", "1;2", "1000000"}) {
    EXPECT_EQ(graph(v), malformed) << '"' << v << '"';
  }
}

TEST(AmzSdkRequest, ReadsAttemptAndMax) {
  EXPECT_EQ(amz("attempt=1; max=3"), first);
  EXPECT_EQ(amz("attempt=2; max=3"), attempt(2));
  EXPECT_EQ(amz("attempt=3;max=3"), attempt(3));
  EXPECT_EQ(amz("max=5; attempt=2"), attempt(2)) << "order does not matter";
  EXPECT_EQ(amz("attempt=2"), attempt(2)) << "max is optional";
  EXPECT_EQ(amz("ATTEMPT=2; Max=4"), attempt(2)) << "names in any case";
  EXPECT_EQ(amz("ttl=20240101T000000Z; attempt=2; max=3"), attempt(2)) << "ttl ignored";
  EXPECT_EQ(amz(" attempt = 2 ; max = 3 ;"), attempt(2)) << "spaces and an empty parameter";
}

TEST(AmzSdkRequest, BadValuesAreMalformed) {
  for (std::string_view v :
       {"", ";", "max=3", "attempt=", "attempt=0; max=3", "attempt=-1", "attempt=two",
        "attempt=4; max=3", "attempt=1; max=0", "attempt=1; max=x", "attempt=1; attempt=2",
        "attempt=2; attempt=2", "attempt=1; max=3; max=3", "attempt", "attempt=1, max=3",
        "attempt=99999999999999999999", "attempt=1000001"}) {
    EXPECT_EQ(amz(v), malformed) << '"' << v << '"';
  }
}

TEST(RetryLabelsReader, ReadsEveryLabelCaseInsensitively) {
  retry_labels labels;
  labels.field("X-Envoy-Attempt-Count", "2");
  labels.field("grpc-previous-rpc-attempts", "0");
  labels.field("AMZ-SDK-REQUEST", "attempt=3; max=3");
  labels.field("Retry-Attempt", "x");
  labels.field("Retry-After", "5");  // not a label
  EXPECT_EQ(labels.reading(retry_signal::envoy_attempt_count), attempt(2));
  EXPECT_EQ(labels.reading(retry_signal::grpc_previous_attempts), first);
  EXPECT_EQ(labels.reading(retry_signal::amz_sdk_request), attempt(3));
  EXPECT_EQ(labels.reading(retry_signal::graph_retry_attempt), malformed);
  EXPECT_EQ(labels.reading(retry_signal::idempotency_key), absent);
  EXPECT_EQ(labels.reading(retry_signal::fingerprint), absent);
}

TEST(RetryLabelsReader, ARepeatedFieldThatDisagreesIsMalformed) {
  retry_labels same;
  same.field("x-envoy-attempt-count", "2");
  same.field("x-envoy-attempt-count", " 2");
  EXPECT_EQ(same.reading(retry_signal::envoy_attempt_count), attempt(2)) << "reads the same: one";
  retry_labels differ;
  differ.field("x-envoy-attempt-count", "1");
  differ.field("x-envoy-attempt-count", "2");
  EXPECT_EQ(differ.reading(retry_signal::envoy_attempt_count), malformed);
  differ.field("x-envoy-attempt-count", "2");
  EXPECT_EQ(differ.reading(retry_signal::envoy_attempt_count), malformed) << "stays malformed";
  retry_labels bad_then_good;
  bad_then_good.field("retry-attempt", "");
  bad_then_good.field("retry-attempt", "1");
  EXPECT_EQ(bad_then_good.reading(retry_signal::graph_retry_attempt), malformed);
}

TEST(RetrySignalRecognizer, CountsEachLabelThatSaysRetry) {
  retry_signal_recognizer r;
  for (const auto& [name, value] :
       {std::pair<std::string_view, std::string_view>{"x-envoy-attempt-count", "2"},
        {"grpc-previous-rpc-attempts", "1"},
        {"amz-sdk-request", "attempt=2; max=3"},
        {"retry-attempt", "1"}}) {
    retry_labels labels;
    labels.field(name, value);
    const request_signals seen = r.recognise(t0, labels, std::nullopt, std::nullopt);
    EXPECT_TRUE(seen.strong()) << name;
    EXPECT_FALSE(seen.weak_only()) << name;
  }
  retry_labels firsts;
  firsts.field("x-envoy-attempt-count", "1");
  firsts.field("amz-sdk-request", "attempt=1; max=3");
  EXPECT_FALSE(r.recognise(t0, firsts, std::nullopt, std::nullopt).strong());
  retry_labels bad;
  bad.field("x-envoy-attempt-count", "-1");
  bad.field("amz-sdk-request", "attempt=9; max=3");
  const request_signals b = r.recognise(t0, bad, std::nullopt, std::nullopt);
  EXPECT_FALSE(b.strong()) << "malformed is never a recognised retry";
  EXPECT_TRUE(b.malformed(retry_signal::envoy_attempt_count));

  const retry_signal_counts c = r.counts();
  EXPECT_EQ(c.requests, 6);
  EXPECT_EQ(c.strong, 4);
  EXPECT_EQ(c.weak_only, 0);
  for (std::size_t i = 0; i < k_retry_label_count; ++i) EXPECT_EQ(c.recognised[i], 1) << i;
  EXPECT_EQ(c.recognised[index_of(retry_signal::idempotency_key)], 0);
  EXPECT_EQ(c.recognised[index_of(retry_signal::fingerprint)], 0);
  EXPECT_EQ(c.malformed[index_of(retry_signal::envoy_attempt_count)], 1);
  EXPECT_EQ(c.malformed[index_of(retry_signal::amz_sdk_request)], 1);
  EXPECT_EQ(c.malformed[index_of(retry_signal::grpc_previous_attempts)], 0);
}

TEST(RetrySignalRecognizer, ARepeatedIdempotencyKeyWithinTheWindowIsARetry) {
  retry_signal_recognizer r({.idempotency_keys = {.capacity = 64, .window = 30s}});
  const retry_labels none;
  EXPECT_FALSE(r.recognise(t0, none, 77, std::nullopt).repeated_idempotency_key);
  const request_signals again = r.recognise(t0 + 29s, none, 77, std::nullopt);
  EXPECT_TRUE(again.repeated_idempotency_key);
  EXPECT_TRUE(again.strong());
  EXPECT_TRUE(r.recognise(t0 + 58s, none, 77, std::nullopt).repeated_idempotency_key)
      << "29 s after the last sighting";
  EXPECT_FALSE(r.recognise(t0 + 89s, none, 77, std::nullopt).repeated_idempotency_key)
      << "31 s after it: the window has passed";
  EXPECT_FALSE(r.recognise(t0 + 89s, none, 78, std::nullopt).repeated_idempotency_key)
      << "another key";
  EXPECT_EQ(r.counts().recognised[index_of(retry_signal::idempotency_key)], 2);
}

TEST(RetrySignalRecognizer, AFingerprintWithoutAPriorFailureNeverFires) {
  retry_signal_recognizer r;
  const retry_labels none;
  for (int i = 0; i < 1000; ++i) {
    const request_signals seen =
        r.recognise(t0 + std::chrono::milliseconds(i), none, std::nullopt, 1234);
    ASSERT_FALSE(seen.fingerprint_after_failure) << i;
  }
  EXPECT_EQ(r.counts().recognised[index_of(retry_signal::fingerprint)], 0);
  EXPECT_EQ(r.counts().weak_only, 0);
}

TEST(RetrySignalRecognizer, AFingerprintSeenAgainAfterAFailureIsAWeakSignalOnce) {
  retry_signal_recognizer r({.failed_fingerprints = {.capacity = 64, .window = 10s}});
  const retry_labels none;
  EXPECT_FALSE(r.recognise(t0, none, std::nullopt, 5).fingerprint_after_failure);
  r.failed(t0 + 1s, 5);
  const request_signals retry = r.recognise(t0 + 2s, none, std::nullopt, 5);
  EXPECT_TRUE(retry.fingerprint_after_failure);
  EXPECT_TRUE(retry.weak_only());
  EXPECT_FALSE(retry.strong());
  EXPECT_FALSE(r.recognise(t0 + 3s, none, std::nullopt, 5).fingerprint_after_failure)
      << "the failure is used up: a success in between ends it";
  EXPECT_FALSE(r.recognise(t0 + 3s, none, std::nullopt, 6).fingerprint_after_failure)
      << "another fingerprint";
  r.failed(t0 + 4s, 5);
  EXPECT_FALSE(r.recognise(t0 + 14s, none, std::nullopt, 5).fingerprint_after_failure)
      << "10 s after the failure: outside the window";
  const retry_signal_counts c = r.counts();
  EXPECT_EQ(c.recognised[index_of(retry_signal::fingerprint)], 1);
  EXPECT_EQ(c.weak_only, 1);
  EXPECT_EQ(c.failures, 2);
}

TEST(RetrySignalRecognizer, AStrongLabelAndAFingerprintCountUnderBoth) {
  retry_signal_recognizer r;
  retry_labels labels;
  labels.field("x-envoy-attempt-count", "2");
  r.failed(t0, 9);
  const request_signals seen = r.recognise(t0 + 1s, labels, std::nullopt, 9);
  EXPECT_TRUE(seen.shows(retry_signal::envoy_attempt_count));
  EXPECT_TRUE(seen.shows(retry_signal::fingerprint));
  EXPECT_FALSE(seen.weak_only());
  EXPECT_EQ(r.counts().weak_only, 0);
  EXPECT_EQ(r.counts().strong, 1);
}

TEST(RetrySignalRecognizer, FailedFingerprintsStayWithinTheirCapacity) {
  retry_signal_recognizer r({.failed_fingerprints = {.capacity = 16, .window = 60s}});
  for (std::uint64_t k = 1; k <= 1000; ++k) r.failed(t0 + std::chrono::milliseconds(k), k);
  EXPECT_EQ(r.failed_fingerprints().size(t0 + 1s), 16U);
  EXPECT_EQ(r.failed_fingerprints().evictions(), 1000 - 16);
  const std::size_t bytes = r.memory_bytes();
  EXPECT_EQ(bytes, r.idempotency_keys().memory_bytes() + r.failed_fingerprints().memory_bytes());
  const retry_labels none;
  EXPECT_FALSE(r.recognise(t0 + 1s, none, std::nullopt, 1).fingerprint_after_failure)
      << "the first failure was evicted";
}

TEST(RetrySignalRecognizer, RefusesBadTableOptionsNamingTheField) {
  EXPECT_THROW(retry_signal_recognizer({.idempotency_keys = {.capacity = 0}}),
               std::invalid_argument);
  EXPECT_THROW(retry_signal_recognizer({.failed_fingerprints = {.window = 0s}}),
               std::invalid_argument);
}

}  // namespace
