// SPDX-License-Identifier: Apache-2.0
// The time-series model on virtual time: the engine's driver (stormguard_engine/driver.hpp: the
// clients, their retries and the metrics) over the event queues (event_queue.hpp) and the server
// model (server.hpp), and the checks of a run's work.
#include "stormguard/sim/simulator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "stormguard/admission/reply.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/random.hpp"
#include "stormguard_engine/driver.hpp"
#include "stormguard_engine/event_queue.hpp"
#include "stormguard_engine/seeds.hpp"
#include "stormguard_engine/server.hpp"

namespace stormguard::sim {

namespace {

using engine::event_kind;
using engine::expected_requests;

// The simulator's transport for the engine's driver: virtual time (the event queues) and the
// server model in process. An attempt's timeout is pushed before its service completion so that,
// at equal times, the timeout comes first: a response at exactly the deadline is late.
template <class B>
class virtual_transport : public engine::no_notes {
 public:
  template <class Config>
  virtual_transport(const scenario& s, const strategy& strat, const Config& config)
      : end_(s.length.count()),
        queues_(end_, s.distribution == service_distribution::fixed),
        server_(s),
        driver_(s, strat, config, *this),
        fingerprints_(s.defences.enabled.has<shed_retries_defence>()),
        clients_(static_cast<std::uint32_t>(std::max<std::int64_t>(1, s.clients))),
        repeaters_(static_cast<std::uint32_t>(
            std::llround(s.repeating_clients * static_cast<double>(clients_)))) {}

  strategy_result run() {
    driver_.begin();
    engine::metrics& metrics = driver_.run_metrics();
    std::int64_t events = 0;
    while (true) {
      const engine::event e = queues_.pop();
      if (e.time >= end_) break;  // also the "no event left" sentinel
      metrics.sample_queue_until(e.time, server_.queue_length());
      ++events;
      dispatch(e);
    }
    metrics.sample_queue_until(end_ + engine::k_bin_ns, server_.queue_length());
    metrics.counters().events = events;
    return driver_.finish();
  }

  // The driver's transport.
  void schedule_arrival(std::int64_t at) { queues_.push(at, event_kind::arrival, 0, 0); }
  void schedule_attempt(std::int64_t at, std::uint32_t id, std::int32_t attempt) {
    queues_.push(at, event_kind::attempt_start, id, attempt);
  }
  void send(std::uint32_t id, std::int32_t attempt, std::int64_t now) {
    const std::int64_t deadline = engine::add_saturated(now, driver_.timeout());
    // The attempt's headers, as its client profile sends them: its number (a label the server
    // reads, else every attempt looks like a first) and its deadline (grpc-timeout: the
    // attempt's timeout; the client still gives up at `deadline` when it sends none).
    const client_profile& client = driver_.profile();
    // The weak signal, as serve's fingerprints give it: a request whose fingerprint's last
    // answer the server saw fail (every logical request has its own fingerprint, but a repeating
    // client's are all one: its next first attempt after a failure is a false alarm).
    const bool weak = fingerprints_ && take_failure(id, attempt);
    const engine::attempt_labels labels{
        attempt_info{client.label != attempt_label::none ? attempt : 1, false},
        client.sends_deadline ? deadline : engine::k_no_deadline, weak};
    strategy_result& counters = driver_.run_metrics().counters();
    const engine::decision d = server_.admit(now, labels);
    switch (d.what) {
      case engine::admission::lost:
        note_failure(id);  // read, never answered: the server sees the connection close
        ++driver_.run_metrics().counters().lost;
        queues_.push(deadline, event_kind::timeout, id, attempt);
        return;
      case engine::admission::error:
        answered(id, attempt, now, admission::outcome::unavailable);
        return;
      case engine::admission::rejected:
        ++counters.rejected;
        answered(id, attempt, now, admission::outcome::unavailable);
        return;
      case engine::admission::defended:
        // drop-expired's answer is counted as expired_dropped (only when the timeout is below
        // the service estimate), every other refusal as rejected.
        ++(d.by.outcome == admission::outcome::expired ? counters.expired_dropped
                                                       : counters.rejected);
        answered(id, attempt, now, d.by.outcome);
        return;
      case engine::admission::accepted:
        break;
    }
    queues_.push(deadline, event_kind::timeout, id, attempt);
    // The server's line knows the deadline only as the attempt's headers said it.
    if (const auto svc =
            server_.take(now, engine::queued_attempt{id, attempt, now, labels.deadline})) {
      push_service_done(id, attempt, now, *svc);
    }
  }

