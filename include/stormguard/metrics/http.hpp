// SPDX-License-Identifier: Apache-2.0
/// \file
/// Retry_metrics for the HTTP clients (http::client and
/// http::async_client), through client_options::on_attempt. Header-only; a program that includes
/// it links stormguard::metrics and stormguard::http.
///
/// \code{.cpp}
///  stormguard::metrics::retry_metrics metrics(registry);
///  stormguard::http::client_options options;
///  options.on_attempt = stormguard::metrics::http_hook(metrics, "api");  // label client="api"
///  stormguard::http::client client(options);
/// \endcode
#ifndef STORMGUARD_METRICS_HTTP_HPP
#define STORMGUARD_METRICS_HTTP_HPP

#include <functional>
#include <string_view>
#include <utility>

#include "stormguard/http/client.hpp"
#include "stormguard/metrics/retry_metrics.hpp"

namespace stormguard::metrics {

/// A client_options::on_attempt that records every attempt of an HTTP client into
/// metrics.for_client(client, budget) (`budget`: the kind of the client's per-host budgets,
/// stormguard::budget_kind(options.budget); see the overload below): the attempt's
/// outcome (success when the call ends with success; not_retryable when it ends so; timeout for a
/// transport time-out, CURLE_OPERATION_TIMEDOUT; failure otherwise), a retry with its delay
/// (Retry-After honoured when the response carried a parsed Retry-After), and the end of the call
/// with its reason. A call cancelled before its first attempt is not seen (no attempt ends).
/// `next`, when set, is called after recording (the caller's own hook). `client` is a fixed name
/// chosen by the caller (one per upstream or policy, never the URL). The returned function holds
/// a pointer to the instruments: `metrics` must outlive it.
[[nodiscard]] inline std::function<void(const http::attempt_info&)> http_hook(
    retry_metrics& metrics, std::string_view client, std::string_view budget,
    std::function<void(const http::attempt_info&)> next) {
  client_metrics* m = &metrics.for_client(client, budget);
  return [m, next = std::move(next)](const http::attempt_info& info) {
    constexpr int k_curle_operation_timedout = 28;
    attempt_status status = attempt_status::failure;
    if (info.reason == end_reason::success) {
      status = attempt_status::success;
    } else if (info.reason == end_reason::not_retryable) {
      status = attempt_status::not_retryable;
    } else if (info.error && info.error->curl_code == k_curle_operation_timedout) {
      status = attempt_status::timeout;
    }
    m->record_outcome(status);
    if (info.delay) m->record_retry(*info.delay, info.retry_after_delay.has_value());
    if (info.reason) m->record_end(*info.reason);
    if (next) next(info);
  };
}

/// http_hook for a client with the default budget kind, "ratio" (client_options' default).
[[nodiscard]] inline std::function<void(const http::attempt_info&)> http_hook(
    retry_metrics& metrics, std::string_view client,
    std::function<void(const http::attempt_info&)> next = {}) {
  return http_hook(metrics, client, budget_kind_of<ratio_budget>(), std::move(next));
}

/// http_hook labelled with the kind of `options.budget` (set options.budget before calling):
/// `options.on_attempt = http_hook(metrics, "api", options);`
[[nodiscard]] inline std::function<void(const http::attempt_info&)> http_hook(
    retry_metrics& metrics, std::string_view client, const http::client_options& options,
    std::function<void(const http::attempt_info&)> next = {}) {
  return http_hook(metrics, client, budget_kind(options.budget), std::move(next));
}

/// A client_hedging::on_end that records every hedged call of an http::client into
/// metrics.for_client(client, budget kind of options.budget) with
/// client_metrics::record_hedged_call (calls by reason, budget denials, hedges sent, won, refused,
/// cancelled), then calls `next` when set: the same counters as retry_metrics::instrument gives a
/// hedger of http::async_hedge. Do not also set http_hook as on_attempt, or each copy counts as a
/// call. `metrics` must outlive the returned function.
/// \code{.cpp}
///  options.hedging->on_end = http_hedge_hook(metrics, "api", options);
/// \endcode
[[nodiscard]] inline std::function<void(end_reason, const hedge_report&)> http_hedge_hook(
    retry_metrics& metrics, std::string_view client, const http::client_options& options,
    std::function<void(end_reason, const hedge_report&)> next = {}) {
  client_metrics* m = &metrics.for_client(client, budget_kind(options.budget));
  return [m, next = std::move(next)](end_reason reason, const hedge_report& report) {
    m->record_hedged_call(reason, report);
    if (next) next(reason, report);
  };
}

}  // namespace stormguard::metrics

#endif  // STORMGUARD_METRICS_HTTP_HPP
