// `stormguard simulate`: runs the storm simulator on a scenario (the built-in friday-night by
// default) for the chosen strategies (all by default) and prints a table, JSON or CSV files.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "output.hpp"
#include "stormguard/sim/report.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::cli {

namespace {

struct simulate_options {
  std::string scenario_file;
  std::vector<std::string> strategies;
  std::string seed;
  CLI::Option* seed_option = nullptr;  // to tell "--seed ''" from no --seed
  bool json = false;
  std::string csv_dir;
  CLI::Option* csv_option = nullptr;  // to tell "--csv ''" from no --csv
};

void print_error(const std::string& message) {
  fmt::print(stderr, "stormguard simulate: error: {}\n", message);
}

// A decimal integer in [0, 2^64 - 1], digits only (no sign, no spaces, no hex).
std::optional<std::uint64_t> parse_seed(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

int run_simulate(const simulate_options& options) {
  // Usage errors first (exit 2), before any work.
  std::vector<sim::strategy> chosen;
  for (const std::string& value : options.strategies) {
    // Each --strategy value is a comma-separated list; every item must name a strategy.
    std::size_t from = 0;
    while (true) {
      const std::size_t comma = value.find(',', from);
      const std::string name = value.substr(from, comma - from);
      if (name.empty()) {
        print_error(fmt::format("empty strategy name in --strategy '{}'; valid strategies: {}",
                                value, sim::strategy_names()));
        return exit_usage;
      }
      const sim::strategy* s = sim::find_strategy(name);
      if (s == nullptr) {
        print_error(fmt::format("unknown strategy '{}'; valid strategies: {}", name,
                                sim::strategy_names()));
        return exit_usage;
      }
      for (const auto& c : chosen) {
        if (c.name == s->name) {
          print_error(fmt::format("strategy '{}' is given more than once", name));
          return exit_usage;
        }
      }
      chosen.push_back(*s);
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  if (chosen.empty()) {
    const auto all = sim::builtin_strategies();
    chosen.assign(all.begin(), all.end());
  }
  std::optional<std::uint64_t> seed;
  if (options.seed_option != nullptr && options.seed_option->count() > 0) {
    seed = parse_seed(options.seed);
    if (!seed) {
      print_error(fmt::format(
          "--seed must be a non-negative decimal integer (0 to 18446744073709551615), got '{}'",
          options.seed));
      return exit_usage;
    }
  }

  if (options.csv_option != nullptr && options.csv_option->count() > 0 && options.csv_dir.empty()) {
    print_error("--csv needs a directory, got ''");
    return exit_usage;
  }

  // The scenario (exit 1 when the file is bad).
  sim::scenario scenario = sim::friday_night();
  if (!options.scenario_file.empty()) {
    auto loaded = sim::load_scenario(options.scenario_file);
    if (!loaded) {
      print_error(loaded.error().message);
      return exit_failure;
    }
    scenario = *std::move(loaded);
  }
  if (seed) scenario.seed = *seed;

  if (!options.csv_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.csv_dir, ec);
    if (ec || !std::filesystem::is_directory(options.csv_dir, ec)) {
      print_error(fmt::format("cannot create the CSV directory '{}': {}", options.csv_dir,
                              ec ? ec.message() : "not a directory"));
      return exit_failure;
    }
  }

  sim::simulation_report report;
  try {
    report = sim::simulate(scenario, chosen);
  } catch (const std::bad_alloc&) {
    print_error(fmt::format("out of memory while simulating '{}' ({} req/s x {})", scenario.name,
                            scenario.requests_per_second, sim::format_duration(scenario.length)));
    return exit_failure;
  }

  if (!options.csv_dir.empty()) {
    for (const auto& r : report.strategies) {
      const std::filesystem::path path = std::filesystem::path(options.csv_dir) / (r.name + ".csv");
      errno = 0;
      std::FILE* file = std::fopen(path.string().c_str(), "wb");
      if (file == nullptr) {
        print_error(fmt::format("cannot write '{}': {}", path.string(), errno_text(errno)));
        return exit_failure;
      }
      bool ok = write_all(file, sim::to_csv(r));
      int error = errno;
      if (std::fclose(file) != 0 && ok) {
        ok = false;
        error = errno;
      }
      if (!ok) {
        print_error(fmt::format("cannot write '{}': {}", path.string(), errno_text(error)));
        return exit_failure;
      }
    }
  }

  if (!write_all(stdout, options.json ? sim::to_json(report) : sim::format_table(report))) {
    print_error(fmt::format("cannot write to standard output: {}", errno_text(errno)));
    return exit_failure;
  }
  return exit_success;
}

}  // namespace

command add_simulate_command(CLI::App& parent) {
  auto options = std::make_shared<simulate_options>();
  CLI::App* sub = parent.add_subcommand(
      "simulate",
      "Simulate a retry storm on virtual time and compare retry strategies side by side");
  sub->add_option("scenario", options->scenario_file,
                  "Scenario JSON file (default: the built-in friday-night scenario)");
  // Commas are split by run_simulate, not by CLI11, so that an empty name ("-s ,") gets a clear
  // message.
  sub->add_option(
      "--strategy,-s", options->strategies,
      "Strategy to run; repeat or separate with commas (default: all): " + sim::strategy_names());
  options->seed_option = sub->add_option(
      "--seed", options->seed,
      "Seed of the simulation's generators, overriding the scenario's (0 to 2^64-1)");
  sub->add_flag("--json", options->json,
                "Print one JSON object instead of the table (byte-identical for a given seed)");
  options->csv_option =
      sub->add_option("--csv", options->csv_dir,
                      "Also write one CSV time series (1-s bins) per strategy into DIR, created if "
                      "missing")
          ->type_name("DIR");
  return command{sub, [options] { return run_simulate(*options); }};
}

}  // namespace stormguard::cli
