// SPDX-License-Identifier: Apache-2.0
/// \file
/// The server half of "no double charge" — a guard in front of a
/// non-idempotent handler (POST /charges) that runs it at most once per idempotency key, and
/// answers every repeat of the request with the first response.
///
/// \code{.cpp}
///  auto store = stormguard::guard::open_store("sqlite:keys.db");        // store.hpp
///  stormguard::guard::idempotency_guard g(*store);
///  stormguard::guard::request req{.principal = user_id, .method = "POST", .target = "/charges",
///                                 .body = body, .idempotency_key = header_or_nullopt};
///  stormguard::guard::result r = g.handle(req, [&](stormguard::guard::transaction& tx) {
///    tx.execute("INSERT INTO ledger (k, amount) VALUES ($1, $2)", {key, amount});
///    return stormguard::guard::stored_response{201, {{"Content-Type", "application/json"}}, "{}"};
///  });
///  send(r.response);   // status, headers, body; r.decision says why
/// \endcode
///
/// The protocol (draft-ietf-httpapi-idempotency-key-header-07, 15 October 2025, §2 and §2.7; and
/// Stripe's API reference, "Idempotent requests", https://docs.stripe.com/api/idempotent_requests):
/// \code{.unparsed}
///  - no Idempotency-Key where one is required                 → 400 (decision missing_key)
///  - a key that is not a valid key (syntax, length, non-ASCII) → 400 (bad_key)
///  - first request with key K from principal P                → the handler runs; its writes
///    through the transaction and its response commit together (store::complete) → ran
///  - K again, same fingerprint (method, target, body), done    → the stored response, with
///    `Idempotent-Replayed: true` added, the handler not run    → replayed
///  - K again while the first is in progress                   → 409 + Retry-After (the lease
///    left, whole seconds rounded up, at least 1)               → in_progress
///  - K again with another fingerprint (in progress or done)    → 422 (mismatch)
///  - the store is down                                         → 503 + Retry-After
///    (options.unavailable_retry_after), the handler not run    → store_unavailable
///  - the first handler's lease expired (its process died) → the next request takes over and
///    runs the handler (ran, took_over); the first, if it still finishes, cannot commit
///    (store::complete returns lease_lost → 409, its writes discarded)
///  - records expire after options.ttl (24 h); a key seen again after that is new.
/// \endcode
/// Keys are scoped per principal: P2 sending P1's key gets its own record, never P1's response.
/// The principal is never stored: records hold principal_digest(principal, options.principal_key)
/// ("sg1:" and HMAC-SHA-256 under a key the whole fleet shares, or SHA-256 without one), so a
/// bearer token used as the principal never rests in the store nor shows in an audit of it, and
/// a digest read from an audit, sent as a principal, names a record of its own, never the one it
/// was read from.
///
/// A store that is down is not asked again for every request: after options.trip_after_failures
/// store failures in a row the guard answers 503 at once (the handler not run, the store not
/// called) until options.probe_interval has passed; then one request goes through as a probe
/// (the others still fail fast): its success closes the short circuit, its failure opens it
/// again for another interval. The store's error text never reaches the client (a generic
/// detail): it goes, redacted, to the observer (guard_observer::on_store_error).
///
/// Thread-safety: handle() may be called from any number of threads at once (the store
/// serializes); the guard's own state is immutable after construction, but for an atomic counter
/// and the short circuit's state (one mutex, held for a few instructions, never during a store
/// call or an observer's callback).
#ifndef STORMGUARD_GUARD_GUARD_HPP
#define STORMGUARD_GUARD_GUARD_HPP

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/export.hpp"
#include "stormguard/guard/store.hpp"
#include "stormguard/outcome.hpp"

