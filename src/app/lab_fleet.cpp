// SPDX-License-Identifier: Apache-2.0
// The lab's client fleet (app/lab_fleet.hpp): the engine's driver (the
// simulator's clients, retries and metrics: stormguard_engine/driver.hpp) on real time and real
// HTTP attempts through http::async_client, on one Asio thread.
#include "app/lab_fleet.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "app/attempt_heard.hpp"
#include "app/report.hpp"
#if defined(STORMGUARD_APP_HAS_GRPC)
#include "app/lab_grpc.hpp"
#include "app/lab_grpc_attempts.hpp"
#endif
#include "stormguard/admission/reply.hpp"
#include "stormguard/http/async_client.hpp"
#include "stormguard/metrics/retry_metrics.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_after.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard_engine/driver.hpp"
#include "stormguard_engine/json_writer.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::lab {

namespace {

using steady = std::chrono::steady_clock;
constexpr std::int64_t k_tick_ns = 100'000'000;  // progress, stop flag and queue samples
constexpr std::uint32_t k_arrival = std::numeric_limits<std::uint32_t>::max();

// A scheduled start: a logical request's arrival (id k_arrival) or a retry's attempt.
struct pending {
  std::int64_t time;  // ns of the scenario's clock
  std::uint32_t id;
  std::int32_t attempt;
  friend bool operator>(const pending& a, const pending& b) noexcept { return a.time > b.time; }
};

// The scenario's clock of a run that starts at `t0` (steady time): what the budgets see, for the
// syncers a caller attaches to them (fleet_options::attach_fleet_budget).
class scenario_clock final : public clock {
 public:
  explicit scenario_clock(steady::time_point t0) : t0_(t0) {}
  [[nodiscard]] time_point now() const noexcept override {
    return time_point(std::chrono::duration_cast<duration>(steady::now() - t0_));
  }
  bool sleep_for(duration d, const std::stop_token& stop) override {
    return real_.sleep_for(d, stop);
  }
  [[nodiscard]] wall_time_point wall_now() const noexcept override { return real_.wall_now(); }

