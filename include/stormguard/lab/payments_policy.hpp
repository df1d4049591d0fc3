// SPDX-License-Identifier: Apache-2.0
/// \file
/// A policy (stormguard::config::policy, from a policy file, a
/// gRPC service config or an Envoy route) as the options of lab::run_payments — the payments
/// run's adapter on the one path from a policy to every executor
/// (stormguard/config/executors.hpp lists the others).
///
/// \code{.cpp}
///  const auto& p = stormguard::config::select_policy(policies, "ours");
///  auto run = stormguard::lab::payments_options_for(p, {.servers = {url}, .charges = 1000});
///  auto audit = stormguard::lab::run_payments(run);
/// \endcode
///
/// Header-only: the policy type is a plain value of stormguard::config's public header, and
/// nothing of the config library is called. Thread-safe (a pure function).
#ifndef STORMGUARD_LAB_PAYMENTS_POLICY_HPP
#define STORMGUARD_LAB_PAYMENTS_POLICY_HPP

#include <stdexcept>
#include <string>

#include "stormguard/config/executors.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/lab/payments.hpp"

namespace stormguard::lab {

/// `base` with every field of `p` that acts on a charge: retry (retries, backoff, Retry-After
/// limit), statuses, the run's budget (any kind), the attempt time-out when `p` has one (else
/// base's) and the deadline of each charge when `p` has one (else none). The other fields of
/// `base` (servers, charges, concurrency, progress, stop, ...) are kept.
///
/// Throws std::invalid_argument when `p` hedges (config::policy::hedging): a charge's attempts go
/// one after another, each to the next server, so a hedging policy cannot be honoured and is
/// refused rather than run as a policy without retries. run_payments validates the rest.
[[nodiscard]] inline payments_run_options payments_options_for(const config::policy& p,
                                                               payments_run_options base = {}) {
  if (p.hedging) {
    throw std::invalid_argument(
        "policy " + detail::quote_for_message(p.name) +
        ": hedging: lab payments sends a charge's attempts one after another (retries), it does "
        "not hedge; give a policy with retries");
  }
  const config::retrier_settings s = config::retrier_settings_for(p);
  base.retry = s.retry;
  base.statuses = s.statuses;
  base.budget = s.budget;
  if (p.attempt_timeout != duration::max()) base.attempt_timeout = s.attempt_timeout;
  base.deadline = s.deadline;
  return base;
}

}  // namespace stormguard::lab

#endif  // STORMGUARD_LAB_PAYMENTS_POLICY_HPP
