// SPDX-License-Identifier: Apache-2.0
// The retry-policy flags shared by the subcommands that build a policy (`stormguard plan`,
// `stormguard exec`, `stormguard http`): --policy FILE[:NAME] and --base --cap --multiplier
// --jitter --retries, with the library's defaults.
//
// Precedence (docs/cli.md): a flag the user typed > the --policy file's value > the library's
// default. Without --policy the flags' defaults are the library's.
//
//   stormguard::cli::policy_flags flags;
//   stormguard::cli::add_policy_flags(*sub, flags);
//   ...  // after parsing:
//   const stormguard::retry_options options = stormguard::cli::to_retry_options(flags);
//
// Errors are CLI::ValidationError whose message names the flag and the text the user wrote;
// main.cpp turns a CLI::ParseError escaping a subcommand's run() into exit code 2.
#ifndef STORMGUARD_CLI_POLICY_FLAGS_HPP
#define STORMGUARD_CLI_POLICY_FLAGS_HPP

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::cli {

/// The flags as the user wrote them (durations and the jitter as text, converted later by
/// to_retry_options so that errors can quote them). Defaults are those of retry_options.
struct policy_flags {
  std::string base = "100ms";
  std::string cap = "3s";
  double multiplier = 2.0;
  std::string jitter = "full";
  int retries = 3;
  std::string policy;  ///< --policy [grpc:|envoy:]FILE[:NAME]
  /// Set by add_policy_flags, to tell a flag the user typed from a default (or the --policy
  /// file's value) in messages and precedence.
  const CLI::Option* base_option = nullptr;
  const CLI::Option* cap_option = nullptr;
  const CLI::Option* multiplier_option = nullptr;
  const CLI::Option* jitter_option = nullptr;
  const CLI::Option* retries_option = nullptr;
  const CLI::Option* policy_option = nullptr;
};

/// Whether the user typed `option` (non-null and given at least once).
[[nodiscard]] bool typed(const CLI::Option* option);

/// Adds --policy FILE[:NAME], --base D, --cap D, --multiplier X, --jitter NAME and --retries N to
/// `app`, storing into `flags` (which must outlive parsing). The help shows each default.
void add_policy_flags(CLI::App& app, policy_flags& flags);

/// The policy the command runs: the --policy file's (its first policy, or NAME; the importer's
/// warnings printed for `command`), else the library's defaults; then every policy flag the user
/// typed replaces the file's value, and the result is validated as to_retry_options does. Throws
/// CLI::ValidationError naming the flag (or --policy and the field path for a bad file).
[[nodiscard]] stormguard::config::policy resolve_policy(std::string_view command,
                                                        const policy_flags& flags);

/// Converts and validates the flags (with the library's own checks, stormguard::retry_policy),
/// ignoring --policy.
/// Throws CLI::ValidationError naming the flag and the text, e.g. '--base: not a duration: "5 ms"
/// (no spaces: ...)' or, for a base above the cap, the flag the user typed: '--base: "5s" is
/// above the cap 3s (the default --cap); give a larger --cap too'.
[[nodiscard]] stormguard::retry_options to_retry_options(const policy_flags& flags);

/// The warning to print when `options` make every retry start at once (base 0, hence every
/// backoff ceiling 0 for every jitter, and cap 0 too since cap >= base): "--base is 0s: every
/// retry starts at once, with no delay", or std::nullopt when there is a delay (or no retry).
/// Such a policy is allowed (a test may want it) but it is the retry storm stormguard exists to
/// prevent, so `exec` and `http` print it to stderr.
[[nodiscard]] std::optional<std::string> zero_delay_warning(
    const stormguard::retry_options& options);

/// Parses the value of a duration flag (stormguard::parse_duration). Throws CLI::ValidationError
/// '<flag>: not a duration: "<text>" (<reason>)' with the text quoted by
/// detail::quote_for_message and the reason of stormguard::duration_error, e.g. '--base: not a
/// duration: "-1s" (negative: a duration is 0 or more)'.
[[nodiscard]] stormguard::duration parse_duration_flag(std::string_view flag,
                                                       std::string_view text);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_POLICY_FLAGS_HPP
