// SPDX-License-Identifier: Apache-2.0
// stormguard::http::client: one libcurl transfer per attempt, retried by stormguard::retrier.
//
// The retry decision is not made here: an attempt's outcome goes to a classifier that asks the
// core (classify_http_status, classify_transport_failure, parse_retry_after), and the retrier
// asks retry_policy::decide. What lives here is the loop that drives one transfer
// (curl_multi_poll); what both clients share (validation, the call plan, the easy handle and its
// callbacks, the result) is in transfer.cpp, and the HTTP vocabulary both use (the CURLcode ->
// transport_phase table, failure kinds, per-host budgets) in vocabulary.cpp.
#include "stormguard/http/client.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "http/sync_hedge.hpp"
#include "http/transfer.hpp"
#include "stormguard/http/syntax.hpp"

namespace stormguard::http {

// ------------------------------------------------------------------------------------------------
// client
// ------------------------------------------------------------------------------------------------

struct client::impl {
  detail::client_setup setup;
  detail::request_planner planner;
  // With client_options::hedging (sync_hedge.cpp); validated before any libcurl handle exists.
  std::unique_ptr<detail::sync_hedging> hedging;
  CURLM* multi = nullptr;
  detail::easy_transfer transfer;

  impl(client_options o, clock* c, random_generator* r)
      : setup(std::move(o), c, r),
        planner(setup.options, *setup.budgets),
        hedging(setup.options.hedging ? std::make_unique<detail::sync_hedging>(
                                            setup.options, *setup.clk, *setup.random)
                                      : nullptr),
        multi(curl_multi_init()),
        transfer(setup.options) {
    if (multi == nullptr) {
      throw std::runtime_error("stormguard::http::client: cannot create a libcurl handle");
    }
  }

  ~impl() { curl_multi_cleanup(multi); }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  // One attempt: a 2xx or 3xx response, or the failure.
  outcome<response, detail::attempt_failure> attempt(const request& req, const detail::call_plan& p,
                                                     const attempt_context& ctx) {
    transfer.configure(req, p, ctx);
    return transfer.finish(run(ctx.stop), ctx, *setup.clk);
  }

  // Runs the configured transfer on the multi handle until it ends or `stop` is requested.
  CURLcode run(const std::stop_token& stop_token) {
    CURL* easy = transfer.handle();
    const CURLMcode added = curl_multi_add_handle(multi, easy);
    if (added != CURLM_OK) {
      throw std::runtime_error(std::string("stormguard::http::client: curl_multi_add_handle: ") +
                               curl_multi_strerror(added));
    }
    CURLcode code = CURLE_OK;
    {
      // A stop request wakes curl_multi_poll at once (curl_multi_wakeup is thread-safe) and the
      // loop, which checks the token after every curl_multi_perform, abandons the transfer (no
      // progress callback: curl_multi_perform never blocks, and libcurl calls one at every step).
      CURLM* m = multi;
      const std::stop_callback wake(stop_token, [m] { (void)curl_multi_wakeup(m); });
      for (bool done = false; !done;) {
        int running = 0;
        const CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) {
          code = CURLE_FAILED_INIT;
          std::snprintf(transfer.error_buffer(), CURL_ERROR_SIZE, "curl_multi_perform: %s",
                        curl_multi_strerror(mc));
          break;
        }
        int queued = 0;
        while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
          if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
            code = msg->data.result;
            done = true;
          }
        }
        if (done) break;
        if (stop_token.stop_requested()) {
          code = CURLE_ABORTED_BY_CALLBACK;
          break;
        }
        (void)curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
      }
    }
    (void)curl_multi_remove_handle(multi, easy);
    return code;
  }
};

client::client(client_options options)
    : impl_(std::make_unique<impl>(std::move(options), nullptr, nullptr)) {}

client::client(client_options options, clock& clk, random_generator& random)
    : impl_(std::make_unique<impl>(std::move(options), &clk, &random)) {}

client::~client() = default;
client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;

const client_options& client::options() const noexcept { return impl_->setup.options; }
host_budgets& client::budgets() noexcept { return *impl_->setup.budgets; }

result client::perform(const request& req, const call_options& call) {
  impl& self = *impl_;
  if (self.hedging) return self.hedging->perform(req, call, self.planner);
  const detail::call_plan p = self.planner.plan(req);
  const bool has_key = p.key_field.has_value();
  detail::call_report report(self.setup.options, p);
  const auto operation = [&](const attempt_context& ctx) { return self.attempt(req, p, ctx); };
  const auto classify = [&](const detail::attempt_failure& f) {
    return detail::classify_failure(self.setup.options, f, req.method, has_key);
  };
  auto retry = retrier(self.setup.policy, *self.setup.clk, *self.setup.random, *p.budget)
                   .on_retry([&](int attempt, const detail::attempt_failure& f, duration delay) {
                     report.on_retry(attempt, f, delay);
                   });
  return report.finish(retry(operation, classify, call));
}

}  // namespace stormguard::http
