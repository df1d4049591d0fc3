// SPDX-License-Identifier: Apache-2.0
// The scenario's server on evhttp (stormguard/lab/server.hpp). Everything the model touches lives
// on the event-loop thread; the counters are atomics that stats() reads from any thread.
//
// Request lifetime (libevent 2.1 semantics): a request we have not answered yet stays valid until
// we answer it, even when its client hangs up — evhttp then detaches it from the connection
// (evhttp_request_get_connection returns null) and evhttp_send_reply frees it without sending.
// Requests still attached when the server stops are freed with their connection by evhttp_free;
// detached ones that we never answer (lost ones) are freed by us.
//
// The payments endpoint (POST /charges, GET /ledger) is src/lab/charges.cpp; this file only hands
// it the request's fields and sends its answer, or drops the connection for a fault.
#include "stormguard/lab/server.hpp"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lab/attempt_fields.hpp"
#include "lab/attempt_waiter.hpp"
#include "lab/charge_worker.hpp"
#include "lab/charges.hpp"
#include "lab/evhttp_reply.hpp"
#include "lab/http_limits.hpp"
#include "lab/retry_signal_reader.hpp"
#include "lab/stats_text.hpp"
#include "lab/transport_inbox.hpp"
#include "lab/wire.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/guard/store.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard_engine/json_writer.hpp"
#include "stormguard_engine/server.hpp"

namespace stormguard::lab {

using detail::header_values;
using detail::query_parameters;
using detail::reply;
using detail::reply_stored;
using detail::reply_text;

namespace {

constexpr std::int64_t k_not_started = std::numeric_limits<std::int64_t>::min();
constexpr std::size_t k_max_body = 1 << 20;            // bytes of a request body the server reads
constexpr std::size_t k_max_queued_charges = 1024;     // store calls waiting for the worker
constexpr std::size_t k_max_queued_ledger_reads = 64;  // GET /ledger pages waiting for theirs

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

timeval to_timeval(std::int64_t ns) noexcept {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ns / 1'000'000'000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ns % 1'000'000'000) / 1000);
  return tv;
}

// The scenario the model follows: the incident cut at the scenario's duration, after which the
// server serves at the normal service time.
sim::scenario model_of(const sim::scenario& s) {
  sim::scenario m = s;
  if (m.incident) m.incident->end = std::min(m.incident->end, m.length);
  return m;
}

}  // namespace

class server::impl {
 public:
  explicit impl(const sim::scenario& s)
      : scenario_(s), model_(model_of(s)), engine_(model_), timeout_ns_(s.timeout.count()) {}

  ~impl() { stop(); }
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;

