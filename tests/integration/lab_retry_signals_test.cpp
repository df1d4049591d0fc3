// SPDX-License-Identifier: Apache-2.0
// `serve`'s retry signals on a real server on 127.0.0.1 port 0, requested with libcurl: each
// label counted under its signal on GET /metrics and GET /stats, malformed labels apart, a
// repeated Idempotency-Key, and a fingerprint seen again after a failed answer (never after a
// good one). Recognition only: every request is answered as without the signals.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "support/lab_scenarios.hpp"

namespace {

namespace lab = stormguard::lab;
namespace sim = stormguard::sim;
using stormguard::test_support::tiny_scenario;

struct fetched {
  long status = 0;
  std::string body;
};

std::size_t append(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

fetched fetch(const std::string& url, const std::vector<std::string>& headers = {},
              const char* method = "GET", const std::string& body = "") {
  CURL* h = curl_easy_init();
  curl_slist* list = nullptr;
  for (const std::string& line : headers) list = curl_slist_append(list, line.c_str());
  fetched f;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  if (!body.empty()) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &append);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &f.body);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  EXPECT_EQ(curl_easy_perform(h), CURLE_OK) << url;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &f.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(h);
  return f;
}

std::unique_ptr<lab::server> start(const sim::scenario& s) {
  auto started = lab::server::start(s);
  if (!started) ADD_FAILURE() << started.error();
  return started ? *std::move(started) : nullptr;
}

// The value of the series `name{signal="SIGNAL"}` in a GET /metrics body (-1 when absent).
double series(const std::string& metrics, const std::string& name, const std::string& signal) {
  const std::string head = name + "{signal=\"" + signal + "\"} ";
  const std::size_t at = metrics.find(head);
  if (at == std::string::npos) return -1;
  return std::stod(metrics.substr(at + head.size()));
}

class LabRetrySignals : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

TEST_F(LabRetrySignals, CountsEachLabelOnMetricsAndStats) {
  auto srv = start(tiny_scenario(4, 10, std::chrono::milliseconds(1)));
  ASSERT_NE(srv, nullptr);
  const std::string url = srv->url() + "orders/1";
  // Retries, one per label.
  EXPECT_EQ(fetch(url, {"x-envoy-attempt-count: 2"}).status, 200);
  EXPECT_EQ(fetch(url, {"grpc-previous-rpc-attempts: 1"}).status, 200);
  EXPECT_EQ(fetch(url, {"amz-sdk-request: attempt=2; max=3"}).status, 200);
  EXPECT_EQ(fetch(url, {"Retry-Attempt: 3"}).status, 200);
  // First attempts: no signal.
  EXPECT_EQ(fetch(url, {"x-envoy-attempt-count: 1", "grpc-previous-rpc-attempts: 0",
                        "amz-sdk-request: attempt=1; max=3", "retry-attempt: 0"})
                .status,
            200);
  // Malformed: counted apart, never as a retry, and the request is served as any other.
  EXPECT_EQ(fetch(url, {"x-envoy-attempt-count: two"}).status, 200);
  EXPECT_EQ(fetch(url, {"amz-sdk-request: attempt=9; max=3"}).status, 200);
  EXPECT_EQ(fetch(url, {"retry-attempt: -1"}).status, 200);
  EXPECT_EQ(fetch(url, {"grpc-previous-rpc-attempts: 1", "grpc-previous-rpc-attempts: 2"}).status,
            200);

  const fetched metrics = fetch(srv->url() + "metrics");
  ASSERT_EQ(metrics.status, 200);
  const std::string total = "stormguard_serve_retry_signals_total";
  const std::string bad = "stormguard_serve_retry_signals_malformed_total";
  for (const char* label : {"x-envoy-attempt-count", "grpc-previous-rpc-attempts",
                            "amz-sdk-request", "retry-attempt"}) {
    EXPECT_EQ(series(metrics.body, total, label), 1) << label << "\n" << metrics.body;
  }
  EXPECT_EQ(series(metrics.body, total, "idempotency-key"), 0);
  EXPECT_EQ(series(metrics.body, total, "fingerprint"), 0) << "no answer failed";
  EXPECT_EQ(series(metrics.body, bad, "x-envoy-attempt-count"), 1);
  EXPECT_EQ(series(metrics.body, bad, "amz-sdk-request"), 1);
  EXPECT_EQ(series(metrics.body, bad, "retry-attempt"), 1);
  EXPECT_EQ(series(metrics.body, bad, "grpc-previous-rpc-attempts"), 1);
  EXPECT_EQ(series(metrics.body, bad, "fingerprint"), -1) << "only labels can be malformed";

  const fetched stats = fetch(srv->url() + "stats");
  ASSERT_EQ(stats.status, 200);
  const nlohmann::json j = nlohmann::json::parse(stats.body);
  EXPECT_EQ(j.at("retry_signals").at("x-envoy-attempt-count"), 1);
  EXPECT_EQ(j.at("retry_signals").at("retry-attempt"), 1);
  EXPECT_EQ(j.at("retry_signals").at("fingerprint"), 0);
  EXPECT_EQ(j.at("retry_signals_malformed").at("amz-sdk-request"), 1);
  EXPECT_EQ(srv->stats().retry_signals[0], 1);
  EXPECT_EQ(j.at("attempts"), 9) << "/stats and /metrics show no signal of their own";
}

