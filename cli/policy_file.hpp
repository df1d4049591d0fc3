// SPDX-License-Identifier: Apache-2.0
// `--policy [grpc:|envoy:]FILE[:NAME]`, shared by the subcommands that take a policy file
// (simulate, plan, exec, http, policy check): loading it with stormguard::config, and printing
// what an importer could not map. `builtin:` names the simulator's built-in strategies as
// policies (policies/builtin-strategies.json, embedded), `builtin:NAME` one of them.
//
// A bad value or file (missing, unreadable, too large, invalid, a wrong field, an unknown NAME)
// throws CLI::ValidationError("--policy", message): the message names the file, the field path,
// its valid range and the value as written; main.cpp turns it into exit status 2.
#ifndef STORMGUARD_CLI_POLICY_FILE_HPP
#define STORMGUARD_CLI_POLICY_FILE_HPP

#include <string>
#include <string_view>
#include <vector>

#include "stormguard/config/policy.hpp"

namespace stormguard::cli {

/// Every policy that `value` names (all of the file's, or the one after ':'), with each
/// importer warning printed to stderr as "stormguard <command>: warning: FILE: <warning>".
/// `flag` prefixes the error message ("--policy: FILE: ..."); empty for a positional FILE.
[[nodiscard]] std::vector<config::policy> load_policy_option(std::string_view command,
                                                             const std::string& value,
                                                             std::string_view flag = "--policy");

/// The one policy `value` names: the one after ':', else the file's first (a note on stderr
/// says which was chosen when the file has several). Warnings as load_policy_option; errors are
/// prefixed by `flag` as there.
[[nodiscard]] config::policy load_one_policy(std::string_view command, const std::string& value,
                                             std::string_view flag = "--policy");

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_POLICY_FILE_HPP
