// SPDX-License-Identifier: Apache-2.0
// `stormguard tune`'s report as text and as JSON (app/tune.hpp).
#include <fmt/format.h>

#include <string>
#include <variant>

#include "app/report.hpp"
#include "app/tune.hpp"
#include "app/tune_internal.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::sim {

namespace {

std::string times(std::optional<double> x) {
  return x ? fmt::format("{:.2f}x", *x) : std::string("n/a");
}
std::string percent(std::optional<double> x) {
  return x ? fmt::format("{:.2f} %", 100.0 * *x) : std::string("n/a");
}
std::string recovery(const tune_figures& f, bool incident) {
  if (!incident) return "-";
  if (f.recovery_s) return fmt::format("{:.1f} s", *f.recovery_s);
  return f.recovery_measurable ? "never" : "n/a";
}

// The budget in words: "fleet ratio 0.1 over 10s, fleet floor 7/s".
std::string budget_text(const config::policy& p, int clients) {
  if (const auto* f = std::get_if<fleet_budget_options>(&p.budget)) {
    return fmt::format("one budget for the fleet: ratio {} over {}, floor {}/s for all {} clients",
                       detail::format_double(f->ratio.ratio), format_duration(f->ratio.window),
                       f->ratio.min_retries_per_second, clients);
  }
  if (const auto* r = std::get_if<ratio_budget_options>(&p.budget)) {
    return fmt::format(
        "a budget per process: ratio {} over {}, floor {}/s each ({}/s for {} "
        "clients)",
        detail::format_double(r->ratio), format_duration(r->window), r->min_retries_per_second,
        r->min_retries_per_second * clients, clients);
  }
  return "no budget";
}

// One row per policy; `healthy`: the healthy day's columns (success after the warm-up, no
// incident figures).
std::string figures_table(const std::vector<tune_figures>& rows, bool incident,
                          bool healthy = false) {
  std::size_t width = 18;
  for (const tune_figures& f : rows) width = std::max(width, f.name.size());
  const std::string row = "  {:<" + std::to_string(width) + "} {:>8} {:>9} {:>9} {:>9}\n";
  std::string out =
      fmt::format(fmt::runtime(row), "policy", "ampl.", healthy ? "success" : "incident",
                  healthy ? "after 10s" : "success", healthy ? "p99 ms" : "recovery");
  for (const tune_figures& f : rows) {
    out += healthy ? fmt::format(fmt::runtime(row), f.name, times(f.amplification),
                                 percent(f.success), percent(f.steady_success),
                                 f.p99_latency_ms ? fmt::format("{:.1f}", *f.p99_latency_ms)
                                                  : std::string("n/a"))
                   : fmt::format(fmt::runtime(row), f.name, times(f.amplification),
                                 incident ? times(f.incident_amplification) : "-",
                                 percent(f.success), recovery(f, incident));
  }
  return out;
}

std::vector<tune_figures> fleet_rows(const tune_report& r) {
  std::vector<tune_figures> rows;
  for (const strategy_result& s : r.at_fleet.strategies) rows.push_back(tune_figures::of(s));
  return rows;
}

std::string goal_text(const tune_goal& g) {
  std::string out = fmt::format("incident amplification <= {:.2f}x", g.max_incident_amplification);
  if (g.min_success) out += fmt::format(", success >= {:.2f} %", 100.0 * *g.min_success);
  if (g.max_recovery_s) out += fmt::format(", recovery <= {:.1f} s", *g.max_recovery_s);
  out += fmt::format(", success on a healthy day >= {:.2f} %", 100.0 * g.min_baseline_success);
  return out;
}

std::string reasons_text(const tune_report& r) {
  std::string out;
  for (const tune_reason& reason : r.reasons) {
    out += fmt::format("  {:<20} {}\n  {:<20} {}\n", reason.field, reason.value, "", reason.reason);
  }
  if (r.other_scope) {
    const bool fleet = std::holds_alternative<fleet_budget_options>(r.policy.budget);
    out += fmt::format("  {:<20} {}\n  {:<20} the best {} budget tried, {}\n", "other scope",
                       budget_text(*r.other_scope, r.service.clients), "",
                       fleet ? "per-process" : "fleet",
                       r.other_scope_verdict.met ? "meets the goal too"
                                                 : "fails: " + r.other_scope_verdict.reason);
  }
  return out;
}

}  // namespace

