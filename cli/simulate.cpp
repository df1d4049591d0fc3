// SPDX-License-Identifier: Apache-2.0
// `stormguard simulate`: runs the storm simulator on a scenario (the built-in friday-night by
// default, another built-in by name, or a scenario file) for the chosen strategies (all by
// default) and prints a table or JSON, and optionally writes CSV files and a plot. The models
// brooker-occ and layers have their own reports; `--sweep load=LO:HI:STEP` sweeps the load of a
// time-series scenario.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "app/layers.hpp"
#include "app/models.hpp"
#include "app/occ.hpp"
#include "app/plot.hpp"
#include "app/report.hpp"
#include "app/sweep.hpp"
#include "command.hpp"
#include "defence_option.hpp"
#include "gnuplot.hpp"
#include "manpage.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "policy_file.hpp"
#include "process.hpp"
#include "progress.hpp"
#include "scenario_argument.hpp"
#include "simulate_fleet.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/sim/parallel.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

struct simulate_options {
  std::string scenario_file;
  std::vector<std::string> strategies;
  CLI::Option* strategy_option = nullptr;
  std::vector<std::string> policies;  // --policy values, in order
  std::string seed;
  CLI::Option* seed_option = nullptr;  // to tell "--seed ''" from no --seed
  bool json = false;
  std::string csv_dir;
  CLI::Option* csv_option = nullptr;  // to tell "--csv ''" from no --csv
  std::string plot;
  CLI::Option* plot_option = nullptr;
  std::string sweep;
  CLI::Option* sweep_option = nullptr;
  std::string threads;
  CLI::Option* threads_option = nullptr;
  std::string trials;
  CLI::Option* trials_option = nullptr;
  std::string layers;
  CLI::Option* layers_option = nullptr;
  std::string defence;  // --defence LIST (defence_option.hpp)
  CLI::Option* defence_option = nullptr;
  fleet_flags fleet;  // --clients, --scale, the fleet store model (simulate_fleet.cpp)
};

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

void print_error(const std::string& message) { report_error("simulate", message); }

// A user's value inside an error message: quoted, control bytes escaped, at most 80 bytes.
std::string quote_value(std::string_view text) { return detail::quote_for_message(text); }

// A decimal integer in [0, 2^64 - 1], digits only (no sign, no spaces, no hex): numbers.hpp.
std::optional<std::uint64_t> parse_seed(const std::string& text) {
  return parse_whole_number(text);
}

// A decimal integer in [lo, hi], digits only.
std::optional<std::int64_t> parse_count(const std::string& text, std::int64_t lo, std::int64_t hi) {
  const auto value = parse_seed(text);
  if (!value || *value > static_cast<std::uint64_t>(hi) || static_cast<std::int64_t>(*value) < lo) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(*value);
}

// A finite number in plain decimal ("100", "2.5", "1e8"; no sign, hex, inf or nan): numbers.hpp.
std::optional<double> parse_number(const std::string& text) { return parse_decimal_number(text); }

// `--sweep KEY=LO:HI:STEP`.
struct sweep_spec {
  std::string key;
  double from = 0.0;
  double to = 0.0;
  double step = 0.0;
};
std::optional<sweep_spec> parse_sweep(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) return std::nullopt;
  sweep_spec spec;
  spec.key = text.substr(0, eq);
  const std::string rest = text.substr(eq + 1);
  const auto c1 = rest.find(':');
  const auto c2 = c1 == std::string::npos ? c1 : rest.find(':', c1 + 1);
  if (c2 == std::string::npos || rest.find(':', c2 + 1) != std::string::npos) return std::nullopt;
  const auto from = parse_number(rest.substr(0, c1));
  const auto to = parse_number(rest.substr(c1 + 1, c2 - c1 - 1));
  const auto step = parse_number(rest.substr(c2 + 1));
  if (!from || !to || !step) return std::nullopt;
  spec.from = *from;
  spec.to = *to;
  spec.step = *step;
  return spec;
}

// Writes `text` into `path`; false after printing the system's reason.
bool write_file(const std::filesystem::path& path, const std::string& text) {
  return write_text_file("simulate", path, text);
}

