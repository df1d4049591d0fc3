#include "stormguard/sim/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stormguard/sim/scenario.hpp"

namespace stormguard::sim {

namespace {

std::string json_string(const std::string& text) { return nlohmann::json(text).dump(); }

std::string fixed(std::optional<double> value, int decimals) {
  if (!value) return "null";
  return fmt::format("{:.{}f}", *value, decimals);
}

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

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i != 0) out += (i + 1 == items.size()) ? " and " : ", ";
    out += items[i];
  }
  return out;
}

// The mean attempts per second over the whole bins from `from` to the end of the simulation.
std::optional<double> mean_attempt_rate(const strategy_result& r, const scenario& s,
                                        duration from) {
  const auto whole_bins = static_cast<std::size_t>(s.length / std::chrono::seconds(1));
  const auto first = static_cast<std::size_t>((from + std::chrono::seconds(1) - duration(1)) /
                                              std::chrono::seconds(1));
  if (first >= whole_bins) return std::nullopt;
  std::int64_t total = 0;
  for (std::size_t k = first; k < whole_bins; ++k) total += r.series[k].attempts;
  return static_cast<double>(total) / static_cast<double>(whole_bins - first);
}

}  // namespace

std::string describe(const scenario& s) {
  std::string text = fmt::format(
      "{}: {} logical req/s from {} clients; {} workers x {} = {} req/s capacity ({:.1f}x "
      "demand), queue limit {}; timeout {}",
      s.name, rate_text(s.requests_per_second), s.clients, s.workers,
      format_duration(s.service_time), grouped(std::llround(capacity(s, s.service_time))),
      capacity(s, s.service_time) / s.requests_per_second, grouped(s.queue_limit),
      format_duration(s.timeout));
  if (s.incident) {
    text += fmt::format("; incident {}-{} at {} per request ({} req/s capacity)",
                        format_duration(s.incident->start), format_duration(s.incident->end),
                        format_duration(s.incident->service_time),
                        grouped(std::llround(capacity(s, s.incident->service_time))));
  } else {
    text += "; no incident";
  }
  text += fmt::format("; {} simulated", format_duration(s.length));
  return text;
}

