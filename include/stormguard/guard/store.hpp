// SPDX-License-Identifier: Apache-2.0
/// \file
/// Where the server-side idempotency guard (guard.hpp) remembers the
/// idempotency keys it has seen — one interface, three stores: SQLite (embedded, the default),
/// PostgreSQL and Redis (shared by a fleet of replicas). docs/idempotency.md compares them.
///
/// \code{.cpp}
///  std::unique_ptr<stormguard::guard::store> s = stormguard::guard::open_store("sqlite:keys.db");
///  s->query("CREATE TABLE IF NOT EXISTS ledger (k TEXT, amount INTEGER)", {});
///  stormguard::guard::idempotency_guard g(*s);   // guard.hpp
/// \endcode
///
/// A record is identified by (principal, key) and holds: the request's fingerprint, a state
/// (in progress under a lease token, or completed with the stored response), the lease's expiry and
/// the record's expiry (all times are the guard's `stormguard::clock::wall_now()`, which the
/// replicas of a fleet must agree on to well within a lease: NTP, docs/idempotency.md).
///
/// Beside its records a store keeps their schema version (the layout's version, 1 so far): SQL
/// stores in the table `<table>_schema`, Redis in the key `<prefix>:schema`. Opening a store
/// writes version 1 when it holds none (a store written before versions were kept has that
/// layout) and throws store_error naming both versions when it holds another.
///
/// Thread-safety: every member of a store may be called from any number of threads at once (each
/// store keeps a pool of connections). Errors: a store that cannot be reached, or a statement that
/// fails, throws store_error (the guard answers 503 with a Retry-After); bad arguments throw
/// std::invalid_argument naming the field and the value.
#ifndef STORMGUARD_GUARD_STORE_HPP
#define STORMGUARD_GUARD_STORE_HPP

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/export.hpp"

