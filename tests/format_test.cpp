// SPDX-License-Identifier: Apache-2.0
#include "stormguard/detail/format.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using stormguard::detail::quote_for_message;

TEST(QuoteForMessage, QuotesPlainTextUnchanged) {
  EXPECT_EQ(quote_for_message("friday-night"), "\"friday-night\"");
  EXPECT_EQ(quote_for_message(""), "\"\"");
}

TEST(QuoteForMessage, EscapesControlBytesQuotesAndBackslashes) {
  EXPECT_EQ(quote_for_message(std::string("a\x1b[31mb", 7)), "\"a\\x1b[31mb\"");
  EXPECT_EQ(quote_for_message(std::string("x\0y", 3)), "\"x\\x00y\"");
  EXPECT_EQ(quote_for_message("tab\there\r\n\x7f"), "\"tab\\x09here\\x0d\\x0a\\x7f\"");
  EXPECT_EQ(quote_for_message("say \"hi\" \\ bye"), "\"say \\\"hi\\\" \\\\ bye\"");
}

TEST(QuoteForMessage, KeepsUtf8Readable) {
  EXPECT_EQ(quote_for_message("ex\xc3\xa4mple"), "\"ex\xc3\xa4mple\"");
}

TEST(QuoteForMessage, TruncatesLongValuesAndGivesTheirLength) {
  const std::string token(900'000, 'a');
  const std::string quoted = quote_for_message(token);
  EXPECT_EQ(quoted, "\"" + std::string(80, 'a') + "\"... (900000 bytes)");
  EXPECT_EQ(quote_for_message("abcdef", 3), "\"abc\"... (6 bytes)");
  EXPECT_EQ(quote_for_message("abc", 3), "\"abc\"");
}

TEST(QuoteForMessage, NeverCutsAUtf8SequenceInTwo) {
  // "ab" then U+00E4 (2 bytes): a cut after 3 bytes would split it; the cut backs off to 2.
  EXPECT_EQ(quote_for_message("ab\xc3\xa4zz", 3), "\"ab\"... (6 bytes)");
}

TEST(EscapeControl, EscapesControlBytesWithoutQuotes) {
  using stormguard::detail::escape_control;
  EXPECT_EQ(escape_control(std::string("a\x1b[2J\0\x07\x7f", 8)), "a\\x1b[2J\\x00\\x07\\x7f");
  EXPECT_EQ(escape_control("say \"hi\" \\"), "say \"hi\" \\");  // quotes are not its business
  EXPECT_EQ(escape_control(std::string(300, '9'), 80), std::string(80, '9') + "... (300 bytes)");
  EXPECT_EQ(escape_control(std::string(300, '9')), std::string(300, '9'));  // no limit by default
  EXPECT_EQ(escape_control("ab\xc3\xa4zz", 3), "ab... (6 bytes)");
}

TEST(QuoteForMessage, IsEscapeControlBetweenQuotes) {
  const std::string text = "x\x1b[31m\x01y";
  EXPECT_EQ(quote_for_message(text), "\"" + stormguard::detail::escape_control(text) + "\"");
}

TEST(FormatDouble, PrintsWholeNumbersAsIntegers) {
  using stormguard::detail::format_double;
  EXPECT_EQ(format_double(100000.0), "100000");
  EXPECT_EQ(format_double(1e15), "1000000000000000");
  EXPECT_EQ(format_double(-42.0), "-42");
  EXPECT_EQ(format_double(1.5), "1.5");
  EXPECT_EQ(format_double(1e-07), "1e-07");
  EXPECT_EQ(format_double(1e300), "1e+300");
}

}  // namespace

namespace {

TEST(EscapeControlUtf8, WellFormedUtf8PassesAndBrokenBytesAreEscaped) {
  using stormguard::detail::escape_control;
  EXPECT_EQ(escape_control("ex\xc3\xa4mple \xe2\x82\xac \xf0\x9f\x98\x80"),
            "ex\xc3\xa4mple \xe2\x82\xac \xf0\x9f\x98\x80");              // ä, €, an emoji
  EXPECT_EQ(escape_control("a\xff\xfe"), "a\\xff\\xfe");                  // never UTF-8
  EXPECT_EQ(escape_control("ok\xc3"), "ok\\xc3");                         // cut short
  EXPECT_EQ(escape_control("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(escape_control("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(escape_control("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(stormguard::detail::quote_for_message("a\xff"), "\"a\\xff\"");
}

}  // namespace
