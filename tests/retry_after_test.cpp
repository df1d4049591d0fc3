// SPDX-License-Identifier: Apache-2.0
#include "stormguard/retry_after.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../fuzz/retry_after_invariants.hpp"

namespace {

using namespace std::chrono;
using stormguard::duration;
using stormguard::parse_http_date;
using stormguard::parse_retry_after;
using stormguard::parse_retry_after_detailed;
using stormguard::retry_after_form;

// Sunday 2025-06-15 12:00:00 UTC: the injected "now" of most tests.
const system_clock::time_point k_now = sys_days{2025y / June / 15} + 12h;

std::optional<duration> parse(std::string_view text, system_clock::time_point now = k_now) {
  return parse_retry_after(text, now);
}

sys_seconds at(year_month_day date, seconds time_of_day = 0s) {
  return sys_seconds(sys_days(date)) + time_of_day;
}

// ---------------------------------------------------------------------------------------------
// delay-seconds
// ---------------------------------------------------------------------------------------------

TEST(RetryAfterDelaySeconds, ParsesWholeSeconds) {
  EXPECT_EQ(parse("120"), duration(120s));
  EXPECT_EQ(parse("1"), duration(1s));
}

TEST(RetryAfterDelaySeconds, ZeroIsZeroNotUnparsable) { EXPECT_EQ(parse("0"), duration::zero()); }

TEST(RetryAfterDelaySeconds, LeadingZerosAreDecimalNotOctal) {
  EXPECT_EQ(parse("007"), duration(7s));
  EXPECT_EQ(parse("010"), duration(10s));
  EXPECT_EQ(parse("0000"), duration::zero());
}

TEST(RetryAfterDelaySeconds, ReportsTheForm) {
  const auto parsed = parse_retry_after_detailed("5", k_now);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->form, retry_after_form::delay_seconds);
  EXPECT_EQ(parsed->delay, duration(5s));
}

TEST(RetryAfterDelaySeconds, DoesNotDependOnNow) {
  EXPECT_EQ(parse("5", system_clock::time_point::min()), duration(5s));
  EXPECT_EQ(parse("5", system_clock::time_point::max()), duration(5s));
  EXPECT_EQ(parse("5", system_clock::time_point{}), duration(5s));
}

TEST(RetryAfterDelaySeconds, IgnoresSurroundingSpacesAndTabs) {
  EXPECT_EQ(parse(" 5"), duration(5s));
  EXPECT_EQ(parse("5 "), duration(5s));
  EXPECT_EQ(parse(" \t 5\t "), duration(5s));
}

TEST(RetryAfterDelaySeconds, RejectsWhitespaceOtherThanSpAndHtab) {
  EXPECT_EQ(parse("\n5"), std::nullopt);
  EXPECT_EQ(parse("5\r\n"), std::nullopt);
  EXPECT_EQ(parse("\v5"), std::nullopt);
  EXPECT_EQ(parse(std::string_view("5\0", 2)), std::nullopt);
}

TEST(RetryAfterDelaySeconds, RejectsInnerWhitespace) {
  EXPECT_EQ(parse("1 2"), std::nullopt);
  EXPECT_EQ(parse("1\t2"), std::nullopt);
}

TEST(RetryAfterDelaySeconds, RejectsASign) {
  EXPECT_EQ(parse("-1"), std::nullopt);
  EXPECT_EQ(parse("+1"), std::nullopt);
  EXPECT_EQ(parse("-0"), std::nullopt);
  EXPECT_EQ(parse("- 5"), std::nullopt);
}

TEST(RetryAfterDelaySeconds, RejectsAFraction) {
  EXPECT_EQ(parse("1.5"), std::nullopt);
  EXPECT_EQ(parse("1."), std::nullopt);
  EXPECT_EQ(parse(".5"), std::nullopt);
  EXPECT_EQ(parse("0,5"), std::nullopt);
}

