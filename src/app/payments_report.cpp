// SPDX-License-Identifier: Apache-2.0
#include "app/payments_report.hpp"

#include <fmt/format.h>

#include <chrono>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::lab {

std::string to_json(const payments_audit& a) {
  const double seconds = std::chrono::duration<double>(a.elapsed).count();
  sim::engine::json_writer w;
  w.begin_object().field("charges", a.charges).field("ledger_rows", a.ledger_rows);
  w.field("duplicates", a.duplicates).field("lost", a.lost).field("unconfirmed", a.unconfirmed);
  w.field("attempts", a.attempts).field("client_attempts", a.client_attempts);
  w.field("succeeded", a.succeeded).field("failed", a.failed).field("replayed", a.replayed);
  w.field("conflicts", a.conflicts).field("unavailable", a.unavailable);
  w.field("dropped", a.dropped).field("no_response", a.no_response);
  w.field("other_rows", a.other_rows).field("store", a.store).field("servers", a.servers);
  w.field("fault_after_commit", a.fault_after_commit).field("policy", a.policy);
  w.field("elapsed_s", seconds);
  w.field("charges_per_s", seconds > 0 ? static_cast<double>(a.charges) / seconds : 0.0);
  w.field("interrupted", a.interrupted).field("passed", a.passed());
  w.field("counters_reset", a.counters_reset).field("max_failed", a.max_failed);
  w.field("gave_up", a.gave_up);
  return std::move(w.end_object()).line();
}

std::string format_table(const payments_audit& a) {
  const double seconds = std::chrono::duration<double>(a.elapsed).count();
  std::string out = fmt::format(
      "lab payments: {} charges over {} server{}, store {}{}{}\n", a.charges, a.servers,
      a.servers == 1 ? "" : "s", a.store.empty() ? "?" : a.store,
      a.fault_after_commit ? ", fault after commit " + detail::format_double(*a.fault_after_commit)
                           : std::string(),
      a.gave_up       ? " (gave up: the store stayed down)"
      : a.interrupted ? " (interrupted)"
                      : "");
  out += "policy: " + a.policy + "\n\n";
  const auto line = [&](std::string_view name, std::int64_t v, std::string_view what) {
    out += fmt::format("  {:<13} {:>8}  {}\n", name, v, what);
  };
  line("charges", a.charges, "logical charges sent, one key each");
  line("ledger rows", a.ledger_rows, "rows of these keys in the ledger");
  line("duplicates", a.duplicates, "rows beyond the first per key (double charges)");
  line("lost", a.lost, "succeeded for the client, no such row in the ledger");
  line("unconfirmed", a.unconfirmed, "failed for the client, yet in the ledger");
  line("attempts", a.attempts,
       a.counters_reset ? "the client's count: a server restarted (its counters went back to 0)"
                        : "POST /charges requests the servers read");
  if (a.client_attempts != a.attempts) {
    line("client tries", a.client_attempts,
         "attempts the retrier made (the servers' count differs)");
  }
  line("succeeded", a.succeeded, "charges whose call ended 2xx");
  line("failed", a.failed, "charges whose call ended otherwise");
  line("replayed", a.replayed, "successes answered from the guard's stored response");
  line("409s", a.conflicts, "attempts answered 409 (key in progress)");
  line("503s", a.unavailable, "attempts answered 503");
  if (a.dropped) line("dropped", *a.dropped, "charges committed, then left unanswered (fault)");
  line("no response", a.no_response, "client tries that got no response");
  if (a.other_rows > 0) line("other rows", a.other_rows, "rows of other keys (other runs)");
  out += fmt::format("  {:<13} {:>8}  {:.0f} charges/s\n", "time", fmt::format("{:.1f}s", seconds),
                     seconds > 0 ? static_cast<double>(a.charges) / seconds : 0.0);
  // The verdict line says what failed for the clients too: a run where every charge failed has no
  // double charge, and must not read as a clean pass.
  std::string failures = fmt::format(
      "{} of {} charge{} failed{}, {} unconfirmed", a.failed, a.charges, a.charges == 1 ? "" : "s",
      a.max_failed ? fmt::format(" (--max-failed {})", *a.max_failed) : std::string(),
      a.unconfirmed);
  if (a.gave_up) failures += "; gave up: too many consecutive 503s (the store stayed down)";
  out += a.passed()
             ? "\nPASS: no double charge, no lost charge; " + failures + "\n"
             : fmt::format("\nFAIL: {} double charge{}, {} lost charge{}; {}\n", a.duplicates,
                           a.duplicates == 1 ? "" : "s", a.lost, a.lost == 1 ? "" : "s", failures);
  return out;
}

}  // namespace stormguard::lab
