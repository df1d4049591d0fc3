// SPDX-License-Identifier: Apache-2.0
// The cost of stormguard::http::client over bare libcurl: one GET round trip on loopback to the
// test server of tests/support/ (keep-alive, 200 "ok"), through the client (validation, URL
// parse for the budget's host, headers, the retrier, the multi-handle loop) and through a bare
// libcurl easy handle doing the same request with curl_easy_perform, in the same run against the
// same server, and through a bare easy handle set up as the client sets its handle up. All reuse
// one connection. Run with --benchmark_enable_random_interleaving=true so that the three take
// turns on a noisy machine. Figures: docs/performance.md.
#include <benchmark/benchmark.h>
#include <curl/curl.h>

#include <cstddef>
#include <string>

#include "stormguard/http/client.hpp"
#include "stormguard/version.hpp"
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

std::size_t count_header(char*, std::size_t size, std::size_t count, void* lines) {
  ++*static_cast<std::size_t*>(lines);
  return size * count;
}

// GETs the benchmark URL with curl_easy_perform in a loop; with `same_options`, asking libcurl
// for what the client asks of it on every request: its User-Agent header line, the attempt and
// connect time-outs, and every response header line handed to a callback.
void bare_libcurl_loop(benchmark::State& state, bool same_options) {
  const std::string url = server().url("/bench");
  CURL* easy = curl_easy_init();
  std::string body;
  std::size_t header_lines = 0;
  // The header stormguard's client sends (src/http/transfer.cpp), with the same version.
  const std::string user_agent = "User-Agent: stormguard/" + std::string(stormguard::version());
  curl_slist* fields = curl_slist_append(nullptr, user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &keep_body);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
  if (same_options) {
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &count_header);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &header_lines);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, fields);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  }
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
  curl_slist_free_all(fields);
}

// The baseline: a bare easy handle with only URL and write callback.
void BM_BareLibcurlGet(benchmark::State& state) { bare_libcurl_loop(state, false); }
BENCHMARK(BM_BareLibcurlGet)->UseRealTime();

// The same loop doing the work the client asks of libcurl: the difference to
// BM_StormguardClientGet is the client's own work.
void BM_BareLibcurlSameOptionsGet(benchmark::State& state) { bare_libcurl_loop(state, true); }
BENCHMARK(BM_BareLibcurlSameOptionsGet)->UseRealTime();

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