TEST(RetryAfterDelaySeconds, RejectsHexAndExponents) {
  EXPECT_EQ(parse("0x10"), std::nullopt);
  EXPECT_EQ(parse("1e3"), std::nullopt);
  EXPECT_EQ(parse("ff"), std::nullopt);
  EXPECT_EQ(parse("inf"), std::nullopt);
}

TEST(RetryAfterDelaySeconds, RejectsTrailingJunk) {
  EXPECT_EQ(parse("10s"), std::nullopt);
  EXPECT_EQ(parse("10;"), std::nullopt);
  EXPECT_EQ(parse("10, 20"), std::nullopt);
  EXPECT_EQ(parse("10 seconds"), std::nullopt);
}

TEST(RetryAfterDelaySeconds, RejectsEmptyAndWhitespaceOnly) {
  EXPECT_EQ(parse(""), std::nullopt);
  EXPECT_EQ(parse(" "), std::nullopt);
  EXPECT_EQ(parse("\t \t"), std::nullopt);
}

TEST(RetryAfterDelaySeconds, RejectsNonAsciiDigits) {
  EXPECT_EQ(parse("\xd9\xa5"), std::nullopt);      // ARABIC-INDIC DIGIT FIVE
  EXPECT_EQ(parse("\xef\xbc\x95"), std::nullopt);  // FULLWIDTH DIGIT FIVE
  EXPECT_EQ(parse("5\xc2\xa0"), std::nullopt);     // trailing NO-BREAK SPACE is not OWS
}

TEST(RetryAfterDelaySeconds, LargestWholeSecondIsExact) {
  // duration::max() is 9223372036.854775807 s.
  EXPECT_EQ(parse("9223372036"), duration(9223372036s));
}

TEST(RetryAfterDelaySeconds, SaturatesJustAboveTheLargestWholeSecond) {
  EXPECT_EQ(parse("9223372037"), duration::max());
}

TEST(RetryAfterDelaySeconds, DoesNotWrapAt32Or64Bits) {
  EXPECT_EQ(parse("4294967296"), duration(4294967296s));      // 2^32: no 32-bit wrap
  EXPECT_EQ(parse("18446744073709551616"), duration::max());  // 2^64 would wrap to 0
  EXPECT_EQ(parse("18446744073709551617"), duration::max());  // ... or to 1
}

TEST(RetryAfterDelaySeconds, SaturatesOverlongDigitStrings) {
  EXPECT_EQ(parse(std::string(1000, '9')), duration::max());
  EXPECT_EQ(parse("1" + std::string(100, '0')), duration::max());
}

TEST(RetryAfterDelaySeconds, LeadingZerosDoNotSaturate) {
  EXPECT_EQ(parse(std::string(100, '0') + "42"), duration(42s));
}

