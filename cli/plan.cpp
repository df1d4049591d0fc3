// SPDX-License-Identifier: Apache-2.0
// `stormguard plan`: what a retry policy would make a caller wait. For each retry n it prints the
// exact range of the delay, statistics of delays sampled with the library's own backoff (seeded,
// so the output is reproducible), and the worst-case and mean total wait before retry n.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "plan_stats.hpp"
#include "policy_flags.hpp"
#include "stormguard/backoff.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

constexpr int k_max_plan_retries = 1000;
constexpr std::int64_t k_max_samples = 10'000'000;
// samples x retries: about a second of work per 10^8 draws.
constexpr std::int64_t k_max_draws = 1'000'000'000;

struct plan_options {
  policy_flags policy;
  std::int64_t samples = 100'000;
  std::string seed = "1";  // text: CLI11 2.1 reads "-1" as 2^64-1 for an unsigned option
  bool json = false;
};

// A decimal integer in [0, 2^64 - 1], digits only (no sign, no spaces, no hex).
std::uint64_t parse_seed(const std::string& text) {
  const std::optional<std::uint64_t> value = parse_whole_number(text);
  if (!value) {
    throw CLI::ValidationError(
        "--seed", "must be a non-negative decimal integer (0 to 18446744073709551615), got " +
                      detail::quote_for_message(text));
  }
  return *value;
}

double to_ms(duration d) { return static_cast<double>(d.count()) / 1e6; }

// A sampled value for the table: about four significant digits in a unit that suits it.
std::string short_duration(double ns) {
  if (ns < 1e3) return fmt::format("{:.0f}ns", ns);
  if (ns < 1e6) return fmt::format("{:.2f}us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.2f}ms", ns / 1e6);
  if (ns < 60e9) return fmt::format("{:.3f}s", ns / 1e9);
  if (ns < 3600e9) return fmt::format("{:.2f}m", ns / 60e9);
  return fmt::format("{:.2f}h", ns / 3600e9);
}
std::string short_duration(duration d) { return short_duration(static_cast<double>(d.count())); }

// A total of the table: "> 292 years" once it has saturated at duration::max().
std::string total_text(double ns, bool saturated) {
  return saturated && ns >= static_cast<double>(duration::max().count()) ? "> 292 years"
                                                                         : short_duration(ns);
}

std::string to_json(const std::vector<plan_row>& rows) {
  nlohmann::ordered_json retries = nlohmann::ordered_json::array();
  for (const plan_row& r : rows) {
    retries.push_back({{"retry", r.retry},
                       {"ceiling_ms", to_ms(r.ceiling)},
                       {"min_ms", to_ms(r.sampled.min)},
                       {"max_ms", to_ms(r.sampled.max)},
                       {"mean_ms", r.sampled.mean_ns / 1e6},
                       {"p50_ms", to_ms(r.sampled.p50)},
                       {"p99_ms", to_ms(r.sampled.p99)},
                       {"cumulative_max_ms", to_ms(r.cumulative_max)},
                       {"cumulative_mean_ms", r.cumulative_mean_ns / 1e6}});
  }
  nlohmann::ordered_json doc;
  doc["retries"] = std::move(retries);
  return doc.dump(2) + "\n";
}

