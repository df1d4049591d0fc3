// SPDX-License-Identifier: Apache-2.0
// `stormguard simulate`: the fleet options of time-series scenarios and the clients sweep
// (simulate_fleet.hpp).
#include "simulate_fleet.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>
#include <variant>

#include "app/plot.hpp"
#include "app/sweep.hpp"
#include "command.hpp"
#include "gnuplot.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "progress.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/sim/parallel.hpp"
#include "stormguard/sim/simulator.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

using namespace std::chrono_literals;

constexpr std::int64_t k_max_clients = 1'000'000;  // the scenario format's limit
constexpr std::size_t k_max_sizes = 1000;

void print_error(const std::string& message) { report_error("simulate", message); }
std::string quote_value(std::string_view text) { return detail::quote_for_message(text); }
bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

std::optional<std::int64_t> parse_clients(std::string_view text) {
  const auto n = parse_whole_number(text);
  if (!n || *n < 1 || *n > static_cast<std::uint64_t>(k_max_clients)) return std::nullopt;
  return static_cast<std::int64_t>(*n);
}

std::optional<duration> parse_time(const std::string& text, duration lo, duration hi) {
  const auto d = text == "0" ? std::optional<duration>(duration::zero()) : parse_duration(text);
  if (!d || *d < lo || *d > hi) return std::nullopt;
  return d;
}

// Calls f(fleet_budget_options&) for each strategy whose budget is a fleet budget.
template <class F>
void for_each_fleet(std::vector<sim::strategy>& strategies, F&& f) {
  for (sim::strategy& s : strategies) {
    if (auto* o = std::get_if<fleet_budget_options>(&s.budget)) f(s, *o);
  }
}

// The fleet sizes of "clients=20,200" or "clients=LO:HI:STEP"; nullopt after printing why not.
std::optional<std::vector<int>> parse_sizes(const std::string& spec) {
  const std::string list = spec.substr(spec.find('=') + 1);
  const auto bad = [&](std::string_view why) {
    print_error(fmt::format(
        "--sweep clients=LIST|LO:HI:STEP needs fleet sizes in [1, 1000000] ({}), got {}", why,
        quote_value(spec)));
    return std::nullopt;
  };
  std::vector<int> sizes;
  if (list.find(':') != std::string::npos) {
    const auto c1 = list.find(':');
    const auto c2 = list.find(':', c1 + 1);
    if (c2 == std::string::npos || list.find(':', c2 + 1) != std::string::npos) {
      return bad("LO:HI:STEP has three parts");
    }
    const auto lo = parse_clients(list.substr(0, c1));
    const auto hi = parse_clients(list.substr(c1 + 1, c2 - c1 - 1));
    const auto step = parse_clients(list.substr(c2 + 1));
    if (!lo || !hi || !step || *hi < *lo) return bad("whole numbers, LO <= HI, STEP >= 1");
    if ((*hi - *lo) / *step + 1 > static_cast<std::int64_t>(k_max_sizes)) {
      return bad("at most 1000 sizes");
    }
    for (std::int64_t n = *lo; n <= *hi; n += *step) sizes.push_back(static_cast<int>(n));
    return sizes;
  }
  std::size_t from = 0;
  while (true) {
    const std::size_t comma = list.find(',', from);
    const auto n = parse_clients(list.substr(from, comma - from));
    if (!n) return bad("whole numbers separated by commas");
    if (std::find(sizes.begin(), sizes.end(), *n) != sizes.end()) {
      return bad("each size once");
    }
    sizes.push_back(static_cast<int>(*n));
    if (sizes.size() > k_max_sizes) return bad("at most 1000 sizes");
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return sizes;
}

}  // namespace

void add_fleet_flags(CLI::App& sub, fleet_flags& f) {
  f.clients_option = add_typed_option(
      sub, "--clients", f.clients,
      "Time-series scenarios: spread the same total load over N clients (each rate/N, each with "
      "its own budget), 1 to 1000000",
      "N");
  f.scale_option = add_typed_option(
      sub, "--scale", f.scale,
      "Time-series scenarios: scale load, clients, workers and queue by X in (0, 1] as "
      "`serve`/`lab --scale` do (a fleet budget's floor too), to reproduce a lab run",
      "X");
  f.store_rtt_option = add_typed_option(
      sub, "--store-rtt", f.store_rtt,
      "Fleet budgets: the store's round trip in the model (default 1ms; 0 to 10s)", "DURATION");
  f.store_outage_option = add_typed_option(
      sub, "--store-outage", f.store_outage,
      "Fleet budgets: the store does not answer from START to END of the scenario (e.g. 12s:18s)",
      "START:END");
  f.store_capacity_option = add_typed_option(
      sub, "--store-capacity", f.store_capacity,
      "Fleet budgets: the syncs per second the store serves in the model; beyond, syncs queue "
      "(default 29000, one Redis; 1 to 1000000000, or unlimited)",
      "N|unlimited");
  f.fleet_sync_option = add_typed_option(
      sub, "--fleet-sync", f.fleet_sync,
      "Fleet budgets: their sync_interval (default: the policy's; 10ms to 10s)", "DURATION");
  f.fleet_shards_option = add_typed_option(
      sub, "--fleet-shards", f.fleet_shards,
      "Fleet budgets: keep each in K shards, each with its own store of --store-capacity "
      "(default: the policy's, 1; 1 to 1024, or auto: enough that no store is more than half "
      "busy with every client syncing each sync_interval)",
      "K|auto");
}

