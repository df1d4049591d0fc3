// stormguard::http::client: one libcurl transfer per attempt, retried by stormguard::retrier.
//
// The retry decision is not made here: an attempt's outcome goes to a classifier that asks the
// core (classify_http_status, classify_transport_failure, parse_retry_after), and the retrier
// asks retry_policy::decide. What lives here is the libcurl plumbing and the one table from a
// CURLcode to a transport_phase.
#include "stormguard/http/client.hpp"

#include <curl/curl.h>
#include <locale.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "stormguard/detail/format.hpp"
#include "stormguard/http/syntax.hpp"
#include "stormguard/retry_after.hpp"
#include "stormguard/version.hpp"

namespace stormguard::http {

namespace {

// ------------------------------------------------------------------------------------------------
// The CURLcode -> transport_phase table (docs/http.md, "Transport failures").
// ------------------------------------------------------------------------------------------------

enum class phase_rule {
  not_sent,       // the request cannot have reached the server
  maybe_sent,     // it may have reached the server and been processed
  if_bytes_sent,  // not_sent if libcurl wrote no byte of the request, else maybe_sent
};

struct phase_row {
  CURLcode code;
  phase_rule rule;
  const char* reason;
};

// Every code not listed is not a transport failure (configuration, local or protocol errors
// that another attempt cannot fix): never retried.
constexpr std::array k_phase_table{
    phase_row{CURLE_COULDNT_RESOLVE_PROXY, phase_rule::not_sent,
              "the proxy's name did not resolve: no connection was made"},
    phase_row{CURLE_COULDNT_RESOLVE_HOST, phase_rule::not_sent,
              "the host's name did not resolve: no connection was made"},
    phase_row{CURLE_COULDNT_CONNECT, phase_rule::not_sent,
              "the TCP connect failed (refused, unreachable): nothing was sent"},
    phase_row{CURLE_SSL_CONNECT_ERROR, phase_rule::not_sent,
              "the TLS handshake failed: the request is written only after it (no 0-RTT)"},
    phase_row{CURLE_PROXY, phase_rule::not_sent,
              "the proxy handshake failed: the request is written only after it"},
    phase_row{CURLE_OPERATION_TIMEDOUT, phase_rule::if_bytes_sent,
              "a time-out: during connect nothing was sent; after the request was written the "
              "server may be processing it"},
    phase_row{CURLE_SEND_ERROR, phase_rule::if_bytes_sent,
              "a write failed: part of the request may have arrived if any byte was written"},
    phase_row{CURLE_RECV_ERROR, phase_rule::if_bytes_sent,
              "a read failed (e.g. connection reset): after the request was written the server "
              "may have processed it"},
    phase_row{CURLE_GOT_NOTHING, phase_rule::maybe_sent,
              "the server closed the connection without a response, after reading the request"},
    phase_row{CURLE_PARTIAL_FILE, phase_rule::maybe_sent,
              "the response was cut short: the server processed the request"},
    phase_row{CURLE_HTTP2, phase_rule::maybe_sent,
              "an HTTP/2 framing error after the request may have been sent"},
    phase_row{CURLE_HTTP2_STREAM, phase_rule::maybe_sent,
              "the HTTP/2 stream was reset (e.g. REFUSED_STREAM is not distinguished)"},
};

// libcurl's usage errors: the request itself is wrong, before anything is sent. Never retried,
// and not transport failures (failure_kind::invalid_request).
constexpr std::array k_usage_codes{
    CURLE_UNSUPPORTED_PROTOCOL,  CURLE_URL_MALFORMAT,  CURLE_NOT_BUILT_IN,
    CURLE_BAD_FUNCTION_ARGUMENT, CURLE_UNKNOWN_OPTION, CURLE_SETOPT_OPTION_SYNTAX,
};

// libcurl's limits on response header fields (7.88.1 as patched by Debian, and every later
// version): one line above CURL_MAX_HTTP_HEADER bytes fails with CURLE_OUT_OF_MEMORY; all lines
// of a transfer together above 300 KiB (MAX_HTTP_RESP_HEADER_SIZE, lib/http.h, not public) with
// CURLE_RECV_ERROR "Too large response headers". Neither can be changed by an option.
constexpr std::size_t k_curl_max_header_line = CURL_MAX_HTTP_HEADER;
constexpr std::size_t k_curl_max_header_total = 300 * 1024;
// libcurl's limit on a host name (lib/url.c: "Too long host name (maximum is 65535)"), checked
// when a transfer starts, not by curl_url_set.
constexpr std::size_t k_curl_max_host_name = 0xffff;

// ------------------------------------------------------------------------------------------------
// libcurl set-up and small helpers.
// ------------------------------------------------------------------------------------------------

// curl_global_init is not thread-safe in every libcurl build; call it exactly once per process.
// curl_global_cleanup is never called: other code in the process may still use libcurl.
void global_init() {
  static const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (code != CURLE_OK) {
    throw std::runtime_error(std::string("stormguard::http::client: curl_global_init failed: ") +
                             curl_easy_strerror(code));
  }
}

[[noreturn]] void bad_request(const std::string& message) {
  throw std::invalid_argument("stormguard::http::request: " + message);
}

[[noreturn]] void bad_option(const std::string& message) {
  throw std::invalid_argument("stormguard::http::client_options: " + message);
}

std::string quoted(std::string_view text) { return detail::quote_for_message(text); }

// A curl_slist that frees itself.
struct slist {
  curl_slist* list = nullptr;
  slist() = default;
  slist(const slist&) = delete;
  slist& operator=(const slist&) = delete;
  ~slist() { curl_slist_free_all(list); }
  void clear() noexcept {
    curl_slist_free_all(list);
    list = nullptr;
  }
  void append(const std::string& line) {
    curl_slist* next = curl_slist_append(list, line.c_str());
    if (next == nullptr) throw std::bad_alloc();
    list = next;
  }
};

// A parsed URL (curl_url) that frees itself.
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

// Where a request goes: the URL handed to libcurl and the key of the host's budget.
struct target {
  std::string url;         // as given, or with a non-ASCII host in its ASCII (IDNA) form
  std::string budget_key;  // "scheme://host:port", lowercase, default port filled in
};

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

// What one failed attempt produced: a response with an error status (and its Retry-After, as
// parsed when it arrived), or a transfer that failed.
struct attempt_failure {
  std::optional<response> resp;
  std::optional<transport_error> error;
  std::optional<duration> retry_after_delay;
  bool cut_by_deadline = false;  // libcurl timed out on the limit that the deadline set
};

// What a call sends on every attempt, worked out once per call.
struct call_plan {
  const target* where = nullptr;
  ratio_budget* budget = nullptr;
  std::optional<std::string> key_field;  // the Idempotency-Key field value, if any
  bool fresh_connection = false;         // never ride a pooled connection (see perform)
  curl_slist* fields = nullptr;          // the request's header list, owned by the client
};

// The one description of an attempt, for client_options::on_attempt: from the successful
// response `ok`, or from the failure `failed`.
attempt_info describe_attempt(int attempt, const response* ok, const attempt_failure* failed,
                              const call_plan& plan) {
  attempt_info info;
  info.attempt = attempt;
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

}  // namespace

std::optional<transport_phase> transport_phase_of(int curl_code, bool request_sent) noexcept {
  for (const phase_row& row : k_phase_table) {
    if (static_cast<int>(row.code) != curl_code) continue;
    switch (row.rule) {
      case phase_rule::not_sent:
        return transport_phase::not_sent;
      case phase_rule::maybe_sent:
        return transport_phase::maybe_sent;
      case phase_rule::if_bytes_sent:
        return request_sent ? transport_phase::maybe_sent : transport_phase::not_sent;
    }
  }
  return std::nullopt;
}

failure_kind failure_kind_of(int curl_code) noexcept {
  if (transport_phase_of(curl_code, false)) return failure_kind::transport;
  for (const CURLcode code : k_usage_codes) {
    if (static_cast<int>(code) == curl_code) return failure_kind::invalid_request;
  }
  if (curl_code == CURLE_ABORTED_BY_CALLBACK) return failure_kind::cancelled;
  return failure_kind::other;
}

std::string_view to_string(failure_kind kind) noexcept {
  // In the order of the enumerators.
  constexpr std::array<std::string_view, 5> names{"transport error", "invalid request",
                                                  "response too large", "cancelled", "error"};
  const auto index = static_cast<std::size_t>(kind);
  return index < names.size() ? names[index] : "error";
}

std::optional<std::string_view> find_header(const std::vector<header>& headers,
                                            std::string_view name) noexcept {
  for (const header& h : headers) {
    if (iequals_ascii(h.name, name)) return std::string_view(h.value);
  }
  return std::nullopt;
}

std::string curl_version_text() { return curl_version(); }

// ------------------------------------------------------------------------------------------------
// host_budgets
// ------------------------------------------------------------------------------------------------

host_budgets::host_budgets(ratio_budget_options options) : options_(options) {
  (void)ratio_budget(options_);  // validates now, with the budget's own messages
}

ratio_budget& host_budgets::for_host(const std::string& host) {
  std::lock_guard lock(mutex_);
  auto it = budgets_.find(host);
  if (it == budgets_.end()) {
    it = budgets_.emplace(host, std::make_unique<ratio_budget>(options_)).first;
  }
  return *it->second;
}

std::vector<std::string> host_budgets::hosts() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& entry : budgets_) out.push_back(entry.first);
  return out;
}

