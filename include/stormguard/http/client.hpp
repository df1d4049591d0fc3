// SPDX-License-Identifier: Apache-2.0
/// \file
/// An HTTP client (libcurl) with stormguard's retry rules built in.
///
/// One call of client::perform is one logical request: the client sends it, and when the attempt
/// fails in a way worth another attempt it waits (backoff with jitter, or the server's
/// Retry-After), and sends it again, through the library's own executor (stormguard::retrier).
/// What is retried (docs/http.md):
///  - HTTP statuses 429, 502, 503, 504 (configurable), honouring Retry-After (RFC 9110 §10.2.3,
///    parsed by stormguard::parse_retry_after, never libcurl's CURLINFO_RETRY_AFTER);
///  - transport failures where the request certainly did not reach the server (could not resolve,
///    connect or refused), for every method;
///  - transport failures after it may have reached the server (reset, empty reply, time-out while
///    waiting for the response) only for idempotent methods (RFC 9110 §9.2.2) or requests that
///    carry an Idempotency-Key (draft-ietf-httpapi-idempotency-key-header), which is the same on
///    every attempt. A POST or PATCH without a key is never retried, whatever the error.
///
/// Each host has a retry budget (any kind: stormguard::any_budget, a ratio_budget by default)
/// shared by every call of the client. With client_options::hedging the client hedges instead of
/// retrying: concurrent copies of the request, the first good answer wins (docs/hedging.md).
///
/// \code{.cpp}
///  stormguard::http::client client;                       // real clock, OS-seeded jitter
///  stormguard::http::result r = client.perform({.method = "POST",
///                                                .url = "https://api.example.com/charges",
///                                                .body = R"({"amount": 100})",
///                                                .idempotency =
///                                                stormguard::http::key::generate()});
///  if (r.ok()) use(r.response->body);
///  else log(to_string(r.reason), r.attempts, r.response ? r.response->status : 0,
///           r.error ? r.error->message : "");
/// \endcode
///
/// Thread safety: a client is NOT thread-safe; use one client per thread (it owns one libcurl easy
/// handle, its connections and a random generator). Clients in several threads may share per-host
/// retry budgets through one stormguard::http::host_budgets (thread-safe).
#ifndef STORMGUARD_HTTP_CLIENT_HPP
#define STORMGUARD_HTTP_CLIENT_HPP

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stormguard/budget.hpp"
#include "stormguard/budget_kinds.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/export.hpp"
#include "stormguard/hedging.hpp"
#include "stormguard/http_classify.hpp"
#include "stormguard/idempotency.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::http {

/// One header field: name and value, as sent or received (names keep their case; compare them
/// case-insensitively, RFC 9110 §5.1).
struct header {
  /// The field name, as written (an RFC 9110 token such as "Retry-After").
  std::string name{};
  /// The field value, without the surrounding white space (may be empty).
  std::string value{};

  friend bool operator==(const header&, const header&) = default;
};

/// The value of the first header in `headers` named `name` (ASCII case-insensitive), if any.
[[nodiscard]] STORMGUARD_EXPORT std::optional<std::string_view> find_header(
    const std::vector<header>& headers, std::string_view name) noexcept;

/// Whether a request carries an Idempotency-Key, and which.
class key {
 public:
  /// No key: a non-idempotent method (POST, PATCH, ...) is then never retried after the request
  /// may have reached the server. The default.
  [[nodiscard]] static key none() noexcept { return key(kind::none, {}); }
  /// A new key (stormguard::make_idempotency_key: a UUID v4 from the OS CSPRNG) generated once
  /// per call of client::perform, i.e. per logical request, and sent unchanged on every attempt.
  [[nodiscard]] static key generate() noexcept { return key(kind::generate, {}); }
  /// The caller's key, sent as is on every attempt (for a logical request that the caller may
  /// itself repeat, e.g. after a crash). Validated when the request is performed
  /// (stormguard::validate_idempotency_key: printable ASCII, 1..255 characters).
  [[nodiscard]] static key use(std::string value) { return key(kind::supplied, std::move(value)); }

