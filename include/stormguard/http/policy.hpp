// SPDX-License-Identifier: Apache-2.0
/// \file
/// A policy (stormguard::config::policy, from a policy file, a gRPC
/// service config or an Envoy route) as the HTTP clients' options — the clients' adapter on the
/// one path from a policy to every executor (stormguard/config/executors.hpp lists the others).
///
/// \code{.cpp}
///  const auto& p = stormguard::config::select_policy(policies, "ours");
///  stormguard::http::client client(stormguard::http::client_options_for(p));
///  auto r = client.perform(req, stormguard::http::call_options_for(p, client_clock.now()));
/// \endcode
///
/// A policy with a `hedging` object gives a client that hedges (client_options::hedging).
///
/// Header-only, in the adapter target stormguard::http_policy, which links stormguard::http and
/// stormguard::config (neither of them links the other). Thread-safe (pure functions).
#ifndef STORMGUARD_HTTP_POLICY_HPP
#define STORMGUARD_HTTP_POLICY_HPP

#include "stormguard/config/executors.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/http/client.hpp"

namespace stormguard::http {

/// `base` with every field that `p` sets: retry (retries, backoff, Retry-After limit), statuses,
/// the per-host budget (any kind), and the attempt time-out when `p` has one (else base's); and
/// `p`'s hedging (config::hedging_settings_for) as client_options::hedging, with no retries (a
/// policy retries or hedges; base.hedging's on_end hook is kept), or no hedging when `p`
/// retries. The other fields of `base` (connect_timeout, key_format, shared_budgets, on_attempt,
/// ...) are kept. The client validates the result when it is built.
[[nodiscard]] inline client_options client_options_for(const config::policy& p,
                                                       client_options base = {}) {
  base.retry = p.retry;
  base.statuses = p.statuses;
  base.budget = p.budget;
  if (p.attempt_timeout != duration::max()) base.attempt_timeout = p.attempt_timeout;
  if (const auto s = config::hedging_settings_for(p)) {
    client_hedging h;
    h.policy = s->options;
    h.non_fatal_statuses = s->non_fatal_statuses.to_vector();
    if (base.hedging) h.on_end = std::move(base.hedging->on_end);
    base.hedging = std::move(h);
    base.retry.max_retries = 0;
  } else {
    base.hedging.reset();
  }
  return base;
}

/// The call options of a call starting at `now` (the client's clock): the policy's deadline,
/// now + deadline (saturating), or none.
[[nodiscard]] inline call_options call_options_for(const config::policy& p, time_point now) {
  return config::retrier_settings_for(p).call(now);
}

}  // namespace stormguard::http

#endif  // STORMGUARD_HTTP_POLICY_HPP