 private:
  steady::time_point t0_;
  real_clock real_;
};

#if defined(STORMGUARD_APP_HAS_GRPC)
using grpc_sender = grpc_attempts;
#else
// A build without gRPC: never made (start_grpc_listener refuses the transport first).
struct grpc_sender {
  using metadata = std::vector<std::pair<std::string, std::string>>;
  grpc_sender(asio::io_context&, const std::string&, duration) {
    throw std::invalid_argument("stormguard::lab: this build has no gRPC (STORMGUARD_WITH_GRPC)");
  }
  void send(std::uint64_t, const metadata&, const std::function<void(attempt_heard)>&) {}
  void cancel(std::uint64_t) {}
  void stop() noexcept {}
};
#endif

// What an HTTP attempt came back with (http::async_client's result), in the transport-neutral
// words of attempt_heard: a response with its status, its pushback as the client read it
// (server_refused) and its Retry-After; no response by the attempt's time-out (libcurl's
// CURLE_OPERATION_TIMEDOUT), cancelled by this transport, or the lab's own failure.
attempt_heard heard_of(const http::result& res) {
  attempt_heard h;
  if (res.response) {
    const auto retry_after = res.response->header_value("Retry-After");
    h.reply = admission::reply{.status = res.response->status,
                               .do_not_retry = res.reason == end_reason::server_refused,
                               .retry_after = retry_after.has_value()};
    if (retry_after) {
      const auto wall = std::chrono::time_point_cast<std::chrono::system_clock::duration>(
          std::chrono::system_clock::now());
      h.retry_after = parse_retry_after(*retry_after, wall).value_or(duration::zero());
    }
    return h;
  }
  constexpr int k_curle_operation_timedout = 28;
  if (res.error && res.error->kind == http::failure_kind::cancelled) {
    h.cancelled = true;
  } else if (res.error && res.error->curl_code == k_curle_operation_timedout) {
    h.timed_out = true;
  } else {
    h.failure = res.error ? res.error->message : std::string("no response");
  }
  return h;
}

// The lab's transport for the engine's driver (stormguard_engine/driver.hpp): the scenario's
// clock is the steady clock from the start of the run, scheduled starts wait on an Asio timer,
// and each attempt is one HTTP GET through http::async_client to the lab's server (which runs the
// engine's server model), or, over gRPC, one call through grpc_attempts
// (app/lab_grpc_attempts.hpp) to the server's gRPC listener. Prometheus metrics, when asked for,
// hear of every outcome. With a hedging strategy, the copies of a request that has ended (another
// copy won, or the request gave up) are cancelled for real: their transfers leave libcurl and their
// connections close, as http::async_hedge does (the server still serves them to the end, as in the
// model).
//
// `srv` is null for a part of a fleet spread over processes (run_fleet_part): the server runs in
// another process, whose figures the caller adds (merge_parts).
template <class B>
class lab_transport {
 public:
  template <class Config>
  lab_transport(asio::io_context& io, const sim::scenario& s, const sim::strategy& strat,
                const Config& config, server* srv, std::string url, const fleet_options& options)
      : io_(io),
        srv_(srv),
        options_(options),
        url_(std::move(url)),
        repeaters_(static_cast<std::uint32_t>(std::llround(
            s.repeating_clients * static_cast<double>(std::max<std::int64_t>(1, s.clients))))),
        end_(s.length.count()),
        hedging_(strat.hedging.has_value()),
        client_(io.get_executor(),
                client_options_for(
                    strat.attempt_timeout != duration::max() ? strat.attempt_timeout : s.timeout,
                    sim::profile_of(s, strat))),
        starts_timer_(io),
        tick_timer_(io),
        prometheus_(options.metrics == nullptr
                        ? nullptr
                        : &options.metrics->for_client(strat.name, metrics::budget_kind<B>())),
        driver_(s, strat, config, *this) {
    if (options.transport == lab_transport_kind::grpc) {
      grpc_ = std::make_unique<grpc_sender>(
          io, url_, strat.attempt_timeout != duration::max() ? strat.attempt_timeout : s.timeout);
    }
  }

  fleet_result run(std::optional<steady::time_point> start = std::nullopt) {
    if (start) {
      std::this_thread::sleep_until(*start);
      t0_ = *start;
    } else {
      srv_->start_clock();
      t0_ = steady::now();
    }
    scenario_clock time(t0_);
    // The syncers of the clients' fleet budgets, when the caller keeps them with a real store;
    // destroyed (stopped) at the end of this function, before the budgets.
    std::vector<std::shared_ptr<void>> attached;
    if constexpr (std::is_same_v<B, fleet_budget>) {
      if (options_.attach_fleet_budget) {
        auto& clients = driver_.clients();
        for (std::uint32_t i = 0; i < clients.clients_count(); ++i) {
          attached.push_back(options_.attach_fleet_budget(i, clients.client_budget(i), time));
        }
      }
    }
    driver_.begin();
    arm_starts();
    tick();
    io_.run();
    if (grpc_) grpc_->stop();  // the calls still in flight: cancelled, as the HTTP client's are
    attached.clear();
    fleet_result out;
    out.completed = completed_;
    // The lab's own socket failures, whoever runs the server (a part of a fleet spread over
    // processes reports them to the process that merges the parts).
    out.transport_failures = transport_failures_;
    out.first_transport_failure = first_transport_failure_;
    if (srv_ == nullptr) {  // a part of a fleet over processes: merge_parts adds the server's
      out.result = driver_.finish();
      return out;
    }
    const server_stats st = srv_->stats();
    sim::engine::metrics& m = driver_.run_metrics();
    m.sample_queue_until(end_ + sim::engine::k_bin_ns, st.queued);
    m.counters().lost = st.lost;
    m.counters().wasted_work = std::max<std::int64_t>(0, st.served - st.served_in_time);
    // What only the server knows: attempts that used a worker (finished or in service), those of
    // the incident's logical requests (labelled by send()), and the defences' refusals and drops.
    m.counters().served = st.served + st.in_service;
    m.counters().incident_served = st.incident_served;
    m.counters().rejected = st.rejected + st.defence_rejected();
    m.counters().expired_dropped = st.dropped_expired();
    out.result = driver_.finish();
    out.accept_errors = st.accept_errors;
    out.connections_refused = st.connections_refused;
    return out;
  }

