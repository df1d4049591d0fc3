// SPDX-License-Identifier: Apache-2.0
#include "stormguard/idempotency.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "test_util.hpp"

namespace {

using stormguard::format_uuid_v4;
using stormguard::idempotency_key_field_value;
using stormguard::idempotency_key_format;
using stormguard::is_idempotent_method;
using stormguard::make_idempotency_key;
using stormguard::validate_idempotency_key;
using stormguard::test_util::invalid_argument_message;

// ---------------------------------------------------------------------------------------------
// Methods
// ---------------------------------------------------------------------------------------------

TEST(IdempotentMethod, TheSixMethodsOfRfc9110AreIdempotent) {
  for (const char* m : {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}) {
    EXPECT_TRUE(is_idempotent_method(m)) << m;
  }
}

TEST(IdempotentMethod, PostPatchConnectAndExtensionsAreNot) {
  for (const char* m : {"POST", "PATCH", "CONNECT", "PROPFIND", "QUERY", ""}) {
    EXPECT_FALSE(is_idempotent_method(m)) << m;
  }
}

TEST(IdempotentMethod, MethodsAreCaseSensitive) {
  for (const char* m : {"get", "Get", "put", "Delete", "head"}) {
    EXPECT_FALSE(is_idempotent_method(m)) << m;
  }
}

TEST(IdempotentMethod, NoTrimmingOrPrefixMatching) {
  for (const char* m : {"GET ", " GET", "GETX", "GE", "PUTS"}) {
    EXPECT_FALSE(is_idempotent_method(m)) << m;
  }
}

// ---------------------------------------------------------------------------------------------
// UUID v4 formatting (known bytes)
// ---------------------------------------------------------------------------------------------

TEST(FormatUuidV4, AllZeroBytesGetOnlyVersionAndVariant) {
  EXPECT_EQ(format_uuid_v4({}), "00000000-0000-4000-8000-000000000000");
}

TEST(FormatUuidV4, AllOneBytesLoseExactlyTheVersionAndVariantBits) {
  std::array<std::uint8_t, 16> ones{};
  ones.fill(0xFF);
  EXPECT_EQ(format_uuid_v4(ones), "ffffffff-ffff-4fff-bfff-ffffffffffff");
}

TEST(FormatUuidV4, KeepsEveryOtherBitInOrder) {
  std::array<std::uint8_t, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 17);
  // 0x00 0x11 ... 0xff; byte 6 (0x66) -> 0x46, byte 8 (0x88) -> 0x88.
  EXPECT_EQ(format_uuid_v4(bytes), "00112233-4455-4677-8899-aabbccddeeff");
}

// ---------------------------------------------------------------------------------------------
// make_idempotency_key (OS CSPRNG)
// ---------------------------------------------------------------------------------------------

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

TEST(MakeIdempotencyKey, IsALowercase8_4_4_4_12Uuid) {
  for (int i = 0; i < 100; ++i) {
    const std::string key = make_idempotency_key();
    ASSERT_EQ(key.size(), 36u) << key;
    for (std::size_t p = 0; p < key.size(); ++p) {
      if (p == 8 || p == 13 || p == 18 || p == 23) {
        EXPECT_EQ(key[p], '-') << key;
      } else {
        EXPECT_TRUE(is_lower_hex(key[p])) << key << " at " << p;
      }
    }
  }
}

TEST(MakeIdempotencyKey, HasVersion4AndVariant10) {
  for (int i = 0; i < 1000; ++i) {
    const std::string key = make_idempotency_key();
    EXPECT_EQ(key[14], '4') << key;  // version nibble (RFC 9562 §5.4)
    const char variant = key[19];    // high bits 10: 8, 9, a or b (RFC 9562 §4.1)
    EXPECT_TRUE(variant == '8' || variant == '9' || variant == 'a' || variant == 'b') << key;
  }
}

TEST(MakeIdempotencyKey, IsAValidKeyInBothFormats) {
  const std::string key = make_idempotency_key();
  EXPECT_NO_THROW(validate_idempotency_key(key));
  EXPECT_EQ(idempotency_key_field_value(key), "\"" + key + "\"");
  EXPECT_EQ(idempotency_key_field_value(key, idempotency_key_format::bare), key);
}

TEST(MakeIdempotencyKey, TwentyThousandKeysAreDistinct) {
  std::unordered_set<std::string> keys;
  constexpr int n = 20000;
  for (int i = 0; i < n; ++i) keys.insert(make_idempotency_key());
  EXPECT_EQ(keys.size(), static_cast<std::size_t>(n));
}