  // Sets up the loop and binds; an error message on failure.
  std::string open(const server_options& options) {
    event_config* config = event_config_new();
    if (config == nullptr) return "cannot create the event loop";
    event_config_set_flag(config, EVENT_BASE_FLAG_PRECISE_TIMER);
    base_ = event_base_new_with_config(config);
    event_config_free(config);
    if (base_ == nullptr) return "cannot create the event loop";
    http_ = evhttp_new(base_);
    if (http_ == nullptr) return "cannot create the HTTP server";
    evhttp_set_allowed_methods(http_, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                          EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                          EVHTTP_REQ_PATCH);
    evhttp_set_max_body_size(http_, k_max_body);
    evhttp_set_gencb(http_, &impl::on_request, this);

    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(options.port);
    const std::string where = "127.0.0.1:" + std::to_string(options.port);
    // Our own listener, for a backlog of SOMAXCONN (evhttp_bind_socket's is 128).
    errno = 0;
    evconnlistener* listener = evconnlistener_new_bind(
        base_, nullptr, nullptr, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
        SOMAXCONN, reinterpret_cast<const sockaddr*>(&address), sizeof address);
    if (listener == nullptr) {
      const int error = errno;
      return where + ": " + (error != 0 ? std::strerror(error) : "cannot listen");
    }
    if (evhttp_bind_listener(http_, listener) == nullptr) {
      evconnlistener_free(listener);
      return where + ": cannot listen";
    }
    detail::install_rate_limited_libevent_log();
    limits_ = std::make_unique<detail::connection_limits>(
        base_, http_, listener, options.limits,
        detail::limit_counters{
            .read_timeout = [this] { count<&server_stats::read_timeouts>(); },
            .idle_closed = [this] { count<&server_stats::idle_closed>(); },
            .refused = [this] { count<&server_stats::connections_refused>(); },
            .accept_failed = [this] { count<&server_stats::accept_errors>(); },
            .rejected_by_parser = [this] { count<&server_stats::requests_refused>(); },
            .write_timeout = [this] { count<&server_stats::write_timeouts>(); },
            .unsent_changed = [this](std::int64_t n) { count<&server_stats::unsent_bytes>(n); }});
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    if (::getsockname(evconnlistener_get_fd(listener), reinterpret_cast<sockaddr*>(&bound),
                      &length) != 0) {
      return where + ": " + std::strerror(errno);
    }
    port_ = ntohs(bound.sin_port);

    // The stop pipe: stop() writes a byte, the loop breaks.
    if (::pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      return std::string("cannot create a pipe: ") + std::strerror(errno);
    }
    stop_event_ = event_new(base_, stop_pipe_[0], EV_READ, &impl::on_stop, this);
    sweep_event_ = event_new(base_, -1, EV_PERSIST, &impl::on_sweep, this);
    if (stop_event_ == nullptr || sweep_event_ == nullptr) return "cannot create an event";
    event_add(stop_event_, nullptr);
    // The attempts of other transports (server::submit), taken on this loop.
    if (std::string error = inbox_.open(base_,
                                        [this](auto taken) {
                                          for (auto& c : taken) endpoint(std::move(c));
                                        });
        !error.empty()) {
      return error;
    }
    const timeval second{1, 0};
    event_add(sweep_event_, &second);

    if (payments_) {
      worker_ = std::make_unique<detail::charge_worker>(base_, k_max_queued_charges);
      ledger_worker_ = std::make_unique<detail::charge_worker>(base_, k_max_queued_ledger_reads);
    }
    if (options.start_clock) start_clock();
    thread_ = std::thread([this] { event_base_dispatch(base_); });
    return {};
  }