std::string format_report(const tune_report& r) {
  const bool incident = r.storm.incident.has_value();
  std::string out = fmt::format("stormguard tune: {}; seed {}\n", describe(r.storm), r.storm.seed);
  out += fmt::format("goal: {}\n", goal_text(r.goal));
  out += fmt::format("tried {} polic{} ({} simulations)\n\n", r.candidates_tried,
                     r.candidates_tried == 1 ? "y" : "ies", r.runs);
  out += fmt::format("recommended policy \"{}\" (--out FILE writes it):\n", r.policy.name);
  out += reasons_text(r);
  out += fmt::format("\nat the fleet size ({} clients):\n", r.storm.clients);
  out += figures_table(fleet_rows(r), incident);
  out += fmt::format("\nat 10x the fleet ({} clients, the same {} req/s):\n",
                     r.fleet_10x.value_or(0), detail::format_double(r.storm.requests_per_second));
  out += figures_table(r.at_10x, incident);
  out += fmt::format(
      "\non a healthy day ({:.1f} % of attempts fail; the goal counts the requests after the "
      "first 10 s, as the budgets start empty):\n",
      100.0 * r.service.error_rate);
  out += figures_table(r.baseline, false, true);
  if (!r.failure_rates.empty()) {
    out += "\nthe tuned policy when a fraction of attempts fail during the incident's 10 s:\n";
    out +=
        fmt::format("  {:>12} {:>8} {:>9} {:>9}\n", "failure rate", "ampl.", "incident", "success");
    for (const failure_rate_point& p : r.failure_rates) {
      out +=
          fmt::format("  {:>10.0f} % {:>8} {:>9} {:>9}\n", 100.0 * p.failure_rate,
                      times(p.amplification), times(p.incident_amplification), percent(p.success));
    }
    out += std::holds_alternative<no_budget>(r.policy.budget)
               ? std::string("  no budget to bind: the policy makes no retry\n")
           : r.binds_at ? fmt::format(
                              "  the budget starts to deny retries at a failure rate of "
                              "{:.0f} %\n",
                              100.0 * *r.binds_at)
                        : std::string("  the budget never denies a retry (up to 100 %)\n");
  }
  out += fmt::format("\nat 10x the fleet, the same goal: {}",
                     r.verdict_10x.met ? "met\n" : "missed: " + r.verdict_10x.reason + "\n");
  out += r.verdict.met ? fmt::format("verdict: \"{}\" meets the goal\n", r.policy.name)
                       : fmt::format(
                             "\nverdict: no policy tried meets the goal; the closest, "
                             "\"{}\": {}\n",
                             r.policy.name, r.verdict.reason);
  return out;
}

namespace {

void write_figures(engine::json_writer& w, const tune_figures& f) {
  w.begin_object()
      .field("name", f.name)
      .fixed("amplification", f.amplification, 4)
      .fixed("incident_amplification", f.incident_amplification, 4)
      .fixed("success_ratio", f.success, 4)
      .fixed("steady_success_ratio", f.steady_success, 4)
      .fixed("recovery_s", f.recovery_s, 1)
      .fixed("p99_latency_ms", f.p99_latency_ms, 1)
      .field("budget_exhausted", f.budget_exhausted)
      .end_object();
}

void write_rows(engine::json_writer& w, std::string_view key,
                const std::vector<tune_figures>& rows) {
  w.key(key).begin_array();
  for (const tune_figures& f : rows) write_figures(w, f);
  w.end_array();
}

}  // namespace

std::string to_json(const tune_report& r) {
  engine::json_writer w;
  w.begin_report(r.storm.name, r.storm.seed);
  w.key("service")
      .begin_object()
      .number("requests_per_second", r.service.requests_per_second)
      .field("clients", r.service.clients)
      .field("workers", r.service.workers)
      .field("p50", format_duration(r.service.p50))
      .field("p99", format_duration(r.service.p99))
      .field("deadline", format_duration(r.service.deadline))
      .number("error_rate", r.service.error_rate)
      .end_object();
  w.key("goal")
      .begin_object()
      .fixed("max_incident_amplification", r.goal.max_incident_amplification, 4)
      .fixed("min_success", r.goal.min_success, 4)
      .fixed("max_recovery_s", r.goal.max_recovery_s, 1)
      .fixed("min_baseline_success", r.goal.min_baseline_success, 4)
      .end_object();
  w.key("verdict").begin_object().field("met", r.verdict.met).field("reason", r.verdict.reason);
  w.end_object();
  w.key("verdict_10x").begin_object().field("met", r.verdict_10x.met);
  w.field("reason", r.verdict_10x.reason).end_object();
  w.key("policy").raw(config::to_json(r.policy));
  w.key("reasons").begin_array();
  for (const tune_reason& reason : r.reasons) {
    w.begin_object()
        .field("field", reason.field)
        .field("value", reason.value)
        .field("reason", reason.reason)
        .end_object();
  }
  w.end_array();
  if (r.other_scope) {
    w.key("other_scope").begin_object().key("policy").raw(config::to_json(*r.other_scope));
    w.field("met", r.other_scope_verdict.met).field("reason", r.other_scope_verdict.reason);
    w.end_object();
  } else {
    w.key("other_scope").null();
  }
  write_rows(w, "at_fleet", fleet_rows(r));
  w.field("clients_10x", r.fleet_10x);
  write_rows(w, "at_10x", r.at_10x);
  write_rows(w, "baseline", r.baseline);
  w.key("failure_rates").begin_array();
  for (const failure_rate_point& p : r.failure_rates) {
    w.begin_object()
        .number("failure_rate", p.failure_rate)
        .fixed("amplification", p.amplification, 4)
        .fixed("incident_amplification", p.incident_amplification, 4)
        .fixed("success_ratio", p.success, 4)
        .end_object();
  }
  w.end_array();
  w.key("binds_at");
  if (r.binds_at) {
    w.number(*r.binds_at);
  } else {
    w.null();
  }
  w.key("tried").begin_array();
  for (const tune_candidate& c : r.tried) {
    w.begin_object().field("summary", c.summary).key("storm");
    write_figures(w, c.storm);
    w.key("healthy");
    write_figures(w, c.healthy);
    w.field("met", c.verdict.met).field("reason", c.verdict.reason).end_object();
  }
  w.end_array();
  w.field("candidates_tried", r.candidates_tried).field("runs", r.runs);
  return std::move(w.end_object()).line();
}

}  // namespace stormguard::sim
