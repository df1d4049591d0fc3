// SPDX-License-Identifier: Apache-2.0
#include "stormguard/duration_text.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

namespace {

using namespace std::chrono_literals;
using stormguard::duration;
using stormguard::duration_error;
using stormguard::format_duration;
using stormguard::parse_duration;

std::optional<duration> ns(std::int64_t count) { return duration(count); }

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration("100ns"), ns(100));
  EXPECT_EQ(parse_duration("250us"), std::optional<duration>(250us));
  EXPECT_EQ(parse_duration("250ms"), std::optional<duration>(250ms));
  EXPECT_EQ(parse_duration("3s"), std::optional<duration>(3s));
  EXPECT_EQ(parse_duration("2m"), std::optional<duration>(2min));
  EXPECT_EQ(parse_duration("2min"), std::optional<duration>(2min));
  EXPECT_EQ(parse_duration("1h"), std::optional<duration>(1h));
  EXPECT_EQ(parse_duration("0s"), std::optional<duration>(0s));
  EXPECT_EQ(parse_duration("0ns"), std::optional<duration>(0s));
}

TEST(ParseDuration, FractionsAreExact) {
  EXPECT_EQ(parse_duration("1.5s"), std::optional<duration>(1500ms));
  EXPECT_EQ(parse_duration("0.25h"), std::optional<duration>(15min));
  EXPECT_EQ(parse_duration("0.1s"), ns(100'000'000));  // not 99999999 as with double
  EXPECT_EQ(parse_duration("0.3s"), ns(300'000'000));
  EXPECT_EQ(parse_duration("1.000000001s"), ns(1'000'000'001));
  EXPECT_EQ(parse_duration("0.001us"), ns(1));
  EXPECT_EQ(parse_duration("1.50s"), std::optional<duration>(1500ms));  // trailing zeros
  EXPECT_EQ(parse_duration("1.000000000000000000000000s"), std::optional<duration>(1s));
  EXPECT_EQ(parse_duration("007ms"), std::optional<duration>(7ms));  // leading zeros
  EXPECT_EQ(parse_duration("0.000000000005h"), ns(18));              // 5e-12 h = 18 ns exactly
}

TEST(ParseDuration, RejectsFractionsOfANanosecond) {
  for (const char* text : {"0.5ns", "1.0000000001s", "0.0001us", "0.1ns", "0.000000000001h"}) {
    EXPECT_FALSE(parse_duration(text)) << text;
  }
}

TEST(ParseDuration, RejectsBadSyntax) {
  for (const char* text :
       {"",       "1",    "s",    "ms",    "-1s",    "+1s",    " 1s",    "1s ",  "1 s", "5 ms",
        "1S",     "1MS",  "1sec", "1e3ms", "1E3ms",  "0x10ms", "0x1Ams", "1.s",  ".5s", "1..5s",
        "1.2.3s", "1,5s", "1ms2", "1mss",  "1ms1ms", "inf s",  "nan",    "infs", "１s"}) {
    EXPECT_FALSE(parse_duration(text)) << text;
  }
}

TEST(ParseDuration, NeverWrapsAboveTheMaximum) {
  const std::int64_t max = duration::max().count();  // 9223372036854775807 ns
  EXPECT_EQ(parse_duration("9223372036854775807ns"), ns(max));
  EXPECT_FALSE(parse_duration("9223372036854775808ns"));
  EXPECT_FALSE(parse_duration("18446744073709551616ns"));  // 2^64 would wrap to 0 in 64 bits
  EXPECT_FALSE(parse_duration("99999999999999999999999999999999999999999ns"));
  EXPECT_EQ(parse_duration("9223372036.854775807s"), ns(max));
  EXPECT_FALSE(parse_duration("9223372036.854775808s"));
  EXPECT_EQ(parse_duration("2562047h"), ns(2562047LL * 3'600'000'000'000));
  EXPECT_FALSE(parse_duration("2562048h"));
  EXPECT_FALSE(parse_duration("10000000h"));
  EXPECT_FALSE(parse_duration("00000000000000000000000000009223372036854775808ns"));
  EXPECT_EQ(parse_duration("00000000000000000000000000009223372036854775807ns"), ns(max));
}

TEST(FormatDuration, ShortestExactText) {
  EXPECT_EQ(format_duration(1500ms), "1.5s");
  EXPECT_EQ(format_duration(60s), "60s");
  EXPECT_EQ(format_duration(20ms), "20ms");
  EXPECT_EQ(format_duration(0s), "0s");
  EXPECT_EQ(format_duration(duration(1)), "1ns");
  EXPECT_EQ(format_duration(-1500ms), "-1.5s");
  EXPECT_EQ(format_duration(duration::min()), "-9223372036.854775808s");
}

TEST(FormatDuration, RoundTripsThroughParse) {
  for (const duration d : {duration(0), duration(1), duration(999), duration(1'000'000'001),
                           duration(123'456'789), duration(3'600'000'000'000), duration::max()}) {
    EXPECT_EQ(parse_duration(format_duration(d)), std::optional(d)) << format_duration(d);
  }
}

TEST(DurationError, EmptyForEveryValidDuration) {
  for (const char* text : {"0s", "250ms", "1.5s", "007ms", "2562047h", "9223372036854775807ns"}) {
    EXPECT_EQ(duration_error(text), "") << text;
    EXPECT_TRUE(parse_duration(text)) << text;
  }
}

// The reason names the rule broken, so that a user sees why "-1s" or "1e9h" is refused.
TEST(DurationError, SaysWhyATextIsNotADuration) {
  const auto says = [](std::string_view text, std::string_view reason) {
    const std::string error = duration_error(text);
    EXPECT_NE(error.find(reason), std::string::npos) << text << " -> " << error;
    EXPECT_FALSE(parse_duration(text)) << text;
  };
  says("-1s", "negative");
  says("-0.5ns", "negative");
  says("1e9h", "no exponent");
  says("1e9h", "above the largest duration");
  says("1.5e3ms", "write 1500ms");
  says("1e-9ns", "not a whole number of nanoseconds");
  says("0.5ns", "not a whole number of nanoseconds");
  says("1.0000000001s", "not a whole number of nanoseconds");
  says("2562048h", "above the largest duration");
  says("9223372036854775808ns", "about 292 years");
  says("99999999999999999999999999999999999999999ns", "above the largest duration");
  says("5", "no unit");
  says("5 ms", "no space");
  says(" 5ms", "no space");
  says("5S", "unknown unit");
  says("5sec", "unknown unit");
  says("+5s", "no sign");
  says("", "empty");
  says(".5s", "a digit before");
  says("1.s", "a digit after");
  says("ms", "a number");
  says("0x10s", "unknown unit");
}

TEST(DurationError, NeverEchoesTheWholeText) {
  // The reason may quote a unit, never an unbounded part of the text.
  const std::string huge = "1" + std::string(900'000, 'x');
  EXPECT_LT(duration_error(huge).size(), 200U);
  EXPECT_LT(duration_error(std::string(900'000, '9') + "s").size(), 200U);
}

}  // namespace