  /// What the option says: no key, a key generated per call, or the caller's key.
  enum class kind { none, generate, supplied };
  /// Which of the three this option is (none, generate or supplied).
  [[nodiscard]] kind what() const noexcept { return kind_; }
  /// The caller's key (kind::supplied); empty otherwise.
  [[nodiscard]] const std::string& value() const noexcept { return value_; }

  friend bool operator==(const key&, const key&) = default;

 private:
  key(kind k, std::string v) : kind_(k), value_(std::move(v)) {}
  kind kind_;
  std::string value_;
};

/// A request: a plain value type.
struct request {
  /// The method, case-sensitive (RFC 9110 §9.1): an RFC 9110 token such as GET, POST, PUT.
  std::string method = "GET";
  /// An absolute http:// or https:// URL.
  std::string url{};
  /// Extra header fields, sent in order; an empty value is sent as an empty value ("X-A:"),
  /// never dropped or read as libcurl's "remove this header". Content-Length is rejected (the
  /// client sets it from `body`). A field named Idempotency-Key is rejected: use
  /// `idempotency`. The client adds User-Agent ("stormguard/" followed by stormguard::version())
  /// unless one is given, and "Expect:" (empty: no 100-continue wait) unless an Expect field is
  /// given.
  std::vector<header> headers{};
  /// The body (sent with Content-Length when non-empty, for any method including GET, or for
  /// POST, PUT and PATCH). A HEAD with a body is rejected (libcurl cannot send one).
  std::string body{};
  /// The Idempotency-Key option.
  key idempotency = key::none();
  /// The address to connect to instead of resolving the URL's host: an IPv4 literal
  /// ("127.0.0.2") or an IPv6 literal without brackets ("::1"), at the URL's port; empty (the
  /// default) = resolve the host. The Host field, the TLS server name and the certificate check
  /// still use the URL's host (libcurl's CURLOPT_CONNECT_TO), and a kept-alive connection is
  /// reused only by requests pinned to the same address. The hedging executors set it per copy
  /// so that copies go to different addresses of one host (gRFC A6; docs/hedging.md). Anything
  /// else than an IP literal is rejected (std::invalid_argument naming connect_address).
  std::string connect_address{};
};

/// A response: a plain value type.
struct response {
  int status = 0;                 ///< the status code, 100..599
  std::string status_line{};      ///< the status line as received, e.g. "HTTP/1.1 404 Not Found"
  std::vector<header> headers{};  ///< the fields of the final response, in order
  std::string body{};             ///< the body, as received (no content decoding)

  /// The value of the first header named `name` (case-insensitive), if any.
  [[nodiscard]] std::optional<std::string_view> header_value(std::string_view name) const noexcept {
    return find_header(headers, name);
  }
};

/// What kind of failure ended an attempt that got no usable response (transport_error::kind).
/// Only `transport` failures may be retried (by the CURLcode table, docs/http.md); the others
/// would fail the same way again.
enum class failure_kind {
  /// The network or the server's connection: resolve, connect, send, receive, time-out, empty
  /// reply (transport_error::phase says whether the request may have reached the server).
  transport,
  /// libcurl refused the request itself, before sending anything: a malformed URL, an
  /// unsupported protocol, a bad argument (CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL,
  /// CURLE_NOT_BUILT_IN, CURLE_BAD_FUNCTION_ARGUMENT, CURLE_UNKNOWN_OPTION,
  /// CURLE_SETOPT_OPTION_SYNTAX). A usage error of the caller; never retried.
  invalid_request,
  /// The response exceeds a limit, so the server would send the same again: a body above
  /// client_options::max_body_bytes (CURLE_WRITE_ERROR), or response header fields above
  /// libcurl's limits, which no option changes (libcurl 7.88: one header line over 100 KiB gives
  /// CURLE_OUT_OF_MEMORY, all header lines together over 300 KiB CURLE_RECV_ERROR). Never
  /// retried.
  response_too_large,
  /// call_options::stop was requested during the transfer (CURLE_ABORTED_BY_CALLBACK).
  cancelled,
  /// Anything else: a certificate problem, out of memory, a local error. Never retried.
  other,
};

/// "transport error", "invalid request", "response too large", "cancelled" or "error" (other).
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(failure_kind kind) noexcept;