std::string to_table(const retry_options& o, const plan_options& options,
                     const std::vector<plan_row>& rows) {
  const backoff_options& b = o.backoff;
  const std::string source =
      typed(options.policy.policy_option)
          ? fmt::format(" (--policy {})", detail::quote_for_message(options.policy.policy))
          : "";
  std::string out = fmt::format("Policy{}: base {}, cap {}, multiplier {}, jitter {}, {} retr{}\n",
                                source, format_duration(b.base), format_duration(b.cap),
                                detail::format_double(b.multiplier), to_string(b.jitter),
                                o.max_retries, o.max_retries == 1 ? "y" : "ies");
  if (rows.empty()) {
    out += "No retries (--retries 0): the first failure ends the call, nothing is waited.\n";
    return out;
  }
  out += fmt::format("Sampled {} sequence{} with seed {}\n\n", options.samples,
                     options.samples == 1 ? "" : "s", options.seed);
  std::vector<std::string> ranges;
  std::size_t range_width = 5;
  for (const plan_row& r : rows) {
    ranges.push_back(
        fmt::format("[{}, {}]", format_duration(r.lowest), format_duration(r.ceiling)));
    range_width = std::max(range_width, ranges.back().size());
  }
  out += fmt::format("{:>5}  {:<{}}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>11}  {:>10}\n", "retry",
                     "range", range_width, "min", "p50", "mean", "p99", "max", "worst total",
                     "mean total");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const plan_row& r = rows[i];
    out += fmt::format("{:>5}  {:<{}}  {:>9}  {:>9}  {:>9}  {:>9}  {:>9}  {:>11}  {:>10}\n",
                       r.retry, ranges[i], range_width, short_duration(r.sampled.min),
                       short_duration(r.sampled.p50), short_duration(r.sampled.mean_ns),
                       short_duration(r.sampled.p99), short_duration(r.sampled.max),
                       total_text(static_cast<double>(r.cumulative_max.count()), r.saturated),
                       total_text(r.cumulative_mean_ns, r.saturated));
  }
  out +=
      "\nrange: exact bounds of the delay before retry n (the upper end is its ceiling)\n"
      "min .. max: statistics of the sampled delays (p50, p99: nearest rank)\n"
      "worst total, mean total: the wait before retry n summed over retries 1..n\n"
      "(worst: the sum of the ceilings, a guarantee; mean: the sum of the sampled means)\n";
  if (rows.back().saturated) {
    out +=
        "> 292 years: the total is above the largest duration (2^63-1 ns); both totals stop "
        "there.\n";
  }
  if (b.jitter == jitter::decorrelated) {
    out +=
        "Decorrelated jitter ignores the multiplier: each delay is min(cap, U(base, 3 x the "
        "previous delay)).\n";
  }
  return out;
}

int run_plan(const plan_options& options) {
  // Usage errors (CLI::ValidationError, exit 2 in main.cpp) before any work.
  const config::policy resolved = resolve_policy("plan", options.policy);
  if (resolved.hedging) {
    throw CLI::ValidationError(
        "--policy", "the policy " + detail::quote_for_message(resolved.name) +
                        " hedges (\"hedging\"): plan shows a retry schedule; `stormguard policy "
                        "check` shows its copies and their delay");
  }
  const int retries = resolved.retry.max_retries;
  if (retries < 0 || retries > k_max_plan_retries) {
    throw CLI::ValidationError("--retries", fmt::format("must be in [0, {}] for a plan, got {}",
                                                        k_max_plan_retries, retries));
  }
  if (options.samples < 1 || options.samples > k_max_samples) {
    throw CLI::ValidationError(
        "--samples", fmt::format("must be in [1, {}], got {}", k_max_samples, options.samples));
  }
  if (options.samples * retries > k_max_draws) {
    throw CLI::ValidationError(
        "--samples", fmt::format("{} samples x {} retries is more than {} draws; lower --samples "
                                 "or --retries",
                                 options.samples, retries, k_max_draws));
  }
  const std::uint64_t seed = parse_seed(options.seed);
  const retry_options& policy = resolved.retry;
  const backoff b(policy.backoff);
  const std::vector<plan_row> rows = make_plan(b, retries, options.samples, seed);

  const std::string text = options.json ? to_json(rows) : to_table(policy, options, rows);
  if (!write_all(stdout, text)) {
    report_error("plan", "cannot write to standard output: " + errno_text(errno));
    return exit_failure;
  }
  return exit_success;
}

}  // namespace

command add_plan_command(CLI::App& parent) {
  auto options = std::make_shared<plan_options>();
  CLI::App* sub = parent.add_subcommand(
      "plan",
      "Show the delays a retry policy would wait: per retry, the exact range and sampled "
      "min/p50/mean/p99/max, and the worst-case and mean total wait");
  sub->footer(
      "Exit status:\n"
      "  0    the plan was printed\n"
      "  1    it could not be written to stdout\n"
      "  2    bad command line (a policy flag, --samples, --seed)");
  add_policy_flags(*sub, options->policy);
  sub->add_option("--samples", options->samples, "Retry sequences to sample (1 to 10000000)")
      ->transform(whole_number())
      ->type_name("N")
      ->capture_default_str();
  add_typed_option(
      *sub, "--seed", options->seed,
      "Seed of the sampling generator (0 to 2^64-1); the same seed prints the same plan", "N")
      ->capture_default_str();
  sub->add_flag("--json", options->json,
                "Print {\"retries\": [{\"retry\": 1, \"ceiling_ms\": ..., ...}]} instead of the "
                "table (identical for a given seed)");
  return command{sub, [options] { return run_plan(*options); }};
}

}  // namespace stormguard::cli