TEST(RetryAfterDelaySeconds, SaturatedValueWithTrailingJunkIsStillRejected) {
  EXPECT_EQ(parse(std::string(30, '9') + "x"), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// IMF-fixdate
// ---------------------------------------------------------------------------------------------

TEST(RetryAfterImfFixdate, FutureDateGivesTheExactDelay) {
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:01:40 GMT"), duration(100s));
  EXPECT_EQ(parse("Mon, 16 Jun 2025 12:00:00 GMT"), duration(24h));
}

TEST(RetryAfterImfFixdate, ReportsTheForm) {
  const auto parsed = parse_retry_after_detailed("Sun, 15 Jun 2025 12:00:01 GMT", k_now);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->form, retry_after_form::imf_fixdate);
  EXPECT_EQ(parsed->delay, duration(1s));
}

TEST(RetryAfterImfFixdate, SubtractsTheSubsecondPartOfNow) {
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 GMT", k_now + 250ms), duration(9750ms));
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:01 GMT", k_now + 999999999ns), duration(1ns));
}

TEST(RetryAfterImfFixdate, DateAtNowIsZero) {
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:00 GMT"), duration::zero());
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:00 GMT", k_now + 1ns), duration::zero());
}

TEST(RetryAfterImfFixdate, PastDateIsZero) {
  EXPECT_EQ(parse("Sun, 15 Jun 2025 11:59:59 GMT"), duration::zero());
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT"), duration::zero());  // RFC 9110's example
}

TEST(RetryAfterImfFixdate, ParsesTheRfcExampleAsUtc) {
  // 1994-11-06 08:49:37 UTC is 784111777 s after the epoch (date -u -d @784111777).
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", k_now), sys_seconds(784111777s));
}

TEST(RetryAfterImfFixdate, AcceptsUtcAsTheZone) {
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 UTC"), duration(10s));
}

TEST(RetryAfterImfFixdate, IgnoresSurroundingWhitespace) {
  EXPECT_EQ(parse(" \tSun, 15 Jun 2025 12:00:10 GMT\t "), duration(10s));
}

TEST(RetryAfterImfFixdate, RejectsUnknownZones) {
  for (const char* zone :
       {"EST", "CET", "Z", "+0000", "-0000", "GMT+1", "UT", "gmt", "Gmt", "utc", "GMT0", "GMTT"}) {
    EXPECT_EQ(parse(std::string("Sun, 15 Jun 2025 12:00:10 ") + zone), std::nullopt) << zone;
  }
}

TEST(RetryAfterImfFixdate, RejectsAMissingZone) {
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 \t"), std::nullopt);  // trimmed: still no zone
}

TEST(RetryAfterImfFixdate, NamesAreCaseSensitive) {
  EXPECT_EQ(parse("Sun, 15 jun 2025 12:00:10 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 JUN 2025 12:00:10 GMT"), std::nullopt);
  EXPECT_EQ(parse("sun, 15 Jun 2025 12:00:10 GMT"), std::nullopt);
  EXPECT_EQ(parse("SUN, 15 Jun 2025 12:00:10 GMT"), std::nullopt);
}

TEST(RetryAfterImfFixdate, RejectsMissingFields) {
  EXPECT_EQ(parse("15 Jun 2025 12:00:10 GMT"), std::nullopt);      // no day name
  EXPECT_EQ(parse("Sun 15 Jun 2025 12:00:10 GMT"), std::nullopt);  // no comma
  EXPECT_EQ(parse("Sun, Jun 2025 12:00:10 GMT"), std::nullopt);    // no day
  EXPECT_EQ(parse("Sun, 15 2025 12:00:10 GMT"), std::nullopt);     // no month
  EXPECT_EQ(parse("Sun, 15 Jun 12:00:10 GMT"), std::nullopt);      // no year
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00 GMT"), std::nullopt);    // no seconds
  EXPECT_EQ(parse("Sun, 15 Jun 2025 GMT"), std::nullopt);          // no time
  EXPECT_EQ(parse("Sun, 15 Jun 2025"), std::nullopt);              // no time, no zone
  EXPECT_EQ(parse("Sun,"), std::nullopt);
  EXPECT_EQ(parse("Sun"), std::nullopt);
}

TEST(RetryAfterImfFixdate, RejectsShortAndOverlongNumbers) {
  EXPECT_EQ(parse("Sun, 5 Jun 2025 12:00:10 GMT"), std::nullopt);     // one-digit day
  EXPECT_EQ(parse("Sun, 015 Jun 2025 12:00:10 GMT"), std::nullopt);   // three-digit day
  EXPECT_EQ(parse("Sun, 15 Jun 25 12:00:10 GMT"), std::nullopt);      // two-digit year
  EXPECT_EQ(parse("Sun, 15 Jun 02025 12:00:10 GMT"), std::nullopt);   // five-digit year
  EXPECT_EQ(parse("Sun, 15 Jun 2025 012:00:10 GMT"), std::nullopt);   // three-digit hour
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:0:10 GMT"), std::nullopt);     // one-digit minute
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10.5 GMT"), std::nullopt);  // fraction of a second
  EXPECT_EQ(parse("Sun, 15 June 2025 12:00:10 GMT"), std::nullopt);   // long month name
}

TEST(RetryAfterImfFixdate, RejectsExtraOrMissingSpaces) {
  EXPECT_EQ(parse("Sun,  15 Jun 2025 12:00:10 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun,15 Jun 2025 12:00:10 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025  12:00:10 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15-Jun-2025 12:00:10 GMT"), std::nullopt);
}

TEST(RetryAfterImfFixdate, RejectsTrailingJunk) {
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 GMT x"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 GMT,"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 GMT (comment)"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 GMT\r\n"), std::nullopt);
}