// ------------------------------------------------------------------------------------------------
// client
// ------------------------------------------------------------------------------------------------

struct client::impl {
  client_options options;
  retry_policy policy;
  std::unique_ptr<real_clock> own_clock;
  std::unique_ptr<random_generator> own_random;
  clock* clk = nullptr;
  random_generator* random = nullptr;
  std::shared_ptr<host_budgets> budgets;
  CURLM* multi = nullptr;
  CURL* easy = nullptr;

  // The last call's target and header list, reused while a call sends the same (the common
  // case: one client calling one endpoint): no URL parse, budget look-up or list per call.
  std::string last_url;
  target last_target;
  ratio_budget* last_budget = nullptr;
  std::vector<header> last_headers;
  std::optional<std::string> last_key_field;
  bool last_has_body = false;
  slist last_fields;
  bool fields_built = false;

  // What the easy handle is configured for (see configure).
  struct handle_setup {
    bool reusable = false;  // the options may serve the next attempt of the same shape
    std::string method;
    bool fresh_connection = false;
    std::optional<std::string> url;  // the CURLOPT_URL set
    curl_slist* fields = nullptr;    // the CURLOPT_HTTPHEADER set
    bool fields_set = false;
  };
  handle_setup setup;

  // The attempt in progress (the callbacks write here).
  std::string body;
  std::vector<header> headers;
  std::string status_line;
  std::size_t header_bytes = 0;   // every header line of the transfer, as libcurl counts them
  bool headers_complete = false;  // the blank line after the final response's fields was seen
  bool body_too_large = false;
  char error_buffer[CURL_ERROR_SIZE] = {};