namespace stormguard::guard {

/// The response header that marks a replayed response (Stripe's name), value "true".
inline constexpr std::string_view replayed_header = "Idempotent-Replayed";

/// The longest principal accepted, in bytes.
inline constexpr std::size_t max_principal_length = 255;

/// The first bytes of every principal_digest: "sg1:". A ':' is outside a bearer token's alphabet
/// (RFC 6750 §2.1 b64token), so a token can never be sent as a stored principal.
inline constexpr std::string_view principal_digest_prefix = "sg1:";

/// The principal as the stores keep it: principal_digest_prefix, then 64 lowercase hex digits of
/// HMAC-SHA-256(key, "stormguard principal v1" NUL principal) (RFC 2104, OpenSSL libcrypto) when
/// `key` is not empty, else of SHA-256 of the same message. The domain string keeps the digest
/// apart from any other use of the key; the prefix keeps it apart from any principal (see
/// has_principal_digest_form). The key must be the same on every replica and across restarts
/// (a retry after a restart, or to another replica, must find its record). Throws
/// std::runtime_error when libcrypto fails.
[[nodiscard]] STORMGUARD_EXPORT std::string principal_digest(std::string_view principal,
                                                             std::string_view key);

/// The form stores held before principal_digest had a prefix and a domain (builds of this
/// version before the change): 64 lowercase hex digits of HMAC-SHA-256(key, principal), or of
/// SHA-256(principal) without a key. Only for finding such records
/// (guard_options::find_unprefixed_digest_records). Throws std::runtime_error when libcrypto
/// fails.
[[nodiscard]] STORMGUARD_EXPORT std::string unprefixed_principal_digest(std::string_view principal,
                                                                        std::string_view key);

/// Whether `principal` has the form of a stored principal of any version: it begins with
/// principal_digest_prefix (in any case), or it is 64 hex digits (in any case). Such a principal
/// is never looked up as is (guard_options::find_unhashed_records): it could name another
/// principal's records.
[[nodiscard]] STORMGUARD_EXPORT bool has_principal_digest_form(std::string_view principal) noexcept;

/// SHA-256 (OpenSSL libcrypto, FIPS 180-4) of the request's method, target and body, each
/// preceded by its length as 8 bytes big-endian (so ("AB","C") and ("A","BC") differ). Throws
/// std::runtime_error when libcrypto fails (it does not for in-memory input).
[[nodiscard]] STORMGUARD_EXPORT fingerprint fingerprint_of(std::string_view method,
                                                           std::string_view target,
                                                           std::string_view body);

/// The key in an Idempotency-Key field value, or a message saying what is wrong (naming the
/// field and quoting the value). Accepts the draft's form, an sf-string (RFC 8941 §3.3.3:
/// DQUOTE, printable ASCII with '"' and '\' escaped by '\', DQUOTE), and Stripe's bare form
/// (the value as is, without a ',': "a, b" is two keys, 400). Leading and trailing spaces and
/// tabs around the value are ignored (RFC 9110 §5.5). The key must then pass
/// validate_idempotency_key (idempotency.hpp: 1..255 characters of printable ASCII). Never throws
/// except std::bad_alloc.
[[nodiscard]] STORMGUARD_EXPORT outcome<std::string, std::string> parse_idempotency_key(
    std::string_view field_value);

/// A request as the guard sees it. The views must stay valid during handle().
struct request {
  /// Who sends it (the authenticated identity: an API key's id, a user id); keys are scoped per
  /// principal. 0..255 bytes (longer: 400 bad_principal); "" is one anonymous principal.
  std::string_view principal;
  std::string_view method;  ///< as received, e.g. "POST"
  std::string_view target;  ///< the request target, e.g. "/charges?currency=eur"
  std::string_view body;    ///< the body as received (hashed, never stored)
  /// The Idempotency-Key field's value as received; nullopt when the request has none. A request
  /// that repeats the field should be given as the values joined with ", " (RFC 9110 §5.3),
  /// which parse_idempotency_key rejects (400).
  std::optional<std::string_view> idempotency_key;
  /// When the request was received, by the guard's clock (guard_options::time, now()); nullopt:
  /// unknown. A request that arrived before a store call that timed out had ended (it waited
  /// behind that call, in the caller's queue) is answered 503 + Retry-After at once, without
  /// calling the store (decision store_unavailable): it would wait for a timeout of its own.
  /// Such answers do not count toward guard_options::trip_after_failures.
  std::optional<time_point> arrived{};
};

/// Why the guard answered as it did (result::decision).
enum class decision : std::uint8_t {
  ran,                 ///< the handler ran and its response committed (200-599 as it returned)
  replayed,            ///< the stored response of an earlier run
  passed_through,      ///< no key and options.require_key false: the handler ran unguarded
  missing_key,         ///< 400
  bad_key,             ///< 400
  bad_principal,       ///< 400
  in_progress,         ///< 409 + Retry-After
  lease_lost,          ///< 409 + Retry-After 1: our lease was taken over; nothing committed
  mismatch,            ///< 422
  response_too_large,  ///< 500: the handler's response exceeds options.max_response_bytes;
                       ///< nothing committed, the record released
  store_unavailable,   ///< 503 + Retry-After
};

/// "ran", "replayed", ... (the enumerator's name).
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(decision d) noexcept;

/// The guard's answer.
struct result {
  stored_response response;  ///< what to send
  /// What the guard did: ran the handler, replayed a stored response, or refused (see decision).
  guard::decision decision = decision::ran;
  bool took_over = false;  ///< ran after taking over an expired lease
};

/// The store call a guard_observer hears about.
enum class store_operation : std::uint8_t {
  begin,     ///< store::begin
  find,      ///< store::find (a record written in an older form: guard_options::find_*)
  complete,  ///< store::complete (the handler runs inside it: its time is included)
  release,   ///< store::release
};

/// "begin", "find", "complete" or "release".
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(store_operation op) noexcept;

/// Why a store call failed, read from its driver's message (classify_store_failure): a label
/// for metrics and logs that names the operator's next step without the message's details.
enum class store_failure_cause : std::uint8_t {
  unreachable,      ///< nothing answers: connection refused, host unknown, no route, cannot open
  access_denied,    ///< authentication failed (a changed password), or permission denied
  full,             ///< the store is full: disk full (ENOSPC, SQLITE_FULL), Redis out of memory
  timeout,          ///< no answer in time (a hung or stopped server)
  connection_lost,  ///< the connection broke during the call (server closed it, reset, EOF)
  other,            ///< anything else
};

/// "unreachable", "access_denied", "full", "timeout", "connection_lost" or "other".
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(store_failure_cause c) noexcept;

/// The cause of a store_error from its message (the SQLite, libpq and hiredis texts the stores
/// put in it; case-insensitive). Checked in the order of the enumerators after `full`, which
/// comes first: full, access_denied, timeout, unreachable, connection_lost, else other.
[[nodiscard]] STORMGUARD_EXPORT store_failure_cause
classify_store_failure(std::string_view message) noexcept;

/// What a guard reports as it works: each decision, each store call's latency, the cause of each
/// store failure (redacted: no passwords or tokens) and the short circuit's state — for metrics and
/// logs (the client only ever sees a generic 503). Every member has an empty default. Called on
/// the thread of handle(), possibly from many threads at once: an implementation must be
/// thread-safe and quick, and must not throw (the members are noexcept).
class STORMGUARD_EXPORT guard_observer {
 public:
  virtual ~guard_observer() = default;
  /// Every answer of handle(): `d` (ran: the key acquired and the handler committed; replayed;
  /// in_progress: a conflict; mismatch; store_unavailable: a store error or the short circuit).
  virtual void on_decision(decision d, bool took_over) noexcept {
    (void)d;
    (void)took_over;
  }
  /// Every store call that returned or threw: how long it took by the guard's clock (now()), and
  /// whether it failed with store_error (statement_error, the handler's, does not count).
  virtual void on_store_call(store_operation op, duration latency, bool failed) noexcept {
    (void)op;
    (void)latency;
    (void)failed;
  }
  /// A store failure's cause, redacted (the store's driver message: host, port, libpq's text).
  virtual void on_store_error(store_operation op, std::string_view message) noexcept {
    (void)op;
    (void)message;
  }
  /// The short circuit opened (`down` true: requests fail fast) or closed (the probe succeeded).
  virtual void on_store_state(bool down) noexcept { (void)down; }
};

/// How a guard behaves. Validated at construction (std::invalid_argument naming the field).
struct guard_options {
  /// Whether a request without an Idempotency-Key is refused (400, the draft's "the resource
  /// requires it") or run unguarded (passed_through).
  bool require_key = true;
  /// How long a request holds its key while the handler runs; a holder that has not finished by
  /// then (its process died) may be taken over. > 0 and <= ttl. Longer than the slowest handler.
  duration lease = std::chrono::seconds(30);
  /// How long a record lives (Stripe: 24 hours). >= 1 s, at most 366 days.
  duration ttl = std::chrono::hours(24);
  /// The largest stored response: status line aside, the body plus the kept headers' names and
  /// values, in bytes. A larger response is not stored: nothing commits, the record is
  /// released and the guard answers 500 (response_too_large). 1..64 MiB; default 1 MiB.
  std::size_t max_response_bytes = std::size_t{1} << 20;
  /// The response headers stored and replayed (compared case-insensitively); others are dropped.
  std::vector<std::string> kept_headers = {"Content-Type", "Location"};
  /// The Retry-After sent with 503 when the store is down. >= 1 s (whole seconds, rounded up).
  duration unavailable_retry_after = std::chrono::seconds(1);
  /// The clock whose wall_now() stamps leases and expiries, and whose now() times the short
  /// circuit and the store calls; nullptr: the system clock. Must outlive the guard.
  const clock* time = nullptr;
  /// The key of principal_digest (any bytes, e.g. 32 random bytes read from a file): the same on
  /// every replica and across restarts. Empty: SHA-256 of the principal (a token can then be
  /// tested against a stolen record by whoever holds it, but not read from it).
  std::string principal_key{};
  /// Whether a key seen for the first time under its stored principal is also looked up under
  /// unprefixed_principal_digest(principal, principal_key), where builds before the prefixed
  /// form wrote it: a retry that straddles the upgrade is then replayed, not run twice. Safe on
  /// any store: that digest is computed from the principal, so no principal can aim it at another
  /// principal's record. One extra read per new key; turn it off once every record written
  /// before the upgrade has expired (one ttl later).
  bool find_unprefixed_digest_records = true;
  /// A one-time migration, off unless the operator asks for it: whether a key seen for the first
  /// time is also looked up under the principal as is (store::find), where versions that did not
  /// hash principals wrote it. Never for a principal of has_principal_digest_form (it could equal
  /// another principal's stored digest and be answered with that principal's response). One
  /// extra read per new key; turn it off one ttl after the upgrade.
  bool find_unhashed_records = false;
  /// Store failures in a row (store_error from begin or complete) after which the store is held
  /// down and requests fail fast (503 without calling it). 1..1000; default 3.
  std::size_t trip_after_failures = 3;
  /// How long the store is held down before one request probes it. 100ms..1h; default 1s. The
  /// fail-fast 503's Retry-After is the longer of this interval's rest and
  /// unavailable_retry_after.
  duration probe_interval = std::chrono::seconds(1);
  /// Told of decisions, store calls and store errors; nullptr: nobody. Must outlive the guard.
  guard_observer* observer = nullptr;
};

/// The guard (see the file comment; `guard` is the namespace, so the class is
/// idempotency_guard). Holds a reference to its store, which must outlive it.
///
/// Example (tests/reference_guard_examples_test.cpp, run by the tests):
/// \snippet reference_guard_examples_test.cpp idempotency_guard
class STORMGUARD_EXPORT idempotency_guard {
 public:
  /// The handler: runs the operation, writing through the transaction, and returns the response.
  /// It may throw: nothing commits, the record is released (the client may retry at once) and
  /// the exception propagates out of handle(). A failed SQL statement of the handler
  /// (statement_error) is treated the same way, even when the handler catches it and returns.
  using handler = std::function<stored_response(transaction&)>;

