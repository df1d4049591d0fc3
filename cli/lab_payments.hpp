// SPDX-License-Identifier: Apache-2.0
// `stormguard lab payments`: the audit of double charges behind the idempotency guard. Its
// options live on the `lab` subcommand (`payments` is a reserved SCENARIO name) in their own help
// group; lab.cpp registers them here and hands over when SCENARIO is `payments`.
#ifndef STORMGUARD_CLI_LAB_PAYMENTS_HPP
#define STORMGUARD_CLI_LAB_PAYMENTS_HPP

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/lab/server.hpp"

namespace stormguard::cli {

/// The reserved SCENARIO name of `lab`.
inline constexpr std::string_view k_payments_scenario = "payments";

/// The options of `lab payments` as the user wrote them.
struct lab_payments_options {
  std::int64_t charges = 1000;
  double fault_after_commit = 0.2;
  std::string idempotency;
  int replicas = 1;
  std::vector<std::string> servers;
  std::string ledger_token_file;  // --ledger-token-file: the servers' GET /ledger token
  int concurrency = 16;
  std::uint64_t seed = 1;
  std::int64_t max_failed = 0;
  // Set by add_lab_payments_options: to tell what the user typed.
  CLI::Option* charges_option = nullptr;
  CLI::Option* fault_option = nullptr;
  CLI::Option* idempotency_option = nullptr;
  CLI::Option* replicas_option = nullptr;
  CLI::Option* server_option = nullptr;
  CLI::Option* concurrency_option = nullptr;
  CLI::Option* seed_option = nullptr;
  CLI::Option* max_failed_option = nullptr;
};

/// Adds --charges, --fault-after-commit, --idempotency, --replicas, --server, --concurrency and
/// --seed to `lab` (help group "lab payments").
void add_lab_payments_options(CLI::App& lab, lab_payments_options& options);

/// The secret in the file `path` of option `flag` of `command` ("serve"): the file's bytes, one
/// final newline removed; 1..1024 bytes. nullopt after printing why not (`what`: the form a
/// good one has); the secret itself is never printed.
[[nodiscard]] std::optional<std::string> read_secret_file(std::string_view command,
                                                          std::string_view flag,
                                                          const std::string& path,
                                                          std::string_view what);

/// The operator token of GET /ledger in the file of --ledger-token-file (lab::is_ledger_token),
/// or nullopt after printing why not (never the file's content).
[[nodiscard]] std::optional<std::string> read_ledger_token_file(std::string_view command,
                                                                const std::string& path);

/// The first of those options the user typed ("--charges"), or "" when none.
[[nodiscard]] std::string typed_payments_option(const lab_payments_options& options);

/// Runs `lab payments`: starts the replicas (or uses --server), sends the charges, prints the
/// audit (a table, or JSON with `json`). `policies` are lab's --policy values (at most one
/// applies). `stop` is set by SIGINT/SIGTERM. Returns the exit status: 0 no duplicate and no
/// lost charge, 1 otherwise or a failure at run time, 2 a usage error.
/// Starts a lab server with its payments endpoint (lab::server::start); nullptr after reporting
/// why not as "stormguard COMMAND: error: ...", with the exit status in `status`: 2 for a bad
/// --idempotency value, 1 when the server cannot start. Used by `serve` and `lab payments`.
[[nodiscard]] std::unique_ptr<lab::server> start_payments_server(std::string_view command,
                                                                 const sim::scenario& s,
                                                                 const lab::server_options& options,
                                                                 int& status);

int run_lab_payments(const lab_payments_options& options, bool json,
                     const std::vector<std::string>& policies, const std::atomic<bool>* stop);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_LAB_PAYMENTS_HPP
