// SPDX-License-Identifier: Apache-2.0
// Numbers on the command line: plain decimal only, the one grammar of every numeric option of
// every command (policy flags, plan's --samples and --seed, simulate's --seed, --threads,
// --trials, --layers and --sweep values).
//
//   sub->add_option("--samples", n)->transform(stormguard::cli::whole_number());
//   // "--samples 010" is ten; "0x10", "+3", " 3", "3 " are usage errors:
//   // stormguard plan: error: --samples: not a whole number in plain decimal (digits only, e.g.
//   // 3): "0x10"
//
// CLI11's own conversion reads "010" as octal 8, "0x10" as 16, and accepts a sign and spaces;
// the validators run before it, on the text the user typed, and reject all of that.
#ifndef STORMGUARD_CLI_NUMBERS_HPP
#define STORMGUARD_CLI_NUMBERS_HPP

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string_view>

namespace stormguard::cli {

/// `text` as a whole number in [0, 2^64 - 1] written in decimal digits only (leading zeros
/// allowed and decimal: "010" is 10); nullopt for anything else (empty, a sign, a space, hex,
/// a fraction, too large).
[[nodiscard]] std::optional<std::uint64_t> parse_whole_number(std::string_view text) noexcept;

/// `text` as a finite number in plain decimal: digits, an optional fraction (".5" after at least
/// one digit) and an optional exponent ("1e8", "2.5E-3"); a leading '-' only when
/// `allow_negative`. Nullopt for anything else: a '+', a space, hex ("0x2"), "inf", "nan", a
/// value that overflows a double.
[[nodiscard]] std::optional<double> parse_decimal_number(std::string_view text,
                                                         bool allow_negative = false) noexcept;

/// A CLI11 transform (not a check: it drops leading zeros, which CLI11 would read as octal) for
/// an option whose value is a whole number >= 0 (parse_whole_number's grammar). The error, made by
/// CLI11 as "<option>: <this message>": 'not a whole number in plain decimal (digits only, e.g. 3):
/// "0x10"'.
[[nodiscard]] CLI::Validator whole_number();

/// whole_number() for a value in [lo, hi]: one message for every value outside it, too large for
/// 64 bits included, naming the range and quoting the value as written ('must be a whole number
/// in [0, 65535], got "65536"'). The range is also its description in --help ("in [0, 65535]").
[[nodiscard]] CLI::Validator whole_number_in(std::uint64_t lo, std::uint64_t hi);

/// A CLI11 transform for an option whose value is a number >= 0 such as 1.5 (parse_decimal_number's
/// grammar, no sign): 'not a number in plain decimal (e.g. 1.5): " 2"'.
[[nodiscard]] CLI::Validator decimal_number();

/// A CLI11 transform for a probability: parse_decimal_number's grammar, a value in [0, 1]:
/// 'must be a probability in [0, 1], got "1.5"'.
[[nodiscard]] CLI::Validator probability();

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_NUMBERS_HPP
