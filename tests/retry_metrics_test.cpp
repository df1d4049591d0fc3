// SPDX-License-Identifier: Apache-2.0
// stormguard::metrics::retry_metrics: the exposition text of a real prometheus-cpp registry after
// scripted sequences of failures, through the sync retrier, async_retry and the HTTP client.
#include "stormguard/metrics/retry_metrics.hpp"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "stormguard/asio/manual_timer.hpp"
#include "stormguard/asio/retry.hpp"
#include "stormguard/budget.hpp"
#include "stormguard/metrics/http.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "stormguard/testing/scripted_random.hpp"
#include "support/http_test_server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_context;
using stormguard::attempt_event;
using stormguard::attempt_status;
using stormguard::classification;
using stormguard::end_reason;
using stormguard::random_generator;
using stormguard::retrier;
using stormguard::retry_policy;
using stormguard::metrics::retry_metrics;
using stormguard::testing::fraction;
using stormguard::testing::manual_clock;
using stormguard::testing::scripted_random;

const std::error_code k_refused = std::make_error_code(std::errc::connection_refused);

std::string scrape(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

// The value of the sample `series` (name and labels exactly as serialised, labels sorted by
// name), or nullopt when the exposition has no such line.
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

double value(const std::string& text, const std::string& series) {
  const std::optional<double> v = sample(text, series);
  if (!v) throw std::runtime_error("no sample " + series + " in\n" + text);
  return *v;
}

std::string attempts(const std::string& client, const std::string& outcome) {
  return "stormguard_attempts_total{client=\"" + client + "\",outcome=\"" + outcome + "\"}";
}
std::string calls(const std::string& client, const std::string& reason) {
  return "stormguard_calls_total{client=\"" + client + "\",reason=\"" + reason + "\"}";
}
std::string with_client(const std::string& name, const std::string& client) {
  return name + "{client=\"" + client + "\"}";
}

retry_policy fast_policy(int retries = 3) {
  return retry_policy({.max_retries = retries,
                       .backoff = {.base = 10ms, .cap = 80ms, .jitter = stormguard::jitter::none}});
}

TEST(RetryMetrics, CountsEveryAttemptRetryAndEndOfOneCall) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  manual_clock clock;
  random_generator rng(1);
  const retrier retry(fast_policy(), clock, rng);
  auto measured = metrics.instrument(retry, "db");
  int n = 0;
  auto r = measured([&](const attempt_context&) -> std::error_code {
    return ++n < 3 ? k_refused : std::error_code();
  });
  ASSERT_TRUE(r.ok());
  const std::string text = scrape(registry);
  EXPECT_EQ(value(text, attempts("db", "success")), 1);
  EXPECT_EQ(value(text, attempts("db", "failure")), 2);
  EXPECT_EQ(value(text, attempts("db", "timeout")), 0);
  EXPECT_EQ(value(text, with_client("stormguard_retries_total", "db")), 2);
  EXPECT_EQ(value(text, calls("db", "success")), 1);
  EXPECT_EQ(value(text, calls("db", "attempts_exhausted")), 0);
  EXPECT_EQ(value(text, with_client("stormguard_backoff_delay_seconds_count", "db")), 2);
  EXPECT_DOUBLE_EQ(value(text, with_client("stormguard_backoff_delay_seconds_sum", "db")), 0.03)
      << "10 ms then 20 ms, no jitter";
  EXPECT_EQ(value(text, "stormguard_budget_denials_total{budget=\"none\",client=\"db\"}"), 0);
  EXPECT_NE(text.find("# TYPE stormguard_attempts_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE stormguard_backoff_delay_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("# TYPE stormguard_budget_level gauge"), std::string::npos);
}

TEST(RetryMetrics, KeepsTheRetriersOwnHooksAndCallsThemAfterRecording) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  manual_clock clock;
  random_generator rng(1);
  std::vector<int> seen_attempts;
  std::vector<end_reason> ends;
  const auto retry =
      retrier(fast_policy(1), clock, rng)
          .on_attempt([&](const attempt_event& e) { seen_attempts.push_back(e.attempt); })
          .on_end([&](const auto& result) { ends.push_back(result.reason); });
  auto measured = metrics.instrument(retry, "db");
  auto r = measured([&](const attempt_context&) { return k_refused; });
  EXPECT_EQ(r.reason, end_reason::attempts_exhausted);
  EXPECT_EQ(seen_attempts, (std::vector{1, 2}));
  EXPECT_EQ(ends, (std::vector{end_reason::attempts_exhausted}));
  const std::string text = scrape(registry);
  EXPECT_EQ(value(text, attempts("db", "failure")), 2);
  EXPECT_EQ(value(text, calls("db", "attempts_exhausted")), 1);
}

TEST(RetryMetrics, CountsRetryAfterHonouredAndNonRetryableOutcomes) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  manual_clock clock;
  random_generator rng(1);
  auto measured = metrics.instrument(retrier(fast_policy(), clock, rng), "api");
  int n = 0;
  auto r = measured([&](const attempt_context&) { return ++n == 1 ? k_refused : k_refused; },
                    [&](const std::error_code&) {
                      return n == 1 ? classification::retry_after(2s) : classification::stop();
                    });
  EXPECT_EQ(r.reason, end_reason::not_retryable);
  const std::string text = scrape(registry);
  EXPECT_EQ(value(text, with_client("stormguard_retry_after_honoured_total", "api")), 1);
  EXPECT_EQ(value(text, attempts("api", "failure")), 1);
  EXPECT_EQ(value(text, attempts("api", "not_retryable")), 1);
  EXPECT_EQ(value(text, calls("api", "not_retryable")), 1);
  EXPECT_GE(value(text, with_client("stormguard_backoff_delay_seconds_sum", "api")), 2.0);
}