  impl(client_options o, clock* c, random_generator* r)
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
    budgets = options.shared_budgets ? options.shared_budgets
                                     : std::make_shared<host_budgets>(options.budget);
    if (clk == nullptr) {
      own_clock = std::make_unique<real_clock>();
      clk = own_clock.get();
    }
    if (random == nullptr) {
      own_random = std::make_unique<random_generator>();
      random = own_random.get();
    }
    global_init();
    multi = curl_multi_init();
    easy = curl_easy_init();
    if (multi == nullptr || easy == nullptr) {
      if (easy != nullptr) curl_easy_cleanup(easy);
      if (multi != nullptr) curl_multi_cleanup(multi);
      throw std::runtime_error("stormguard::http::client: cannot create a libcurl handle");
    }
  }

  ~impl() {
    curl_easy_cleanup(easy);
    curl_multi_cleanup(multi);
  }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  // ----- per call -------------------------------------------------------------------------------

  // Validates `req` and works out what every attempt sends. Throws std::invalid_argument.
  call_plan plan(const request& req) {
    validate_request(req);
    if (last_budget == nullptr || req.url != last_url) {
      target t = resolve_target(req.url);
      ratio_budget& budget = budgets->for_host(t.budget_key);
      last_url = req.url;
      last_target = std::move(t);
      last_budget = &budget;
    }
    call_plan p;
    p.where = &last_target;
    p.budget = last_budget;
    switch (req.idempotency.what()) {
      case key::kind::none:
        break;
      case key::kind::generate:
        p.key_field = idempotency_key_field_value(make_idempotency_key(), options.key_format);
        break;
      case key::kind::supplied:
        p.key_field = idempotency_key_field_value(req.idempotency.value(), options.key_format);
        break;
    }
    // libcurl resends a request on a fresh connection when a reused one died before any byte of
    // the response (lib/transfer.c, Curl_retry_request), invisibly to us. For a request that
    // must not be sent twice, never ride a pooled connection.
    p.fresh_connection = !may_resend(req.method, p.key_field.has_value());
    p.fields = fields_for(req.headers, p.key_field, !req.body.empty());
    return p;
  }

  // The header list for these fields, key and body: the last one when they are the same.
  curl_slist* fields_for(const std::vector<header>& fields, const std::optional<std::string>& key,
                         bool has_body) {
    if (fields_built && has_body == last_has_body && key == last_key_field &&
        fields == last_headers) {
      return last_fields.list;
    }
    fields_built = false;
    last_fields.clear();
    bool has_user_agent = false;
    bool has_expect = false;
    for (const header& h : fields) {
      // libcurl reads "Name:" (nothing after the colon) as "remove this header" and drops it, or
      // removes its own (Accept, Host, User-Agent); "Name;" is its syntax for an empty value.
      last_fields.append(h.value.empty() ? h.name + ";" : h.name + ": " + h.value);
      has_user_agent = has_user_agent || iequals_ascii(h.name, "User-Agent");
      has_expect = has_expect || iequals_ascii(h.name, "Expect");
    }
    if (key) last_fields.append(std::string(idempotency_key_header) + ": " + *key);
    // A header line, not CURLOPT_USERAGENT: libcurl formats that one anew for every transfer,
    // about 2,400 instructions more per request (callgrind, libcurl 7.88.1).
    if (!has_user_agent) last_fields.append("User-Agent: stormguard/" + std::string(version()));
    // No 100-continue round trip before a body (libcurl asks for one above 1 MB); a request
    // without a body never sends Expect.
    if (has_body && !has_expect) last_fields.append("Expect:");
    last_headers = fields;
    last_key_field = key;
    last_has_body = has_body;
    fields_built = true;
    return last_fields.list;
  }

  // ----- per attempt ----------------------------------------------------------------------------

  // One attempt: a 2xx or 3xx response, or the failure (with its Retry-After, parsed now on the
  // injected clock's wall time).
  outcome<response, attempt_failure> attempt(const request& req, const call_plan& p,
                                             const attempt_context& ctx) {
    outcome<response, transport_error> got = transfer(req, p, ctx);
    if (!got.has_value()) {
      attempt_failure failed{std::nullopt, std::move(got).error(), std::nullopt};
      failed.cut_by_deadline = cut_by_deadline(failed.error->curl_code, ctx.time_left);
      return failure{std::move(failed)};
    }
    response& resp = *got;
    if (resp.status >= 200 && resp.status < 400) return std::move(resp);
    attempt_failure failed{std::move(resp), std::nullopt, std::nullopt};
    if (const auto field = failed.resp->header_value("Retry-After")) {
      failed.retry_after_delay = parse_retry_after(
          *field,
          std::chrono::time_point_cast<std::chrono::system_clock::duration>(clk->wall_now()));
    }
    return failure{std::move(failed)};
  }

  // Whether a failed transfer timed out on the limit the call's deadline set: libcurl's time-outs
  // were min(connect_timeout, attempt_timeout, time_left) until the request was written and
  // min(attempt_timeout, time_left) after, so the deadline's was the one that fired when
  // time_left was the smallest.
  [[nodiscard]] bool cut_by_deadline(int code, duration time_left) const noexcept {
    if (code != CURLE_OPERATION_TIMEDOUT || time_left == duration::max()) return false;
    long request_size = 0;
    (void)curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_size);
    const duration other = request_size > 0
                               ? options.attempt_timeout
                               : std::min(options.connect_timeout, options.attempt_timeout);
    return time_left <= other;
  }

  // The verdict on a failed attempt, from the core rules.
  classification classify(const attempt_failure& f, const std::string& method, bool has_key) const {
    if (f.resp) {
      return classify_http_status(f.resp->status, method, has_key, f.retry_after_delay,
                                  options.statuses);
    }
    if (!f.error->phase) return classification::stop();
    const classification verdict = classify_transport_failure(*f.error->phase, method, has_key);
    // An attempt that got no answer in time: budgets that price timeouts (retry_quota) see it.
    return f.error->curl_code == CURLE_OPERATION_TIMEDOUT ? verdict.as_timeout() : verdict;
  }

  // One transfer: the response (any status), or the failure.
  outcome<response, transport_error> transfer(const request& req, const call_plan& p,
                                              const attempt_context& ctx) {
    configure(req, p, ctx);
    const CURLcode code = run(ctx.stop);
    if (code == CURLE_OK) {
      long status = 0;
      (void)curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
      return response{static_cast<int>(status), std::move(status_line), std::move(headers),
                      std::move(body)};
    }
    return failure{failure_of(code)};
  }

  template <class T>
  void set(CURLoption option, T value) {
    const CURLcode code = curl_easy_setopt(easy, option, value);
    if (code != CURLE_OK) {
      throw std::runtime_error(std::string("stormguard::http::client: curl_easy_setopt: ") +
                               curl_easy_strerror(code));
    }
  }

  // Prepares the easy handle and the attempt's state. curl_easy_reset and setting every option
  // again cost about as much as the rest of the client together (callgrind), so the options stay
  // as they are when this attempt is configured exactly like the previous one: the same method,
  // no body (libcurl keeps a pointer to a body, never to anything else of ours: it copies
  // strings) and the same fresh-connection rule. Otherwise the handle is reset first, so nothing
  // leaks from one request to the next. The URL and the header list are set when they changed,
  // the time-outs always.
  void configure(const request& req, const call_plan& p, const attempt_context& ctx) {
    body.clear();
    headers.clear();
    status_line.clear();
    header_bytes = 0;
    headers_complete = false;
    body_too_large = false;
    error_buffer[0] = '\0';

    const bool same_as_before = setup.reusable && req.body.empty() && req.method == setup.method &&
                                p.fresh_connection == setup.fresh_connection;
    if (!same_as_before) {
      setup = {};
      curl_easy_reset(easy);  // options only: connections, DNS and TLS session caches stay
      set_fixed_options();
      set_method(req);
      if (p.fresh_connection) set(CURLOPT_FRESH_CONNECT, 1L);
    }
    if (!setup.url || *setup.url != p.where->url) {
      setup.url.reset();
      set(CURLOPT_URL, p.where->url.c_str());  // copied by libcurl
      setup.url = p.where->url;
    }
    if (!setup.fields_set || setup.fields != p.fields) {
      set(CURLOPT_HTTPHEADER, p.fields);  // read by libcurl at each transfer, not copied
      setup.fields = p.fields;
      setup.fields_set = true;
    }
    set(CURLOPT_CONNECTTIMEOUT_MS, timeout_ms(std::min(options.connect_timeout, ctx.time_left)));
    set(CURLOPT_TIMEOUT_MS, timeout_ms(std::min(options.attempt_timeout, ctx.time_left)));
    setup.method = req.method;
    setup.fresh_connection = p.fresh_connection;
    setup.reusable = req.body.empty() && !sends_body_option(req);
  }

  // The options that are the same for every request of this client.
  void set_fixed_options() {
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    set(CURLOPT_FOLLOWLOCATION, 0L);
    set(CURLOPT_NOSIGNAL, 1L);
    set(CURLOPT_ERRORBUFFER, error_buffer);
    set(CURLOPT_WRITEFUNCTION, &impl::on_body);
    set(CURLOPT_WRITEDATA, this);
    set(CURLOPT_HEADERFUNCTION, &impl::on_header);
    set(CURLOPT_HEADERDATA, this);
  }

  // Whether the request's method is sent with CURLOPT_POSTFIELDS (see set_method).
  static bool sends_body_option(const request& req) noexcept {
    if (req.method == "HEAD" || (req.method == "GET" && req.body.empty())) return false;
    return !req.body.empty() || req.method == "POST" || req.method == "PUT" ||
           req.method == "PATCH";
  }

  void set_method(const request& req) {
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

  // Runs the configured transfer on the multi handle until it ends or `stop` is requested.
  CURLcode run(const std::stop_token& stop_token) {
    const CURLMcode added = curl_multi_add_handle(multi, easy);
    if (added != CURLM_OK) {
      throw std::runtime_error(std::string("stormguard::http::client: curl_multi_add_handle: ") +
                               curl_multi_strerror(added));
    }
    CURLcode code = CURLE_OK;
    {
      // A stop request wakes curl_multi_poll at once (curl_multi_wakeup is thread-safe) and the
      // loop, which checks the token after every curl_multi_perform, abandons the transfer (no
      // progress callback: curl_multi_perform never blocks, and libcurl calls one at every step).
      CURLM* m = multi;
      const std::stop_callback wake(stop_token, [m] { (void)curl_multi_wakeup(m); });
      for (bool done = false; !done;) {
        int running = 0;
        const CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) {
          code = CURLE_FAILED_INIT;
          std::snprintf(error_buffer, sizeof error_buffer, "curl_multi_perform: %s",
                        curl_multi_strerror(mc));
          break;
        }
        int queued = 0;
        while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
          if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
            code = msg->data.result;
            done = true;
          }
        }
        if (done) break;
        if (stop_token.stop_requested()) {
          code = CURLE_ABORTED_BY_CALLBACK;
          break;
        }
        (void)curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
      }
    }
    (void)curl_multi_remove_handle(multi, easy);
    return code;
  }

  // Whether a failed transfer hit libcurl's limits on response header fields: the response had
  // begun and its fields had not ended, and libcurl ran out of room for one line (it reports
  // CURLE_OUT_OF_MEMORY), or the fields so far leave no room for another line under the total.
  [[nodiscard]] bool header_limit_hit(CURLcode code) const noexcept {
    if (status_line.empty() || headers_complete) return false;
    return code == CURLE_OUT_OF_MEMORY ||
           (code == CURLE_RECV_ERROR &&
            header_bytes > k_curl_max_header_total - k_curl_max_header_line);
  }

  // The failure of a transfer that ended with `code`.
  transport_error failure_of(CURLcode code) const {
    transport_error error;
    error.curl_code = static_cast<int>(code);
    error.kind = failure_kind_of(error.curl_code);
    const std::string curl_message =
        error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
    if (body_too_large) {
      error.kind = failure_kind::response_too_large;
      error.message = "the response body is larger than max_body_bytes (" +
                      std::to_string(options.max_body_bytes) + ")";
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
      (void)curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_size);
      error.phase = transport_phase_of(error.curl_code, request_size > 0);
    }
    return error;
  }

  // ----- libcurl callbacks ----------------------------------------------------------------------

  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* self_ptr) {
    auto& self = *static_cast<impl*>(self_ptr);
    const std::size_t n = size * count;
    if (n > self.options.max_body_bytes - std::min(self.body.size(), self.options.max_body_bytes)) {
      self.body_too_large = true;
      return 0;  // CURLE_WRITE_ERROR
    }
    self.body.append(data, n);
    return n;
  }

  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* self_ptr) {
    auto& self = *static_cast<impl*>(self_ptr);
    const std::size_t n = size * count;
    self.header_bytes += n;
    // One line as received, with its CRLF (or LF): the line without it.
    const std::string_view raw(data, n);
    const std::string_view line = raw.substr(0, raw.find_first_of("\r\n"));
    if (line.starts_with("HTTP/")) {
      self.headers.clear();  // a new response (after an interim 1xx): keep the final one's only
      self.headers_complete = false;
      self.status_line = std::string(trim_ows(line));
    } else if (line.empty()) {
      self.headers_complete = true;  // the blank line that ends the fields
    } else if (is_ows(line.front())) {
      // Obsolete line folding (RFC 9112 §5.2): part of the previous field's value.
      if (!self.headers.empty()) {
        self.headers.back().value += ' ';
        self.headers.back().value += trim_ows(line);
      }
    } else if (const auto field = parse_field_line(line)) {
      if (self.headers.capacity() == 0) self.headers.reserve(8);  // one allocation, not 3 or 4
      self.headers.push_back(header{std::string(field->name), std::string(field->value)});
    }
    return n;
  }

  // ----- the end of a call ----------------------------------------------------------------------

  // Why the call ended. A deadline that cut the last attempt short ends the call as
  // deadline_exceeded, also when no retry was left or the request could not be retried: the
  // deadline is what stopped it (the retrier says so itself when a retry was left).
  static end_reason reason_of(end_reason reason, const std::optional<attempt_failure>& last) {
    if (last && last->cut_by_deadline &&
        (reason == end_reason::attempts_exhausted || reason == end_reason::not_retryable)) {
      return end_reason::deadline_exceeded;
    }
    return reason;
  }

  void report(attempt_info info) const {
    if (options.on_attempt) options.on_attempt(std::as_const(info));
  }
};

