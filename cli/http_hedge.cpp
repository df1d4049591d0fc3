// SPDX-License-Identifier: Apache-2.0
// `stormguard http --hedge`: see http_hedge.hpp.
#include "http_hedge.hpp"

#include <asio/io_context.hpp>
#include <optional>
#include <utility>

#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/random.hpp"

namespace stormguard::cli {

hedged_http_call perform_hedged(http::client_options client, const http::request& req,
                                const call_options& call, duration delay, int copies,
                                const std::vector<int>& non_fatal) {
  const hedging_policy policy({.max_attempts = copies, .delay = delay});
  client.retry.max_retries = 0;  // each copy is one attempt
  asio::io_context io;
  http::async_client transfers(io.get_executor(), client);
  real_clock clock;
  random_generator rng;
  ratio_budget budget;
  hedger hedge(policy, clock, rng, budget);
  std::optional<http::hedged_result> out;
  http::async_hedge(transfers, hedge, req, {.non_fatal_statuses = non_fatal}, call,
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
