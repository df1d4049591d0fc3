// SPDX-License-Identifier: Apache-2.0
// The manual page stormguard(1) and the bash completion of `stormguard`, generated from the CLI11
// definitions of the commands themselves (names, options, value placeholders, help texts,
// footers), so that neither can drift from `stormguard --help`. The build runs
//
//   stormguard --generate-man-page build/share/man/man1/stormguard.1
//   stormguard --generate-bash-completion build/share/bash-completion/completions/stormguard
//
// (cli/CMakeLists.txt) and `cmake --install` installs both, with the docs (doc_path).
#ifndef STORMGUARD_CLI_MANPAGE_HPP
#define STORMGUARD_CLI_MANPAGE_HPP

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace stormguard::cli {

/// Where the installed documentation lives (CMAKE_INSTALL_FULL_DOCDIR at configure time, e.g.
/// /usr/local/share/doc/stormguard), followed by "/" and `name` ("policy.md"): what --help
/// names instead of a path in the source tree.
[[nodiscard]] std::string doc_path(std::string_view name);

/// The man page (roff, man(7) macros) of `app` and its subcommands, nested ones included:
/// NAME, SYNOPSIS, DESCRIPTION, one subsection per subcommand with its options, EXIT STATUS (the
/// app's footer) and FILES (the docs). `version` goes into the title line.
[[nodiscard]] std::string man_page(const CLI::App& app, std::string_view version);

/// A bash completion script for `app`: completes subcommand names (`stormguard si<TAB>` gives
/// `simulate`), nested subcommands, each subcommand's options, and file or directory names for
/// the options and positionals whose placeholder says FILE or DIR. Needs bash only (not the
/// bash-completion package).
[[nodiscard]] std::string bash_completion(const CLI::App& app);

/// Handles `stormguard --generate-man-page FILE` and `--generate-bash-completion FILE` (argv of
/// exactly three words): writes the file and returns the exit status (0, or 1 with a message
/// when it cannot be written). Returns -1 for any other command line, which main() then parses.
[[nodiscard]] int generate_if_asked(int argc, char** argv, const CLI::App& app,
                                    std::string_view version);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_MANPAGE_HPP
