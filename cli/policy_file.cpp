#include "policy_file.hpp"

#include <CLI/CLI.hpp>

#include "output.hpp"

namespace stormguard::cli {

namespace {

config::policy_reference reference_of(const std::string& value) {
  try {
    return config::parse_policy_reference(value);
  } catch (const config::policy_error& e) {
    throw CLI::ValidationError("--policy", printable_message(e.what()));
  }
}

std::vector<config::policy> load(const config::policy_reference& reference) {
  try {
    return config::load_policies(reference);
  } catch (const config::policy_error& e) {
    throw CLI::ValidationError("--policy", printable_message(e.what()));
  }
}

void warn(std::string_view command, const config::policy_reference& reference,
          const config::policy& p) {
  for (const std::string& warning : p.warnings) {
    report_warning(command, printable_message(reference.file.string() + ": " + warning));
  }
}

}  // namespace

std::vector<config::policy> load_policy_option(std::string_view command,
                                               const std::string& value) {
  const config::policy_reference reference = reference_of(value);
  std::vector<config::policy> policies = load(reference);
  for (const config::policy& p : policies) warn(command, reference, p);
  return policies;
}

config::policy load_one_policy(std::string_view command, const std::string& value) {
  const config::policy_reference reference = reference_of(value);
  std::vector<config::policy> policies = load(reference);
  warn(command, reference, policies.front());
  if (policies.size() > 1) {
    report_log(command, printable_message("using the policy \"" + policies.front().name +
                                          "\", the first of " + std::to_string(policies.size()) +
                                          " in the file (write FILE:NAME for another)"));
  }
  return std::move(policies.front());
}

}  // namespace stormguard::cli