// The flags of the fleet's store (they change only fleet budgets), each with its name.
static std::array<std::pair<CLI::Option*, const char*>, 5> store_flags(const fleet_flags& f) {
  return {std::pair{f.store_rtt_option, "--store-rtt"},
          std::pair{f.store_outage_option, "--store-outage"},
          std::pair{f.store_capacity_option, "--store-capacity"},
          std::pair{f.fleet_sync_option, "--fleet-sync"},
          std::pair{f.fleet_shards_option, "--fleet-shards"}};
}

bool fleet_flags_apply(const fleet_flags& f, const sim::model_info& model) {
  if (model.kind == sim::model_kind::time_series) return true;
  std::vector<std::pair<CLI::Option*, const char*>> flags = {
      std::pair{f.clients_option, "--clients"}, std::pair{f.scale_option, "--scale"}};
  for (const auto& flag : store_flags(f)) flags.push_back(flag);
  for (const auto& [option, name] : flags) {
    if (given(option)) {
      print_error(fmt::format("{} applies only to time-series scenarios (not to {}){}", name,
                              model.name,
                              model.kind == sim::model_kind::brooker_occ && name[2] == 'c'
                                  ? "; brooker-occ sweeps its clients with --sweep clients="
                                  : ""));
      return false;
    }
  }
  return true;
}

// --fleet-shards K|auto on every fleet budget (after --clients and --store-capacity, which auto
// reads); false after printing why not.
static bool apply_fleet_shards(const fleet_flags& f, const sim::scenario& s,
                               std::vector<sim::strategy>& strategies);

// The store's flags change only strategies with a fleet budget: with none selected they would
// change nothing, silently. False after printing which flag.
static bool store_flags_have_a_fleet(const fleet_flags& f, std::vector<sim::strategy>& strategies) {
  std::size_t fleets = 0;
  for_each_fleet(strategies, [&](sim::strategy&, fleet_budget_options&) { ++fleets; });
  if (fleets > 0) return true;
  for (const auto& [option, name] : store_flags(f)) {
    if (given(option)) {
      print_error(fmt::format(
          "{} applies to strategies with a fleet budget, and none of the {} selected has one: "
          "add one with -s (full+fleet, hedged+fleet, or a policy file whose budget has a "
          "\"fleet\" section)",
          name, strategies.size()));
      return false;
    }
  }
  return true;
}

bool apply_fleet_flags(const fleet_flags& f, sim::scenario& s,
                       std::vector<sim::strategy>& strategies) {
  if (!store_flags_have_a_fleet(f, strategies)) return false;
  if (given(f.clients_option)) {
    const auto n = parse_clients(f.clients);
    if (!n) {
      print_error(fmt::format("--clients must be an integer in [1, 1000000], got {}",
                              quote_value(f.clients)));
      return false;
    }
    s.clients = static_cast<int>(*n);
  }
  if (given(f.scale_option)) {
    const auto x = parse_decimal_number(f.scale);
    if (!x || !(*x > 0.0 && *x <= 1.0)) {
      print_error(fmt::format("--scale must be a number in (0, 1], got {}", quote_value(f.scale)));
      return false;
    }
    auto scaled = sim::scale_scenario(s, *x);
    if (!scaled) {
      print_error("--scale " + quote_value(f.scale) + ": " + scaled.error().message);
      return false;
    }
    s = *std::move(scaled);
    // The fleet is X times smaller: so is the floor of a budget kept for the whole fleet.
    for_each_fleet(strategies, [&](sim::strategy&, fleet_budget_options& o) {
      o.floor_scale = std::max(1e-9, o.floor_scale * *x);
    });
  }
  if (given(f.store_rtt_option)) {
    const auto rtt = parse_time(f.store_rtt, 0ms, 10s);
    if (!rtt) {
      print_error(fmt::format("--store-rtt must be a duration in [0, 10s] such as 1ms, got {}",
                              quote_value(f.store_rtt)));
      return false;
    }
    for (sim::strategy& strat : strategies) strat.fleet_store.round_trip = *rtt;
  }
  if (given(f.store_outage_option)) {
    const auto colon = f.store_outage.find(':');
    std::optional<duration> start;
    std::optional<duration> end;
    if (colon != std::string::npos) {
      start = parse_time(f.store_outage.substr(0, colon), 0ms, 24h);
      end = parse_time(f.store_outage.substr(colon + 1), 0ms, 24h);
    }
    if (!start || !end || *end <= *start) {
      print_error(
          fmt::format("--store-outage must be START:END with durations START < END such "
                      "as 12s:18s, got {}",
                      quote_value(f.store_outage)));
      return false;
    }
    for (sim::strategy& strat : strategies) {
      strat.fleet_store.outage = sim::fleet_store_outage{*start, *end};
    }
  }
  if (given(f.store_capacity_option)) {
    double capacity = std::numeric_limits<double>::infinity();
    if (f.store_capacity != "unlimited") {
      const auto x = parse_decimal_number(f.store_capacity);
      if (!x || !(*x >= 1.0 && *x <= 1e9)) {
        print_error(fmt::format(
            "--store-capacity must be a number of syncs per second in [1, 1000000000] or "
            "unlimited, got {}",
            quote_value(f.store_capacity)));
        return false;
      }
      capacity = *x;
    }
    for (sim::strategy& strat : strategies) strat.fleet_store.capacity = capacity;
  }
  if (given(f.fleet_sync_option)) {
    const auto every = parse_time(f.fleet_sync, 10ms, 10s);
    if (!every) {
      print_error(fmt::format("--fleet-sync must be a duration in [10ms, 10s], got {}",
                              quote_value(f.fleet_sync)));
      return false;
    }
    for_each_fleet(strategies, [&](sim::strategy&, fleet_budget_options& o) {
      o.sync_interval = *every;
      o.max_sync_interval = std::max(o.max_sync_interval, *every);
    });
  }
  return apply_fleet_shards(f, s, strategies);
}