/// The kind of failure a libcurl CURLcode (as an int) reports on its own: transport for the codes
/// of the CURLcode table (transport_phase_of), invalid_request for libcurl's usage errors,
/// cancelled for CURLE_ABORTED_BY_CALLBACK, other for every other code (CURLE_OK included). The
/// client refines it to response_too_large when it knows a limit was hit. Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT failure_kind failure_kind_of(int curl_code) noexcept;

/// A failed transfer: no HTTP response was received, or none that could be kept.
struct transport_error {
  /// libcurl's CURLcode, as an int (compare with CURLE_* after including <curl/curl.h>; the
  /// client's header does not include it).
  int curl_code = 0;
  /// What kind of failure it is (failure_kind); only `transport` failures may be retried.
  failure_kind kind = failure_kind::transport;
  /// What happened: libcurl's message (its error buffer, or curl_easy_strerror), or the
  /// client's own when a limit was hit (max_body_bytes, libcurl's header limits).
  std::string message{};
  /// Where it happened relative to sending the request, from the client's CURLcode table
  /// (docs/http.md); set only for kind == failure_kind::transport. Empty for every other
  /// failure, which is never retried.
  std::optional<transport_phase> phase{};
};

/// A description of one attempt, given to client_options::on_attempt after the decision about
/// it was made (so that the delay chosen is known).
struct attempt_info {
  /// The attempt's number as the server sees it (x-envoy-attempt-count): from 1, or from N when
  /// the request carries its own x-envoy-attempt-count N (a hedged copy N does: copies are
  /// numbered 1, 2, ... in the order they are sent).
  int attempt = 1;
  std::optional<int> status{};               ///< the response's status, when one was received
  std::optional<transport_error> error{};    ///< otherwise the transport failure
  std::optional<std::string> retry_after{};  ///< the Retry-After field as received, if any
  /// The Retry-After as parsed (stormguard::parse_retry_after), an HTTP-date measured from the
  /// client clock's wall_now() when the response arrived; empty when absent or unparsable (then
  /// the policy's own backoff applies, never an immediate retry).
  std::optional<duration> retry_after_delay{};
  std::optional<duration> delay{};  ///< the wait before the next attempt, when one follows
  /// Why the call ended after this attempt, when no attempt follows.
  std::optional<end_reason> reason{};
  std::optional<std::string> idempotency_key{};  ///< the Idempotency-Key field value sent, if any
};

/// Retry budgets per host ("scheme://host:port", lowercase), created on first use with the same
/// options: a budget of any kind of the core's list (stormguard::any_budget; a ratio budget by
/// default). Thread-safe: clients in several threads may share one instance (then each host's
/// budget bounds the retries of all of them together).
class STORMGUARD_EXPORT host_budgets {
 public:
  /// Called once per host, on the thread that first asks for its budget, right after the budget
  /// is built: returns an object kept alive as long as the budget (destroyed before it), or
  /// nullptr. stormguard::fleet::host_attacher() gives one that attaches a fleet budget's Redis
  /// syncer on the key "KEY:scheme://host:port" (stormguard/fleet/attach.hpp). An exception from
  /// it propagates out of for_host() and the host gets no budget.
  using attach_hook = std::function<std::shared_ptr<void>(const std::string& host, any_budget&)>;

  /// Validates `options` (as the kind's class: throws std::invalid_argument naming the field and
  /// the value).
  explicit host_budgets(budget_options options = ratio_budget_options{});
  /// The same, with `attach` called for each host's new budget (see attach_hook; empty = none).
  host_budgets(budget_options options, attach_hook attach);

  /// The budget of `host`, created on first use. The reference stays valid as long as this
  /// object lives.
  [[nodiscard]] any_budget& for_host(const std::string& host);

  /// The hosts that have a budget, sorted.
  [[nodiscard]] std::vector<std::string> hosts() const;

  /// The options every host's budget is built from.
  [[nodiscard]] const budget_options& options() const noexcept { return options_; }

 private:
  budget_options options_;
  attach_hook attach_;
  mutable stormguard::detail::mutex mutex_;
  std::map<std::string, std::unique_ptr<any_budget>, std::less<>> budgets_
      STORMGUARD_GUARDED_BY(mutex_);
  // What attach_ returned per host; declared after budgets_ so that it is destroyed first.
  std::map<std::string, std::shared_ptr<void>, std::less<>> attached_ STORMGUARD_GUARDED_BY(mutex_);
};

