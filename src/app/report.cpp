// SPDX-License-Identifier: Apache-2.0
#include "app/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "stormguard/detail/format.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::sim {

namespace {

// 120000 -> "120,000".
std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// 2000 -> "2,000"; 2.5 -> "2.5".
std::string rate_text(double rate) {
  if (rate == std::floor(rate) && rate < 1e15) return grouped(static_cast<std::int64_t>(rate));
  return fmt::format("{:g}", rate);
}

double seconds(duration d) { return std::chrono::duration<double>(d).count(); }

// Attempts per second the server can complete at service time `service`.
double capacity(const scenario& s, duration service) {
  return static_cast<double>(s.workers) / seconds(service);
}

// A rate in req/s for prose: whole and grouped from 10 up ("5,000", "67"), two significant digits
// below, so that a small capacity does not print as 0 ("0.028", "2.5").
std::string rate_estimate(double rate) {
  if (rate >= 9.5) return grouped(std::llround(rate));
  return fmt::format("{:.2g}", rate);
}

// A ratio such as capacity ÷ demand: one decimal in the usual range, two significant digits
// (possibly in exponent notation) when it is tiny or huge.
std::string ratio_estimate(double ratio) {
  if (ratio >= 0.095 && ratio < 1e6) return fmt::format("{:.1f}", ratio);
  return fmt::format("{:.2g}", ratio);
}

// A fraction as a percentage with only the decimals needed: 0.8 -> "80%", 0.125 -> "12.5%".
std::string whole_percent(double fraction) { return fmt::format("{:g}%", 100.0 * fraction); }

// The ratio as a percentage with one decimal, as the table prints it.
std::string percent(double ratio) { return fmt::format("{:.1f}%", 100.0 * ratio); }

// A name from a scenario or policy file as a human-readable line shows it: control bytes
// escaped (an ANSI escape prints as "\x1b[31m"), so that a file cannot drive the terminal.
std::string shown(const std::string& name) { return detail::escape_control(name); }

// A row's label in the table: the strategy's name, and the server's defences when it ran any.
std::string row_label(const strategy_result& r) {
  return r.defence == "none" ? shown(r.name) : shown(r.name) + " @" + shown(r.defence);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i != 0) out += (i + 1 == items.size()) ? " and " : ", ";
    out += items[i];
  }
  return out;
}

// The names of the results whose `value` prints as `text` (ties at the printed precision).
template <class Text>
std::string names_printing_as(const std::vector<strategy_result>& results, const std::string& text,
                              Text value_text) {
  std::vector<std::string> names;
  for (const auto& r : results) {
    if (value_text(r) == text) names.push_back(row_label(r));
  }
  return join(names);
}

}  // namespace

std::string describe(const scenario& s) {
  std::string text = fmt::format(
      "{}: {} logical req/s from {} client{}; {} worker{} x {} = {} req/s capacity ({}x "
      "demand), queue limit {}; timeout {}",
      shown(s.name), rate_text(s.requests_per_second), grouped(s.clients),
      s.clients == 1 ? "" : "s", s.workers, s.workers == 1 ? "" : "s",
      format_duration(s.service_time), rate_estimate(capacity(s, s.service_time)),
      ratio_estimate(capacity(s, s.service_time) / s.requests_per_second), grouped(s.queue_limit),
      format_duration(s.timeout));
  if (s.overload) {
    text +=
        fmt::format("; above {} attempts/s {} per request ({} req/s capacity)",
                    rate_text(s.overload->above_rate), format_duration(s.overload->service_time),
                    rate_estimate(capacity(s, s.overload->service_time)));
  }
  if (s.stall) {
    text += fmt::format("; {} of attempts stall {} more", whole_percent(s.stall->probability),
                        format_duration(s.stall->length));
  }
  if (s.incident) {
    text += fmt::format("; incident {}-{}", format_duration(s.incident->start),
                        format_duration(s.incident->end));
    std::vector<std::string> effects;
    if (s.incident->service_time) {
      text += fmt::format(" at {} per request ({} req/s capacity)",
                          format_duration(*s.incident->service_time),
                          rate_estimate(capacity(s, *s.incident->service_time)));
    }
    if (s.incident->loss_rate > 0) {
      effects.push_back(fmt::format("{} of attempts lost (never answered)",
                                    whole_percent(s.incident->loss_rate)));
    }
    if (s.incident->error_rate > 0) {
      effects.push_back(fmt::format("{} of attempts fail at once with a 503",
                                    whole_percent(s.incident->error_rate)));
    }
    if (!effects.empty()) text += (s.incident->service_time ? ", " : ": ") + join(effects);
  } else {
    text += "; no incident";
  }
  if (s.max_retries) {
    text += fmt::format("; max {} retr{} per logical request", *s.max_retries,
                        *s.max_retries == 1 ? "y" : "ies");
  }
  if (s.client != client_profile{}) {
    text += fmt::format("; clients play the {} client profile", s.client.name);
  }
  text += fmt::format("; {} simulated", format_duration(s.length));
  return text;
}

