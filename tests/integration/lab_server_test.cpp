// SPDX-License-Identifier: Apache-2.0
// stormguard::lab::server on 127.0.0.1 port 0 with tiny scenarios, requested with libcurl: the
// queue limit, the workers, the service time of each phase, the incident's error and loss rates,
// the counters and /control/start. Real time, so every bound has a tolerance; each test < 2 s.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "support/lab_scenarios.hpp"

namespace {

namespace lab = stormguard::lab;
namespace sim = stormguard::sim;
using std::chrono::milliseconds;
using clock_type = std::chrono::steady_clock;

using stormguard::test_support::tiny_scenario;

std::unique_ptr<lab::server> start(const sim::scenario& s, lab::server_options o = {}) {
  auto started = lab::server::start(s, o);
  if (!started) ADD_FAILURE() << started.error();
  return started ? *std::move(started) : nullptr;
}

struct fetched {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
  milliseconds took{};
};

std::size_t append(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// One request on `curl` (reused: keep-alive), or on a new handle when null.
fetched fetch(const std::string& url, milliseconds limit = milliseconds(1500),
              const char* method = "GET", CURL* curl = nullptr) {
  CURL* own = curl == nullptr ? curl_easy_init() : nullptr;
  CURL* h = curl != nullptr ? curl : own;
  fetched f;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(limit.count()));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &append);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &f.body);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  const auto began = clock_type::now();
  f.code = curl_easy_perform(h);
  f.took = std::chrono::duration_cast<milliseconds>(clock_type::now() - began);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &f.status);
  if (own != nullptr) curl_easy_cleanup(own);
  return f;
}

// `n` requests at once, each on its own connection.
std::vector<fetched> fetch_together(const std::string& url, int n) {
  std::vector<fetched> results(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] { results[static_cast<std::size_t>(i)] = fetch(url); });
  }
  for (auto& t : threads) t.join();
  return results;
}

// Waits (at most 1 s) until the server's counters satisfy `done`.
template <class F>
lab::server_stats wait_for(const lab::server& srv, F done) {
  const auto until = clock_type::now() + std::chrono::seconds(1);
  lab::server_stats s = srv.stats();
  while (!done(s) && clock_type::now() < until) {
    std::this_thread::sleep_for(milliseconds(5));
    s = srv.stats();
  }
  return s;
}

class LabServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

TEST_F(LabServer, ListensOnAnEphemeralPortOfLoopback) {
  auto srv = start(tiny_scenario(1, 0, milliseconds(1)));
  ASSERT_NE(srv, nullptr);
  EXPECT_NE(srv->port(), 0);
  EXPECT_EQ(srv->url(), "http://127.0.0.1:" + std::to_string(srv->port()) + "/");
  const fetched f = fetch(srv->url() + "anything?x=1");
  EXPECT_EQ(f.code, CURLE_OK);
  EXPECT_EQ(f.status, 200);
  EXPECT_EQ(f.body, "ok\n");
}