client::client(client_options options)
    : impl_(std::make_unique<impl>(std::move(options), nullptr, nullptr)) {}

client::client(client_options options, clock& clk, random_generator& random)
    : impl_(std::make_unique<impl>(std::move(options), &clk, &random)) {}

client::~client() = default;
client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;

const client_options& client::options() const noexcept { return impl_->options; }
host_budgets& client::budgets() noexcept { return *impl_->budgets; }

result client::perform(const request& req, const call_options& call) {
  impl& self = *impl_;
  const call_plan p = self.plan(req);
  const bool has_key = p.key_field.has_value();

  int reported = 0;  // the attempts already given to on_attempt (with the delay that followed)
  const auto operation = [&](const attempt_context& ctx) { return self.attempt(req, p, ctx); };
  const auto classify = [&](const attempt_failure& f) {
    return self.classify(f, req.method, has_key);
  };
  auto retry = retrier(self.policy, *self.clk, *self.random, *p.budget)
                   .on_retry([&](int attempt, const attempt_failure& f, duration delay) {
                     if (!self.options.on_attempt) return;
                     attempt_info info = describe_attempt(attempt, nullptr, &f, p);
                     info.delay = delay;
                     self.report(std::move(info));
                     reported = attempt;
                   });
  auto ended = retry(operation, classify, call);

  result out;
  out.reason = impl::reason_of(ended.reason, ended.last_error);
  out.attempts = ended.attempts;
  out.slept = ended.slept;
  out.idempotency_key = p.key_field;
  if (self.options.on_attempt && ended.attempts > reported) {
    attempt_info info = describe_attempt(ended.attempts, ended.value ? &*ended.value : nullptr,
                                         ended.last_error ? &*ended.last_error : nullptr, p);
    info.reason = out.reason;
    self.report(std::move(info));
  }
  if (ended.value) {
    out.response = std::move(*ended.value);
  } else if (ended.last_error) {
    out.response = std::move(ended.last_error->resp);
    out.error = std::move(ended.last_error->error);
  }
  return out;
}

}  // namespace stormguard::http
