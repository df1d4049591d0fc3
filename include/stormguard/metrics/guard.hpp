// SPDX-License-Identifier: Apache-2.0
/// \file
/// Prometheus metrics of the idempotency guard (stormguard::guard),
/// through its observer interface (guard::guard_observer): the guard itself knows nothing of
/// Prometheus. Header-only; a program that includes it links stormguard::metrics and
/// stormguard::guard.
///
/// \code{.cpp}
///  auto registry = std::make_shared<prometheus::Registry>();
///  stormguard::metrics::guard_metrics metrics(*registry);
///  stormguard::guard::guard_options options;
///  options.observer = &metrics;  // must outlive the guard
///  stormguard::guard::idempotency_guard guard(store, options);
/// \endcode
///
/// The metrics (docs/metrics.md "The idempotency guard"):
/// \code{.unparsed}
///  stormguard_guard_decisions_total{decision}   counter: every answer of handle(), by decision
///      (guard::to_string: ran — the key acquired and the handler committed —, replayed,
///      in_progress — a conflict, 409 —, mismatch — 422 —, store_unavailable, lease_lost,
///      passed_through, missing_key, bad_key, bad_principal, response_too_large);
///  stormguard_guard_takeovers_total             counter: handler runs after taking over an
///      expired lease;
///  stormguard_guard_store_errors_total{operation} counter: store calls that failed
///      (store_error), by operation (begin, find, complete, release);
///  stormguard_guard_store_failures_total{operation,cause} counter: the same failures by their
///      cause (guard::classify_store_failure: unreachable, access_denied, full, timeout,
///      connection_lost, other);
///  stormguard_guard_store_seconds{operation}    histogram: every store call's latency by the
///      guard's clock, failed ones included (buckets 100 µs .. 10 s); `complete` includes the
///      handler, which runs inside its transaction;
///  stormguard_guard_store_down                  gauge: 1 while the guard's short circuit is open
///      (requests fail fast with 503), 0 otherwise.
/// \endcode
#ifndef STORMGUARD_METRICS_GUARD_HPP
#define STORMGUARD_METRICS_GUARD_HPP

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "stormguard/guard/guard.hpp"

namespace stormguard::metrics {

/// A guard::guard_observer that records the guard's decisions, store errors, store latencies and
/// short-circuit state into a prometheus::Registry (see the file comment for the names). Every
/// series is created at construction (the callbacks only add to existing instruments: no
/// allocation, no lock of the registry). Thread-safe: the guard may call it from many threads at
/// once, and the registry may be scraped meanwhile. Holds references into `registry`, which must
/// outlive it; not copyable or movable (the guard holds its address).
class guard_metrics final : public guard::guard_observer {
 public:
  /// Registers the families in `registry`. Throws std::invalid_argument (prometheus-cpp) when a
  /// family of the same name but another type or help is already registered there.
  explicit guard_metrics(prometheus::Registry& registry)
      : takeovers_(prometheus::BuildCounter()
                       .Name("stormguard_guard_takeovers_total")
                       .Help("Handler runs after taking over an expired lease.")
                       .Register(registry)
                       .Add({})),
        store_down_(prometheus::BuildGauge()
                        .Name("stormguard_guard_store_down")
                        .Help("1 while the guard's short circuit is open (the store is known "
                              "down: requests fail fast with 503), 0 otherwise.")
                        .Register(registry)
                        .Add({})) {
    auto& decisions = prometheus::BuildCounter()
                          .Name("stormguard_guard_decisions_total")
                          .Help(
                              "Answers of the idempotency guard, by decision (ran: the key "
                              "acquired and the handler committed; replayed; in_progress: a "
                              "409 conflict; mismatch: 422; store_unavailable: 503).")
                          .Register(registry);
    for (std::size_t i = 0; i < decisions_.size(); ++i) {
      decisions_[i] = &decisions.Add(
          {{"decision", std::string(guard::to_string(static_cast<guard::decision>(i)))}});
    }
    auto& errors = prometheus::BuildCounter()
                       .Name("stormguard_guard_store_errors_total")
                       .Help("Store calls of the idempotency guard that failed, by operation.")
                       .Register(registry);
    auto& latency = prometheus::BuildHistogram()
                        .Name("stormguard_guard_store_seconds")
                        .Help(
                            "Latency of the idempotency guard's store calls in seconds, by "
                            "operation (complete includes the handler).")
                        .Register(registry);
    const prometheus::Histogram::BucketBoundaries buckets{
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
        0.05,   0.1,     0.25,   0.5,   1.0,    2.5,   5.0,  10.0};
    auto& failures = prometheus::BuildCounter()
                         .Name("stormguard_guard_store_failures_total")
                         .Help(
                             "Store calls of the idempotency guard that failed, by operation and "
                             "cause (unreachable, access_denied, full, timeout, connection_lost, "
                             "other).")
                         .Register(registry);
    for (std::size_t i = 0; i < operations_; ++i) {
      const std::string op(guard::to_string(static_cast<guard::store_operation>(i)));
      store_errors_[i] = &errors.Add({{"operation", op}});
      store_seconds_[i] = &latency.Add({{"operation", op}}, buckets);
      for (std::size_t c = 0; c < causes_; ++c) {
        store_failures_[i][c] = &failures.Add(
            {{"operation", op},
             {"cause", std::string(guard::to_string(static_cast<guard::store_failure_cause>(c)))}});
      }
    }
  }
  guard_metrics(const guard_metrics&) = delete;
  guard_metrics& operator=(const guard_metrics&) = delete;

  void on_decision(guard::decision d, bool took_over) noexcept override {
    const auto i = static_cast<std::size_t>(d);
    if (i < decisions_.size()) decisions_[i]->Increment();
    if (took_over) takeovers_.Increment();
  }

  void on_store_call(guard::store_operation op, duration latency, bool failed) noexcept override {
    const auto i = static_cast<std::size_t>(op);
    if (i >= operations_) return;
    store_seconds_[i]->Observe(std::chrono::duration<double>(latency).count());
    if (failed) store_errors_[i]->Increment();
  }

  void on_store_error(guard::store_operation op, std::string_view message) noexcept override {
    const auto i = static_cast<std::size_t>(op);
    const auto c = static_cast<std::size_t>(guard::classify_store_failure(message));
    if (i < operations_ && c < causes_) store_failures_[i][c]->Increment();
  }

  void on_store_state(bool down) noexcept override { store_down_.Set(down ? 1.0 : 0.0); }

 private:
  // guard::decision's enumerators, ran .. store_unavailable; store_operation's, begin .. release.
  static constexpr std::size_t decisions_count_ =
      static_cast<std::size_t>(guard::decision::store_unavailable) + 1;
  static constexpr std::size_t operations_ =
      static_cast<std::size_t>(guard::store_operation::release) + 1;
  static constexpr std::size_t causes_ =
      static_cast<std::size_t>(guard::store_failure_cause::other) + 1;

  std::array<prometheus::Counter*, decisions_count_> decisions_{};
  std::array<prometheus::Counter*, operations_> store_errors_{};
  std::array<prometheus::Histogram*, operations_> store_seconds_{};
  std::array<std::array<prometheus::Counter*, causes_>, operations_> store_failures_{};
  prometheus::Counter& takeovers_;
  prometheus::Gauge& store_down_;
};

}  // namespace stormguard::metrics

#endif  // STORMGUARD_METRICS_GUARD_HPP
