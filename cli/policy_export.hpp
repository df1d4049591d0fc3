// SPDX-License-Identifier: Apache-2.0
// `stormguard policy export --to envoy|grpc|linkerd [-o FILE] POLICY`: a policy written as the
// configuration of a proxy or a client teams already run (stormguard/config/export.hpp), with
// what the target cannot express as warnings on stderr.
#ifndef STORMGUARD_CLI_POLICY_EXPORT_HPP
#define STORMGUARD_CLI_POLICY_EXPORT_HPP

#include <CLI/CLI.hpp>

#include "command.hpp"

namespace stormguard::cli {

/// Adds `export` under `policy` (the `policy` command's app); the command's run says whether it
/// was selected (app->parsed()). Exit status: 0 written; 1 the output (stdout or -o FILE) could
/// not be written; 2 a bad command line (--to, the POLICY: a file, FILE:NAME, builtin:NAME).
command add_policy_export(CLI::App& policy);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_POLICY_EXPORT_HPP
