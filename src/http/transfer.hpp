// SPDX-License-Identifier: Apache-2.0
// src/http/transfer.hpp (internal): what the synchronous client (client.cpp) and the
// asynchronous one (async_client.cpp) share, so that both send the same bytes and judge an
// attempt by the same rules: option and request validation, the per-call plan (target, budget,
// key, header list), one libcurl easy handle with its per-attempt state and callbacks, the
// failure kinds, the verdict on a failed attempt and the result of a call (with on_attempt).
// Only the loop that drives libcurl differs: curl_multi_poll in client.cpp, Asio in
// async_client.cpp.
#ifndef STORMGUARD_SRC_HTTP_TRANSFER_HPP
#define STORMGUARD_SRC_HTTP_TRANSFER_HPP

#include <curl/curl.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/http/client.hpp"

namespace stormguard::http::detail {

/// curl_global_init, once per process (never cleaned up: other code may still use libcurl).
void global_init();

[[noreturn]] void bad_request(const std::string& message);
[[noreturn]] void bad_option(const std::string& message);

/// A curl_slist that frees itself.
struct slist {
  curl_slist* list = nullptr;
  slist() = default;
  slist(const slist&) = delete;
  slist& operator=(const slist&) = delete;
  ~slist() { curl_slist_free_all(list); }
  void append(const std::string& line);
};

/// Where a request goes: the URL handed to libcurl and the key of the host's budget.
struct target {
  std::string url;         // as given, or with a non-ASCII host in its ASCII (IDNA) form
  std::string budget_key;  // "scheme://host:port", lowercase, default port filled in
};

/// What one failed attempt produced: a response with an error status (and its Retry-After, as
/// parsed when it arrived), or a transfer that failed.
struct attempt_failure {
  std::optional<response> resp;
  std::optional<transport_error> error;
  std::optional<duration> retry_after_delay;
  bool cut_by_deadline = false;  // libcurl timed out on the limit that the deadline set
  // grpc-retry-pushback-ms negative or unparsable: the server says "do not retry" (gRFC A6).
  bool pushback_do_not_retry = false;
};

/// What a call sends on every attempt, worked out once per call. Owns what libcurl reads during
/// a transfer (the header list), so that calls in flight together never share a freed one.
struct call_plan {
  std::shared_ptr<const target> where;
  any_budget* budget = nullptr;
  std::optional<std::string> key_field;  // the Idempotency-Key field value, if any
  // The number of the call's first attempt: 1, or what the request's own x-envoy-attempt-count
  // says (a hedged copy N carries N), so that on_attempt numbers attempts as the server sees them.
  int first_attempt = 1;
  bool fresh_connection = false;        // never ride a pooled connection (docs/http.md)
  std::shared_ptr<const slist> fields;  // the request's header list
  // libcurl's own resends during the call's attempts (a reused connection that died before any
  // byte of the response): each reached the wire, so each counts as an attempt of the result.
  mutable int hidden_resends = 0;
};

/// A client's validated settings, clock, generator and budgets (both clients).
struct client_setup {
  /// Validates `o` (std::invalid_argument naming the field); null `c` / `r`: own real_clock /
  /// OS-seeded random_generator.
  client_setup(client_options o, clock* c, random_generator* r);
  client_options options;
  retry_policy policy;
  std::unique_ptr<real_clock> own_clock;
  std::unique_ptr<random_generator> own_random;
  clock* clk = nullptr;
  random_generator* random = nullptr;
  std::shared_ptr<host_budgets> budgets;
};

/// Works out call plans. Keeps the last target and header list, reused while a call sends the
/// same (the common case: one client calling one endpoint): no URL parse, budget look-up or list
/// per call. Not thread-safe.
class request_planner {
 public:
  request_planner(const client_options& options, host_budgets& budgets)
      : options_(&options), budgets_(&budgets) {}
  /// Validates `req` and works out what every attempt sends. Throws std::invalid_argument.
  call_plan plan(const request& req);

 private:
  std::shared_ptr<const slist> fields_for(const std::vector<header>& fields,
                                          const std::optional<std::string>& key, bool has_body);
  const client_options* options_;
  host_budgets* budgets_;
  std::string last_url_;
  std::shared_ptr<const target> last_target_;
  any_budget* last_budget_ = nullptr;
  std::vector<header> last_headers_;
  std::optional<std::string> last_key_field_;
  bool last_has_body_ = false;
  std::shared_ptr<const slist> last_fields_;
};

/// One libcurl easy handle and the attempt it carries: configures it for an attempt, receives
/// the response through libcurl's callbacks, and turns the end of the transfer into the attempt's
/// outcome. The connection cache is the multi handle's, not this handle's. Not thread-safe.
class easy_transfer {
 public:
  /// Throws std::runtime_error when libcurl cannot create a handle.
  explicit easy_transfer(const client_options& options);
  ~easy_transfer();
  easy_transfer(const easy_transfer&) = delete;
  easy_transfer& operator=(const easy_transfer&) = delete;

