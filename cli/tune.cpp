// SPDX-License-Identifier: Apache-2.0
// `stormguard tune [SCENARIO] [--rate R --clients N (--workers N | --capacity R) --p50 D --p99 D]
// [--deadline D] [--error-rate X] [goal flags] [--out FILE] [--export TARGET:FILE] [--json]
// [--plot FILE] [--seed N]`: a retry policy sized for a service, with its simulated evidence. The
// search, the rules and the report are the application layer's (app/tune.hpp); this file reads
// the command line and writes the files.
#include "app/tune.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "app/plot.hpp"
#include "command.hpp"
#include "gnuplot.hpp"
#include "manpage.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "progress.hpp"
#include "scenario_argument.hpp"
#include "stormguard/config/export.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "tune_files.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

constexpr std::string_view k_command = "tune";
// The command's own status: the search found no policy that meets the goal.
constexpr int exit_goal_not_met = 3;

// Every value as text, parsed after CLI11 so that each error names its flag and quotes its value.
struct tune_flags {
  std::string scenario;
  std::string rate, clients, workers, capacity, p50, p99, deadline, error_rate;
  std::string max_amplification, min_success, max_recovery, min_healthy_success;
  std::string seed, threads, max_candidates, name;
  std::string out, export_to, plot, write_scenario;
  bool json = false;
  std::vector<CLI::Option*> given_options;
  CLI::Option* scenario_option = nullptr;  // given (count > 0) even when empty ('')
};

struct usage_error {
  std::string message;
};

bool given(const tune_flags& f, const std::string& flag) {
  for (const CLI::Option* o : f.given_options) {
    if (o->count() > 0 && o->check_lname(flag.substr(2))) return true;
  }
  return false;
}

[[noreturn]] void bad(std::string_view flag, std::string_view why, const std::string& value) {
  throw usage_error{fmt::format("{} {}, got {}", flag, why, detail::quote_for_message(value))};
}

double number_flag(std::string_view flag, const std::string& text, double lo, double hi,
                   std::string_view range) {
  const auto x = parse_decimal_number(text, true);
  if (!x || *x < lo || *x > hi) bad(flag, fmt::format("must be a number in {}", range), text);
  return *x;
}

duration duration_flag(std::string_view flag, const std::string& text) {
  const auto d = parse_duration(text);
  if (!d || *d <= duration::zero() || *d > std::chrono::hours(1)) {
    bad(flag, "must be a duration in (0, 1h] such as 20ms or 1.5s", text);
  }
  return *d;
}

std::uint64_t whole_flag(std::string_view flag, const std::string& text, std::uint64_t lo,
                         std::uint64_t hi) {
  const auto n = parse_whole_number(text);
  if (!n || *n < lo || *n > hi)
    bad(flag, fmt::format("must be an integer in [{}, {}]", lo, hi), text);
  return *n;
}

