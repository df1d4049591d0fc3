// SPDX-License-Identifier: Apache-2.0
// The examples of the API reference's pages for the server-side defences (Doxygen `\snippet`s
// between `//! [name]` markers): retry-aware admission, the adaptive LIFO queue with CoDel and
// the adaptive concurrency limit. Each runs here on a manual clock, and the assertions after it
// check what its comments say.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "stormguard/admission/codel.hpp"
#include "stormguard/admission/concurrency_limit.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/admission/retry_signals.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;

TEST(ReferenceExamples, RetryAdmission) {
  stormguard::testing::manual_clock clock;
  //! [retry_admission]
  // Retries may be at most 10 % of the first attempts over 10 s (no floor, to show the ratio).
  stormguard::admission::retry_admission admission({.ratio = 0.1, .min_retries_per_second = 0});

  // Per request: which attempt is it? (the x-envoy-attempt-count or grpc-previous-rpc-attempts
  // request header; none: a first attempt).
  int refused = 0;
  for (int i = 0; i < 100; ++i) {
    const auto first = stormguard::parse_attempt(std::nullopt, std::nullopt);
    (void)admission.admit(clock.now(), first);  // first attempts are always admitted
    const auto retry = stormguard::parse_attempt("2", std::nullopt);  // x-envoy-attempt-count: 2
    if (!admission.admit(clock.now(), retry)) {
      ++refused;  // answer 503 with grpc-retry-pushback-ms: -1 (do not retry), at almost no cost
    }
  }
  // 100 first attempts and 100 retries: 10 retries admitted, 90 refused.
  //! [retry_admission]
  EXPECT_EQ(admission.counts().first_attempts, 100);
  EXPECT_EQ(admission.counts().retries_admitted, 10);
  EXPECT_EQ(refused, 90);
}

TEST(ReferenceExamples, RetrySignalRecognizer) {
  stormguard::testing::manual_clock clock;
  //! [retry_signal_recognizer]
  // Two tables of 65,536 entries (1 MiB each), each with a 60-s window.
  stormguard::admission::retry_signal_recognizer recognizer;
  namespace admission = stormguard::admission;

  // An AWS SDK's second attempt: a strong signal from its label alone.
  admission::retry_labels labels;
  labels.field("amz-sdk-request", "attempt=2; max=3");
  const auto labelled = recognizer.recognise(clock.now(), labels, std::nullopt, std::nullopt);

  // curl --retry sends nothing but the same request again. The server's digest of it (here a
  // constant; serve hashes principal or peer, method, target and body with SHA-256):
  const std::uint64_t fingerprint = 0x5eed;
  const admission::retry_labels none;
  const auto first = recognizer.recognise(clock.now(), none, std::nullopt, fingerprint);
  recognizer.failed(clock.now(), fingerprint);  // the server answered it 503
  clock.advance(1s);
  const auto again = recognizer.recognise(clock.now(), none, std::nullopt, fingerprint);
  // labelled.strong(): true; first: nothing; again.weak_only(): true (a weak signal).
  //! [retry_signal_recognizer]
  EXPECT_TRUE(labelled.strong());
  EXPECT_FALSE(first.strong() || first.weak_only());
  EXPECT_TRUE(again.weak_only());
  EXPECT_EQ(
      recognizer.counts().recognised[admission::index_of(admission::retry_signal::fingerprint)], 1);
}

TEST(ReferenceExamples, AdaptiveLifoQueue) {
  stormguard::testing::manual_clock clock;
  //! [adaptive_lifo_queue]
  // A server's queue of requests (ints here): FIFO while requests wait less than CoDel's target
  // (5 ms), LIFO and dropping the stale ones while the queue stays above it.
  stormguard::admission::adaptive_lifo_queue<int> queue;  // target 5 ms, interval 100 ms
  std::vector<int> rejected;  // to be answered 503 at once instead of served too late

  for (int request = 0; request < 50; ++request) {  // a burst the workers cannot keep up with
    (void)queue.push(clock.now(), request);
    clock.advance(10ms);
  }
  std::vector<int> served;
  while (auto next = queue.pop(clock.now(), [&](int& stale) { rejected.push_back(stale); })) {
    served.push_back(*next);
    clock.advance(5ms);  // serving takes 5 ms
  }
  // Served in arrival order (0, 1, ..., 20) while the wait has been above the target for less
  // than one interval (100 ms); then overloaded (queue.lifo()): the newest request, 49, is
  // served next, and the 28 others, which waited longer than 2 x target, are rejected.
  //! [adaptive_lifo_queue]
  ASSERT_EQ(served.size(), 22u);
  EXPECT_EQ(served.front(), 0);
  EXPECT_EQ(served[20], 20);
  EXPECT_EQ(served.back(), 49);
  EXPECT_EQ(rejected.size(), 28u);
  EXPECT_EQ(queue.dropped(), static_cast<std::int64_t>(rejected.size()));
}

TEST(ReferenceExamples, ConcurrencyLimit) {
  stormguard::testing::manual_clock clock;
  stormguard::random_generator rng(3);
  //! [concurrency_limit]
  // At most `limit()` requests in service at once; the limit adapts to the latency seen
  // (Envoy's adaptive concurrency: a gradient controller). Start at 4 to show a refusal.
  stormguard::admission::concurrency_limit limit({.min_concurrency = 1, .initial_limit = 4},
                                                 clock.now());
  std::vector<stormguard::time_point> in_service;
  int refused = 0;
  for (int i = 0; i < 6; ++i) {
    if (limit.try_acquire(clock.now())) {
      in_service.push_back(clock.now());
    } else {
      ++refused;  // answer 503 with Retry-After: limit.retry_after_for_refusal(rng), 1..5 s
    }
  }
  clock.advance(20ms);
  for (const stormguard::time_point started : in_service) {
    limit.release(clock.now(), started, rng);  // the request's latency is a sample
  }
  // 4 served, 2 refused; none outstanding now.
  //! [concurrency_limit]
  EXPECT_EQ(in_service.size(), 4u);
  EXPECT_EQ(refused, 2);
  EXPECT_EQ(limit.refused(), 2);
  EXPECT_EQ(limit.outstanding(), 0);
  const auto wait = limit.retry_after_for_refusal(rng);
  EXPECT_GE(wait, 1s);
  EXPECT_LE(wait, 5s);
}

}  // namespace
