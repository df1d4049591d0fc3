// SPDX-License-Identifier: Apache-2.0
// The computation behind `stormguard plan`: for each retry n, the exact range of the delay and
// statistics of delays sampled with the library's own stormguard::backoff::delay. Header-only and
// free of I/O so that tests/plan_stats_test.cpp can check it directly.
//
//   const stormguard::backoff b;  // 100 ms, 3 s, x2, full jitter
//   const auto rows = stormguard::cli::make_plan(b, 3, 100'000, 1);
//   // rows[0].ceiling == 100ms, rows[0].sampled.mean_ns ≈ 50e6, rows[2].cumulative_max == 700ms
#ifndef STORMGUARD_CLI_PLAN_STATS_HPP
#define STORMGUARD_CLI_PLAN_STATS_HPP

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "stormguard/backoff.hpp"
#include "stormguard/random.hpp"

namespace stormguard::cli {

/// Statistics of a set of sampled delays.
struct delay_summary {
  duration min{};
  duration max{};
  duration p50{};      ///< nearest-rank median: the value at rank ceil(0.50 · n) in sorted order
  duration p99{};      ///< nearest-rank 99th percentile: rank ceil(0.99 · n)
  double mean_ns = 0;  ///< the arithmetic mean, in nanoseconds (exact sum in 128 bits)
};

/// The value at 1-based rank ceil(percent · n / 100) of `values` in sorted order (the
/// nearest-rank percentile). Reorders `values`. `values` must not be empty; percent in [1, 100].
inline duration nearest_rank(std::vector<duration>& values, std::int64_t percent) {
  const auto n = static_cast<std::int64_t>(values.size());
  const std::int64_t rank = std::max<std::int64_t>(1, (percent * n + 99) / 100);
  const auto nth = values.begin() + (rank - 1);
  std::nth_element(values.begin(), nth, values.end());
  return *nth;
}

/// Summarises `values` (reordering them). Throws std::invalid_argument when `values` is empty.
inline delay_summary summarize(std::vector<duration>& values) {
  if (values.empty()) throw std::invalid_argument("summarize: no samples");
  delay_summary s;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  detail::uint128 sum = 0;  // delays are >= 0; 10^7 samples of duration::max() fit in 128 bits
  for (const duration d : values) sum += static_cast<std::uint64_t>(d.count());
  s.mean_ns = static_cast<double>(sum) / static_cast<double>(values.size());
  s.p50 = nearest_rank(values, 50);
  s.p99 = nearest_rank(values, 99);
  return s;
}

/// One row of the plan: the delay before retry `retry`.
struct plan_row {
  int retry = 0;
  duration lowest{};   ///< the smallest delay the policy can return (exact)
  duration ceiling{};  ///< the largest delay the policy can return (exact)
  delay_summary sampled;
  /// Worst-case total wait before retry n: Σ ceilings, saturating at duration::max() (about
  /// 292 years).
  duration cumulative_max{};
  /// Mean total wait before retry n: Σ sampled means, in nanoseconds, saturating at the same
  /// point as cumulative_max (so it is never above it).
  double cumulative_mean_ns = 0;
  /// True once the worst total has saturated: the true sum of the ceilings is above
  /// duration::max(), so cumulative_max (and a mean total at the same value) is a lower bound.
  bool saturated = false;
};

/// The exact range [lowest, ceiling] of the delay before each retry 1..retries:
///   none [c, c]; equal [c/2, c]; full [0, c] with c = b.ceiling(n);
///   decorrelated [base, h(n)], h(1) = min(cap, 3·base), h(n) = min(cap, 3·h(n-1)) (saturating).
inline std::vector<std::pair<duration, duration>> delay_bounds(const backoff& b, int retries) {
  std::vector<std::pair<duration, duration>> bounds;
  bounds.reserve(static_cast<std::size_t>(std::max(retries, 0)));
  const backoff_options& o = b.options();
  duration previous_high = o.base;
  for (int n = 1; n <= retries; ++n) {
    switch (o.jitter) {
      case jitter::none:
        bounds.emplace_back(b.ceiling(n), b.ceiling(n));
        break;
      case jitter::equal:
        bounds.emplace_back(b.ceiling(n) / 2, b.ceiling(n));
        break;
      case jitter::decorrelated: {
        const duration tripled = previous_high.count() > duration::max().count() / 3
                                     ? duration::max()
                                     : previous_high * 3;
        previous_high = std::min(o.cap, tripled);
        bounds.emplace_back(std::min(o.cap, o.base), previous_high);
        break;
      }
      case jitter::full:
      default:
        bounds.emplace_back(duration::zero(), b.ceiling(n));
        break;
    }
  }
  return bounds;
}

/// Samples `samples` (>= 1) whole retry sequences of `b` with a stormguard::random_generator
/// seeded with `seed` (so the result is the same on every platform), and returns one row per
/// retry 1..retries. Decorrelated jitter gets, as `previous`, the delay sampled for the same
/// sequence at the retry before. Draws are made retry by retry (all sequences' retry 1, then
/// retry 2, ...). Memory: one or (decorrelated) two vectors of `samples` durations.
/// Throws std::invalid_argument when samples < 1 or retries < 0.
inline std::vector<plan_row> make_plan(const backoff& b, int retries, std::int64_t samples,
                                       std::uint64_t seed) {
  if (samples < 1) throw std::invalid_argument("make_plan: samples must be >= 1");
  if (retries < 0) throw std::invalid_argument("make_plan: retries must be >= 0");
  const auto bounds = delay_bounds(b, retries);
  const bool decorrelated = b.options().jitter == jitter::decorrelated;
  random_generator rng(seed);
  std::vector<plan_row> rows;
  rows.reserve(static_cast<std::size_t>(retries));
  std::vector<duration> values(static_cast<std::size_t>(samples));
  std::vector<duration> previous(decorrelated ? values.size() : 0);
  duration worst_total{};
  double mean_total = 0;
  for (int n = 1; n <= retries; ++n) {
    if (decorrelated) {
      for (std::size_t i = 0; i < values.size(); ++i) {
        previous[i] = b.delay(n, rng, previous[i]);
        values[i] = previous[i];
      }
    } else {
      for (duration& v : values) v = b.delay(n, rng);
    }
    plan_row row;
    row.retry = n;
    row.lowest = bounds[static_cast<std::size_t>(n - 1)].first;
    row.ceiling = bounds[static_cast<std::size_t>(n - 1)].second;
    row.sampled = summarize(values);
    worst_total =
        row.ceiling > duration::max() - worst_total ? duration::max() : worst_total + row.ceiling;
    // Both totals saturate at duration::max(): the mean of delays <= their ceilings can never
    // be above the sum of the ceilings, saturated or not.
    mean_total =
        std::min(mean_total + row.sampled.mean_ns, static_cast<double>(worst_total.count()));
    row.cumulative_max = worst_total;
    row.cumulative_mean_ns = mean_total;
    row.saturated = worst_total == duration::max();
    rows.push_back(row);
  }
  return rows;
}

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_PLAN_STATS_HPP