  // The driver's transport.
  void schedule_arrival(std::int64_t at) { push(pending{at, k_arrival, 0}); }
  void schedule_attempt(std::int64_t at, std::uint32_t id, std::int32_t attempt) {
    if (at < end_) push(pending{at, id, attempt});
  }
  void send(std::uint32_t id, std::int32_t attempt, std::int64_t) {
    http::request req;
    // Each logical request has its own target, as real traffic has (GET /orders/<pid>-<n>):
    // the server's fingerprints then tell one request's retries from another's first attempt. A
    // repeating client (the scenario's repeating_clients) sends all of its requests to one
    // (GET /orders/<pid>-client-<k>), as a page that polls does.
    req.url = url_;
    if (req.url.empty() || req.url.back() != '/') req.url += '/';
    const std::uint32_t client = id % driver_.clients().clients_count();
    if (client < repeaters_) {
      req.url += fmt::format("orders/{}-client-{}", ::getpid(), client);
    } else {
      if (attempt == 1 || id >= serials_.size()) {
        if (id >= serials_.size()) serials_.resize(std::size_t{id} + 1, 0);
        serials_[id] = ++last_serial_;
      }
      req.url += fmt::format("orders/{}-{}", ::getpid(), serials_[id]);
    }
    // The attempt number is the fleet's (each call is one attempt of the client), in the label
    // of the client profile, if it has one.
    std::array<char, 24> number{};
    switch (driver_.profile().label) {
      case attempt_label::envoy_attempt_count:
        req.headers.push_back({std::string(k_attempt_count_header),
                               std::string(format_attempt_count(attempt, number))});
        break;
      case attempt_label::grpc_previous_attempts:
        if (attempt > 1) {
          req.headers.push_back({std::string(k_previous_attempts_header),
                                 std::string(format_attempt_count(attempt - 1, number))});
        }
        break;
      case attempt_label::none:
        break;
    }
    // The lab's own label: an attempt of a logical request that arrived during the incident
    // (the server counts those it serves: incident_served).
    if (driver_.clients()[id].in_incident) {
      req.headers.push_back({std::string(k_incident_label_header), "1"});
    }
    if (grpc_) {  // the labels as metadata (lowercase names, as gRPC requires)
      grpc_sender::metadata md;
      md.reserve(req.headers.size());
      for (http::header& h : req.headers) md.emplace_back(std::move(h.name), std::move(h.value));
      grpc_->send(copy_key(id, attempt), md,
                  [this, id, attempt](attempt_heard h) { on_result(id, attempt, h); });
      return;
    }
    auto done = [this, id, attempt](http::result res) { on_result(id, attempt, heard_of(res)); };
    if (!hedging_) {
      client_.async_perform(std::move(req), std::move(done));
      return;
    }
    auto& signal = copies_[copy_key(id, attempt)];
    signal = std::make_unique<asio::cancellation_signal>();
    client_.async_perform(std::move(req), asio::bind_cancellation_slot(signal->slot(), done));
  }
  void note_throttled() { note_end(end_reason::throttled); }
  void note_outcome(attempt_status status) {
    if (prometheus_ != nullptr) prometheus_->record_outcome(status);
  }
  void note_retry(duration delay) {
    if (prometheus_ != nullptr) prometheus_->record_retry(delay, false);
  }
  void note_end(end_reason reason) {
    if (prometheus_ != nullptr) prometheus_->record_end(reason);
  }

 private:
  // One attempt per call: the fleet decides the retries. The client profile says what goes out
  // with it (send() adds the attempt label) and whether connections are kept.
  static http::client_options client_options_for(duration timeout, const client_profile& client) {
    http::client_options o;
    o.retry.max_retries = 0;
    o.attempt_timeout = timeout;
    o.connect_timeout = timeout;
    o.send_attempt_count = false;
    o.send_timeout = client.sends_deadline;
    o.reuse_connections = client.reuses_connections;
    return o;
  }

