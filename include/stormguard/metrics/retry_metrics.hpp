// SPDX-License-Identifier: Apache-2.0
/// \file
/// Prometheus metrics for every attempt, retry, end of call
/// and budget denial of the retry executors (prometheus-cpp; target stormguard::metrics).
///
/// One retry_metrics object is created on the application's prometheus::Registry (the one its
/// exposer or /metrics handler serialises); it plugs into the executors through their hooks
/// (retry.hpp: on_attempt, on_retry, on_end), so a retrier without metrics pays nothing:
///
/// \code{.cpp}
///  prometheus::Registry registry;                      // exposed by the application
///  stormguard::metrics::retry_metrics metrics(registry);
///  stormguard::retrier retry(policy, clock, rng, budget);
///  auto measured = metrics.instrument(retry, "payments");  // label client="payments"
///  auto r = measured(op);                              // or async_retry(measured, ...)
/// \endcode
///
/// For the HTTP clients (stormguard/metrics/http.hpp): client_options::on_attempt =
/// stormguard::metrics::http_hook(metrics, "api.example.com").
///
/// The metrics (docs/metrics.md has each one's meaning and Grafana-ready PromQL), with the label
/// chosen by the caller (`client` by default) for the policy or host:
/// \code{.unparsed}
///  stormguard_attempts_total{client, outcome}       outcome: success, failure, timeout,
///                                                   not_retryable
///  stormguard_retries_total{client}                 retries granted (one backoff each)
///  stormguard_calls_total{client, reason}           calls ended, by end_reason
///  stormguard_budget_denials_total{client, budget}  retries or admissions refused by the budget
///  stormguard_backoff_delay_seconds{client}         histogram of the delays before retries
///  stormguard_retry_after_honoured_total{client}    retries that waited a server's Retry-After
///  stormguard_budget_level{client, budget}          retries the budget would grant now (gauge)
///  stormguard_hedges_sent_total{client}             hedged copies sent after the first
///  stormguard_hedges_won_total{client}              hedged calls won by a copy after the first
///  stormguard_hedges_refused_total{client, budget}  hedged copies the budget refused
///  stormguard_hedges_cancelled_total{client}        copies cancelled after a call was decided
/// \endcode
/// (the hedge counters through stormguard/metrics/hedge.hpp: the hedging executor's end hook).
/// Label values are the caller's client name and fixed vocabularies only (no URL, key or error
/// text), so the number of series is bounded by the number of client names.
#ifndef STORMGUARD_METRICS_RETRY_METRICS_HPP
#define STORMGUARD_METRICS_RETRY_METRICS_HPP

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/budget.hpp"
#include "stormguard/budget_kinds.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::metrics {

/// How the metrics are named.
struct metrics_options {
  /// The prefix of every metric name (a Prometheus metric name: [a-zA-Z_:][a-zA-Z0-9_:]*).
  std::string prefix = "stormguard";
  /// The name of the label that carries the caller's client name (policy, upstream or host).
  std::string label = "client";
  /// The upper bounds of the backoff delay histogram's buckets, in seconds, increasing.
  std::vector<double> delay_buckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                    1,     2.5,  5,     10,   30,  60};
};

/// The name of a budget type, the value of the `budget` label: its kind in policy files
/// (stormguard::budget_kind_of: "none", "ratio", "token_bucket", "quota", "adaptive",
/// "concurrency"); "custom" for another type. Since the one list of budget kinds, the label of
/// stormguard::adaptive_throttle is "adaptive" (it was "adaptive_throttle").
template <class B>
[[nodiscard]] constexpr std::string_view budget_kind() noexcept {
  return budget_kind_of<B>();
}

/// The `budget` label of `budget`: budget.kind() for a budget whose kind is chosen at run time
/// (stormguard::any_budget), budget_kind<B>() otherwise.
template <class B>
[[nodiscard]] constexpr std::string_view budget_kind(const B& budget) noexcept {
  if constexpr (requires { budget.kind(); }) {
    return budget.kind();
  } else {
    return budget_kind<B>();
  }
}

