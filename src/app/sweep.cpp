// SPDX-License-Identifier: Apache-2.0
#include "app/sweep.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "app/report.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/sim/parallel.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::sim {

namespace {

constexpr std::size_t k_max_loads = 10'000;

std::string number(double x) { return detail::format_double(x); }

std::string cell(std::optional<double> value, int decimals) {
  if (!value) return "";
  return fmt::format("{:.{}f}", *value, decimals);
}

}  // namespace

std::optional<std::string> validate(const load_range& range) {
  if (!std::isfinite(range.from) || range.from <= 0.0) {
    return "load sweep start must be a number > 0, got " + number(range.from);
  }
  if (!std::isfinite(range.to) || range.to < range.from) {
    return "load sweep end must be a number >= the start (" + number(range.from) + "), got " +
           number(range.to);
  }
  if (!std::isfinite(range.step) || range.step <= 0.0) {
    return "load sweep step must be a number > 0, got " + number(range.step);
  }
  const double count = std::floor((range.to - range.from) / range.step * (1 + 1e-9)) + 1;
  if (count > static_cast<double>(k_max_loads)) {
    return fmt::format("load sweep has {} loads; at most {} are allowed", number(count),
                       k_max_loads);
  }
  return std::nullopt;
}

std::vector<double> loads_of(const load_range& range) {
  std::vector<double> loads;
  const auto count =
      static_cast<std::size_t>(std::floor((range.to - range.from) / range.step * (1 + 1e-9)) + 1);
  // from + k · step rather than repeated additions: no accumulated rounding. Then 12 significant
  // digits: 0.1 + 2 · 0.1 is 0.30000000000000004 in binary, and the load printed must be the 0.3
  // the user asked for.
  for (std::size_t k = 0; k < count; ++k) {
    const double load = range.from + static_cast<double>(k) * range.step;
    loads.push_back(std::stod(fmt::format("{:.12g}", load)));
  }
  return loads;
}

std::optional<std::string> check_sweep(const scenario& s, std::span<const strategy> strategies,
                                       const load_range& range) {
  if (auto problem = validate(range)) return problem;
  // The sweep sets requests_per_second: a load that makes the scenario too large is the load
  // range's fault, not the file's field, and the message says so. The largest load is the last.
  scenario at = s;
  at.requests_per_second = loads_of(range).back();
  const std::string load = number(at.requests_per_second);
  if (auto problem = sim::validate(at)) {
    std::string_view what = problem->message;  // without its "requests_per_second: "
    if (what.starts_with(problem->field + ": ")) what.remove_prefix(problem->field.size() + 2);
    return "the load range reaches " + load +
           " req/s, too much for this scenario: " + std::string(what) +
           "; lower the end of the load range";
  }
  for (const strategy& strat : strategies) {
    const double estimate = estimated_attempts(at, strat);
    if (estimate <= k_max_estimated_attempts) continue;
    return fmt::format(
        "the load range reaches {} req/s, where the run of {} would make up to {} attempts ({} "
        "req/s x {} x (1 + its retries)); at most {} are allowed: lower the end of the load "
        "range",
        load, detail::quote_for_message(strat.name),
        detail::format_grouped(static_cast<std::int64_t>(std::round(estimate))), load,
        format_duration(s.length),
        detail::format_grouped(static_cast<std::int64_t>(k_max_estimated_attempts)));
  }
  if (auto problem = check_work(at, strategies)) return problem->message;  // max_retries
  return std::nullopt;
}

load_sweep_report sweep_load(const scenario& s, std::span<const strategy> strategies,
                             const load_range& range, unsigned threads,
                             const progress_callback& progress) {
  if (auto problem = validate(range)) {
    throw std::invalid_argument("stormguard::sim::sweep_load: " + *problem);
  }
  if (!s.incident || s.incident->end >= s.length) {
    throw std::invalid_argument(
        "stormguard::sim::sweep_load: the scenario " + detail::quote_for_message(s.name) +
        " has no incident that ends within its duration, so recovery is undefined");
  }
  load_sweep_report report;
  report.scenario = s;
  report.range = range;
  for (const auto& strat : strategies) report.strategies.push_back(strat.name);
  const std::vector<double> loads = loads_of(range);
  if (auto problem = check_sweep(s, strategies, range)) {
    throw std::invalid_argument("stormguard::sim::sweep_load: " + *problem);
  }
  const std::size_t k = strategies.size();
  report.points.resize(loads.size() * k);
  parallel_for(
      report.points.size(), threads,
      [&](std::size_t i) {
        scenario at = s;
        at.requests_per_second = loads[i / k];
        const strategy_result r = simulate(at, strategies[i % k]);
        report.points[i] = load_point{at.requests_per_second,
                                      r.name,
                                      r.recovery_s,
                                      r.success_ratio,
                                      r.incident_amplification,
                                      r.after_incident_attempt_rate.value_or(0.0)};
      },
      progress);

  for (std::size_t a = 0; a < k; ++a) {
    stability_limit limit{strategies[a].name, std::nullopt, std::nullopt};
    for (std::size_t l = 0; l < loads.size(); ++l) {
      const load_point& p = report.points[l * k + a];
      if (!p.recovered()) {
        limit.lowest_unstable = p.load;
        break;
      }
      limit.highest_stable = p.load;
    }
    report.limits.push_back(limit);
  }
  return report;
}