// Draws the plot; false after printing why not. Says where it is on stderr.
template <class Report>
bool write_plot(const Report& report, const std::string& file) {
  const auto format = sim::plot_format_for(file);
  if (auto error = run_gnuplot(sim::gnuplot_script(report, *format, file))) {
    print_error(fmt::format("cannot draw the plot {}: {}", quote_value(file), *error));
    return false;
  }
  report_log("simulate", "wrote the plot " + file);
  return true;
}

// The strategies --policy loaded, in order (each file's in file order); nullopt after a usage
// error (a bad file, or one name given twice).
std::optional<std::vector<sim::strategy>> user_strategies(const simulate_options& options) {
  std::vector<sim::strategy> user;
  for (const std::string& value : options.policies) {
    std::vector<config::policy> loaded;
    try {
      loaded = load_policy_option("simulate", value);
    } catch (const CLI::ValidationError& e) {
      print_error(e.what());
      return std::nullopt;
    }
    for (const config::policy& p : loaded) {
      for (const auto& u : user) {
        if (u.name == p.name) {
          print_error(fmt::format("--policy {}: a policy named {} was given by an earlier --policy",
                                  quote_value(value), quote_value(p.name)));
          return std::nullopt;
        }
      }
      user.push_back(sim::from_policy(p));
    }
  }
  return user;
}

// A strategy of that name: a --policy one first, then the scenario's, then a built-in.
const sim::strategy* find_named(const std::string& name, const std::vector<sim::strategy>& user,
                                const std::vector<sim::strategy>& scenario) {
  for (const auto* list : {&user, &scenario}) {
    for (const auto& s : *list) {
      if (s.name == name) return &s;
    }
  }
  return sim::find_strategy(name);
}

// The names a --strategy may give, for error messages.
std::string known_names(const std::vector<sim::strategy>& user,
                        const std::vector<sim::strategy>& scenario) {
  std::string names = sim::strategy_names();
  for (const auto* list : {&scenario, &user}) {
    for (const auto& s : *list) {
      if (sim::find_strategy(s.name) == nullptr) names += ", " + detail::escape_control(s.name);
    }
  }
  return names;
}

// The strategies to run; nullopt after a usage error. With --strategy: those named (a --policy
// policy, a strategy of the scenario file or a built-in), then every --policy policy it did not
// name. Without: the scenario's own list if it has one, else every built-in; then the --policy
// policies, each replacing the strategy of its name in place (with a note) or appended.
// The note that a --policy policy takes the place of a built-in (or the scenario's) strategy of
// the same name: printed whether or not --strategy chose it.
void note_replacement(const std::string& name) {
  report_log("simulate",
             fmt::format("note: the policy {} from --policy replaces the {} "
                         "strategy of that name",
                         quote_value(name),
                         sim::find_strategy(name) == nullptr ? "scenario's" : "built-in"));
}