 private:
  // The server answered attempt `attempt` of request `id` now with the reply to `o`
  // (admission::reply_for, with server_model::retry_after_for's Retry-After), and the client does
  // what admission::client_step_for says for its profile.
  void answered(std::uint32_t id, std::int32_t attempt, std::int64_t now, admission::outcome o) {
    note_failure(id);
    admission::reply reply = admission::reply_for(o);
    const std::optional<duration> retry_after = server_.retry_after_for(o, now);
    reply.retry_after = retry_after.has_value();
    switch (admission::client_step_for(reply, driver_.profile())) {
      case admission::client_step::stop:
        driver_.refused(id, attempt, now);
        return;
      case admission::client_step::retry_after:
        driver_.unavailable_after(id, attempt, now, *retry_after);
        return;
      case admission::client_step::done:  // not an immediate answer of the server model
      case admission::client_step::retry:
        driver_.unavailable(id, attempt, now);
        return;
    }
  }

  // The weak retry signal's memory (kept only when shed-retries runs, the one defence that reads
  // it): whether the server saw the last answer to a fingerprint fail (an answer but 200, a lost
  // attempt, a service whose client had gone), used up by the fingerprint's next request (as
  // admission::recent_keys::take). A fingerprint is a logical request, or a repeating client.
  std::uint8_t& failure_of(std::uint32_t id) {
    const std::uint32_t c = id % clients_;
    std::vector<std::uint8_t>& table = c < repeaters_ ? failed_clients_ : failed_requests_;
    const std::uint32_t key = c < repeaters_ ? c : id;
    if (key >= table.size()) table.resize(std::size_t{key} + 1, 0);
    return table[key];
  }
  void note_failure(std::uint32_t id) {
    if (fingerprints_) failure_of(id) = 1;
  }
  // Attempt `attempt` of request `id` is sent: whether its fingerprint's failure was noted (used
  // up). A first attempt of a request of its own carries a fresh fingerprint.
  bool take_failure(std::uint32_t id, std::int32_t attempt) {
    if (attempt == 1 && id % clients_ >= repeaters_) return false;
    return std::exchange(failure_of(id), std::uint8_t{0}) != 0;
  }

  void dispatch(const engine::event& e) {
    switch (e.kind) {
      case event_kind::arrival:
        driver_.arrival(e.time);
        break;
      case event_kind::attempt_start:
        driver_.start_attempt(e.request, e.attempt, e.time);
        break;
      case event_kind::timeout:
        driver_.timed_out(e.request, e.attempt, e.time);
        break;
      case event_kind::service_done:
        if (const auto next = server_.finish(
                e.time, [&](const engine::queued_attempt& a, const engine::defence_answer& why) {
                  strategy_result& counters = driver_.run_metrics().counters();
                  // Answered at once (drop-expired: 503 + grpc-retry-pushback-ms -1), heard
                  // only if its caller still waits.
                  ++(why.outcome == admission::outcome::expired ? counters.expired_dropped
                                                                : counters.rejected);
                  if (driver_.awaits(a.request, a.attempt)) {
                    answered(a.request, a.attempt, e.time, why.outcome);
                  }
                })) {
          push_service_done(next->attempt.request, next->attempt.attempt, e.time, next->svc);
        }
        // Served after its client gave up: the server finds the connection closed (a failure).
        if (!driver_.awaits(e.request, e.attempt)) note_failure(e.request);
        driver_.succeeded(e.request, e.attempt, e.time);
        break;
    }
  }

  void push_service_done(std::uint32_t id, std::int32_t attempt, std::int64_t now,
                         engine::service svc) {
    driver_.served(id);
    queues_.push(engine::add_saturated(now, svc.time), event_kind::service_done, id, attempt,
                 svc.lane);
  }

