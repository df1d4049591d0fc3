// SPDX-License-Identifier: Apache-2.0
/// \file
/// The scenario's server as a real HTTP/1.1 server on 127.0.0.1 — the
/// backend of `stormguard serve`, and the server that `stormguard lab` starts in-process.
///
/// \code{.cpp}
///  auto started = stormguard::lab::server::start(stormguard::sim::friday_night(), {});
///  if (!started) { std::cerr << started.error() << '\n'; return 1; }
///  std::unique_ptr<stormguard::lab::server> srv = *std::move(started);
///  std::cout << "listening on " << srv->url() << '\n';  // http://127.0.0.1:PORT/
///  ... point any HTTP client at srv->url() ...
///  stormguard::lab::server_stats s = srv->stats();
///  srv->stop();                                          // or let the destructor do it
/// \endcode
///
/// What it models (docs/lab.md, and docs/simulator.md "The model" for the model itself):
/// `server.workers` requests in service at once; a FIFO queue of at most `server.queue_limit`
/// requests (one more is answered 503 at once); the service time of the phase in which a request's
/// service *starts* — `server.service_time`, `incident.service_time` during the incident,
/// `server.overload.service_time` while more than `server.overload.above_rate` requests reached
/// the server in the last second — fixed or exponential as `server.service_distribution` says. The
/// service time is a timer (the event loop answers when it fires), never CPU work, so a worker
/// costs nothing but a slot. During the incident, each request *sent* in [incident.start,
/// incident.end) draws once: lost with probability `incident.loss_rate` (read, and never answered:
/// the client sees its own timeout), else a 503 at once with probability `incident.error_rate`
/// (neither reaches the workers). This is the simulator's own server model (its engine's),
/// fed with real arrival times, and the draws come from the same generator streams as
/// `stormguard simulate`'s for the scenario's seed (the service times and the incident's draws;
/// the order of arrivals is the network's, so the sequences only match in distribution).
///
/// Time: the scenario's clock is std::chrono::steady_clock from the moment the clock starts — at
/// start() by default, or at start_clock() / `POST /control/start` with
/// server_options::start_clock = false; until then it stands at 0 (t = 0 for the phase and the
/// load window). After the scenario's `duration` the server keeps serving at the normal
/// service time (no incident, no overload) until stop().
///
/// Like the model, a request whose client has gone (timed out, closed its connection) keeps its
/// place in the queue and its worker until its service ends; the answer is then dropped.
///
/// Paths: `GET /stats` (the counters as JSON), `GET /metrics` (the counters in the Prometheus text
/// exposition format 0.0.4) and `/control/*` (`POST /control/start`) bypass the model and are not
/// counted; every other path, with any method, is the scenario's endpoint (200 "ok" when
/// served).
///
/// The payments endpoint (server_options::payments; docs/idempotency.md): `POST /charges`
/// writes one row of a ledger behind the idempotency guard (stormguard::guard) and `GET /ledger`
/// returns the rows. Both bypass the model, as /stats does. With `fault_after_commit` P, a charge
/// that committed is, with probability P, never answered: the server closes the connection instead
/// (the case that makes a client retry a charge that happened).
///
/// Built on libevent's evhttp (one event-loop thread; no hand-written HTTP parser). The payments
/// endpoint's store calls run on a second thread, one at a time in arrival order (at most 1,024
/// waiting; more are answered 503 at once), so a store that hangs holds only the charges; stop()
/// abandons a store call still running 500 ms after it is called. Connection and request limits:
/// server_limits.
#ifndef STORMGUARD_LAB_SERVER_HPP
#define STORMGUARD_LAB_SERVER_HPP

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stormguard/admission/reply.hpp"
#include "stormguard/admission/retry_signals.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/http_syntax.hpp"
#include "stormguard/export.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard/sim/scenario.hpp"