std::optional<std::vector<sim::strategy>> chosen_strategies(
    const simulate_options& options, const std::vector<sim::strategy>& user,
    const std::vector<sim::strategy>& scenario) {
  std::vector<sim::strategy> chosen;
  for (const std::string& value : options.strategies) {
    // Each --strategy value is a comma-separated list; every item must name a strategy.
    std::size_t from = 0;
    while (true) {
      const std::size_t comma = value.find(',', from);
      const std::string name = value.substr(from, comma - from);
      if (name.empty()) {
        print_error(fmt::format("empty strategy name in --strategy {}; valid strategies: {}",
                                quote_value(value), known_names(user, scenario)));
        return std::nullopt;
      }
      const sim::strategy* s = find_named(name, user, scenario);
      if (s == nullptr) {
        print_error(fmt::format("unknown strategy {}; valid strategies: {}", quote_value(name),
                                known_names(user, scenario)));
        return std::nullopt;
      }
      for (const auto& c : chosen) {
        if (c.name == s->name) {
          print_error(fmt::format("strategy {} is given more than once", quote_value(name)));
          return std::nullopt;
        }
      }
      const bool from_user = !user.empty() && s >= user.data() && s < user.data() + user.size();
      const bool shadows_scenario =
          std::any_of(scenario.begin(), scenario.end(),
                      [&](const sim::strategy& x) { return x.name == s->name; });
      if (from_user && (sim::find_strategy(s->name) != nullptr || shadows_scenario)) {
        note_replacement(s->name);
      }
      chosen.push_back(*s);
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  if (!chosen.empty()) {
    // --policy means "also run these": a policy --strategy did not name runs after the chosen.
    for (const sim::strategy& u : user) {
      if (std::none_of(chosen.begin(), chosen.end(),
                       [&](const sim::strategy& c) { return c.name == u.name; })) {
        chosen.push_back(u);
      }
    }
    return chosen;
  }
  if (!scenario.empty()) {
    chosen = scenario;
  } else {
    const auto all = sim::builtin_strategies();
    chosen.assign(all.begin(), all.end());
  }
  for (const sim::strategy& u : user) {
    const auto same = std::find_if(chosen.begin(), chosen.end(),
                                   [&](const sim::strategy& c) { return c.name == u.name; });
    if (same == chosen.end()) {
      chosen.push_back(u);
      continue;
    }
    note_replacement(u.name);
    *same = u;
  }
  return chosen;
}

// An option given for a model it does not apply to is a usage error; which model takes which
// option is the registry's (stormguard/sim/models.hpp).
bool options_apply(const simulate_options& options, const sim::model_info& model) {
  struct flag {
    const CLI::Option* option;
    const char* name;
    sim::model_option what;
  };
  const flag flags[] = {{options.strategy_option, "--strategy", sim::model_option::strategies},
                        {options.trials_option, "--trials", sim::model_option::trials},
                        {options.layers_option, "--layers", sim::model_option::layers},
                        {options.sweep_option, "--sweep", sim::model_option::sweep}};
  for (const flag& f : flags) {
    if (given(f.option) && !model.takes(f.what)) {
      print_error(fmt::format("{} applies only to {} (not to {})", f.name,
                              sim::models_taking(f.what), model.name));
      return false;
    }
  }
  return true;
}

// What every model shares, checked before any work.
struct run_context {
  const simulate_options& options;
  std::vector<sim::strategy> strategies;
  std::vector<sim::strategy> user;  // from --policy
  std::optional<std::uint64_t> seed;
  unsigned threads = 0;
  std::optional<sweep_spec> sweep;
  std::filesystem::path csv_dir;
  // The scenario is a file that may name strategies of its own (which --strategy may name):
  // the strategies are chosen once it is loaded (load_time_series).
  bool choose_after_loading = false;
};

// The options' values (usage errors: exit 2) and the output targets; nullopt after printing
// why not, with the exit status in `status`.
std::optional<run_context> prepare(const simulate_options& options, const sim::model_info& model,
                                   int& status) {
  status = exit_usage;
  auto user = user_strategies(options);
  if (!user) return std::nullopt;
  // A time-series scenario file may bring its own strategies: chosen once it is loaded.
  const bool later = model.kind == sim::model_kind::time_series && !options.scenario_file.empty();
  auto strategies = later ? std::optional<std::vector<sim::strategy>>(std::in_place)
                          : chosen_strategies(options, *user, {});
  if (!strategies) return std::nullopt;
  run_context context{options, *std::move(strategies), *std::move(user), {}, 0,
                      {},      options.csv_dir};
  context.choose_after_loading = later;
  if (given(options.seed_option)) {
    context.seed = parse_seed(options.seed);
    if (!context.seed) {
      print_error(fmt::format(
          "--seed must be a non-negative decimal integer (0 to 18446744073709551615), got {}",
          quote_value(options.seed)));
      return std::nullopt;
    }
  }
  if (given(options.threads_option)) {
    const auto n = parse_count(options.threads, 1, 256);
    if (!n) {
      print_error(fmt::format("--threads must be an integer in [1, 256], got {}",
                              quote_value(options.threads)));
      return std::nullopt;
    }
    context.threads = static_cast<unsigned>(*n);
  }
  if (given(options.csv_option) && options.csv_dir.empty()) {
    print_error("--csv needs a directory, got \"\"");
    return std::nullopt;
  }
  if (given(options.plot_option)) {
    if (!sim::plot_format_for(options.plot)) {
      print_error(fmt::format("--plot needs a file name ending in .png or .svg, got {}",
                              quote_value(options.plot)));
      return std::nullopt;
    }
    const auto parent = std::filesystem::path(options.plot).parent_path();
    std::error_code ec;
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      print_error(fmt::format("cannot write the plot {}: the directory {} does not exist",
                              quote_value(options.plot), quote_value(parent.string())));
      status = exit_failure;
      return std::nullopt;
    }
  }
  if (given(options.sweep_option)) {
    context.sweep = parse_sweep(options.sweep);
    const std::string_view expected = model.sweep_key;
    if (model.kind == sim::model_kind::time_series && is_clients_sweep(options.sweep)) {
      if (given(options.fleet.clients_option)) {
        print_error("--clients and --sweep clients=... both set the fleet size: give one");
        return std::nullopt;
      }
      context.sweep.reset();  // a clients sweep: simulate_fleet.cpp reads it
    } else if (!context.sweep || context.sweep->key != expected) {
      print_error(fmt::format(
          "--sweep must be {}=LO:HI:STEP{} for this scenario, got {}", expected,
          model.kind == sim::model_kind::time_series ? " or clients=LIST|LO:HI:STEP" : "",
          quote_value(options.sweep)));
      return std::nullopt;
    }
  }
  if (!options.csv_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.csv_dir, ec);
    if (ec || !std::filesystem::is_directory(options.csv_dir, ec)) {
      print_error(fmt::format("cannot create the CSV directory {}: {}",
                              quote_value(options.csv_dir), ec ? ec.message() : "not a directory"));
      status = exit_failure;
      return std::nullopt;
    }
  }
  return context;
}