static bool apply_fleet_shards(const fleet_flags& f, const sim::scenario& s,
                               std::vector<sim::strategy>& strategies) {
  if (given(f.fleet_shards_option)) {
    const bool automatic = f.fleet_shards == "auto";
    std::int64_t k = 0;
    if (!automatic) {
      const auto n = parse_clients(f.fleet_shards);  // an integer in [1, 1000000]
      if (!n || *n > fleet_budget::k_max_shards) {
        print_error(fmt::format("--fleet-shards must be an integer in [1, 1024] or auto, got {}",
                                quote_value(f.fleet_shards)));
        return false;
      }
      k = *n;
    }
    bool ok = true;
    for_each_fleet(strategies, [&](sim::strategy& strat, fleet_budget_options& o) {
      if (!automatic) {
        o.shards = k;
        return;
      }
      // auto: the scenario's clients, each syncing every sync_interval, at most half of one
      // store's capacity each (an unlimited store needs one).
      const double capacity = strat.fleet_store.capacity;
      const std::int64_t needed =
          std::isinf(capacity)
              ? 1
              : fleet_budget::shards_for(s.clients, o.sync_interval, capacity, 0.5);
      if (needed > fleet_budget::k_max_shards) {
        if (ok) {
          print_error(fmt::format(
              "--fleet-shards auto: {} needs {} shards for {} clients at --store-capacity {}, "
              "more than 1024: raise --fleet-sync or the capacity, or give a number",
              strat.name, needed, s.clients, detail::format_double(capacity)));
        }
        ok = false;
        return;
      }
      o.shards = needed;
      report_log("simulate", fmt::format("--fleet-shards auto: {} kept in {} shard{}", strat.name,
                                         needed, needed == 1 ? "" : "s"));
    });
    if (!ok) return false;
  }
  return true;
}

bool is_clients_sweep(std::string_view sweep) { return sweep.substr(0, 8) == "clients="; }

int run_clients_sweep(const std::string& spec, const sim::scenario& scenario,
                      const std::vector<sim::strategy>& strategies, unsigned threads,
                      const clients_sweep_output& output) {
  const auto sizes = parse_sizes(spec);
  if (!sizes) return exit_usage;
  if (auto problem = sim::check_work(scenario, strategies)) {
    print_error(problem->message);
    return exit_usage;
  }
  progress_bar bar(detail::escape_control(scenario.name) + " clients sweep");
  sim::clients_sweep_report report;
  try {
    report = sim::sweep_clients(scenario, strategies, *sizes, threads, bar.callback());
  } catch (const std::bad_alloc&) {
    print_error("out of memory during the clients sweep");
    return exit_failure;
  }
  if (!output.csv_dir.empty() &&
      !write_text_file("simulate", output.csv_dir / csv_file_name(scenario.name, "-clients.csv"),
                       sim::to_csv(report))) {
    return exit_failure;
  }
  if (!write_all(stdout, output.json ? sim::to_json(report) : sim::format_table(report))) {
    print_error(fmt::format("cannot write to standard output: {}", errno_text(errno)));
    return exit_failure;
  }
  std::fflush(stdout);
  if (!output.plot.empty()) {
    const auto format = sim::plot_format_for(output.plot);
    if (auto error = run_gnuplot(sim::gnuplot_script(report, *format, output.plot))) {
      print_error(fmt::format("cannot draw the plot {}: {}", quote_value(output.plot), *error));
      return exit_failure;
    }
    report_log("simulate", "wrote the plot " + output.plot);
  }
  return exit_success;
}

}  // namespace stormguard::cli