  [[nodiscard]] std::int64_t now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - t0_).count();
  }

  void push(pending p) {
    starts_.push(p);
    if (!armed_ || p.time < armed_at_) arm_starts();
  }

  // Waits until the earliest scheduled start.
  void arm_starts() {
    if (starts_.empty() || stopped_) {
      armed_ = false;
      return;
    }
    armed_ = true;
    armed_at_ = starts_.top().time;
    starts_timer_.expires_at(t0_ + std::chrono::nanoseconds(armed_at_));
    starts_timer_.async_wait([this](const std::error_code& ec) {
      if (ec || stopped_) return;  // re-armed earlier, or stopped
      armed_ = false;
      const std::int64_t t = now();
      while (!starts_.empty() && starts_.top().time <= t && !stopped_) {
        const pending p = starts_.top();
        starts_.pop();
        if (p.id == k_arrival) {
          driver_.arrival(p.time);
        } else {
          driver_.start_attempt(p.id, p.attempt, p.time);
        }
      }
      if (!armed_) arm_starts();
    });
  }

  // Every 100 ms: the end of the run, the stop flag, the queue sample and the progress.
  void tick() {
    const std::int64_t t = now();
    if (t >= end_ || (options_.stop != nullptr && options_.stop->load())) {
      completed_ = t >= end_;
      stop();
      return;
    }
    if (srv_ != nullptr) driver_.run_metrics().sample_queue_until(t, srv_->stats().queued);
    if (options_.progress) {
      options_.progress(static_cast<std::size_t>(t / k_tick_ns),
                        static_cast<std::size_t>((end_ + k_tick_ns - 1) / k_tick_ns));
    }
    const std::int64_t next = std::min(end_, (t / k_tick_ns + 1) * k_tick_ns);
    tick_timer_.expires_at(t0_ + std::chrono::nanoseconds(next));
    tick_timer_.async_wait([this](const std::error_code& ec) {
      if (!ec && !stopped_) tick();
    });
  }

  void stop() {
    stopped_ = true;
    starts_timer_.cancel();
    io_.stop();
  }

  // An attempt's HTTP result: a 2xx is a success, another status a 503 of the model, no
  // response a timeout (the client's attempt timeout is the scenario's).
  void on_result(std::uint32_t id, std::int32_t attempt, const attempt_heard& heard) {
    if (stopped_) return;
    if (hedging_) {
      copies_.erase(copy_key(id, attempt));
      // A copy this transport cancelled: the model has forgotten it already.
      if (heard.cancelled) return;
    }
    classify_result(id, attempt, heard);
    if (hedging_ && driver_.ended(id)) cancel_copies(id);
  }

  static std::uint64_t copy_key(std::uint32_t id, std::int32_t attempt) noexcept {
    return (static_cast<std::uint64_t>(id) << 32) | static_cast<std::uint32_t>(attempt);
  }

  // Cancels the copies of request `id` still in flight (at most hedging.max_attempts <= 5).
  void cancel_copies(std::uint32_t id) {
    for (std::int32_t k = 1; k <= 5; ++k) {
      if (grpc_) {
        grpc_->cancel(copy_key(id, k));
        continue;
      }
      const auto it = copies_.find(copy_key(id, k));
      if (it != copies_.end()) it->second->emit(asio::cancellation_type::terminal);
    }
  }

  void classify_result(std::uint32_t id, std::int32_t attempt, const attempt_heard& heard) {
    const std::int64_t t = now();
    if (t >= end_) return;  // after the run: still in flight, as in the simulator
    if (heard.reply && heard.reply->status >= 200 && heard.reply->status < 300) {
      driver_.succeeded(id, attempt, t);
    } else if (heard.reply) {
      // What the client heard (the pushback as the client read it), and what it does with it:
      // admission::client_step_for, as in the simulator.
      switch (admission::client_step_for(*heard.reply, driver_.profile())) {
        case admission::client_step::stop:
          driver_.refused(id, attempt, t);  // grpc-retry-pushback-ms < 0 (e.g. the retry budget)
          break;
        case admission::client_step::retry_after:
          driver_.unavailable_after(id, attempt, t, heard.retry_after.value_or(duration::zero()));
          break;
        case admission::client_step::done:  // not reached: a 2xx is a success above
        case admission::client_step::retry:
          driver_.unavailable(id, attempt, t);
          break;
      }
    } else {
      // The scenario's silence is a time-out; any other transport failure is the lab's own
      // (fleet_result::transport_failures). Still a time-out for the driver: no response.
      // A hedged copy cancelled because its request had already ended is no failure.
      if (!driver_.ended(id) && !heard.timed_out) {
        if (transport_failures_++ == 0 && heard.failure) first_transport_failure_ = *heard.failure;
      }
      driver_.timed_out(id, attempt, t);
    }
  }

  asio::io_context& io_;
  server* srv_;
  const fleet_options& options_;
  std::string url_;
  std::uint32_t repeaters_;             // the first clients repeat one target (send)
  std::vector<std::uint64_t> serials_;  // by request id: the logical request's number (send)
  std::uint64_t last_serial_ = 0;
  std::int64_t end_;
  bool hedging_;  // the strategy hedges: losing copies are cancelled
  // The cancellation signals of the copies in flight, by copy_key (hedging only); declared before
  // the client, which may still touch their slots when it is destroyed.
  std::unordered_map<std::uint64_t, std::unique_ptr<asio::cancellation_signal>> copies_;
  http::async_client client_;
  std::unique_ptr<grpc_sender> grpc_;  // over gRPC: the attempts go there, not to client_
  std::priority_queue<pending, std::vector<pending>, std::greater<>> starts_;
  asio::steady_timer starts_timer_;
  asio::steady_timer tick_timer_;
  steady::time_point t0_{};
  bool armed_ = false;
  std::int64_t armed_at_ = 0;
  bool stopped_ = false;
  bool completed_ = true;
  std::int64_t transport_failures_ = 0;
  std::string first_transport_failure_;
  metrics::client_metrics* prometheus_;  // nullptr: no Prometheus metrics
  sim::engine::driver<B, lab_transport> driver_;
};