TEST(RetryAfterImfFixdate, RejectsAWeekdayThatContradictsTheDate) {
  // 2025-06-15 is a Sunday; every other day name is rejected.
  for (const char* day : {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}) {
    EXPECT_EQ(parse(std::string(day) + ", 15 Jun 2025 12:00:10 GMT"), std::nullopt) << day;
  }
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 GMT"), duration(10s));
}

TEST(RetryAfterImfFixdate, RejectsUnknownDayAndMonthNames) {
  EXPECT_EQ(parse("Sux, 15 Jun 2025 12:00:10 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jux 2025 12:00:10 GMT"), std::nullopt);
  EXPECT_EQ(parse("Son, 15 Jun 2025 12:00:10 GMT"), std::nullopt);  // German
}

TEST(RetryAfterImfFixdate, AcceptsLeapDaysOfLeapYears) {
  EXPECT_EQ(parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT", k_now), at(2024y / February / 29));
  // 2000 is divisible by 400: a leap year.
  EXPECT_EQ(parse_http_date("Tue, 29 Feb 2000 00:00:00 GMT", k_now), at(2000y / February / 29));
}

TEST(RetryAfterImfFixdate, RejectsFebruary29OfCommonYearsWhateverTheDayName) {
  for (const char* day : {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}) {
    EXPECT_EQ(parse(std::string(day) + ", 29 Feb 2025 00:00:00 GMT"), std::nullopt) << day;
    // 2100 and 1900 are divisible by 100 but not by 400: common years.
    EXPECT_EQ(parse(std::string(day) + ", 29 Feb 2100 00:00:00 GMT"), std::nullopt) << day;
    EXPECT_EQ(parse(std::string(day) + ", 29 Feb 1900 00:00:00 GMT"), std::nullopt) << day;
  }
}

TEST(RetryAfterImfFixdate, RejectsDaysThatDoNotExist) {
  for (const char* day : {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}) {
    const std::string d(day);
    EXPECT_EQ(parse(d + ", 30 Feb 2024 00:00:00 GMT"), std::nullopt) << d;
    EXPECT_EQ(parse(d + ", 31 Apr 2025 00:00:00 GMT"), std::nullopt) << d;
    EXPECT_EQ(parse(d + ", 31 Jun 2025 00:00:00 GMT"), std::nullopt) << d;
    EXPECT_EQ(parse(d + ", 00 Jun 2025 00:00:00 GMT"), std::nullopt) << d;
    EXPECT_EQ(parse(d + ", 32 Jan 2025 00:00:00 GMT"), std::nullopt) << d;
    EXPECT_EQ(parse(d + ", 99 Dec 2025 00:00:00 GMT"), std::nullopt) << d;
  }
}

TEST(RetryAfterImfFixdate, RejectsTimesThatDoNotExist) {
  EXPECT_EQ(parse("Sun, 15 Jun 2025 24:00:00 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:60:00 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:60 GMT"), std::nullopt);  // not a leap-second slot
  EXPECT_EQ(parse("Sun, 15 Jun 2025 23:59:61 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sun, 15 Jun 2025 99:99:99 GMT"), std::nullopt);
}

TEST(RetryAfterImfFixdate, ReadsTheLeapSecondAsTheFollowingMidnight) {
  // 2015-06-30 23:59:60 UTC was a real leap second; system_clock (POSIX time) has none.
  const auto leap = parse_http_date("Tue, 30 Jun 2015 23:59:60 GMT", k_now);
  ASSERT_TRUE(leap);
  EXPECT_EQ(*leap, at(2015y / July / 1));
  EXPECT_EQ(leap, parse_http_date("Wed, 01 Jul 2015 00:00:00 GMT", k_now));
}

TEST(RetryAfterImfFixdate, RejectsYearsBefore1900) {
  EXPECT_EQ(parse("Sun, 31 Dec 1899 23:59:59 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sat, 01 Jan 0000 00:00:00 GMT"), std::nullopt);
  EXPECT_EQ(parse_http_date("Mon, 01 Jan 1900 00:00:00 GMT", k_now), at(1900y / January / 1));
}

TEST(RetryAfterImfFixdate, SaturatesFarFutureDates) {
  EXPECT_EQ(parse("Fri, 31 Dec 9999 23:59:59 GMT"), duration::max());
  // From the earliest representable now, even a near date is more than 292 years away.
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 GMT", system_clock::time_point::min()),
            duration::max());
}

