// SPDX-License-Identifier: Apache-2.0
/// \file
/// A policy file's hedging for http::async_hedge.
///
/// The adapter from config::hedging_settings (stormguard/config/executors.hpp) to the HTTP side of
/// a hedged request (hedge_http_options, stormguard/http/hedge.hpp). Header-only; it is the one
/// place where the HTTP hedging reads the policy format, so the http library itself does not
/// depend on stormguard::config (link the adapter target stormguard::http_policy, which links both,
/// to use this header). With
/// settings.policy(), settings.budget (any_budget) and settings.call(now), a policy file's
/// `hedging` object drives async_hedge with no field translated by hand:
///
/// \code{.cpp}
///  const auto s = *stormguard::config::hedging_settings_for(p);
///  stormguard::any_budget budget(s.budget);
///  stormguard::hedger hedge(s.policy(), clock, rng, budget);
///  http::async_hedge(client, hedge, req, http::hedge_http_options_for(s), s.call(clock.now()),
///                    handler);
/// \endcode
#ifndef STORMGUARD_HTTP_HEDGE_POLICY_HPP
#define STORMGUARD_HTTP_HEDGE_POLICY_HPP

#include "stormguard/config/executors.hpp"
#include "stormguard/http/hedge.hpp"

namespace stormguard::http {

/// The HTTP side of a policy's hedging (config::hedging_settings, from
/// config::hedging_settings_for): its non-fatal statuses, as hedge_http_options. See the file
/// comment for the whole path from a policy file to http::async_hedge. Never throws.
[[nodiscard]] inline hedge_http_options hedge_http_options_for(
    const config::hedging_settings& settings) {
  return {.non_fatal_statuses = settings.non_fatal_statuses.to_vector()};
}

}  // namespace stormguard::http

#endif  // STORMGUARD_HTTP_HEDGE_POLICY_HPP