namespace stormguard::guard {

/// Which store a `store` is (the language of transaction::execute and store::query).
enum class store_kind : std::uint8_t {
  sqlite,    ///< SQL (SQLite 3 dialect), parameters $1..$N
  postgres,  ///< SQL (PostgreSQL dialect), parameters $1..$N
  redis,     ///< Redis commands: the statement is the command's name, the parameters its arguments
};

/// "sqlite", "postgres" or "redis".
[[nodiscard]] STORMGUARD_EXPORT std::string_view to_string(store_kind kind) noexcept;

/// A store could not be reached, or a statement failed in it. what() names the store and the
/// reason (the driver's message, passwords and tokens redacted). The guard turns
/// it into 503 + Retry-After with a generic detail (the message goes to its observer, never to
/// the client) and never runs the handler after a failed begin.
class STORMGUARD_EXPORT store_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A statement of the handler failed in a SQL store (a syntax error, a constraint violated), or
/// the Redis store refused a queued command before running any (an unknown command, a wrong
/// number of arguments, a command that cannot run in a script; on a Redis Cluster a key of
/// another hash slot, or the record's own key): nothing was written, so — unlike a plain
/// store_error, after which a commit's outcome may be unknown — the guard releases the key at
/// once (as when the handler throws) and rethrows, and the store counts as having answered (the
/// guard's short circuit is not moved). what() names the store, the statement and the reason. A
/// Redis queued command that fails while running is a plain store_error: the commands before it
/// stay written (see docs/idempotency.md).
class STORMGUARD_EXPORT statement_error : public store_error {
 public:
  using store_error::store_error;
};

/// SHA-256 of a request (guard::fingerprint_of), 32 bytes.
using fingerprint = std::array<std::uint8_t, 32>;

/// A response as the guard stores and replays it.
struct stored_response {
  int status = 200;                                          ///< 100..599
  std::vector<std::pair<std::string, std::string>> headers;  ///< name (as given), value
  /// The response body, bytes as sent.
  std::string body;
  friend bool operator==(const stored_response&, const stored_response&) = default;
};

/// One result row of transaction::execute / store::query: every column as text, SQL NULL as
/// std::nullopt (SQL stores); one element per row (Redis: see store::query).
using row = std::vector<std::optional<std::string>>;

/// What a handler may write through while the guard completes its record: its writes commit
/// together with the stored response, or not at all (see store::complete for each store's
/// guarantee). Not thread-safe: one handler, one thread.
class STORMGUARD_EXPORT transaction {
 public:
  virtual ~transaction() = default;
  /// The store's kind: which language execute() takes.
  [[nodiscard]] virtual store_kind kind() const noexcept = 0;
  /// SQL stores: runs `statement` (one SQL statement, parameters written $1..$N, each bound as
  /// text) as a prepared statement (prepared once per connection, cached by its text) inside the
  /// transaction that also stores the response; returns its rows. Redis: queues the command
  /// (`statement` is its name, e.g. "RPUSH", `params` its arguments) to run in the same atomic
  /// Lua script that stores the response; returns no rows (the command has not run yet). SELECT
  /// is refused (std::invalid_argument): it would move the record's own writes.
  /// Throws statement_error when the statement fails in a SQL store (the whole transaction then
  /// rolls back), store_error when the connection fails, std::invalid_argument when the
  /// parameters do not match the statement ($N missing, a NUL byte in a PostgreSQL text value)
  /// or a Redis command is refused (see redis_store).
  virtual std::vector<row> execute(std::string_view statement,
                                   std::span<const std::string_view> params) = 0;
  /// execute() with the parameters in braces: tx.execute("INSERT ... VALUES ($1, $2)", {a, b}).
  std::vector<row> execute(std::string_view statement,
                           std::initializer_list<std::string_view> params) {
    return execute(statement, std::span<const std::string_view>(params.begin(), params.size()));
  }
};

/// What store::begin found.
enum class begin_outcome : std::uint8_t {
  acquired,     ///< no live record (none, expired, or an in-progress one whose lease had expired:
                ///< `took_over`): ours now, in progress under our token
  in_progress,  ///< another request holds a live lease (`lease_expires`, `fingerprint`)
  completed,    ///< completed: `response` holds the stored response, `fingerprint` its request's
};

/// The result of store::begin.
struct begin_result {
  /// What begin found or did (see begin_outcome).
  begin_outcome outcome = begin_outcome::acquired;
  bool took_over = false;                   ///< acquired by taking over an expired lease
  guard::fingerprint fingerprint{};         ///< of the record found (in_progress, completed)
  wall_time_point lease_expires{};          ///< in_progress: when its lease expires
  std::optional<stored_response> response;  ///< completed: the stored response
};

/// What store::complete did.
enum class complete_outcome : std::uint8_t {
  completed,   ///< the handler's writes and the response committed together
  lease_lost,  ///< the record was no longer in progress under our token (taken over or released):
               ///< nothing committed (SQL: rolled back; Redis: the queued commands not run)
};

/// The identity of a record: keys are scoped per principal, so one principal can never read
/// another's record. Both at most 255 bytes, any bytes (stores keep them as given).
struct record_key {
  /// Who sent the request (e.g. an authenticated user or API key id).
  std::string_view principal;
  /// The Idempotency-Key, as received.
  std::string_view key;
};

/// The interface of an idempotency store (see the file comment). Implementations:
/// sqlite_store, postgres_store, redis_store (stores.hpp), or open_store().
class STORMGUARD_EXPORT store {
 public:
  virtual ~store() = default;
  /// Which kind of store this is, and so which statements the handler writes (SQL dialect or
  /// Redis).
  [[nodiscard]] virtual store_kind kind() const noexcept = 0;

  /// One atomic step (one round trip for PostgreSQL and Redis): when there is no live record for
  /// `id` — none, one past its expiry (`now >= expires`), or one in progress whose lease has
  /// expired (`now >= lease_expires`; took_over) — writes one in progress with `fp`, `token`,
  /// lease_expires = now + lease, expires = now + ttl and returns acquired. Otherwise returns
  /// the record's state and writes nothing. `lease` and `ttl` are > 0 (std::invalid_argument
  /// otherwise). Throws store_error.
  [[nodiscard]] virtual begin_result begin(const record_key& id, const fingerprint& fp,
                                           std::string_view token, wall_time_point now,
                                           duration lease, duration ttl) = 0;

  /// The work complete() runs: the handler, writing through the transaction; returns the
  /// response to store. An exception from it rolls everything back and propagates.
  using work = std::function<stored_response(transaction&)>;