TEST_F(LabServer, OneMoreThanWorkersPlusQueueIsRejectedAtOnce) {
  // 2 workers, a queue of 1, 300 ms each: of 5 requests at once, 2 are served in ~300 ms, 1
  // waits and is served in ~600 ms, 2 get a 503 at once. (With 150 ms of service a TSan build
  // beside other tests sent the five more than 10 ms apart, and the one that waited took under
  // the 290 ms it was held to: the threshold now leaves 150 ms for that.)
  auto srv = start(tiny_scenario(2, 1, milliseconds(300)));
  ASSERT_NE(srv, nullptr);
  const auto results = fetch_together(srv->url(), 5);
  int ok = 0, rejected = 0, waited = 0;
  for (const auto& f : results) {
    ASSERT_EQ(f.code, CURLE_OK);
    if (f.status == 503) {
      ++rejected;
      EXPECT_LT(f.took, milliseconds(100)) << "a rejection is immediate";
    } else {
      EXPECT_EQ(f.status, 200);
      ++ok;
      if (f.took >= milliseconds(450)) ++waited;
    }
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(rejected, 2);
  EXPECT_EQ(waited, 1);
  const auto s = srv->stats();
  EXPECT_EQ(s.attempts, 5);
  EXPECT_EQ(s.rejected, 2);
  EXPECT_EQ(s.served, 3);
  EXPECT_EQ(s.queued, 0);
  EXPECT_EQ(s.in_service, 0);
}

// GET /metrics is prometheus-cpp's text exposition of the server's counters: after a scripted
// burst (5 requests at once on 2 workers and a queue of 1), the scraped counters add up.
TEST_F(LabServer, MetricsExpositionCountsAScriptedBurst) {
  auto srv = start(tiny_scenario(2, 1, milliseconds(150)));
  ASSERT_NE(srv, nullptr);
  (void)fetch_together(srv->url(), 5);
  (void)wait_for(*srv, [](const lab::server_stats& st) { return st.served + st.rejected == 5; });
  const fetched metrics = fetch(srv->url() + "metrics");
  ASSERT_EQ(metrics.status, 200);
  const auto value = [&](const std::string& name) {
    const std::string line = "\n" + name + " ";
    const std::size_t at = metrics.body.find(line);
    if (at == std::string::npos) return -1.0;
    return std::stod(metrics.body.substr(at + line.size()));
  };
  EXPECT_EQ(value("stormguard_serve_attempts_total"), 5) << metrics.body;
  EXPECT_EQ(value("stormguard_serve_served_total"), 3);
  // Within the 500 ms timeout unless the machine is very loaded: bounded, not exact.
  EXPECT_LE(value("stormguard_serve_served_in_time_total"), 3);
  EXPECT_GE(value("stormguard_serve_served_in_time_total"), 0);
  EXPECT_EQ(value("stormguard_serve_rejected_total"), 2);
  EXPECT_EQ(value("stormguard_serve_attempts_total"),
            value("stormguard_serve_served_total") + value("stormguard_serve_rejected_total"));
  EXPECT_EQ(value("stormguard_serve_queued"), 0);
  EXPECT_NE(metrics.body.find("# TYPE stormguard_serve_rejected_total counter\n"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("# HELP stormguard_serve_attempts_total "), std::string::npos);
}

TEST_F(LabServer, WorkersServeThatManyRequestsAtOnce) {
  // 3 workers × 300 ms, 6 requests at once: two rounds, ~600 ms in all (not 1,800, not 300).
  // (With 100 ms of service a TSan build beside other tests sent the six far enough apart that
  // two of the second round took under the 180 ms the first round was held to: the threshold
  // between the rounds now leaves 150 ms for that.)
  auto srv = start(tiny_scenario(3, 100, milliseconds(300)));
  ASSERT_NE(srv, nullptr);
  const auto began = clock_type::now();
  const auto results = fetch_together(srv->url(), 6);
  const auto took = clock_type::now() - began;
  int first_round = 0;
  for (const auto& f : results) {
    EXPECT_EQ(f.status, 200);
    if (f.took < milliseconds(450)) ++first_round;
  }
  EXPECT_EQ(first_round, 3);
  EXPECT_GE(took, milliseconds(595));
  EXPECT_LT(took, milliseconds(1200));
}

// The service time of one request alone on the server, against `expected`.
void expect_service(const std::string& url, milliseconds expected, const char* what) {
  const fetched f = fetch(url);
  EXPECT_EQ(f.status, 200) << what;
  EXPECT_GE(f.took, expected - milliseconds(2)) << what;
  EXPECT_LT(f.took, expected + milliseconds(40)) << what;
}

TEST_F(LabServer, ServiceTimeFollowsThePhasesOfTheScenariosClock) {
  sim::scenario s = tiny_scenario(4, 10, milliseconds(20));
  s.length = milliseconds(500);
  s.incident = sim::incident{
      .start = milliseconds(150), .end = milliseconds(350), .service_time = milliseconds(80)};
  auto srv = start(s, {.start_clock = false});
  ASSERT_NE(srv, nullptr);
  expect_service(srv->url(), milliseconds(20), "before the clock starts (t = 0)");
  ASSERT_TRUE(srv->start_clock());
  const auto t0 = clock_type::now();
  expect_service(srv->url(), milliseconds(20), "normal");
  std::this_thread::sleep_until(t0 + milliseconds(200));
  expect_service(srv->url(), milliseconds(80), "incident");
  std::this_thread::sleep_until(t0 + milliseconds(520));
  expect_service(srv->url(), milliseconds(20), "after the duration");
  EXPECT_EQ(lab::phase_name(s, true, srv->stats().elapsed), "after");
}

TEST_F(LabServer, OverloadSlowsServiceAboveTheRateThenNotAfterTheDuration) {
  // Above 3 attempts in the last second, 60 ms instead of 10 ms.
  sim::scenario s = tiny_scenario(4, 10, milliseconds(10));
  s.length = milliseconds(400);
  s.overload = sim::overload{.above_rate = 3, .service_time = milliseconds(60)};
  auto srv = start(s);
  ASSERT_NE(srv, nullptr);
  for (int i = 0; i < 3; ++i) expect_service(srv->url(), milliseconds(10), "below the rate");
  expect_service(srv->url(), milliseconds(60), "the 4th attempt in a second");
  std::this_thread::sleep_for(milliseconds(400));  // past the duration
  expect_service(srv->url(), milliseconds(10), "after the duration, however loaded");
}

TEST_F(LabServer, IncidentErrorRateWithinFiveStandardDeviations) {
  sim::scenario s = tiny_scenario(2, 10, milliseconds(1));
  s.incident = sim::incident{
      .start = {}, .end = std::chrono::hours(1), .service_time = {}, .error_rate = 0.3};
  auto srv = start(s);
  ASSERT_NE(srv, nullptr);
  constexpr int n = 300;
  CURL* curl = curl_easy_init();
  int errors = 0;
  for (int i = 0; i < n; ++i) {
    const fetched f = fetch(srv->url(), milliseconds(1500), "GET", curl);
    ASSERT_EQ(f.code, CURLE_OK);
    if (f.status == 503) {
      ++errors;
      EXPECT_EQ(f.body, "incident error\n");
    }
  }
  curl_easy_cleanup(curl);
  const double sd = std::sqrt(n * 0.3 * 0.7);  // 7.9
  EXPECT_NEAR(errors, n * 0.3, 5 * sd);
  const auto st = srv->stats();
  EXPECT_EQ(st.errors, errors);
  EXPECT_EQ(st.attempts, n);
  EXPECT_EQ(st.served, n - errors);
}

TEST_F(LabServer, ALostRequestIsNeverAnswered) {
  sim::scenario s = tiny_scenario(2, 10, milliseconds(1));
  s.incident = sim::incident{.start = {},
                             .end = std::chrono::hours(1),
                             .service_time = {},
                             .error_rate = 0.0,
                             .loss_rate = 1.0};
  auto srv = start(s);
  ASSERT_NE(srv, nullptr);
  const fetched f = fetch(srv->url(), milliseconds(150));
  EXPECT_EQ(f.code, CURLE_OPERATION_TIMEDOUT);
  EXPECT_GE(f.took, milliseconds(140));
  EXPECT_EQ(srv->stats().lost, 1);
  EXPECT_EQ(srv->stats().served, 0);
}

TEST_F(LabServer, KeepsServingARequestWhoseClientHasTimedOut) {
  // One worker, 100 ms: the first client gives up after 30 ms, but its request keeps the worker
  // until its service ends, so the second waits for it (~70 ms) and its own 100 ms.
  auto srv = start(tiny_scenario(1, 10, milliseconds(100)));
  ASSERT_NE(srv, nullptr);
  const fetched gave_up = fetch(srv->url(), milliseconds(30));
  EXPECT_EQ(gave_up.code, CURLE_OPERATION_TIMEDOUT);
  const fetched second = fetch(srv->url());
  EXPECT_EQ(second.status, 200);
  EXPECT_GE(second.took, milliseconds(150));
  EXPECT_LT(second.took, milliseconds(230));
  const auto s = wait_for(*srv, [](const lab::server_stats& st) { return st.served == 2; });
  EXPECT_EQ(s.served, 2);
  EXPECT_EQ(s.attempts, 2);
}

TEST_F(LabServer, StatsMetricsAndControlAreNotCounted) {
  auto srv = start(tiny_scenario(1, 0, milliseconds(1)));
  ASSERT_NE(srv, nullptr);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(fetch(srv->url() + "stats").status, 200);
    EXPECT_EQ(fetch(srv->url() + "metrics").status, 200);
  }
  EXPECT_EQ(fetch(srv->url() + "control/start", milliseconds(1000), "POST").status, 409);
  EXPECT_EQ(srv->stats().attempts, 0);
  EXPECT_EQ(fetch(srv->url() + "stats/").status, 200) << "only /stats itself bypasses the model";
  const fetched stats = fetch(srv->url() + "stats");
  EXPECT_NE(stats.body.find("\"attempts\":1,"), std::string::npos) << stats.body;
  EXPECT_NE(stats.body.find("\"scenario\":\"tiny\""), std::string::npos) << stats.body;
  const fetched metrics = fetch(srv->url() + "metrics");
  EXPECT_NE(metrics.body.find("\nstormguard_serve_attempts_total 1\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("# TYPE stormguard_serve_queued gauge\n"), std::string::npos);
}

TEST_F(LabServer, ControlStartStartsTheClockOnce) {
  auto srv = start(tiny_scenario(1, 0, milliseconds(1)), {.start_clock = false});
  ASSERT_NE(srv, nullptr);
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(srv->stats().clock_started);
  EXPECT_EQ(srv->stats().elapsed, stormguard::duration::zero());
  EXPECT_NE(fetch(srv->url() + "stats").body.find("\"phase\":\"waiting\""), std::string::npos);
  EXPECT_EQ(fetch(srv->url() + "control/start").status, 405) << "GET does not start it";
  EXPECT_EQ(fetch(srv->url() + "control/stop", milliseconds(1000), "POST").status, 404);
  EXPECT_EQ(fetch(srv->url() + "control/start", milliseconds(1000), "POST").status, 200);
  EXPECT_TRUE(srv->stats().clock_started);
  EXPECT_EQ(fetch(srv->url() + "control/start", milliseconds(1000), "POST").status, 409);
  EXPECT_FALSE(srv->start_clock());
  EXPECT_NE(fetch(srv->url() + "stats").body.find("\"phase\":\"normal\""), std::string::npos);
}

TEST_F(LabServer, APortInUseIsAnErrorNamingTheAddress) {
  auto first = start(tiny_scenario(1, 0, milliseconds(1)));
  ASSERT_NE(first, nullptr);
  auto second = lab::server::start(tiny_scenario(1, 0, milliseconds(1)), {.port = first->port()});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error(),
            "127.0.0.1:" + std::to_string(first->port()) + ": Address already in use");
}

TEST_F(LabServer, StopClosesThePortAndIsIdempotent) {
  auto srv = start(tiny_scenario(1, 10, milliseconds(300)));
  ASSERT_NE(srv, nullptr);
  const std::string url = srv->url();
  fetched in_service;
  std::thread pending([&] { in_service = fetch(url, milliseconds(1000)); });
  std::this_thread::sleep_for(milliseconds(50));
  srv->stop();
  srv->stop();
  pending.join();
  EXPECT_EQ(in_service.code, CURLE_GOT_NOTHING) << "dropped unanswered at stop";
  EXPECT_LT(in_service.took, milliseconds(300));
  EXPECT_EQ(fetch(url, milliseconds(500)).code, CURLE_COULDNT_CONNECT);
}

TEST_F(LabServer, AnInvalidScenarioThrows) {
  EXPECT_THROW((void)lab::server::start(tiny_scenario(0, 0, milliseconds(1))),
               std::invalid_argument);
}

}  // namespace