std::string to_json(const strategy_result& r) {
  engine::json_writer w;
  w.begin_object();
  strategy_result::for_each_key(r, [&w](const char* name, const auto& member, int decimals) {
    using T = std::remove_cvref_t<decltype(member)>;
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>) {
      w.fixed(name, member, decimals);
    } else {
      w.field(name, member);
    }
  });
  return w.end_object().text();
}

std::string to_json(const simulation_report& report) {
  engine::json_writer w;
  w.begin_report(report.scenario.name, report.scenario.seed).key("strategies").begin_array();
  for (const strategy_result& r : report.strategies) w.raw(to_json(r));
  return std::move(w.end_array().end_object()).line();
}

std::string to_csv(const strategy_result& result) {
  std::string out = "t,logical_requests,attempts,successes,failures,timeouts,queue_length\n";
  for (std::size_t k = 0; k < result.series.size(); ++k) {
    const time_bin& b = result.series[k];
    out += fmt::format("{},{},{},{},{},{},{}\n", k, b.logical_requests, b.attempts, b.successes,
                       b.failures, b.timeouts, b.queue_length);
  }
  return out;
}

namespace {

// The header line, one row per strategy and the legend of the columns.
std::string table_rows(const simulation_report& report) {
  const scenario& s = report.scenario;
  std::string out = describe(s) + fmt::format("; seed {}\n\n", s.seed);
  // The first column is as wide as the longest name (13 at least, the built-ins' width), so
  // that a long policy name from a file keeps the columns in line.
  std::size_t width = 13;
  for (const strategy_result& r : report.strategies) width = std::max(width, row_label(r).size());
  // A scenario with stalls exists for its tail: the table shows the p99.9 beside the p99.
  const bool tail = s.stall.has_value();
  const std::string row = "{:<" + std::to_string(width) +
                          "} {:>9} {:>9} {:>7} {:>9} {:>6} {:>8} {:>10}" +
                          (tail ? " {:>12}" : "{}") + " {:>9}\n";
  out += fmt::format(fmt::runtime(row), "strategy", "requests", "attempts", "ampl.", "incident",
                     "peak", "success", "p99 ok ms", tail ? "p99.9 ok ms" : "", "recovery");
  for (const strategy_result& r : report.strategies) {
    const auto times = [](std::optional<double> x) {
      return x ? fmt::format("{:.2f}x", *x) : std::string("n/a");
    };
    const std::string incident = s.incident ? times(r.incident_amplification) : "-";
    const std::string success = r.success_ratio ? percent(*r.success_ratio) : "n/a";
    const std::string p99 = r.p99_latency_ms ? fmt::format("{:.1f}", *r.p99_latency_ms) : "-";
    const std::string p999 = !tail               ? ""
                             : r.p999_latency_ms ? fmt::format("{:.1f}", *r.p999_latency_ms)
                                                 : "-";
    const std::string recovery = !s.incident              ? "-"
                                 : !r.recovery_measurable ? "n/a"
                                 : r.recovery_s           ? fmt::format("{:.0f} s", *r.recovery_s)
                                                          : "never";
    out += fmt::format(fmt::runtime(row), row_label(r), grouped(r.logical_requests),
                       grouped(r.attempts), times(r.amplification), incident,
                       fmt::format("{:.1f}x", r.peak_load_ratio), success, p99, p999, recovery);
  }
  out +=
      "ampl. = attempts per logical request; incident = ampl. of the logical requests started "
      "during the incident; peak = the "
      "busiest second's attempts / demand; success = logical requests that succeeded; p99 ok ms "
      "= p99 latency of successful requests only; " +
      std::string(tail ? "p99.9 ok ms = the same at p99.9; " : "") +
      "recovery = incident end to 5 s of >= 95 % goodput\n";

  return out;
}

// The sentence on the attempts per logical request during the incident.
std::string incident_sentence(const simulation_report& report) {
  const scenario& s = report.scenario;
  const auto& results = report.strategies;
  const bool single = results.size() == 1;
  std::string out;
  // What the incident did, for the sentence on attempts per logical request.
  std::vector<std::string> conditions;
  if (s.incident->service_time) {
    conditions.push_back(fmt::format("the server could complete {} req/s against a demand of {}",
                                     rate_estimate(capacity(s, *s.incident->service_time)),
                                     rate_text(s.requests_per_second)));
  }
  if (s.incident->loss_rate > 0) {
    conditions.push_back(
        fmt::format("the network lost {} of attempts", whole_percent(s.incident->loss_rate)));
  }
  if (s.incident->error_rate > 0) {
    conditions.push_back(fmt::format("{} of attempts failed at once with a 503",
                                     whole_percent(s.incident->error_rate)));
  }
  const std::string capacity_clause = conditions.empty()
                                          ? std::string("while the server was unchanged")
                                          : "while " + join(conditions);
  // Arrivals are common to every strategy: either all have an incident amplification or none.
  const auto incident_text = [](const strategy_result& r) {
    return r.incident_amplification ? fmt::format("{:.2f}x", *r.incident_amplification)
                                    : std::string("n/a");
  };
  const auto by_incident = [](const strategy_result& a, const strategy_result& b) {
    return a.incident_amplification.value_or(0) < b.incident_amplification.value_or(0);
  };
  const auto [lo, hi] = std::minmax_element(results.begin(), results.end(), by_incident);
  if (!lo->incident_amplification) {
    out +=
        "No logical request arrived during the incident: no attempts per logical request "
        "to compare.\n";
  } else if (single) {
    out += fmt::format("During the incident {} sent {} attempts per logical request, {}.\n",
                       row_label(*lo), incident_text(*lo), capacity_clause);
  } else if (incident_text(*lo) == incident_text(*hi)) {
    out += fmt::format(
        "During the incident every strategy sent {} attempts per logical request, {}.\n",
        incident_text(*lo), capacity_clause);
  } else {
    out += fmt::format(
        "During the incident the attempts per logical request ranged from {} ({}) to {} ({}), "
        "{}.\n",
        incident_text(*lo), names_printing_as(results, incident_text(*lo), incident_text),
        incident_text(*hi), names_printing_as(results, incident_text(*hi), incident_text),
        capacity_clause);
  }

  return out;
}

// Which strategies recovered, and why the others did not.
std::string recovery_lines(const simulation_report& report) {
  const scenario& s = report.scenario;
  const auto& results = report.strategies;
  std::string out;
  std::vector<std::string> recovered;
  std::vector<std::string> down;
  std::vector<const strategy_result*> down_results;
  bool measurable = true;
  for (const auto& r : results) {
    if (r.recovery_s) {
      recovered.push_back(fmt::format("{} after {:.0f} s", row_label(r), *r.recovery_s));
    } else if (r.recovery_measurable) {
      down.push_back(row_label(r));
      down_results.push_back(&r);
    } else {
      measurable = false;
    }
  }
  if (!measurable && s.incident->end < s.length) {
    out +=
        "Recovery cannot be measured: fewer than 5 whole seconds after the incident had "
        "logical requests arriving (recovery is 5 such seconds in a row with >= 95 % "
        "goodput); simulate longer after the incident.\n";
  }
  if (!recovered.empty()) out += "Recovered: " + join(recovered) + ".\n";
  if (!down.empty()) {
    // Split the strategies that never recovered into those still overloading the server
    // after the trigger (a metastable failure) and those below capacity (throttling
    // themselves, or too few successes for another reason).
    // The capacity at a given attempt rate: above server.overload's threshold the server runs
    // at its overload capacity.
    const auto cap_at = [&](double rate) {
      return s.overload && rate > s.overload->above_rate ? capacity(s, s.overload->service_time)
                                                         : capacity(s, s.service_time);
    };
    const auto describe = [&](const std::vector<const strategy_result*>& group, bool first) {
      std::vector<std::string> names;
      double lowest = 0;
      double highest = 0;
      bool any = false;
      std::int64_t throttled = 0;
      for (const auto* r : group) {
        names.push_back(row_label(*r));
        throttled += r->throttled;
        if (auto rate = r->after_incident_attempt_rate) {
          lowest = any ? std::min(lowest, *rate) : *rate;
          highest = any ? std::max(highest, *rate) : *rate;
          any = true;
        }
      }
      std::string text = first ? fmt::format("Never recovered within the {} simulated: {}",
                                             format_duration(s.length), join(names))
                               : fmt::format("Never recovered either: {}", join(names));
      if (any) {
        const std::string sending = rate_estimate(lowest) == rate_estimate(highest)
                                        ? rate_estimate(lowest)
                                        : rate_estimate(lowest) + " to " + rate_estimate(highest);
        const double cap = cap_at(lowest);
        if (highest <= cap_at(highest) && throttled > 0) {
          text += fmt::format(
              ". After the trigger ended {} {} attempts/s, below the capacity of {} req/s: "
              "the client-side throttle still remembered the incident and rejected requests "
              "locally ({} in all)",
              group.size() == 1 ? "it sent" : "they sent", sending, rate_estimate(cap),
              grouped(throttled));
        } else {
          text += fmt::format(
              ". After the trigger ended {} sending {} attempts/s against a capacity of {} "
              "req/s",
              group.size() == 1 ? "it kept" : "they kept", sending, rate_estimate(cap));
          if (lowest > cap) {
            text += ": the retries alone keep the server overloaded (a metastable failure)";
          }
        }
      }
      return text + ".\n";
    };
    std::vector<const strategy_result*> overloaded;
    std::vector<const strategy_result*> below;
    for (const auto* r : down_results) {
      const auto rate = r->after_incident_attempt_rate;
      (rate && *rate > cap_at(*rate) ? overloaded : below).push_back(r);
    }
    if (overloaded.empty() || below.empty()) {
      out += describe(down_results, true);
    } else {
      out += describe(overloaded, true);
      out += describe(below, false);
    }
  }
  return out;
}

// The sentence on the success ratios.
std::string success_sentence(const simulation_report& report) {
  const auto& results = report.strategies;
  const bool single = results.size() == 1;
  std::string out;
  // Arrivals are common to every strategy: either all have a success ratio or none.
  const auto success_text = [](const strategy_result& r) {
    return r.success_ratio ? percent(*r.success_ratio) : std::string("n/a");
  };
  const auto [worst, best] =
      std::minmax_element(results.begin(), results.end(), [](const auto& a, const auto& b) {
        return a.success_ratio.value_or(0) < b.success_ratio.value_or(0);
      });
  if (!best->success_ratio) {
    out += "No logical request arrived: there is no success ratio.\n";
  } else if (single) {
    out += fmt::format("Success ratio of {}: {}.\n", row_label(*best), success_text(*best));
  } else if (success_text(*best) == success_text(*worst)) {
    out += fmt::format("Every strategy had the same success ratio ({}).\n", success_text(*best));
  } else {
    out += fmt::format(
        "Success ratio: best {} ({}), worst {} ({}).\n",
        names_printing_as(results, success_text(*best), success_text), success_text(*best),
        names_printing_as(results, success_text(*worst), success_text), success_text(*worst));
  }
  return out;
}

}  // namespace

std::string format_table(const simulation_report& report) {
  std::string out = table_rows(report);
  if (report.strategies.empty()) return out;
  // Interpretation, computed from the numbers above.
  out += '\n';
  if (report.scenario.incident) out += incident_sentence(report) + recovery_lines(report);
  return out + success_sentence(report);
}

}  // namespace stormguard::sim