std::string cell(std::optional<double> lab, std::optional<double> sim, int decimals,
                 const char* unit = "") {
  const auto one = [&](std::optional<double> v) {
    return v ? fmt::format("{:.{}f}{}", *v, decimals, unit) : std::string("-");
  };
  return one(lab) + " / " + one(sim);
}

}  // namespace

namespace {

// One run of `strat` on scenario `s`: against `srv` (this process's server, its clock started
// now), or, when `srv` is null, against the server at `url` from the steady time `start`.
outcome<fleet_result, std::string> run_one(const char* what, const sim::scenario& s,
                                           const sim::strategy& strat, server* srv,
                                           const std::string& url,
                                           std::optional<steady::time_point> start,
                                           const fleet_options& options) {
  if (auto problem = sim::validate(s)) {
    throw std::invalid_argument(std::string("stormguard::lab::") + what +
                                ": invalid scenario: " + problem->message);
  }
  sim::strategy applied = sim::engine::with_scenario_retries(s, strat);
  // A real store's syncers keep the fleet budgets: the engine's store model steps aside.
  if (options.attach_fleet_budget) applied.fleet_store.external = true;
  asio::io_context io(1);
  try {
    return std::visit(
        [&](const auto& config) -> fleet_result {
          using budget_type = typename sim::budget_for<std::decay_t<decltype(config)>>::type;
          lab_transport<budget_type> transport(io, s, applied, config, srv, url, options);
          return transport.run(start);
        },
        applied.budget);
  } catch (const std::runtime_error& e) {  // libcurl could not be initialised
    return failure{std::string(e.what())};
  }
}

}  // namespace

outcome<fleet_result, std::string> run_fleet(const sim::scenario& s, const sim::strategy& strat,
                                             server& srv, const fleet_options& options) {
  const std::string& target =
      options.transport == lab_transport_kind::grpc ? options.grpc_target : srv.url();
  return run_one("run_fleet", s, strat, &srv, target, std::nullopt, options);
}

