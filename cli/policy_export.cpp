// SPDX-License-Identifier: Apache-2.0
// `stormguard policy export --to TARGET [-o FILE] [grpc:|envoy:]FILE[:NAME]`: one policy (the
// file's first, NAME, or builtin:NAME) as an Envoy route, a gRPC service config or a Linkerd
// ServiceProfile. The writing is stormguard::config's (export.hpp); this file reads the command
// line, prints the warnings and writes the text.
#include "policy_export.hpp"

#include <cerrno>
#include <memory>
#include <optional>
#include <string>

#include "output.hpp"
#include "policy_file.hpp"
#include "stormguard/config/export.hpp"
#include "stormguard/detail/format.hpp"

namespace stormguard::cli {

namespace {

constexpr std::string_view k_command = "policy export";

struct export_options {
  std::string target;
  std::string output;
  CLI::Option* output_option = nullptr;  // given: write to `output` (an empty one is an error)
  std::string policy;
};

int write_export(const export_options& options) {
  const auto target = config::parse_export_target(options.target);
  if (!target) {
    throw CLI::ValidationError("--to", "unknown target " +
                                           detail::quote_for_message(options.target) +
                                           " (the targets are envoy, grpc, linkerd)");
  }
  const config::policy p = load_one_policy(k_command, options.policy, "POLICY");
  const config::exported_policy out = config::export_policy(p, *target);
  for (const std::string& warning : out.warnings) {
    report_warning(k_command, printable_message("--to " + std::string(config::to_string(*target)) +
                                                ": " + warning));
  }
  if (options.output_option != nullptr && options.output_option->count() > 0) {
    return write_text_file(k_command, options.output, out.text, "-o/--output") ? exit_success
                                                                               : exit_failure;
  }
  if (!write_all(stdout, out.text)) {
    report_error(k_command, "cannot write to standard output: " + errno_text(errno));
    return exit_failure;
  }
  return exit_success;
}

// A bad --to or POLICY is a usage error (exit 2), said as "stormguard policy export: error: ...".
int run_export(const export_options& options) {
  try {
    return write_export(options);
  } catch (const CLI::ValidationError& e) {
    report_error(k_command, e.what());
    return exit_usage;
  }
}

}  // namespace

command add_policy_export(CLI::App& policy) {
  auto options = std::make_shared<export_options>();
  CLI::App* sub = policy.add_subcommand(
      "export",
      "Write a policy as an Envoy route, a gRPC service config or a Linkerd ServiceProfile");
  sub->footer(
      "What the target cannot express is printed as a warning on stderr.\n"
      "Exit status:\n"
      "  0    the configuration was written\n"
      "  1    stdout or the -o FILE could not be written\n"
      "  2    bad command line: an unknown --to target, or a bad policy file or name");
  sub->add_option("--to", options->target, "The target: envoy, grpc or linkerd")
      ->required()
      ->type_name("TARGET");
  options->output_option =
      sub->add_option("-o,--output", options->output, "Write to FILE instead of stdout")
          ->type_name("FILE");
  sub->add_option("policy", options->policy,
                  "[grpc:|envoy:]FILE[:NAME] or builtin:NAME: the policy (a file's first "
                  "unless NAME says)")
      ->required()
      ->type_name("POLICY");
  return command{sub, [options]() { return run_export(*options); }};
}

}  // namespace stormguard::cli
