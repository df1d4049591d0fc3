// stormguard: the command-line tool. main() only builds the CLI11 app, registers the subcommands
// (one file each, see command.hpp) and maps parse errors to exit code 2.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "command.hpp"
#include "stormguard/version.hpp"

int main(int argc, char** argv) {
  namespace cli = stormguard::cli;
  CLI::App app{"stormguard: retries that cannot turn into a retry storm", "stormguard"};
  app.set_version_flag("--version", std::string(stormguard::version()));
  app.require_subcommand(1);

  std::vector<cli::command> commands;
  commands.push_back(cli::add_simulate_command(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and --version exit 0; every other parse error is a usage error.
    return app.exit(e) == 0 ? cli::exit_success : cli::exit_usage;
  }
  for (const auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return cli::exit_usage;
}
