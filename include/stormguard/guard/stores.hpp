// SPDX-License-Identifier: Apache-2.0
/// \file
/// The three idempotency stores (store.hpp) and their options.
///
/// \code{.cpp}
///  auto local = stormguard::guard::make_sqlite_store({.path = "keys.db"});
///  auto shared = stormguard::guard::make_postgres_store({.url = "postgresql://app@db:5432/app"});
///  auto fast = stormguard::guard::make_redis_store({.url = "redis://cache:6379/0"});
/// \endcode
///
/// docs/idempotency.md says what each guarantees. Each keeps a pool of at most `max_connections`
/// connections, opened on demand (a call waits for a free one when all are busy), and prepares
/// every statement once per connection. Each throws std::invalid_argument naming the field and the
/// value for bad options, and store_error when the store cannot be opened or reached, or holds
/// records of another schema version (store.hpp).
#ifndef STORMGUARD_GUARD_STORES_HPP
#define STORMGUARD_GUARD_STORES_HPP

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "stormguard/export.hpp"
#include "stormguard/guard/store.hpp"

namespace stormguard::guard {

/// The table (SQL stores) or key prefix (Redis) used when none is given.
inline constexpr std::string_view default_table = "stormguard_idempotency";

/// An SQLite database file (libsqlite3): zero set-up, one machine. Journal mode WAL, synchronous
/// FULL (a committed record survives a power cut), busy timeout as below.
struct sqlite_options {
  std::string path{};                ///< the database file; created if absent; not empty
  std::string table{default_table};  ///< [A-Za-z_][A-Za-z0-9_]*, at most 63 characters
  std::chrono::milliseconds busy_timeout{5000};  ///< how long a write waits for the lock; > 0
  std::size_t max_connections = 8;               ///< 1..1024
};
/// An SQLite store with `options`. Throws store_error when the database cannot be opened or
/// set up, std::invalid_argument for an option out of its range.
[[nodiscard]] STORMGUARD_EXPORT std::unique_ptr<store> make_sqlite_store(
    const sqlite_options& options);

/// A PostgreSQL server (libpq), shared by the replicas of a fleet.
struct postgres_options {
  std::string url{};                 ///< a libpq connection URI or key=value string; not empty
  std::string table{default_table};  ///< as sqlite_options::table
  std::chrono::milliseconds connect_timeout{5000};  ///< per connection attempt; >= 1 s (libpq's
                                                    ///< unit is whole seconds; rounded up; libpq
                                                    ///< waits at least 2 s)
  std::size_t max_connections = 8;                  ///< 1..1024
  /// The session's statement_timeout: the server cancels a statement that runs longer (waiting
  /// for a row lock included) and the call throws store_error. Longer than the slowest statement
  /// of a handler. 1ms..24h.
  std::chrono::milliseconds statement_timeout{10000};
  /// How long the client waits for any reply of the server (libpq's own calls have no bound)
  /// before it closes the connection and throws store_error: a server that is stopped, or a
  /// partition without a reset, costs at most this per call (and the guard's short circuit then
  /// answers at once). Longer than statement_timeout, at most 25h.
  std::chrono::milliseconds reply_timeout{15000};
  /// TCP_USER_TIMEOUT (libpq tcp_user_timeout): how long sent data may stay unacknowledged
  /// before the kernel closes the connection. 1ms..24h.
  std::chrono::milliseconds tcp_user_timeout{10000};
  /// TCP keepalives (libpq keepalives_idle): idle time before the first probe; then a probe
  /// every keepalive_idle / 2 (at least 1 s), and 3 unanswered probes close the connection.
  /// 1s..2h. These four override the same parameters in `url`.
  std::chrono::seconds keepalive_idle{10};
};
/// A PostgreSQL store with `options`. Throws store_error when the server cannot be reached or
/// the table set up, std::invalid_argument for an option out of its range.
[[nodiscard]] STORMGUARD_EXPORT std::unique_ptr<store> make_postgres_store(
    const postgres_options& options);

/// A Redis server (hiredis), shared by the replicas of a fleet.
struct redis_options {
  /// redis://HOST[:PORT][/DB] (PORT default 6379, DB default 0), or
  /// redis+sentinel://HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB]: each new connection goes to the
  /// master the sentinels name then (docs/budgets.md, "Sentinel"); not empty. A redis:// URL may
  /// name any node of a Redis Cluster: the store reads the slot map (CLUSTER SLOTS) when it
  /// opens, sends each record's commands to the master of its hash slot, follows MOVED and ASK,
  /// and reads the map again when a master fails (docs/idempotency.md, "Redis Cluster"). On a
  /// Cluster the handler's queued writes must be keys of the record's slot.
  std::string url{};
  std::string prefix{default_table};        ///< prefix of every key written, before ':'; 1..63
                                            ///< characters of printable ASCII without spaces
                                            ///< (also the connections' CLIENT SETNAME)
  std::chrono::milliseconds timeout{2000};  ///< connect and command timeout; > 0
  std::size_t max_connections = 8;          ///< 1..1024; on a Redis Cluster, per node
  /// Whether opening the store checks that the server's maxmemory-policy is noeviction and
  /// refuses (store_error naming the setting and its value) otherwise: any other policy may evict
  /// records under memory pressure, and a retry then runs its request again. Set it to false
  /// only for a server that refuses CONFIG GET and is known to be noeviction.
  bool require_noeviction = true;
};
/// A Redis store with `options`. Throws store_error when the server cannot be reached,
/// std::invalid_argument for an option out of its range.
[[nodiscard]] STORMGUARD_EXPORT std::unique_ptr<store> make_redis_store(
    const redis_options& options);

}  // namespace stormguard::guard

#endif  // STORMGUARD_GUARD_STORES_HPP