// The "done when" of issue 15 at small scale: a scripted incident against a ratio budget; the
// scraped counters add up (attempts = requests + retries), the retries stay within the budget's
// bound, and the budget denies during the incident.
TEST(RetryMetrics, ScrapedCountersAddUpDuringAnIncidentWithARatioBudget) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  manual_clock clock;
  // One draw per retry at most (no jitter draws nothing): script plenty, all mid-range.
  scripted_random rng(std::vector<std::uint64_t>(2000, fraction(0.5)));
  // 10 % of requests plus 1 retry/s over 10 s: at most 0.1 · requests + 10 retries in the window.
  stormguard::ratio_budget budget(
      {.ratio = 0.1, .window = std::chrono::seconds(10), .min_retries_per_second = 1});
  auto measured = metrics.instrument(retrier(fast_policy(3), clock, rng, budget), "checkout");
  constexpr int k_requests = 200;
  int succeeded = 0;
  for (int i = 0; i < k_requests; ++i) {
    // Healthy, then an incident (every attempt fails) from request 50 to 149, then healthy
    // but for the last request (which refreshes the budget level gauge).
    const bool down = (i >= 50 && i < 150) || i == k_requests - 1;
    clock.advance(1ms);
    auto r = measured([&](const attempt_context&) { return down ? k_refused : std::error_code(); });
    succeeded += r.ok() ? 1 : 0;
  }
  ASSERT_LT(clock.now() - stormguard::time_point{}, std::chrono::seconds(10)) << "one window";
  const std::string text = scrape(registry);
  double all_attempts = 0;
  for (const char* o : {"success", "failure", "timeout", "not_retryable"}) {
    all_attempts += value(text, attempts("checkout", o));
  }
  double requests = 0;
  for (const char* reason :
       {"success", "not_retryable", "attempts_exhausted", "budget_exhausted",
        "retry_after_too_long", "deadline_exceeded", "cancelled", "throttled"}) {
    requests += value(text, calls("checkout", reason));
  }
  const double retries = value(text, with_client("stormguard_retries_total", "checkout"));
  const double denials =
      value(text, "stormguard_budget_denials_total{budget=\"ratio\",client=\"checkout\"}");
  EXPECT_EQ(requests, k_requests);
  EXPECT_EQ(all_attempts, requests + retries) << "attempts = requests + retries";
  EXPECT_LE(retries, 0.1 * k_requests + 10) << "retries within the budget's bound";
  EXPECT_GT(retries, 0);
  EXPECT_GT(denials, 0) << "the budget refused retries during the incident";
  EXPECT_EQ(value(text, calls("checkout", "budget_exhausted")), denials);
  EXPECT_EQ(value(text, calls("checkout", "success")), succeeded);
  EXPECT_EQ(value(text, attempts("checkout", "success")), succeeded);
  EXPECT_EQ(value(text, "stormguard_budget_level{budget=\"ratio\",client=\"checkout\"}"),
            static_cast<double>(budget.balance(clock.now())));
}

struct scripted_async_op {
  asio::io_context* io;
  int failures;
  template <class Token>
  auto operator()(const attempt_context& ctx, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, int)>(
        [this, ctx](auto handler) {
          const std::error_code ec = ctx.attempt <= failures ? k_refused : std::error_code();
          asio::post(*io, [h = std::move(handler), ec, n = ctx.attempt]() mutable { h(ec, n); });
        },
        token);
  }
};

