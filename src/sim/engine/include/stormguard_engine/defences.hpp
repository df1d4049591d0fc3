// SPDX-License-Identifier: Apache-2.0
// The server-side defences of the time-series model (the internal engine target
// stormguard_sim_engine): the scenario's server.defences run by stormguard::admission's own
// classes, so that the simulator (virtual time) and `serve`/`lab` (a real clock) run the same
// code a C++ server embeds. server_model (server.hpp) holds one `defences` when any defence is
// enabled and calls it at four points:
//
//   admit     an attempt reaches the server (after the incident's draw): the retry budget refuses
//             a labelled retry (503, grpc-retry-pushback-ms: -1), the concurrency limit refuses
//             past its limit (503 + Retry-After drawn over [1 s, 5 s]);
//   push/pop  the waiting line: FIFO, or adaptive LIFO + CoDel (dropped attempts answered 503);
//   started   an attempt takes a worker (the concurrency limit's latency sample is settled when
//             it completes: queueing + service, as Envoy measures at its upstream);
//   finished  a worker is free again.
//
// drop-expired is applied by server_model when an attempt leaves the line: an attempt whose
// caller's deadline (grpc-timeout; in the model, the attempt's timeout) has passed, or is nearer
// than the server's estimate of its service time (expired(): by default the scenario's normal
// service time), never starts.
//
// Times are ns of the scenario's clock. Not thread-safe: one thread (the simulator's loop, or the
// lab server's event loop) calls it.
#ifndef STORMGUARD_ENGINE_DEFENCES_HPP
#define STORMGUARD_ENGINE_DEFENCES_HPP

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "stormguard/admission/codel.hpp"
#include "stormguard/admission/concurrency_limit.hpp"
#include "stormguard/admission/defences.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::sim::engine {

// Domain tag of the defences' generator (the concurrency limit's jitter and Retry-After draws).
inline constexpr std::uint64_t k_tag_defences = 0x646566656e636573ULL;  // "defences"

// No deadline.
inline constexpr std::int64_t k_no_deadline = std::numeric_limits<std::int64_t>::max();

// An attempt waiting for a worker: which one, when it reached the server and its caller's
// deadline (k_no_deadline: none).
struct queued_attempt {
  std::uint32_t request;
  std::int32_t attempt;
  std::int64_t arrived = 0;
  std::int64_t deadline = k_no_deadline;
};

// What a request says about itself in its headers: its attempt number (x-envoy-attempt-count,
// 1 = a first attempt, also when the client does not label its attempts) and its caller's
// deadline (from grpc-timeout; k_no_deadline: none).
struct attempt_labels {
  attempt_info attempt{};
  std::int64_t deadline = k_no_deadline;
};

// Why the defences refused an attempt at the door.
enum class refusal : std::uint8_t {
  retry_budget,       // 503 + grpc-retry-pushback-ms: -1 (do not retry), no Retry-After
  concurrency_limit,  // 503 + Retry-After (retry_after())
};

// Why an attempt left the waiting line without being served.
enum class drop_reason : std::uint8_t {
  codel,    // CoDel: it waited more than 2 x target while the line was overloaded (503)
  expired,  // drop-expired: its caller's deadline had passed or would before it could be served
            // (answered "do not retry" if its caller still waits)
};

class defences {
 public:
  // The defences of `s.defences` (whose parameters validate() has checked).
  explicit defences(const scenario& s)
      : enabled_(s.defences.enabled),
        rng_(seeds::mix(s.seed, k_tag_defences)),
        retry_budget_(s.defences.retry_budget),
        queue_(s.defences.codel),
        limit_(limit_options(s), time_point{}),
        service_estimate_(s.defences.expired_service_estimate.value_or(s.service_time)) {}

  [[nodiscard]] bool has(admission::defence d) const noexcept { return enabled_.has(d); }

  // An attempt reaches the server now: a refusal, or nullopt (it goes on to the workers and the
  // line). An admitted attempt is outstanding for the concurrency limit until finished() or
  // cancel().
  [[nodiscard]] std::optional<refusal> admit(std::int64_t now, const attempt_labels& labels) {
    if (has(admission::defence::retry_budget) && !retry_budget_.admit(at(now), labels.attempt)) {
      return refusal::retry_budget;
    }
    if (has(admission::defence::concurrency_limit) && !limit_.try_acquire(at(now))) {
      return refusal::concurrency_limit;
    }
    return std::nullopt;
  }

  // An admitted attempt was turned away after all (the line was full) or left the line unserved.
  void cancel() noexcept {
    if (has(admission::defence::concurrency_limit)) limit_.cancel();
  }

  // An admitted attempt that reached the server at `arrived` takes a worker now and will complete
  // at now + service.
  void started(std::int64_t now, std::int64_t arrived, std::int64_t service) {
    if (!has(admission::defence::concurrency_limit)) return;
    completions_.push({now + service, arrived});
  }

  // A worker finished now: the concurrency limit hears the latency of the attempt that completes
  // first (queueing + service).
  void finished(std::int64_t now) {
    if (!has(admission::defence::concurrency_limit) || completions_.empty()) return;
    const std::int64_t arrived = completions_.top().second;
    completions_.pop();
    limit_.release(at(now), at(arrived), rng_);
  }

  // drop-expired: an attempt with `deadline` must not start now (admission::expired with the
  // scenario's service estimate).
  [[nodiscard]] bool expired(std::int64_t now, std::int64_t deadline) const noexcept {
    return has(admission::defence::drop_expired) &&
           admission::expired(at(now), at(deadline), service_estimate_);
  }

  // The Retry-After of a concurrency-limit refusal: uniform whole seconds in [1 s, 5 s].
  [[nodiscard]] duration retry_after() { return limit_.retry_after_for_refusal(rng_); }

  // The waiting line when lifo-codel is on.
  [[nodiscard]] bool lifo_codel() const noexcept { return has(admission::defence::lifo_codel); }
  [[nodiscard]] admission::adaptive_lifo_queue<queued_attempt>& queue() noexcept { return queue_; }

  [[nodiscard]] const admission::retry_admission& retry_budget() const noexcept {
    return retry_budget_;
  }
  [[nodiscard]] const admission::concurrency_limit& limit() const noexcept { return limit_; }

  [[nodiscard]] static time_point at(std::int64_t now) noexcept {
    return time_point(duration(now));
  }

 private:
  // The scenario's limiter options; initial_limit 0 = the worker count (at least
  // min_concurrency), max_limit raised to the worker count when smaller.
  static admission::concurrency_limit_options limit_options(const scenario& s) {
    admission::concurrency_limit_options o = s.defences.concurrency_limit;
    o.max_limit = std::max<std::int64_t>(o.max_limit, s.workers);
    if (o.initial_limit == 0) o.initial_limit = std::min<std::int64_t>(s.workers, o.max_limit);
    o.initial_limit = std::clamp(o.initial_limit, o.min_concurrency, o.max_limit);
    return o;
  }

  using completion = std::pair<std::int64_t, std::int64_t>;  // (completes at, arrived)

  admission::defence_set enabled_;
  random_generator rng_;
  admission::retry_admission retry_budget_;
  admission::adaptive_lifo_queue<queued_attempt> queue_;
  admission::concurrency_limit limit_;
  duration service_estimate_;  // drop-expired's estimate of one attempt's service time
  std::priority_queue<completion, std::vector<completion>, std::greater<>> completions_;
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_DEFENCES_HPP