// The description from the flags (no SCENARIO), each value checked where it is read.
sim::service_description describe_service(const tune_flags& f) {
  sim::service_description d;
  if (given(f, "--rate")) {
    d.requests_per_second = number_flag("--rate", f.rate, 1e-9, 1e12, "[1, 166666]");
  }
  if (given(f, "--clients")) {
    d.clients = static_cast<int>(whole_flag("--clients", f.clients, 1, 100'000));
  }
  if (given(f, "--p50")) d.p50 = duration_flag("--p50", f.p50);
  d.p99 = given(f, "--p99") ? duration_flag("--p99", f.p99) : d.p50;
  if (given(f, "--workers") && given(f, "--capacity")) {
    throw usage_error{"--workers and --capacity both give the capacity: use one"};
  }
  if (given(f, "--workers"))
    d.workers = static_cast<int>(whole_flag("--workers", f.workers, 1, 1'000'000));
  if (given(f, "--capacity")) {
    const double c = number_flag("--capacity", f.capacity, 1e-9, 1e12, "(0, 1e12] req/s");
    const auto w = sim::workers_for(c, d.p50);
    if (!w) bad("--capacity", "must give 1 to 1000000 workers of --p50 each", f.capacity);
    d.workers = *w;
    // The simulated server has whole workers of --p50 each: say when that is not the capacity.
    const double exact = c * std::chrono::duration<double>(d.p50).count();
    if (std::abs(exact - d.workers) > 1e-9 * exact) {
      report_warning(
          k_command,
          printable_message(fmt::format(
              "--capacity {}: {} workers of --p50 {} each; the server is simulated "
              "with whole workers: {} worker{}, {} req/s",
              f.capacity, detail::format_double(exact), format_duration(d.p50), d.workers,
              d.workers == 1 ? "" : "s",
              detail::format_double(d.workers / std::chrono::duration<double>(d.p50).count()))));
    }
  }
  return d;
}

struct tune_inputs {
  sim::scenario storm;
  sim::service_description service;
  sim::tune_goal goal;
  sim::tune_options options;
  std::optional<config::export_target> target;
  std::string export_file;
};

// Goal and search flags, shared by both ways of describing the service.
void read_goal(const tune_flags& f, tune_inputs& in) {
  if (given(f, "--max-amplification")) {
    in.goal.max_incident_amplification =
        number_flag("--max-amplification", f.max_amplification, 1.0, 1000.0, "[1, 1000]");
  }
  if (given(f, "--min-success")) {
    in.goal.min_success = number_flag("--min-success", f.min_success, 0.0, 1.0, "[0, 1]");
  }
  if (given(f, "--max-recovery")) {
    in.goal.max_recovery_s =
        std::chrono::duration<double>(duration_flag("--max-recovery", f.max_recovery)).count();
  }
  if (given(f, "--min-healthy-success")) {
    in.goal.min_baseline_success =
        number_flag("--min-healthy-success", f.min_healthy_success, 0.0, 1.0, "[0, 1]");
  }
  if (given(f, "--threads"))
    in.options.threads = static_cast<unsigned>(whole_flag("--threads", f.threads, 1, 2));
  if (given(f, "--max-candidates")) {
    in.options.max_candidates = whole_flag("--max-candidates", f.max_candidates, 4, 10'000);
  }
  if (given(f, "--name")) {
    const auto named = config::parse_policies(
        fmt::format(R"({{"policies": [{{"name": {}}}]}})", nlohmann::json(f.name).dump()));
    if (f.name.empty() || !named)
      bad("--name", "must be a policy name (1 to 64 of A-Z a-z 0-9 + - _ . /)", f.name);
    in.options.name = f.name;
  }
  if (given(f, "--export")) {
    const auto colon = f.export_to.find(':');
    in.target = config::parse_export_target(f.export_to.substr(0, colon));
    if (!in.target || colon == std::string::npos || colon + 1 == f.export_to.size()) {
      bad("--export", "must be TARGET:FILE with TARGET envoy, grpc or linkerd", f.export_to);
    }
    in.export_file = f.export_to.substr(colon + 1);
  }
  if (given(f, "--plot") && !sim::plot_format_for(f.plot)) {
    bad("--plot", "must name a .png or .svg file", f.plot);
  }
}

// A problem of the service (sim::check_description) as a usage_error naming what the user gave:
// the flag ("--p50 must be ..."), or the scenario's field when the value came from SCENARIO. A
// healthy attempt no shorter than the deadline blames the value given of the two, with both.
void check_service(const tune_flags& f, const sim::service_description& d) {
  const bool from_scenario = !f.scenario.empty();
  if (d.deadline <= d.p50 && !given(f, "--deadline")) {
    throw usage_error{fmt::format(
        "{} {} is no shorter than the callers' deadline ({}, the default; --deadline sets it): "
        "a healthy attempt must end before the deadline",
        from_scenario ? "SCENARIO's server.service_time" : "--p50",
        from_scenario ? format_duration(d.p50) : f.p50, format_duration(d.deadline))};
  }
  auto problem = sim::check_description(d);
  if (!problem) return;
  // "deadline: must be ..." as every flag's message: "--deadline must be ...".
  const auto colon = problem->find(": ");
  std::string field = problem->substr(0, colon);
  std::string what = "--" + field;
  if (from_scenario && field != "deadline" && field != "error-rate" &&
      !(field == "clients" && given(f, "--clients"))) {
    what = "SCENARIO's " + std::string(field == "rate"      ? "requests_per_second"
                                       : field == "workers" ? "server.workers"
                                       : field == "p50"     ? "server.service_time (the p50)"
                                       : field == "p99"     ? "service_time + stall (the p99)"
                                                            : field);
  }
  std::string why = problem->substr(colon + 2);
  // The value as the user typed it, quoted as every flag's error quotes it.
  const std::pair<const char*, const std::string*> typed[] = {
      {"rate", &f.rate}, {"clients", &f.clients}, {"workers", &f.workers},
      {"p50", &f.p50},   {"p99", &f.p99},         {"deadline", &f.deadline}};
  const auto got = why.rfind(", got ");
  for (const auto& [name, text] : typed) {
    if (field == name && what == "--" + field && given(f, what) && got != std::string::npos) {
      why = why.substr(0, got) + ", got " + detail::quote_for_message(*text);
    }
  }
  throw usage_error{what + " " + why};
}

// The inputs, or a usage_error.
tune_inputs read_inputs(const tune_flags& f) {
  tune_inputs in;
  const duration deadline =
      given(f, "--deadline") ? duration_flag("--deadline", f.deadline) : std::chrono::seconds(10);
  const double error_rate = given(f, "--error-rate")
                                ? number_flag("--error-rate", f.error_rate, 0.0, 0.5, "[0, 0.5]")
                                : 0.01;
  const std::uint64_t seed = given(f, "--seed") ? whole_flag("--seed", f.seed, 0, UINT64_MAX) : 42;
  if (f.scenario_option != nullptr && f.scenario_option->count() > 0 && f.scenario.empty()) {
    throw usage_error{"SCENARIO must be a built-in scenario (" + sim::builtin_scenario_names() +
                      ") or a scenario file, got \"\" (leave it out to describe the service "
                      "with --rate, --clients, --workers or --capacity, --p50, --p99)"};
  }
  if (!f.scenario.empty()) {
    for (const char* flag : {"--rate", "--workers", "--capacity", "--p50", "--p99"}) {
      if (given(f, flag)) {
        throw usage_error{
            fmt::format("{} describes a service: give it or a SCENARIO, not both", flag)};
      }
    }
    auto loaded = load_scenario_argument(k_command, f.scenario);
    if (!loaded) throw usage_error{};
    in.storm = *std::move(loaded);
    if (given(f, "--clients"))
      in.storm.clients = static_cast<int>(whole_flag("--clients", f.clients, 1, 100'000));
    if (given(f, "--seed")) in.storm.seed = seed;
    in.service = sim::description_of(in.storm, deadline, error_rate);
  } else {
    in.service = describe_service(f);
    in.service.deadline = deadline;
    in.service.error_rate = error_rate;
  }
  check_service(f, in.service);
  if (f.scenario.empty()) in.storm = sim::service_scenario(in.service, seed);
  read_goal(f, in);
  return in;
}

// Every output file given, checked before anything runs: a usage_error for "-" or two flags
// naming one file.
void stage_outputs(const tune_flags& f, const tune_inputs& in, staged_files& files) {
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--out", &f.out},
      {"--export", &in.export_file},
      {"--write-scenario", &f.write_scenario},
      {"--plot", &f.plot}};
  for (const auto& [flag, path] : outputs) {
    if (!given(f, flag)) continue;
    if (auto problem = files.add(flag, *path)) throw usage_error{*problem};
  }
}

// The report on stdout, then the files, all or none (staged_files): false after an error.
bool write_outputs(const tune_flags& f, const tune_inputs& in, const sim::tune_report& report,
                   staged_files& files) {
  if (!write_all(stdout, f.json ? sim::to_json(report) : sim::format_report(report))) {
    report_error(k_command, "cannot write to standard output: " + errno_text(errno));
    return false;
  }
  std::fflush(stdout);
  if (given(f, "--write-scenario") &&
      !files.write(k_command, "--write-scenario", sim::to_json(in.storm))) {
    return false;
  }
  if (report.verdict.met) {
    if (given(f, "--out") &&
        !files.write(k_command, "--out", config::to_json(std::vector{report.policy}))) {
      return false;
    }
    if (in.target) {
      const auto exported = config::export_policy(report.policy, *in.target);
      for (const std::string& w : exported.warnings) {
        report_warning(
            k_command,
            printable_message("--export " + std::string(config::to_string(*in.target)) + ": " + w));
      }
      if (!files.write(k_command, "--export", exported.text)) return false;
    }
    if (given(f, "--plot")) {
      const std::string into = files.temporary("--plot").string();
      if (auto error = run_gnuplot(
              sim::gnuplot_script(report.at_fleet, *sim::plot_format_for(f.plot), into))) {
        report_error(k_command, fmt::format("cannot draw the plot {}: {}",
                                            detail::quote_for_message(f.plot), *error));
        return false;
      }
      files.mark_written("--plot");
    }
  }
  return files.commit(k_command);
}

// The progress bar on a terminal, and on stderr the estimate of the search's time when it is more
// than a minute: once the first two simulations have ended (the default policies in the storm,
// which retry the most: an upper estimate), and again at a tenth of the simulations planned.
sim::progress_callback progress_with_estimate(progress_bar& bar) {
  const auto start = std::chrono::steady_clock::now();
  return [draw = bar.callback(), start, told = 0](std::size_t done, std::size_t total) mutable {
    const bool first = told == 0 && done >= 2;
    const bool tenth = told < 2 && done * 10 >= total && done >= 3;
    if ((first || tenth) && done < total) {
      told = tenth ? 2 : 1;
      const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
      const double left =
          spent.count() * static_cast<double>(total - done) / static_cast<double>(done);
      if (spent.count() + left > 60.0) {
        if (draw) write_diagnostic(fmt::format("\r{:{}}\r", "", 79));  // the bar's line
        report_log(k_command,
                   first ? fmt::format("about {} simulations; the first {} (the default policies, "
                                       "which retry the most) took {:.0f} s: the search may take "
                                       "up to about {:.0f} min",
                                       total, done, spent.count(),
                                       std::ceil((spent.count() + left) / 60.0))
                         : fmt::format("{} of about {} simulations in {:.0f} s: about {:.0f} min "
                                       "left",
                                       done, total, spent.count(), std::ceil(left / 60.0)));
      }
    }
    if (draw) draw(done, total);
  };
}

int run_tune(const tune_flags& f) {
  tune_inputs in;
  staged_files files;
  try {
    in = read_inputs(f);
    stage_outputs(f, in, files);
  } catch (const usage_error& e) {
    if (!e.message.empty()) report_error(k_command, printable_message(e.message));
    return exit_usage;
  }
  if (auto why = sim::infeasible(in.storm, in.service)) {
    report_error(k_command, "no policy can meet the goal: " + *why);
    return exit_goal_not_met;
  }
  if (!files.prepare(k_command)) return exit_failure;
  progress_bar bar(detail::escape_control(in.storm.name) + " tune");
  in.options.progress = progress_with_estimate(bar);
  sim::tune_report report;
  try {
    report = sim::tune(in.storm, in.service, in.goal, in.options);
  } catch (const std::invalid_argument& e) {
    report_error(k_command, printable_message(e.what()));
    return exit_usage;
  } catch (const std::bad_alloc&) {
    report_error(k_command, "out of memory during the search");
    return exit_failure;
  }
  if (!write_outputs(f, in, report, files)) return exit_failure;
  if (!report.verdict.met) {
    report_error(k_command, "no policy tried meets the goal: " + report.verdict.reason +
                                " (the closest is printed; nothing written)");
    return exit_goal_not_met;
  }
  return exit_success;
}

}  // namespace

command add_tune_command(CLI::App& parent) {
  auto f = std::make_shared<tune_flags>();
  CLI::App* sub = parent.add_subcommand(
      "tune", "Size a retry policy for a service with the simulator, and show its evidence");
  sub->footer(
      "Without SCENARIO the service is described by --rate, --clients, --workers or --capacity,\n"
      "--p50, --p99; its failure is friday-night's shape scaled to it (" +
      doc_path("tune.md") +
      ").\n"
      "Exit status:\n"
      "  0    a policy meets the goal (and the files were written)\n"
      "  1    stdout, --out, --export, --write-scenario or the plot could not be written\n"
      "  2    bad command line: a value out of range (named), an unknown scenario or target\n"
      "  3    no policy can meet the goal, or none tried does (the reason is printed)");
  f->scenario_option = sub->add_option("scenario", f->scenario,
                                       "A built-in scenario (" + sim::builtin_scenario_names() +
                                           ") or a scenario file, instead of a description")
                           ->type_name("SCENARIO");
  const auto opt = [&](const std::string& name, std::string& into, const std::string& help,
                       const std::string& placeholder) {
    f->given_options.push_back(add_typed_option(*sub, name, into, help, placeholder));
  };
  opt("--rate", f->rate, "Logical requests per second of all clients (default 2000)", "R");
  opt("--clients", f->clients,
      "Client processes, 1 to 100000 (default 20; with SCENARIO: "
      "its clients instead)",
      "N");
  opt("--workers", f->workers, "Attempts the server serves at once (default 100)", "N");
  opt("--capacity", f->capacity, "Or the server's capacity in req/s (workers = R x p50)", "R");
  opt("--p50", f->p50, "Healthy latency p50, the service time of an attempt (default 20ms)", "D");
  opt("--p99", f->p99, "Healthy latency p99 (default p50); above 2 x p50 a tail: hedging is tried",
      "D");
  opt("--deadline", f->deadline, "The callers' deadline of one logical request (default 10s)", "D");
  opt("--error-rate", f->error_rate,
      "Fraction of attempts failing on a healthy day, in [0, 0.5] (default 0.01)", "X");
  opt("--max-amplification", f->max_amplification,
      "Goal: incident amplification at most X (default 1.15)", "X");
  opt("--min-success", f->min_success,
      "Goal: success ratio at least X in [0, 1] (default: the better default policy's)", "X");
  opt("--max-recovery", f->max_recovery,
      "Goal: recovery within D (default: the better default policy's)", "D");
  opt("--min-healthy-success", f->min_healthy_success,
      "Goal: success ratio at least X on a healthy day, after its first 10 s (default 0.999)", "X");
  opt("--seed", f->seed, "Seed of the simulations (default: the scenario's, or 42)", "N");
  opt("--threads", f->threads, "Simulations side by side, 1 or 2 (default 2)", "N");
  opt("--max-candidates", f->max_candidates, "Try at most N policies, 4 to 10000 (default 200)",
      "N");
  opt("--name", f->name, "The policy's name (default tuned)", "NAME");
  opt("--out", f->out, "Write the policy file to FILE (when it meets the goal)", "FILE");
  opt("--export", f->export_to,
      "Also write the policy as an envoy, grpc or linkerd configuration into FILE", "TARGET:FILE");
  opt("--plot", f->plot, "Draw the storm with gnuplot into FILE (.png or .svg)", "FILE");
  opt("--write-scenario", f->write_scenario,
      "Write the scenario the evidence ran into FILE (for simulate and lab)", "FILE");
  sub->add_flag("--json", f->json, "Print one JSON object instead of the report");
  return command{sub, [f] { return run_tune(*f); }};
}

}  // namespace stormguard::cli
