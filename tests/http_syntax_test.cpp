// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "stormguard/http/syntax.hpp"

namespace {

using namespace std::string_view_literals;
using stormguard::http::check_request_field;
using stormguard::http::field_problem;
using stormguard::http::iequals_ascii;
using stormguard::http::invalid_field_value_byte;
using stormguard::http::is_tchar;
using stormguard::http::is_token;
using stormguard::http::parse_field_line;
using stormguard::http::to_lower_ascii;
using stormguard::http::trim_ows;

TEST(HttpSyntax, TcharIsExactlyTheRfc9110SetOverAllBytes) {
  const std::string_view specials = "!#$%&'*+-.^_`|~";
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const bool expected = (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') ||
                          (b >= 'A' && b <= 'Z') || specials.find(c) != std::string_view::npos;
    EXPECT_EQ(is_tchar(c), expected) << "byte " << b;
  }
}

TEST(HttpSyntax, TokensAreOneOrMoreTchars) {
  EXPECT_TRUE(is_token("GET"));
  EXPECT_TRUE(is_token("X-Custom_1.2~"));
  EXPECT_FALSE(is_token(""));
  EXPECT_FALSE(is_token("GET "));
  EXPECT_FALSE(is_token("Na:me"));
  EXPECT_FALSE(is_token("A\0B"sv));
  EXPECT_FALSE(is_token("\xE4"));        // Latin-1 'ä': a letter in some locales, never a tchar
  EXPECT_FALSE(is_token("X-\xC3\xA4"));  // UTF-8 'ä'
}

TEST(HttpSyntax, CaseFoldsOnlyAsciiLetters) {
  EXPECT_TRUE(iequals_ascii("content-LENGTH", "Content-Length"));
  EXPECT_TRUE(iequals_ascii("", ""));
  EXPECT_FALSE(iequals_ascii("Expect", "Expec"));
  EXPECT_FALSE(iequals_ascii("\xC4", "\xE4"));  // Latin-1 'Ä' vs 'ä': not ASCII, not folded
  EXPECT_FALSE(iequals_ascii("@", "`"));        // 0x40 and 0x60 differ by 0x20 but are no letters
  EXPECT_FALSE(iequals_ascii("[", "{"));
  EXPECT_EQ(to_lower_ascii("HTTP://Ex.COM:80"), "http://ex.com:80");
  EXPECT_EQ(to_lower_ascii('\xC4'), '\xC4');
}

TEST(HttpSyntax, TrimRemovesOnlySpAndHtab) {
  EXPECT_EQ(trim_ows(" \t a b \t "), "a b");
  EXPECT_EQ(trim_ows(""), "");
  EXPECT_EQ(trim_ows(" \t "), "");
  EXPECT_EQ(trim_ows("a\r\n"), "a\r\n");
  EXPECT_EQ(trim_ows("\va\f"), "\va\f");
}

TEST(HttpSyntax, FieldValuesRejectEveryControlByteButHtab) {
  for (int b = 0; b < 256; ++b) {
    const std::string value = std::string("ab") + static_cast<char>(b);
    const bool control = (b < 0x20 && b != '\t') || b == 0x7F;
    EXPECT_EQ(invalid_field_value_byte(value), control ? 2U : std::string_view::npos)
        << "byte " << b;
  }
  EXPECT_EQ(invalid_field_value_byte(""), std::string_view::npos);
  EXPECT_EQ(invalid_field_value_byte("a\r\nX-Injected: 1"), 1U);
  EXPECT_EQ(invalid_field_value_byte("\xC3\xA4 obs-text"), std::string_view::npos);
}

TEST(HttpSyntax, FieldLinesSplitAtTheFirstColonWithATokenName) {
  auto f = parse_field_line("Accept:  text/plain \t");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->name, "Accept");
  EXPECT_EQ(f->value, "text/plain");

  f = parse_field_line("Location: http://x:1/");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->value, "http://x:1/");

  f = parse_field_line("X-A: 1\r\n");  // a terminator is the caller's to remove: it stays
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->value, "1\r\n");

  f = parse_field_line("X-Empty:");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->name, "X-Empty");
  EXPECT_EQ(f->value, "");

  f = parse_field_line(" X-Spaced :v");  // OWS around the name is tolerated (typed input)
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->name, "X-Spaced");

  EXPECT_FALSE(parse_field_line("no colon").has_value());
  EXPECT_FALSE(parse_field_line(": no name").has_value());
  EXPECT_FALSE(parse_field_line("two words: v").has_value());
  EXPECT_FALSE(parse_field_line("HTTP/1.1 200 OK").has_value());
}

TEST(HttpSyntax, RequestFieldsTheClientOwnsOrCannotSendAreNamed) {
  EXPECT_EQ(check_request_field("X-A", "1"), std::nullopt);
  EXPECT_EQ(check_request_field("X-A", ""), std::nullopt);
  EXPECT_EQ(check_request_field("X A", "1"), field_problem::name_not_token);
  EXPECT_EQ(check_request_field("", "1"), field_problem::name_not_token);
  EXPECT_EQ(check_request_field("X-A", "1\r\nX-B: 2"), field_problem::value_has_control);
  EXPECT_EQ(check_request_field("X-A", "a\0b"sv), field_problem::value_has_control);
  EXPECT_EQ(check_request_field("content-length", "3"), field_problem::content_length);
  EXPECT_EQ(check_request_field("IDEMPOTENCY-KEY", "k"), field_problem::idempotency_key);
}

}  // namespace
