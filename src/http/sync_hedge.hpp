// SPDX-License-Identifier: Apache-2.0
// src/http/sync_hedge.hpp (internal): hedged calls of the synchronous client (client.cpp), when
// client_options::hedging is set. The copies run through http::async_hedge (hedge.hpp) on an
// async_client and an io_context that the synchronous client owns and runs on the calling thread
// for the length of one call: the hedging decision, the verdict on each copy, the cancellation of
// the losers and the spreading over the host's addresses are the asynchronous path's own (the
// host looked up by asio_host_resolver on Asio's resolver thread, copy 2 waiting for it at most
// hedge_http_options' default resolve_wait).
#ifndef STORMGUARD_SRC_HTTP_SYNC_HEDGE_HPP
#define STORMGUARD_SRC_HTTP_SYNC_HEDGE_HPP

#include <memory>

#include "http/transfer.hpp"
#include "stormguard/http/client.hpp"

namespace stormguard::http::detail {

/// The hedging of one http::client. Not thread-safe (the client's thread).
class sync_hedging {
 public:
  /// Validates options.hedging (set): the policy as hedging_policy does, retry.max_retries == 0
  /// (std::invalid_argument naming the field). `clk` and `random` must outlive this object. The
  /// event loop and its libcurl handles are made at the first call.
  sync_hedging(const client_options& options, clock& clk, random_generator& random);
  ~sync_hedging();
  sync_hedging(const sync_hedging&) = delete;
  sync_hedging& operator=(const sync_hedging&) = delete;

  /// One hedged call of `req`, whose copies after the first draw from the host's budget (from
  /// `planner`, which also validates the request: std::invalid_argument before anything starts).
  [[nodiscard]] result perform(const request& req, const call_options& call,
                               request_planner& planner);

 private:
  struct loop;
  const client_options* options_;
  hedging_policy policy_;
  clock* clk_;
  random_generator* random_;
  std::unique_ptr<latency_tracker> tracker_;  // for a delay that is a quantile
  std::unique_ptr<loop> loop_;                // made at the first call
};

}  // namespace stormguard::http::detail

#endif  // STORMGUARD_SRC_HTTP_SYNC_HEDGE_HPP
