// SPDX-License-Identifier: Apache-2.0
// `stormguard serve`: the scenario's server as a real HTTP/1.1 server on 127.0.0.1. Thin: the
// server is stormguard::lab::server; this file loads and scales the scenario, prints the address,
// a live line per second and a summary, and ends cleanly on SIGINT or SIGTERM. The payments
// endpoint (POST /charges, GET /ledger) is on, behind the idempotency guard with an SQLite store
// in a temporary directory unless --idempotency says otherwise (temporary_store.hpp).
#include <fmt/format.h>
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "command.hpp"
#include "defence_option.hpp"
#include "lab_payments.hpp"
#include "manpage.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "scenario_argument.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "temporary_store.hpp"
#include "usage.hpp"

#if defined(STORMGUARD_APP_HAS_GRPC)
#include "app/lab_grpc.hpp"
#endif

namespace stormguard::cli {

namespace {

struct serve_options {
  std::string scenario;
  int port = 0;
  double scale = 1.0;
  bool wait_start = false;
  std::string idempotency;
  CLI::Option* idempotency_option = nullptr;
  double fault_after_commit = 0.0;
  std::uint64_t seed = 0;
  CLI::Option* seed_option = nullptr;
  std::string principal_key_file;
  std::string ledger_token_file;
  std::string defence;  // --defence (defence_option.hpp): one server, no comma
  CLI::Option* defence_option = nullptr;
  bool grpc = false;  // --grpc, or --grpc-port given
  int grpc_port = 0;
  CLI::Option* grpc_port_option = nullptr;
};

void print_error(const std::string& message) { report_error("serve", message); }

constexpr const char* k_exit_statuses =
    "Exit status: 0 after a clean shutdown on SIGINT, SIGTERM or SIGHUP (the way serve ends), 1 "
    "when the\n"
    "port or the --grpc port cannot be bound (in use, not permitted), --grpc in a build without\n"
    "gRPC, the --idempotency store cannot be opened or\n"
    "reached, --principal-key-file cannot be read (or is empty, or over 1024 bytes),\n"
    "--ledger-token-file cannot be read or holds no token, or stdout\n"
    "cannot be written, 2 for a bad command line or scenario (unknown name, "
    "bad\n"
    "file, --port or --grpc-port outside [0, 65535], the two equal, --scale outside (0, 1], a\n"
    "bad --idempotency spec, "
    "--fault-after-commit outside [0, 1]).";

// A count per second, to the nearest integer.
std::string per_second(std::int64_t n, double seconds) {
  return fmt::format("{:.0f}", seconds > 0 ? static_cast<double>(n) / seconds : 0.0);
}

// The live line: the last second's rates and the queue now.
std::string live_line(const lab::server& srv, const lab::server_stats& now,
                      const lab::server_stats& before, double seconds) {
  const auto seconds_elapsed = std::chrono::duration<double>(now.elapsed).count();
  return fmt::format(
      "t={:.0f}s {}: {} attempts/s, queued {}, in service {}, served in time {}/s, 503s {}/s, "
      "lost {}/s",
      seconds_elapsed, lab::phase_name(srv.scenario(), now.clock_started, now.elapsed),
      per_second(now.attempts - before.attempts, seconds), now.queued, now.in_service,
      per_second(now.served_in_time - before.served_in_time, seconds),
      per_second(now.rejected + now.errors - before.rejected - before.errors, seconds),
      per_second(now.lost - before.lost, seconds));
}

// The idempotency store's outages, said once when they begin and once when they end, from the
// server's transitions (server_stats::store_outages, store_recoveries): an outage that begins
// and ends within one second gets both lines, in order. The cause (lab::server::last_store_failure,
// redacted) is said with the warning, and again when it changes while the store is down: at most
// a line a second.
void report_store_state(const lab::server_stats& now, const lab::server_stats& before,
                        const std::string& failure, bool& store_down, std::string& said) {
  const std::int64_t unavailable = now.charges_unavailable - before.charges_unavailable;
  if (!store_down && now.store_outages > before.store_outages) {
    store_down = true;
    said = failure;
    report_warning("serve", fmt::format("the idempotency store is unavailable: {} charge{} "
                                        "answered 503 with Retry-After in the last second; "
                                        "cause: {}",
                                        unavailable, unavailable == 1 ? "" : "s",
                                        failure.empty() ? "unknown" : failure));
  } else if (store_down && failure != said && now.store_recoveries < now.store_outages) {
    said = failure;
    report_warning("serve", "the idempotency store still fails; cause: " + failure);
  }
  if (store_down && now.store_recoveries >= now.store_outages) {
    store_down = false;
    report_log("serve", "the idempotency store answers again");
  }
}

std::string summary(const lab::server_stats& s, double seconds) {
  return fmt::format(
      "summary: {:.1f}s; {} attempts ({}/s), {} served ({} in time), {} rejected (queue full), "
      "{} incident 503s, {} lost, {} queued and {} in service at the end; {} POST /charges: {} "
      "committed ({} left unanswered by --fault-after-commit), {} replayed, {} answered 503 "
      "(store unavailable)",
      seconds, s.attempts, per_second(s.attempts, seconds), s.served, s.served_in_time, s.rejected,
      s.errors, s.lost, s.queued, s.in_service, s.charges, s.charges_committed, s.charges_dropped,
      s.charges_replayed, s.charges_unavailable);
}

// The payments endpoint's options: its store is --idempotency, else SQLite in a temporary
// directory (`temporary`) that is removed when serve ends (after the server, which holds its
// connections). nullopt after printing why not.
std::optional<lab::payments_options> payments_of(const serve_options& o, const sim::scenario& s,
                                                 std::optional<temporary_store>& temporary) {
  lab::payments_options payments;
  if (o.idempotency_option != nullptr && o.idempotency_option->count() > 0) {
    payments.idempotency = o.idempotency;
  } else {
    auto made = temporary_store::create("serve");
    if (!made) {
      print_error(made.error());
      return std::nullopt;
    }
    temporary.emplace(*std::move(made));
    payments.idempotency = temporary->spec();
  }
  if (!o.principal_key_file.empty()) {
    auto key = read_secret_file("serve", "--principal-key-file", o.principal_key_file,
                                "the key must be 1..1024 bytes (e.g. head -c 32 /dev/urandom > "
                                "FILE)");
    if (!key) return std::nullopt;
    payments.principal_key = *std::move(key);
  }
  if (!o.ledger_token_file.empty()) {
    auto token = read_ledger_token_file("serve", o.ledger_token_file);
    if (!token) return std::nullopt;
    payments.ledger_token = *std::move(token);
  }
  payments.fault_after_commit = o.fault_after_commit;
  payments.seed = o.seed_option != nullptr && o.seed_option->count() > 0 ? o.seed : s.seed;
  return payments;
}

// Prints the live line every second until SIGINT, SIGTERM or SIGHUP (blocked in `signals`),
// then stops the server, runs `after_stop` (the gRPC listener's own stop) and prints the summary.
void serve_until_signal(lab::server& srv, const sigset_t& signals,
                        const std::function<void()>& after_stop) {
  using clock = std::chrono::steady_clock;
  const auto began = clock::now();
  auto next_tick = began + std::chrono::seconds(1);
  lab::server_stats before = srv.stats();
  auto before_time = began;
  bool store_down = false;
  std::string said_failure;  // the store failure last said on stderr
  while (true) {
    const auto left = std::max(clock::duration::zero(), next_tick - clock::now());
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec wait{static_cast<std::time_t>(ns / 1'000'000'000),
                  static_cast<long>(ns % 1'000'000'000)};
    const int signal = sigtimedwait(&signals, nullptr, &wait);
    if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP) break;
    if (signal < 0 && errno == EINTR) continue;
    const auto now_time = clock::now();
    if (now_time < next_tick) continue;
    const lab::server_stats now = srv.stats();
    report_log("serve", live_line(srv, now, before,
                                  std::chrono::duration<double>(now_time - before_time).count()));
    report_store_state(now, before, srv.last_store_failure(), store_down, said_failure);
    before = now;
    before_time = now_time;
    next_tick += std::chrono::seconds(1);
    if (next_tick < now_time) next_tick = now_time + std::chrono::seconds(1);
  }
  srv.stop();
  if (after_stop) after_stop();
  report_log("serve",
             summary(srv.stats(), std::chrono::duration<double>(clock::now() - began).count()));
}

int run(const serve_options& o) {
  auto scenario = load_scenario_argument("serve", o.scenario);
  if (!scenario) return exit_usage;
  if (o.defence_option != nullptr && o.defence_option->count() > 0) {
    std::string error;
    const auto rows = parse_defence_option(o.defence, false, error);
    if (!rows) {
      print_error(error);
      return exit_usage;
    }
    *scenario = with_defences(*scenario, rows->front());
  }
  auto scaled = sim::scale_scenario(*scenario, o.scale);
  if (!scaled) {
    print_error("--scale " + detail::format_double(o.scale) + ": " + scaled.error().message);
    return exit_usage;
  }

  // SIGINT and SIGTERM are blocked before the server's thread exists (it inherits the mask) and
  // taken here with sigtimedwait, which also paces the live line: no handler, no global state.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // a closed terminal ends serve cleanly too, with its summary
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &signals, &previous);
  struct restore_mask {
    sigset_t mask;
    ~restore_mask() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{previous};

  if (o.grpc_port_option != nullptr && o.grpc_port_option->count() > 0 && o.grpc_port != 0 &&
      o.grpc_port == o.port) {
    print_error(
        fmt::format("--grpc-port {} is --port {}: the HTTP and gRPC listeners need a "
                    "port each",
                    o.grpc_port, o.port));
    return exit_usage;
  }
  if (!(o.fault_after_commit >= 0.0 && o.fault_after_commit <= 1.0)) {
    print_error("--fault-after-commit " + detail::format_double(o.fault_after_commit) +
                ": must be a probability in [0, 1]");
    return exit_usage;
  }
  std::optional<temporary_store> temporary;
  const auto payments = payments_of(o, *scaled, temporary);
  if (!payments) return exit_failure;
  int status = exit_success;
  const std::unique_ptr<lab::server> srv =
      start_payments_server("serve", *scaled,
                            {.port = static_cast<std::uint16_t>(o.port),
                             .start_clock = !o.wait_start,
                             .payments = *payments},
                            status);
  if (!srv) return status;
  // `--grpc`: the same endpoint over gRPC; stopped after the server, which answers every call
  // it still holds (app/lab_grpc.hpp). Started before the first line is printed, so that a
  // script that reads "listening on" knows both listeners are up.
  std::function<void()> stop_grpc;
  std::string grpc_line;
  const bool grpc_port_given = o.grpc_port_option != nullptr && o.grpc_port_option->count() > 0;
  if (o.grpc || grpc_port_given) {
#if defined(STORMGUARD_APP_HAS_GRPC)
    auto grpc = lab::grpc_endpoint::start(*srv, static_cast<std::uint16_t>(o.grpc_port));
    if (!grpc) {
      print_error(std::string(grpc_port_given ? "--grpc-port" : "--grpc") + ": " + grpc.error());
      return exit_failure;
    }
    std::shared_ptr<lab::grpc_endpoint> endpoint = *std::move(grpc);
    grpc_line = "grpc listening on " + endpoint->address() + "\n";
    stop_grpc = [endpoint] { endpoint->stop(); };
#else
    print_error("--grpc: this stormguard was built without gRPC (STORMGUARD_WITH_GRPC=OFF)");
    return exit_failure;
#endif
  }
  if (!write_all(stdout, "listening on " + srv->url() + "\n" + grpc_line)) {
    print_error("cannot write to stdout: " + errno_text(errno));
    return exit_failure;
  }
  report_log(
      "serve",
      fmt::format("POST /charges{}: {}{}",
                  payments->ledger_token.empty() ? " (GET /ledger off: --ledger-token-file)"
                                                 : " and GET /ledger (with the operator token)",
                  payments->idempotency == "off"
                      ? std::string("--idempotency off: no guard, the ledger in memory")
                      : "idempotency store " + printable_message(payments->idempotency) +
                            (temporary ? " (temporary: removed at exit)" : ""),
                  o.fault_after_commit > 0
                      ? ", fault after commit " + detail::format_double(o.fault_after_commit)
                      : std::string()));

  serve_until_signal(*srv, signals, stop_grpc);
  return exit_success;
}

}  // namespace

command add_serve_command(CLI::App& parent) {
  auto options = std::make_shared<serve_options>();
  CLI::App* sub = parent.add_subcommand(
      "serve", "Serve a scenario's backend, incident included, on 127.0.0.1 (serve SCENARIO)");
  sub->description(
      "A real HTTP/1.1 server on 127.0.0.1 that is the scenario's server: its workers, queue,\n"
      "service times and incident, on the scenario's clock. GET /stats and /metrics give the\n"
      "counters; POST /control/start starts the clock (with --wait-start); POST /charges is a\n"
      "payments endpoint behind the idempotency guard and GET /ledger its ledger; every other\n"
      "path is the scenario's endpoint. With --grpc, the same endpoint over gRPC too\n"
      "(stormguard.lab.v1.Scenario/Call). Runs until SIGINT, SIGTERM or SIGHUP. See\n" +
      doc_path("lab.md") + ", " + doc_path("grpc.md") + " and " + doc_path("idempotency.md") + ".");
  sub->footer(k_exit_statuses);
  add_scenario_argument(*sub, options->scenario);
  add_typed_option(*sub, "--port", options->port, "The port on 127.0.0.1; 0 lets the system choose",
                   "N")
      ->transform(whole_number_in(0, 65535))
      ->capture_default_str();
  add_typed_option(*sub, "--scale", options->scale,
                   "Multiply requests_per_second, clients, workers, queue_limit and the overload "
                   "threshold by X, in (0, 1]",
                   "X")
      ->capture_default_str();
  sub->add_flag("--wait-start", options->wait_start,
                "Keep the scenario's clock at 0 until POST /control/start");
  options->idempotency_option =
      add_typed_option(*sub, "--idempotency", options->idempotency,
                       "Where POST /charges keeps its idempotency keys and its ledger: "
                       "sqlite:PATH, postgres:URL, redis:URL, or off (no guard, the ledger in "
                       "memory); default: SQLite in a temporary directory removed at exit",
                       "SPEC");
  add_typed_option(*sub, "--fault-after-commit", options->fault_after_commit,
                   "With probability P, close the connection without answering after a charge "
                   "committed (the retried charge that happened), P in [0, 1]",
                   "P")
      ->transform(probability())
      ->capture_default_str();
  add_typed_option(*sub, "--principal-key-file", options->principal_key_file,
                   "The key (1..1024 bytes, a final newline dropped) under which bearer tokens are "
                   "hashed (HMAC-SHA-256) in the store and the ledger: the same file on every "
                   "replica and across restarts; default: SHA-256 of the token",
                   "FILE");
  add_typed_option(*sub, "--ledger-token-file", options->ledger_token_file,
                   "Turns GET /ledger on for the operator token in FILE (16..1024 characters of a "
                   "bearer token, a final newline dropped), sent as Authorization: Bearer TOKEN; "
                   "default: GET /ledger is off (404)",
                   "FILE");
  options->seed_option =
      add_typed_option(*sub, "--seed", options->seed,
                       "Seed of the --fault-after-commit draws (default: the scenario's seed)", "N")
          ->transform(whole_number());
  sub->add_flag("--grpc", options->grpc,
                "Serve the scenario's endpoint over gRPC too (stormguard.lab.v1.Scenario/Call, "
                "proto/stormguard/lab/v1/scenario.proto) on 127.0.0.1, port --grpc-port; GET "
                "/stats counts both");
  options->grpc_port_option =
      add_typed_option(*sub, "--grpc-port", options->grpc_port,
                       "The gRPC port on 127.0.0.1 (implies --grpc); 0 lets the system choose", "N")
          ->transform(whole_number_in(0, 65535))
          ->capture_default_str();
  options->defence_option = add_typed_option(
      *sub, "--defence", options->defence,
      defence_option_help("Server-side defences of this server", "or all"), "LIST");
  return {sub, [options] { return run(*options); }};
}

}  // namespace stormguard::cli
