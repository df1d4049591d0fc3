// SPDX-License-Identifier: Apache-2.0
/// \file
/// Retry_metrics for the gRPC client (stormguard::grpc::client), labelled by method, through
/// client_options::on_attempt and on_end. Header-only, in the adapter target
/// stormguard::metrics_grpc, which links stormguard::metrics and stormguard::grpc (neither links
/// the other).
///
/// \code{.cpp}
///  prometheus::Registry registry;
///  stormguard::metrics::retry_metrics metrics(registry, {.label = "method"});
///  stormguard::grpc::client_options options;
///  stormguard::metrics::instrument_grpc(metrics, options,
///                                       {"/orders.v1.Orders/GetOrder", "/orders.v1.Orders/Pay"});
///  stormguard::grpc::client client(target, credentials, options);
///  client.call(rpc, request, &reply, {.idempotent = true, .method =
///  "/orders.v1.Orders/GetOrder"});
/// \endcode
#ifndef STORMGUARD_METRICS_GRPC_HPP
#define STORMGUARD_METRICS_GRPC_HPP

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stormguard/grpc/client.hpp"
#include "stormguard/metrics/retry_metrics.hpp"

namespace stormguard::metrics {

/// The label value of the calls whose call_options::method is not among the methods given to
/// instrument_grpc (an empty method included): one series for them all, so that the number of
/// series stays bounded whatever the callers pass.
inline constexpr std::string_view k_other_method = "other";

/// Sets `options.on_attempt` and `options.on_end` so that every call of a client built with
/// them records into metrics.for_client(method, budget kind of options.budget), the label value
/// being the call's call_options::method when it is one of `methods`, else k_other_method:
///  - on_attempt (call, async_call): the attempt's outcome, and for a retry its delay and whether
///    a server pushback was honoured (client_metrics::record_attempt);
///  - on_end: a hedged call by its reason and copies (record_hedged_call: hedges sent, won,
///    refused, cancelled); any other call by its reason, with a budget denial for
///    budget_exhausted and throttled (record_end).
/// The hooks already in `options` are called after recording. The instruments of each method
/// are looked up here, once: recording takes no lock and allocates nothing (a binary search of
/// `methods`). Set options.budget (or shared_budget) first: the `budget` label is its kind.
/// `metrics` must outlive the client. Throws std::invalid_argument for an empty name in
/// `methods`.
inline void instrument_grpc(retry_metrics& metrics, grpc::client_options& options,
                            std::initializer_list<std::string_view> methods) {
  const std::string_view budget =
      options.shared_budget ? options.shared_budget->kind() : budget_kind(options.budget);
  struct table {
    std::vector<std::pair<std::string, client_metrics*>> by_method;  // sorted by name
    client_metrics* other = nullptr;
    client_metrics& find(std::string_view method) const noexcept {
      const auto it = std::lower_bound(
          by_method.begin(), by_method.end(), method,
          [](const auto& entry, std::string_view m) { return std::string_view(entry.first) < m; });
      return it != by_method.end() && it->first == method ? *it->second : *other;
    }
  };
  auto t = std::make_shared<table>();
  for (const std::string_view m : methods) {
    if (m.empty()) {
      throw std::invalid_argument(
          "stormguard::metrics::instrument_grpc: a method name is empty (give the names callers "
          "pass as call_options::method)");
    }
    t->by_method.emplace_back(std::string(m), &metrics.for_client(m, budget));
  }
  std::sort(t->by_method.begin(), t->by_method.end());
  t->other = &metrics.for_client(k_other_method, budget);
  options.on_attempt = [t, next = std::move(options.on_attempt)](std::string_view method,
                                                                 const attempt_event& e) {
    t->find(method).record_attempt(e);
    if (next) next(method, e);
  };
  options.on_end = [t, next = std::move(options.on_end)](std::string_view method,
                                                         const grpc::result& r) {
    client_metrics& m = t->find(method);
    if (r.hedges.sent > 0) {
      m.record_hedged_call(r.reason, r.hedges);
    } else {
      m.record_end(r.reason);
    }
    if (next) next(method, r);
  };
}

}  // namespace stormguard::metrics

#endif  // STORMGUARD_METRICS_GRPC_HPP
