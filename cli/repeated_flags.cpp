// SPDX-License-Identifier: Apache-2.0
#include "repeated_flags.hpp"

namespace stormguard::cli {

void refuse_repeated_flags(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (option == app.get_help_ptr() || option == app.get_help_all_ptr() ||
        option == app.get_version_ptr()) {
      continue;
    }
    // A flag takes no value (0 expected); CLI11's flags keep the last (or sum the counts) by
    // default, so `--json --json` went through silently.
    if (option->get_expected_max() == 0) {
      option->multi_option_policy(CLI::MultiOptionPolicy::Throw);
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    refuse_repeated_flags(*sub);
  }
}

}  // namespace stormguard::cli
