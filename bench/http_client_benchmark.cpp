// The cost of stormguard::http::client over bare libcurl: one GET round trip on loopback to the
// test server of tests/support/ (keep-alive, 200 "ok"), through the client (validation, URL
// parse for the budget's host, headers, the retrier, the multi-handle loop) and through a bare
// libcurl easy handle doing the same request with curl_easy_perform, in the same run against the
// same server. Both reuse one connection. Figures: docs/performance.md.
#include <benchmark/benchmark.h>
#include <curl/curl.h>

#include <cstddef>
#include <string>

#include "stormguard/http/client.hpp"
#include "support/http_test_server.hpp"

namespace {

stormguard::test_support::http_test_server& server() {
  static stormguard::test_support::http_test_server instance;
  return instance;
}

std::size_t keep_body(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

void BM_BareLibcurlGet(benchmark::State& state) {
  const std::string url = server().url("/bench");
  CURL* easy = curl_easy_init();
  std::string body;
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &keep_body);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
  for (auto _ : state) {
    body.clear();
    const CURLcode code = curl_easy_perform(easy);
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (code != CURLE_OK || status != 200 || body != "ok") {
      state.SkipWithError("bare libcurl request failed");
      break;
    }
    benchmark::DoNotOptimize(body);
  }
  curl_easy_cleanup(easy);
}
BENCHMARK(BM_BareLibcurlGet)->UseRealTime();

void BM_StormguardClientGet(benchmark::State& state) {
  stormguard::http::client client;
  stormguard::http::request request;
  request.url = server().url("/bench");
  for (auto _ : state) {
    const stormguard::http::result r = client.perform(request);
    if (!r.ok() || r.attempts != 1 || r.response->body != "ok") {
      state.SkipWithError("stormguard::http::client request failed");
      break;
    }
    benchmark::DoNotOptimize(r.response->body);
  }
}
BENCHMARK(BM_StormguardClientGet)->UseRealTime();

}  // namespace
