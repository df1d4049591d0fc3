// SPDX-License-Identifier: Apache-2.0
// The hedge counters of stormguard::metrics (hedges sent, won, refused by the budget, copies
// cancelled) recorded through the hedging executor's end hook (retry_metrics::instrument on a
// hedger), scraped from a prometheus-cpp registry. Copies are scripted operations on an
// io_context with a hedging delay of 0 (every copy at once): no timer, no sleep.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "stormguard/asio/hedge.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/metrics/retry_metrics.hpp"
#include "stormguard/random.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::end_reason;
using stormguard::hedge_report;
using stormguard::hedger;
using stormguard::hedging_policy;
using stormguard::metrics::retry_metrics;
using stormguard::testing::manual_clock;

std::string scrape(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

// The value of the sample `series` (name and labels as serialised), or nullopt.
std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

// What each copy does: answer at once with success or an error, or hang until cancelled (then
// operation_aborted).
enum class copy_does { succeed, fail, hang };

struct scripted_op {
  asio::io_context* io;
  std::vector<copy_does> script;
  template <class Token>
  auto operator()(const stormguard::attempt_context& ctx, Token&& token) const {
    const copy_does what = script.at(static_cast<std::size_t>(ctx.attempt - 1));
    return asio::async_initiate<Token, void(std::error_code)>(
        [io = io, what](auto handler) {
          using handler_type = decltype(handler);
          if (what != copy_does::hang) {
            const std::error_code ec = what == copy_does::succeed
                                           ? std::error_code()
                                           : std::make_error_code(std::errc::connection_refused);
            asio::post(*io, [h = std::move(handler), ec]() mutable { std::move(h)(ec); });
            return;
          }
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto held = std::make_shared<std::optional<handler_type>>(std::move(handler));
          slot.assign([io, held](asio::cancellation_type) {
            asio::post(*io, [held] {
              if (*held) {
                auto h = std::move(**held);
                held->reset();
                std::move(h)(make_error_code(asio::error::operation_aborted));
              }
            });
          });
        },
        token);
  }
};

template <class H>
stormguard::hedge_result<stormguard::done_t, std::error_code> run_call(
    asio::io_context& io, H& hedge, std::vector<copy_does> script) {
  std::optional<stormguard::hedge_result<stormguard::done_t, std::error_code>> out;
  stormguard::async_hedge(hedge, io.get_executor(), scripted_op{&io, std::move(script)},
                          [&out](auto r) { out = std::move(r); });
  io.restart();
  io.run();
  EXPECT_TRUE(out.has_value());
  return std::move(*out);
}

TEST(HedgeMetrics, CountHedgesSentWonAndCancelled) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  asio::io_context io;
  manual_clock clock;
  stormguard::random_generator rng(1);
  stormguard::ratio_budget budget;
  const hedger plain(hedging_policy({.max_attempts = 3, .delay = 0ms}), clock, rng, budget);
  auto hedge = metrics.instrument(plain, "api");
  // Copy 2 wins; copies 1 and 3 hang until the executor cancels them.
  auto r = run_call(io, hedge, {copy_does::hang, copy_does::succeed, copy_does::hang});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.report, (hedge_report{.winner = 2,
                                    .sent = 3,
                                    .refused = 0,
                                    .cancelled = 2,
                                    .stop = stormguard::hedge_stop::max_attempts}));
  // The first copy wins the second call: one more call, no hedge won.
  (void)run_call(io, hedge, {copy_does::succeed, copy_does::hang, copy_does::hang});
  const std::string text = scrape(registry);
  EXPECT_EQ(sample(text, R"(stormguard_hedges_sent_total{client="api"})"), 4.0) << text;
  EXPECT_EQ(sample(text, R"(stormguard_hedges_won_total{client="api"})"), 1.0) << text;
  EXPECT_EQ(sample(text, R"(stormguard_hedges_cancelled_total{client="api"})"), 4.0) << text;
  EXPECT_EQ(sample(text, R"(stormguard_hedges_refused_total{budget="ratio",client="api"})"), 0.0)
      << text;
  EXPECT_EQ(sample(text, R"(stormguard_calls_total{client="api",reason="success"})"), 2.0) << text;
}

TEST(HedgeMetrics, CountCopiesTheBudgetRefusedAndTheCallsThatFailed) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  asio::io_context io;
  manual_clock clock;
  stormguard::random_generator rng(1);
  stormguard::ratio_budget budget({.ratio = 0.0, .min_retries_per_second = 0});
  int own_hook_calls = 0;
  const auto plain =
      hedger(hedging_policy({.max_attempts = 2, .delay = 0ms}), clock, rng, budget)
          .on_end([&own_hook_calls](end_reason, const hedge_report&) { ++own_hook_calls; });
  auto hedge = metrics.instrument(plain, "api");
  // The second copy is refused: the first one's failure ends the call.
  auto r = run_call(io, hedge, {copy_does::fail, copy_does::succeed});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.report.refused, 1);
  EXPECT_EQ(r.report.sent, 1);
  EXPECT_EQ(own_hook_calls, 1) << "the hedger's own end hook is still called";
  const std::string text = scrape(registry);
  EXPECT_EQ(sample(text, R"(stormguard_hedges_refused_total{budget="ratio",client="api"})"), 1.0)
      << text;
  EXPECT_EQ(sample(text, R"(stormguard_hedges_sent_total{client="api"})"), 0.0) << text;
  EXPECT_EQ(sample(text, R"(stormguard_calls_total{client="api",reason="budget_exhausted"})"), 1.0)
      << text;
  EXPECT_EQ(sample(text, R"(stormguard_budget_denials_total{budget="ratio",client="api"})"), 1.0)
      << text;
}

TEST(HedgeMetrics, AHedgerWithoutAHookRecordsNothing) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  (void)metrics.for_client("api", "none");
  asio::io_context io;
  manual_clock clock;
  stormguard::random_generator rng(1);
  hedger hedge(hedging_policy({.max_attempts = 2, .delay = 0ms}), clock, rng);
  (void)run_call(io, hedge, {copy_does::hang, copy_does::succeed});
  const std::string text = scrape(registry);
  EXPECT_EQ(sample(text, R"(stormguard_hedges_sent_total{client="api"})"), 0.0) << text;
}

}  // namespace
