// stormguard::http::client: one libcurl transfer per attempt, retried by stormguard::retrier.
//
// The retry decision is not made here: an attempt's outcome goes to a classifier that asks the
// core (classify_http_status, classify_transport_failure, parse_retry_after), and the retrier
// asks retry_policy::decide. What lives here is the one table from a CURLcode to a
// transport_phase and the loop that drives one transfer (curl_multi_poll); what both clients share
// (validation, the call plan, the easy handle and its callbacks, the result) is in transfer.cpp.
#include "stormguard/http/client.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "http/transfer.hpp"
#include "stormguard/http/syntax.hpp"

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
  detail::client_setup setup;
  detail::request_planner planner;
  CURLM* multi = nullptr;
  detail::easy_transfer transfer;

  impl(client_options o, clock* c, random_generator* r)
      : setup(std::move(o), c, r),
        planner(setup.options, *setup.budgets),
        multi(curl_multi_init()),
        transfer(setup.options) {
    if (multi == nullptr) {
      throw std::runtime_error("stormguard::http::client: cannot create a libcurl handle");
    }
  }

  ~impl() { curl_multi_cleanup(multi); }

  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  // One attempt: a 2xx or 3xx response, or the failure.
  outcome<response, detail::attempt_failure> attempt(const request& req, const detail::call_plan& p,
                                                     const attempt_context& ctx) {
    transfer.configure(req, p, ctx);
    return transfer.finish(run(ctx.stop), ctx, *setup.clk);
  }

  // Runs the configured transfer on the multi handle until it ends or `stop` is requested.
  CURLcode run(const std::stop_token& stop_token) {
    CURL* easy = transfer.handle();
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
          std::snprintf(transfer.error_buffer(), CURL_ERROR_SIZE, "curl_multi_perform: %s",
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
};

client::client(client_options options)
    : impl_(std::make_unique<impl>(std::move(options), nullptr, nullptr)) {}

client::client(client_options options, clock& clk, random_generator& random)
    : impl_(std::make_unique<impl>(std::move(options), &clk, &random)) {}

client::~client() = default;
client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;

const client_options& client::options() const noexcept { return impl_->setup.options; }
host_budgets& client::budgets() noexcept { return *impl_->setup.budgets; }

result client::perform(const request& req, const call_options& call) {
  impl& self = *impl_;
  const detail::call_plan p = self.planner.plan(req);
  const bool has_key = p.key_field.has_value();
  detail::call_report report(self.setup.options, p);
  const auto operation = [&](const attempt_context& ctx) { return self.attempt(req, p, ctx); };
  const auto classify = [&](const detail::attempt_failure& f) {
    return detail::classify_failure(self.setup.options, f, req.method, has_key);
  };
  auto retry = retrier(self.setup.policy, *self.setup.clk, *self.setup.random, *p.budget)
                   .on_retry([&](int attempt, const detail::attempt_failure& f, duration delay) {
                     report.on_retry(attempt, f, delay);
                   });
  return report.finish(retry(operation, classify, call));
}

}  // namespace stormguard::http
