// SPDX-License-Identifier: Apache-2.0
// src/http/transfer.cpp: the parts of the HTTP clients that the synchronous and the asynchronous
// client share (see transfer.hpp).
#include "http/transfer.hpp"

#include <curl/curl.h>
#include <locale.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "stormguard/detail/format.hpp"
#include "stormguard/http/addresses.hpp"
#include "stormguard/http/syntax.hpp"
#include "stormguard/retry_after.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard/version.hpp"

namespace stormguard::http::detail {

namespace {

std::string quoted(std::string_view text) { return stormguard::detail::quote_for_message(text); }

// libcurl's limits on response header fields (7.88.1 as patched by Debian, and every later
// version): one line above CURL_MAX_HTTP_HEADER bytes fails with CURLE_OUT_OF_MEMORY; all lines
// of a transfer together above 300 KiB (MAX_HTTP_RESP_HEADER_SIZE, lib/http.h, not public) with
// CURLE_RECV_ERROR "Too large response headers". Neither can be changed by an option.
constexpr std::size_t k_curl_max_header_line = CURL_MAX_HTTP_HEADER;
constexpr std::size_t k_curl_max_header_total = 300 * 1024;
// libcurl's limit on a host name (lib/url.c: "Too long host name (maximum is 65535)"), checked
// when a transfer starts, not by curl_url_set.
constexpr std::size_t k_curl_max_host_name = 0xffff;

class parsed_url {
 public:
  parsed_url() : url_(curl_url()) {
    if (url_ == nullptr) throw std::bad_alloc();
  }
  parsed_url(const parsed_url&) = delete;
  parsed_url& operator=(const parsed_url&) = delete;
  ~parsed_url() { curl_url_cleanup(url_); }

  CURLUcode set(const std::string& url) {
    return curl_url_set(url_, CURLUPART_URL, url.c_str(), 0);
  }

  // The part, or nullopt when libcurl cannot give it (absent, or not convertible).
  std::optional<std::string> get(CURLUPart which, unsigned flags) const {
    char* text = nullptr;
    std::optional<std::string> value;
    if (curl_url_get(url_, which, &text, flags) == CURLUE_OK && text != nullptr) value = text;
    curl_free(text);
    return value;
  }

 private:
  CURLU* url_;
};

// libcurl converts a non-ASCII host with libidn2's idn2_lookup_ul, which reads it in the charset
// of the current locale: in the "C" locale (a program that never called setlocale, a service
// started without LANG) every byte >= 0x80 fails and the URL is "malformed". A URL is UTF-8
// (RFC 3987 §3.1), so the conversion runs with a UTF-8 LC_CTYPE for this thread only
// (uselocale), and the previous one is restored. Without a C.UTF-8 locale nothing changes.
class utf8_ctype_scope {
 public:
  utf8_ctype_scope() noexcept {
    static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t{});
    if (utf8 != locale_t{}) previous_ = uselocale(utf8);
  }
  utf8_ctype_scope(const utf8_ctype_scope&) = delete;
  utf8_ctype_scope& operator=(const utf8_ctype_scope&) = delete;
  ~utf8_ctype_scope() {
    if (previous_ != locale_t{}) (void)uselocale(previous_);
  }