// Pearson's chi-square statistic of `counts` against a uniform distribution.
double chi_square_uniform(const std::vector<long>& counts) {
  long total = 0;
  for (const long c : counts) total += c;
  const double expected = static_cast<double>(total) / static_cast<double>(counts.size());
  double chi2 = 0;
  for (const long c : counts)
    chi2 += (static_cast<double>(c) - expected) * (static_cast<double>(c) - expected) / expected;
  return chi2;
}

int hex_value(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

// Per-position digit counts over `keys` (only the 32 hex positions).
std::vector<std::vector<long>> position_counts(const std::vector<std::string>& keys) {
  std::vector<std::vector<long>> counts(36, std::vector<long>(16, 0));
  for (const auto& key : keys) {
    for (std::size_t p = 0; p < key.size(); ++p) {
      if (key[p] != '-') ++counts[p][static_cast<std::size_t>(hex_value(key[p]))];
    }
  }
  return counts;
}

// Chi-square critical values at p = 1e-8 (so that 31 positions together raise a false alarm
// about once in 3 million runs): 15 degrees of freedom (16 digits) and 3 (the variant's 4).
constexpr double k_chi2_bound_15 = 68.03;
constexpr double k_chi2_bound_3 = 40.13;
constexpr int k_samples = 20000;  // 1250 expected per digit and position

// The largest chi-square over the 30 fully random positions, and the variant position's.
std::pair<double, double> worst_chi_square(const std::vector<std::string>& keys) {
  const auto counts = position_counts(keys);
  double worst = 0;
  for (std::size_t p = 0; p < 36; ++p) {
    if (p == 8 || p == 13 || p == 18 || p == 23 || p == 14 || p == 19) continue;
    worst = std::max(worst, chi_square_uniform(counts[p]));
  }
  const std::vector<long> variant(counts[19].begin() + 8, counts[19].begin() + 12);
  return {worst, chi_square_uniform(variant)};
}

TEST(MakeIdempotencyKey, EveryRandomHexDigitIsUniform) {
  std::vector<std::string> keys;
  keys.reserve(k_samples);
  for (int i = 0; i < k_samples; ++i) keys.push_back(make_idempotency_key());
  const auto [worst, variant] = worst_chi_square(keys);
  EXPECT_LT(worst, k_chi2_bound_15);
  EXPECT_LT(variant, k_chi2_bound_3);
}

TEST(MakeIdempotencyKey, TheUniformityBoundCatchesABiasedGenerator) {
  // A generator whose bytes are uniform over [0, 200) instead of [0, 256) (a classic modulo
  // mistake) never yields a high nibble of d, e or f: the bound above must reject it.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 199);
  std::vector<std::string> keys;
  keys.reserve(k_samples);
  for (int i = 0; i < k_samples; ++i) {
    std::array<std::uint8_t, 16> bytes{};
    for (auto& b : bytes) b = static_cast<std::uint8_t>(byte(rng));
    keys.push_back(format_uuid_v4(bytes));
  }
  EXPECT_GT(worst_chi_square(keys).first, k_chi2_bound_15);
}

// ---------------------------------------------------------------------------------------------
// validate_idempotency_key
// ---------------------------------------------------------------------------------------------

TEST(ValidateIdempotencyKey, AcceptsEveryPrintableAsciiCharacter) {
  std::string all;
  for (char c = 0x20; c <= 0x7E; ++c) all += c;
  EXPECT_NO_THROW(validate_idempotency_key(all));
  EXPECT_NO_THROW(validate_idempotency_key("a"));
  EXPECT_NO_THROW(validate_idempotency_key(" "));
}

TEST(ValidateIdempotencyKey, Accepts255CharactersAndRejects256) {
  EXPECT_NO_THROW(validate_idempotency_key(std::string(255, 'k')));
  const std::string message =
      invalid_argument_message([] { validate_idempotency_key(std::string(256, 'k')); });
  EXPECT_NE(message.find("idempotency key"), std::string::npos) << message;
  EXPECT_NE(message.find("256"), std::string::npos) << message;
  EXPECT_NE(message.find("255"), std::string::npos) << message;
}

TEST(ValidateIdempotencyKey, ShortensALongKeyInTheMessage) {
  const std::string message =
      invalid_argument_message([] { validate_idempotency_key(std::string(300, 'k')); });
  // The rule of every echoed value (quote_for_message): 80 bytes, then the full length.
  EXPECT_NE(message.find("\"" + std::string(80, 'k') + "\"... (300 bytes)"), std::string::npos)
      << message;
  EXPECT_EQ(message.find(std::string(81, 'k')), std::string::npos) << message;
}

TEST(ValidateIdempotencyKey, RejectsEmptyNamingTheField) {
  const std::string message = invalid_argument_message([] { validate_idempotency_key(""); });
  EXPECT_NE(message.find("idempotency key"), std::string::npos) << message;
  EXPECT_NE(message.find("\"\""), std::string::npos) << message;
  EXPECT_NE(message.find("empty"), std::string::npos) << message;
}

TEST(ValidateIdempotencyKey, RejectsControlCharactersQuotingThemEscaped) {
  const std::string message = invalid_argument_message([] {
    validate_idempotency_key(
        "abc\x01"
        "def");
  });
  EXPECT_NE(message.find("idempotency key \"abc\\x01def\""), std::string::npos) << message;
  EXPECT_NE(message.find("position 3"), std::string::npos) << message;
}

TEST(ValidateIdempotencyKey, RejectsEveryByteOutsidePrintableAscii) {
  for (int b = 0; b < 256; ++b) {
    if (b >= 0x20 && b <= 0x7E) continue;
    const std::string key = std::string("k") + static_cast<char>(b);
    EXPECT_THROW(validate_idempotency_key(key), std::invalid_argument) << b;
  }
}

TEST(ValidateIdempotencyKey, RejectsTabNewlineDelAndUtf8) {
  for (const char* key : {"a\tb", "a\nb", "a\r\nb", "a\x7f", "caf\xc3\xa9"}) {
    EXPECT_THROW(validate_idempotency_key(key), std::invalid_argument) << key;
  }
}

// ---------------------------------------------------------------------------------------------
// idempotency_key_field_value
// ---------------------------------------------------------------------------------------------

// An RFC 8941 §4.2.5 sf-string parser, written independently of the formatter: the value
// between the quotes, or nullopt when `s` is not exactly one sf-string.
std::optional<std::string> parse_sf_string(std::string_view s) {
  if (s.size() < 2 || s.front() != '"') return std::nullopt;
  std::string out;
  for (std::size_t i = 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\') {
      if (++i == s.size()) return std::nullopt;
      if (s[i] != '"' && s[i] != '\\') return std::nullopt;
      out += s[i];
    } else if (c == '"') {
      return i + 1 == s.size() ? std::optional<std::string>(out) : std::nullopt;
    } else if (c < 0x20 || c > 0x7E) {
      return std::nullopt;
    } else {
      out += c;
    }
  }
  return std::nullopt;  // no closing quote
}

