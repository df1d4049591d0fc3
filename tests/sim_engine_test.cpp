// SPDX-License-Identifier: Apache-2.0
// The simulator's internal engine (src/sim/engine/include/stormguard_engine/): a logical
// request's copies in flight, the one JSON writer of the simulator's and the lab's output, and
// what the driver does with an answer as its client profile says.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stormguard/client_profile.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"
#include "stormguard_engine/driver.hpp"
#include "stormguard_engine/fleet.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace {

using stormguard::sim::engine::json_string;
using stormguard::sim::engine::json_writer;
using stormguard::sim::engine::request;
using stormguard::sim::engine::request_state;

request fresh() { return request{0, 0, 0, request_state::awaiting, {}, false, 0}; }

TEST(EngineRequest, OneCopyAtATimeIsTheLatestAttempt) {
  request r = fresh();
  r.start_copy(1);
  EXPECT_TRUE(r.in_flight(1));
  EXPECT_EQ(r.copies_in_flight(), 1);
  r.end_copy(1);  // timed out
  EXPECT_FALSE(r.in_flight(1));
  r.start_copy(2);
  EXPECT_FALSE(r.in_flight(1)) << "a late answer of attempt 1 is not in flight";
  EXPECT_TRUE(r.in_flight(2));
  EXPECT_EQ(r.copies_in_flight(), 1);
}

TEST(EngineRequest, SeveralCopiesOfOneRequestInFlight) {
  request r = fresh();
  r.start_copy(1);
  r.start_copy(2);  // a hedge while attempt 1 is still out
  r.start_copy(3);
  EXPECT_EQ(r.copies_in_flight(), 3);
  r.end_copy(2);  // the middle one answers first
  EXPECT_TRUE(r.in_flight(1));
  EXPECT_FALSE(r.in_flight(2));
  EXPECT_TRUE(r.in_flight(3));
  EXPECT_EQ(r.copies_in_flight(), 2);
  r.end_copy(2);  // counted once
  EXPECT_EQ(r.copies_in_flight(), 2);
}

TEST(EngineRequest, ACopyOlderThanTheWindowIsNoLongerTracked) {
  request r = fresh();
  r.start_copy(1);
  r.start_copy(1 + stormguard::sim::engine::k_max_copies);
  EXPECT_FALSE(r.in_flight(1));
  EXPECT_EQ(r.copies_in_flight(), 1);
  EXPECT_FALSE(r.in_flight(100)) << "not started yet";
}

TEST(EngineJson, WritesNestedValuesInOrderWithTheirSeparators) {
  json_writer w;
  w.begin_report("s", 42).fixed("ratio", 1.0, 4).fixed("none", std::nullopt, 1);
  w.key("rows").begin_array();
  w.begin_object().field("name", "a").field("n", std::int64_t{3}).end_object();
  w.begin_object().field("ok", true).number("load", 2.5).end_object();
  w.value(std::int64_t{7}).null();
  w.end_array().field("opt", std::optional<std::int64_t>()).field("d", 1.0);
  EXPECT_EQ(std::move(w.end_object()).line(),
            R"({"scenario":"s","seed":42,"ratio":1.0000,"none":null,"rows":[{"name":"a","n":3},)"
            R"({"ok":true,"load":2.5},7,null],"opt":null,"d":1.0})"
            "\n");
}

TEST(EngineJson, EscapesQuotesAndControlsAndReplacesBadUtf8) {
  EXPECT_EQ(json_string("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
  EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"") << "well-formed UTF-8 kept";
  EXPECT_EQ(json_string("bad\xff"), "\"bad\xef\xbf\xbd\"") << "an invalid byte becomes U+FFFD";
  EXPECT_EQ(json_string("cut\xc3"), "\"cut\xef\xbf\xbd\"") << "a truncated sequence too";
}

}  // namespace