  /// Atomically: if the record `id` is still in progress under `token`, runs `w` and stores its
  /// response (record completed, expires = now + ttl) together with the writes `w` made, and
  /// returns completed; else commits nothing and returns lease_lost (`w` may or may not have
  /// run: its in-memory effects are the caller's; its store writes are discarded). SQL stores:
  /// one transaction (BEGIN IMMEDIATE in SQLite; in PostgreSQL the record's row is locked for the
  /// transaction, so a concurrent takeover waits and then sees the outcome). Redis: one Lua script
  /// (EVALSHA) checks the token, runs the queued commands and stores the response; atomic in the
  /// Redis server, durable only as far as its persistence settings (docs/idempotency.md).
  /// Throws store_error (nothing committed, or — a connection lost during COMMIT — unknown: the
  /// record then stays in progress under `token` until its lease expires, so a retry sees either
  /// the stored response or a takeover, never a second commit); rethrows what `w` throws.
  [[nodiscard]] virtual complete_outcome complete(const record_key& id, std::string_view token,
                                                  wall_time_point now, duration ttl,
                                                  const work& w) = 0;

  /// Reads the record `id` without writing anything: its state as begin() would report it when
  /// it is live (completed and `now < expires`, or in progress under an unexpired lease), else
  /// nullopt. The guard uses it to find records written before principals were hashed. The
  /// default implementation finds nothing (a store of your own need not implement it). Throws
  /// store_error.
  [[nodiscard]] virtual std::optional<begin_result> find(const record_key& id,
                                                         wall_time_point now) {
    (void)id;
    (void)now;
    return std::nullopt;
  }

  /// Deletes the record `id` if it is in progress under `token` (the handler failed before
  /// anything committed, so the request may run again at once); a no-op otherwise. Throws
  /// store_error.
  virtual void release(const record_key& id, std::string_view token) = 0;

  /// Deletes every record with `expires <= now`; returns how many. Redis: 0 (its keys carry a
  /// PEXPIRE of the ttl and expire by themselves). The guard never needs it for correctness
  /// (begin ignores expired records); it bounds the table's size. Throws store_error.
  virtual std::size_t purge_expired(wall_time_point now) = 0;

  /// Runs one statement outside any record, at once, and returns its rows: for the handler's
  /// own schema (CREATE TABLE IF NOT EXISTS ...) and reads (an audit). SQL: as
  /// transaction::execute, in its own transaction. Redis: the command's reply — an array gives one
  /// row per element, anything else one row; each row one column (nil as nullopt, integers as
  /// decimal text), except an element that is itself an array (SCAN's keys): one row with a
  /// column per element. Redis refuses (std::invalid_argument) the commands that would change
  /// the state of a pooled connection: SELECT, MULTI/EXEC/WATCH, (P|S)SUBSCRIBE, MONITOR, RESET,
  /// HELLO, AUTH, QUIT, CLIENT REPLY/TRACKING. Throws store_error.
  virtual std::vector<row> query(std::string_view statement,
                                 std::span<const std::string_view> params) = 0;
  /// query() with the parameters in braces.
  std::vector<row> query(std::string_view statement,
                         std::initializer_list<std::string_view> params) {
    return query(statement, std::span<const std::string_view>(params.begin(), params.size()));
  }
};

/// Opens a store from a spec, as `--idempotency` takes it:
/// \code{.unparsed}
///  sqlite:PATH        an SQLite database file (created if absent; WAL journal)
///  postgres:URL       a PostgreSQL connection URI (`postgresql://user@host:port/db`; libpq's
///                     syntax, https://www.postgresql.org/docs/15/libpq-connect.html)
///  redis:URL          redis://host:port[/db]
/// \endcode
/// Creates the store's table (SQL) if absent. Throws std::invalid_argument naming "store" and
/// quoting the spec when its syntax is wrong (no scheme, unknown scheme, empty path or URL),
/// store_error when the store cannot be opened or reached.
[[nodiscard]] STORMGUARD_EXPORT std::unique_ptr<store> open_store(std::string_view spec);

}  // namespace stormguard::guard

#endif  // STORMGUARD_GUARD_STORE_HPP