/// Hedged requests on http::client (client_options::hedging): the copies of each call are real,
/// concurrent libcurl transfers; the first good answer (2xx, 3xx) is returned and the other copies
/// are cancelled, their connections closed, before perform() returns. The rules are those of
/// http::async_hedge (stormguard/http/hedge.hpp), which the client runs on a private event loop:
/// pushback, Retry-After on 429/503, 409 "in progress" with an Idempotency-Key, non-fatal
/// statuses, one copy only for a non-idempotent method without a key, copies spread over the
/// host's addresses (docs/hedging.md).
struct client_hedging {
  /// Copies in all, delay between them (or a quantile of recent latencies), the longest pushback
  /// waited for. Validated by the client (as stormguard::hedging_policy: std::invalid_argument
  /// naming hedging.max_attempts, hedging.delay, ...).
  hedging_options policy{};
  /// The statuses after which the next copy goes at once (gRFC A6's nonFatalStatusCodes).
  /// Default: none.
  std::vector<int> non_fatal_statuses{};
  /// Called once at the end of every hedged call, on the calling thread, with the call's reason
  /// and report (the hedger's end hook: stormguard::metrics::http_hedge_hook records the hedge
  /// metrics). An exception from it propagates out of perform(). Empty = no call.
  std::function<void(end_reason, const hedge_report&)> on_end{};
  /// The longest copy 2 waits for the lookup of the host's addresses (hedge_http_options::
  /// resolve_wait: the lookup runs off the calling thread's loop, on Asio's resolver thread; when
  /// it is late, copy 2 goes unpinned). Steady time, >= 0 (0 = never waits; negative:
  /// std::invalid_argument naming hedging.resolve_wait). Default 10 ms.
  duration resolve_wait = std::chrono::milliseconds(10);
};

/// The settings of a client.
struct client_options {
  /// Retries, backoff and the longest Retry-After honoured (stormguard::retry_options; default
  /// 3 retries, full jitter 100 ms .. 3 s, Retry-After up to 60 s).
  retry_options retry{};
  /// The retry budget per host, any kind of the core's list (stormguard/budget_kinds.hpp;
  /// default: a ratio budget, 10 % of requests over 10 s, plus 10 retries/s).
  budget_options budget = ratio_budget_options{};
  /// Budgets shared with other clients; when null the client makes its own (from `budget`).
  std::shared_ptr<host_budgets> shared_budgets{};
  /// Time limit of one attempt (connect, send, wait, receive), steady time; > 0. Shortened to
  /// the time left before the call's deadline. Default 30 s; duration::max() = none.
  duration attempt_timeout = std::chrono::seconds(30);
  /// Time limit of the TCP (and TLS) connect within an attempt; > 0. Default 10 s.
  duration connect_timeout = std::chrono::seconds(10);
  /// How the Idempotency-Key field value is written (structured "key" by default, or bare).
  idempotency_key_format key_format = idempotency_key_format::structured;
  /// The statuses that may be retried (default 429, 502, 503, 504).
  retryable_statuses statuses{};
  /// The largest response body kept, in bytes; a larger one fails the attempt (transport_error
  /// with CURLE_WRITE_ERROR, not retried). > 0. Default 64 MiB.
  std::size_t max_body_bytes = std::size_t{64} << 20;
  /// Called on the calling thread after each attempt, once its outcome is decided (see
  /// attempt_info). An exception from it propagates out of perform(). Empty = no call.
  std::function<void(const attempt_info&)> on_attempt{};
  /// Called once per host when the client makes that host's budget (host_budgets::attach_hook;
  /// not used with shared_budgets, which carry their own). A budget of kind fleet naming a store
  /// needs it to reach the store: stormguard::fleet::host_attacher() (stormguard/fleet/attach.hpp)
  /// attaches its Redis syncer; without it the fleet budget stays in its fallback, a local ratio
  /// budget. Empty = none.
  host_budgets::attach_hook attach_budget{};
  /// Hedged copies instead of retries (http::client only; http::async_client ignores it: hedge
  /// with http::async_hedge). Needs retry.max_retries == 0 (a policy retries or hedges, gRFC A6;
  /// std::invalid_argument otherwise). The copies after the first draw from the host's budget
  /// (`budget` or shared_budgets), one retry each; on_attempt is called once per copy, with the
  /// copy's number as its attempt. Empty (the default) = no hedging.
  std::optional<client_hedging> hedging{};
  /// Fixed addresses for host names, as curl's --resolve (libcurl's CURLOPT_RESOLVE): entries
  /// "HOST:PORT:ADDRESS[,ADDRESS...]" (an IPv6 address in brackets), used instead of DNS for
  /// HOST:PORT by every transfer of the client, and by the hedging to spread copies over the
  /// addresses. A malformed entry is rejected (std::invalid_argument naming resolve). Default:
  /// none.
  std::vector<std::string> resolve{};
  /// What every attempt tells the server about itself (docs/http.md): its number in
  /// x-envoy-attempt-count (`send_attempt_count`) and the time its caller waits for it in
  /// grpc-timeout (`send_timeout`), which a server's retry budget and drop-expired read
  /// (stormguard::admission). Default true, both. false: the field is not sent — for a server
  /// that should not see it, or a program that plays another kind of client (stormguard lab's
  /// client profiles, stormguard/client_profile.hpp). A field the request carries itself is sent
  /// as it is either way.
  bool send_attempt_count = true;
  bool send_timeout = true;  ///< see send_attempt_count
  /// false: every attempt opens a new connection and closes it afterwards
  /// (CURLOPT_FRESH_CONNECT, CURLOPT_FORBID_REUSE), as a client run once per request does (curl
  /// in a script). Default true: connections are kept alive and reused.
  bool reuse_connections = true;
};