TEST(RetryAfterImfFixdate, IsExactUpToTheSaturationBoundary) {
  // 2200-01-01 minus duration::max() is representable (about 1907): the delay is exactly
  // duration::max() there and one nanosecond less one nanosecond later.
  const auto date = at(2200y / January / 1);
  const system_clock::time_point boundary = date - duration::max();
  EXPECT_EQ(parse("Wed, 01 Jan 2200 00:00:00 GMT", boundary), duration::max());
  EXPECT_EQ(parse("Wed, 01 Jan 2200 00:00:00 GMT", boundary + 1ns), duration::max() - 1ns);
  EXPECT_EQ(parse("Wed, 01 Jan 2200 00:00:00 GMT", boundary - 1ns), duration::max());
  EXPECT_EQ(parse("Wed, 01 Jan 2200 00:00:00 GMT", boundary - 1h), duration::max());
}

TEST(RetryAfterImfFixdate, ExtremeNowsNeitherOverflowNorWrap) {
  // system_clock::time_point::max() is in 2262 (nanosecond ticks): 2025 is in its past, 9999
  // more than 292 years in its future.
  EXPECT_EQ(parse("Sun, 15 Jun 2025 12:00:10 GMT", system_clock::time_point::max()),
            duration::zero());
  EXPECT_EQ(parse("Fri, 31 Dec 9999 23:59:59 GMT", system_clock::time_point::max()),
            duration::max());
  EXPECT_EQ(parse("Mon, 01 Jan 1900 00:00:00 GMT", system_clock::time_point::max()),
            duration::zero());
}

// Regression (found by the fuzzer, corpus file asctime_two_digit_day): with now at
// system_clock::time_point::min(), floor<seconds>(now) lies below the clock's range and
// converting it back to nanoseconds overflowed (signed overflow, reported by UBSan). The same
// held for floor<days>(now) in the two-digit-year rule. Checked for every form at both ends.
TEST(RetryAfterRegression, NowAtEitherEndOfTheClockDoesNotOverflow) {
  const auto earliest = system_clock::time_point::min();
  const auto latest = system_clock::time_point::max();
  EXPECT_EQ(parse("Sun Nov 06 08:49:37 1994", earliest), duration::max());
  EXPECT_EQ(parse("Sun, 06 Nov 1994 08:49:37 GMT", earliest), duration::max());
  EXPECT_EQ(parse("Sun Nov 06 08:49:37 1994", latest), duration::zero());
  // From 1677 (earliest) "94" is 1694: before 1900, rejected. From 2262 (latest) it is 2294
  // (32 years ahead), a Tuesday.
  EXPECT_EQ(parse("Saturday, 06-Nov-94 08:49:37 GMT", earliest), std::nullopt);
  EXPECT_EQ(parse_http_date("Tuesday, 06-Nov-94 08:49:37 GMT", latest),
            at(2294y / November / 6, 8h + 49min + 37s));
}

// ---------------------------------------------------------------------------------------------
// Obsolete RFC 850 dates and the two-digit-year rule
// ---------------------------------------------------------------------------------------------

TEST(RetryAfterRfc850, ParsesTheRfcExample) {
  const auto now = sys_days{1995y / January / 1};
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", now), sys_seconds(784111777s));
  const auto parsed = parse_retry_after_detailed("Sunday, 06-Nov-94 08:49:37 GMT", now);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->form, retry_after_form::rfc850_date);
  EXPECT_EQ(parsed->delay, duration::zero());
}

