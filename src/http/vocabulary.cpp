// SPDX-License-Identifier: Apache-2.0
// The HTTP vocabulary that both clients (client.cpp, async_client.cpp) and their shared layer
// (transfer.cpp) use: the one table from a libcurl CURLcode to a transport_phase, the failure
// kinds, header lookup, and the per-host retry budgets. Nothing here calls into a client.
#include <curl/curl.h>

#include <array>
#include <mutex>
#include <string>
#include <utility>

#include "stormguard/http/client.hpp"
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

host_budgets::host_budgets(budget_options options) : options_(std::move(options)) {
  (void)any_budget(options_);  // validates now, with the budget's own messages
}

host_budgets::host_budgets(budget_options options, attach_hook attach)
    : host_budgets(std::move(options)) {
  attach_ = std::move(attach);
}

any_budget& host_budgets::for_host(const std::string& host) {
  const stormguard::detail::lock hold(mutex_);
  auto it = budgets_.find(host);
  if (it == budgets_.end()) {
    std::unique_ptr<any_budget> budget = make_budget(options_);
    std::shared_ptr<void> attached = attach_ ? attach_(host, *budget) : nullptr;
    it = budgets_.emplace(host, std::move(budget)).first;
    if (attached) attached_.emplace(host, std::move(attached));
  }
  return *it->second;
}

std::vector<std::string> host_budgets::hosts() const {
  const stormguard::detail::lock hold(mutex_);
  std::vector<std::string> out;
  for (const auto& entry : budgets_) out.push_back(entry.first);
  return out;
}

}  // namespace stormguard::http
