// stormguard/guard/guard.hpp: the server half of "no double charge" — a guard in front of a
// non-idempotent handler (POST /charges) that runs it at most once per idempotency key, and
// answers every repeat of the request with the first response.
//
//   auto store = stormguard::guard::open_store("sqlite:keys.db");        // store.hpp
//   stormguard::guard::idempotency_guard g(*store);
//   stormguard::guard::request req{.principal = user_id, .method = "POST", .target = "/charges",
//                                  .body = body, .idempotency_key = header_or_nullopt};
//   stormguard::guard::result r = g.handle(req, [&](stormguard::guard::transaction& tx) {
//     tx.execute("INSERT INTO ledger (k, amount) VALUES ($1, $2)", {key, amount});
//     return stormguard::guard::stored_response{201, {{"Content-Type", "application/json"}}, "{}"};
//   });
//   send(r.response);   // status, headers, body; r.decision says why
//
// The protocol (draft-ietf-httpapi-idempotency-key-header-07, 15 October 2025, §2 and §2.7; and
// Stripe's API reference, "Idempotent requests", https://docs.stripe.com/api/idempotent_requests):
//   - no Idempotency-Key where one is required                 → 400 (decision missing_key)
//   - a key that is not a valid key (syntax, length, non-ASCII) → 400 (bad_key)
//   - first request with key K from principal P                → the handler runs; its writes
//     through the transaction and its response commit together (store::complete) → ran
//   - K again, same fingerprint (method, target, body), done    → the stored response, with
//     `Idempotent-Replayed: true` added, the handler not run    → replayed
//   - K again while the first is in progress                   → 409 + Retry-After (the lease
//     left, whole seconds rounded up, at least 1)               → in_progress
//   - K again with another fingerprint (in progress or done)    → 422 (mismatch)
//   - the store is down                                         → 503 + Retry-After
//     (options.unavailable_retry_after), the handler not run    → store_unavailable
//   - the first handler's lease expired (its process died) → the next request takes over and
//     runs the handler (ran, took_over); the first, if it still finishes, cannot commit
//     (store::complete returns lease_lost → 409, its writes discarded)
//   - records expire after options.ttl (24 h); a key seen again after that is new.
// Keys are scoped per principal: P2 sending P1's key gets its own record, never P1's response.
//
// Thread-safety: handle() may be called from any number of threads at once (the store
// serializes); the guard's own state is immutable after construction, but for an atomic counter.
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
#include "stormguard/guard/store.hpp"
#include "stormguard/outcome.hpp"

namespace stormguard::guard {

/// The response header that marks a replayed response (Stripe's name), value "true".
inline constexpr std::string_view replayed_header = "Idempotent-Replayed";

/// The longest principal accepted, in bytes.
inline constexpr std::size_t max_principal_length = 255;

/// SHA-256 (OpenSSL libcrypto, FIPS 180-4) of the request's method, target and body, each
/// preceded by its length as 8 bytes big-endian (so ("AB","C") and ("A","BC") differ). Throws
/// std::runtime_error when libcrypto fails (it does not for in-memory input).
[[nodiscard]] fingerprint fingerprint_of(std::string_view method, std::string_view target,
                                         std::string_view body);

/// The key in an Idempotency-Key field value, or a message saying what is wrong (naming the
/// field and quoting the value). Accepts the draft's form, an sf-string (RFC 8941 §3.3.3:
/// DQUOTE, printable ASCII with '"' and '\' escaped by '\', DQUOTE), and Stripe's bare form
/// (the value as is). Leading and trailing spaces and tabs around the value are ignored (RFC 9110
/// §5.5). The key must then pass validate_idempotency_key (idempotency.hpp: 1..255 characters of
/// printable ASCII). Never throws except std::bad_alloc.
[[nodiscard]] outcome<std::string, std::string> parse_idempotency_key(std::string_view field_value);

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
[[nodiscard]] std::string_view to_string(decision d) noexcept;

/// The guard's answer.
struct result {
  stored_response response;  ///< what to send
  /// What the guard did: ran the handler, replayed a stored response, or refused (see decision).
  guard::decision decision = decision::ran;
  bool took_over = false;  ///< ran after taking over an expired lease
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
  /// The clock whose wall_now() stamps leases and expiries; nullptr: the system clock. Must
  /// outlive the guard.
  const clock* time = nullptr;
};

/// The guard (see the file comment; `guard` is the namespace, so the class is
/// idempotency_guard). Holds a reference to its store, which must outlive it.
class idempotency_guard {
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

 private:
  guard::store& store_;
  guard_options options_;
  /// Lease tokens: a random (v4 UUID) prefix drawn once from the OS CSPRNG, then a counter — unique
  /// across processes and replicas without a system call per request. A token fences the
  /// holder's commit; it needs to be unique, not secret (it never leaves the store).
  std::string token_prefix_;
  std::atomic<std::uint64_t> token_counter_{0};
};

}  // namespace stormguard::guard

#endif  // STORMGUARD_GUARD_GUARD_HPP
