// SPDX-License-Identifier: Apache-2.0
// `stormguard http` hedged: see http_hedge.hpp.
#include "http_hedge.hpp"

#include <asio/async_result.hpp>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/io_context.hpp>
#include <functional>
#include <memory>
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

namespace {

using copy_hook = std::function<void(int, const http::result&)>;

// http::async_hedge's copy operation, telling `on_copy` each copy's number and result as it
// ends (before the hedging machinery sees it).
struct numbered_copy_op {
  http::detail::copy_op inner;
  const copy_hook* on_copy;

  template <class Token>
  auto operator()(const attempt_context& ctx, Token&& token) const {
    return asio::async_initiate<Token, void(http::detail::copy_outcome)>(
        [inner = inner, on_copy = on_copy, ctx](auto handler) {
          auto slot = asio::get_associated_cancellation_slot(handler);
          inner(ctx, asio::bind_cancellation_slot(
                         slot, [h = std::move(handler), on_copy,
                                copy = ctx.attempt](http::detail::copy_outcome o) mutable {
                           (*on_copy)(copy, o.r);
                           std::move(h)(std::move(o));
                         }));
        },
        token);
  }
};

// http::async_hedge (stormguard/http/hedge.hpp) with each copy's end told to `on_copy`: the same
// request sharing, key, classifier and result, through the same detail pieces.
template <class Hedger, class Handler>
void hedge_numbered(http::async_client& client, Hedger& config, http::request req,
                    const http::hedge_http_options& options, const call_options& call,
                    const copy_hook& on_copy, Handler done) {
  auto shared = std::make_shared<http::detail::hedged_request>();
  if (req.idempotency.what() == http::key::kind::generate) {
    req.idempotency = http::key::use(make_idempotency_key());
  }
  shared->hedge =
      is_idempotent_method(req.method) || req.idempotency.what() != http::key::kind::none;
  shared->req = std::move(req);
  auto finish = [done = std::move(done)](hedge_result<http::result, http::result> r) mutable {
    http::hedged_result out;
    out.report = r.report;
    if (r.value) {
      out.result = std::move(*r.value);
    } else if (r.last_error) {
      out.result = std::move(*r.last_error);
    }
    out.result.reason = r.reason;
    out.result.attempts = r.report.sent;
    done(std::move(out));
  };
  if (!shared->hedge) {
    // One copy (a non-idempotent method without a key), as http::async_hedge sends it.
    client.async_perform(shared->req, call,
                         [f = std::move(finish), &on_copy](http::result r) mutable {
                           on_copy(1, r);
                           hedge_result<http::result, http::result> h;
                           h.reason = r.reason;
                           h.report.sent = r.attempts;
                           if (r.ok()) {
                             h.report.winner = 1;
                             h.value = std::move(r);
                           } else {
                             h.last_error = std::move(r);
                           }
                           f(std::move(h));
                         });
    return;
  }
  http::detail::copy_classifier classify{shared, options.non_fatal_statuses, &config.clk()};
  stormguard::async_hedge(config, client.get_executor(),
                          numbered_copy_op{http::detail::copy_op{&client, shared, call}, &on_copy},
                          std::move(classify), call, std::move(finish));
}

}  // namespace

hedged_http_call perform_hedged(http::client_options client, const http::request& req,
                                const call_options& call, const config::hedging_settings& settings,
                                fleet_syncers& fleet, const copy_hook& on_copy) {
  client.retry.max_retries = 0;              // each copy is one attempt
  if (on_copy) client.on_attempt = nullptr;  // it would number every copy 1
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
  const http::hedge_http_options options = http::hedge_http_options_for(settings);
  if (on_copy) {
    hedge_numbered(transfers, hedge, req, options, call, on_copy,
                   [&out](http::hedged_result r) { out = std::move(r); });
  } else {
    http::async_hedge(transfers, hedge, req, options, call,
                      [&out](http::hedged_result r) { out = std::move(r); });
  }
  io.run();
  hedged_http_call done;
  if (out) {
    done.result = std::move(out->result);
    done.report = out->report;
  }
  return done;
}

}  // namespace stormguard::cli
