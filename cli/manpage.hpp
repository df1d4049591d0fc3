// SPDX-License-Identifier: Apache-2.0
// The manual page stormguard(1) and the bash completion of `stormguard`, generated from the CLI11
// definitions of the commands themselves (names, options, value placeholders, help texts,
// footers), so that neither can drift from `stormguard --help`. The build runs
//
//   stormguard-all --generate-man-page build/share/man/man1/stormguard.1
//   stormguard-all --generate-bash-completion build/share/bash-completion/completions/stormguard
//
// (cli/CMakeLists.txt) and `cmake --install` installs both, with the docs (doc_path).
#ifndef STORMGUARD_CLI_MANPAGE_HPP
#define STORMGUARD_CLI_MANPAGE_HPP

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

namespace stormguard::cli {

/// What the man page made by `--generate-man-page` names as the documentation folder:
/// `cmake --install` writes the installed page with this replaced by <prefix>/share/doc/stormguard
/// (cli/man_docdir.cmake), so that the page names the prefix it was installed into.
inline constexpr std::string_view k_doc_root_placeholder = "@STORMGUARD_DOC_ROOT@";

/// Decides once, before the commands are defined, the documentation folder doc_path names:
/// k_doc_root_placeholder for `stormguard --generate-man-page FILE`; otherwise the folder found
/// at run time from where this program is (/proc/self/exe, then the relative path from the
/// installed programs' folder to the docs: <prefix>/libexec/stormguard/stormguard-http names
/// <prefix>/share/doc/stormguard); for a program of the build tree, where that folder does not
/// exist, the source tree's docs/; otherwise the configured install folder
/// (CMAKE_INSTALL_FULL_DOCDIR). Not thread-safe: main() calls it first.
void init_doc_root(int argc, char** argv);

/// The documentation folder (see init_doc_root; found from the executable when init_doc_root was
/// not called), followed by "/" and `name` ("policy.md"): what --help names instead of a path in
/// the source tree.
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