std::string to_json(const load_sweep_report& report) {
  engine::json_writer w;
  w.begin_report(report.scenario.name, report.scenario.seed).key("sweep").begin_array();
  for (const load_point& p : report.points) {
    w.begin_object().number("load", p.load).field("strategy", p.strategy);
    w.field("recovered", p.recovered()).fixed("recovery_s", p.recovery_s, 1);
    w.fixed("success_ratio", p.success_ratio, 4);
    w.fixed("incident_amplification", p.incident_amplification, 4);
    w.fixed("after_attempt_rate", p.after_attempt_rate, 1).end_object();
  }
  w.end_array().key("limits").begin_array();
  for (const stability_limit& l : report.limits) {
    w.begin_object().field("strategy", l.strategy).key("highest_stable_load");
    l.highest_stable ? w.number(*l.highest_stable) : w.null();
    w.key("lowest_unstable_load");
    l.lowest_unstable ? w.number(*l.lowest_unstable) : w.null();
    w.end_object();
  }
  return std::move(w.end_array().end_object()).line();
}

std::string to_csv(const load_sweep_report& report) {
  std::string out =
      "load,strategy,recovered,recovery_s,success_ratio,incident_amplification,"
      "after_attempt_rate\n";
  for (const load_point& p : report.points) {
    out += fmt::format("{},{},{},{},{},{},{:.1f}\n", number(p.load), p.strategy,
                       p.recovered() ? 1 : 0, cell(p.recovery_s, 1), cell(p.success_ratio, 4),
                       cell(p.incident_amplification, 4), p.after_attempt_rate);
  }
  return out;
}

std::string format_table(const load_sweep_report& report) {
  std::string out = describe(report.scenario);
  out += fmt::format(
      "; seed {}\nload sweep: requests_per_second = {} to {} step {}; each cell is the recovery "
      "time after the incident, or never\n\n",
      report.scenario.seed, number(report.range.from), number(report.range.to),
      number(report.range.step));
  const std::size_t k = report.strategies.size();
  if (k == 0) return out;
  out += fmt::format("{:>8}", "req/s");
  for (const auto& name : report.strategies) {
    out += fmt::format(" {:>13}", detail::escape_control(name));
  }
  out += '\n';
  for (std::size_t row = 0; row * k < report.points.size(); ++row) {
    out += fmt::format("{:>8}", number(report.points[row * k].load));
    for (std::size_t a = 0; a < k; ++a) {
      const load_point& p = report.points[row * k + a];
      out += fmt::format(
          " {:>13}", p.recovery_s ? fmt::format("{:.0f} s", *p.recovery_s) : std::string("never"));
    }
    out += '\n';
  }
  out += '\n';
  for (const stability_limit& l : report.limits) {
    if (!l.highest_stable) {
      out += fmt::format("{}: did not recover even at {} req/s.\n", l.strategy,
                         number(report.range.from));
    } else if (!l.lowest_unstable) {
      out += fmt::format("{}: recovered at every load up to {} req/s.\n", l.strategy,
                         number(*l.highest_stable));
    } else {
      out += fmt::format("{}: recovers up to {} req/s; no longer recovers from {} req/s.\n",
                         l.strategy, number(*l.highest_stable), number(*l.lowest_unstable));
    }
  }
  // "X+budget" against "X": how much the addition widens the stable region.
  for (const stability_limit& with : report.limits) {
    const auto plus = with.strategy.find('+');
    if (plus == std::string::npos) continue;
    const std::string base = with.strategy.substr(0, plus);
    for (const stability_limit& without : report.limits) {
      if (without.strategy != base) continue;
      const double a = with.highest_stable.value_or(0.0);
      const double b = without.highest_stable.value_or(0.0);
      if (!with.lowest_unstable && !without.lowest_unstable) continue;
      const std::string bound = with.lowest_unstable ? "" : " (at least: it never failed)";
      out += fmt::format("{} widens the stable region of {} from {} to {} req/s{}: {} req/s{}.\n",
                         with.strategy, base, number(b), number(a), bound,
                         a >= b ? "+" + number(a - b) : "-" + number(b - a),
                         b > 0 ? fmt::format(" ({:.2f}x)", a / b) : std::string());
    }
  }
  return out;
}

