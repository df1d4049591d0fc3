// stormguard::http::client: one libcurl transfer per attempt, retried by stormguard::retrier.
//
// The retry decision is not made here: an attempt's outcome goes to a classifier that asks the
// core (classify_http_status, classify_transport_failure, parse_retry_after), and the retrier
// asks retry_policy::decide. What lives here is the libcurl plumbing and the one table from a
// CURLcode to a transport_phase.
#include "stormguard/http/client.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "stormguard/detail/saturate.hpp"
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

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// RFC 9110 §5.6.2 tchar.
bool is_tchar(char c) noexcept {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) != 0 || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool is_token(std::string_view s) noexcept {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return c != 0 && is_tchar(c); });
}

// Quotes `text` for an error message, shortened to 80 characters.
std::string quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 80)) {
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\0') {
      out += "\\0";
    } else {
      out += c;
    }
  }
  return out + (text.size() > 80 ? "...'" : "'");
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// A curl_slist that frees itself.
struct slist {
  curl_slist* list = nullptr;
  slist() = default;
  slist(const slist&) = delete;
  slist& operator=(const slist&) = delete;
  ~slist() { curl_slist_free_all(list); }
  void append(const std::string& line) {
    curl_slist* next = curl_slist_append(list, line.c_str());
    if (next == nullptr) throw std::bad_alloc();
    list = next;
  }
};

