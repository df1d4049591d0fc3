// SPDX-License-Identifier: Apache-2.0
// A small HTTP server (libevent's evhttp) with stormguard::admission in front of its handler: a
// retry the server's budget cannot afford is answered 503 with `grpc-retry-pushback-ms: -1` (do
// not retry) before any work, and a request whose caller's deadline (grpc-timeout) has passed is
// never started. The program then plays a client (libcurl) against itself on 127.0.0.1 and checks
// the answers: exit 0 when the server behaved as described.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "stormguard/admission/deadline.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/retry_headers.hpp"

namespace {

// The server's state: its clock and its retry budget (10 % of first attempts, no floor, so that
// the example's one retry is refused).
struct server_state {
  stormguard::real_clock clock;
  stormguard::admission::retry_admission admission{{.ratio = 0.1, .min_retries_per_second = 0}};
};

// Admission first (drop-expired, then the retry budget), then the handler (here: "hello").
void handle(evhttp_request* req, void* arg) {
  auto& state = *static_cast<server_state*>(arg);
  const stormguard::time_point now = state.clock.now();
  const evkeyvalq* in = evhttp_request_get_input_headers(req);
  // Every field, as HTTP lets a field repeat: a repeated attempt count that disagrees with
  // itself reads as malformed (a retry), never as a first attempt.
  stormguard::attempt_fields fields;
  for (const evkeyval* h = in->tqh_first; h != nullptr; h = h->next.tqe_next) {
    fields.field(h->key, h->value);
  }
  const char* timeout = evhttp_find_header(in, stormguard::k_grpc_timeout_header.data());
  const auto deadline = stormguard::admission::deadline_of(
      now, timeout != nullptr ? stormguard::parse_grpc_timeout(timeout) : std::nullopt);
  using stormguard::admission::outcome;
  const outcome decided = stormguard::admission::expired(now, deadline) ? outcome::expired
                          : state.admission.admit(now, fields.result()) ? outcome::served
                                                                        : outcome::retry_refused;
  // Answer as reply_for says: the status, the pushback, a short body.
  const stormguard::admission::reply r = stormguard::admission::reply_for(decided);
  if (r.do_not_retry) {
    evhttp_add_header(evhttp_request_get_output_headers(req), stormguard::k_pushback_header.data(),
                      std::string(r.pushback).c_str());
  }
  const std::string body = decided == outcome::served ? "hello" : std::string(r.body);
  evbuffer* out = evbuffer_new();
  evbuffer_add(out, body.data(), body.size());
  evhttp_send_reply(req, r.status, std::string(r.reason_phrase).c_str(), out);
  evbuffer_free(out);
}

// One GET with `fields`; returns "STATUS" or "STATUS pushback VALUE".
std::string call(int port, const std::vector<std::string>& fields) {
  CURL* easy = curl_easy_init();
  if (easy == nullptr) return "no libcurl handle";
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  curl_slist* list = nullptr;
  for (const std::string& f : fields) list = curl_slist_append(list, f.c_str());
  std::string body;
  (void)curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  (void)curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
  (void)curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 5000L);
  (void)curl_easy_setopt(
      easy, CURLOPT_WRITEFUNCTION, +[](char* p, std::size_t s, std::size_t n, void* b) {
        static_cast<std::string*>(b)->append(p, s * n);
        return s * n;
      });
  (void)curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
  std::string out;
  if (const CURLcode code = curl_easy_perform(easy); code != CURLE_OK) {
    out = curl_easy_strerror(code);
  } else {
    long status = 0;
    (void)curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    out = std::to_string(status);
    curl_header* h = nullptr;
    if (curl_easy_header(easy, stormguard::k_pushback_header.data(), 0, CURLH_HEADER, -1, &h) ==
        CURLHE_OK) {
      out += " pushback " + std::string(h->value);
    }
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(easy);
  return out;
}

}  // namespace

int main() {
  (void)curl_global_init(CURL_GLOBAL_DEFAULT);
  event_base* base = event_base_new();
  evhttp* http = base != nullptr ? evhttp_new(base) : nullptr;
  evhttp_bound_socket* bound =
      http != nullptr ? evhttp_bind_socket_with_handle(http, "127.0.0.1", 0) : nullptr;
  int stop_pipe[2] = {-1, -1};
  if (bound == nullptr || ::pipe(stop_pipe) != 0) {
    std::fprintf(stderr, "cannot listen on 127.0.0.1\n");
    return 1;
  }
  server_state state;
  evhttp_set_gencb(http, &handle, &state);
  // The client thread writes a byte to the pipe when it is done; the loop then stops.
  event* stop = event_new(
      base, stop_pipe[0], EV_READ,
      [](evutil_socket_t, short, void* b) { event_base_loopbreak(static_cast<event_base*>(b)); },
      base);
  (void)event_add(stop, nullptr);
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  (void)::getsockname(evhttp_bound_socket_get_fd(bound), reinterpret_cast<sockaddr*>(&address),
                      &length);
  const int port = ntohs(address.sin_port);

  std::vector<std::string> answers;
  std::thread client([&] {
    answers.push_back(call(port, {"x-envoy-attempt-count: 1", "grpc-timeout: 1S"}));
    answers.push_back(call(port, {"x-envoy-attempt-count: 2"}));
    answers.push_back(call(port, {"x-envoy-attempt-count: -1"}));
    answers.push_back(call(port, {"x-envoy-attempt-count: 1", "x-envoy-attempt-count: 2"}));
    answers.push_back(call(port, {"grpc-timeout: 0m"}));
    const char byte = 0;
    (void)::write(stop_pipe[1], &byte, 1);
  });
  (void)event_base_dispatch(base);  // the server, on this thread
  client.join();
  event_free(stop);
  evhttp_free(http);
  event_base_free(base);
  ::close(stop_pipe[0]);
  ::close(stop_pipe[1]);
  curl_global_cleanup();

  const char* const labels[] = {"first attempt", "retry", "hostile attempt -1", "repeated 1 then 2",
                                "deadline passed"};
  const char* const expected[] = {"200", "503 pushback -1", "503 pushback -1", "503 pushback -1",
                                  "503 pushback -1"};
  bool ok = answers.size() == 5;
  for (std::size_t i = 0; i < answers.size() && i < 5; ++i) {
    std::printf("%-20s %s\n", (std::string(labels[i]) + ":").c_str(), answers[i].c_str());
    ok = ok && answers[i] == expected[i];
  }
  return ok ? 0 : 1;
}
