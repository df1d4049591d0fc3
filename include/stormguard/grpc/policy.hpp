// SPDX-License-Identifier: Apache-2.0
/// \file
/// A policy (stormguard::config::policy, from a policy file, a gRPC
/// service config or an Envoy route) as the gRPC client's options — the gRPC client's adapter on
/// the one path from a policy to every executor (stormguard/config/executors.hpp lists the
/// others).
///
/// \code{.cpp}
///  auto p = stormguard::config::load_policies(
///      *stormguard::config::parse_policy_reference("grpc:service-config.json"));
///  stormguard::grpc::client client("dns:///orders.internal:443", grpc::SslCredentials({}),
///                                  stormguard::grpc::client_options_for(p->front()));
///  auto r = client.call(rpc, request, &response,
///                       stormguard::grpc::call_options_for(p->front(), clock.now(),
///                                                          {.idempotent = true}));
/// \endcode
///
/// Header-only, in the adapter target stormguard::grpc_policy, which links stormguard::grpc and
/// stormguard::config (neither of them links the other). Thread-safe (pure functions).
#ifndef STORMGUARD_GRPC_POLICY_HPP
#define STORMGUARD_GRPC_POLICY_HPP

#include "stormguard/config/executors.hpp"
#include "stormguard/config/grpc_codes.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/grpc/client.hpp"

namespace stormguard::grpc {

/// The gRPC codes `p` retries for an idempotent method: its retryable_grpc_codes when it names
/// them (an empty list retries no code: only pushback and attempts that never left), else
/// `fallback` (the client's default, UNAVAILABLE). The HTTP statuses of `p` play no part.
[[nodiscard]] inline status_codes retryable_codes_for(const config::policy& p,
                                                      status_codes fallback = {
                                                          ::grpc::StatusCode::UNAVAILABLE}) {
  if (!p.retryable_grpc_codes) return fallback;
  return status_codes::from_mask(p.retryable_grpc_codes->mask());
}

/// `base` with every field of `p` the client takes: retry (retries, backoff, the longest
/// pushback honoured), the budget (any kind), the attempt time-out when `p` has one (else
/// base's), and the codes retried (retryable_codes_for(p, base.retryable)). A policy with
/// `hedging` (gRFC A6: hedging instead of retries) gives the hedged calls' settings too
/// (client_options::hedging: its max_attempts, delay, the policy's max_retry_after, and its
/// non_fatal_grpc_codes, none when it names none): run its calls with
/// client::async_hedged_call or client::hedged_call. base.shared_budget, when set, still wins
/// over the budget (the client's rule). The client validates the result when it is built.
[[nodiscard]] inline client_options client_options_for(const config::policy& p,
                                                       client_options base = {}) {
  base.retry = p.retry;
  base.budget = p.budget;
  if (p.attempt_timeout != duration::max()) base.attempt_timeout = p.attempt_timeout;
  base.retryable = retryable_codes_for(p, base.retryable);
  if (p.hedging) {
    base.hedging.policy = p.hedging->options;
    base.hedging.policy.max_retry_after = p.retry.max_retry_after;
    base.hedging.non_fatal = p.hedging->non_fatal_grpc_codes
                                 ? status_codes::from_mask(p.hedging->non_fatal_grpc_codes->mask())
                                 : status_codes{};
  }
  return base;
}

/// `base` with the policy's deadline for a call starting at `now` (the client's clock): now +
/// deadline (saturating), or base's deadline when `p` has none. The other fields of `base`
/// (idempotent, stop, configure) are kept.
[[nodiscard]] inline call_options call_options_for(const config::policy& p, time_point now,
                                                   call_options base = {}) {
  if (p.deadline != duration::max()) {
    base.deadline = config::retrier_settings_for(p).call(now).deadline;
  }
  return base;
}

}  // namespace stormguard::grpc

#endif  // STORMGUARD_GRPC_POLICY_HPP