  // Opens the payments endpoint; before open(). Throws as charges_endpoint's constructor.
  void enable_payments(const payments_options& options) {
    payments_ = std::make_shared<detail::charges_endpoint>(options);
  }

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] const sim::scenario& scenario() const noexcept { return scenario_; }

  bool start_clock() noexcept {
    std::int64_t expected = k_not_started;
    return clock_start_.compare_exchange_strong(expected, steady_ns());
  }

  // The payments endpoint's store failure (charges.hpp); "" without one. Any thread.
  [[nodiscard]] std::string last_store_failure() const {
    return payments_ ? payments_->last_store_failure() : std::string();
  }

  [[nodiscard]] server_stats stats() const noexcept {
    server_stats s;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      s.*wire::k_stats_counts[i].member = counts_[i].load(std::memory_order_relaxed);
    }
    for (std::size_t i = 0; i < defence_counts_.size(); ++i) {
      s.defence_decisions[i] = defence_counts_[i].load(std::memory_order_relaxed);
    }
    const admission::retry_signal_counts signals = signals_.counts();
    s.retry_signals = signals.recognised;
    s.retry_signals_malformed = signals.malformed;
    const std::int64_t start = clock_start_.load();
    s.clock_started = start != k_not_started;
    s.instance = instance_;
    s.elapsed = duration(s.clock_started ? steady_ns() - start : 0);
    return s;
  }

  // server::submit: queued for the loop thread (or answered here once stopped).
  void submit(transport_attempt attempt, std::function<bool()> gone,
              std::function<void(const transport_answer&)> done) {
    inbox_.submit(std::make_unique<detail::transport_call>(detail::transport_call{
        .attempt = std::move(attempt), .gone = std::move(gone), .done = std::move(done)}));
  }

  // Ends the loop, then frees everything on the calling thread (the loop no longer runs).
  void stop() noexcept {
    // submit() now answers at once; release() answers what was queued.
    for (auto& c : inbox_.close()) detail::complete(*c, {.unanswered = true});
    if (thread_.joinable()) {
      const char byte = 1;
      while (::write(stop_pipe_[1], &byte, 1) < 0 && errno == EINTR) {
      }
      thread_.join();
    }
    release();
  }

 private:
  // A request that waits for a worker or is in service.
  struct slot {
    impl* owner = nullptr;
    std::uint32_t index = 0;
    detail::attempt_waiter who;
    std::int64_t arrival_ns = 0;               // steady clock
    event* timer = nullptr;                    // its service's end
    std::optional<std::uint64_t> fingerprint;  // its retry-signal fingerprint
    bool incident = false;                     // labelled k_incident_label_header
  };

  // Adds `n` to the count of server_stats member M (relaxed: stats() is a snapshot of counters).
  template <std::int64_t server_stats::*M>
  void count(std::int64_t n = 1) noexcept {
    constexpr std::size_t i = wire::stats_count_index(M);
    static_assert(i < std::size(wire::k_stats_counts), "not a count of server_stats");
    counts_[i].fetch_add(n, std::memory_order_relaxed);
  }

  // Adds one to the count of the defence at `index` of sim::defence_kinds.
  void count_defence(std::size_t index) noexcept {
    if (index < defence_counts_.size())
      defence_counts_[index].fetch_add(1, std::memory_order_relaxed);
  }

  static time_point steady_now() noexcept { return time_point(duration(steady_ns())); }
  // The answer to a request with `fingerprint` failed now (a retry signal's memory).
  void failed(std::optional<std::uint64_t> fingerprint) noexcept {
    signals_.failed(fingerprint, steady_now());
  }

  // The scenario's time now, in ns (0 until the clock starts).
  [[nodiscard]] std::int64_t scenario_now() const noexcept {
    const std::int64_t start = clock_start_.load();
    return start == k_not_started ? 0 : steady_ns() - start;
  }

  static void on_request(evhttp_request* req, void* arg) { static_cast<impl*>(arg)->route(req); }

  void route(evhttp_request* req) {
    if (limits_) limits_->on_request(req);
    if (refuse_head(req)) return;
    if (limits_ && limits_->over_unsent_limit()) {
      // The answers not yet sent are over max_unsent_bytes: nothing more is buffered (a few
      // bytes of refusal) until clients take them or write_timeout closes their connections.
      count<&server_stats::unsent_refused>();
      evkeyvalq* out = evhttp_request_get_output_headers(req);
      evhttp_add_header(out, "Retry-After", "1");
      evhttp_add_header(out, "Connection", "close");
      return reply_text(req, 503, "Service Unavailable",
                        "busy: too many answers wait for their clients to read them\n");
    }
    const evhttp_uri* uri = evhttp_request_get_evhttp_uri(req);
    const char* raw_path = uri != nullptr ? evhttp_uri_get_path(uri) : nullptr;
    const std::string_view path = raw_path != nullptr && *raw_path != '\0' ? raw_path : "/";
    const auto method = evhttp_request_get_command(req);
    const bool get = method == EVHTTP_REQ_GET || method == EVHTTP_REQ_HEAD;
    if (path == "/stats" || path == "/metrics") {
      if (!get) return method_not_allowed(req, "GET, HEAD", "use GET\n");
      if (path == "/stats") {
        return reply(req, 200, "OK", "application/json", stats_json(scenario_, stats()));
      }
      // The guard's own metrics follow the server's (payments endpoint with a store only).
      return reply(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8",
                   stats_prometheus(stats()) + (payments_ ? payments_->guard_metrics_text() : ""));
    }
    // Every request but /control/* shows its retry signals (counted only; retry_signal_reader).
    detail::retry_signal_reader::recognition signals;
    if (path != "/control" && !path.starts_with("/control/"))
      signals = signals_.recognise(req, steady_now());
    // The target as sent: evhttp reads "//charges" as an authority and an empty path.
    const char* raw_target = evhttp_request_get_uri(req);
    std::string_view target = raw_target != nullptr ? raw_target : "";
    target = target.substr(0, target.find_first_of("?#"));
    if (payments_ && target != path && detail::near_payments_path(target)) {
      return reply_text(req, 404, "Not Found",
                        "no such resource: the payments endpoint is "
                        "POST /charges and GET /ledger\n");
    }
    if (payments_ && (path == "/charges" || path == "/ledger")) return payments(req, path, method);
    if (payments_ && detail::near_payments_path(path)) {
      // "/charges/", "//charges", "/ledger/": not the payments endpoint, and never the
      // scenario's endpoint either (a charge sent there must not look served).
      return reply_text(req, 404, "Not Found",
                        "no such resource: the payments endpoint is "
                        "POST /charges and GET /ledger\n");
    }
    if (path == "/control" || path.starts_with("/control/")) {
      if (path != "/control/start") return reply_text(req, 404, "Not Found", "unknown control\n");
      if (method != EVHTTP_REQ_POST) return method_not_allowed(req, "POST", "use POST\n");
      if (!start_clock()) return reply_text(req, 409, "Conflict", "the clock already runs\n");
      return reply_text(req, 200, "OK", "started\n");
    }
    endpoint(req, signals);
  }

  // 405 with the Allow field the status requires (RFC 9110 §15.5.6).
  static void method_not_allowed(evhttp_request* req, const char* allow, std::string_view body) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    reply_text(req, 405, "Method Not Allowed", body);
  }

  // Refuses (and closes the connection of) a request whose header fields break a limit or
  // frame the body ambiguously (detail::check_head); true when it did.
  bool refuse_head(evhttp_request* req) {
    std::vector<std::pair<std::string_view, std::string_view>>& fields = head_fields_;
    fields.clear();  // keeps its capacity: no allocation per request
    const evkeyvalq* headers = evhttp_request_get_input_headers(req);
    for (const evkeyval* h = headers->tqh_first; h != nullptr; h = h->next.tqe_next) {
      fields.emplace_back(h->key, h->value);
    }
    const detail::head_problem problem =
        detail::check_head(fields, limits_ ? limits_->limits() : server_limits{});
    if (problem == detail::head_problem::none) return false;
    count<&server_stats::requests_refused>();
    const auto [status, why] = detail::describe(problem);
    // The body may have been read with another framing than the client meant: what follows on
    // the connection cannot be trusted, so it is closed after the answer.
    evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    reply_text(req, status,
               status == 431   ? "Request Header Fields Too Large"
               : status == 501 ? "Not Implemented"
                               : "Bad Request",
               why);
    return true;
  }

  // The payments endpoint (src/lab/charges.hpp): its store calls run on the worker thread
  // (src/lab/charge_worker.hpp), the answer is sent from this thread.
  void payments(evhttp_request* req, std::string_view path, evhttp_cmd_type method) {
    if (path == "/ledger") {
      if (method != EVHTTP_REQ_GET && method != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        return reply_text(req, 405, "Method Not Allowed", "use GET\n");
      }
      // The operator's token first: a query is read only for a reader of the ledger.
      if (auto refused = payments_->ledger_refusal(header_values(req, "Authorization"))) {
        return reply_stored(req, *refused);
      }
      auto query = detail::read_ledger_query(query_parameters(req));
      if (!query) return reply_stored(req, detail::ledger_query_error(query.error()));
      // On the ledger's own worker and store connection: never in front of a charge.
      return offload(
          req,
          [endpoint = payments_, q = *query] {
            // The ledger's thread yields the CPU to the charges' (nice 10; Linux: per thread).
            static thread_local const bool niced = ::setpriority(PRIO_PROCESS, ::gettid(), 10) == 0;
            (void)niced;
            detail::charge_answer a;
            a.response = endpoint->ledger(q);
            return a;
          },
          ledger_worker_.get());
    }
    if (method != EVHTTP_REQ_POST) {
      evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
      return reply_text(req, 405, "Method Not Allowed", "use POST\n");
    }
    count<&server_stats::charges>();
    // Copies: the request is read again only on this thread, after the worker has answered.
    std::optional<std::string> authorization = header_values(req, "Authorization");
    std::optional<std::string> key = header_values(req, "Idempotency-Key");
    evbuffer* in = evhttp_request_get_input_buffer(req);
    const std::size_t length = in != nullptr ? evbuffer_get_length(in) : 0;
    std::string body(length, '\0');
    if (length > 0) evbuffer_copyout(in, body.data(), length);
    const char* uri = evhttp_request_get_uri(req);
    std::string target = uri != nullptr ? uri : "/charges";
    offload(
        req, [endpoint = payments_, authorization = std::move(authorization), key = std::move(key),
              target = std::move(target), body = std::move(body), arrived = real_clock().now()] {
          detail::charge_request request;
          request.arrived = arrived;  // the guard fails it at once if it waited behind a timeout
          if (authorization) request.authorization = *authorization;
          if (key) request.idempotency_key = *key;
          request.target = target;
          request.body = body;
          return endpoint->charge(request);
        });
  }

  // Runs `work` (store calls) on the worker thread, then answers `req` here with its result. A
  // full queue (a store that hangs while charges keep coming) is a 503 at once.
  void offload(evhttp_request* req, std::function<detail::charge_answer()> work,
               detail::charge_worker* worker = nullptr) {
    if (worker == nullptr) worker = worker_.get();
    payments_in_flight_.push_back(req);
    const bool queued =
        worker != nullptr &&
        worker->post([this, req, work = std::move(work)]() -> std::function<void()> {
          detail::charge_answer answer;
          try {
            answer = work();
          } catch (const std::exception&) {  // std::bad_alloc; the endpoint throws nothing else
            answer.response = {500, {{"Content-Type", "text/plain; charset=utf-8"}}, "error\n"};
          }
          // Runs on the loop's thread, while the server runs (the worker's results are dropped
          // once it stops).
          return [this, req, answer = std::move(answer)] { answer_payment(req, answer); };
        });
    if (!queued) {
      detail::charge_answer busy;
      busy.store_unavailable = true;
      busy.response = {503,
                       {{"Content-Type", "text/plain; charset=utf-8"}, {"Retry-After", "1"}},
                       "the payments endpoint is busy: too many charges wait for the store\n"};
      answer_payment(req, busy);
    }
  }

  void answer_payment(evhttp_request* req, const detail::charge_answer& answer) {
    std::erase(payments_in_flight_, req);
    if (answer.drop || answer.response.status >= 500) failed(signals_.fingerprint(req));
    if (answer.committed) count<&server_stats::charges_committed>();
    if (answer.replayed) count<&server_stats::charges_replayed>();
    if (answer.store_unavailable) count<&server_stats::charges_unavailable>();
    // The store's outages as transitions (server_stats::store_outages): any other answer came
    // from the store (a commit, a replay, a 409, a 422).
    if (answer.store_unavailable != store_failing_) {
      store_failing_ = answer.store_unavailable;
      store_failing_ ? count<&server_stats::store_outages>()
                     : count<&server_stats::store_recoveries>();
    }
    if (answer.drop) {
      count<&server_stats::charges_dropped>();
      return drop(req);
    }
    reply_stored(req, answer.response);
  }

  // Closes the request's connection without answering (fault_after_commit): the client sees the
  // connection end with no response. evhttp stops reading a connection while its request waits
  // for the answer, so it would never notice a socket we merely shut down: the connection (and
  // the request with it) is freed with evhttp_connection_free — from an event of its own on the
  // next turn of the loop, not from inside this request's callback, where the bufferevent is
  // still in use (ThreadSanitizer then saw libevent touch the descriptor after its number had
  // been reused by another thread). Nothing else frees the connection before that event runs:
  // evhttp reads nothing more from it and the request is not answered; if the server stops
  // first, evhttp_free frees it and the event is dropped with the loop.
  void drop(evhttp_request* req) {
    evhttp_connection* connection = evhttp_request_get_connection(req);
    if (connection == nullptr) {  // already detached: ours to free
      evhttp_request_free(req);
      return;
    }
    const timeval now{0, 0};
    if (event_base_once(base_, -1, EV_TIMEOUT, &impl::on_drop, connection, &now) != 0) {
      evhttp_connection_free(connection);  // out of memory in libevent: free it here
    }
  }

  static void on_drop(evutil_socket_t, short, void* connection) {
    evhttp_connection_free(static_cast<evhttp_connection*>(connection));  // frees its request
  }

  // The scenario's endpoint: the engine's server model (stormguard_engine/server.hpp), as in the
  // simulator.
  void endpoint(evhttp_request* req, const detail::retry_signal_reader::recognition& signals) {
    const std::int64_t now = scenario_now();
    sim::engine::attempt_labels labels =
        detail::read_attempt_labels(evhttp_request_get_input_headers(req), now);
    // A retry by another ecosystem's label or a repeated Idempotency-Key is one to the defences.
    if (!labels.attempt.malformed && signals.retry_attempt > labels.attempt.attempt) {
      labels.attempt.attempt = signals.retry_attempt;
    }
    // The weak signal: shed-retries reads it (never the retry budget).
    labels.weak_retry = signals.weak_retry;
    const char* incident = evhttp_find_header(evhttp_request_get_input_headers(req),
                                              k_incident_label_header.data());  // a literal
    admit(now, labels, signals.fingerprint,
          incident != nullptr && std::string_view(incident) == "1",
          detail::attempt_waiter{.http = req, .call = nullptr});
  }

  // An attempt from another transport (server::submit): its labels as the transport read them.
  void endpoint(std::unique_ptr<detail::transport_call> e) {
    const std::int64_t now = scenario_now();
    sim::engine::attempt_labels labels;
    labels.attempt = e->attempt.attempt;
    // Its retry labels, counted as the HTTP endpoint counts them; another ecosystem's label is
    // a retry to the defences there too.
    const detail::retry_signal_reader::recognition signals =
        signals_.recognise_labels(e->attempt.retry_label_fields, steady_now());
    if (!labels.attempt.malformed && signals.retry_attempt > labels.attempt.attempt) {
      labels.attempt.attempt = signals.retry_attempt;
    }
    if (e->attempt.time_left) {
      labels.deadline =
          stormguard::detail::saturating_add(duration(now), *e->attempt.time_left).count();
    }
    const bool incident = e->attempt.incident;
    admit(now, labels, std::nullopt, incident, detail::attempt_waiter{.call = std::move(e)});
  }

  // The scenario's endpoint for one attempt, whatever its transport: the engine's admission,
  // then a worker or the queue.
  void admit(std::int64_t now, const sim::engine::attempt_labels& labels,
             std::optional<std::uint64_t> fingerprint, bool incident, detail::attempt_waiter who) {
    count<&server_stats::attempts>();
    // After the duration the load no longer slows the server: the model reads model_.overload
    // at each decision (it keeps a reference to model_), so dropping it here is enough.
    if (model_.overload && now >= model_.length.count()) model_.overload.reset();
    const sim::engine::decision d = engine_.admit(now, labels);
    if (d.what != sim::engine::admission::accepted) failed(fingerprint);  // lost or refused
    switch (d.what) {
      case sim::engine::admission::lost:
        count<&server_stats::lost>();
        if (who.http != nullptr) {
          lost_requests_.push_back(who.http);
        } else if (who.call) {
          lost_external_.push_back(std::move(who.call));
        }
        return;
      case sim::engine::admission::error:
        count<&server_stats::errors>();
        return who.unavailable("incident error\n");
      case sim::engine::admission::rejected:
        count<&server_stats::rejected>();
        return who.unavailable("queue full\n");
      case sim::engine::admission::defended:
        count_defence(d.by.defence);
        return answer(std::move(who), d.by.outcome);
      case sim::engine::admission::accepted:
        break;
    }
    slot& s = take_slot(std::move(who));
    s.fingerprint = fingerprint;
    s.incident = incident;
    if (const auto svc = engine_.take(now, {s.index, 1, now, labels.deadline})) {
      begin_service(s, svc->time);
    } else {
      count<&server_stats::queued>();
    }
  }

  slot& take_slot(detail::attempt_waiter who) {
    std::uint32_t index = 0;
    if (!free_slots_.empty()) {
      index = free_slots_.back();
      free_slots_.pop_back();
    } else {
      index = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
      slots_.back().owner = this;
      slots_.back().index = index;
    }
    slot& s = slots_[index];
    s.who = std::move(who);
    s.arrival_ns = steady_ns();
    return s;
  }

  void begin_service(slot& s, std::int64_t service_ns) {
    count<&server_stats::in_service>();
    if (s.incident) count<&server_stats::incident_served>();
    if (s.timer == nullptr) s.timer = evtimer_new(base_, &impl::on_service_done, &s);
    const timeval tv = to_timeval(service_ns);
    if (s.timer == nullptr || evtimer_add(s.timer, &tv) != 0) {
      // Out of memory in libevent: answer at once rather than hold the worker forever.
      finish(s);
    }
  }

  static void on_service_done(evutil_socket_t, short, void* arg) {
    slot& s = *static_cast<slot*>(arg);
    s.owner->finish(s);
  }

  // The service of slot `s` ended: answer (dropped if the client has gone), free the worker and
  // give it to the head of the queue.
  void finish(slot& s) {
    const std::int64_t waited = steady_ns() - s.arrival_ns;
    count<&server_stats::served>();
    if (waited < timeout_ns_)  // at the deadline is late, as in the model
      count<&server_stats::served_in_time>();
    detail::attempt_waiter who = std::exchange(s.who, {});
    free_slots_.push_back(s.index);
    count<&server_stats::in_service>(-1);
    if (who.gone()) failed(s.fingerprint);  // client gone
    who.served();
    if (auto next = engine_.finish(scenario_now(), [&](const sim::engine::queued_attempt& a,
                                                       const sim::engine::defence_answer& why) {
          dropped_from_line(a, why);
        })) {
      count<&server_stats::queued>(-1);
      begin_service(slots_[next->attempt.request], next->svc.time);
    }
  }

  // A queued request left the line unserved (CoDel, drop-expired): answered 503 at once, with
  // "do not retry" when its deadline has passed (if its client still listens).
  void dropped_from_line(const sim::engine::queued_attempt& a,
                         const sim::engine::defence_answer& why) {
    slot& s = slots_[a.request];
    detail::attempt_waiter who = std::exchange(s.who, {});
    free_slots_.push_back(s.index);
    count<&server_stats::queued>(-1);
    count_defence(why.defence);
    failed(s.fingerprint);
    answer(std::move(who), why.outcome);
  }

  // Answers `who` as admission::reply_for(o) says, with the Retry-After of
  // server_model::retry_after_for (retry-after's, counted as its decision, or the concurrency
  // limit's); another transport's attempt gets the same decision and delay (attempt_waiter).
  void answer(detail::attempt_waiter who, admission::outcome o) {
    bool paced = false;
    const std::optional<duration> wait = engine_.retry_after_for(o, scenario_now(), &paced);
    if (paced) count_defence(sim::defence_index<sim::retry_after_defence>);
    who.refused(o, wait);
  }

  static void on_stop(evutil_socket_t, short, void* arg) {
    event_base_loopbreak(static_cast<impl*>(arg)->base_);
  }

  // Once a second: frees the lost requests whose client has gone.
  static void on_sweep(evutil_socket_t, short, void* arg) {
    static_cast<impl*>(arg)->free_abandoned_lost();
  }

  void free_abandoned_lost() {
    std::erase_if(lost_requests_, [](evhttp_request* req) {
      if (evhttp_request_get_connection(req) != nullptr) return false;
      evhttp_request_free(req);
      return true;
    });
    std::erase_if(lost_external_, [](std::unique_ptr<detail::transport_call>& e) {
      if (!(e->gone && e->gone())) return false;
      detail::complete(*e, {.unanswered = true});
      return true;
    });
  }

  // After the loop ended (or never ran): frees everything. Idempotent.
  void release() noexcept {
    // A store call that hangs is abandoned after a short grace: stop() must not wait for it.
    if (worker_) (void)worker_->stop(std::chrono::milliseconds(500));
    if (ledger_worker_) (void)ledger_worker_->stop(std::chrono::milliseconds(100));
    for (evhttp_request* req : payments_in_flight_) {
      if (evhttp_request_get_connection(req) == nullptr) evhttp_request_free(req);
    }
    payments_in_flight_.clear();
    for (slot& s : slots_) {
      if (s.timer != nullptr) event_free(s.timer);
      if (s.who.http != nullptr && evhttp_request_get_connection(s.who.http) == nullptr) {
        evhttp_request_free(s.who.http);  // detached: evhttp_free would not free it
      }
      if (s.who.call) detail::complete(*s.who.call, {.unanswered = true});
    }
    slots_.clear();
    free_slots_.clear();
    for (evhttp_request* req : lost_requests_) {
      if (evhttp_request_get_connection(req) == nullptr) evhttp_request_free(req);
    }
    lost_requests_.clear();
    for (auto& e : lost_external_) detail::complete(*e, {.unanswered = true});
    lost_external_.clear();
    inbox_.release();
    if (stop_event_ != nullptr) event_free(std::exchange(stop_event_, nullptr));
    if (sweep_event_ != nullptr) event_free(std::exchange(sweep_event_, nullptr));
    // The listener, the connections and the requests still attached to them.
    if (http_ != nullptr) evhttp_free(std::exchange(http_, nullptr));
    if (limits_) limits_->release();  // our references on the connections evhttp freed
    if (base_ != nullptr) event_base_free(std::exchange(base_, nullptr));
    for (int& fd : stop_pipe_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  const sim::scenario scenario_;
  sim::scenario model_;  // engine_ keeps a reference to it
  sim::engine::server_model engine_;
  std::int64_t timeout_ns_;

  event_base* base_ = nullptr;
  evhttp* http_ = nullptr;
  event* stop_event_ = nullptr;
  event* sweep_event_ = nullptr;
  int stop_pipe_[2] = {-1, -1};
  detail::transport_inbox inbox_;  // server::submit's attempts, on their way to the loop
  std::uint16_t port_ = 0;
  std::thread thread_;

  std::deque<slot> slots_;  // stable addresses: timers point at their slot
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::pair<std::string_view, std::string_view>> head_fields_;  // refuse_head's
  std::vector<evhttp_request*> lost_requests_;
  std::vector<std::unique_ptr<detail::transport_call>>
      lost_external_;  // lost attempts of other transports

  std::atomic<std::int64_t> clock_start_{k_not_started};
  // server_stats::instance: never 0.
  const std::uint64_t instance_ = [] {
    std::random_device device;
    const std::uint64_t v = (std::uint64_t{device()} << 32) ^ device();
    return v == 0 ? 1 : v;
  }();
  // The last charge answered was a 503 for the store (loop thread only).
  bool store_failing_ = false;
  // The server_stats counts, in wire::k_stats_counts order (count<M>() adds to one).
  std::array<std::atomic<std::int64_t>, std::size(wire::k_stats_counts)> counts_{};
  // server_stats::defence_decisions, in sim::defence_kinds order.
  std::array<std::atomic<std::int64_t>, sim::k_defence_count> defence_counts_{};
  detail::retry_signal_reader signals_;  // loop thread; its counts from any thread
  // Set before open(); used by the worker thread only (shared: an abandoned worker keeps it).
  std::shared_ptr<detail::charges_endpoint> payments_;
  std::unique_ptr<detail::charge_worker> worker_;         // with payments_; set in open()
  std::unique_ptr<detail::charge_worker> ledger_worker_;  // GET /ledger's; with worker_
  std::vector<evhttp_request*> payments_in_flight_;       // at the worker; loop thread only
  std::unique_ptr<detail::connection_limits> limits_;     // set in open(); loop thread only
};

outcome<std::unique_ptr<server>, std::string> server::start(const sim::scenario& s,
                                                            const server_options& options) {
  if (auto problem = sim::validate(s)) throw std::invalid_argument(problem->message);
  detail::validate(options.limits);
  auto p = std::make_unique<impl>(s);
  if (options.payments) {
    try {
      p->enable_payments(*options.payments);
    } catch (const guard::store_error& e) {
      return failure{std::string(e.what())};
    }
  }
  if (std::string error = p->open(options); !error.empty()) return failure{std::move(error)};
  return std::unique_ptr<server>(new server(std::move(p)));
}

server::server(std::unique_ptr<impl> p) noexcept : impl_(std::move(p)) {}
server::~server() = default;

std::uint16_t server::port() const noexcept { return impl_->port(); }
std::string server::url() const { return "http://127.0.0.1:" + std::to_string(port()) + "/"; }
const sim::scenario& server::scenario() const noexcept { return impl_->scenario(); }
server_stats server::stats() const noexcept { return impl_->stats(); }
std::string server::last_store_failure() const { return impl_->last_store_failure(); }
bool server::start_clock() noexcept { return impl_->start_clock(); }
void server::stop() noexcept { impl_->stop(); }
void server::submit(transport_attempt attempt, std::function<bool()> gone,
                    std::function<void(const transport_answer&)> done) {
  impl_->submit(std::move(attempt), std::move(gone), std::move(done));
}

}  // namespace stormguard::lab
