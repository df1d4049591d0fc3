// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry_headers.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_info;
using stormguard::duration;
using stormguard::format_attempt_count;
using stormguard::format_grpc_timeout;
using stormguard::parse_attempt;
using stormguard::parse_grpc_timeout;
using stormguard::parse_pushback;
using stormguard::pushback;

TEST(ParseAttempt, AbsentHeadersMeanAFirstAttempt) {
  EXPECT_EQ(parse_attempt(std::nullopt, std::nullopt), (attempt_info{1, false}));
}

TEST(ParseAttempt, ReadsEitherHeaderAndChecksThatTheyAgree) {
  EXPECT_EQ(parse_attempt("3", std::nullopt), (attempt_info{3, false}));
  EXPECT_EQ(parse_attempt(" 1\t", std::nullopt), (attempt_info{1, false}));
  EXPECT_EQ(parse_attempt(std::nullopt, "0"), (attempt_info{1, false}));
  EXPECT_EQ(parse_attempt(std::nullopt, "2"), (attempt_info{3, false}));
  EXPECT_EQ(parse_attempt("3", "2"), (attempt_info{3, false}));
  EXPECT_EQ(parse_attempt("3", "0"), (attempt_info{2, true}));
}

TEST(ParseAttempt, HostileValuesReadAsARetryNeverAsAFirstAttempt) {
  for (const char* bad : {"-1", "0", "99999999999", "1000001", "text", "", "1 2", "+1", "0x2",
                          "1.0", "18446744073709551617"}) {
    const attempt_info a = parse_attempt(std::string_view(bad), std::nullopt);
    EXPECT_TRUE(a.malformed) << bad;
    EXPECT_TRUE(a.is_retry()) << bad;
  }
  EXPECT_TRUE(parse_attempt(std::nullopt, "-1").malformed);
  EXPECT_TRUE(parse_attempt(std::nullopt, "1000000").malformed);
  EXPECT_EQ(parse_attempt("1000000", std::nullopt), (attempt_info{1'000'000, false}));
}

// Each field in turn, as a server sees them (names in any case, fields repeated).
attempt_info read_fields(std::initializer_list<std::pair<std::string_view, std::string_view>> f) {
  stormguard::attempt_fields reader;
  for (const auto& [name, value] : f) reader.field(name, value);
  return reader.result();
}

TEST(AttemptFields, ReadsAsParseAttemptWhenNoFieldRepeats) {
  constexpr attempt_info malformed{2, true};
  EXPECT_EQ(read_fields({}), (attempt_info{1, false}));
  EXPECT_EQ(read_fields({{"Host", "x"}, {"X-Envoy-Attempt-Count", "3"}}), (attempt_info{3, false}));
  EXPECT_EQ(read_fields({{"GRPC-PREVIOUS-RPC-ATTEMPTS", "1"}}), (attempt_info{2, false}));
  EXPECT_EQ(read_fields({{"x-envoy-attempt-count", "2"}, {"grpc-previous-rpc-attempts", "1"}}),
            (attempt_info{2, false}));
  EXPECT_EQ(read_fields({{"x-envoy-attempt-count", "1"}, {"grpc-previous-rpc-attempts", "1"}}),
            malformed);
  EXPECT_EQ(read_fields({{"x-envoy-attempt-count", "-1"}}), malformed);
  // A name that only starts like one is another field.
  EXPECT_EQ(read_fields({{"x-envoy-attempt-count-x", "5"}, {"x-envoy-attempt-coun", "5"}}),
            (attempt_info{1, false}));
}

TEST(AttemptFields, ARepeatedFieldThatReadsDifferentlyIsMalformed) {
  constexpr attempt_info malformed{2, true};
  // "1" then "2": which attempt is it? Not a first attempt: the budget decides (a retry).
  EXPECT_EQ(read_fields({{"x-envoy-attempt-count", "1"}, {"x-envoy-attempt-count", "2"}}),
            malformed);
  EXPECT_EQ(read_fields({{"x-envoy-attempt-count", "2"}, {"X-Envoy-Attempt-Count", "1"}}),
            malformed);
  EXPECT_EQ(read_fields({{"grpc-previous-rpc-attempts", "0"}, {"grpc-previous-rpc-attempts", "1"}}),
            malformed);
  // The same value twice (white space aside) reads as one.
  EXPECT_EQ(read_fields({{"x-envoy-attempt-count", "1"}, {"x-envoy-attempt-count", " 1 "}}),
            (attempt_info{1, false}));
  EXPECT_EQ(read_fields({{"x-envoy-attempt-count", "4"}, {"x-envoy-attempt-count", "4"}}),
            (attempt_info{4, false}));
}