/// The instruments of one label set (one client name and budget kind): plain pointers into the
/// registry's metric families, so recording is a few atomic additions (no lookup, no
/// allocation). Created by retry_metrics::for_client; valid as long as the retry_metrics lives.
/// Thread-safe (prometheus-cpp's counters, gauges and histograms are).
class STORMGUARD_EXPORT client_metrics {
 public:
  /// Records one ended attempt (see attempt_event): its outcome, and for a retry the delay,
  /// whether a Retry-After was honoured.
  void record_attempt(const attempt_event& e) noexcept;
  /// Records one ended call: its end_reason, and a budget denial for budget_exhausted or
  /// throttled.
  void record_end(end_reason reason) noexcept;
  /// Sets the budget level gauge.
  void set_budget_level(double retries) noexcept { budget_level_->Set(retries); }

  /// Records a retry granted after `delay` (without an attempt_event: the HTTP clients).
  void record_retry(duration delay, bool honours_retry_after) noexcept;
  /// Records one ended hedged call (stormguard::async_hedge, http::async_hedge): the call by its
  /// end_reason as record_end does, the copies sent after the first (hedges sent), whether a
  /// copy after the first won, the copies the budget refused and the copies cancelled.
  void record_hedged_call(end_reason reason, const hedge_report& report) noexcept;

  /// Records an attempt by its outcome alone.
  void record_outcome(attempt_status status) noexcept {
    attempts_[static_cast<std::size_t>(status)]->Increment();
  }

 private:
  friend class retry_metrics;
  client_metrics() = default;
  std::array<prometheus::Counter*, 4> attempts_{};  // by attempt_status
  std::array<prometheus::Counter*, 9> calls_{};     // by end_reason
  prometheus::Counter* retries_ = nullptr;
  prometheus::Counter* denials_ = nullptr;
  prometheus::Counter* retry_after_ = nullptr;
  prometheus::Histogram* delay_ = nullptr;
  prometheus::Gauge* budget_level_ = nullptr;
  prometheus::Counter* hedges_sent_ = nullptr;
  prometheus::Counter* hedges_won_ = nullptr;
  prometheus::Counter* hedges_refused_ = nullptr;
  prometheus::Counter* hedges_cancelled_ = nullptr;
};

/// The retry budget's level in retries it would grant now, for the budgets that have one
/// (budget.level(now): ratio_budget's balance, token_bucket_throttle's tokens, retry_quota's
/// available tokens, concurrency_budget's limit − retries in flight; any_budget forwards).
/// Negative: none (no_budget, adaptive_throttle, other types).
template <class B>
[[nodiscard]] double budget_level(const B& budget, time_point now) noexcept {
  if constexpr (requires { budget.level(now); }) {
    return budget.level(now);
  } else {
    (void)budget;
    (void)now;
    return -1;
  }
}

/// Prometheus metrics of the retry executors, registered on the caller's registry (see the
/// file comment for the metric names). Thread-safe: for_client takes a mutex (once per label
/// set: keep the returned reference or the instrumented retrier); recording is lock-free.
/// The registry must outlive it; one retry_metrics per registry and prefix (prometheus-cpp
/// returns the existing family for a name already registered, with the same help text).
class STORMGUARD_EXPORT retry_metrics {
 public:
  /// Registers the metric families on `registry`. Throws std::invalid_argument when
  /// options.prefix or options.label is not a valid Prometheus name, or the buckets are not
  /// increasing.
  explicit retry_metrics(prometheus::Registry& registry, metrics_options options = {});
  ~retry_metrics();
  retry_metrics(const retry_metrics&) = delete;
  retry_metrics& operator=(const retry_metrics&) = delete;

