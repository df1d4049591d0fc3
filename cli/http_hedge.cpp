// SPDX-License-Identifier: Apache-2.0
// `stormguard http` hedged: see http_hedge.hpp.
#include "http_hedge.hpp"

#include <asio/io_context.hpp>
#include <optional>
#include <utility>

#include "policy_flags.hpp"
#include "stormguard/budget_kinds.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/random.hpp"

namespace stormguard::cli {

std::optional<config::hedging_settings> hedging_of(const config::policy& policy,
                                                   const CLI::Option* hedge_option,
                                                   const std::string& hedge,
                                                   const CLI::Option* hedges_option, int hedges) {
  std::optional<config::hedging_settings> s = config::hedging_settings_for(policy);
  if (!typed(hedge_option)) {
    if (typed(hedges_option) && !s) {
      throw CLI::ValidationError("--hedges",
                                 "needs --hedge D, or a --policy with a \"hedging\" object");
    }
    if (!s) return std::nullopt;
  } else if (!s) {
    // --hedge on a policy that retries: the same policy hedged instead (2 copies unless --hedges
    // says), through the one adapter: its budget, Retry-After limit and time limits.
    config::policy hedged = policy;
    hedged.hedging.emplace();
    hedged.hedging->options.max_attempts = 2;
    s = config::hedging_settings_for(hedged);
  }
  if (typed(hedge_option)) {
    const duration delay = parse_duration_flag("--hedge", hedge);
    if (delay > std::chrono::hours(1)) {
      throw CLI::ValidationError("--hedge", "at most 1h; got " + hedge);
    }
    s->options.delay = delay;
    s->options.delay_quantile = 0;  // a fixed delay, as typed
  }
  if (typed(hedges_option) || (typed(hedge_option) && !policy.hedging)) {
    if (hedges < 2 || hedges > 5) {
      throw CLI::ValidationError("--hedges",
                                 "copies in all, 2 to 5; got " + std::to_string(hedges));
    }
    s->options.max_attempts = hedges;
  }
  return s;
}

hedged_http_call perform_hedged(http::client_options client, const http::request& req,
                                const call_options& call, const config::hedging_settings& settings,
                                fleet_syncers& fleet) {
  client.retry.max_retries = 0;      // each copy is one attempt
  client.budget = budget_options{};  // the copies draw from the hedger's budget, not the client's
  asio::io_context io;
  http::async_client transfers(io.get_executor(), client);
  real_clock clock;
  random_generator rng;
  any_budget budget(settings.budget);
  fleet.attach(budget);  // a fleet budget naming a store: its Redis syncer (else nothing)
  struct detach {
    fleet_syncers& f;
    ~detach() {
      f.flush();  // this call's spend reaches the store
      f.clear();  // before `budget` goes
    }
  } detach_at_exit{fleet};
  std::optional<latency_tracker> tracker;
  if (settings.options.delay_quantile > 0) tracker.emplace(settings.options.delay_quantile);
  hedger hedge(settings.policy(), clock, rng, budget, tracker ? &*tracker : nullptr);
  std::optional<http::hedged_result> out;
  http::async_hedge(transfers, hedge, req, http::hedge_http_options_for(settings), call,
                    [&out](http::hedged_result r) { out = std::move(r); });
  io.run();
  hedged_http_call done;
  if (out) {
    done.result = std::move(out->result);
    done.report = out->report;
  }
  return done;
}

}  // namespace stormguard::cli
