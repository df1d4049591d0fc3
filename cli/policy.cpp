// SPDX-License-Identifier: Apache-2.0
// `stormguard policy check [--json] FILE[:NAME]...`: reads policy files (stormguard's format,
// grpc:FILE or envoy:FILE) as every other command would, and prints what they mean: the
// normalized policies (every field, defaults included) and, per policy, the exact range of each
// retry's delay and the worst total wait. A bad file is a usage error (exit 2), as elsewhere.
#include "stormguard/config/policy.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "manpage.hpp"
#include "output.hpp"
#include "plan_stats.hpp"
#include "policy_export.hpp"
#include "policy_file.hpp"
#include "stormguard/backoff.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::cli {

namespace {

struct check_options {
  std::vector<std::string> files;
  bool json = false;
  std::vector<std::string> unknown;  // words after `policy` that name no subcommand
};

// What the summary line adds after the budget: the time limits and the client profile, when the
// policy has them.
std::string limits_of(const config::policy& p) {
  std::string out;
  if (p.attempt_timeout != duration::max()) {
    out += ", attempt timeout " + format_duration(p.attempt_timeout);
  }
  if (p.deadline != duration::max()) out += ", deadline " + format_duration(p.deadline);
  if (p.client) {
    out += fmt::format(", played as the {} client", p.client->name);
    // A profile that never retries plays one attempt whatever the policy says: say so here.
    if (!p.client->retries && (p.retry.max_retries > 0 || p.hedging)) {
      out += " (which never retries: one attempt per request)";
    }
  }
  return out;
}

// The two readings of what is retried (or, hedging, what sends the next copy at once): the HTTP
// statuses (the HTTP executors, the simulator) and the gRPC codes (the gRPC client; its default
// UNAVAILABLE when the policy names none).
std::string readings_of(const config::policy& p) {
  const auto list = [](const std::vector<int>& items, auto name) {
    std::string out;
    for (const int i : items) out += (out.empty() ? "" : ", ") + name(i);
    return out.empty() ? std::string("none") : out;
  };
  const auto http = [](int s) { return std::to_string(s); };
  const auto grpc = [](int c) { return std::string(config::grpc_code_name(c)); };
  if (p.hedging) {
    const auto& codes = p.hedging->non_fatal_grpc_codes;
    return fmt::format("  next copy at once over HTTP on {}; over gRPC on {}\n",
                       list(p.hedging->non_fatal_statuses.to_vector(), http),
                       codes ? list(codes->to_vector(), grpc) : "none named");
  }
  const auto& codes = p.retryable_grpc_codes;
  return fmt::format(
      "  retried over HTTP: {}; over gRPC: {}\n", list(p.statuses.to_vector(), http),
      codes ? list(codes->to_vector(), grpc)
            : list(config::default_retryable_grpc_codes().to_vector(), grpc) + " (the default)");
}

// One line per retry: its delay range and the worst total wait before it.
std::string delays_of(const config::policy& p) {
  if (p.hedging) {
    // A policy hedges or retries, never both: its summary is the copies and their delay.
    const hedging_options& h = p.hedging->options;
    const std::string delay =
        h.delay_quantile > 0 ? fmt::format("p{} of recent latencies ({} until enough are known)",
                                           h.delay_quantile * 100, format_duration(h.delay))
                             : format_duration(h.delay);
    return fmt::format(
               "{}: hedged, {} copies in all, the next one {} after the last, budget {}{}\n",
               detail::escape_control(p.name), h.max_attempts, delay, config::budget_kind(p.budget),
               limits_of(p)) +
           readings_of(p);
  }
  std::string out =
      fmt::format("{}: {} retr{}, jitter {}, budget {}{}\n", detail::escape_control(p.name),
                  p.retry.max_retries, p.retry.max_retries == 1 ? "y" : "ies",
                  to_string(p.retry.backoff.jitter), config::budget_kind(p.budget), limits_of(p));
  out += readings_of(p);
  const backoff b(p.retry.backoff);
  for (const plan_row& r : make_plan(b, p.retry.max_retries, 1, 1)) {
    out += fmt::format("  retry {}: delay in [{}, {}], worst total {}{}\n", r.retry,
                       format_duration(r.lowest), format_duration(r.ceiling),
                       format_duration(r.cumulative_max), r.saturated ? " (saturated)" : "");
  }
  return out;
}

int run_check(const check_options& options) {
  std::vector<config::policy> policies;
  std::vector<std::string> sources;  // the file each policy came from, for the message below
  for (const std::string& file : options.files) {
    for (auto& p : load_policy_option("policy", file, "")) {
      policies.push_back(std::move(p));
      sources.push_back(file);
    }
  }
  // The output is itself a policy file (docs/policy.md): two policies of one name, from two files
  // (or one file given twice), would make it an invalid one. Refuse rather than print it.
  for (std::size_t i = 0; i < policies.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (policies[i].name == policies[j].name) {
        report_error("policy", fmt::format("the policy {} is in {} and in {}: the output would "
                                           "not be a valid policy file (names are unique)",
                                           detail::quote_for_message(policies[i].name),
                                           detail::quote_for_message(sources[j]),
                                           detail::quote_for_message(sources[i])));
        return exit_usage;
      }
    }
  }
  std::string out = config::to_json(policies);
  if (!options.json) {
    out += "\n";
    for (const auto& p : policies) out += delays_of(p);
  }
  if (!write_all(stdout, out)) {
    report_error("policy", "cannot write to standard output: " + errno_text(errno));
    return exit_failure;
  }
  return exit_success;
}

}  // namespace

command add_policy_command(CLI::App& parent) {
  auto options = std::make_shared<check_options>();
  CLI::App* sub = parent.add_subcommand(
      "policy", "Check policy files (policy check FILE) or export one (policy export --to T FILE)");
  // Not require_subcommand(1): CLI11 would say "A subcommand is required" for `policy bogus`
  // too. The words that name no subcommand land in a hidden positional, and the run names them.
  sub->require_subcommand(0, 1);
  sub->add_option("subcommand", options->unknown)->group("");
  CLI::App* check = sub->add_subcommand(
      "check", "Print the normalized policies of policy files and each retry's delay range");
  check->footer(
      "Exit status:\n"
      "  0    the policies were printed\n"
      "  1    stdout could not be written\n"
      "  2    bad command line, or a bad policy file (missing, invalid, a wrong field)");
  check
      ->add_option("file", options->files,
                   "[grpc:|envoy:]FILE[:NAME] (repeatable): a policy file (" +
                       doc_path("policy.md") +
                       "), a gRPC service config or an Envoy route; builtin: (or builtin:NAME) for "
                       "the simulator's built-in strategies")
      ->required()
      ->type_name("FILE[:NAME]");
  check->add_flag("--json", options->json, "Print only the normalized policies (JSON)");
  const command exporter = add_policy_export(*sub);
  return command{
      sub, [options, sub, check, exporter]() -> int {
        if (check->parsed()) return run_check(*options);
        if (exporter.app->parsed()) return exporter.run();
        report_error("policy", (options->unknown.empty()
                                    ? std::string("a subcommand is required")
                                    : "unknown subcommand " +
                                          detail::quote_for_message(options->unknown.front())) +
                                   " (the subcommands of policy: check, export); see 'stormguard " +
                                   sub->get_name() + " --help'");
        return exit_usage;
      }};
}

}  // namespace stormguard::cli