outcome<fleet_result, std::string> run_fleet_part(const sim::scenario& part,
                                                  const sim::strategy& strat,
                                                  const std::string& url,
                                                  std::chrono::steady_clock::time_point start,
                                                  const fleet_options& options) {
  return run_one("run_fleet_part", part, strat, nullptr, url, start, options);
}

outcome<lab_report, std::string> run_lab(const sim::scenario& s,
                                         std::span<const sim::strategy> strategies,
                                         const fleet_options& options) {
  if (auto problem = sim::validate(s)) {
    throw std::invalid_argument("stormguard::lab::run_lab: invalid scenario: " + problem->message);
  }
  if (auto problem = sim::check_work(s, strategies)) {
    throw std::invalid_argument("stormguard::lab::run_lab: " + problem->message);
  }
  lab_report report{s, {}, false, options.transport};
  const std::size_t ticks =
      static_cast<std::size_t>((s.length.count() + k_tick_ns - 1) / k_tick_ns);
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    if (options.stop != nullptr && options.stop->load()) {
      report.interrupted = true;
      break;
    }
    auto started = server::start(s, {.port = 0, .start_clock = false});
    if (!started) return failure{started.error()};
    const std::unique_ptr<server> srv = *std::move(started);
    fleet_options per_run{
        {}, options.stop, options.metrics, options.attach_fleet_budget, options.transport, {}};
    auto listener = start_grpc_listener(*srv, options.transport);
    if (!listener) return failure{listener.error()};
    per_run.grpc_target = listener->target;
    if (options.progress) {
      per_run.progress = [&, i](std::size_t done, std::size_t) {
        options.progress(i * ticks + done, strategies.size() * ticks);
      };
    }
    auto measured = run_fleet(s, strategies[i], *srv, per_run);
    srv->stop();
    listener->stop();  // after the server, which has answered every call it held
    if (!measured) return failure{measured.error()};
    fleet_result& run = *measured;
    report.strategies.push_back(lab_comparison{strategies[i].name, std::move(run.result),
                                               sim::simulate(s, strategies[i]), run.completed, true,
                                               std::string()});
    if (run.transport_failures > 0 || run.accept_errors > 0 || run.connections_refused > 0) {
      lab_comparison& c = report.strategies.back();
      c.valid = false;
      c.invalid_reason = fmt::format(
          "the lab's own sockets failed: {} attempts ended without a response other than by "
          "time-out{}, the server's accept() failed {} times and it closed {} new connections "
          "at its connection cap (descriptors ran out: raise RLIMIT_NOFILE, ulimit -n, or lower "
          "--scale); the figures measure the lab, not the scenario",
          run.transport_failures,
          run.first_transport_failure.empty() ? std::string()
                                              : " (first: " + run.first_transport_failure + ")",
          run.accept_errors, run.connections_refused);
    }
    if (!run.completed) {
      report.interrupted = true;
      break;
    }
  }
  if (options.progress && !report.interrupted) {
    options.progress(strategies.size() * ticks, strategies.size() * ticks);
  }
  return report;
}

std::string to_json(const lab_report& report) {
  sim::engine::json_writer w;
  w.begin_report(report.scenario.name, report.scenario.seed);
  w.field("interrupted", report.interrupted)
      .field("transport", report.transport == lab_transport_kind::grpc ? "grpc" : "http")
      .key("strategies")
      .begin_array();
  for (const lab_comparison& c : report.strategies) {
    w.begin_object().field("name", c.name).field("completed", c.completed);
    w.key("lab").raw(sim::to_json(c.lab)).key("sim").raw(sim::to_json(c.sim));
    w.field("valid", c.valid);
    if (c.valid) {
      w.key("invalid_reason").raw("null");
    } else {
      w.field("invalid_reason", c.invalid_reason);
    }
    if (c.store_forgot == 0) {
      w.key("store_forgot").raw("null");
    } else {
      w.key("store_forgot")
          .begin_object()
          .field("syncs", c.store_forgot)
          .fixed("first_at_s", c.store_forgot_at_s, 1)
          .field("during_incident", c.store_forgot_in_incident)
          .end_object();
    }
    w.field("comparable", c.completed && c.valid && !c.store_forgot_in_incident).end_object();
  }
  w.end_array().field("valid", report.valid());
  return std::move(w.end_object()).line();
}