TEST(RetryAfterRfc850, FutureDateGivesTheExactDelay) {
  EXPECT_EQ(parse("Sunday, 15-Jun-25 12:00:30 GMT"), duration(30s));
}

TEST(RetryAfterRfc850, ExactlyFiftyYearsAheadStaysInTheFuture) {
  // now = 2025-06-15 12:00:00; 2075-06-15 12:00:00 is exactly 50 years ahead (a Saturday).
  EXPECT_EQ(parse_http_date("Saturday, 15-Jun-75 12:00:00 GMT", k_now), at(2075y / June / 15, 12h));
}

TEST(RetryAfterRfc850, MoreThanFiftyYearsAheadMeansTheLastCentury) {
  // One second later would be more than 50 years ahead: 1975-06-15 (a Sunday).
  EXPECT_EQ(parse_http_date("Sunday, 15-Jun-75 12:00:01 GMT", k_now),
            at(1975y / June / 15, 12h + 1s));
  EXPECT_EQ(parse("Sunday, 15-Jun-75 12:00:01 GMT"), duration::zero());
  // The next day as well: 1975-06-16 (a Monday), not 2075-06-16 (a Sunday).
  EXPECT_EQ(parse_http_date("Monday, 16-Jun-75 00:00:00 GMT", k_now), at(1975y / June / 16));
  EXPECT_EQ(parse("Sunday, 16-Jun-75 00:00:00 GMT"), std::nullopt);  // 2075's weekday: not chosen
}

TEST(RetryAfterRfc850, TheWeekdayOfTheOtherCenturyIsRejected) {
  // At exactly 50 years the year is 2075 (Saturday); Sunday is 1975's weekday: contradiction.
  EXPECT_EQ(parse("Sunday, 15-Jun-75 12:00:00 GMT"), std::nullopt);
}

TEST(RetryAfterRfc850, RecentPastYearsStayInThisCentury) {
  EXPECT_EQ(parse_http_date("Saturday, 15-Jun-24 00:00:00 GMT", k_now), at(2024y / June / 15));
}

TEST(RetryAfterRfc850, NearTheCenturyEndYearsWithinFiftyYearsAreInTheNextCentury) {
  const auto now = sys_days{2095y / January / 1};
  EXPECT_EQ(parse_http_date("Thursday, 01-Jan-05 00:00:00 GMT", now), at(2105y / January / 1));
  EXPECT_EQ(parse_http_date("Friday, 01-Jan-45 00:00:00 GMT", now), at(2145y / January / 1));
  EXPECT_EQ(parse_http_date("Monday, 01-Jan-46 00:00:00 GMT", now), at(2046y / January / 1));
  EXPECT_EQ(parse_http_date("Saturday, 01-Jan-95 00:00:00 GMT", now), at(2095y / January / 1));
}

TEST(RetryAfterRfc850, LeapDayOfYear00FollowsTheChosenCentury) {
  // From 2025, "00" is 2000 (a leap year); from 2070 it is 2100 (within 50 years; not leap).
  EXPECT_EQ(parse_http_date("Tuesday, 29-Feb-00 00:00:00 GMT", k_now), at(2000y / February / 29));
  for (const char* day :
       {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}) {
    EXPECT_EQ(parse_http_date(std::string(day) + ", 29-Feb-00 00:00:00 GMT",
                              sys_days{2070y / January / 1}),
              std::nullopt)
        << day;
  }
}

TEST(RetryAfterRfc850, RejectsShortDayNamesAndFourDigitYears) {
  EXPECT_EQ(parse("Sun, 15-Jun-25 12:00:30 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sunday, 15-Jun-2025 12:00:30 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sunday, 15 Jun 2025 12:00:30 GMT"), std::nullopt);
}

TEST(RetryAfterRfc850, RejectsAMissingOrUnknownZone) {
  EXPECT_EQ(parse("Sunday, 15-Jun-25 12:00:30"), std::nullopt);
  EXPECT_EQ(parse("Sunday, 15-Jun-25 12:00:30 PST"), std::nullopt);
}