namespace profile {

using namespace std::chrono_literals;
using stormguard::duration;
using stormguard::find_client_profile;

// Records what the driver asks of its environment: the retries it schedules.
struct recording_transport : stormguard::sim::engine::no_notes {
  std::vector<std::int64_t> retries_at;  // when each scheduled attempt (> 1) is due, ns
  void schedule_arrival(std::int64_t) {}
  void schedule_attempt(std::int64_t at, std::uint32_t, std::int32_t) { retries_at.push_back(at); }
  void send(std::uint32_t, std::int32_t, std::int64_t) {}
};

constexpr std::int64_t k_answered_at = 1'000'000'000;  // 1 s into the scenario

// One request's first attempt, answered at 1 s by `answer` (a driver call): the delay of the
// retry the driver then schedules, or nullopt for none.
template <class Answer>
std::optional<duration> retry_delay(const stormguard::client_profile& client, duration backoff,
                                    Answer&& answer) {
  stormguard::sim::scenario s = stormguard::sim::friday_night();
  s.incident.reset();
  s.client = client;
  stormguard::config::policy p;
  p.name = "constant";
  p.retry.max_retries = 3;
  p.retry.backoff = {
      .base = backoff, .cap = backoff, .multiplier = 1.0, .jitter = stormguard::jitter::none};
  const stormguard::sim::strategy strat = stormguard::sim::from_policy(p);
  recording_transport t;
  stormguard::sim::engine::driver<stormguard::no_budget, recording_transport> d(
      s, strat, stormguard::no_budget{}, t);
  d.arrival(0);
  answer(d);
  if (t.retries_at.empty()) return std::nullopt;
  return duration(t.retries_at.back() - k_answered_at);
}

template <class Driver>
void retry_after_3s(Driver& d) {
  d.unavailable_after(0, 1, k_answered_at, 3s);
}

TEST(DriverProfile, RetryAfterIsWaitedAtLeastExactlyOrNotAtAllAsTheProfileSays) {
  auto client = *find_client_profile("stormguard");
  // minimum: max(backoff, Retry-After) plus the policy's upward spread of at most half of it.
  for (int i = 0; i < 20; ++i) {
    const auto at_least = retry_delay(client, 100ms, [](auto& d) { retry_after_3s(d); });
    ASSERT_TRUE(at_least);
    EXPECT_GE(*at_least, 3s);
    EXPECT_LE(*at_least, 4500ms);
  }
  const auto longer = retry_delay(client, 20s, [](auto& d) { retry_after_3s(d); });
  ASSERT_TRUE(longer);
  EXPECT_GE(*longer, 20s);
  // replace (go-retryablehttp, curl): exactly Retry-After, even below or above the backoff.
  client = *find_client_profile("go-retryablehttp");
  EXPECT_EQ(retry_delay(client, 100ms, [](auto& d) { retry_after_3s(d); }), 3s);
  EXPECT_EQ(retry_delay(client, 20s, [](auto& d) { retry_after_3s(d); }), 3s);
  // ignore (Envoy's defaults, gRPC): the backoff alone.
  client = *find_client_profile("grpc");
  EXPECT_EQ(retry_delay(client, 100ms, [](auto& d) { retry_after_3s(d); }), 100ms);
  EXPECT_EQ(retry_delay(client, 20s, [](auto& d) { retry_after_3s(d); }), 20s);
}

TEST(DriverProfile, AClientThatNeverRetriesSchedulesNoRetry) {
  const auto browser = *find_client_profile("browser-fetch");
  EXPECT_EQ(retry_delay(browser, 100ms, [](auto& d) { d.unavailable(0, 1, k_answered_at); }),
            std::nullopt);
  EXPECT_EQ(retry_delay(browser, 100ms, [](auto& d) { d.timed_out(0, 1, k_answered_at); }),
            std::nullopt);
  EXPECT_EQ(retry_delay(browser, 100ms, [](auto& d) { retry_after_3s(d); }), std::nullopt);
  // The same answers retried by a client that does.
  EXPECT_EQ(retry_delay(*find_client_profile("envoy"), 100ms,
                        [](auto& d) { d.unavailable(0, 1, k_answered_at); }),
            100ms);
}

}  // namespace profile