// "scheme://host:port" of an absolute http(s) URL, lowercase: the key of the host's budget.
// Throws std::invalid_argument naming "url" for anything else.
std::string host_key(const std::string& url) {
  // libcurl reads the URL as a C string: a NUL would silently cut it short (another target).
  if (url.find('\0') != std::string::npos) {
    bad_request("url: contains a NUL byte at position " + std::to_string(url.find('\0')) + ": " +
                quoted(url));
  }
  CURLU* u = curl_url();
  if (u == nullptr) throw std::bad_alloc();
  const auto cleanup = [&] { curl_url_cleanup(u); };
  const CURLUcode set = curl_url_set(u, CURLUPART_URL, url.c_str(), 0);
  if (set != CURLUE_OK) {
    cleanup();
    bad_request("url: not an absolute http:// or https:// URL: " + quoted(url) + " (" +
                curl_url_strerror(set) + ")");
  }
  const auto part = [&](CURLUPart which, unsigned flags) {
    char* text = nullptr;
    std::string value;
    if (curl_url_get(u, which, &text, flags) == CURLUE_OK && text != nullptr) value = text;
    curl_free(text);
    return value;
  };
  const std::string scheme = lower(part(CURLUPART_SCHEME, 0));
  const std::string host = lower(part(CURLUPART_HOST, 0));
  const std::string port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  cleanup();
  if (scheme != "http" && scheme != "https") {
    bad_request("url: the scheme must be http or https, got " + quoted(scheme) + " in " +
                quoted(url));
  }
  if (host.empty()) bad_request("url: no host in " + quoted(url));
  return scheme + "://" + host + ":" + port;
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
    if (!is_token(h.name)) {
      bad_request("header name: not an RFC 9110 token: " + quoted(h.name));
    }
    if (h.value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
      bad_request("header " + quoted(h.name) +
                  ": the value contains CR, LF or NUL: " + quoted(h.value));
    }
    if (iequals(h.name, "Content-Length")) {
      // libcurl sends a caller's Content-Length instead of its own: one that differs from the
      // body makes the server wait for bytes that never come, or read the rest as a new request.
      bad_request("header 'Content-Length': set from request::body by the client; got " +
                  quoted(h.value) + " for a body of " + std::to_string(req.body.size()) + " bytes");
    }
    if (iequals(h.name, idempotency_key_header)) {
      bad_request(
          "header 'Idempotency-Key': set request::idempotency (key::use) instead, so that "
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

// What one failed attempt produced: a response with an error status, or a transport failure.
struct attempt_failure {
  std::optional<response> resp;
  std::optional<transport_error> error;
};

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

std::optional<std::string_view> find_header(const std::vector<header>& headers,
                                            std::string_view name) noexcept {
  for (const header& h : headers) {
    if (iequals(h.name, name)) return std::string_view(h.value);
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

  // The attempt in progress (the callbacks write here).
  std::string body;
  std::vector<header> headers;
  std::string status_line;
  bool body_too_large = false;
  std::stop_token stop;
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
    const std::string_view line(data, n);
    if (line.substr(0, 5) == "HTTP/") {
      self.headers.clear();  // a new response (after an interim 1xx): keep the final one's only
      self.status_line = std::string(trim(line));
    } else if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      // Obsolete line folding (RFC 9112 §5.2): part of the previous field's value.
      if (!self.headers.empty()) {
        self.headers.back().value += ' ';
        self.headers.back().value += trim(line);
      }
    } else if (const std::size_t colon = line.find(':'); colon != std::string_view::npos) {
      self.headers.push_back(
          header{std::string(line.substr(0, colon)), std::string(trim(line.substr(colon + 1)))});
    }
    return n;
  }

  static int on_progress(void* self_ptr, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    const auto& self = *static_cast<impl*>(self_ptr);
    return self.stop.stop_requested() ? 1 : 0;  // 1: abort (CURLE_ABORTED_BY_CALLBACK)
  }

  template <class T>
  void set(CURLoption option, T value) {
    const CURLcode code = curl_easy_setopt(easy, option, value);
    if (code != CURLE_OK) {
      throw std::runtime_error(std::string("stormguard::http::client: curl_easy_setopt: ") +
                               curl_easy_strerror(code));
    }
  }

  // One attempt: one transfer. Returns the response (any status), or the transport failure.
  outcome<response, transport_error> transfer(const request& req, const slist& fields,
                                              bool fresh_connection, const attempt_context& ctx) {
    curl_easy_reset(easy);  // options only: connections, DNS and TLS session caches stay
    body.clear();
    headers.clear();
    status_line.clear();
    body_too_large = false;
    stop = ctx.stop;
    error_buffer[0] = '\0';

    set(CURLOPT_URL, req.url.c_str());
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    set(CURLOPT_FOLLOWLOCATION, 0L);
    set(CURLOPT_NOSIGNAL, 1L);
    set(CURLOPT_ERRORBUFFER, error_buffer);
    set(CURLOPT_WRITEFUNCTION, &impl::on_body);
    set(CURLOPT_WRITEDATA, this);
    set(CURLOPT_HEADERFUNCTION, &impl::on_header);
    set(CURLOPT_HEADERDATA, this);
    set(CURLOPT_NOPROGRESS, 0L);
    set(CURLOPT_XFERINFOFUNCTION, &impl::on_progress);
    set(CURLOPT_XFERINFODATA, this);
    set(CURLOPT_HTTPHEADER, fields.list);
    set(CURLOPT_CONNECTTIMEOUT_MS, timeout_ms(std::min(options.connect_timeout, ctx.time_left)));
    set(CURLOPT_TIMEOUT_MS, timeout_ms(std::min(options.attempt_timeout, ctx.time_left)));
    if (fresh_connection) set(CURLOPT_FRESH_CONNECT, 1L);

    if (req.method == "GET" && req.body.empty()) {
      set(CURLOPT_HTTPGET, 1L);
    } else if (req.method == "HEAD") {
      set(CURLOPT_NOBODY, 1L);
    } else {
      if (!req.body.empty() || req.method == "POST" || req.method == "PUT" ||
          req.method == "PATCH") {
        set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
        set(CURLOPT_POSTFIELDS, req.body.data());
      }
      if (req.method != "POST") set(CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }

    CURLcode code = CURLE_OK;
    const CURLMcode added = curl_multi_add_handle(multi, easy);
    if (added != CURLM_OK) {
      throw std::runtime_error(std::string("stormguard::http::client: curl_multi_add_handle: ") +
                               curl_multi_strerror(added));
    }
    {
      // A stop request wakes curl_multi_poll at once (curl_multi_wakeup is thread-safe); the
      // progress callback then aborts the transfer, or the loop below stops it.
      CURLM* m = multi;
      const std::stop_callback wake(ctx.stop, [m] { (void)curl_multi_wakeup(m); });
      bool done = false;
      while (!done) {
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
        if (ctx.stop.stop_requested()) {
          code = CURLE_ABORTED_BY_CALLBACK;
          break;
        }
        (void)curl_multi_poll(multi, nullptr, 0, 1000, nullptr);
      }
    }
    (void)curl_multi_remove_handle(multi, easy);

    if (code == CURLE_OK) {
      long status = 0;
      (void)curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
      return response{static_cast<int>(status), std::move(status_line), std::move(headers),
                      std::move(body)};
    }
    long request_size = 0;
    (void)curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_size);
    transport_error error;
    error.curl_code = static_cast<int>(code);
    if (body_too_large) {
      error.message = "the response body is larger than max_body_bytes (" +
                      std::to_string(options.max_body_bytes) + ")";
    } else if (code == CURLE_ABORTED_BY_CALLBACK) {
      error.message = "stopped (std::stop_token)";
    } else {
      error.message = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
    }
    error.phase =
        body_too_large ? std::nullopt : transport_phase_of(error.curl_code, request_size > 0);
    return failure{std::move(error)};
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
  validate_request(req);
  const std::string host = host_key(req.url);

  std::optional<std::string> key_field;
  switch (req.idempotency.what()) {
    case key::kind::none:
      break;
    case key::kind::generate:
      key_field = idempotency_key_field_value(make_idempotency_key(), self.options.key_format);
      break;
    case key::kind::supplied:
      key_field = idempotency_key_field_value(req.idempotency.value(), self.options.key_format);
      break;
  }
  const bool has_key = key_field.has_value();
  // libcurl resends a request on a fresh connection when a reused one died before any byte of
  // the response (lib/transfer.c, Curl_retry_request), invisibly to us. For a request that must
  // not be sent twice, never ride a pooled connection.
  const bool fresh_connection = !may_resend(req.method, has_key);

  slist fields;
  bool has_user_agent = false;
  bool has_expect = false;
  for (const header& h : req.headers) {
    // libcurl reads "Name:" (nothing after the colon) as "remove this header" and drops it, or
    // removes its own (Accept, Host, User-Agent); "Name;" is its syntax for an empty value.
    fields.append(h.value.empty() ? h.name + ";" : h.name + ": " + h.value);
    has_user_agent = has_user_agent || iequals(h.name, "User-Agent");
    has_expect = has_expect || iequals(h.name, "Expect");
  }
  if (key_field) fields.append(std::string(idempotency_key_header) + ": " + *key_field);
  if (!has_user_agent) fields.append("User-Agent: stormguard/" + std::string(version()));
  if (!has_expect) fields.append("Expect:");  // no 100-continue round trip before a body

  ratio_budget& budget = self.budgets->for_host(host);

  std::optional<attempt_info> pending;
  const auto report = [&](attempt_info& r) {
    if (self.options.on_attempt) self.options.on_attempt(std::as_const(r));
  };

  const auto operation = [&](const attempt_context& ctx) -> outcome<response, attempt_failure> {
    outcome<response, transport_error> got = self.transfer(req, fields, fresh_connection, ctx);
    pending.emplace();
    pending->attempt = ctx.attempt;
    pending->idempotency_key = key_field;
    if (!got.has_value()) {
      pending->error = got.error();
      return failure{attempt_failure{std::nullopt, std::move(got).error()}};
    }
    response& resp = *got;
    pending->status = resp.status;
    if (resp.status >= 200 && resp.status < 400) return std::move(resp);
    return failure{attempt_failure{std::move(resp), std::nullopt}};
  };

  const auto classify = [&](const attempt_failure& f) -> classification {
    if (f.resp) {
      std::optional<duration> retry_after;
      if (const auto field = f.resp->header_value("Retry-After")) {
        retry_after = parse_retry_after(*field, std::chrono::system_clock::now());
        if (pending) {
          pending->retry_after = std::string(*field);
          pending->retry_after_delay = retry_after;
        }
      }
      return classify_http_status(f.resp->status, req.method, has_key, retry_after,
                                  self.options.statuses);
    }
    if (!f.error->phase) return classification::stop();
    const classification verdict = classify_transport_failure(*f.error->phase, req.method, has_key);
    // An attempt that got no answer in time: budgets that price timeouts (retry_quota) see it.
    return f.error->curl_code == CURLE_OPERATION_TIMEDOUT ? verdict.as_timeout() : verdict;
  };

  auto retry = retrier(self.policy, *self.clk, *self.random, budget)
                   .on_retry([&](int, const attempt_failure&, duration delay) {
                     if (!pending) return;
                     pending->delay = delay;
                     report(*pending);
                     pending.reset();
                   });
  auto ended = retry(operation, classify, call);

  result out;
  out.reason = ended.reason;
  out.attempts = ended.attempts;
  out.slept = ended.slept;
  out.idempotency_key = key_field;
  if (ended.value) {
    out.response = std::move(*ended.value);
  } else if (ended.last_error) {
    out.response = std::move(ended.last_error->resp);
    out.error = std::move(ended.last_error->error);
  }
  if (pending) {
    pending->reason = out.reason;
    report(*pending);
  }
  return out;
}

}  // namespace stormguard::http