 private:
  locale_t previous_{};
};

bool has_non_ascii(std::string_view s) noexcept {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
}

// Parses an absolute http(s) URL. Throws std::invalid_argument naming "url" for anything else.
target resolve_target(const std::string& url) {
  // libcurl reads the URL as a C string: a NUL would silently cut it short (another target).
  if (url.find('\0') != std::string::npos) {
    bad_request("url: contains a NUL byte at position " + std::to_string(url.find('\0')) + ": " +
                quoted(url));
  }
  parsed_url u;
  if (const CURLUcode set = u.set(url); set != CURLUE_OK) {
    bad_request("url: not an absolute http:// or https:// URL: " + quoted(url) + " (" +
                curl_url_strerror(set) + ")");
  }
  const std::string scheme = to_lower_ascii(u.get(CURLUPART_SCHEME, 0).value_or(""));
  if (scheme != "http" && scheme != "https") {
    bad_request("url: the scheme must be http or https, got " + quoted(scheme) + " in " +
                quoted(url));
  }
  target t{url, {}};
  std::string host = u.get(CURLUPART_HOST, 0).value_or("");
  if (has_non_ascii(host)) {
    // An internationalised name: send its ASCII form, as curl does (IDNA 2008, RFC 5891).
    const utf8_ctype_scope utf8;
    const auto ascii_url = u.get(CURLUPART_URL, CURLU_PUNYCODE);
    const auto ascii_host = u.get(CURLUPART_HOST, CURLU_PUNYCODE);
    if (!ascii_url || !ascii_host) {
      bad_request("url: the host " + quoted(host) +
                  " is not an internationalised domain name that libcurl can convert to ASCII "
                  "(IDNA, RFC 5891): " +
                  quoted(url));
    }
    t.url = *ascii_url;
    host = *ascii_host;
  }
  if (host.empty()) bad_request("url: no host in " + quoted(url));
  if (host.size() > k_curl_max_host_name) {
    // libcurl would refuse it only when the transfer starts ("Too long host name"): a usage
    // error of the request, so say so before any attempt.
    bad_request("url: the host name is " + std::to_string(host.size()) +
                " bytes long, above libcurl's limit of " + std::to_string(k_curl_max_host_name) +
                ": " + quoted(url));
  }
  t.budget_key = scheme + "://" + to_lower_ascii(host) + ":" +
                 u.get(CURLUPART_PORT, CURLU_DEFAULT_PORT).value_or("");
  return t;
}

void validate_request(const request& req) {
  if (!is_token(req.method)) {
    bad_request("method: not an HTTP method (an RFC 9110 token such as GET or POST): " +
                quoted(req.method));
  }
  if (req.method == "HEAD" && !req.body.empty()) {
    // libcurl sends a HEAD only without a body (CURLOPT_NOBODY); dropping it would lose data.
    bad_request("body: a HEAD request cannot carry a body (" + std::to_string(req.body.size()) +
                " bytes given)");
  }
  if (!req.connect_address.empty() && !is_ip_literal(req.connect_address)) {
    bad_request("connect_address: not an IPv4 or IPv6 literal (no brackets): " +
                quoted(req.connect_address));
  }
  for (const header& h : req.headers) {
    const auto problem = check_request_field(h.name, h.value);
    if (!problem) continue;
    switch (*problem) {
      case field_problem::name_not_token:
        bad_request("header name: not an RFC 9110 token: " + quoted(h.name));
      case field_problem::value_has_control:
        bad_request("header " + quoted(h.name) +
                    ": the value has a control byte (CR, LF, NUL, ...) at position " +
                    std::to_string(invalid_field_value_byte(h.value)) + ": " + quoted(h.value));
      case field_problem::content_length:
        bad_request("header \"Content-Length\": set from request::body by the client; got " +
                    quoted(h.value) + " for a body of " + std::to_string(req.body.size()) +
                    " bytes");
      case field_problem::idempotency_key:
        bad_request(
            "header \"Idempotency-Key\": set request::idempotency (key::use) instead, so that "
            "the client knows the request carries a key");
    }
  }
}

// libcurl's time-out option value: milliseconds, rounded up, at least 1; 0 means none.
long timeout_ms(duration d) noexcept {
  if (d == duration::max()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  return static_cast<long>(std::clamp<std::int64_t>(ms, 1, LONG_MAX));
}

// The one description of an attempt, for client_options::on_attempt: from the successful
// response `ok`, or from the failure `failed`.
attempt_info describe_attempt(int attempt, const response* ok, const attempt_failure* failed,
                              const call_plan& plan) {
  attempt_info info;
  info.attempt = plan.first_attempt + attempt - 1;
  info.idempotency_key = plan.key_field;
  const response* resp = ok != nullptr                       ? ok
                         : failed != nullptr && failed->resp ? &*failed->resp
                                                             : nullptr;
  if (resp != nullptr) {
    info.status = resp->status;
  } else if (failed != nullptr) {
    info.error = failed->error;
  }
  if (failed != nullptr && failed->resp) {
    if (const auto field = failed->resp->header_value("Retry-After")) {
      info.retry_after = std::string(*field);
      info.retry_after_delay = failed->retry_after_delay;
    }
  }
  return info;
}

// Whether the request's method is sent with CURLOPT_POSTFIELDS (see set_method).
bool sends_body_option(const request& req) noexcept {
  if (req.method == "HEAD" || (req.method == "GET" && req.body.empty())) return false;
  return !req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
}

}  // namespace

// curl_global_init is not thread-safe in every libcurl build; call it exactly once per process.
// curl_global_cleanup is never called: other code in the process may still use libcurl.
void global_init() {
  static const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (code != CURLE_OK) {
    throw std::runtime_error(std::string("stormguard::http::client: curl_global_init failed: ") +
                             curl_easy_strerror(code));
  }
}

void bad_request(const std::string& message) {
  throw std::invalid_argument("stormguard::http::request: " + message);
}

void bad_option(const std::string& message) {
  throw std::invalid_argument("stormguard::http::client_options: " + message);
}

void slist::append(const std::string& line) {
  curl_slist* next = curl_slist_append(list, line.c_str());
  if (next == nullptr) throw std::bad_alloc();
  list = next;
}

// ------------------------------------------------------------------------------------------------
// client_setup, request_planner
// ------------------------------------------------------------------------------------------------

client_setup::client_setup(client_options o, clock* c, random_generator* r)
    : options(std::move(o)), policy(options.retry), clk(c), random(r) {
  if (options.attempt_timeout <= duration::zero()) {
    bad_option("attempt_timeout must be > 0, got " +
               std::to_string(options.attempt_timeout.count()) + " ns");
  }
  if (options.connect_timeout <= duration::zero()) {
    bad_option("connect_timeout must be > 0, got " +
               std::to_string(options.connect_timeout.count()) + " ns");
  }
  if (options.max_body_bytes == 0) bad_option("max_body_bytes must be > 0, got 0");
  for (const std::string& entry : options.resolve) {
    if (!parse_resolve_entry(entry)) {
      bad_option(
          "resolve: not HOST:PORT:ADDRESS[,ADDRESS...] with IP addresses (IPv6 in "
          "brackets): " +
          quoted(entry));
    }
  }
  budgets = options.shared_budgets
                ? options.shared_budgets
                : std::make_shared<host_budgets>(options.budget, options.attach_budget);
  if (clk == nullptr) {
    own_clock = std::make_unique<real_clock>();
    clk = own_clock.get();
  }
  if (random == nullptr) {
    own_random = std::make_unique<random_generator>();
    random = own_random.get();
  }
  global_init();
}

call_plan request_planner::plan(const request& req) {
  validate_request(req);
  if (last_budget_ == nullptr || req.url != last_url_) {
    auto t = std::make_shared<const target>(resolve_target(req.url));
    any_budget& budget = budgets_->for_host(t->budget_key);
    last_url_ = req.url;
    last_target_ = std::move(t);
    last_budget_ = &budget;
  }
  call_plan p;
  p.where = last_target_;
  p.budget = last_budget_;
  switch (req.idempotency.what()) {
    case key::kind::none:
      break;
    case key::kind::generate:
      p.key_field = idempotency_key_field_value(make_idempotency_key(), options_->key_format);
      break;
    case key::kind::supplied:
      p.key_field = idempotency_key_field_value(req.idempotency.value(), options_->key_format);
      break;
  }
  // libcurl resends a request on a fresh connection when a reused one died before any byte of
  // the response (lib/transfer.c, Curl_retry_request), invisibly to us. For a request that
  // must not be sent twice, never ride a pooled connection.
  p.fresh_connection =
      !options_->reuse_connections || !may_resend(req.method, p.key_field.has_value());
  p.fields = fields_for(req.headers, p.key_field, !req.body.empty());
  for (const header& h : req.headers) {
    if (!iequals_ascii(h.name, k_attempt_count_header)) continue;
    const stormguard::attempt_info own = parse_attempt(h.value, std::nullopt);
    if (!own.malformed) p.first_attempt = static_cast<int>(own.attempt);
    break;
  }
  return p;
}

std::shared_ptr<const slist> request_planner::fields_for(const std::vector<header>& fields,
                                                         const std::optional<std::string>& key,
                                                         bool has_body) {
  if (last_fields_ && has_body == last_has_body_ && key == last_key_field_ &&
      fields == last_headers_) {
    return last_fields_;
  }
  auto list = std::make_shared<slist>();
  bool has_user_agent = false;
  bool has_expect = false;
  for (const header& h : fields) {
    // libcurl reads "Name:" (nothing after the colon) as "remove this header" and drops it, or
    // removes its own (Accept, Host, User-Agent); "Name;" is its syntax for an empty value.
    list->append(h.value.empty() ? h.name + ";" : h.name + ": " + h.value);
    has_user_agent = has_user_agent || iequals_ascii(h.name, "User-Agent");
    has_expect = has_expect || iequals_ascii(h.name, "Expect");
  }
  if (key) list->append(std::string(idempotency_key_header) + ": " + *key);
  // A header line, not CURLOPT_USERAGENT: libcurl formats that one anew for every transfer,
  // about 2,400 instructions more per request (callgrind, libcurl 7.88.1).
  if (!has_user_agent) list->append("User-Agent: stormguard/" + std::string(version()));
  // No 100-continue round trip before a body (libcurl asks for one above 1 MB); a request
  // without a body never sends Expect.
  if (has_body && !has_expect) list->append("Expect:");
  last_fields_.reset();
  last_headers_ = fields;
  last_key_field_ = key;
  last_has_body_ = has_body;
  last_fields_ = std::move(list);
  return last_fields_;
}

// ------------------------------------------------------------------------------------------------
// easy_transfer
// ------------------------------------------------------------------------------------------------

easy_transfer::easy_transfer(const client_options& options)
    : options_(&options), easy_(curl_easy_init()) {
  if (easy_ == nullptr) {
    throw std::runtime_error("stormguard::http::client: cannot create a libcurl handle");
  }
  for (const std::string& entry : options.resolve) resolve_.append(entry);
}

easy_transfer::~easy_transfer() { curl_easy_cleanup(easy_); }

template <class T>
void easy_transfer::set(CURLoption option, T value) {
  const CURLcode code = curl_easy_setopt(easy_, option, value);
  if (code != CURLE_OK) {
    throw std::runtime_error(std::string("stormguard::http::client: curl_easy_setopt: ") +
                             curl_easy_strerror(code));
  }
}

// curl_easy_reset and setting every option again cost about as much as the rest of the client
// together (callgrind), so the options stay as they are when this attempt is configured exactly
// like the previous one: the same method, no body (libcurl keeps a pointer to a body, never to
// anything else of ours: it copies strings) and the same fresh-connection rule. Otherwise the
// handle is reset first, so nothing leaks from one request to the next. The URL and the header
// list are set when they changed, the time-outs always.
void easy_transfer::configure(const request& req, const call_plan& p, const attempt_context& ctx) {
  sends_ = 0;
  plan_ = &p;
  body_.clear();
  headers_.clear();
  status_line_.clear();
  header_bytes_ = 0;
  headers_complete_ = false;
  body_too_large_ = false;
  error_buffer_[0] = '\0';

  const bool same_as_before = setup_.reusable && req.body.empty() && req.method == setup_.method &&
                              p.fresh_connection == setup_.fresh_connection;
  if (!same_as_before) {
    setup_ = {};
    curl_easy_reset(easy_);  // options only: connections, DNS and TLS session caches stay
    set_fixed_options();
    set_method(req);
    if (p.fresh_connection) set(CURLOPT_FRESH_CONNECT, 1L);
    if (!options_->reuse_connections) set(CURLOPT_FORBID_REUSE, 1L);
  }
  if (!setup_.url || *setup_.url != p.where->url) {
    setup_.url.reset();
    set(CURLOPT_URL, p.where->url.c_str());  // copied by libcurl
    setup_.url = p.where->url;
  }
  // Every attempt says which attempt it is and how long its caller waits for it (the attempt's
  // time-out or the time left before the call's deadline, whichever is shorter), so that a
  // server can budget retries and drop work nobody waits for (stormguard::admission).
  // A field the request already carries (a caller that numbers attempts itself) is left alone.
  bool own_attempt = options_->send_attempt_count;
  bool own_timeout = options_->send_timeout;
  for (const header& h : req.headers) {
    if (iequals_ascii(h.name, k_attempt_count_header)) own_attempt = false;
    if (iequals_ascii(h.name, k_grpc_timeout_header)) own_timeout = false;
  }
  if (req.connect_address != setup_.connect_to) pin(req.connect_address);
  set(CURLOPT_HTTPHEADER,  // read by libcurl at each transfer, not copied
      set_retry_fields(
          own_attempt ? ctx.attempt : 0,
          own_timeout ? std::min(options_->attempt_timeout, ctx.time_left) : duration::min(),
          p.fields->list));
  setup_.fields = p.fields->list;
  setup_.fields_set = true;
  set(CURLOPT_CONNECTTIMEOUT_MS, timeout_ms(std::min(options_->connect_timeout, ctx.time_left)));
  set(CURLOPT_TIMEOUT_MS, timeout_ms(std::min(options_->attempt_timeout, ctx.time_left)));
  setup_.method = req.method;
  setup_.fresh_connection = p.fresh_connection;
  setup_.reusable = req.body.empty() && !sends_body_option(req);
}

curl_slist* easy_transfer::set_retry_fields(int attempt, duration wait, curl_slist* rest) noexcept {
  const auto write = [](std::span<char> out, std::string_view name, std::string_view value) {
    std::size_t n = 0;
    for (const char c : name) out[n++] = c;
    out[n++] = ':';
    out[n++] = ' ';
    for (const char c : value) out[n++] = c;
    out[n] = '\0';
  };
  curl_slist* head = rest;
  if (wait != duration::min()) {
    std::array<char, 16> timeout{};
    write(timeout_field_, k_grpc_timeout_header, format_grpc_timeout(wait, timeout));
    timeout_node_.data = timeout_field_.data();
    timeout_node_.next = head;
    head = &timeout_node_;
  }
  if (attempt > 0) {
    std::array<char, 24> number{};
    write(attempt_field_, k_attempt_count_header, format_attempt_count(attempt, number));
    attempt_node_.data = attempt_field_.data();
    attempt_node_.next = head;
    head = &attempt_node_;
  }
  return head;
}

// Connects to `address` instead of the URL's host (empty: the host's own addresses), at the URL's
// port; libcurl reuses a connection only for a request with the same "connect to" setting.
void easy_transfer::pin(const std::string& address) {
  connect_to_.reset();
  if (!address.empty()) {
    connect_to_.emplace();
    connect_to_->append(address.find(':') != std::string::npos ? "::[" + address + "]:"
                                                               : "::" + address + ":");
  }
  set(CURLOPT_CONNECT_TO, connect_to_ ? connect_to_->list : nullptr);  // read at each transfer
  setup_.connect_to = address;
}

// The options that are the same for every request of this client.
void easy_transfer::set_fixed_options() {
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  set(CURLOPT_FOLLOWLOCATION, 0L);
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_ERRORBUFFER, error_buffer_);
  // Called before every send of the request, libcurl's own resend on a fresh connection included
  // (Curl_retry_request, when a reused connection died before any byte of the response).
  set(CURLOPT_PREREQFUNCTION, &easy_transfer::on_send);
  set(CURLOPT_PREREQDATA, this);
  set(CURLOPT_WRITEFUNCTION, &easy_transfer::on_body);
  set(CURLOPT_WRITEDATA, this);
  set(CURLOPT_HEADERFUNCTION, &easy_transfer::on_header);
  set(CURLOPT_HEADERDATA, this);
  if (resolve_.list != nullptr) set(CURLOPT_RESOLVE, resolve_.list);  // read at each transfer
}