TEST(RetryMetrics, AsyncRetryRecordsTheSameAsTheSyncRetrier) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  manual_clock clock;
  random_generator rng(3);
  auto measured = metrics.instrument(retrier(fast_policy(2), clock, rng), "async");
  asio::io_context io;
  int done = 0;
  for (int failures : {0, 1, 5}) {
    stormguard::async_retry<stormguard::testing::manual_timer>(
        measured, io.get_executor(), scripted_async_op{&io, failures}, [&](auto) { ++done; });
  }
  io.run();
  ASSERT_EQ(done, 3);
  const std::string text = scrape(registry);
  EXPECT_EQ(value(text, attempts("async", "success")), 2);
  EXPECT_EQ(value(text, attempts("async", "failure")), 1 + 3);
  EXPECT_EQ(value(text, with_client("stormguard_retries_total", "async")), 1 + 2);
  EXPECT_EQ(value(text, calls("async", "success")), 2);
  EXPECT_EQ(value(text, calls("async", "attempts_exhausted")), 1);
}

TEST(RetryMetrics, HttpClientHookCountsAttemptsAgainstALoopbackServer) {
  stormguard::test_support::http_test_server server;
  server.script({{.status = 503}, {.status = 503, .headers = {{"Retry-After", "0"}}}});
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  stormguard::http::client_options options;
  options.retry = {.max_retries = 3, .backoff = {.base = 1ms, .cap = 2ms}};
  options.on_attempt = stormguard::metrics::http_hook(metrics, "loopback");
  manual_clock clock;
  random_generator rng(5);
  stormguard::http::client client(options, clock, rng);
  const auto r = client.perform({.url = server.url("/x")});
  ASSERT_TRUE(r.ok());
  const std::string text = scrape(registry);
  EXPECT_EQ(value(text, attempts("loopback", "success")), 1);
  EXPECT_EQ(value(text, attempts("loopback", "failure")), 2);
  EXPECT_EQ(value(text, with_client("stormguard_retries_total", "loopback")), 2);
  EXPECT_EQ(value(text, with_client("stormguard_retry_after_honoured_total", "loopback")), 1);
  EXPECT_EQ(value(text, calls("loopback", "success")), 1);
  EXPECT_EQ(
      static_cast<double>(server.requests().size()),
      value(text, attempts("loopback", "success")) + value(text, attempts("loopback", "failure")));
}

TEST(RetryMetrics, HttpClientWithAQuotaBudgetPerHostIsLabelledQuota) {
  // The per-host budget holds any kind: a quota of 10 tokens pays for two retries (5 each).
  stormguard::test_support::http_test_server server;
  server.set_fallback({.status = 503});
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  stormguard::http::client_options options;
  options.retry = {.max_retries = 9, .backoff = {.base = 1ms, .cap = 2ms}};
  options.budget = stormguard::retry_quota_options{.max_tokens = 10};
  options.on_attempt = stormguard::metrics::http_hook(metrics, "quota-client", options);
  manual_clock clock;
  random_generator rng(5);
  stormguard::http::client client(options, clock, rng);
  const auto r = client.perform({.url = server.url("/x")});
  EXPECT_EQ(r.reason, stormguard::end_reason::budget_exhausted);
  EXPECT_EQ(r.attempts, 3);
  EXPECT_EQ(server.requests().size(), 3U);
  EXPECT_EQ(client.budgets().for_host(client.budgets().hosts().at(0)).kind(), "quota");
  const std::string text = scrape(registry);
  EXPECT_EQ(
      value(text, "stormguard_budget_denials_total{budget=\"quota\",client=\"quota-client\"}"), 1);
}

TEST(RetryMetrics, BudgetLabelsAreThePolicyFilesKindNames) {
  // Since the one list of budget kinds: "adaptive" (it was "adaptive_throttle").
  EXPECT_EQ(stormguard::metrics::budget_kind<stormguard::adaptive_throttle>(), "adaptive");
  EXPECT_EQ(stormguard::metrics::budget_kind<stormguard::retry_quota>(), "quota");
  EXPECT_EQ(stormguard::metrics::budget_kind<stormguard::no_budget>(), "none");
  const stormguard::any_budget quota(stormguard::retry_quota_options{});
  EXPECT_EQ(stormguard::metrics::budget_kind(quota), "quota");
  EXPECT_EQ(stormguard::metrics::budget_level(quota, stormguard::time_point{}), 500.0);
}

TEST(RetryMetrics, RejectsAnInvalidLabelOrPrefix) {
  prometheus::Registry registry;
  EXPECT_THROW(retry_metrics(registry, {.label = "bad-label"}), std::invalid_argument);
  EXPECT_THROW(retry_metrics(registry, {.label = "outcome"}), std::invalid_argument);
  EXPECT_THROW(retry_metrics(registry, {.prefix = "9x"}), std::invalid_argument);
}

TEST(RetryMetrics, ForClientReturnsTheSameInstrumentsForTheSameLabels) {
  prometheus::Registry registry;
  retry_metrics metrics(registry);
  EXPECT_EQ(&metrics.for_client("a"), &metrics.for_client("a"));
  EXPECT_NE(&metrics.for_client("a"), &metrics.for_client("b"));
  EXPECT_NE(&metrics.for_client("a", "ratio"), &metrics.for_client("a"));
}

}  // namespace