TEST_F(LabRetrySignals, ARepeatedIdempotencyKeyIsARetry) {
  auto srv = start(tiny_scenario(4, 10, std::chrono::milliseconds(1)));
  ASSERT_NE(srv, nullptr);
  const std::string url = srv->url() + "orders";
  EXPECT_EQ(fetch(url, {"Idempotency-Key: \"k-1\""}, "POST", "{}").status, 200);
  EXPECT_EQ(fetch(url, {"Idempotency-Key: \"k-2\""}, "POST", "{}").status, 200);
  EXPECT_EQ(fetch(url, {"Idempotency-Key: \"k-1\""}, "POST", "{}").status, 200);
  const std::size_t key =
      stormguard::admission::index_of(stormguard::admission::retry_signal::idempotency_key);
  EXPECT_EQ(srv->stats().retry_signals[key], 1);
  // Another principal's same key is another key.
  EXPECT_EQ(fetch(url, {"Idempotency-Key: \"k-1\"", "Authorization: Bearer other-principal"},
                  "POST", "{}")
                .status,
            200);
  EXPECT_EQ(srv->stats().retry_signals[key], 1);
}

TEST_F(LabRetrySignals, AFingerprintCountsOnlyAfterAFailedAnswer) {
  sim::scenario s = tiny_scenario(4, 10, std::chrono::milliseconds(1));
  const std::size_t print =
      stormguard::admission::index_of(stormguard::admission::retry_signal::fingerprint);
  {
    auto healthy = start(s);
    ASSERT_NE(healthy, nullptr);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(fetch(healthy->url() + "same", {}).status, 200);
    EXPECT_EQ(healthy->stats().retry_signals[print], 0) << "identical good requests: no signal";
  }
  // Every request fails at once (503): each repeat after the first follows a failed answer.
  s.incident = sim::incident{
      .start = {}, .end = std::chrono::hours(1), .service_time = {}, .error_rate = 1.0};
  auto failing = start(s);
  ASSERT_NE(failing, nullptr);
  EXPECT_EQ(fetch(failing->url() + "orders/7", {}, "POST", "a").status, 503);
  EXPECT_EQ(fetch(failing->url() + "orders/8", {}, "POST", "a").status, 503);
  EXPECT_EQ(failing->stats().retry_signals[print], 0) << "another target: another fingerprint";
  EXPECT_EQ(fetch(failing->url() + "orders/7", {}, "POST", "b").status, 503);
  EXPECT_EQ(failing->stats().retry_signals[print], 0) << "another body: another fingerprint";
  EXPECT_EQ(fetch(failing->url() + "orders/7", {}, "POST", "a").status, 503);
  EXPECT_EQ(fetch(failing->url() + "orders/7", {}, "POST", "a").status, 503);
  EXPECT_EQ(failing->stats().retry_signals[print], 2);
  const fetched metrics = fetch(failing->url() + "metrics");
  EXPECT_EQ(series(metrics.body, "stormguard_serve_retry_signals_total", "fingerprint"), 2);
}