std::string to_json(const simulation_report& report) {
  std::string out = fmt::format("{{\"scenario\":{},\"seed\":{},\"strategies\":[",
                                json_string(report.scenario.name), report.scenario.seed);
  bool first = true;
  for (const strategy_result& r : report.strategies) {
    if (!first) out += ',';
    first = false;
    out += fmt::format(
        "{{\"name\":{},\"logical_requests\":{},\"attempts\":{},\"amplification\":{},"
        "\"incident_amplification\":{},\"peak_load_ratio\":{},\"success_ratio\":{},"
        "\"p99_latency_ms\":{},\"recovery_s\":{},",
        json_string(r.name), r.logical_requests, r.attempts, fixed(r.amplification, 4),
        fixed(r.incident_amplification, 4), fixed(r.peak_load_ratio, 4), fixed(r.success_ratio, 4),
        fixed(r.p99_latency_ms, 1), fixed(r.recovery_s, 1));
    out += fmt::format(
        "\"successes\":{},\"failures\":{},\"timeouts\":{},\"in_flight_attempts\":{},"
        "\"attempts_exhausted\":{},\"budget_exhausted\":{},\"requests_in_flight\":{},"
        "\"wasted_work\":{},\"incident_logical_requests\":{},\"incident_attempts\":{}}}",
        r.successes, r.failures, r.timeouts, r.in_flight_attempts, r.attempts_exhausted,
        r.budget_exhausted, r.requests_in_flight, r.wasted_work, r.incident_logical_requests,
        r.incident_attempts);
  }
  out += "]}\n";
  return out;
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

std::string format_table(const simulation_report& report) {
  const scenario& s = report.scenario;
  std::string out = describe(s) + fmt::format("; seed {}\n\n", s.seed);
  out += fmt::format("{:<13} {:>9} {:>9} {:>7} {:>9} {:>6} {:>8} {:>8} {:>9}\n", "strategy",
                     "requests", "attempts", "ampl.", "incident", "peak", "success", "p99 ms",
                     "recovery");
  for (const strategy_result& r : report.strategies) {
    const std::string incident =
        r.incident_amplification ? fmt::format("{:.2f}x", *r.incident_amplification) : "-";
    const std::string p99 = r.p99_latency_ms ? fmt::format("{:.1f}", *r.p99_latency_ms) : "-";
    const std::string recovery = !s.incident    ? "-"
                                 : r.recovery_s ? fmt::format("{:.0f} s", *r.recovery_s)
                                                : "never";
    out += fmt::format("{:<13} {:>9} {:>9} {:>7} {:>9} {:>6} {:>8} {:>8} {:>9}\n", r.name,
                       grouped(r.logical_requests), grouped(r.attempts),
                       fmt::format("{:.2f}x", r.amplification), incident,
                       fmt::format("{:.1f}x", r.peak_load_ratio),
                       fmt::format("{:.1f}%", 100.0 * r.success_ratio), p99, recovery);
  }
  if (report.strategies.empty()) return out;

  // Interpretation, computed from the numbers above.
  out += '\n';
  const auto& results = report.strategies;
  if (s.incident) {
    auto by_incident = [](const strategy_result& a, const strategy_result& b) {
      return a.incident_amplification.value_or(0) < b.incident_amplification.value_or(0);
    };
    const auto [lo, hi] = std::minmax_element(results.begin(), results.end(), by_incident);
    out += fmt::format(
        "During the incident the attempts per logical request ranged from {:.2f}x ({}) to "
        "{:.2f}x ({}), while the server could complete {} req/s against a demand of {}.\n",
        lo->incident_amplification.value_or(0), lo->name, hi->incident_amplification.value_or(0),
        hi->name, grouped(std::llround(capacity(s, s.incident->service_time))),
        rate_text(s.requests_per_second));

    std::vector<std::string> recovered;
    std::vector<std::string> down;
    std::vector<const strategy_result*> down_results;
    for (const auto& r : results) {
      if (r.recovery_s) {
        recovered.push_back(fmt::format("{} after {:.0f} s", r.name, *r.recovery_s));
      } else {
        down.push_back(r.name);
        down_results.push_back(&r);
      }
    }
    if (!recovered.empty()) out += "Recovered: " + join(recovered) + ".\n";
    if (!down.empty() && s.incident->end < s.length) {
      double lowest = 0;
      double highest = 0;
      bool any = false;
      for (const auto* r : down_results) {
        if (auto rate = mean_attempt_rate(*r, s, s.incident->end)) {
          lowest = any ? std::min(lowest, *rate) : *rate;
          highest = any ? std::max(highest, *rate) : *rate;
          any = true;
        }
      }
      out += fmt::format("Never recovered within the {} simulated: {}", format_duration(s.length),
                         join(down));
      if (any) {
        const double cap = capacity(s, s.service_time);
        out += fmt::format(
            ". After the trigger ended they kept sending {} to {} attempts/s against a capacity "
            "of {} req/s{}",
            grouped(std::llround(lowest)), grouped(std::llround(highest)),
            grouped(std::llround(cap)),
            lowest > cap ? ": the retries alone keep the server overloaded (a metastable failure)"
                         : "");
      }
      out += ".\n";
    }
  }
  const auto [worst, best] = std::minmax_element(
      results.begin(), results.end(),
      [](const auto& a, const auto& b) { return a.success_ratio < b.success_ratio; });
  if (fmt::format("{:.1f}", 100.0 * best->success_ratio) ==
      fmt::format("{:.1f}", 100.0 * worst->success_ratio)) {
    out += fmt::format("Every strategy had the same success ratio ({:.1f}%).\n",
                       100.0 * best->success_ratio);
  } else {
    out += fmt::format("Success ratio: best {} ({:.1f}%), worst {} ({:.1f}%).\n", best->name,
                       100.0 * best->success_ratio, worst->name, 100.0 * worst->success_ratio);
  }
  return out;
}

}  // namespace stormguard::sim
