// SPDX-License-Identifier: Apache-2.0
/// \file
/// An adaptive concurrency limit, Envoy's gradient
/// controller (envoy.filters.http.adaptive_concurrency, GradientControllerConfig).
///
/// A server admits a request only while fewer than `limit` are outstanding; the limit follows the
/// latency the server shows. Periodically (every min_rtt_interval, with jitter) the limit drops to
/// min_concurrency until request_count requests have completed, and the sample_percentile of their
/// latencies is the ideal latency, minRTT. Every update_interval the same percentile of the
/// latencies since is sampleRTT, and
///
/// \code{.unparsed}
///  gradient = clamp((minRTT · (1 + buffer)) / sampleRTT, 0.5, 2)
///  limit    = clamp(limit · gradient + sqrt(limit · gradient), min_concurrency, max_limit)
/// \endcode
///
/// so a server whose latency grows sheds load before its queue explodes, and one that is fast
/// again grows the limit back (the square root is the burst headroom). Envoy's defaults: buffer
/// 25 %, request_count 50, min_concurrency 3, jitter 15 %, sample_percentile 50 %, max_limit 1000.
/// Envoy starts in the minRTT window, at min_concurrency; `initial_limit` lets a server start at
/// its worker count instead, so that a healthy server loses nothing at start: the first minRTT is
/// then measured at that limit over the first request_count requests (a server that is not yet
/// queueing shows its ideal latency), and the next windows come every min_rtt_interval as in Envoy.
///
/// Refused requests are answered 503 with a Retry-After drawn uniformly from
/// [retry_after_min, retry_after_max] whole seconds, so refused clients come back spread out
/// rather than together (retry_after_for_refusal).
///
/// \code{.cpp}
///  stormguard::admission::concurrency_limit limit({.initial_limit = 100});
///  if (!limit.try_acquire(now)) { /* 503, Retry-After: limit.retry_after_for_refusal(rng) */ }
///  ... serve ...
///  limit.release(clock.now(), started);   // records the latency sample
/// \endcode
///
/// Time is passed in; the jitter and the Retry-After draw use the caller's generator. Thread-safe
/// (one short critical section per call); the latency samples live in a fixed array (no allocation
/// after construction).
#ifndef STORMGUARD_ADMISSION_CONCURRENCY_LIMIT_HPP
#define STORMGUARD_ADMISSION_CONCURRENCY_LIMIT_HPP

#include <array>
#include <cstdint>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/export.hpp"
#include "stormguard/random.hpp"

namespace stormguard::admission {

/// The settings of a concurrency_limit (Envoy's GradientControllerConfig, same defaults).
struct concurrency_limit_options {
  /// How often sampleRTT is taken and the limit recomputed. In [1 ms, 60 s]. Envoy has no default
  /// (its examples use 100 ms): 100 ms.
  duration update_interval = std::chrono::milliseconds(100);
  /// How often minRTT is measured again. In [1 s, 1 h]; Envoy's examples: 60 s.
  duration min_rtt_interval = std::chrono::seconds(60);
  /// Random extra delay before each minRTT window, as a fraction of min_rtt_interval. In [0, 1];
  /// 0.15.
  double jitter = 0.15;
  /// Completed requests that make one minRTT measurement. In [1, 100,000]; 50.
  std::int64_t request_count = 50;
  /// The limit during a minRTT window, and the smallest limit ever. In [1, max_limit]; 3.
  std::int64_t min_concurrency = 3;
  /// The latency above minRTT still counted as ideal, as a fraction of minRTT. In [0, 10]; 0.25.
  double buffer = 0.25;
  /// The percentile of the latency samples taken as sampleRTT and minRTT. In (0, 1]; 0.5.
  double sample_percentile = 0.5;
  /// The largest limit. In [min_concurrency, 1,000,000]; 1000.
  std::int64_t max_limit = 1000;
  /// The limit at start. 0 = Envoy's behaviour (start in a minRTT window at min_concurrency);
  /// otherwise in [min_concurrency, max_limit], with the first minRTT window after
  /// min_rtt_interval.
  std::int64_t initial_limit = 0;
  /// The Retry-After of a refusal is drawn uniformly from [retry_after_min, retry_after_max],
  /// in whole seconds. 1 s <= min <= max <= 1 h; 1 s and 5 s.
  duration retry_after_min = std::chrono::seconds(1);
  /// The upper end of the Retry-After range (see retry_after_min); 5 s.
  duration retry_after_max = std::chrono::seconds(5);