/// How a call ended.
struct result {
  /// Why the call ended: success for a 2xx or 3xx final response; not_retryable,
  /// attempts_exhausted, budget_exhausted, retry_after_too_long, deadline_exceeded or
  /// cancelled otherwise (stormguard::end_reason).
  end_reason reason = end_reason::success;
  /// Attempts made (0 when the call was cancelled or past its deadline before the first): the
  /// requests that reached the wire, libcurl's own resend on a dead pooled connection included.
  int attempts = 0;
  /// The response of the last attempt, when it got one (the success, or the last HTTP error).
  std::optional<http::response> response{};
  /// The last attempt's transport failure, when it got no response.
  std::optional<transport_error> error{};
  /// The Idempotency-Key field value sent on every attempt, if any.
  std::optional<std::string> idempotency_key{};
  /// Total backoff waited (steady time).
  duration slept{};
  /// What happened to the copies when the call was hedged (client_options::hedging): which copy
  /// won, copies sent, refused by the budget, cancelled. Empty when the call was not hedged.
  std::optional<hedge_report> hedging{};

  /// Whether the call succeeded: reason == end_reason::success (a 2xx or 3xx final response).
  [[nodiscard]] bool ok() const noexcept { return reason == end_reason::success; }
  /// ok(): `if (auto r = client.perform(req))`.
  explicit operator bool() const noexcept { return ok(); }
};

/// The HTTP client. Owns one libcurl easy handle (and a multi handle that keeps its connection
/// cache), reused for every attempt and every call: connections are kept alive between them.
/// Its options are kept only while an attempt is configured exactly like the previous one (same
/// method, no body); any other attempt resets them first, so nothing leaks from one request to
/// the next.
///
/// Redirects are NOT followed (libcurl's default): a 3xx is the final response, and ok(). A
/// redirect could move a POST body, or its Idempotency-Key, to another host; a caller that wants
/// to follow one sends a new request to its Location.
///
/// Only http and https are allowed (CURLOPT_PROTOCOLS_STR), also for any protocol a server
/// could redirect to. A request that cannot be sent safely again is sent on a fresh connection:
/// libcurl silently resends a request whose reused connection died before any byte of response
/// arrived, which must not happen to a POST without a key (docs/http.md).
///
/// Not thread-safe: one client per thread. Holds references to the clock and generator given.
///
/// Example (tests/integration/reference_http_examples_test.cpp, run by the tests):
/// \snippet reference_http_examples_test.cpp http_client
class STORMGUARD_EXPORT client {
 public:
  /// A client with its own real_clock and OS-seeded random_generator. Validates `options`:
  /// throws std::invalid_argument naming the field and the value (retry options as
  /// stormguard::retry_policy, budget options as the budget kind's class, attempt_timeout,
  /// connect_timeout or max_body_bytes not > 0). Throws std::runtime_error when libcurl cannot
  /// be initialised.
  explicit client(client_options options = {});
  /// A client that reads time and sleeps through `clk` (its now() is also the time base of
  /// call_options::deadline and of the budgets) and draws jitter from `random`. Both must outlive
  /// the client. libcurl's own time-outs still run on real time.
  client(client_options options, clock& clk, random_generator& random);
  ~client();

