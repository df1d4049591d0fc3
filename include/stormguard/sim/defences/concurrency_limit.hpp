// SPDX-License-Identifier: Apache-2.0
/// \file
/// The server defence "concurrency-limit" (one kind of stormguard/sim/defence_kinds.hpp): Envoy's
/// adaptive concurrency (gradient) controller (stormguard::admission::concurrency_limit) refuses
/// a request past its limit: 503 + Retry-After, drawn over [1 s, 5 s].
#ifndef STORMGUARD_SIM_DEFENCES_CONCURRENCY_LIMIT_HPP
#define STORMGUARD_SIM_DEFENCES_CONCURRENCY_LIMIT_HPP

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "stormguard/admission/concurrency_limit.hpp"
#include "stormguard/clock.hpp"

namespace stormguard::sim {

/// concurrency-limit: see the file comment. Scenario key "concurrency-limit".
struct concurrency_limit_defence {
  /// The name in scenario files, `--defence` and reports.
  static constexpr std::string_view name = "concurrency-limit";
  /// The lab server's counter (/stats key) of the requests it refused.
  static constexpr std::string_view stats_key = "refused_concurrency_limit";
  /// The `reason` label of stormguard_serve_defence_decisions_total.
  static constexpr std::string_view reason = "over_limit";

  /// Its parameters. initial_limit 0 means "the server's worker count" (so that a healthy server
  /// loses nothing at start), and max_limit rises to the worker count when it is larger.
  using options_type = admission::concurrency_limit_options;

  /// The settings of options_type kept in scenario files, with their ranges (the others keep the
  /// library's defaults).
  template <class Self, class F>
  static void fields(Self& o, F&& f) {
    using namespace std::chrono_literals;
    f("initial_limit", o.initial_limit, std::int64_t{0}, std::int64_t{1'000'000});
    f("max_limit", o.max_limit, std::int64_t{1}, std::int64_t{1'000'000});
    f("min_concurrency", o.min_concurrency, std::int64_t{1}, std::int64_t{1'000'000});
    f("request_count", o.request_count, std::int64_t{1}, std::int64_t{100'000});
    f("buffer", o.buffer, 0.0, 10.0);
    f("update_interval", o.update_interval, duration(1ms), duration(60s));
    f("min_rtt_interval", o.min_rtt_interval, duration(1s), duration(1h));
  }

  /// A server scaled by `factor` (scale_scenario): a non-zero initial_limit is multiplied,
  /// rounded, at least 1.
  static void scale(options_type& o, double factor) {
    if (o.initial_limit == 0) return;
    o.initial_limit =
        std::max<std::int64_t>(1, std::llround(static_cast<double>(o.initial_limit) * factor));
  }

  /// What the simulator's and the lab's server run (stormguard_engine/defences/, internal).
  struct runtime;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_DEFENCES_CONCURRENCY_LIMIT_HPP
