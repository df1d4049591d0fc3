// SPDX-License-Identifier: Apache-2.0
// Scripted responses, requests and client options shared by the integration tests of the sync
// and the async HTTP clients (tests/integration/http_client_test.cpp, async_client_test.cpp).
#ifndef STORMGUARD_TESTS_SUPPORT_HTTP_REQUESTS_HPP
#define STORMGUARD_TESTS_SUPPORT_HTTP_REQUESTS_HPP

#include <chrono>
#include <string>
#include <utility>

#include "stormguard/http/client.hpp"
#include "support/http_test_server.hpp"

namespace stormguard::test_support {

/// A response with `code` and the body "status <code>".
inline scripted_response status(int code) {
  scripted_response r;
  r.status = code;
  r.body = "status " + std::to_string(code);
  return r;
}

/// status(code) with one more header.
inline scripted_response status_with(int code, std::string name, std::string value) {
  scripted_response r = status(code);
  r.headers.emplace_back(std::move(name), std::move(value));
  return r;
}

/// Closes or resets the connection instead of answering.
inline scripted_response doing(scripted_response::action what) {
  scripted_response r;
  r.what = what;
  return r;
}

/// status(code) after a wait of `d`.
inline scripted_response delayed(std::chrono::milliseconds d, int code = 200) {
  scripted_response r = status(code);
  r.delay = d;
  return r;
}

/// 3 retries, 1 ms .. 5 ms of backoff, 2 s per attempt, 1 s to connect.
inline http::client_options fast_options() {
  using namespace std::chrono_literals;
  http::client_options o;
  o.retry.max_retries = 3;
  o.retry.backoff.base = 1ms;
  o.retry.backoff.cap = 5ms;
  o.attempt_timeout = 2s;
  o.connect_timeout = 1s;
  return o;
}

/// A GET of `path` on `server`.
inline http::request get(const http_test_server& server, std::string path = "/") {
  http::request r;
  r.url = server.url(path);
  return r;
}

/// A POST of {"amount":100} to /charges on `server`, with the key option `k`.
inline http::request post(const http_test_server& server, http::key k = http::key::none()) {
  http::request r;
  r.method = "POST";
  r.url = server.url("/charges");
  r.body = R"({"amount":100})";
  r.idempotency = std::move(k);
  return r;
}

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_HTTP_REQUESTS_HPP
