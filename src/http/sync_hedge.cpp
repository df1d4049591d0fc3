// SPDX-License-Identifier: Apache-2.0
// The synchronous client's hedged calls: http::async_hedge on a private event loop (see
// sync_hedge.hpp).
#include "http/sync_hedge.hpp"

#include <asio/io_context.hpp>
#include <optional>
#include <string>
#include <utility>

#include "stormguard/http/hedge.hpp"

namespace stormguard::http::detail {

namespace {

const client_hedging& validated(const client_options& o) {
  if (o.retry.max_retries != 0) {
    bad_option("hedging needs retry.max_retries == 0 (a client retries or hedges, gRFC A6), got " +
               std::to_string(o.retry.max_retries));
  }
  if (o.hedging->resolve_wait < duration::zero()) {
    bad_option("hedging.resolve_wait must be >= 0, got " +
               std::to_string(o.hedging->resolve_wait.count()) + "ns");
  }
  return *o.hedging;
}

// The options of the copies' client: one attempt each, no budget of their own (the copies after
// the first are charged to the host's budget by the hedger), the transfer settings of the client.
client_options copy_options(client_options o) {
  o.retry.max_retries = 0;
  o.budget = no_budget{};
  o.shared_budgets.reset();
  o.attach_budget = {};
  o.hedging.reset();
  return o;
}

}  // namespace

struct sync_hedging::loop {
  loop(const client_options& options, clock& clk, random_generator& random)
      : copies(io.get_executor(), copy_options(options), clk, random) {}
  ::asio::io_context io;
  async_client copies;  // destroyed before io: it abandons what is left on it
};

sync_hedging::sync_hedging(const client_options& options, clock& clk, random_generator& random)
    : options_(&options), policy_(validated(options).policy), clk_(&clk), random_(&random) {
  if (policy_.options().delay_quantile > 0) {
    tracker_ = std::make_unique<latency_tracker>(policy_.options().delay_quantile);
  }
}

sync_hedging::~sync_hedging() = default;

result sync_hedging::perform(const request& req, const call_options& call,
                             request_planner& planner) {
  request copy = req;
  if (copy.idempotency.what() == key::kind::generate) {
    copy.idempotency = key::use(make_idempotency_key());  // the same key on every copy
  }
  const call_plan plan = planner.plan(copy);  // validates; the host's budget
  hedger<random_generator, any_budget> hedge(policy_, *clk_, *random_, *plan.budget,
                                             tracker_.get());
  const client_hedging& settings = *options_->hedging;
  if (settings.on_end) hedge = hedge.on_end(settings.on_end);
  if (!loop_) loop_ = std::make_unique<loop>(*options_, *clk_, *random_);
  std::optional<hedged_result> out;
  try {
    loop_->io.restart();
    http::async_hedge(loop_->copies, hedge, std::move(copy),
                      hedge_http_options{.non_fatal_statuses = settings.non_fatal_statuses,
                                         .resolve_wait = settings.resolve_wait},
                      call, [&out](hedged_result r) { out = std::move(r); });
    while (!out && loop_->io.run_one() > 0) {
    }
  } catch (...) {
    // A hook threw inside the loop: what is left of the call is abandoned with the loop (its
    // transfers removed, their connections closed); the next call makes a new one.
    loop_.reset();
    throw;
  }
  if (!out) {  // cannot happen: the operation always completes while the loop runs
    loop_.reset();
    result failed;
    failed.reason = end_reason::cancelled;
    return failed;
  }
  result r = std::move(out->result);
  r.hedging = out->report;
  return r;
}

}  // namespace stormguard::http::detail