TEST(FormatAttemptCount, WritesTheDecimalNumber) {
  std::array<char, 24> buf{};
  EXPECT_EQ(format_attempt_count(4, buf), "4");
  EXPECT_EQ(format_attempt_count(0, buf), "1");
  EXPECT_EQ(format_attempt_count(INT64_MAX, buf), "9223372036854775807");
}

TEST(ParseGrpcTimeout, FollowsTheGrammarExactly) {
  EXPECT_EQ(parse_grpc_timeout("250m"), duration(250ms));
  EXPECT_EQ(parse_grpc_timeout("1S"), duration(1s));
  EXPECT_EQ(parse_grpc_timeout("2M"), duration(2min));
  EXPECT_EQ(parse_grpc_timeout("3H"), duration(3h));
  EXPECT_EQ(parse_grpc_timeout("7u"), duration(7us));
  EXPECT_EQ(parse_grpc_timeout("9n"), duration(9ns));
  EXPECT_EQ(parse_grpc_timeout("0m"), duration::zero());  // already expired
  EXPECT_EQ(parse_grpc_timeout("99999999n"), duration(99'999'999ns));
  for (const char* bad :
       {"", "m", "100", "123456789m", "-1m", "+1m", " 1m", "1m ", "1s", "1x", "1.5S", "1mm"}) {
    EXPECT_EQ(parse_grpc_timeout(bad), std::nullopt) << bad;
  }
}

TEST(ParseGrpcTimeout, HugeValuesSaturateInsteadOfWrapping) {
  EXPECT_EQ(parse_grpc_timeout("99999999H"), duration::max());
  EXPECT_EQ(parse_grpc_timeout("2562047H"), duration(2562047h));
}

TEST(FormatGrpcTimeout, PicksTheFinestUnitThatFitsAndRoundsDown) {
  std::array<char, 16> buf{};
  EXPECT_EQ(format_grpc_timeout(250ms, buf), "250000u");  // 9 digits of n do not fit: next unit
  EXPECT_EQ(format_grpc_timeout(duration(99'999'999), buf), "99999999n");
  EXPECT_EQ(format_grpc_timeout(duration(100'000'001), buf), "100000u");  // rounded down
  EXPECT_EQ(format_grpc_timeout(-5ms, buf), "0n");
  EXPECT_EQ(format_grpc_timeout(duration::max(), buf), "2562047H");
  // Every written value parses back to at most the original, and loses less than one unit, a
  // unit being at most 1/100,000 of the value (the finer unit's 8 digits overflowed).
  for (const duration d : {duration(1), duration(999'999'999), duration(123'456'789'012),
                           duration(std::chrono::hours(1000))}) {
    const auto back = parse_grpc_timeout(format_grpc_timeout(d, buf));
    ASSERT_TRUE(back.has_value());
    EXPECT_LE(*back, d);
    EXPECT_GE(*back, d - d / 100'000 - duration(1));
  }
}

TEST(ParsePushback, NonNegativeIsADelayAnythingElseMeansDoNotRetry) {
  EXPECT_EQ(parse_pushback("500"), (pushback{false, 500ms}));
  EXPECT_EQ(parse_pushback(" 0 "), (pushback{false, 0ms}));
  EXPECT_EQ(parse_pushback("-1"), (pushback{true, {}}));
  for (const char* bad : {"", "abc", "1.5", "+3", "-", "1e3", "5 0"}) {
    EXPECT_TRUE(parse_pushback(bad).do_not_retry) << bad;
  }
  EXPECT_EQ(parse_pushback("99999999999999999999999"), (pushback{false, duration::max()}));
}

TEST(ParseHeaders, BytesAroundTheDigitsAndUnitLettersAreRejected) {
  // Letters next to the unit table ('G', 'I', 'v'), bytes below '0' and above 0x7f, NUL.
  for (const std::string_view bad :
       {std::string_view("1G"), std::string_view("1I"), std::string_view("1v"),
        std::string_view("1\xff"), std::string_view("\xb1m"), std::string_view("1\0", 2),
        std::string_view("/m"), std::string_view(":m")}) {
    EXPECT_EQ(parse_grpc_timeout(bad), std::nullopt);
  }
  for (const std::string_view bad :
       {std::string_view("/"), std::string_view(":"), std::string_view("\xb1"),
        std::string_view("\0", 1), std::string_view("1\0", 2),
        std::string_view("00000000000000000001"), std::string_view("9223372036854775808")}) {
    EXPECT_TRUE(parse_attempt(bad, std::nullopt).malformed);
    EXPECT_TRUE(parse_attempt(std::nullopt, bad).malformed);
  }
  EXPECT_EQ(parse_attempt("0000000000000000001", std::nullopt), (attempt_info{1, false}));
  EXPECT_EQ(parse_attempt("12", "11"), (attempt_info{12, false}));
  EXPECT_EQ(parse_attempt(std::nullopt, "999999"), (attempt_info{1'000'000, false}));
}

}  // namespace