std::string format_table(const lab_report& report) {
  const auto& s = report.scenario;
  std::string out = fmt::format(
      "{}: {:g} req/s, {} client{}, {} worker{}, queue {}, seed {}{}; each figure lab / sim\n\n",
      s.name, s.requests_per_second, s.clients, s.clients == 1 ? "" : "s", s.workers,
      s.workers == 1 ? "" : "s", s.queue_limit, s.seed,
      report.transport == lab_transport_kind::grpc ? "; over gRPC" : "");
  out +=
      fmt::format("{:<14} {:>17} {:>17} {:>17} {:>19} {:>21} {:>15}\n", "strategy", "amplification",
                  "incident ampl.", "peak load", "success", "p99 (ms)", "recovery (s)");
  for (const lab_comparison& c : report.strategies) {
    const auto pct = [](std::optional<double> v) {
      return v ? std::optional<double>(*v * 100) : std::nullopt;
    };
    out += fmt::format("{:<14} {:>17} {:>17} {:>17} {:>19} {:>21} {:>15}{}\n", c.name,
                       cell(c.lab.amplification, c.sim.amplification, 2),
                       cell(c.lab.incident_amplification, c.sim.incident_amplification, 2),
                       cell(c.lab.peak_load_ratio, c.sim.peak_load_ratio, 2),
                       cell(pct(c.lab.success_ratio), pct(c.sim.success_ratio), 1, "%"),
                       cell(c.lab.p99_latency_ms, c.sim.p99_latency_ms, 0),
                       cell(c.lab.recovery_s, c.sim.recovery_s, 0),
                       !c.valid                     ? "  (INVALID: see below)"
                       : !c.completed               ? "  (stopped early: not comparable)"
                       : c.store_forgot_in_incident ? "  (the store forgot: see below)"
                                                    : "");
  }
  if (report.interrupted) {
    out +=
        "\ninterrupted: the report is partial; a run stopped early is not comparable (its lab "
        "figures cover the time it ran, the simulator's the whole scenario)\n";
  }
  for (const lab_comparison& c : report.strategies) {
    if (!c.valid) out += "\nINVALID " + c.name + ": " + c.invalid_reason + "\n";
    if (c.store_forgot > 0) {
      out += fmt::format(
          "\nSTORE FORGOT {}: {} syncs found that the fleet store had forgotten the fleet (the "
          "first {:.1f} s into the run{}); for one window after it no process was handed more "
          "than it held (learning mode){}\n",
          c.name, c.store_forgot, c.store_forgot_at_s,
          c.store_forgot_in_incident ? ", within a window of the incident" : "",
          c.store_forgot_in_incident
              ? "; the simulator's column models a store that never forgets: the incident "
                "figures are not comparable"
              : "");
    }
  }
  return out;
}

outcome<grpc_listener, std::string> start_grpc_listener(server& srv, lab_transport_kind kind) {
  if (kind != lab_transport_kind::grpc) return grpc_listener{};
#if defined(STORMGUARD_APP_HAS_GRPC)
  auto started = grpc_endpoint::start(srv, 0);
  if (!started) return failure{"the gRPC listener: " + started.error()};
  std::shared_ptr<grpc_endpoint> endpoint = *std::move(started);
  grpc_listener l;
  l.target = endpoint->address();
  l.stop_endpoint = [endpoint] { endpoint->stop(); };
  l.endpoint = std::move(endpoint);
  return l;
#else
  (void)srv;
  throw std::invalid_argument("stormguard::lab: this build has no gRPC (STORMGUARD_WITH_GRPC)");
#endif
}

bool lab_has_grpc() noexcept {
#if defined(STORMGUARD_APP_HAS_GRPC)
  return true;
#else
  return false;
#endif
}

bool forgetting_touches_incident(const sim::scenario& s, duration at, duration window) noexcept {
  return s.incident && at < s.incident->end && at + window > s.incident->start;
}

}  // namespace stormguard::lab
