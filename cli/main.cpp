// SPDX-License-Identifier: Apache-2.0
// stormguard: the command-line tool's programs. The `stormguard` launcher (cli/launcher.cpp)
// execs one of them with the command line unchanged: `stormguard-<command>` (compiled with
// STORMGUARD_CLI_COMMAND=add_<command>_command) when argv[1] names that subcommand, which registers
// only that subcommand and so links only what it runs; `stormguard-all` otherwise (--help,
// --version, usage errors, the man page and the bash completion), which registers every one.
// main() only builds the CLI11 app, registers the subcommands (one file each, see command.hpp),
// maps parse errors (also those a subcommand throws as
// CLI::ParseError after parsing, such as a bad --base) to exit code 2 and turns any escaping
// exception (std::bad_alloc included) into a one-line error and exit code 1. Every diagnostic goes
// through cli/output.hpp, so that a broken stderr never changes the exit code.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "command.hpp"
#include "manpage.hpp"
#include "output.hpp"
#include "repeated_flags.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/version.hpp"
#include "usage.hpp"

#ifndef STORMGUARD_CLI_COMMAND
#include <curl/curl.h>

#include <asio/version.hpp>
#endif

namespace {

namespace cli = stormguard::cli;
using stormguard::detail::quote_for_message;

int usage_error(const std::string& message) {
  cli::report_error("", message + "; run 'stormguard --help' for the subcommands");
  return cli::exit_usage;
}

// A subcommand's usage error: "stormguard exec: error: <message>".
int usage_error(const CLI::App& sub, const std::string& message) {
  cli::report_error(sub.get_name(), message + "; see 'stormguard " + sub.get_name() + " --help'");
  return cli::exit_usage;
}

// Unknown words at the top level (before or instead of a subcommand).
int top_level_extras(const std::vector<cli::command>& commands,
                     const std::vector<std::string>& extras, const CLI::App& app) {
  if (extras.empty()) return usage_error("a subcommand is required");
  if (!extras.front().empty() && extras.front().front() == '-') {
    return usage_error(cli::extras_message(extras, app));
  }
  std::string names;
  for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.app->get_name();
  return usage_error("unknown subcommand " + quote_for_message(extras.front()) +
                     " (the subcommands are " + names + ")");
}

#ifndef STORMGUARD_CLI_COMMAND
// `stormguard --version`: the library version, the components built with the program
// (STORMGUARD_CLI_COMPONENTS, from cli/CMakeLists.txt), the libcurl it runs with and the Asio it
// was compiled with (ASIO_VERSION is MAJOR * 100000 + MINOR * 100 + PATCH).
std::string version_text() {
  const curl_version_info_data* curl = curl_version_info(CURLVERSION_NOW);
  return "stormguard " + std::string(stormguard::version()) +
         "\ncomponents: " STORMGUARD_CLI_COMPONENTS "\nlibcurl " +
         std::string(curl != nullptr && curl->version != nullptr ? curl->version : "unknown") +
         ", Asio " + std::to_string(ASIO_VERSION / 100000) + "." +
         std::to_string(ASIO_VERSION / 100 % 1000) + "." + std::to_string(ASIO_VERSION % 100);
}
#endif

int run(int argc, char** argv) {
  cli::init_doc_root(argc, argv);  // before the help texts that name the docs
  CLI::App app{"stormguard: retries that cannot turn into a retry storm", "stormguard"};
#ifndef STORMGUARD_CLI_COMMAND
  app.set_version_flag("--version", version_text());
#endif
  app.require_subcommand(0, 1);
  app.footer(
      "Exit status: 2 for a bad command line or a bad file named on it (a scenario, -d @FILE),\n"
      "1 for a failure at run time (a write error); each subcommand's --help lists its own.");

  std::vector<cli::command> commands;
#ifdef STORMGUARD_CLI_COMMAND
  // A command's own program: the launcher runs it only when argv[1] is this subcommand's name.
  commands.push_back(cli::STORMGUARD_CLI_COMMAND(app));
#else
  commands.push_back(cli::add_simulate_command(app));
  commands.push_back(cli::add_exec_command(app));
  commands.push_back(cli::add_plan_command(app));
  commands.push_back(cli::add_http_command(app));
  commands.push_back(cli::add_policy_command(app));
  commands.push_back(cli::add_serve_command(app));
  commands.push_back(cli::add_lab_command(app));
  commands.push_back(cli::add_tune_command(app));
#endif
  // Unknown words reach app.remaining() instead of failing as "A subcommand is required", so
  // that the error can name them. Subcommands keep rejecting their own unknown options.
  app.allow_extras();
  for (const auto& c : commands) c.app->allow_extras(false);
  cli::refuse_repeated_flags(app);
  // The build's generators of the man page and the bash completion (manpage.hpp).
  if (const int status = cli::generate_if_asked(argc, argv, app, stormguard::version());
      status >= 0) {
    return status;
  }

  const auto chosen_command = [&]() -> const cli::command* {
    const cli::command* chosen = nullptr;
    for (const auto& c : commands) {
      if (c.app->parsed()) chosen = &c;
    }
    return chosen;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Every other parse error is a usage error, worded by usage.hpp.
    if (const cli::command* chosen = chosen_command()) {
      return usage_error(*chosen->app, cli::parse_error_message(e, *chosen->app));
    }
    return usage_error(cli::parse_error_message(e, app));
  }
  const std::vector<std::string> extras = app.remaining();
  const cli::command* chosen = chosen_command();
  if (chosen == nullptr) return top_level_extras(commands, extras, app);
  if (!extras.empty()) return usage_error(*chosen->app, cli::extras_message(extras, *chosen->app));
  try {
    return chosen->run();
  } catch (const CLI::ParseError& e) {
    // A flag whose value is checked after parsing (policy_flags.hpp): a usage error too.
    cli::report_error(chosen->app->get_name(), e.what());
    return cli::exit_usage;
  }
}

// Output that could not be written is a run-time failure (exit 1), also for what CLI11 printed
// itself (--help, --version: to std::cout) or what a command left in a stdio buffer: flush both
// and check their error state, as the coreutils do with close_stdout.
int checked_stdout(int status) {
  errno = 0;
  std::cout.flush();
  const bool cout_failed = std::cout.fail();
  int error = errno;
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (errno != 0) error = errno;
  if (!cout_failed && flushed && std::ferror(stdout) == 0) return status;
  if (status == cli::exit_success) {
    // (CLI11's write failed earlier, inside its own code: the reason may be gone.)
    cli::report_error("", error != 0 ? "cannot write to standard output: " + cli::errno_text(error)
                                     : std::string("cannot write to standard output"));
    return cli::exit_failure;
  }
  return status;  // a failure already reported keeps its own status
}

}  // namespace

int main(int argc, char** argv) {
  cli::reopen_closed_standard_streams();
  // A reader that went away (`stormguard plan | head -1`) is a write error (exit 1, as
  // documented), not a death by SIGPIPE (141) that looks like a signal sent to stormguard. Every
  // command sees EPIPE instead; process.cpp gives the commands run by `exec` the default back.
  (void)std::signal(SIGPIPE, SIG_IGN);
  int status = cli::exit_failure;
  try {
    status = run(argc, argv);
  } catch (const std::bad_alloc&) {
    cli::report_error("", "out of memory");
  } catch (const std::exception& e) {
    cli::report_error("", cli::printable_message(e.what()));
  }
  return checked_stdout(status);
}