  friend bool operator==(const concurrency_limit_options&,
                         const concurrency_limit_options&) = default;
};

/// Envoy's gradient controller: see the file comment. Thread-safe.
///
/// Example (tests/reference_admission_examples_test.cpp, run by the tests):
/// \snippet reference_admission_examples_test.cpp concurrency_limit
class STORMGUARD_EXPORT concurrency_limit {
 public:
  /// The most latency samples kept per window (beyond it, later samples replace earlier ones
  /// cyclically: the percentile is then of the last k_max_samples).
  static constexpr std::size_t k_max_samples = 4096;

  /// Validates `options`; throws std::invalid_argument naming the field and the value. `start`
  /// is the instant the controller starts at (the server's steady clock). Allocates the sample
  /// array once.
  concurrency_limit(concurrency_limit_options options, time_point start);

  /// A request asks to start at `now`: true (and counted outstanding) while fewer than limit()
  /// are; false = refuse it (503 + retry_after_for_refusal).
  [[nodiscard]] bool try_acquire(time_point now) noexcept;
  /// A request admitted at `started` completed at `now`: no longer outstanding, and its latency
  /// is a sample. `g` draws the jitter when a minRTT window ends.
  template <class G>
  void release(time_point now, time_point started, G& g) noexcept {
    release_impl(now, started, uniform_unit(g));
  }
  /// An admitted request ended without a meaningful latency (cancelled, failed early): no longer
  /// outstanding, no sample.
  void cancel() noexcept;

  /// The Retry-After for a refused request: uniform whole seconds in [retry_after_min,
  /// retry_after_max].
  template <class G>
  [[nodiscard]] duration retry_after_for_refusal(G& g) const noexcept {
    const auto lo = std::chrono::duration_cast<std::chrono::seconds>(options_.retry_after_min);
    const auto hi = std::chrono::duration_cast<std::chrono::seconds>(options_.retry_after_max);
    return std::chrono::seconds(lo.count() + uniform_int(g, hi.count() - lo.count()));
  }

  /// The limit now.
  [[nodiscard]] std::int64_t limit() const noexcept;
  /// Requests admitted and not yet released or cancelled.
  [[nodiscard]] std::int64_t outstanding() const noexcept;
  /// The last minRTT measured (zero before the first).
  [[nodiscard]] duration min_rtt() const noexcept;
  /// True during a minRTT measurement window.
  [[nodiscard]] bool measuring_min_rtt() const noexcept;
  /// Requests refused so far.
  [[nodiscard]] std::int64_t refused() const noexcept;
  /// The validated settings.
  [[nodiscard]] const concurrency_limit_options& options() const noexcept { return options_; }

 private:
  void release_impl(time_point now, time_point started, double jitter_draw) noexcept;
  void update(time_point now) noexcept STORMGUARD_REQUIRES(mutex_);
  duration percentile_and_clear() noexcept STORMGUARD_REQUIRES(mutex_);
  void add_sample(duration latency) noexcept STORMGUARD_REQUIRES(mutex_);

  concurrency_limit_options options_;
  mutable detail::mutex mutex_;
  std::vector<duration> samples_ STORMGUARD_GUARDED_BY(mutex_);  // capacity k_max_samples
  std::size_t sample_count_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t limit_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t deferred_limit_ STORMGUARD_GUARDED_BY(mutex_) = 0;  // restored after a minRTT window
  std::int64_t outstanding_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t refused_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  std::int64_t consecutive_min_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  duration min_rtt_ STORMGUARD_GUARDED_BY(mutex_){};
  bool measuring_ STORMGUARD_GUARDED_BY(mutex_) = false;
  time_point window_epoch_ STORMGUARD_GUARDED_BY(mutex_){};  // minRTT window start
  time_point next_update_ STORMGUARD_GUARDED_BY(mutex_){};   // next sampleRTT update
  time_point next_min_rtt_ STORMGUARD_GUARDED_BY(mutex_){};  // next minRTT window
};

}  // namespace stormguard::admission

#endif  // STORMGUARD_ADMISSION_CONCURRENCY_LIMIT_HPP