void easy_transfer::set_method(const request& req) {
  if (req.method == "GET" && req.body.empty()) {
    set(CURLOPT_HTTPGET, 1L);
  } else if (req.method == "HEAD") {
    set(CURLOPT_NOBODY, 1L);
  } else {
    if (sends_body_option(req)) {
      set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
      set(CURLOPT_POSTFIELDS, req.body.data());
    }
    if (req.method != "POST") set(CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
}

outcome<response, attempt_failure> easy_transfer::finish(CURLcode code, const attempt_context& ctx,
                                                         const clock& clk) {
  if (sends_ > 1 && plan_ != nullptr) plan_->hidden_resends += sends_ - 1;
  if (code != CURLE_OK) {
    attempt_failure failed{std::nullopt, failure_of(code), std::nullopt};
    failed.cut_by_deadline = cut_by_deadline(failed.error->curl_code, ctx.time_left);
    return failure{std::move(failed)};
  }
  long status = 0;
  (void)curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &status);
  response resp{static_cast<int>(status), std::move(status_line_), std::move(headers_),
                std::move(body_)};
  if (resp.status >= 200 && resp.status < 400) return resp;
  attempt_failure failed{std::move(resp), std::nullopt, std::nullopt};
  if (const auto field = failed.resp->header_value("Retry-After")) {
    failed.retry_after_delay = parse_retry_after(
        *field, std::chrono::time_point_cast<std::chrono::system_clock::duration>(clk.wall_now()));
  }
  // gRFC A6 pushback: negative or unparsable = do not retry; otherwise a minimum delay, as
  // Retry-After (the longer of the two when both are sent).
  if (const auto field = failed.resp->header_value(k_pushback_header)) {
    const pushback p = parse_pushback(*field);
    if (p.do_not_retry) {
      failed.pushback_do_not_retry = true;
    } else if (!failed.retry_after_delay || *failed.retry_after_delay < p.delay) {
      failed.retry_after_delay = p.delay;
    }
  }
  return failure{std::move(failed)};
}

// Whether a failed transfer timed out on the limit the call's deadline set: libcurl's time-outs
// were min(connect_timeout, attempt_timeout, time_left) until the request was written and
// min(attempt_timeout, time_left) after, so the deadline's was the one that fired when
// time_left was the smallest.
bool easy_transfer::cut_by_deadline(int code, duration time_left) const noexcept {
  if (code != CURLE_OPERATION_TIMEDOUT || time_left == duration::max()) return false;
  long request_size = 0;
  (void)curl_easy_getinfo(easy_, CURLINFO_REQUEST_SIZE, &request_size);
  const duration other = request_size > 0
                             ? options_->attempt_timeout
                             : std::min(options_->connect_timeout, options_->attempt_timeout);
  return time_left <= other;
}

// Whether a failed transfer hit libcurl's limits on response header fields: the response had
// begun and its fields had not ended, and libcurl ran out of room for one line (it reports
// CURLE_OUT_OF_MEMORY), or the fields so far leave no room for another line under the total.
bool easy_transfer::header_limit_hit(CURLcode code) const noexcept {
  if (status_line_.empty() || headers_complete_) return false;
  return code == CURLE_OUT_OF_MEMORY ||
         (code == CURLE_RECV_ERROR &&
          header_bytes_ > k_curl_max_header_total - k_curl_max_header_line);
}

// The failure of a transfer that ended with `code`.
transport_error easy_transfer::failure_of(CURLcode code) const {
  transport_error error;
  error.curl_code = static_cast<int>(code);
  error.kind = failure_kind_of(error.curl_code);
  const std::string curl_message =
      error_buffer_[0] != '\0' ? error_buffer_ : curl_easy_strerror(code);
  if (body_too_large_) {
    error.kind = failure_kind::response_too_large;
    error.message = "the response body is larger than max_body_bytes (" +
                    std::to_string(options_->max_body_bytes) + ")";
  } else if (header_limit_hit(code)) {
    error.kind = failure_kind::response_too_large;
    error.message = code == CURLE_OUT_OF_MEMORY
                        ? "a response header line is longer than libcurl's limit of " +
                              std::to_string(k_curl_max_header_line) +
                              " bytes (CURL_MAX_HTTP_HEADER)"
                        : "the response header fields are larger than libcurl's limit of " +
                              std::to_string(k_curl_max_header_total) +
                              " bytes in all (libcurl: " + curl_message + ")";
  } else if (code == CURLE_ABORTED_BY_CALLBACK) {
    error.message = "stopped (std::stop_token)";
  } else {
    error.message = curl_message;
  }
  if (error.kind == failure_kind::transport) {
    long request_size = 0;
    (void)curl_easy_getinfo(easy_, CURLINFO_REQUEST_SIZE, &request_size);
    error.phase = transport_phase_of(error.curl_code, request_size > 0);
  }
  return error;
}

std::size_t easy_transfer::on_body(char* data, std::size_t size, std::size_t count,
                                   void* self_ptr) {
  auto& self = *static_cast<easy_transfer*>(self_ptr);
  const std::size_t n = size * count;
  const std::size_t limit = self.options_->max_body_bytes;
  if (n > limit - std::min(self.body_.size(), limit)) {
    self.body_too_large_ = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  self.body_.append(data, n);
  return n;
}

std::size_t easy_transfer::on_header(char* data, std::size_t size, std::size_t count,
                                     void* self_ptr) {
  auto& self = *static_cast<easy_transfer*>(self_ptr);
  const std::size_t n = size * count;
  self.header_bytes_ += n;
  // One line as received, with its CRLF (or LF): the line without it.
  const std::string_view raw(data, n);
  const std::string_view line = raw.substr(0, raw.find_first_of("\r\n"));
  if (line.starts_with("HTTP/")) {
    self.headers_.clear();  // a new response (after an interim 1xx): keep the final one's only
    self.headers_complete_ = false;
    self.status_line_ = std::string(trim_ows(line));
  } else if (line.empty()) {
    self.headers_complete_ = true;  // the blank line that ends the fields
  } else if (is_ows(line.front())) {
    // Obsolete line folding (RFC 9112 §5.2): part of the previous field's value.
    if (!self.headers_.empty()) {
      self.headers_.back().value += ' ';
      self.headers_.back().value += trim_ows(line);
    }
  } else if (const auto field = parse_field_line(line)) {
    if (self.headers_.capacity() == 0) self.headers_.reserve(8);  // one allocation, not 3 or 4
    self.headers_.push_back(header{std::string(field->name), std::string(field->value)});
  }
  return n;
}

// ------------------------------------------------------------------------------------------------
// The verdict on an attempt, the result of a call
// ------------------------------------------------------------------------------------------------

classification classify_failure(const client_options& options, const attempt_failure& f,
                                const std::string& method, bool has_key) {
  if (f.pushback_do_not_retry) return classification::stop();  // ends as server_refused
  if (f.resp) {
    return classify_http_status(f.resp->status, method, has_key, f.retry_after_delay,
                                options.statuses);
  }
  if (!f.error->phase) return classification::stop();
  const classification verdict = classify_transport_failure(*f.error->phase, method, has_key);
  // An attempt that got no answer in time: budgets that price timeouts (retry_quota) see it.
  return f.error->curl_code == CURLE_OPERATION_TIMEDOUT ? verdict.as_timeout() : verdict;
}

int easy_transfer::on_send(void* self_ptr, char*, char*, int, int) {
  ++static_cast<easy_transfer*>(self_ptr)->sends_;
  return CURL_PREREQFUNC_OK;
}

void call_report::on_retry(int attempt, const attempt_failure& f, duration delay) {
  if (!options_->on_attempt) return;
  attempt_info info = describe_attempt(attempt, nullptr, &f, *plan_);
  info.delay = delay;
  options_->on_attempt(std::as_const(info));
  reported_ = attempt;
}

result call_report::finish(retry_result<response, attempt_failure>&& ended) {
  result out;
  // A deadline that cut the last attempt short ends the call as deadline_exceeded, also when no
  // retry was left or the request could not be retried: the deadline is what stopped it (the
  // retrier says so itself when a retry was left).
  out.reason = ended.reason;
  if (ended.last_error && ended.last_error->cut_by_deadline &&
      (ended.reason == end_reason::attempts_exhausted ||
       ended.reason == end_reason::not_retryable)) {
    out.reason = end_reason::deadline_exceeded;
  }
  if (ended.last_error && ended.last_error->pushback_do_not_retry &&
      ended.reason == end_reason::not_retryable) {
    out.reason = end_reason::server_refused;
  }
  // What reached the wire: the retrier's attempts and libcurl's own resends among them.
  out.attempts = ended.attempts + plan_->hidden_resends;
  out.slept = ended.slept;
  out.idempotency_key = plan_->key_field;
  if (options_->on_attempt && ended.attempts > reported_) {
    attempt_info info = describe_attempt(ended.attempts, ended.value ? &*ended.value : nullptr,
                                         ended.last_error ? &*ended.last_error : nullptr, *plan_);
    info.reason = out.reason;
    options_->on_attempt(std::as_const(info));
  }
  if (ended.value) {
    out.response = std::move(*ended.value);
  } else if (ended.last_error) {
    out.response = std::move(ended.last_error->resp);
    out.error = std::move(ended.last_error->error);
  }
  return out;
}

}  // namespace stormguard::http::detail
