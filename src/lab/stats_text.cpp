// SPDX-License-Identifier: Apache-2.0
// The bodies of serve's `GET /stats` and `GET /metrics` (src/lab/stats_text.hpp).
#include "lab/stats_text.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "lab/charges.hpp"
#include "lab/wire.hpp"
#include "stormguard/sim/defence_kinds.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::lab {

std::string_view phase_name(const sim::scenario& s, bool clock_started, duration elapsed) noexcept {
  if (!clock_started) return "waiting";
  if (elapsed >= s.length) return "after";
  if (s.incident && elapsed >= s.incident->start && elapsed < s.incident->end) return "incident";
  return "normal";
}

std::string stats_json(const sim::scenario& s, const server_stats& st) {
  const wire::stats_message m{s.name, std::string(phase_name(s, st.clock_started, st.elapsed)), st,
                              s.workers, s.queue_limit};
  return sim::engine::dump_json(nlohmann::ordered_json(m)) + "\n";
}

std::string stats_prometheus(const server_stats& st) {
  // A registry per scrape, filled from the snapshot: the server's counters stay plain atomics on
  // the event loop's hot path, and prometheus-cpp writes the exposition (names, HELP, TYPE,
  // escaping and number formats as every Prometheus client library does).
  prometheus::Registry registry;
  const auto counter = [&](const char* name, const char* help, std::int64_t n) {
    prometheus::BuildCounter()
        .Name(std::string("stormguard_serve_") + name)
        .Help(help)
        .Register(registry)
        .Add({})
        .Increment(static_cast<double>(n));
  };
  const auto gauge = [&](const char* name, const char* help, double v) {
    prometheus::BuildGauge()
        .Name(std::string("stormguard_serve_") + name)
        .Help(help)
        .Register(registry)
        .Add({})
        .Set(v);
  };
  counter("attempts_total", "Requests read on the scenario's endpoint.", st.attempts);
  counter("served_total", "Requests answered 200 after their service.", st.served);
  counter("served_in_time_total", "Requests answered 200 within the scenario's timeout.",
          st.served_in_time);
  counter("incident_served_total",
          "Requests labelled x-stormguard-incident (the lab's) that took a worker.",
          st.incident_served);
  counter("rejected_total", "Requests answered 503 at once: the queue was full.", st.rejected);
  counter("errors_total", "Requests answered 503 at once: the incident's error rate.", st.errors);
  counter("lost_total", "Requests read and never answered: the incident's loss rate.", st.lost);
  counter("requests_refused_total",
          "Requests refused for their framing or size (400, 413, 431, 501; docs/lab.md Limits).",
          st.requests_refused);
  counter("read_timeouts_total", "Connections closed: a request not read whole in time (408).",
          st.read_timeouts);
  counter("idle_closed_total", "Idle connections closed (idle timeout, or room at the cap).",
          st.idle_closed);
  counter("connections_refused_total", "New connections closed at once at the connection cap.",
          st.connections_refused);
  counter("accept_errors_total", "accept() failures (out of descriptors), each a 100 ms pause.",
          st.accept_errors);
  counter("write_timeouts_total",
          "Connections closed: an answer not taken by the client within write_timeout.",
          st.write_timeouts);
  counter("unsent_refused_total",
          "Requests answered 503: the answers not yet sent exceeded max_unsent_bytes.",
          st.unsent_refused);
  for (const auto& [name, help, n] : detail::payments_counters(st)) counter(name, help, n);
  // Each defence's decisions by reason (server.defences; zero without defences).
  auto& decisions = prometheus::BuildCounter()
                        .Name("stormguard_serve_defence_decisions_total")
                        .Help(
                            "Requests a server-side defence refused or dropped, by defence and "
                            "reason.")
                        .Register(registry);
  const auto decision = [&](const char* defence, const char* reason, std::int64_t n) {
    decisions.Add({{"defence", defence}, {"reason", reason}}).Increment(static_cast<double>(n));
  };
  sim::for_each_defence_kind([&]<class K>(std::type_identity<K>) {
    decision(K::name.data(), K::reason.data(), st.defence_decisions[sim::defence_index<K>]);
  });
  // The retry signals each request showed (docs/admission.md "Retry signals"): counted only.
  auto& signals = prometheus::BuildCounter()
                      .Name("stormguard_serve_retry_signals_total")
                      .Help("Requests a retry signal recognised as a retry, by signal.")
                      .Register(registry);
  auto& malformed = prometheus::BuildCounter()
                        .Name("stormguard_serve_retry_signals_malformed_total")
                        .Help("Requests whose retry label was malformed, by label.")
                        .Register(registry);
  for (const admission::retry_signal s : admission::k_retry_signals) {
    const std::string name(admission::signal_name(s));
    const std::size_t i = admission::index_of(s);
    signals.Add({{"signal", name}}).Increment(static_cast<double>(st.retry_signals[i]));
    if (admission::is_label(s)) {
      malformed.Add({{"signal", name}})
          .Increment(static_cast<double>(st.retry_signals_malformed[i]));
    }
  }
  gauge("queued", "Requests waiting for a worker.", static_cast<double>(st.queued));
  gauge("in_service", "Requests in service.", static_cast<double>(st.in_service));
  gauge("unsent_bytes", "Answers written and not yet sent, all connections together, in bytes.",
        static_cast<double>(st.unsent_bytes));
  gauge("elapsed_seconds", "The scenario's clock (0 until it starts).",
        std::chrono::duration<double>(st.elapsed).count());
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace stormguard::lab
