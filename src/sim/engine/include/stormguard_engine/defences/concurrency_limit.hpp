// SPDX-License-Identifier: Apache-2.0
// The server's side of concurrency-limit (stormguard/sim/defences/concurrency_limit.hpp): past
// its limit an attempt is refused at the door (over_limit: 503 + Retry-After drawn over
// [1 s, 5 s]); an admitted attempt is outstanding until it finishes or leaves the line unserved,
// and its latency (queueing + service, as Envoy measures at its upstream) is the controller's
// sample.
#ifndef STORMGUARD_ENGINE_DEFENCES_CONCURRENCY_LIMIT_HPP
#define STORMGUARD_ENGINE_DEFENCES_CONCURRENCY_LIMIT_HPP

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "stormguard/admission/concurrency_limit.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/random.hpp"
#include "stormguard/sim/defences/concurrency_limit.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/attempt.hpp"

namespace stormguard::sim {

struct concurrency_limit_defence::runtime {
  // Throws std::invalid_argument for bad options (admission::concurrency_limit's rule).
  runtime(const options_type& o, const scenario& s) : limit(resolved(o, s), time_point{}) {}
  // validate()'s rule for the options: admission::concurrency_limit's (std::invalid_argument)
  // with initial_limit 0 resolved to the worker count and raised to min_concurrency; an
  // initial_limit above max_limit is an error, not clamped.
  static void check(options_type o, const scenario& s) {
    if (o.initial_limit == 0) o.initial_limit = std::min<std::int64_t>(s.workers, o.max_limit);
    o.initial_limit = std::max(o.initial_limit, o.min_concurrency);
    const admission::concurrency_limit c(o, time_point{});
  }

  [[nodiscard]] std::optional<admission::outcome> admit(std::int64_t now,
                                                        const engine::attempt_labels&) {
    if (limit.try_acquire(at(now))) return std::nullopt;
    return admission::outcome::over_limit;
  }
  // An admitted attempt was turned away after all (the line was full) or left the line unserved.
  void cancel() noexcept { limit.cancel(); }
  // An admitted attempt that reached the server at `arrived` takes a worker now and will
  // complete at now + service.
  void started(std::int64_t now, std::int64_t arrived, std::int64_t service) {
    completions.push({now + service, arrived});
  }
  // A worker finished now: the limit hears the latency of the attempt that completes first.
  void finished(std::int64_t now, random_generator& rng) {
    if (completions.empty()) return;
    const std::int64_t arrived = completions.top().second;
    completions.pop();
    limit.release(at(now), at(arrived), rng);
  }
  // The Retry-After of a refusal: uniform whole seconds in [1 s, 5 s].
  [[nodiscard]] duration retry_after(random_generator& rng) {
    return limit.retry_after_for_refusal(rng);
  }

  // The scenario's limiter options; initial_limit 0 = the worker count (at least
  // min_concurrency), max_limit raised to the worker count when smaller.
  static options_type resolved(options_type o, const scenario& s) {
    o.max_limit = std::max<std::int64_t>(o.max_limit, s.workers);
    if (o.initial_limit == 0) o.initial_limit = std::min<std::int64_t>(s.workers, o.max_limit);
    o.initial_limit = std::clamp(o.initial_limit, o.min_concurrency, o.max_limit);
    return o;
  }
  static time_point at(std::int64_t ns) noexcept { return time_point(duration(ns)); }

  using completion = std::pair<std::int64_t, std::int64_t>;  // (completes at, arrived)
  admission::concurrency_limit limit;
  std::priority_queue<completion, std::vector<completion>, std::greater<>> completions;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_DEFENCES_CONCURRENCY_LIMIT_HPP