// The server-side retry budget (refusing every retry here) reads a strong signal as a retry:
// another ecosystem's label and a repeated Idempotency-Key are refused as x-envoy-attempt-count
// is; a label that says "first attempt", and the weak fingerprint, are not.
TEST_F(LabRetrySignals, TheRetryBudgetRefusesWhatAStrongSignalCallsARetry) {
  sim::scenario s = tiny_scenario(4, 10, std::chrono::milliseconds(1));
  s.defences.enabled = s.defences.enabled.with<sim::retry_budget_defence>();
  s.defences.of<sim::retry_budget_defence>() = {
      .ratio = 0.0, .window = std::chrono::seconds(10), .min_retries_per_second = 0};
  auto srv = start(s);
  ASSERT_NE(srv, nullptr);
  const std::string url = srv->url() + "orders/1";
  EXPECT_EQ(fetch(url).status, 200);
  EXPECT_EQ(fetch(url, {"x-envoy-attempt-count: 2"}).status, 503);
  EXPECT_EQ(fetch(url, {"amz-sdk-request: attempt=2; max=3"}).status, 503);
  EXPECT_EQ(fetch(url, {"retry-attempt: 1"}).status, 503);
  EXPECT_EQ(fetch(url, {"amz-sdk-request: attempt=1; max=3"}).status, 200);
  EXPECT_EQ(fetch(url, {"retry-attempt: 0"}).status, 200);
  EXPECT_EQ(fetch(url, {"Idempotency-Key: \"order-1\""}).status, 200);
  EXPECT_EQ(fetch(url, {"Idempotency-Key: \"order-1\""}).status, 503) << "a repeated key";
  EXPECT_EQ(fetch(url, {"Idempotency-Key: \"order-2\""}).status, 200);
  // A malformed label is no number to trust (x-envoy-attempt-count's own rule: a retry of
  // unknown number), and a garbled amz-sdk-request alone says nothing.
  EXPECT_EQ(fetch(url, {"amz-sdk-request: attempt=x"}).status, 200);
  EXPECT_EQ(srv->stats().defence_decisions[sim::defence_index<sim::retry_budget_defence>], 4);
}

// The lab's own label (lab::k_incident_label_header): an attempt labelled "1" that takes a worker
// counts in incident_served; other values, an unlabelled attempt and a refused one do not.
TEST_F(LabRetrySignals, OnlyTheIncidentLabelOneCountsAServedIncidentAttempt) {
  auto srv = start(tiny_scenario(4, 10, std::chrono::milliseconds(1)));
  ASSERT_NE(srv, nullptr);
  const std::string url = srv->url() + "orders/1";
  const std::string label(lab::k_incident_label_header);
  EXPECT_EQ(fetch(url, {label + ": 1"}).status, 200);
  EXPECT_EQ(fetch(url).status, 200);
  for (const char* other : {"0", "true", "2", "1, 1", ""}) {
    EXPECT_EQ(fetch(url, {label + ": " + other}).status, 200) << other;
  }
  EXPECT_EQ(fetch(url, {label + ": 1"}).status, 200);
  EXPECT_EQ(srv->stats().incident_served, 2);
  const fetched metrics = fetch(srv->url() + "metrics");
  EXPECT_NE(metrics.body.find("stormguard_serve_incident_served_total 2"), std::string::npos)
      << metrics.body;
}

}  // namespace