  [[nodiscard]] CURL* handle() const noexcept { return easy_; }
  /// libcurl's error buffer, for a multi-level failure the driver reports itself.
  [[nodiscard]] char* error_buffer() noexcept { return error_buffer_; }

  /// Prepares the handle and the attempt's state (see the definition for what is kept).
  void configure(const request& req, const call_plan& p, const attempt_context& ctx);

  /// The outcome of the attempt whose transfer ended with `code`: a 2xx or 3xx response, or the
  /// failure (an error status with its Retry-After parsed on `clk`'s wall time, or the transport
  /// failure). Moves the received response out.
  outcome<response, attempt_failure> finish(CURLcode code, const attempt_context& ctx,
                                            const clock& clk);

 private:
  struct handle_setup {
    bool reusable = false;  // the options may serve the next attempt of the same shape
    std::string method;
    bool fresh_connection = false;
    std::optional<std::string> url;  // the CURLOPT_URL set
    curl_slist* fields = nullptr;    // the CURLOPT_HTTPHEADER set
    bool fields_set = false;
    std::string connect_to;  // the request::connect_address of the CURLOPT_CONNECT_TO set
  };

  template <class T>
  void set(CURLoption option, T value);
  void set_fixed_options();
  // Puts the attempt's retry-state fields in front of `rest` and returns the list's head:
  // x-envoy-attempt-count unless `attempt` is 0, grpc-timeout unless `wait` is duration::min().
  curl_slist* set_retry_fields(int attempt, duration wait, curl_slist* rest) noexcept;
  void set_method(const request& req);
  void pin(const std::string& address);
  [[nodiscard]] bool header_limit_hit(CURLcode code) const noexcept;
  [[nodiscard]] transport_error failure_of(CURLcode code) const;
  [[nodiscard]] bool cut_by_deadline(int code, duration time_left) const noexcept;
  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* self_ptr);
  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* self_ptr);
  static int on_send(void* self_ptr, char*, char*, int, int);

  const client_options* options_;
  CURL* easy_ = nullptr;
  handle_setup setup_;
  // The attempt in progress (the callbacks write here).
  std::string body_;
  std::vector<header> headers_;
  std::string status_line_;
  std::size_t header_bytes_ = 0;   // every header line of the transfer, as libcurl counts them
  bool headers_complete_ = false;  // the blank line after the final response's fields was seen
  bool body_too_large_ = false;
  int sends_ = 0;                    // requests libcurl sent for this attempt (resends: > 1)
  const call_plan* plan_ = nullptr;  // the call of the attempt in progress
  char error_buffer_[CURL_ERROR_SIZE] = {};
  // The retry-state fields of each attempt (stormguard/retry_headers.hpp), in list nodes of our
  // own put in front of the plan's fields: no allocation per attempt. libcurl reads the list at
  // each transfer and never frees or copies it.
  std::array<char, 48> attempt_field_{};  // "x-envoy-attempt-count: N"
  std::array<char, 40> timeout_field_{};  // "grpc-timeout: T" (the time this attempt may take)
  curl_slist attempt_node_{};
  curl_slist timeout_node_{};
  slist resolve_;                      // client_options::resolve (CURLOPT_RESOLVE)
  std::optional<slist> connect_to_{};  // the CURLOPT_CONNECT_TO of a pinned request
};

/// The verdict on a failed attempt, from the core rules (classify_http_status,
/// classify_transport_failure; a time-out is marked as_timeout for the budgets that price it).
[[nodiscard]] classification classify_failure(const client_options& options,
                                              const attempt_failure& f, const std::string& method,
                                              bool has_key);

/// The on_attempt reports of one call (one per attempt, with the delay or the end that followed),
/// and the call's result.
class call_report {
 public:
  call_report(const client_options& options, const call_plan& plan)
      : options_(&options), plan_(&plan) {}
  /// The retrier's on_retry hook: attempt `attempt` failed with `f`, the next waits `delay`.
  void on_retry(int attempt, const attempt_failure& f, duration delay);
  /// The result of the call that ended as `ended` (reports its last attempt first).
  result finish(retry_result<response, attempt_failure>&& ended);

 private:
  const client_options* options_;
  const call_plan* plan_;
  int reported_ = 0;  // the attempts already given to on_attempt
};

}  // namespace stormguard::http::detail

#endif  // STORMGUARD_SRC_HTTP_TRANSFER_HPP
