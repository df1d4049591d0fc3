// SPDX-License-Identifier: Apache-2.0
// `stormguard lab payments` (lab_payments.hpp). Thin: the replicas are lab::server with the
// payments endpoint, the charges and the audit are lab::run_payments; this file reads the
// options, starts and stops the replicas, and prints the audit.
#include "lab_payments.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>

#include "app/payments_report.hpp"
#include "command.hpp"
#include "numbers.hpp"
#include "output.hpp"
#include "policy_file.hpp"
#include "progress.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/splitmix64.hpp"
#include "stormguard/idempotency.hpp"
#include "stormguard/lab/payments.hpp"
#include "stormguard/lab/payments_policy.hpp"
#include "stormguard/lab/server.hpp"
#include "stormguard/sim/scenario.hpp"
#include "temporary_store.hpp"
#include "usage.hpp"

namespace stormguard::cli {

namespace {

constexpr int k_max_replicas = 64;

void print_error(const std::string& message) { report_error("lab", message); }

bool typed(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

// A whole number in [1, max], its default shown in --help, in `group`.
CLI::Option* whole_in_range(CLI::Option* option, std::int64_t max, const std::string& group) {
  return option->transform(whole_number_in(1, static_cast<std::uint64_t>(max)))
      ->capture_default_str()
      ->group(group);
}

}  // namespace

void add_lab_payments_options(CLI::App& lab, lab_payments_options& o) {
  const std::string group = "lab payments (SCENARIO payments)";
  o.charges_option = add_typed_option(lab, "--charges", o.charges,
                                      "lab payments: logical charges to send, each with its own "
                                      "idempotency key (>= 1)",
                                      "N");
  whole_in_range(o.charges_option, 100'000'000, group);
  o.fault_option = add_typed_option(lab, "--fault-after-commit", o.fault_after_commit,
                                    "lab payments: with probability P a replica closes the "
                                    "connection without answering after a charge committed, P "
                                    "in [0, 1]",
                                    "P")
                       ->transform(probability())
                       ->capture_default_str()
                       ->group(group);
  o.idempotency_option =
      add_typed_option(lab, "--idempotency", o.idempotency,
                       "lab payments: the replicas' store: sqlite:PATH, postgres:URL, redis:URL, "
                       "or off (no guard, a ledger in each replica's memory); default: SQLite in "
                       "a temporary directory",
                       "SPEC|off")
          ->group(group);
  o.replicas_option = add_typed_option(lab, "--replicas", o.replicas,
                                       "lab payments: in-process server replicas, each opening "
                                       "its own store from --idempotency (1..64)",
                                       "N");
  whole_in_range(o.replicas_option, k_max_replicas, group);
  o.server_option = add_typed_option(lab, "--server", o.servers,
                                     "lab payments: drive this `stormguard serve` (its base URL, "
                                     "repeatable) instead of in-process replicas",
                                     "URL")
                        ->group(group);
  add_typed_option(lab, "--ledger-token-file", o.ledger_token_file,
                   "lab payments: the operator token of the --server servers' GET /ledger (their "
                   "serve --ledger-token-file); in-process replicas get a random one",
                   "FILE")
      ->group(group);
  o.concurrency_option = add_typed_option(lab, "--concurrency", o.concurrency,
                                          "lab payments: charges in flight at once (1..256)", "N");
  whole_in_range(o.concurrency_option, 256, group);
  o.seed_option = add_typed_option(lab, "--seed", o.seed,
                                   "lab payments: seed of the replicas' fault draws (replica r "
                                   "draws from a stream of SEED and r)",
                                   "N")
                      ->transform(whole_number())
                      ->capture_default_str()
                      ->group(group);
  o.max_failed_option = add_typed_option(lab, "--max-failed", o.max_failed,
                                         "lab payments: FAIL (exit 1) when more than N charges "
                                         "end without a 2xx (default: any number; the verdict "
                                         "line always says how many failed)",
                                         "N")
                            ->transform(whole_number_in(0, 100'000'000))
                            ->group(group);
}

std::string typed_payments_option(const lab_payments_options& o) {
  for (const CLI::Option* option :
       {o.charges_option, o.fault_option, o.idempotency_option, o.replicas_option, o.server_option,
        o.concurrency_option, o.seed_option, o.max_failed_option}) {
    if (typed(option)) return option->get_name();
  }
  return {};
}

namespace {

/// The server a --server URL names, for telling two URLs of one server apart: the scheme and
/// host in lowercase, "localhost" as 127.0.0.1, the default port filled in, a final '/'.
std::string same_server_key(std::string url) {
  if (!url.ends_with('/')) url += '/';
  const std::size_t host_at = url.find("://") + 3;
  std::size_t host_end =
      url.find_first_of(":/", url[host_at] == '[' ? url.find(']', host_at) : host_at);
  if (host_end == std::string::npos) host_end = url.size();
  std::string scheme = url.substr(0, host_at);
  std::string host = url.substr(host_at, host_end - host_at);
  for (std::string* part : {&scheme, &host}) {
    for (char& c : *part) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  if (const auto at = host.rfind('@'); at != std::string::npos) host.erase(0, at + 1);
  if (host == "localhost") host = "127.0.0.1";
  std::string rest = url.substr(host_end);
  if (!rest.starts_with(":")) rest = (scheme == "https://" ? ":443" : ":80") + rest;
  return scheme + host + rest;
}

/// --server: the options that set up in-process replicas are refused, and each URL checked.
int check_external(const lab_payments_options& o) {
  for (const CLI::Option* option :
       {o.fault_option, o.idempotency_option, o.replicas_option, o.seed_option}) {
    if (typed(option)) {
      print_error(option->get_name() +
                  " sets up in-process replicas; with --server the servers are already "
                  "running (give it to `stormguard serve`)");
      return exit_usage;
    }
  }
  std::vector<std::string> seen;
  for (const std::string& url : o.servers) {
    const std::string_view scheme = url.starts_with("https://") ? "https://" : "http://";
    if ((!url.starts_with("http://") && !url.starts_with("https://")) ||
        url.size() == scheme.size() || url[scheme.size()] == '/') {
      print_error("--server " + detail::quote_for_message(url) +
                  ": expected a base URL with a host, such as http://127.0.0.1:8080/");
      return exit_usage;
    }
    std::string base = same_server_key(url);
    if (std::find(seen.begin(), seen.end(), base) != seen.end()) {
      print_error("--server " + detail::quote_for_message(url) +
                  ": given twice (each server once: its counters would be read twice)");
      return exit_usage;
    }
    seen.push_back(std::move(base));
  }
  return exit_success;
}

/// --policy (at most one): every field of it that acts on a charge (lab/payments_policy.hpp)
/// replaces the default.
int apply_policy(const std::vector<std::string>& policies, lab::payments_run_options& run) {
  if (policies.size() > 1) {
    print_error("lab payments takes one --policy (the policy of every charge), got " +
                std::to_string(policies.size()));
    return exit_usage;
  }
  if (policies.empty()) return exit_success;
  try {
    run = lab::payments_options_for(load_one_policy("lab", policies.front()), std::move(run));
  } catch (const CLI::ValidationError& e) {
    print_error(e.what());
    return exit_usage;
  } catch (const std::invalid_argument& e) {
    print_error("--policy: " + printable_message(e.what()));
    return exit_usage;
  }
  return exit_success;
}

/// Several replicas on an in-memory SQLite database: each opens its own (SQLite's :memory: is
/// private to its connection), so they share no key and a retry on another replica charges
/// again — a FAIL that says nothing of the guard. Refused (a usage error) rather than run.
int check_private_memory_store(const lab_payments_options& o, const std::string& spec) {
  if (o.replicas < 2 || !spec.starts_with("sqlite:")) return exit_success;
  const std::string path = spec.substr(7);
  const bool memory =
      path == ":memory:" ||
      ((path.starts_with("file::memory:") || path.find("mode=memory") != std::string::npos) &&
       path.find("cache=shared") == std::string::npos);
  if (!memory) return exit_success;
  print_error(fmt::format(
      "--idempotency {} with --replicas {}: each replica opens its own in-memory database, so "
      "the replicas share no key and a retry on another replica charges again; give them one "
      "store (sqlite:PATH, postgres:URL or redis:URL), or --replicas 1",
      detail::quote_for_message(spec), o.replicas));
  return exit_usage;
}

/// The in-process replicas, each with its own store opened from `spec` and GET /ledger behind
/// run.ledger_token; their URLs into `run`.
int start_replicas(const lab_payments_options& o, const std::string& spec,
                   lab::payments_run_options& run,
                   std::vector<std::unique_ptr<lab::server>>& replicas) {
  const std::optional<sim::scenario> scenario = sim::builtin_scenario("no-incident");
  for (int r = 0; r < o.replicas; ++r) {
    lab::payments_options payments;
    payments.idempotency = spec;
    payments.ledger_token = run.ledger_token;
    payments.fault_after_commit = o.fault_after_commit;
    payments.seed =
        detail::splitmix64_mix(o.seed ^ detail::splitmix64_mix(static_cast<std::uint64_t>(r)));
    int status = exit_success;
    auto started =
        start_payments_server("lab", *scenario, {.port = 0, .payments = payments}, status);
    if (!started) return status;
    run.servers.push_back(started->url());
    replicas.push_back(std::move(started));
  }
  return exit_success;
}

}  // namespace

std::optional<std::string> read_secret_file(std::string_view command, std::string_view flag,
                                            const std::string& path, std::string_view what) {
  const auto fail = [&](const std::string& why) {
    report_error(command, std::string(flag) + " " + printable_message(path) + ": " + why);
    return std::nullopt;
  };
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return fail(errno_text(errno));
  std::string secret;
  char buffer[1025];
  std::size_t n = 0;
  while (secret.size() <= 1025 && (n = std::fread(buffer, 1, sizeof buffer, f)) > 0) {
    secret.append(buffer, n);
  }
  std::fclose(f);
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (secret.empty() || secret.size() > 1024) return fail(std::string(what));
  return secret;
}

std::optional<std::string> read_ledger_token_file(std::string_view command,
                                                  const std::string& path) {
  constexpr std::string_view form =
      "the token must be 16..1024 characters of A-Z a-z 0-9 - . _ ~ + / (then '=' padding), "
      "e.g. head -c 24 /dev/urandom | base64 > FILE";
  auto token = read_secret_file(command, "--ledger-token-file", path, form);
  if (token && !lab::is_ledger_token(*token)) {
    report_error(command,
                 "--ledger-token-file " + printable_message(path) + ": " + std::string(form));
    return std::nullopt;
  }
  return token;
}

std::unique_ptr<lab::server> start_payments_server(std::string_view command, const sim::scenario& s,
                                                   const lab::server_options& options,
                                                   int& status) {
  outcome<std::unique_ptr<lab::server>, std::string> started = failure{std::string()};
  try {
    started = lab::server::start(s, options);
  } catch (const std::invalid_argument& e) {
    report_error(command, "--idempotency: " + printable_message(e.what()) + "; or off (no guard)");
    status = exit_usage;
    return nullptr;
  }
  if (!started) {
    report_error(command, printable_message(started.error()));
    status = exit_failure;
    return nullptr;
  }
  return *std::move(started);
}

int run_lab_payments(const lab_payments_options& o, bool json,
                     const std::vector<std::string>& policies, const std::atomic<bool>* stop) {
  const bool external = !o.servers.empty();
  if (external) {
    if (const int rc = check_external(o); rc != exit_success) return rc;
  }
  lab::payments_run_options run;
  run.charges = o.charges;
  run.concurrency = o.concurrency;
  run.stop = stop;
  if (const int rc = apply_policy(policies, run); rc != exit_success) return rc;
  if (!o.ledger_token_file.empty()) {
    auto token = read_ledger_token_file("lab", o.ledger_token_file);
    if (!token) return exit_failure;
    run.ledger_token = *std::move(token);
  } else if (!external) {
    // The replicas' GET /ledger token: 244 random bits from the OS, read by this run only.
    run.ledger_token = make_idempotency_key() + make_idempotency_key();
  }
  // The servers: --server, else the replicas, each with its own store opened from one spec.
  std::optional<temporary_store> temporary;
  std::vector<std::unique_ptr<lab::server>> replicas;
  std::string spec = o.idempotency;
  if (external) {
    for (std::string url : o.servers) {
      if (!url.ends_with('/')) url += '/';
      run.servers.push_back(url);
    }
  } else {
    if (!typed(o.idempotency_option)) {
      auto made = temporary_store::create("lab");
      if (!made) {
        print_error(made.error());
        return exit_failure;
      }
      temporary.emplace(*std::move(made));
      spec = temporary->spec();
    }
    if (const int rc = check_private_memory_store(o, spec); rc != exit_success) return rc;
    if (const int rc = start_replicas(o, spec, run, replicas); rc != exit_success) return rc;
  }
  report_log("lab", fmt::format("payments: {} charges over {} {} ({}), policy: {}", o.charges,
                                run.servers.size(),
                                external ? (run.servers.size() == 1 ? "server" : "servers")
                                         : (run.servers.size() == 1 ? "replica" : "replicas"),
                                external ? "external"
                                         : (spec == "off" ? std::string("--idempotency off")
                                                          : printable_message(spec) +
                                                                (temporary ? " (temporary)" : "")),
                                lab::describe_payments_retry(run.retry, run.budget)));

  outcome<lab::payments_audit, std::string> audit = failure{std::string()};
  {
    progress_bar bar("payments");
    run.progress = bar.callback();
    run.on_first_unavailable = [](const std::string& what) { report_warning("lab", what); };
    try {
      audit = lab::run_payments(run);
    } catch (const std::bad_alloc&) {
      print_error("out of memory");
      return exit_failure;
    }
    if (auto cb = bar.callback()) cb(1, 1);  // clears the bar
  }
  for (auto& r : replicas) r->stop();
  if (!audit) {
    print_error(printable_message(audit.error()));
    return exit_failure;
  }
  if (!external) (*audit).fault_after_commit = o.fault_after_commit;
  if (typed(o.max_failed_option)) (*audit).max_failed = o.max_failed;
  if (!write_all(stdout, json ? lab::to_json(*audit) : lab::format_table(*audit))) {
    print_error("cannot write to standard output: " + errno_text(errno));
    return exit_failure;
  }
  return (*audit).passed() ? exit_success : exit_failure;
}

}  // namespace stormguard::cli