clients_sweep_report sweep_clients(const scenario& s, std::span<const strategy> strategies,
                                   const std::vector<int>& sizes, unsigned threads,
                                   const progress_callback& progress) {
  clients_sweep_report report{s, sizes, {}, {}};
  for (const strategy& st : strategies) report.strategies.push_back(st.name);
  const std::size_t k = strategies.size();
  report.points.resize(sizes.size() * k);
  parallel_for(
      report.points.size(), parallel_runs(s, threads, report.points.size()),
      [&](std::size_t i) {
        scenario at = s;
        at.clients = sizes[i / k];
        const strategy& strat = strategies[i % k];
        const strategy_result r = simulate(at, strat);
        std::optional<double> store_load;
        if (r.store_syncs > 0 && std::isfinite(strat.fleet_store.capacity)) {
          store_load = static_cast<double>(r.store_busiest_second) / strat.fleet_store.capacity;
        }
        report.points[i] = clients_point{
            at.clients,      r.name,       r.amplification,       r.incident_amplification,
            r.success_ratio, r.recovery_s, r.recovery_measurable, store_load};
      },
      progress);
  return report;
}

std::string to_json(const clients_sweep_report& report) {
  engine::json_writer w;
  w.begin_report(report.scenario.name, report.scenario.seed).key("sweep").begin_array();
  for (const clients_point& p : report.points) {
    w.begin_object().field("clients", static_cast<std::int64_t>(p.clients));
    w.field("strategy", p.strategy).fixed("amplification", p.amplification, 4);
    w.fixed("incident_amplification", p.incident_amplification, 4);
    w.fixed("success_ratio", p.success_ratio, 4).fixed("recovery_s", p.recovery_s, 1);
    w.fixed("store_load", p.store_load, 4);
    w.end_object();
  }
  return std::move(w.end_array().end_object()).line();
}

std::string to_csv(const clients_sweep_report& report) {
  std::string out =
      "clients,strategy,amplification,incident_amplification,success_ratio,recovery_s,"
      "store_load\n";
  for (const clients_point& p : report.points) {
    out += fmt::format("{},{},{},{},{},{},{}\n", p.clients, p.strategy, cell(p.amplification, 4),
                       cell(p.incident_amplification, 4), cell(p.success_ratio, 4),
                       cell(p.recovery_s, 1), cell(p.store_load, 4));
  }
  return out;
}

std::string format_table(const clients_sweep_report& report) {
  const scenario& s = report.scenario;
  std::string out = fmt::format(
      "{}: clients sweep, seed {} ({} logical req/s shared by the fleet; each client rate/N)\n\n",
      detail::escape_control(s.name), s.seed,
      detail::format_grouped(static_cast<std::int64_t>(std::llround(s.requests_per_second))));
  out += fmt::format("{:<16} {:>9} {:>13} {:>9} {:>8} {:>9} {:>6}\n", "strategy", "clients",
                     "amplification", "incident", "success", "recovery", "store");
  const auto times = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.2f}x", *v) : std::string("-");
  };
  // Grouped by strategy, sizes ascending as given.
  const std::size_t strategies = report.strategies.size();
  for (std::size_t a = 0; a < strategies; ++a) {
    for (std::size_t k = 0; k < report.sizes.size(); ++k) {
      const clients_point& p = report.points[k * strategies + a];
      const std::string recovery = !s.incident              ? "-"
                                   : !p.recovery_measurable ? "n/a"
                                   : p.recovery_s           ? fmt::format("{:.0f} s", *p.recovery_s)
                                                            : "never";
      out += fmt::format("{:<16} {:>9} {:>13} {:>9} {:>8} {:>9} {:>6}\n", p.strategy,
                         detail::format_grouped(p.clients), times(p.amplification),
                         s.incident ? times(p.incident_amplification) : "-",
                         p.success_ratio ? fmt::format("{:.1f} %", *p.success_ratio * 100) : "-",
                         recovery, p.store_load ? fmt::format("{:.2f}", *p.store_load) : "-");
    }
  }
  out +=
      "\namplification = attempts / logical requests; incident = the same for requests that "
      "started during the incident; recovery = incident end to 5 s of >= 95 % success; store = "
      "a fleet budget's store, its busiest second / its capacity (1.00: saturated)\n";
  return out;
}

}  // namespace stormguard::sim
