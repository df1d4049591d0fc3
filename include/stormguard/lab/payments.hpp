// SPDX-License-Identifier: Apache-2.0
/// \file
/// The proof that retries do not double-charge — `stormguard lab
/// payments`. Sends charges with idempotency keys through stormguard's retrying HTTP client to the
/// payments endpoint of one or more servers (lab::server with server_options::payments, or
/// `stormguard serve` processes), then reads every server's ledger and audits it: per charge, how
/// many rows the ledger holds, against what the client was told.
///
/// \code{.cpp}
///  auto a = stormguard::lab::run_payments({.servers = {srv1->url(), srv2->url()},
///                                          .charges = 1000});
///  if (!a) { std::cerr << a.error() << '\n'; return 1; }
///  std::cout << stormguard::lab::format_table(*a);   // or to_json(*a)
///  return a->passed() ? 0 : 1;                         // 0 duplicates and 0 lost
/// \endcode
///
/// Each charge (docs/idempotency.md): its own key (stormguard::make_idempotency_key), a
/// principal ("Authorization: Bearer cus_RUN_N", 100 customers per run), a body
/// {"amount": A, "currency": C}; one logical request, attempted by stormguard::retrier with the
/// options' policy and no retry budget. Attempt n of charge i goes to servers[(i + n - 1) % size]:
/// with several servers a retry always lands on another replica than the attempt before it. Each
/// attempt is one http::client request (no retries of its own: the client cannot move a retry to
/// another URL), classified with the client's own rules (classify_charge_attempt): a dropped
/// connection (the request may have been processed) and a 409 (the key in progress elsewhere) are
/// retried, as a 503 is.
///
/// The audit counts only the rows of this run's keys (a shared PostgreSQL or Redis ledger may hold
/// other runs' rows: other_rows), each row once however many servers returned it (rows are
/// identified by their charge id).
#ifndef STORMGUARD_LAB_PAYMENTS_HPP
#define STORMGUARD_LAB_PAYMENTS_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "stormguard/budget_kinds.hpp"
#include "stormguard/classify.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"
#include "stormguard/http_classify.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/sim/parallel.hpp"

namespace stormguard::lab {

/// The policy lab payments uses unless told otherwise: 9 retries (10 attempts), full jitter from
/// 5 ms to 200 ms, Retry-After honoured up to 60 s. Enough attempts that a charge survives a
/// fault rate of 0.2 on every attempt (0.2^10 ≈ 1e-7), short enough that 10,000 charges take
/// seconds, and no retry budget: a 10 % budget cannot carry a 20 % fault rate.
[[nodiscard]] STORMGUARD_EXPORT retry_options default_payments_retry() noexcept;

/// How run_payments sends the charges.
struct payments_run_options {
  /// The servers' base URLs ("http://127.0.0.1:PORT/"); at least one.
  std::vector<std::string> servers;
  /// The servers' operator token for `GET /ledger` (payments_options::ledger_token), sent as
  /// `Authorization: Bearer TOKEN` when the audit reads their ledgers; empty: sent without one
  /// (a server without the token answers 404 and the audit fails, naming the server).
  std::string ledger_token{};
  /// Logical charges to send; >= 1.
  std::int64_t charges = 1000;
  /// Charges in flight at once (one thread and one http::client each); 1..256.
  int concurrency = 16;
  /// The retry policy of each charge.
  retry_options retry = default_payments_retry();
  /// The retry budget of the run, one instance shared by every charge (any kind of the core's
  /// list; none by default).
  budget_options budget{};
  /// The statuses retried besides 409 (classify_charge_attempt); default 429, 502, 503, 504.
  retryable_statuses statuses{};
  /// The time limit of one attempt; > 0.
  duration attempt_timeout = std::chrono::seconds(10);
  /// The time limit of each charge's call (all its attempts and waits), steady time, from the
  /// charge's start; > 0; duration::max() = none (the default). A retry whose delay would end
  /// past it is not made: the charge fails.
  duration deadline = duration::max();
  /// Called about every 100 ms from one of the sending threads (never two at once) with
  /// (charges ended, charges). Empty = no calls.
  sim::progress_callback progress{};
  /// Called once, from a sending thread, with a sentence for the user when the first attempt is
  /// answered 503 (a server's idempotency store unavailable: the charges wait and retry, and the
  /// run lasts as long as the outage or the retries). Empty = no call.
  std::function<void(const std::string&)> on_first_unavailable{};
  /// When set and it becomes true, the run ends within about 100 ms: no further charge starts,
  /// the attempts in flight and the backoff sleeps are cancelled (their charges count as
  /// failed; one whose row committed shows as unconfirmed), then the ledger is audited for the
  /// charges sent (each server read with a 1 s limit, no retry). Must outlive the run.
  const std::atomic<bool>* stop = nullptr;
  /// Give up (payments_audit::gave_up) after this many consecutive attempts answered 503 — the
  /// servers' idempotency store unavailable — with no other answer in between (any other status
  /// resets the count; a connection that fails neither counts nor resets): the run then ends as
  /// on `stop`. A store that stays down ends the run in seconds instead of every charge's
  /// retries (3,000 charges took 37 minutes). 0: never give up. Default 100.
  std::int64_t max_consecutive_unavailable = 100;
};

/// What the audit found.
struct payments_audit {
  std::int64_t charges = 0;    ///< logical charges sent (each with its own key)
  std::int64_t succeeded = 0;  ///< charges whose call ended with a 2xx
  std::int64_t failed = 0;     ///< charges whose call ended otherwise
  /// HTTP attempts, all charges together: the `POST /charges` requests the servers read (GET
  /// /stats "charges", after minus before), or client_attempts when a server does not say.
  std::int64_t attempts = 0;
  /// The attempts stormguard's retrier made. Fewer than `attempts` when libcurl resent a request
  /// by itself: it does so, once per connection, when a reused connection closes before any byte
  /// of the response (a keyed POST may be resent; http/client.hpp).
  std::int64_t client_attempts = 0;
  std::int64_t ledger_rows = 0;  ///< rows of this run's keys, each once
  std::int64_t duplicates = 0;   ///< rows beyond the first per key: double charges
  /// Charges the client saw succeed whose charge id (the 201's "id") is not in the ledger.
  std::int64_t lost = 0;
  /// Charges whose call failed but which are in the ledger: charged, and the client does not
  /// know (it may retry later with the same key and get the replay).
  std::int64_t unconfirmed = 0;
  std::int64_t replayed = 0;     ///< successes answered with `Idempotent-Replayed: true`
  std::int64_t conflicts = 0;    ///< attempts answered 409 (the key in progress)
  std::int64_t unavailable = 0;  ///< attempts answered 503
  /// Charges committed and then left unanswered by the servers' fault_after_commit (GET /stats
  /// "charges_dropped", after minus before); nullopt when a server does not say.
  std::optional<std::int64_t> dropped;
  std::int64_t no_response = 0;  ///< client attempts that got no response (closed, time-out)
  std::int64_t other_rows = 0;   ///< ledger rows of other keys (other runs), ignored
  std::string store;             ///< the first server's ledger "store" ("sqlite", "off", ...)
  int servers = 0;               ///< servers the charges were spread over
  /// The fault rate the servers were started with, when the caller knows it (set by the caller:
  /// run_payments does not); shown in the table and the JSON.
  std::optional<double> fault_after_commit;
  std::string policy;  ///< the policy, described ("9 retries, full jitter 5ms..200ms, no budget")
  duration elapsed{};  ///< from the first charge sent to the last ended (the audit excluded)
  bool interrupted = false;  ///< payments_run_options::stop ended the run early
  /// The run gave up after payments_run_options::max_consecutive_unavailable consecutive 503s
  /// (the store stayed down); the run does not pass.
  bool gave_up = false;
  /// A server restarted between the run's start and its end: its GET /stats "instance" changed
  /// or its counters went back. `attempts` is then client_attempts and `dropped` unknown, never a
  /// difference that could be negative (or too small: a restarted server's counts begin at 0).
  bool counters_reset = false;
  /// The most charges that may fail (end without a 2xx) for the run to pass; set by the caller
  /// (`lab payments --max-failed N`); nullopt: any number.
  std::optional<std::int64_t> max_failed;

