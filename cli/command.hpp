// SPDX-License-Identifier: Apache-2.0
// The `stormguard` executable's subcommands. Each subcommand lives in its own file
// (cli/simulate.cpp, later cli/plan.cpp, cli/exec.cpp, cli/http.cpp) and registers itself on the
// top-level CLI11 app through one add_*_command function; main.cpp only lists them.
#ifndef STORMGUARD_CLI_COMMAND_HPP
#define STORMGUARD_CLI_COMMAND_HPP

#include <CLI/CLI.hpp>
#include <functional>

namespace stormguard::cli {

/// Exit codes shared by every subcommand.
enum exit_code : int {
  exit_success = 0,  ///< the command did what was asked
  exit_failure = 1,  ///< bad input file or an operation that failed (message on stderr)
  exit_usage = 2,    ///< bad command line: unknown option or value (message on stderr)
};

/// A registered subcommand: its CLI11 app, and what to run when it was selected (returns the
/// process exit code).
struct command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// `stormguard simulate [SCENARIO_FILE] [--policy FILE[:NAME]]... [--strategy NAME]... [--seed N]
/// [--json] [--csv DIR]`.
command add_simulate_command(CLI::App& parent);

/// `stormguard exec [policy flags] [--attempt-timeout D] [--deadline D] [--retry-on-exit CODES |
/// --stop-on-exit CODES] [--quiet] -- CMD [ARGS...]`.
command add_exec_command(CLI::App& parent);

/// `stormguard plan [--base D] [--cap D] [--multiplier X] [--jitter NAME] [--retries N]
/// [--samples N] [--seed N] [--json]`: the delays a policy would wait, sampled.
command add_plan_command(CLI::App& parent);

/// `stormguard http [-X METHOD] [-H 'Name: value']... [-d DATA | -d @FILE] [--idempotency-key
/// auto|KEY] [policy flags] [--attempt-timeout D] [--deadline D] [-i] [-v] URL`: one HTTP request
/// with the retry rules of stormguard::http::client.
command add_http_command(CLI::App& parent);

/// `stormguard policy check [--json] FILE[:NAME]...`: the normalized policies of policy files
/// and their delays.
command add_policy_command(CLI::App& parent);

/// `stormguard serve SCENARIO [--port N] [--scale X] [--wait-start]`: the scenario's server on
/// 127.0.0.1 until SIGINT or SIGTERM.
command add_serve_command(CLI::App& parent);

/// `stormguard lab SCENARIO [--strategy NAME]... [--policy FILE[:NAME]]... [--scale X] [--json]
/// [--csv DIR]`:
/// the scenario's client fleet on real sockets against its server, next to the simulator.
command add_lab_command(CLI::App& parent);

/// `stormguard tune [SCENARIO] [--rate R] [--clients N] [--workers N | --capacity R] [--p50 D]
/// [--p99 D] [--deadline D] [--error-rate X] [goal flags] [--out FILE] [--export TARGET:FILE]
/// [--json] [--plot FILE] [--seed N]`: a retry policy sized for a service with its evidence.
command add_tune_command(CLI::App& parent);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_COMMAND_HPP