  /// The instruments of label value `client` (the caller's name for the policy, upstream or
  /// host: keep the set of names small and fixed; never a URL, a key or an id) with budget kind
  /// `budget` (budget_kind<B>()). Created on first use (allocates, takes a mutex); the same
  /// reference on later calls.
  [[nodiscard]] client_metrics& for_client(std::string_view client,
                                           std::string_view budget = "none");

  /// A copy of `r` whose hooks record into for_client(client, budget_kind<B>()): on_attempt
  /// (attempts by outcome, retries, backoff delay, Retry-After honoured) and on_end (calls by
  /// reason, budget denials, and the budget level when a call retried or did not succeed). The
  /// copy's on_attempt and on_end hooks call `r`'s own on_attempt/on_end hooks after recording;
  /// on_retry and on_give_up are kept. Works for retrier::operator() and async_retry alike.
  template <bit_generator G, retry_budget<G> B, class OnRetry, class OnGiveUp, class OnAttempt,
            class OnEnd>
  [[nodiscard]] auto instrument(const retrier<G, B, OnRetry, OnGiveUp, OnAttempt, OnEnd>& r,
                                std::string_view client) {
    using access = detail::retrier_access;
    const auto* budget = access::budget_pointer(r);
    client_metrics* m =
        &for_client(client, budget != nullptr ? budget_kind(*budget) : budget_kind<B>());
    return r.on_attempt(attempt_hook<OnAttempt>{m, access::on_attempt(r)})
        .on_end(
            end_hook<B, OnEnd>{m, access::budget_pointer(r), &access::clk(r), access::on_end(r)});
  }

  /// A copy of the hedger `h` (stormguard::hedger, stormguard/asio/hedge.hpp) whose end hook
  /// records every hedged call into for_client(client, budget kind of h.budget()) with
  /// client_metrics::record_hedged_call (calls by reason, budget denials, hedges sent, won,
  /// refused and cancelled), then calls `h`'s own end hook. Works for stormguard::async_hedge and
  /// http::async_hedge alike. The copies' own attempts are not recorded in attempts_total (the
  /// hook sees the call's report, not each copy's outcome); do not also set http_hook on the
  /// client of the copies, or each copy counts as a call.
  template <class H>
  requires requires(const H& h) {
    h.end_hook_function();
    h.budget();
    h.on_end(typename H::end_hook{});
  }
  [[nodiscard]] H instrument(const H& h, std::string_view client) {
    client_metrics* m = &for_client(client, budget_kind(h.budget()));
    return h.on_end(
        [m, next = h.end_hook_function()](end_reason reason, const hedge_report& report) {
          m->record_hedged_call(reason, report);
          if (next) next(reason, report);
        });
  }

 private:
  template <class Next>
  struct attempt_hook {
    client_metrics* m;
    [[no_unique_address]] Next next;
    void operator()(const attempt_event& e) {
      m->record_attempt(e);
      if constexpr (!std::same_as<Next, no_hook>) next(e);
    }
  };
  template <class B, class Next>
  struct end_hook {
    client_metrics* m;
    B* budget;
    clock* clk;
    [[no_unique_address]] Next next;
    template <class Result>
    void operator()(const Result& result) {
      m->record_end(result.reason);
      if constexpr (!std::same_as<B, no_budget>) {
        if (result.reason != end_reason::success || result.attempts > 1) {
          const double level = budget_level(*budget, clk->now());
          if (level >= 0) m->set_budget_level(level);
        }
      }
      if constexpr (!std::same_as<Next, no_hook>) next(result);
    }
  };

  struct families;
  std::unique_ptr<families> families_;
  stormguard::detail::mutex mutex_;
  std::map<std::string, std::unique_ptr<client_metrics>, std::less<>> clients_
      STORMGUARD_GUARDED_BY(mutex_);
};

}  // namespace stormguard::metrics

#endif  // STORMGUARD_METRICS_RETRY_METRICS_HPP
