// SPDX-License-Identifier: Apache-2.0
// `stormguard http --hedge DELAY [--hedges N]`: the request sent as hedged copies through
// stormguard::http::async_hedge (concurrent libcurl transfers on one Asio loop).
#ifndef STORMGUARD_CLI_HTTP_HEDGE_HPP
#define STORMGUARD_CLI_HTTP_HEDGE_HPP

#include <vector>

#include "stormguard/http/client.hpp"
#include "stormguard/http/hedge.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::cli {

/// The winner's (or the last copy's) result and the per-call report of a hedged request.
struct hedged_http_call {
  http::result result;
  hedge_report report;
};

/// Sends `req` as up to `copies` copies (2..5), `delay` apart, with `client`'s settings (its
/// retries are not used: each copy is one attempt), every copy after the first charged to a ratio
/// budget with the default settings; statuses in `non_fatal` send the next copy at once. Throws
/// std::invalid_argument for a bad request or copies outside [2, 5] (naming
/// hedging.max_attempts).
[[nodiscard]] hedged_http_call perform_hedged(http::client_options client, const http::request& req,
                                              const call_options& call, duration delay, int copies,
                                              const std::vector<int>& non_fatal);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_HTTP_HEDGE_HPP
