// SPDX-License-Identifier: Apache-2.0
// Command-line errors: the one-line message for a CLI11 parse error, worded for a newcomer and
// safe to print (what it echoes of the command line is quoted with
// stormguard::detail::quote_for_message: control bytes escaped, at most 80 bytes).
//
//   try { app.parse(argc, argv); } catch (const CLI::ParseError& e) {
//     stormguard::cli::report_error("http", stormguard::cli::parse_error_message(e, *http_app));
//   }
//   // stormguard http: error: unknown option "-x" (options are case-sensitive: did you mean -X?)
#ifndef STORMGUARD_CLI_USAGE_HPP
#define STORMGUARD_CLI_USAGE_HPP

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace stormguard::cli {

/// `app.add_option(name, variable, help)->type_name(placeholder)`: an option whose value --help
/// shows as `placeholder` ("D", "N", "FILE"), the shape of almost every option of the CLI. Returns
/// the option, for more settings (->capture_default_str(), ->excludes(...)).
template <class T>
CLI::Option* add_typed_option(CLI::App& app, const std::string& name, T& variable,
                              const std::string& help, const std::string& placeholder) {
  return app.add_option(name, variable, help)->type_name(placeholder);
}

/// The message for words of a command line that `app` did not expect (`extras`, in command-line
/// order): the first that looks like an option ("-x", "--bogus", "--bogus=3") is reported as
/// 'unknown option "--bogus"' (with the option of `app` it differs from only by case, if any:
/// "did you mean -X?"); otherwise the first word is an 'unexpected argument "..."'. A lone "--" is
/// not reported. Precondition: extras holds at least one word other than "--".
[[nodiscard]] std::string extras_message(const std::vector<std::string>& extras,
                                         const CLI::App& app);

/// The message for `e`, thrown while parsing the command line of `app` (a subcommand, or the
/// top-level app): unexpected words as extras_message (from app.remaining()); a value that does
/// not convert as '--retries: not a whole number: "abc"'; the others as CLI11 words them (they
/// name options, not values), and a ValidationError as it is (stormguard's own, already quoted).
[[nodiscard]] std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_USAGE_HPP