  /// The verdict: no double charge, no charge lost, at most max_failed charges failed, and the
  /// run did not give up.
  [[nodiscard]] bool passed() const noexcept {
    return duplicates == 0 && lost == 0 && (!max_failed || failed <= *max_failed) && !gave_up;
  }
};

/// The verdict on one attempt of a charge (a POST with an Idempotency-Key), for stormguard's
/// retrier: the rules of stormguard's HTTP clients (http_classify.hpp). `status` is the
/// response's status, or nullopt when there was none (then `phase` says whether the request may
/// have reached the server, or is empty for a failure that is not a transport one);
/// `retry_after` is the parsed Retry-After, if any.
///  - a status: classify_http_status(status, "POST", true, retry_after, statuses) — a 409 (the
///    key in progress at the server, draft-ietf-httpapi-idempotency-key-header-07 §2.7) is
///    retried after its Retry-After whatever `statuses` holds, as the statuses in it are;
///  - no response: classify_transport_failure(phase, "POST", true) — a connection closed after
///    the request was sent is retried, since the key makes the repeat safe; stop without a phase.
///
/// Pure; thread-safe.
[[nodiscard]] STORMGUARD_EXPORT classification classify_charge_attempt(
    std::optional<int> status, std::optional<transport_phase> phase,
    std::optional<duration> retry_after, const retryable_statuses& statuses = {});

/// Sends the charges and audits the ledgers (see the file comment). Blocks until done. An error
/// when an HTTP client cannot be set up or a server's `GET /ledger` cannot be read or parsed
/// (naming the server). Throws std::invalid_argument naming the field for options out of range
/// (no server, charges < 1, concurrency outside 1..256, a bad policy), std::bad_alloc.
[[nodiscard]] STORMGUARD_EXPORT outcome<payments_audit, std::string> run_payments(
    const payments_run_options& options);

/// One line describing a retry policy: "9 retries, full jitter 5ms..200ms, Retry-After up to
/// 1m, no retry budget" (or "a quota retry budget").
[[nodiscard]] STORMGUARD_EXPORT std::string describe_payments_retry(
    const retry_options& retry, const budget_options& budget = no_budget{});

}  // namespace stormguard::lab

#endif  // STORMGUARD_LAB_PAYMENTS_HPP
