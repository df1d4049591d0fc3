// stormguard: the command-line tool. main() only builds the CLI11 app, registers the subcommands
// (one file each, see command.hpp), maps parse errors (also those a subcommand throws as
// CLI::ParseError after parsing, such as a bad --base) to exit code 2 and turns any escaping
// exception (std::bad_alloc included) into a one-line error and exit code 1.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "command.hpp"
#include "stormguard/version.hpp"

namespace {

int usage_error(const std::string& message) {
  std::fprintf(stderr, "stormguard: error: %s; run 'stormguard --help' for the subcommands\n",
               message.c_str());
  return stormguard::cli::exit_usage;
}

int run(int argc, char** argv) {
  namespace cli = stormguard::cli;
  CLI::App app{"stormguard: retries that cannot turn into a retry storm", "stormguard"};
  app.set_version_flag("--version", std::string(stormguard::version()));
  app.require_subcommand(0, 1);

  std::vector<cli::command> commands;
  commands.push_back(cli::add_simulate_command(app));
  commands.push_back(cli::add_exec_command(app));
  commands.push_back(cli::add_plan_command(app));
  commands.push_back(cli::add_http_command(app));
  // Unknown words reach app.remaining() instead of failing as "A subcommand is required", so
  // that the error can name them. Subcommands keep rejecting their own unknown options.
  app.allow_extras();
  for (const auto& c : commands) c.app->allow_extras(false);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and --version exit 0; every other parse error is a usage error.
    return app.exit(e) == 0 ? cli::exit_success : cli::exit_usage;
  }
  const std::vector<std::string> extras = app.remaining();
  const cli::command* chosen = nullptr;
  for (const auto& c : commands) {
    if (c.app->parsed()) chosen = &c;
  }
  if (chosen == nullptr) {
    if (extras.empty()) return usage_error("a subcommand is required");
    if (!extras.front().empty() && extras.front().front() == '-') {
      return usage_error("unknown option '" + extras.front() + "'");
    }
    std::string names;
    for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.app->get_name();
    return usage_error("unknown subcommand '" + extras.front() + "' (the subcommands are " + names +
                       ")");
  }
  if (!extras.empty()) {
    std::fprintf(stderr, "stormguard %s: error: unexpected argument '%s'\n",
                 chosen->app->get_name().c_str(), extras.front().c_str());
    return cli::exit_usage;
  }
  try {
    return chosen->run();
  } catch (const CLI::ParseError& e) {
    // A flag whose value is checked after parsing (policy_flags.hpp): a usage error too.
    std::fprintf(stderr, "stormguard %s: error: %s\n", chosen->app->get_name().c_str(), e.what());
    return cli::exit_usage;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("stormguard: error: out of memory\n", stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stormguard: error: %s\n", e.what());
  }
  return stormguard::cli::exit_failure;
}