// Writes the CSV file (if --csv), prints the table (or JSON), then draws the plot: a plot that
// cannot be drawn (no gnuplot, an unwritable target) must not throw away a run's results.
template <class Report>
int finish(const run_context& context, const Report& report, const std::string& csv_name,
           const std::string& csv_text) {
  if (!context.options.csv_dir.empty() && !csv_name.empty() &&
      !write_file(context.csv_dir / csv_name, csv_text)) {
    return exit_failure;
  }
  if (!write_all(stdout, context.options.json ? sim::to_json(report) : sim::format_table(report))) {
    print_error(fmt::format("cannot write to standard output: {}", errno_text(errno)));
    return exit_failure;
  }
  std::fflush(stdout);
  if (given(context.options.plot_option) && !write_plot(report, context.options.plot)) {
    return exit_failure;
  }
  return exit_success;
}

int run_occ(run_context& context) {
  const simulate_options& options = context.options;
  sim::occ_options o;
  if (context.seed) o.seed = *context.seed;
  o.threads = context.threads;
  if (given(options.trials_option)) {
    const auto n = parse_count(options.trials, 1, 100'000);
    if (!n) {
      print_error(fmt::format("--trials must be an integer in [1, 100000], got {}",
                              quote_value(options.trials)));
      return exit_usage;
    }
    o.trials = static_cast<int>(*n);
  }
  if (const auto& sweep = context.sweep) {
    const auto whole = [](double x) { return x == std::floor(x) && x >= 1 && x <= 10'000; };
    if (!whole(sweep->from) || !whole(sweep->to) || !whole(sweep->step) ||
        sweep->to < sweep->from) {
      print_error(fmt::format(
          "--sweep clients=LO:HI:STEP needs integers with 1 <= LO <= HI <= 10000 and STEP >= "
          "1, got {}",
          quote_value(options.sweep)));
      return exit_usage;
    }
    o.clients_from = static_cast<int>(sweep->from);
    o.clients_to = static_cast<int>(sweep->to);
    o.clients_step = static_cast<int>(sweep->step);
  }
  progress_bar bar("brooker-occ");
  const sim::occ_report report = sim::simulate_occ(o, bar.callback());
  return finish(context, report, "brooker-occ.csv", sim::to_csv(report));
}

int run_layers(run_context& context) {
  const simulate_options& options = context.options;
  sim::layers_options o;
  if (context.seed) o.seed = *context.seed;
  if (given(options.layers_option)) {
    const auto n = parse_count(options.layers, 1, 6);
    if (!n) {
      print_error(fmt::format("--layers must be an integer in [1, 6], got {}",
                              quote_value(options.layers)));
      return exit_usage;
    }
    o.layers = static_cast<int>(*n);
  }
  progress_bar bar("layers");
  const sim::layers_report report =
      sim::simulate_layers(o, context.strategies, context.threads, bar.callback());
  return finish(context, report, "layers.csv", sim::to_csv(report));
}

// A time-series scenario: built in (by name) or a file (a bad file is bad input: exit 2). Sets
// context.strategies (the scenario may have its own).
std::optional<sim::scenario> load_time_series(run_context& context) {
  const std::string& argument = context.options.scenario_file;
  sim::scenario scenario = sim::friday_night();
  if (!argument.empty()) {
    auto loaded = load_scenario_argument("simulate", argument);
    if (!loaded) return std::nullopt;
    scenario = *std::move(loaded);
  }
  if (context.seed) scenario.seed = *context.seed;
  if (!scenario.strategies.empty() || context.choose_after_loading) {
    auto strategies = chosen_strategies(context.options, context.user, scenario.strategies);
    if (!strategies) return std::nullopt;
    context.strategies = *std::move(strategies);
  }
  if (!apply_fleet_flags(context.options.fleet, scenario, context.strategies)) return std::nullopt;
  // The work bound (bad input), before any work. With --sweep the loads replace the file's
  // requests_per_second: a load too large is the --sweep value's fault (sim::check_sweep).
  if (const auto& sweep = context.sweep) {
    const sim::load_range range{sweep->from, sweep->to, sweep->step};
    if (!sim::validate(range)) {
      if (auto problem = sim::check_sweep(scenario, context.strategies, range)) {
        print_error("--sweep " + quote_value(context.options.sweep) + ": " + *problem);
        return std::nullopt;
      }
    }
  } else if (auto problem = sim::check_work(scenario, context.strategies)) {
    print_error(problem->message);
    return std::nullopt;
  }
  return scenario;
}

int run_load_sweep(const run_context& context, const sim::scenario& scenario) {
  const sim::load_range range{context.sweep->from, context.sweep->to, context.sweep->step};
  if (auto problem = sim::validate(range)) {
    print_error("--sweep: " + *problem);
    return exit_usage;
  }
  if (!scenario.incident || scenario.incident->end >= scenario.length) {
    print_error(fmt::format(
        "--sweep load= needs a scenario whose incident ends within its duration (recovery is "
        "measured after it); {} has none",
        quote_value(scenario.name)));
    return exit_usage;
  }
  progress_bar bar(detail::escape_control(scenario.name) + " load sweep");
  sim::load_sweep_report report;
  try {
    report = sim::sweep_load(scenario, context.strategies, range, context.threads, bar.callback());
  } catch (const std::invalid_argument& e) {
    // The range does not suit the scenario: an invalid option value.
    print_error(printable_message(e.what()));
    return exit_usage;
  }
  return finish(context, report, csv_file_name(scenario.name, "-sweep.csv"), sim::to_csv(report));
}

int run_time_series(run_context& context) {
  const auto scenario = load_time_series(context);
  if (!scenario) return exit_usage;
  if (given(context.options.sweep_option) && is_clients_sweep(context.options.sweep)) {
    return run_clients_sweep(
        context.options.sweep, *scenario, context.strategies, context.threads,
        {context.options.json, context.options.csv_dir,
         given(context.options.plot_option) ? context.options.plot : std::string()});
  }
  if (context.sweep) return run_load_sweep(context, *scenario);
  sim::simulation_report report;
  try {
    progress_bar bar(detail::escape_control(scenario->name));
    if (given(context.options.defence_option)) {
      std::string error;
      const auto rows = parse_defence_option(context.options.defence, true, error);
      if (!rows) {
        print_error(error);
        return exit_usage;
      }
      report =
          simulate_defences(*scenario, context.strategies, *rows, context.threads, bar.callback());
    } else {
      report = sim::simulate(*scenario, context.strategies, context.threads, bar.callback());
    }
  } catch (const std::bad_alloc&) {
    print_error(fmt::format("out of memory while simulating {} ({} req/s x {})",
                            detail::quote_for_message(scenario->name),
                            scenario->requests_per_second,
                            stormguard::format_duration(scenario->length)));
    return exit_failure;
  }
  if (!context.options.csv_dir.empty()) {
    for (const auto& r : report.strategies) {
      if (!write_file(context.csv_dir / csv_file_name(r.name), sim::to_csv(r))) return exit_failure;
    }
  }
  return finish(context, report, "", "");
}

int run_simulate(const simulate_options& options) {
  // Usage errors first (exit 2), before any work.
  const sim::model_info& model = sim::model_for(options.scenario_file);
  if (!options_apply(options, model) || !fleet_flags_apply(options.fleet, model)) return exit_usage;
  int status = exit_usage;
  auto context = prepare(options, model, status);
  if (!context) return status;
  // One runner per model of the registry, indexed by its kind.
  using runner = int (*)(run_context&);
  constexpr runner runners[] = {run_time_series, run_occ, run_layers};
  static_assert(static_cast<int>(sim::model_kind::time_series) == 0 &&
                static_cast<int>(sim::model_kind::brooker_occ) == 1 &&
                static_cast<int>(sim::model_kind::layers) == 2);
  return runners[static_cast<std::size_t>(model.kind)](*context);
}

}  // namespace

command add_simulate_command(CLI::App& parent) {
  auto options = std::make_shared<simulate_options>();
  CLI::App* sub = parent.add_subcommand(
      "simulate",
      "Simulate a retry storm on virtual time and compare retry strategies side by side");
  sub->footer(
      "Exit status:\n"
      "  0    the report was printed (and the CSV files and plot written)\n"
      "  1    stdout, a CSV file or the plot could not be written, or out of memory\n"
      "  2    bad command line, or a bad scenario or --policy file (missing, invalid, a wrong\n"
      "       field)");
  sub->add_option("scenario", options->scenario_file,
                  "A built-in scenario (" + sim::builtin_scenario_names() +
                      ", brooker-occ, layers) or a scenario JSON file (default: friday-night); "
                      "write ./NAME for a file called like a built-in");
  // Commas are split by run_simulate, not by CLI11, so that an empty name ("-s ,") gets a clear
  // message.
  options->strategy_option = sub->add_option(
      "--strategy,-s", options->strategies,
      "Strategy to run; repeat or separate with commas (default: all): " + sim::strategy_names());
  add_typed_option(*sub, "--policy", options->policies,
                   "Also run the policies of a policy file ([grpc:|envoy:]FILE[:NAME], "
                   "repeatable; " +
                       doc_path("policy.md") + "); one named like a built-in replaces it",
                   "FILE[:NAME]");
  options->seed_option = sub->add_option(
      "--seed", options->seed,
      "Seed of the simulation's generators, overriding the scenario's (0 to 2^64-1)");
  sub->add_flag("--json", options->json,
                "Print one JSON object instead of the table (byte-identical for a given seed)");
  options->csv_option =
      add_typed_option(*sub, "--csv", options->csv_dir,
                       "Also write CSV files into DIR, created if missing: one time series (1-s "
                       "bins) per strategy, or the sweep or layers table",
                       "DIR");
  options->plot_option =
      add_typed_option(*sub, "--plot", options->plot,
                       "Also draw the results with gnuplot into FILE (.png or .svg)", "FILE");
  options->sweep_option =
      add_typed_option(*sub, "--sweep", options->sweep,
                       "load=LO:HI:STEP: rerun a time-series scenario at each load (req/s) and "
                       "report where each strategy stops recovering; clients=LIST|LO:HI:STEP: "
                       "rerun it at each fleet size (same total load); brooker-occ: "
                       "clients=LO:HI:STEP, its concurrent clients (default 10:190:10)",
                       "KEY=LO:HI:STEP");
  add_fleet_flags(*sub, options->fleet);
  options->threads_option =
      add_typed_option(*sub, "--threads", options->threads,
                       "Threads for sweeps and strategies (default: one per core); results do not "
                       "depend on it",
                       "N");
  options->trials_option = add_typed_option(*sub, "--trials", options->trials,
                                            "brooker-occ: trials per point (default 100)", "N");
  options->layers_option =
      add_typed_option(*sub, "--layers", options->layers,
                       "layers: retrying layers above the bottom service (default 3)", "N");
  options->defence_option = add_typed_option(
      *sub, "--defence", options->defence,
      defence_option_help("Server-side defences", "all; a,b gives one row per defence"), "LIST");
  return command{sub, [options] { return run_simulate(*options); }};
}

}  // namespace stormguard::cli