TEST(RetryAfterRfc850, NamesAreCaseSensitive) {
  EXPECT_EQ(parse("sunday, 15-Jun-25 12:00:30 GMT"), std::nullopt);
  EXPECT_EQ(parse("SUNDAY, 15-Jun-25 12:00:30 GMT"), std::nullopt);
  EXPECT_EQ(parse("Sunday, 15-jun-25 12:00:30 GMT"), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// asctime
// ---------------------------------------------------------------------------------------------

TEST(RetryAfterAsctime, ParsesTheRfcExampleAsUtc) {
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994", k_now), sys_seconds(784111777s));
  const auto parsed = parse_retry_after_detailed("Sun Nov  6 08:49:37 1994", k_now);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->form, retry_after_form::asctime_date);
  EXPECT_EQ(parsed->delay, duration::zero());
}

TEST(RetryAfterAsctime, AcceptsATwoDigitDay) {
  EXPECT_EQ(parse_http_date("Sun Nov 06 08:49:37 1994", k_now), sys_seconds(784111777s));
  EXPECT_EQ(parse("Sun Jun 15 12:00:30 2025"), duration(30s));
}

TEST(RetryAfterAsctime, RejectsAOneDigitDayWithoutItsPaddingSpace) {
  EXPECT_EQ(parse("Sun Nov 6 08:49:37 1994"), std::nullopt);
  EXPECT_EQ(parse("Sun Nov   6 08:49:37 1994"), std::nullopt);
}

TEST(RetryAfterAsctime, RejectsAZone) {
  // asctime has no zone (it is UTC); "GMT" after the year is trailing junk.
  EXPECT_EQ(parse("Sun Jun 15 12:00:30 2025 GMT"), std::nullopt);
}

TEST(RetryAfterAsctime, RejectsLongDayNamesAndShortYears) {
  EXPECT_EQ(parse("Sunday Jun 15 12:00:30 2025"), std::nullopt);
  EXPECT_EQ(parse("Sun Jun 15 12:00:30 25"), std::nullopt);
  EXPECT_EQ(parse("Sun Jun 15 2025 12:00:30"), std::nullopt);
}

TEST(RetryAfterAsctime, RejectsInvalidDates) {
  EXPECT_EQ(parse("Sat Feb 29 00:00:00 2025"), std::nullopt);
  EXPECT_EQ(parse("Mon Jun 15 12:00:30 2025"), std::nullopt);  // wrong weekday
  EXPECT_EQ(parse("Sun Jun 15 24:00:00 2025"), std::nullopt);
}

TEST(RetryAfterAsctime, AllThreeFormsOfOneInstantAgree) {
  const auto imf = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", k_now);
  ASSERT_TRUE(imf);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", k_now), imf);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994", k_now), imf);
}

// ---------------------------------------------------------------------------------------------
// The fuzzer's seed corpus as regression tests, and the invariants on hand-picked inputs
// ---------------------------------------------------------------------------------------------

std::vector<std::filesystem::path> corpus_files() {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path dir = STORMGUARD_SOURCE_DIR "/fuzz/corpus/retry_after";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  return files;
}

TEST(RetryAfterCorpus, EveryCorpusFileKeepsTheInvariants) {
  const auto files = corpus_files();
  ASSERT_GE(files.size(), 20u) << "the seed corpus is missing";
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in) << file;
    const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(stormguard::fuzz::check_retry_after_invariants(input), "") << file;
  }
}

TEST(RetryAfterInvariants, TheCheckerCatchesAWrongDelaySecondsOracle) {
  // The oracle itself, so that a broken oracle cannot make the corpus test pass vacuously.
  EXPECT_EQ(stormguard::fuzz::expected_delay_seconds("0009223372036"), duration(9223372036s));
  EXPECT_EQ(stormguard::fuzz::expected_delay_seconds("9223372037"), duration::max());
  EXPECT_EQ(stormguard::fuzz::expected_delay_seconds("120"), duration(120s));
}

}  // namespace
