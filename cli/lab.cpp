// SPDX-License-Identifier: Apache-2.0
// `stormguard lab`: the scenario's client fleet on real sockets against the scenario's server,
// both in-process, each figure next to the simulator's. Thin: the work is stormguard::lab
// (run_lab, to_json, format_table); this file reads the options, scales the scenario, draws the
// progress bar, turns SIGINT/SIGTERM into a clean stop with a partial report and, with
// --metrics-port, serves the fleet's client-side metrics (stormguard::metrics) with
// prometheus-cpp's pull exposer on 127.0.0.1. `lab payments` (a reserved SCENARIO name) is the
// double-charge audit of lab_payments.cpp.
#include <fmt/format.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/lab_fleet.hpp"
#include "app/plot.hpp"
#include "app/report.hpp"
#include "command.hpp"
#include "defence_option.hpp"
#include "gnuplot.hpp"
#include "lab_fleet_store.hpp"
#include "lab_payments.hpp"
#include "manpage.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "policy_file.hpp"
#include "progress.hpp"
#include "scenario_argument.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/detail/redis_url.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/metrics/retry_metrics.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

// The report was printed, but the lab's own sockets failed (lab_comparison::valid).
constexpr int k_exit_invalid = 3;

// Without --scale, a scenario is scaled to at most this many logical requests per second: what a
// 2-core machine holds with the client not the bottleneck (docs/lab.md "How far it scales").
constexpr double k_default_rate = 200.0;

struct lab_options {
  std::string scenario;
  std::vector<std::string> strategies;
  CLI::Option* strategy_option = nullptr;
  std::vector<std::string> policies;
  double scale = 0.0;
  CLI::Option* scale_option = nullptr;
  bool json = false;
  std::string csv_dir;
  CLI::Option* csv_option = nullptr;  // to tell "--csv ''" from no --csv
  std::string plot;
  CLI::Option* plot_option = nullptr;
  int metrics_port = 0;
  CLI::Option* metrics_port_option = nullptr;
  lab_payments_options payments;
  std::string defence;  // --defence LIST (defence_option.hpp): one run per row
  CLI::Option* defence_option = nullptr;
  std::string transport = "http";  // --transport http|grpc
  CLI::Option* transport_option = nullptr;
  lab_fleet_store_options fleet;  // --fleet-store, --processes (lab_fleet_store.hpp)
  // --fleet-store, then the options that apply with it only: typed without it, a usage error.
  std::vector<CLI::Option*> fleet_options;
};

constexpr const char* k_exit_statuses =
    "Exit status: 0 the report was printed; 1 a server could not be started, the HTTP client\n"
    "could not be set up, the --metrics-port could not be bound, --transport grpc in a build\n"
    "without gRPC, or stdout could not be written;\n"
    "2 a bad command line, scenario or --policy file; 3 the report was printed but the run is\n"
    "invalid (the lab's own sockets failed: descriptors ran out, connects dropped; or the\n"
    "--fleet-store did not serve the run: unreachable, or refused its password; the report\n"
    "says why); 130 (143) after SIGINT (SIGTERM), with the partial report printed.\n"
    "lab payments: 0 the audit found no double charge and no lost charge; 1 it found one (or the\n"
    "replicas, their store or the ledger could not be set up or read, or the run gave up after\n"
    "100 consecutive 503s: the store stayed down); 2 a bad command line; 130 (143) after SIGINT\n"
    "(SIGTERM): the charges in flight are cancelled at once and the partial audit printed.";

void print_error(const std::string& message) { report_error("lab", message); }

// --transport (CLI11 has checked the value).
lab::lab_transport_kind transport_of(const lab_options& o) noexcept {
  return o.transport == "grpc" ? lab::lab_transport_kind::grpc : lab::lab_transport_kind::http;
}

// Set by SIGINT/SIGTERM; the fleet polls it every 100 ms. A lock-free atomic is
// async-signal-safe.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int signal) {
  g_signal.store(signal);
  g_stop.store(true);
}

// Installs the handler for the lifetime of the object, and restores the previous one.
class stop_on_signals {
 public:
  stop_on_signals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~stop_on_signals() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }
  stop_on_signals(const stop_on_signals&) = delete;
  stop_on_signals& operator=(const stop_on_signals&) = delete;

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