namespace stormguard::lab {

/// The payments endpoint of a server (`POST /charges`, `GET /ledger`; docs/idempotency.md).
struct payments_options {
  /// Where the guard keeps the idempotency keys and the ledger its rows, as `--idempotency`
  /// takes it: "sqlite:PATH", "postgres:URL" or "redis:URL" (stormguard::guard::open_store; the
  /// server opens its own store, so replicas given the same spec share the keys and the ledger
  /// through it), or "off": no guard, the ledger in the server's memory (every attempt that
  /// reaches the handler writes a row).
  std::string idempotency = "off";
  /// The probability, in [0, 1], that a charge that committed is not answered: the server closes
  /// the connection instead of sending the 201 (a replayed response is always sent).
  double fault_after_commit = 0.0;
  /// The random seed of the generator that draws those faults (one draw per committed charge, on
  /// the event-loop thread, in the order the charges commit).
  std::uint64_t seed = 0;
  /// The key under which principals (bearer tokens) are hashed, in the guard's records and in
  /// the ledger (guard::guard_options::principal_key, guard::principal_digest): the same on
  /// every replica and across restarts. Empty: SHA-256 of the token.
  std::string principal_key{};
  /// The operator's token for `GET /ledger`, sent as `Authorization: Bearer TOKEN`: a bearer
  /// token (RFC 6750 b64token) of 16 to 1024 characters, or empty (the default): `GET /ledger` is
  /// off and answered 404. A request without it, or with another token, is answered 401. The
  /// server keeps only a keyed digest of it (guard::principal_digest under a key of its own), so
  /// no principal's token and no stored digest opens the ledger. A token of another form throws
  /// std::invalid_argument from server::start, naming payments_options.ledger_token and its
  /// length (never the token).
  std::string ledger_token{};
};

/// Whether `token` may be a payments_options::ledger_token: 16 to 1024 characters of a bearer
/// token (RFC 6750 §2.1 b64token: A-Z a-z 0-9 - . _ ~ + /, then '=' padding).
[[nodiscard]] constexpr bool is_ledger_token(std::string_view token) noexcept {
  return token.size() >= 16 && token.size() <= 1024 && stormguard::detail::is_b64token(token);
}

/// The limits a server puts on its HTTP connections (docs/lab.md "Limits"). Each limit hit is
/// counted in server_stats.
struct server_limits {
  /// The request line and header fields of one request, line ends included, in bytes: a longer
  /// head is answered 431 (414 while the request line alone is longer) and the connection
  /// closed. >= 1024.
  std::size_t head_bytes = 32 * 1024;
  /// Header fields of one request: more is answered 431 and the connection closed. >= 1.
  std::size_t header_fields = 100;
  /// From the first byte of a request to its last (head and body): a request not read whole by
  /// then is answered 408 and its connection closed (steady clock; checked every 250 ms). > 0.
  duration read_timeout = std::chrono::seconds(10);
  /// A connection with no request being read or answered for this long is closed. > 0.
  duration idle_timeout = std::chrono::seconds(30);
  /// Connections open at once. At the cap, the connection idle the longest is closed to make
  /// room; when none is idle the new connection is closed at once. 0 (the default): the soft
  /// RLIMIT_NOFILE less 64.
  std::size_t max_connections = 0;
  /// Bytes of one connection read ahead of the request being answered (pipelined requests not
  /// yet parsed): while a request of it waits for its answer and its input holds this many, the
  /// server stops reading the connection (a read high-watermark on its bufferevent). evhttp answers
  /// the requests of a connection one at a time, so with this a connection holds at most one answer
  /// and read_ahead_bytes of requests, however fast its client pipelines. >= head_bytes.
  std::size_t read_ahead_bytes = 64 * 1024;
  /// A connection whose answer has waited this long without a byte of it taken by the client
  /// (its socket buffers full: a client that sends and never reads) is closed. > 0.
  duration write_timeout = std::chrono::seconds(10);
  /// The answers written and not yet sent, all connections together, in bytes: while they exceed
  /// this, every new request is answered 503 (Retry-After: 1) and its connection closed.
  /// >= 65536.
  std::size_t max_unsent_bytes = std::size_t{64} << 20;
};

/// How start() listens, when the scenario's clock starts, and whether the payments endpoint runs.
struct server_options {
  /// The TCP port on 127.0.0.1; 0 (the default) lets the system choose a free one (see port()).
  std::uint16_t port = 0;
  /// true (the default): the scenario's clock starts when start() returns. false: it stands at 0
  /// until start_clock() or `POST /control/start`.
  bool start_clock = true;
  /// When set, `POST /charges` and `GET /ledger` are the payments endpoint (see the file
  /// comment); when empty (the default) they are the scenario's endpoint like any other path.
  std::optional<payments_options> payments{};
  /// The limits on connections and requests (see server_limits).
  server_limits limits{};
};

/// The lab's own request label: the lab's clients send it (value "1") on every attempt of a
/// logical request that arrived during the scenario's incident, and the server counts those that
/// take a worker (server_stats::incident_served), so the lab reports the simulator's
/// incident_served_amplification. Only the value "1" counts (the first field; "0", "true" or a
/// list do not). Other clients never send it; it changes no decision.
inline constexpr std::string_view k_incident_label_header = "x-stormguard-incident";

/// The counters of a running server. All counts are since start() and cover the scenario's
/// endpoint only (never /stats, /metrics or /control/*).
struct server_stats {
  std::int64_t attempts = 0;        ///< requests read on the scenario's endpoint
  std::int64_t served = 0;          ///< answered 200 after their service (client there or not)
  std::int64_t served_in_time = 0;  ///< of `served`, answered within the scenario's timeout
  std::int64_t rejected = 0;        ///< answered 503 at once: the queue was full
  std::int64_t errors = 0;          ///< answered 503 at once: the incident's error_rate
  std::int64_t lost = 0;            ///< read and never answered: the incident's loss_rate
  std::int64_t queued = 0;          ///< waiting for a worker now
  std::int64_t in_service = 0;      ///< in service now (at most server.workers)
  /// Of the attempts that took a worker (`served` + `in_service`), those labelled with
  /// k_incident_label_header: the attempts of the logical requests that arrived during the
  /// scenario's incident, as the lab's clients mark them (the simulator's incident_served).
  std::int64_t incident_served = 0;
  bool clock_started = false;  ///< the scenario's clock runs
  duration elapsed{};          ///< the scenario's time now (0 until the clock starts)
  /// The payments endpoint (0 without it): `POST /charges` requests read, charges committed by
  /// this server (the handler ran and its row committed), responses replayed by the guard, and
  /// committed charges left unanswered by fault_after_commit.
  std::int64_t charges = 0;
  /// Charges committed by this server (the handler ran and its row committed).
  std::int64_t charges_committed = 0;
  /// Responses replayed by the idempotency guard.
  std::int64_t charges_replayed = 0;
  /// Committed charges left unanswered on purpose (fault_after_commit).
  std::int64_t charges_dropped = 0;
  /// Of `charges`, those answered 503 because the idempotency store was unreachable or failing
  /// (the guard's store_unavailable; the handler did not run).
  std::int64_t charges_unavailable = 0;
  /// Requests refused for their framing or size (server_limits; docs/lab.md "Limits"): a head
  /// over the limit (431, or 414 for the request line), a body over the limit (413, by
  /// libevent's parser), too many header fields (431), a repeated Content-Length, one that is not
  /// digits, or one with Transfer-Encoding (400), another transfer coding (501), whitespace
  /// before a colon, an obs-fold, Transfer-Encoding in HTTP/1.0 or a bad chunk size (400), a
  /// request line libevent cannot parse (400).
  std::int64_t requests_refused = 0;
  /// Connections closed because a request was not read whole within read_timeout (408).
  std::int64_t read_timeouts = 0;
  /// Connections closed while idle: after idle_timeout, or to make room at max_connections.
  std::int64_t idle_closed = 0;
  /// New connections closed at once: max_connections open and none idle.
  std::int64_t connections_refused = 0;
  /// accept() failures (out of descriptors: EMFILE, ENFILE), each pausing accept() for 100 ms.
  std::int64_t accept_errors = 0;
  /// Connections closed because their answer was not taken within write_timeout.
  std::int64_t write_timeouts = 0;
  /// Requests answered 503 because the answers not yet sent exceeded max_unsent_bytes.
  std::int64_t unsent_refused = 0;
  /// The answers written and not yet sent now, all connections together, in bytes (a gauge).
  std::int64_t unsent_bytes = 0;
  /// The server's defences (server.defences, `serve --defence`): the requests each kind refused
  /// or dropped, in sim::defence_kinds order (GET /stats keys: each kind's `stats_key`): retries
  /// refused by the retry budget (503 + grpc-retry-pushback-ms: -1), requests refused by the
  /// concurrency limit (503 + Retry-After), requests CoDel dropped from the line (503), and
  /// requests drop-expired answered because their grpc-timeout had passed (503 +
  /// grpc-retry-pushback-ms: -1).
  std::array<std::int64_t, sim::k_defence_count> defence_decisions{};
  /// drop-expired's count of defence_decisions (the simulator's expired_dropped).
  [[nodiscard]] std::int64_t dropped_expired() const noexcept {
    return defence_decisions[sim::defence_index<sim::drop_expired_defence>];
  }
  /// The other kinds' counts of defence_decisions together (the simulator counts them as
  /// rejected).
  [[nodiscard]] std::int64_t defence_rejected() const noexcept {
    std::int64_t n = 0;
    for (const std::int64_t d : defence_decisions) n += d;
    return n - dropped_expired();
  }
  /// Requests of the scenario's and the payments endpoints that each retry signal recognised as
  /// a retry (stormguard/admission/retry_signals.hpp; docs/admission.md "Retry signals"), in
  /// admission::k_retry_signals order (GET /stats "retry_signals", keyed by
  /// admission::signal_name): the four header labels, a repeated Idempotency-Key, and a
  /// fingerprint seen again after a failed answer (a 5xx, a request lost or dropped, a client
  /// gone before its answer). Counted only: no request is refused for a signal.
  std::array<std::int64_t, admission::k_retry_signal_count> retry_signals{};
  /// Requests whose label was malformed, in the same order (GET /stats
  /// "retry_signals_malformed", the four labels only; the last two are always 0).
  std::array<std::int64_t, admission::k_retry_signal_count> retry_signals_malformed{};
  /// The payments endpoint's store: times a charge was answered 503 for it (store_unavailable)
  /// after the charge before was answered by the store (or as the first charge), and times the
  /// store answered a charge again after such a 503. The store fails now when store_outages >
  /// store_recoveries; both move once per outage however many charges it costs, so an outage
  /// that begins and ends between two reads of the counters still shows.
  std::int64_t store_outages = 0;
  std::int64_t store_recoveries = 0;  ///< see store_outages
  /// The server's instance: drawn from std::random_device at start(), so a server restarted on
  /// the same address has another (its counters began again at 0). GET /stats "instance", 16
  /// hex digits. 0 never comes from a server (a /stats without it reads as 0).
  std::uint64_t instance = 0;
};

/// One attempt at the scenario's endpoint that reached the server through another transport
/// than its HTTP listener (`stormguard serve --grpc`: a gRPC call), as that transport read it.
/// See server::submit.
struct transport_attempt {
  /// The attempt number its labels say (stormguard::attempt_fields over the call's metadata:
  /// grpc-previous-rpc-attempts, x-envoy-attempt-count); a first attempt by default.
  attempt_info attempt{};
  /// The time left until its caller's deadline when it arrived (gRPC's deadline), or none. A
  /// negative value is a deadline already passed; drop-expired reads it as the HTTP server reads
  /// grpc-timeout (saturating at the end of the scenario's clock).
  std::optional<duration> time_left{};
  /// Labelled as an attempt of a logical request that arrived during the incident (the
  /// k_incident_label_header field, value "1", in its metadata): counted in
  /// server_stats::incident_served when it takes a worker.
  bool incident = false;
  /// Its fields that are retry labels (admission::retry_labels::reads: x-envoy-attempt-count,
  /// grpc-previous-rpc-attempts, amz-sdk-request, retry-attempt), name and value as received:
  /// counted in server_stats::retry_signals as the HTTP endpoint counts them, and, for the other
  /// ecosystems' labels, raising the attempt number the defences see as there. The fields of
  /// other names are ignored.
  std::vector<std::pair<std::string, std::string>> retry_label_fields{};
};

/// The server's answer to one transport_attempt: the transport says it in its own words (gRPC:
/// OK when served, else UNAVAILABLE or RESOURCE_EXHAUSTED and the pushback trailer that
/// admission::reply_for and `retry_after` say).
struct transport_answer {
  /// admission::outcome::served when its service ended (the HTTP server's 200); unavailable
  /// for the incident's errors and a full queue (its immediate 503s); otherwise the defence that
  /// refused it or dropped it from the line.
  admission::outcome outcome = admission::outcome::served;
  /// The delay the HTTP answer's Retry-After would carry (the concurrency limit's, or the
  /// retry-after defence's, whole seconds there), when it would carry one.
  std::optional<duration> retry_after{};
  /// Nothing was answered: the attempt was lost (the incident's loss_rate) and its caller has
  /// gone, or the server stopped before answering it. `outcome` is then meaningless; the
  /// transport ends the call without a response (gRPC: CANCELLED).
  bool unanswered = false;
};

/// The phase the scenario's clock is in at `elapsed`: "waiting" (clock not started), "normal",
/// "incident" (in [incident.start, incident.end)), "after" (past the scenario's duration).
[[nodiscard]] STORMGUARD_EXPORT std::string_view phase_name(const sim::scenario& s,
                                                            bool clock_started,
                                                            duration elapsed) noexcept;

/// The scenario's server on 127.0.0.1 (see the file comment). start() binds and starts one
/// event-loop thread; stop() (or the destructor) ends it and closes every connection.
///
/// Thread-safety: port(), url(), stats(), start_clock() and stop() may be called from any thread
/// while the loop runs. Not copyable or movable (own it through the unique_ptr start() returns).
class STORMGUARD_EXPORT server {
 public:
  /// Binds 127.0.0.1:options.port and starts serving `s` (which must be valid: sim::validate).
  /// An error (a message naming the address and the system's reason, e.g. "127.0.0.1:8080:
  /// Address already in use") when the address cannot be bound or the loop cannot be set up, or
  /// when the payments endpoint's store cannot be opened or reached (the store's message).
  /// Throws std::invalid_argument for a scenario that validate() rejects, or for payments
  /// options out of range (a bad `idempotency` spec: guard::open_store's message; a
  /// fault_after_commit outside [0, 1]); std::bad_alloc.
  [[nodiscard]] static outcome<std::unique_ptr<server>, std::string> start(
      const sim::scenario& s, const server_options& options = {});

