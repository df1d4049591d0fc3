// SPDX-License-Identifier: Apache-2.0
// The simulator's internal engine (src/sim/engine/include/stormguard_engine/): a logical
// request's copies in flight, and the one JSON writer of the simulator's and the lab's output.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

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