TEST(IdempotencyKeyFieldValue, StructuredIsAQuotedSfString) {
  EXPECT_EQ(idempotency_key_field_value("abc"), "\"abc\"");
  EXPECT_EQ(idempotency_key_field_value("abc", idempotency_key_format::structured), "\"abc\"");
}

TEST(IdempotencyKeyFieldValue, StructuredEscapesQuoteAndBackslashOnly) {
  EXPECT_EQ(idempotency_key_field_value("a\"b\\c'd"), "\"a\\\"b\\\\c'd\"");
}

TEST(IdempotencyKeyFieldValue, StructuredRoundTripsEveryPrintableCharacter) {
  std::string all;
  for (char c = 0x20; c <= 0x7E; ++c) all += c;
  const std::string value = idempotency_key_field_value(all);
  EXPECT_EQ(parse_sf_string(value), all) << value;
}

TEST(IdempotencyKeyFieldValue, StructuredKeepsLeadingAndTrailingSpaces) {
  EXPECT_EQ(parse_sf_string(idempotency_key_field_value(" k ")), " k ");
}

TEST(IdempotencyKeyFieldValue, BareIsTheKeyAsIs) {
  EXPECT_EQ(idempotency_key_field_value("a\"b\\c", idempotency_key_format::bare), "a\"b\\c");
}

TEST(IdempotencyKeyFieldValue, BareRejectsLeadingOrTrailingSpacesThatHttpWouldStrip) {
  for (const char* key : {" k", "k ", " "}) {
    const std::string message = invalid_argument_message(
        [&] { (void)idempotency_key_field_value(key, idempotency_key_format::bare); });
    EXPECT_NE(message.find("idempotency key \"" + std::string(key) + "\""), std::string::npos)
        << message;
  }
  EXPECT_EQ(idempotency_key_field_value("a b", idempotency_key_format::bare), "a b");
}

TEST(IdempotencyKeyFieldValue, ValidatesTheKeyInBothFormats) {
  for (const auto format : {idempotency_key_format::structured, idempotency_key_format::bare}) {
    EXPECT_THROW((void)idempotency_key_field_value("", format), std::invalid_argument);
    EXPECT_THROW((void)idempotency_key_field_value("a\nb", format), std::invalid_argument);
    EXPECT_THROW((void)idempotency_key_field_value(std::string(256, 'k'), format),
                 std::invalid_argument);
  }
}

TEST(IdempotencyKeyHeader, IsTheDraftsFieldName) {
  EXPECT_EQ(stormguard::idempotency_key_header, "Idempotency-Key");
}

}  // namespace
