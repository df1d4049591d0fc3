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
  // Every count of server_stats, from its one list (wire::k_stats_counts).
  for (const wire::stats_count& c : wire::k_stats_counts) {
    const std::int64_t n = st.*c.member;
    if (c.type == wire::metric_type::counter) {
      counter((std::string(c.name) + "_total").c_str(), c.help, n);
    } else {
      gauge(c.name, c.help, static_cast<double>(n));
    }
  }
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
  gauge("elapsed_seconds", "The scenario's clock (0 until it starts).",
        std::chrono::duration<double>(st.elapsed).count());
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace stormguard::lab