  /// stop()s.
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// The port it listens on (the one the system chose for port 0).
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// "http://127.0.0.1:PORT/".
  [[nodiscard]] std::string url() const;
  /// The scenario it serves (as given to start()).
  [[nodiscard]] const sim::scenario& scenario() const noexcept;
  /// A snapshot of the counters (each read atomically; the set is not one instant).
  [[nodiscard]] server_stats stats() const noexcept;
  /// The idempotency store's last failure, for the operator: "CAUSE (OPERATION): MESSAGE", the
  /// cause as guard::classify_store_failure names it, the operation (begin, find, complete,
  /// release) and the store driver's message redacted (no password), e.g.
  /// "unreachable (begin): redis store redis://127.0.0.1:6390: connect: Connection refused".
  /// "" when the store has not failed, or without the payments endpoint or its store.
  /// Thread-safe.
  [[nodiscard]] std::string last_store_failure() const;
  /// Starts the scenario's clock at 0 now, as `POST /control/start` does. false (and nothing
  /// changes) when it already runs.
  bool start_clock() noexcept;
  /// Takes one attempt at the scenario's endpoint from another transport (`serve --grpc`). It
  /// goes through exactly what an HTTP request to the endpoint goes through on the loop thread
  /// (the model, the defences, the queue, the service timer and every counter of
  /// server_stats), except the Idempotency-Key and fingerprint retry signals, which are read
  /// from HTTP requests only (its retry labels are read: transport_attempt::retry_label_fields);
  /// then
  /// `done` is called once with the answer: on the loop thread, or on this thread with
  /// transport_answer::unanswered when the server has stopped, and from stop() for an attempt
  /// still queued, in service or lost then. `gone` (may be empty: never gone) says whether the
  /// caller has gone (gRPC: the call was cancelled or its deadline passed); the loop asks it,
  /// never after `done`, when the attempt's service ends and once a second while it is lost, and
  /// answers a lost attempt unanswered once its caller has gone. `done` must not throw (an
  /// exception is dropped) and must not call back into this server. Thread-safe; the server
  /// must outlive every submit() call. Throws std::bad_alloc only.
  void submit(transport_attempt attempt, std::function<bool()> gone,
              std::function<void(const transport_answer&)> done);
  /// Stops the loop, closes the listener and every connection (requests in the queue, in
  /// service or lost are dropped unanswered) and joins the thread. Idempotent.
  void stop() noexcept;

  class impl;  ///< private (src/lab/server.cpp)

 private:
  explicit server(std::unique_ptr<impl> p) noexcept;
  std::unique_ptr<impl> impl_;
};

}  // namespace stormguard::lab

#endif  // STORMGUARD_LAB_SERVER_HPP