  std::int64_t end_;
  engine::event_queues queues_;
  engine::server_model server_;
  engine::driver<B, virtual_transport> driver_;
  bool fingerprints_;                          // shed-retries runs: keep the weak signal
  std::uint32_t clients_;                      // the scenario's clients
  std::uint32_t repeaters_;                    // the first ones repeat one target
  std::vector<std::uint8_t> failed_requests_;  // by request id: failure_of
  std::vector<std::uint8_t> failed_clients_;   // by repeating client
};

std::string grouped(double n) {
  return stormguard::detail::format_grouped(static_cast<std::int64_t>(std::round(n)));
}

void check_or_throw(const scenario& s, std::span<const strategy> strategies) {
  if (auto problem = validate(s)) {
    throw std::invalid_argument("stormguard::sim::simulate: invalid scenario: " + problem->message);
  }
  if (auto problem = check_work(s, strategies)) {
    throw std::invalid_argument("stormguard::sim::simulate: " + problem->message);
  }
}

}  // namespace

double estimated_attempts(const scenario& s, const strategy& strat) noexcept {
  const strategy applied = engine::with_scenario_retries(s, strat);
  // A hedged strategy sends up to max_attempts copies (and has no retries).
  const int extra = applied.hedging ? applied.hedging->options.max_attempts - 1
                                    : std::max(0, applied.retry.max_retries);
  return expected_requests(s) * (1.0 + static_cast<double>(extra));
}

std::optional<scenario_error> check_work(const scenario& s, std::span<const strategy> strategies) {
  for (const strategy& strat : strategies) {
    if (strat.retry.max_retries >= engine::k_max_event_attempt) {
      return scenario_error{"max_retries",
                            fmt::format("max_retries: {} has {}; at most {} are allowed",
                                        stormguard::detail::quote_for_message(strat.name),
                                        strat.retry.max_retries, engine::k_max_event_attempt - 1)};
    }
    const double estimate = estimated_attempts(s, strat);
    if (estimate <= k_max_estimated_attempts) continue;
    const strategy applied = engine::with_scenario_retries(s, strat);
    const bool hedged = applied.hedging.has_value();
    const int extra =
        hedged ? applied.hedging->options.max_attempts - 1 : applied.retry.max_retries;
    const std::string name = stormguard::detail::quote_for_message(strat.name);
    if (!strat.scenario_retries) {
      // A policy's own retries (or copies): the scenario's max_retries does not apply to it.
      std::string field = hedged ? "hedging.max_attempts" : "retries";
      std::string message = fmt::format(
          "{} of policy {}: {} makes the run make up to {} attempts (requests_per_second x "
          "duration = {} logical requests, x (1 + {})); at most {} are allowed: lower the "
          "policy's {}, or the scenario's requests_per_second or duration",
          field, name, hedged ? extra + 1 : extra, grouped(estimate), grouped(expected_requests(s)),
          extra, grouped(k_max_estimated_attempts), field);
      return scenario_error{std::move(field), std::move(message)};
    }
    std::string field = s.max_retries ? "max_retries" : "requests_per_second";
    std::string message = fmt::format(
        "{}: the run of {} would make up to {} attempts (requests_per_second x duration = {} "
        "logical requests, x (1 + {} {})); at most {} are allowed: lower "
        "requests_per_second, duration or max_retries",
        field, name, grouped(estimate), grouped(expected_requests(s)), extra,
        hedged ? "copies" : "retries", grouped(k_max_estimated_attempts));
    return scenario_error{std::move(field), std::move(message)};
  }
  return std::nullopt;
}

unsigned parallel_runs(const scenario& s, unsigned threads, std::size_t count) noexcept {
  const unsigned resolved = resolve_threads(threads, count);
  const double fit = std::floor(k_max_parallel_bytes / std::max(1.0, estimated_run_bytes(s)));
  return fit >= static_cast<double>(resolved) ? resolved : std::max(1U, static_cast<unsigned>(fit));
}

strategy_result simulate(const scenario& s, const strategy& strat) {
  check_or_throw(s, std::span<const strategy>(&strat, 1));
  const strategy applied = engine::with_scenario_retries(s, strat);
  return std::visit(
      [&](const auto& config) {
        using budget_type = typename budget_for<std::decay_t<decltype(config)>>::type;
        strategy_result r = virtual_transport<budget_type>(s, applied, config).run();
        r.defence = to_string(s.defences.enabled);
        return r;
      },
      applied.budget);
}

simulation_report simulate(const scenario& s, std::span<const strategy> strategies) {
  return simulate(s, strategies, 1);
}

simulation_report simulate(const scenario& s, std::span<const strategy> strategies,
                           unsigned threads, const progress_callback& progress) {
  check_or_throw(s, strategies);
  simulation_report report{s, {}};
  report.strategies.resize(strategies.size());
  parallel_for(
      strategies.size(), parallel_runs(s, threads, strategies.size()),
      [&](std::size_t i) { report.strategies[i] = simulate(s, strategies[i]); }, progress);
  return report;
}

}  // namespace stormguard::sim