  client(const client&) = delete;
  client& operator=(const client&) = delete;
  /// Takes over `other`'s libcurl handles, options and budgets; `other` may then only be
  /// destroyed or assigned to.
  client(client&& other) noexcept;
  /// Takes over `other`'s handles, options and budgets (this client's own are released first);
  /// `other` may then only be destroyed or assigned to.
  client& operator=(client&& other) noexcept;

  /// Performs `req` as one logical request (see the file comment for what is retried).
  /// `call.stop` aborts a transfer in progress (within a few milliseconds) and a backoff sleep,
  /// and no attempt starts after it (end_reason::cancelled); `call.deadline` (an instant of the
  /// client's clock) bounds the whole call: each attempt's time-out is cut to it, and no retry
  /// is made whose delay would end past it (end_reason::deadline_exceeded; also when the
  /// deadline cut the last attempt short, i.e. libcurl timed out at or after the deadline,
  /// whether or not a retry was left). Invalid requests that only libcurl detects (see
  /// failure_kind::invalid_request) end after one attempt with end_reason::not_retryable. A host
  /// name with non-ASCII characters is converted to its ASCII form (IDNA, libcurl with libidn2,
  /// reading the URL as UTF-8 whatever the process locale), as curl does.
  /// Throws std::invalid_argument naming the field and the value for a bad request: a method
  /// that is not a token, a URL that libcurl cannot parse, holds a NUL or whose scheme is not
  /// http/https or whose host name is longer than libcurl's limit (65535 bytes), a header name that
  /// is not a token or a value with a control byte (CR, LF, NUL,
  /// ...), an Idempotency-Key header, a Content-Length header (the client sets it from the body), a
  /// HEAD with a body, an invalid caller key, or a host name that libcurl cannot convert to ASCII.
  /// Failures of the request itself are results, never exceptions.
  ///
  /// With client_options::hedging, the call is hedged instead of retried (client_hedging): the
  /// result is the winner's (or the last failed copy's, with the hedged call's reason), attempts
  /// is the copies sent, and result::hedging holds the report. The delay between copies runs on
  /// steady time (an Asio timer), as on http::async_client; call.stop and call.deadline apply to
  /// the whole call. Every copy has ended, and the losers' connections are closed, when perform()
  /// returns; the winner's connection is kept for the next call.
  [[nodiscard]] result perform(const request& req, const call_options& call = {});

  /// The validated settings.
  [[nodiscard]] const client_options& options() const noexcept;
  /// The per-host budgets this client spends from.
  [[nodiscard]] host_budgets& budgets() noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// The client's table from a libcurl CURLcode (as an int) to where the failure happened relative
/// to sending the request (the one table; each row's reason is in src/http/client.cpp and
/// docs/http.md): not_sent for resolve and connect failures (the request cannot have reached the
/// server), maybe_sent for an empty reply, a response cut short or an HTTP/2 stream error. For a
/// time-out, a send error and a receive error the phase depends on `request_sent` (libcurl had
/// written at least one byte of the request, CURLINFO_REQUEST_SIZE > 0). Empty for every other
/// code, success included: not a transport failure, never retried.
[[nodiscard]] STORMGUARD_EXPORT std::optional<transport_phase> transport_phase_of(
    int curl_code, bool request_sent) noexcept;

/// libcurl's version string, e.g. "libcurl/7.88.1 OpenSSL/3.0.11 ...".
[[nodiscard]] STORMGUARD_EXPORT std::string curl_version_text();

}  // namespace stormguard::http

#endif  // STORMGUARD_HTTP_CLIENT_HPP
