// SPDX-License-Identifier: Apache-2.0
// Flags (options without a value: --json, -i, --stats ...) given twice are usage errors, as a
// valued option given twice already is ("--json given twice; give it once"), in every
// subcommand. Private to the stormguard executable.
#ifndef STORMGUARD_CLI_REPEATED_FLAGS_HPP
#define STORMGUARD_CLI_REPEATED_FLAGS_HPP

#include <CLI/CLI.hpp>

namespace stormguard::cli {

/// Sets CLI::MultiOptionPolicy::Throw on every flag of `app` and of its subcommands, at any
/// depth (not on --help and --version, which end the parse at once). Call after every option is
/// added, before parsing.
void refuse_repeated_flags(CLI::App& app);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_REPEATED_FLAGS_HPP