// The strategies to run: those named by --strategy (comma-separated; a --policy policy, one of the
// scenario's own `strategies` or a built-in), else the scenario's own (when it has some) or none,
// naive, full, full+budget, and then every --policy policy. nullopt after a usage error.
std::optional<std::vector<sim::strategy>> chosen(const lab_options& o,
                                                 const std::vector<sim::strategy>& scenario) {
  std::vector<sim::strategy> user;
  for (const std::string& value : o.policies) {
    try {
      for (const config::policy& p : load_policy_option("lab", value)) {
        user.push_back(sim::from_policy(p));
      }
    } catch (const CLI::ValidationError& e) {
      print_error(e.what());
      return std::nullopt;
    }
  }
  const auto find = [&](const std::string& name) -> const sim::strategy* {
    for (const auto& u : user) {
      if (u.name == name) return &u;
    }
    for (const auto& s : scenario) {
      if (s.name == name) return &s;
    }
    return sim::find_strategy(name);
  };
  std::vector<sim::strategy> out;
  const auto add = [&](const std::string& name) {
    const sim::strategy* s = find(name);
    if (s == nullptr) {
      std::string names = sim::strategy_names();
      for (const auto& entry : scenario) names += ", " + entry.name;
      for (const auto& u : user) names += ", " + u.name;
      print_error(fmt::format("unknown strategy {}; valid strategies: {}",
                              detail::quote_for_message(name), names));
      return false;
    }
    if (std::any_of(out.begin(), out.end(), [&](const auto& c) { return c.name == s->name; })) {
      print_error(
          fmt::format("strategy {} is given more than once", detail::quote_for_message(name)));
      return false;
    }
    out.push_back(*s);
    return true;
  };
  for (const std::string& value : o.strategies) {
    std::size_t from = 0;
    while (true) {
      const std::size_t comma = value.find(',', from);
      if (!add(value.substr(from, comma - from))) return std::nullopt;
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  if (!o.strategies.empty()) return out;
  std::vector<std::string> defaults;
  for (const auto& s : scenario) defaults.push_back(s.name);
  if (defaults.empty()) defaults = {"none", "naive", "full", "full+budget"};
  for (const std::string& name : defaults) {
    if (std::none_of(user.begin(), user.end(), [&](const auto& u) { return u.name == name; })) {
      out.push_back(*find(name));
    }
  }
  out.insert(out.end(), user.begin(), user.end());
  return out;
}

// The simulator's time-series plot (sim::gnuplot_script) with two lines per strategy, "NAME lab"
// and "NAME sim"; false after printing why not.
bool write_plot(const lab::lab_report& report, const std::string& file) {
  sim::simulation_report both{report.scenario, {}};
  for (const lab::lab_comparison& c : report.strategies) {
    both.strategies.push_back(c.lab);
    both.strategies.back().name = c.name + " lab";
    both.strategies.push_back(c.sim);
    both.strategies.back().name = c.name + " sim";
  }
  if (auto error = run_gnuplot(sim::gnuplot_script(both, *sim::plot_format_for(file), file))) {
    print_error(
        fmt::format("cannot draw the plot {}: {}", detail::quote_for_message(file), *error));
    return false;
  }
  report_log("lab", "wrote the plot " + file);
  return true;
}

bool typed(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

// `lab payments`: the double-charge audit (lab_payments.cpp), with SIGINT/SIGTERM as for a lab
// run.
int run_payments(const lab_options& o) {
  for (const CLI::Option* option : {o.strategy_option, o.scale_option, o.csv_option, o.plot_option,
                                    o.metrics_port_option, o.transport_option}) {
    if (typed(option)) {
      print_error(option->get_name() + " does not apply to lab payments");
      return exit_usage;
    }
  }
  g_stop.store(false);
  g_signal.store(0);
  int status = exit_failure;
  {
    const stop_on_signals handler;
    status = run_lab_payments(o.payments, o.json, o.policies, &g_stop);
  }
  if (const int signal = g_signal.load(); signal != 0) return 128 + signal;
  return status;
}

// A lab run's inputs, checked: the scenario scaled and the strategies.
struct lab_run {
  sim::scenario scenario;
  std::vector<sim::strategy> strategies;
  bool csv = false;
  bool plot = false;
  double scale = 1.0;  // as applied
};

// The options and the scenario checked (usage errors: exit 2) and the CSV directory created;
// nullopt after printing why not, with the exit status in `status`.
std::optional<lab_run> prepare(const lab_options& o, int& status) {
  status = exit_usage;
  auto scenario = load_scenario_argument("lab", o.scenario);
  if (!scenario) return std::nullopt;
  const bool scale_given = o.scale_option != nullptr && o.scale_option->count() > 0;
  const double scale =
      scale_given ? o.scale : std::min(1.0, k_default_rate / scenario->requests_per_second);
  auto scaled = sim::scale_scenario(*scenario, scale);
  if (!scaled) {
    print_error("--scale " + detail::format_double(scale) + ": " + scaled.error().message);
    return std::nullopt;
  }
  auto strategies = chosen(o, scenario->strategies);
  if (!strategies) return std::nullopt;
  if (auto problem = sim::check_work(*scaled, *strategies)) {
    print_error(problem->message);
    return std::nullopt;
  }
  lab_run r{*std::move(scaled), *std::move(strategies),
            o.csv_option != nullptr && o.csv_option->count() > 0,
            o.plot_option != nullptr && o.plot_option->count() > 0};
  if (r.csv && o.csv_dir.empty()) {
    print_error("--csv needs a directory, got \"\"");
    return std::nullopt;
  }
  if (r.plot && !sim::plot_format_for(o.plot)) {
    print_error(fmt::format("--plot needs a file name ending in .png or .svg, got {}",
                            detail::quote_for_message(o.plot)));
    return std::nullopt;
  }
  if (r.csv) {
    std::error_code ec;
    std::filesystem::create_directories(o.csv_dir, ec);
    if (ec || !std::filesystem::is_directory(o.csv_dir, ec)) {
      print_error(fmt::format("cannot create the CSV directory {}: {}",
                              detail::quote_for_message(o.csv_dir),
                              ec ? ec.message() : "not a directory"));
      status = exit_failure;
      return std::nullopt;
    }
  }
  r.scale = scale;
  if (!scale_given && scale < 1.0) {
    report_log("lab", fmt::format("scale {} ({:g} req/s); --scale to change it",
                                  detail::format_double(scale), r.scenario.requests_per_second));
  }
  return r;
}

// --metrics-port: the fleet's metrics on a registry served on 127.0.0.1 during the run.
struct metrics_endpoint {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::optional<metrics::retry_metrics> fleet;
  std::unique_ptr<prometheus::Exposer> exposer;
};

// Serves the metrics when --metrics-port is given; false after printing why not.
bool serve_metrics(const lab_options& o, metrics_endpoint& m) {
  if (o.metrics_port_option == nullptr || o.metrics_port_option->count() == 0) return true;
  const std::string address = fmt::format("127.0.0.1:{}", o.metrics_port);
  try {
    m.fleet.emplace(*m.registry);
    m.exposer = std::make_unique<prometheus::Exposer>(address, 1);
    m.exposer->RegisterCollectable(m.registry);
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return false;
  } catch (const std::exception& e) {
    print_error(
        fmt::format("--metrics-port: cannot serve the metrics on {} (in use or not "
                    "permitted): {}",
                    address, printable_message(e.what())));
    return false;
  }
  const std::vector<int> ports = m.exposer->GetListeningPorts();
  report_log("lab", fmt::format("metrics on http://127.0.0.1:{}/metrics",
                                ports.empty() ? o.metrics_port : ports.front()));
  return true;
}

// Prints the report, then writes the CSV files and the plot; the exit status.
int write_results(const lab_options& o, const lab_run& r, const lab::lab_report& report) {
  if (!write_all(stdout, o.json ? lab::to_json(report) : lab::format_table(report))) {
    print_error("cannot write to standard output: " + errno_text(errno));
    return exit_failure;
  }
  std::fflush(stdout);
  if (r.csv) {
    // The lab's and the simulator's 1-s time series of each strategy, side by side.
    for (const lab::lab_comparison& c : report.strategies) {
      const std::filesystem::path dir(o.csv_dir);
      if (!write_text_file("lab", dir / csv_file_name(c.name, "-lab.csv"), sim::to_csv(c.lab)) ||
          !write_text_file("lab", dir / csv_file_name(c.name, "-sim.csv"), sim::to_csv(c.sim))) {
        return exit_failure;
      }
    }
  }
  if (r.plot && !write_plot(report, o.plot)) return exit_failure;
  if (const int signal = g_signal.load(); signal != 0) return 128 + signal;
  if (!report.valid()) {
    print_error(
        "the run is invalid: the lab's own sockets failed, its fleet store did not serve it, or a "
        "worker process was killed (or stopped alone) by a signal "
        "(see the report)");
    return k_exit_invalid;
  }
  return exit_success;
}

// The faults a --fleet-store run injects (--fleet-store-kill-at, -restart-at, -flush-at,
// --fleet-worker-kill-at): each needs its companion options and a time within the scenario.
// Prints the error and returns false otherwise.
bool fault_options_ok(const lab_fleet_store_options& fleet, const sim::scenario& scenario) {
  if (!fleet.kill_at.empty() && (fleet.store != "auto" || !parse_duration(fleet.kill_at) ||
                                 *parse_duration(fleet.kill_at) >= scenario.length)) {
    print_error(
        "--fleet-store-kill-at needs --fleet-store auto and a duration within the "
        "scenario, got " +
        detail::quote_for_message(fleet.kill_at));
    return false;
  }
  if (!fleet.restart_at.empty() &&
      (fleet.kill_at.empty() || !parse_duration(fleet.restart_at) ||
       *parse_duration(fleet.restart_at) >= scenario.length ||
       (parse_duration(fleet.kill_at) &&
        *parse_duration(fleet.restart_at) <= *parse_duration(fleet.kill_at)))) {
    print_error(
        "--fleet-store-restart-at needs --fleet-store-kill-at and a duration after it within the "
        "scenario, got " +
        detail::quote_for_message(fleet.restart_at));
    return false;
  }
  if (!fleet.flush_at.empty() && (fleet.store != "auto" || !parse_duration(fleet.flush_at) ||
                                  *parse_duration(fleet.flush_at) >= scenario.length)) {
    print_error(
        "--fleet-store-flush-at needs --fleet-store auto and a duration within the scenario, "
        "got " +
        detail::quote_for_message(fleet.flush_at));
    return false;
  }
  if (!fleet.worker_kill_at.empty() &&
      (fleet.processes < 2 || !parse_duration(fleet.worker_kill_at) ||
       *parse_duration(fleet.worker_kill_at) >= scenario.length)) {
    print_error(
        "--fleet-worker-kill-at needs --processes 2 or more and a duration within the scenario, "
        "got " +
        detail::quote_for_message(fleet.worker_kill_at));
    return false;
  }
  return true;
}

// --fleet-store: the fleet over --processes worker processes sharing a real Redis
// (lab_fleet_store.hpp); or, with the hidden --fleet-worker, one of those workers.
int run_fleet_store(const lab_options& o, const lab_run& r) {
  g_stop.store(false);
  g_signal.store(0);
  const stop_on_signals handler;
  if (!o.fleet.worker.empty()) {
    if (r.strategies.size() != 1) {
      print_error("--fleet-worker runs one --strategy");
      return exit_usage;
    }
    lab_fleet_store_options worker = o.fleet;
    worker.transport = transport_of(o);
    const int status = run_lab_fleet_worker(worker, r.scenario, r.strategies.front(), &g_stop);
    // Stopped by SIGINT/SIGTERM: its report (printed) holds only part of the run, and 128+S tells
    // the parent so (a worker stopped alone makes the run invalid; lab_fleet_store.cpp).
    if (const int signal = g_signal.load(); signal != 0 && status == exit_success) {
      return 128 + signal;
    }
    return status;
  }
  if (o.fleet.processes < 1 || o.fleet.processes > 64) {
    print_error("--processes must be in [1, 64], got " + std::to_string(o.fleet.processes));
    return exit_usage;
  }
  if (o.fleet.processes > r.scenario.clients) {
    print_error(
        fmt::format("--processes {} is above the scenario's {} clients (at --scale {}): "
                    "every process runs clients of its own",
                    o.fleet.processes, r.scenario.clients, detail::format_double(r.scale)));
    return exit_usage;
  }
  if (!fault_options_ok(o.fleet, r.scenario)) return exit_usage;
  if (o.fleet.store != "auto" && o.fleet.store.rfind("redis://", 0) != 0 &&
      o.fleet.store.rfind("redis+sentinel://", 0) != 0) {
    print_error(
        "--fleet-store must be redis://HOST[:PORT][/DB] (a Redis, or any node of a Redis "
        "Cluster), redis+sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB] or auto, got " +
        detail::quote_for_message(detail::redact_redis_url(o.fleet.store)));
    return exit_usage;
  }
  if (o.fleet.store != "auto") {
    try {
      (void)detail::parse_redis_url(o.fleet.store, "--fleet-store");  // names it, redacted
    } catch (const std::invalid_argument& e) {
      print_error(e.what());
      return exit_usage;
    }
  }
  for (const CLI::Option* option : {o.defence_option, o.metrics_port_option}) {
    if (typed(option)) {
      print_error(option->get_name() + " does not apply with --fleet-store");
      return exit_usage;
    }
  }
  lab_fleet_store_options f = o.fleet;
  f.transport = transport_of(o);
  f.worker_base = {
      "/proc/self/exe", "lab",      o.scenario, "--scale", detail::format_double(r.scale),
      "--transport",    o.transport};
  for (const std::string& p : o.policies) {
    f.worker_base.push_back("--policy");
    f.worker_base.push_back(p);
  }
  report_log("lab", fmt::format("{} process{} sharing the fleet store {}", f.processes,
                                f.processes == 1 ? "" : "es",
                                f.store == "auto" ? std::string("auto (redis-server)")
                                                  : detail::redact_redis_url(f.store)));
  outcome<lab::lab_report, std::string> report = failure{std::string()};
  try {
    report = run_lab_fleet_store(f, r.scenario, r.strategies, &g_stop);
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return exit_failure;
  }
  if (!report) {
    print_error(printable_message(report.error()));
    return exit_failure;
  }
  return write_results(o, r, *report);
}

// The soft RLIMIT_NOFILE raised to the hard limit: every attempt in flight holds two descriptors
// (the fleet's socket and the server's), and a default soft limit of 1,024 ran out at friday-night
// --scale 0.5. A run that still runs out is reported invalid (lab_comparison::valid).
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

int run(const lab_options& o) {
  if (o.scenario == k_payments_scenario) return run_payments(o);
  if (const std::string name = typed_payments_option(o.payments); !name.empty()) {
    print_error(name + " applies to lab payments only (lab payments [--charges N] ...)");
    return exit_usage;
  }
  int status = exit_usage;
  const auto r = prepare(o, status);
  if (!r) return status;
  raise_descriptor_limit();
  if (!o.fleet_options.empty() && o.fleet.worker.empty()) {
    const bool given = typed(o.fleet_options.front());
    if (given && o.fleet.store.empty()) {
      print_error("--fleet-store must be redis://HOST[:PORT][/DB] or auto, got \"\"");
      return exit_usage;
    }
    for (std::size_t i = 1; i < o.fleet_options.size() && !given; ++i) {
      if (typed(o.fleet_options[i])) {
        print_error(o.fleet_options[i]->get_name() + " applies with --fleet-store only");
        return exit_usage;
      }
    }
    // A duration flag given with an empty value is a mistake, never "not given" (an empty
    // --fleet-worker-kill-at would otherwise run without the fault it asks for).
    const std::pair<std::string_view, const std::string*> durations[] = {
        {"--fleet-store-kill-at", &o.fleet.kill_at},
        {"--fleet-store-restart-at", &o.fleet.restart_at},
        {"--fleet-store-flush-at", &o.fleet.flush_at},
        {"--fleet-worker-kill-at", &o.fleet.worker_kill_at}};
    for (const CLI::Option* option : o.fleet_options) {
      for (const auto& [name, value] : durations) {
        if (typed(option) && option->get_name() == name && value->empty()) {
          print_error(std::string(name) + " needs a duration within the scenario, got \"\"");
          return exit_usage;
        }
      }
    }
  }
  if (transport_of(o) == lab::lab_transport_kind::grpc && !lab::lab_has_grpc()) {
    print_error(
        "--transport grpc: this stormguard was built without gRPC (STORMGUARD_WITH_GRPC=OFF)");
    return exit_failure;
  }
  if (wants_fleet_store(o.fleet)) return run_fleet_store(o, *r);
  std::vector<defence_row> rows{{"", r->scenario.defences.enabled}};
  if (o.defence_option != nullptr && o.defence_option->count() > 0) {
    std::string error;
    auto given = parse_defence_option(o.defence, true, error);
    if (!given) {
      print_error(error);
      return exit_usage;
    }
    rows = *std::move(given);
  }
  metrics_endpoint m;
  if (!serve_metrics(o, m)) return exit_failure;

  g_stop.store(false);
  g_signal.store(0);
  outcome<lab::lab_report, std::string> report = failure{std::string()};
  {
    const stop_on_signals handler;
    progress_bar bar(detail::escape_control(r->scenario.name) + " lab");
    try {
      // One run per --defence row, each against its own server; rows after the first are named
      // "strategy @defence".
      lab::lab_report all{r->scenario, {}, false, transport_of(o)};
      for (const defence_row& row : rows) {
        lab::fleet_options run{bar.callback(), &g_stop, m.fleet ? &*m.fleet : nullptr};
        run.transport = transport_of(o);
        auto one = lab::run_lab(with_defences(r->scenario, row), r->strategies, run);
        if (!one) {
          report = failure{one.error()};
          break;
        }
        const std::string name = row.name.empty() ? sim::to_string(row.set) : row.name;
        for (lab::lab_comparison& c : (*one).strategies) {
          c.lab.defence = c.sim.defence = name;
          if (rows.size() > 1) c.name += " @" + name;
          all.strategies.push_back(std::move(c));
        }
        all.interrupted = all.interrupted || (*one).interrupted;
        report = all;
        if ((*one).interrupted) break;
      }
    } catch (const std::bad_alloc&) {
      print_error("out of memory");
      return exit_failure;
    }
    if (auto cb = bar.callback()) cb(1, 1);  // clears the bar
  }
  if (!report) {
    print_error(printable_message(report.error()));
    return exit_failure;
  }
  return write_results(o, *r, *report);
}

// --transport http|grpc.
void add_transport_option(CLI::App& sub, lab_options& options) {
  options.transport_option =
      add_typed_option(sub, "--transport", options.transport,
                       "How the clients reach the server: http (HTTP/1.1), or grpc (serve --grpc's "
                       "stormguard.lab.v1.Scenario/Call through stormguard::grpc; " +
                           doc_path("grpc.md") + ")",
                       "http|grpc")
          ->check(CLI::Validator(
              [](std::string& text) -> std::string {
                if (text == "http" || text == "grpc") return {};
                return "must be http or grpc, got " + detail::quote_for_message(text);
              },
              "http|grpc"))
          ->capture_default_str();
}

}  // namespace

command add_lab_command(CLI::App& parent) {
  auto options = std::make_shared<lab_options>();
  CLI::App* sub = parent.add_subcommand(
      "lab", "Run a scenario's client fleet on real sockets against its server (lab SCENARIO)");
  sub->description(
      "Starts the scenario's server (as `serve`) in-process on 127.0.0.1, then its client fleet\n"
      "(clients, Poisson arrivals, per-attempt timeout) through the async HTTP client, one\n"
      "strategy after another, each against a fresh server, in real time; prints each figure next\n"
      "to the simulator's for the same scenario and seed. Ctrl-C stops with a partial report.\n"
      "See " +
      doc_path("lab.md") + ".\n" +
      "`lab payments` (a reserved SCENARIO name) is another run: charges with idempotency keys\n"
      "through the retrying client to replicas of serve's POST /charges behind the idempotency\n"
      "guard, a fault that drops the answer after the commit, and an audit of the ledger for\n"
      "double charges. See " +
      doc_path("idempotency.md") + ".");
  sub->footer(k_exit_statuses);
  add_scenario_argument(*sub, options->scenario)
      ->description("A built-in scenario (" + sim::builtin_scenario_names() +
                    ") or a scenario file; or payments, the double-charge audit");
  options->strategy_option = sub->add_option(
      "--strategy,-s", options->strategies,
      "Strategy to run; repeat or separate with commas (default: the scenario file's own "
      "strategies, else none, naive, full, full+budget): " +
          sim::strategy_names() + ", or a name of the scenario's or a --policy policy");
  add_typed_option(*sub, "--policy", options->policies,
                   "Also run the policies of a policy file ([grpc:|envoy:]FILE[:NAME], "
                   "repeatable; " +
                       doc_path("policy.md") + ")",
                   "FILE[:NAME]");
  options->scale_option =
      add_typed_option(*sub, "--scale", options->scale,
                       "Multiply requests_per_second, clients, workers, queue_limit and the "
                       "overload threshold by X, in (0, 1] (default: down to 200 req/s)",
                       "X");
  sub->add_flag("--json", options->json, "Print one JSON object instead of the table");
  add_transport_option(*sub, *options);
  options->defence_option = add_typed_option(
      *sub, "--defence", options->defence,
      defence_option_help("Server-side defences", "all; a,b runs once per defence"), "LIST");
  options->csv_option = add_typed_option(
      *sub, "--csv", options->csv_dir,
      "Also write into DIR, created if missing, the 1-s time series of each strategy: NAME-lab.csv "
      "and NAME-sim.csv",
      "DIR");
  options->plot_option = add_typed_option(
      *sub, "--plot", options->plot,
      "Also draw the lab's and the simulator's time series with gnuplot into FILE (.png or .svg)",
      "FILE");
  options->metrics_port_option =
      add_typed_option(*sub, "--metrics-port", options->metrics_port,
                       "Serve the fleet's client-side metrics (Prometheus text format) on "
                       "http://127.0.0.1:N/metrics during the run; 0 lets the system choose "
                       "(" +
                           doc_path("metrics.md") + ")",
                       "N")
          ->transform(whole_number_in(0, 65535));
  options->fleet_options.push_back(add_typed_option(
      *sub, "--fleet-store", options->fleet.store,
      "Run the fleet in --processes OS processes whose fleet budgets share this Redis "
      "(redis://HOST[:PORT][/DB]: a Redis, or any node of a Redis Cluster; "
      "redis+sentinel://HOST[:PORT][,...]/MASTER: through Redis Sentinel), or auto: a "
      "redis-server started for the run on a loopback port (" +
          doc_path("lab.md") + ")",
      "URL|auto"));
  options->fleet_options.push_back(add_typed_option(
      *sub, "--processes", options->fleet.processes,
      "With --fleet-store: the client processes the fleet is spread over, 1 to 64 (default 1)",
      "P"));
  options->fleet_options.push_back(
      add_typed_option(*sub, "--fleet-store-kill-at", options->fleet.kill_at,
                       "With --fleet-store auto: kill the redis-server T into each run (the "
                       "simulator's column models the same outage)",
                       "T"));
  options->fleet_options.push_back(add_typed_option(
      *sub, "--fleet-store-restart-at", options->fleet.restart_at,
      "With --fleet-store-kill-at: start the redis-server again on the same port T into each "
      "run, empty (the budgets rejoin the fleet)",
      "T"));
  options->fleet_options.push_back(add_typed_option(
      *sub, "--fleet-store-flush-at", options->fleet.flush_at,
      "With --fleet-store auto: send the redis-server FLUSHALL T into each run (a store that "
      "answers but has forgotten the fleet: the budgets' learning mode; the simulator's store "
      "never forgets)",
      "T"));
  options->fleet_options.push_back(add_typed_option(
      *sub, "--fleet-worker-kill-at", options->fleet.worker_kill_at,
      "With --processes 2 or more: kill worker process 0 with SIGKILL T into each run (the run "
      "is then reported invalid, exit 3: its part of the fleet is missing)",
      "T"));
  // The workers of --fleet-store (this executable again); not for users.
  sub->add_option("--fleet-worker", options->fleet.worker)->group("");
  sub->add_option("--fleet-server", options->fleet.server_url)->group("");
  sub->add_option("--fleet-start", options->fleet.start_ns)->group("");
  sub->add_option("--fleet-key", options->fleet.key)->group("");
  add_lab_payments_options(*sub, options->payments);
  return {sub, [options] { return run(*options); }};
}

}  // namespace stormguard::cli
