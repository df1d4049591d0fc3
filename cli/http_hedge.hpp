// SPDX-License-Identifier: Apache-2.0
// `stormguard http` hedged: the request sent as hedged copies through stormguard::http::async_hedge
// (concurrent libcurl transfers on one Asio loop), when the --policy has a `hedging` object
// (`builtin:hedged`, a policy file) or --hedge DELAY [--hedges N] is given.
#ifndef STORMGUARD_CLI_HTTP_HEDGE_HPP
#define STORMGUARD_CLI_HTTP_HEDGE_HPP

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "fleet_store.hpp"
#include "stormguard/config/executors.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/http/client.hpp"
#include "stormguard/http/hedge.hpp"
#include "stormguard/http/hedge_policy.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::cli {

/// The winner's (or the last copy's) result and the per-call report of a hedged request.
struct hedged_http_call {
  http::result result;
  hedge_report report;
};

/// The hedging of the call: the policy's (config::hedging_settings_for), with --hedge's delay and
/// --hedges' copies in all replacing its delay and max_attempts when typed; with --hedge and a
/// policy that retries, a hedging of --hedges copies (default 2) `--hedge` apart, drawing from
/// the policy's budget (`policy.budget`, any kind). std::nullopt: the call retries. Throws
/// CLI::ValidationError naming --hedge (not a duration, above 1 h) or --hedges (outside 2..5),
/// or --hedges given without hedging.
[[nodiscard]] std::optional<config::hedging_settings> hedging_of(const config::policy& policy,
                                                                 const CLI::Option* hedge_option,
                                                                 const std::string& hedge,
                                                                 const CLI::Option* hedges_option,
                                                                 int hedges);

/// Sends `req` as hedged copies with `client`'s settings (its retries and its own budget are not
/// used: each copy is one attempt, and the copies after the first draw from `settings.budget`,
/// any kind, through the budget protocol). `call`'s deadline and stop token apply to the call.
/// A fleet budget naming a store gets its syncer from `fleet` (synced before the first copy and
/// flushed after the last; `fleet` is cleared before the budget goes). Throws
/// std::invalid_argument for a bad request.
[[nodiscard]] hedged_http_call perform_hedged(http::client_options client, const http::request& req,
                                              const call_options& call,
                                              const config::hedging_settings& settings,
                                              fleet_syncers& fleet);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_HTTP_HEDGE_HPP