  /// Throws std::invalid_argument naming the field of `options` that is out of range.
  explicit idempotency_guard(guard::store& s, guard_options options = {});

  /// Runs `h` at most once per (principal, key) and answers as the file comment says. Never
  /// throws for a bad request or a store failure (those are decisions); rethrows what `h` throws
  /// (after releasing the record, when the store is reachable), and std::bad_alloc.
  [[nodiscard]] result handle(const request& req, const handler& h);

  /// The options the guard was built with.
  [[nodiscard]] const guard_options& options() const noexcept { return options_; }
  /// The store the guard keeps its records in.
  [[nodiscard]] guard::store& backing_store() const noexcept { return store_; }

  /// principal_digest(principal, options().principal_key): what the records hold, and what a
  /// server should show (an audit, a ledger) instead of the principal.
  [[nodiscard]] std::string stored_principal(std::string_view principal) const;

  /// Whether the short circuit is open (the store held down; requests fail fast).
  [[nodiscard]] bool store_held_down() const;

 private:
  struct circuit_state {
    std::size_t failures = 0;  ///< store failures in a row
    bool down = false;
    time_point probe_at{};  ///< down: when the next probe may go
    bool probing = false;   ///< down: a probe is in flight
    /// The end of the last store call that timed out (store_failure_cause::timeout), until a
    /// call succeeds: requests that arrived before it fail at once (request::arrived).
    std::optional<time_point> timed_out_at;
  };
  /// Whether this request may call the store (closed, or it becomes the probe); else the time
  /// left before the next probe.
  std::optional<duration> admit();
  /// A store call's outcome for the short circuit (a probe's, or any other); `timed_out`: a
  /// failure whose cause is a timeout, ended at `now`.
  void record(bool failed, bool timed_out = false);
  /// Whether a request that arrived at `arrived` waited behind a store call that timed out.
  [[nodiscard]] bool queued_behind_timeout(time_point arrived) const;
  /// Runs a store call, timing it and reporting it; store_error propagates.
  template <class F>
  auto call_store(store_operation op, F&& f);
  /// Tells the observer of the decision; returns `r`.
  result finish(result r) const;
  /// 503 after a store failure (the cause went to the observer in call_store).
  result unavailable();
  /// Deletes our in-progress record after a failure that committed nothing; when the store
  /// fails too, the lease expires by itself.
  void release_quietly(const record_key& id, const std::string& token) noexcept;
  result run_acquired(const record_key& id, const std::string& token, bool took_over,
                      const handler& h);
  std::optional<result> find_old_record(const request& req, const std::string& key,
                                        const fingerprint& fp, const record_key& hashed,
                                        const std::string& token);

  guard::store& store_;
  guard_options options_;
  mutable stormguard::detail::mutex circuit_mutex_;
  circuit_state circuit_ STORMGUARD_GUARDED_BY(circuit_mutex_);
  /// Lease tokens: a random (v4 UUID) prefix drawn once from the OS CSPRNG, then a counter — unique
  /// across processes and replicas without a system call per request. A token fences the
  /// holder's commit; it needs to be unique, not secret (it never leaves the store).
  std::string token_prefix_;
  std::atomic<std::uint64_t> token_counter_{0};
};

}  // namespace stormguard::guard

#endif  // STORMGUARD_GUARD_GUARD_HPP
