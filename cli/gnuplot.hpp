// SPDX-License-Identifier: Apache-2.0
// Running gnuplot on a script, shared by `simulate --plot` and `lab --plot`.
#ifndef STORMGUARD_CLI_GNUPLOT_HPP
#define STORMGUARD_CLI_GNUPLOT_HPP

#include <optional>
#include <string>

namespace stormguard::cli {

/// Runs gnuplot (found on PATH) on `script` through a temporary file, as a child process. nullopt
/// on success, or why not: gnuplot missing (with the package to install) or its exit status
/// (gnuplot's own messages go to stderr).
[[nodiscard]] std::optional<std::string> run_gnuplot(const std::string& script);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_GNUPLOT_HPP
