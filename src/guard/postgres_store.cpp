// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL idempotency store (include/stormguard/guard/stores.hpp) on libpq.
//
// One table (created if absent; its name from postgres_options::table), one row per record:
//
//   principal     BYTEA   NOT NULL  } the primary key; BYTEA, not TEXT: store.hpp allows any
//   key           BYTEA   NOT NULL  } bytes, and TEXT refuses NUL (and invalid UTF-8 in a UTF8 db)
//   fingerprint   BYTEA   NOT NULL  32 bytes (SHA-256 of the request)
//   state         TEXT    NOT NULL  'in_progress' or 'completed'
//   token         BYTEA   NOT NULL  the lease holder's token
//   took_over     BOOLEAN NOT NULL  this holder took the record over from an expired lease
//   lease_expires BIGINT  NOT NULL  } nanoseconds since the Unix epoch (the guard's
//   expires       BIGINT  NOT NULL  } wall_time_point; the server's now() is never used)
//   status        INTEGER           } the stored response (NULL while in progress); headers as
//   headers       BYTEA             } (u32 big-endian length, name, u32 length, value)*
//   body          BYTEA             }
//   + an index on expires (purge_expired).
//
// Every wait for the server is bounded (postgres_connection.hpp): connect_timeout, the
// session's statement_timeout, the client's reply_timeout, TCP keepalives and TCP_USER_TIMEOUT.
// An idle pooled connection that the server closed meanwhile (a restart) is noticed before a
// call is sent on it, and the call goes to another connection instead of failing.
//
// Round trips: begin() is one statement (below); complete() is two pipelined batches around the
// handler's own statements (BEGIN + lock the row under our token; store the response + COMMIT).
// Every statement is prepared once per connection (all of the store's own in one pipelined batch
// when the connection opens; the handler's on first use, cached by their text). Parameters of the
// store's own statements are bound in binary (BYTEA as raw bytes, BIGINT as 8 bytes big-endian)
#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "guard/codec.hpp"
#include "guard/pool.hpp"
#include "guard/postgres_connection.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {
namespace {

using internal::bound_params;
using internal::check;
using internal::command;
using internal::fail;
using internal::field;
using internal::first_error;
using internal::k_bytea;
using internal::k_int4;
using internal::k_int8;
using internal::one_line;
using internal::pg_connection;
using internal::pg_result;
using internal::succeeded;

/// How many times begin() re-runs its statement when it returned no row: the existing record
/// was committed by a concurrent transaction after the statement's snapshot (see k_begin_sql).
constexpr int k_begin_attempts = 8;

/// The most handler statements one connection keeps prepared under a name; beyond that they are
/// prepared as the unnamed statement each time (a handler that builds statement texts on the fly
/// must not grow the server's memory without bound).
constexpr std::size_t k_max_cached_statements = 256;

constexpr std::size_t k_max_key_bytes = 255;

/// A hint after an error that a table of the store's name but of another layout causes.
std::string layout_hint(const PGresult* r, std::string_view table) {
  const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string_view s = state != nullptr ? state : "";
  // undefined_column, datatype_mismatch, invalid_column_reference (no unique index for ON
  // CONFLICT), undefined_function (an operator on another column type)
  if (s == "42703" || s == "42804" || s == "42P10" || s == "42883") {
    return " (the table " + std::string(table) +
           " exists with another layout: it must be the store's own, see postgres_store.cpp)";
  }
  return {};
}

std::uint64_t read_big_endian(std::string_view v, std::size_t n, std::string_view column) {
  if (v.size() != n) {
    fail("read", "column " + std::string(column) + " has " + std::to_string(v.size()) +
                     " bytes, expected " + std::to_string(n) + " (a table of another layout?)");
  }
  std::uint64_t out = 0;
  for (const char ch : v) out = (out << 8U) | static_cast<unsigned char>(ch);
  return out;
}

std::string_view as_bytes(const fingerprint& fp) noexcept {
  return {reinterpret_cast<const char*>(fp.data()), fp.size()};
}

void check_record_key(const record_key& id) {
  if (id.principal.size() > k_max_key_bytes) {
    throw std::invalid_argument("postgres store: principal of " +
                                std::to_string(id.principal.size()) + " bytes: at most 255");
  }
  if (id.key.size() > k_max_key_bytes) {
    throw std::invalid_argument("postgres store: key " + detail::quote_for_message(id.key) +
                                ": at most 255 bytes");
  }
}

/// FNV-1a (64 bits): the advisory lock key under which the table is created.
std::int64_t lock_key(std::string_view text) noexcept {
  std::uint64_t h = 14695981039346656037ULL;
  for (const char ch : text) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ULL;
  }
  return static_cast<std::int64_t>(h);
}

void validate(const postgres_options& o) {
  if (o.url.empty()) {
    throw std::invalid_argument(
        "postgres_options.url \"\": must not be empty (a libpq connection URI such as "
        "postgresql://user@host:5432/db, or key=value pairs)");
  }
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(o.url.c_str(), &error);
  if (parsed == nullptr) {
    // The URL is not echoed: it may carry a password.
    std::string why = error != nullptr ? one_line(error) : std::string("out of memory");
    PQfreemem(error);
    throw std::invalid_argument("postgres_options.url: not a libpq connection string: " + why);
  }
  PQconninfoFree(parsed);
  const std::string& t = o.table;
  const bool table_ok = !t.empty() && t.size() <= 63 &&
                        (std::isalpha(static_cast<unsigned char>(t[0])) != 0 || t[0] == '_') &&
                        std::all_of(t.begin(), t.end(), [](char ch) {
                          return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_';
                        });
  if (!table_ok) {
    throw std::invalid_argument("postgres_options.table " + detail::quote_for_message(t) +
                                ": must match [A-Za-z_][A-Za-z0-9_]* and be at most 63 characters");
  }
  if (o.max_connections < 1 || o.max_connections > 1024) {
    throw std::invalid_argument("postgres_options.max_connections " +
                                std::to_string(o.max_connections) + ": must be 1..1024");
  }
  using namespace std::chrono_literals;
  auto check_range = [](bool ok, std::string_view name, auto value, std::string_view range) {
    if (!ok) {
      throw std::invalid_argument("postgres_options." + std::string(name) + " " +
                                  format_duration(value) + ": must be " + std::string(range));
    }
  };
  check_range(o.statement_timeout >= 1ms && o.statement_timeout <= 24h, "statement_timeout",
              o.statement_timeout, "between 1ms and 24h");
  check_range(o.reply_timeout > o.statement_timeout && o.reply_timeout <= 25h, "reply_timeout",
              o.reply_timeout, "longer than statement_timeout, at most 25h");
  check_range(o.tcp_user_timeout >= 1ms && o.tcp_user_timeout <= 24h, "tcp_user_timeout",
              o.tcp_user_timeout, "between 1ms and 24h");
  check_range(o.keepalive_idle >= 1s && o.keepalive_idle <= 2h, "keepalive_idle", o.keepalive_idle,
              "between 1s and 2h");
  if (o.connect_timeout < std::chrono::seconds(1)) {
    throw std::invalid_argument("postgres_options.connect_timeout " +
                                format_duration(o.connect_timeout) +
                                ": must be >= 1s (libpq counts whole seconds)");
  }
}

internal::pg_settings settings_of(const postgres_options& o) {
  using std::chrono::ceil;
  using std::chrono::seconds;
  auto whole = [](auto d) { return std::to_string(std::min<std::int64_t>(INT_MAX, d)); };
  internal::pg_settings s;
  s.url = o.url;
  s.connect_timeout = whole(ceil<seconds>(o.connect_timeout).count());
  s.keepalives_idle = whole(o.keepalive_idle.count());
  s.keepalives_interval = whole(std::max<std::int64_t>(1, o.keepalive_idle.count() / 2));
  s.tcp_user_timeout = whole(o.tcp_user_timeout.count());
  s.statement_timeout = o.statement_timeout;
  s.reply_timeout = o.reply_timeout;
  return s;
}

// --- the store ---

class postgres_store final : public store {
 public:
  explicit postgres_store(const postgres_options& o);

  [[nodiscard]] store_kind kind() const noexcept override { return store_kind::postgres; }
  [[nodiscard]] begin_result begin(const record_key& id, const fingerprint& fp,
                                   std::string_view token, wall_time_point now, duration lease,
                                   duration ttl) override;
  [[nodiscard]] complete_outcome complete(const record_key& id, std::string_view token,
                                          wall_time_point now, duration ttl,
                                          const work& w) override;
  [[nodiscard]] std::optional<begin_result> find(const record_key& id,
                                                 wall_time_point now) override;
  void release(const record_key& id, std::string_view token) override;
  std::size_t purge_expired(wall_time_point now) override;
  std::vector<row> query(std::string_view statement,
                         std::span<const std::string_view> params) override;
  using store::query;

  /// Runs a handler's statement (prepared on first use, cached by its text), parameters and rows
  /// as text. Throws store_error.
  static std::vector<row> run_statement(pg_connection& conn, std::string_view statement,
                                        std::span<const std::string_view> params,
                                        std::string_view what);

 private:
  struct prepared {
    const char* name;
    std::string text;
    std::vector<Oid> types;
  };

  std::unique_ptr<pg_connection> open_connection();
  void create_table(pg_connection& conn) const;
  /// Runs `f(connection)` on a pooled connection that is still connected (an idle one the
  /// server closed is discarded first, and another taken: nothing was sent on it); discards the
  /// connection when it is left unhealthy (broken, timed out, inside a transaction, in pipeline
  /// mode), whether `f` returns or throws.
  template <class F>
  auto with_connection(F&& f);
  /// A pooled connection that is still connected (see pg_connection::still_connected).
  internal::pool<pg_connection>::lease acquire_connected();
  /// ROLLBACK; throws store_error when it fails.
  static void rollback(pg_connection& conn, std::string_view what);
  /// ROLLBACK, ignoring failure (the connection, if left in a transaction, is then discarded).
  static void rollback_quietly(pg_connection& conn) noexcept;

  std::string table_;
  internal::pg_settings settings_;
  std::size_t max_connections_;
  std::vector<prepared> statements_;
  bool table_ready_ = false;  // written only by the constructor
  internal::pool<pg_connection> pool_;
};

// Statement names (one namespace per connection: "sg_" plus ours; the handler's are sg_u<N>).
constexpr const char* k_begin = "sg_begin";
constexpr const char* k_tx_begin = "sg_tx_begin";
constexpr const char* k_fence = "sg_fence";
constexpr const char* k_store = "sg_store";
constexpr const char* k_tx_commit = "sg_tx_commit";
constexpr const char* k_tx_rollback = "sg_tx_rollback";
constexpr const char* k_release = "sg_release";
constexpr const char* k_purge = "sg_purge";
constexpr const char* k_find = "sg_find";

std::string quoted(std::string_view table) { return "\"" + std::string(table) + "\""; }

postgres_store::postgres_store(const postgres_options& o)
    : table_(o.table),
      settings_(settings_of(o)),
      max_connections_(o.max_connections),
      pool_(o.max_connections, [this] { return open_connection(); }) {
  const std::string t = quoted(table_);
  // begin: one statement, atomic under concurrency.
  // - `live` reads the record in the statement's snapshot; when it is live (completed, or in
  //   progress under an unexpired lease) that is the answer, without taking a lock: a repeat
  //   during the holder's complete() is answered at once (in_progress), and a replay writes
  //   nothing.
  // - Otherwise `ins` inserts the record, or takes over an expired one: ON CONFLICT DO UPDATE
  //   locks the latest version of a conflicting row (waiting for a concurrent writer, e.g. the
  //   holder's complete()) and re-checks the WHERE on it, so exactly one of concurrent begins
  //   acquires. The lock is kept when the WHERE is false.
  // - When `ins` wrote nothing, `existing` reads the record again, FOR SHARE: the latest version
  //   (the one `ins` locked), not the snapshot's. A record committed by another transaction after
  //   the snapshot is invisible to it even so: the statement then returns no row and begin()
  //   runs it again (k_begin_attempts); the next snapshot sees the record.
  const std::string record_columns = "state, fingerprint, lease_expires, status, headers, body";
  statements_.push_back(
      {k_begin,
       "WITH live AS (SELECT " + record_columns + " FROM " + t +
           " WHERE principal = $1 AND key = $2 AND expires > $7"
           " AND (state = 'completed' OR lease_expires > $7)),"
           " ins AS (INSERT INTO " +
           t +
           " AS r (principal, key, fingerprint, state, token, took_over, lease_expires, expires)"
           " SELECT $1, $2, $3, 'in_progress', $4, FALSE, $5, $6"
           " WHERE NOT EXISTS (SELECT 1 FROM live)"
           " ON CONFLICT (principal, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,"
           " state = 'in_progress', token = EXCLUDED.token, took_over = (r.state = 'in_progress'),"
           " lease_expires = EXCLUDED.lease_expires, expires = EXCLUDED.expires, status = NULL,"
           " headers = NULL, body = NULL"
           " WHERE r.expires <= $7 OR (r.state = 'in_progress' AND r.lease_expires <= $7)"
           " RETURNING r.took_over),"
           " existing AS (SELECT " +
           record_columns + " FROM " + t +
           " WHERE principal = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM live)"
           " AND NOT EXISTS (SELECT 1 FROM ins) FOR SHARE)"
           " SELECT TRUE, ins.took_over, NULL::text, NULL::bytea, NULL::bigint, NULL::integer,"
           " NULL::bytea, NULL::bytea FROM ins"
           " UNION ALL SELECT FALSE, FALSE, " +
           record_columns +
           " FROM live"
           " UNION ALL SELECT FALSE, FALSE, " +
           record_columns + " FROM existing",
       {k_bytea, k_bytea, k_bytea, k_bytea, k_int8, k_int8, k_int8}});
  statements_.push_back({k_tx_begin, "BEGIN", {}});
  // complete's fencing: lock our record's row for the transaction (a takeover waits for us).
  statements_.push_back({k_fence,
                         "SELECT 1 FROM " + t +
                             " WHERE principal = $1 AND key = $2 AND token = $3 AND state = "
                             "'in_progress' FOR UPDATE",
                         {k_bytea, k_bytea, k_bytea}});
  statements_.push_back(
      {k_store,
       "UPDATE " + t +
           " SET state = 'completed', status = $4, headers = $5, body = $6, expires = $7"
           " WHERE principal = $1 AND key = $2 AND token = $3 AND state = 'in_progress'",
       {k_bytea, k_bytea, k_bytea, k_int4, k_bytea, k_bytea, k_int8}});
  statements_.push_back({k_tx_commit, "COMMIT", {}});
  statements_.push_back({k_tx_rollback, "ROLLBACK", {}});
  statements_.push_back({k_release,
                         "DELETE FROM " + t +
                             " WHERE principal = $1 AND key = $2 AND token = $3 AND state = "
                             "'in_progress'",
                         {k_bytea, k_bytea, k_bytea}});
  statements_.push_back({k_purge, "DELETE FROM " + t + " WHERE expires <= $1", {k_int8}});
  // find: the live record, read only (the columns of begin's answer, `acquired` false).
  statements_.push_back({k_find,
                         "SELECT FALSE, FALSE, " + record_columns + " FROM " + t +
                             " WHERE principal = $1 AND key = $2 AND expires > $3"
                             " AND (state = 'completed' OR lease_expires > $3)",
                         {k_bytea, k_bytea, k_int8}});

  // The first connection creates the table and proves the server reachable.
  { auto first = pool_.acquire(); }
  table_ready_ = true;
}

std::unique_ptr<pg_connection> postgres_store::open_connection() {
  auto conn = std::make_unique<pg_connection>(settings_);
  if (!table_ready_) create_table(*conn);

  // The session's isolation (READ COMMITTED: begin's ON CONFLICT and complete's FOR UPDATE wait
  // for a concurrent writer and then see its outcome, where REPEATABLE READ or SERIALIZABLE, if
  // the server defaulted to them, would fail with a serialization error), then every statement
  // of the store, prepared in one round trip. The statement timeout (the server cancels a
  // statement running longer, a lock wait included) is the session's.
  const std::string timeout =
      "SET statement_timeout = " + std::to_string(settings_.statement_timeout.count());
  std::vector<command> commands;
  commands.reserve(statements_.size() + 4);
  commands.push_back({command::kind::prepare, "sg_session",
                      "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"});
  commands.push_back({command::kind::execute, "sg_session"});
  commands.push_back({command::kind::prepare, "sg_timeout", timeout.c_str()});
  commands.push_back({command::kind::execute, "sg_timeout"});
  for (const prepared& s : statements_) {
    commands.push_back({command::kind::prepare, s.name, s.text.c_str(), s.types});
  }
  auto results = run_pipeline(*conn, commands, "prepare");
  for (const auto& r : results) {
    if (!succeeded(r) && PQresultStatus(r.get()) != PGRES_PIPELINE_ABORTED) {
      fail("prepare",
           one_line(PQresultErrorMessage(r.get())) + layout_hint(r.get(), quoted(table_)));
    }
  }
  return conn;
}

void postgres_store::create_table(pg_connection& conn) const {
  // CREATE TABLE IF NOT EXISTS is not safe against itself: two sessions creating the same table
  // at once can both pass the check, and the second fails on pg_type's unique index. An advisory
  // lock (taken for the transaction) serializes the stores that open this table.
  const std::string t = quoted(table_);
  const std::string index = quoted(table_.substr(0, 63 - 8) + "_expires");
  const std::string schema = quoted(table_.substr(0, 63 - 7) + "_schema");
  const std::string sql =
      "BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(lock_key("stormguard:" + table_)) +
      "); CREATE TABLE IF NOT EXISTS " + t +
      " (principal BYTEA NOT NULL, key BYTEA NOT NULL, fingerprint BYTEA NOT NULL,"
      " state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),"
      " token BYTEA NOT NULL, took_over BOOLEAN NOT NULL DEFAULT FALSE,"
      " lease_expires BIGINT NOT NULL, expires BIGINT NOT NULL,"
      " status INTEGER, headers BYTEA, body BYTEA, PRIMARY KEY (principal, key));"
      " CREATE INDEX IF NOT EXISTS " +
      index + " ON " + t + " (expires);" +
      // The records' schema version (internal::k_record_schema_version): a table without one
      // is marked as version 1, under the same lock.
      " CREATE TABLE IF NOT EXISTS " + schema + " (version INTEGER NOT NULL); INSERT INTO " +
      schema + " (version) SELECT " + std::to_string(internal::k_record_schema_version) +
      " WHERE NOT EXISTS (SELECT 1 FROM " + schema + "); COMMIT";
  // Simple-query protocol: several statements in one round trip. It carries no value from
  // outside (the table name was validated as an identifier, the lock key is ours).
  pg_result r = internal::exec_simple(conn, sql.c_str(), "create table " + t);
  if (!r || !succeeded(r)) {
    const char* m = r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn.get());
    fail("create table " + t, one_line(m) + layout_hint(r.get(), t));
  }
  // Refuse a table of another version.
  const std::string read = "SELECT version FROM " + schema;
  pg_result v = internal::exec_simple(conn, read.c_str(), "read the schema version of " + t);
  if (!v || PQresultStatus(v.get()) != PGRES_TUPLES_OK) {
    const char* m = v ? PQresultErrorMessage(v.get()) : PQerrorMessage(conn.get());
    fail("read the schema version of " + t, one_line(m));
  }
  for (int i = 0; i < PQntuples(v.get()); ++i) {
    internal::schema_check("postgres store: table " + t, PQgetvalue(v.get(), i, 0));
  }
}

internal::pool<pg_connection>::lease postgres_store::acquire_connected() {
  // Every idle connection may have been closed by a server restart: at most all of them are
  // discarded before a new one (which is connected) is opened.
  for (std::size_t stale = 0;; ++stale) {
    auto lease = pool_.acquire();
    if (stale > max_connections_ || lease->still_connected()) return lease;
    lease.discard();
  }
}

template <class F>
auto postgres_store::with_connection(F&& f) {
  auto lease = acquire_connected();
  struct health_check {
    internal::pool<pg_connection>::lease& l;
    ~health_check() {
      if (!l->healthy()) l.discard();
    }
  } check_on_exit{lease};
  return f(*lease);
}

void postgres_store::rollback(pg_connection& conn, std::string_view what) {
  const std::string doing = std::string(what) + ": ROLLBACK";
  pg_result r = internal::exec_prepared(conn, k_tx_rollback, nullptr, 1, doing);
  check(r, conn, doing);
}

void postgres_store::rollback_quietly(pg_connection& conn) noexcept {
  if (PQstatus(conn.get()) != CONNECTION_OK || PQpipelineStatus(conn.get()) != PQ_PIPELINE_OFF) {
    return;  // discarded by with_connection
  }
  try {
    pg_result r = internal::exec_prepared(conn, k_tx_rollback, nullptr, 1, "ROLLBACK");
  } catch (const store_error&) {  // NOLINT(bugprone-empty-catch): discarded by with_connection
  }
}

/// The record in row 0 of begin's or find's answer (columns: acquired, took_over, state,
/// fingerprint, lease_expires, status, headers, body).
begin_result read_record(const PGresult* res, std::string_view what) {
  begin_result out;
  if (read_big_endian(field(res, 0, 0), 1, "acquired") != 0) {
    out.outcome = begin_outcome::acquired;
    out.took_over = read_big_endian(field(res, 0, 1), 1, "took_over") != 0;
    return out;
  }
  const std::string_view state = field(res, 0, 2);
  const std::string_view fp_found = field(res, 0, 3);
  if (fp_found.size() != out.fingerprint.size()) {
    fail(what,
         "the stored fingerprint has " + std::to_string(fp_found.size()) + " bytes, expected 32");
  }
  std::memcpy(out.fingerprint.data(), fp_found.data(), out.fingerprint.size());
  out.lease_expires = internal::from_ns(
      static_cast<std::int64_t>(read_big_endian(field(res, 0, 4), 8, "lease_expires")));
  if (state != "completed") {
    out.outcome = begin_outcome::in_progress;
    return out;
  }
  out.outcome = begin_outcome::completed;
  stored_response response;
  if (PQgetisnull(res, 0, 5) == 0) {
    response.status = static_cast<std::int32_t>(
        static_cast<std::uint32_t>(read_big_endian(field(res, 0, 5), 4, "status")));
  }
  auto headers = internal::decode_headers(field(res, 0, 6));
  if (!headers) fail(what, "the stored headers are corrupt");
  response.headers = std::move(*headers);
  response.body.assign(field(res, 0, 7));
  out.response = std::move(response);
  return out;
}

begin_result postgres_store::begin(const record_key& id, const fingerprint& fp,
                                   std::string_view token, wall_time_point now, duration lease,
                                   duration ttl) {
  check_record_key(id);
  if (lease <= duration::zero()) {
    throw std::invalid_argument("postgres store: begin: lease " + format_duration(lease) +
                                ": must be > 0");
  }
  if (ttl <= duration::zero()) {
    throw std::invalid_argument("postgres store: begin: ttl " + format_duration(ttl) +
                                ": must be > 0");
  }
  bound_params p;
  p.bytes("principal", id.principal);
  p.bytes("key", id.key);
  p.bytes("fingerprint", as_bytes(fp));
  p.bytes("token", token);
  p.int8(internal::add_ns(now, lease));
  p.int8(internal::add_ns(now, ttl));
  p.int8(internal::to_ns(now));
  return with_connection([&](pg_connection& conn) {
    for (int attempt = 0; attempt < k_begin_attempts; ++attempt) {
      pg_result r = internal::exec_prepared(conn, k_begin, &p, 1, "begin");
      check(r, conn, "begin");
      if (PQntuples(r.get()) == 0) continue;  // committed after our snapshot: again
      return read_record(r.get(), "begin");
    }
    fail("begin", "the record changed under " + std::to_string(k_begin_attempts) +
                      " attempts in a row; try again");
  });
}

std::optional<begin_result> postgres_store::find(const record_key& id, wall_time_point now) {
  check_record_key(id);
  bound_params p;
  p.bytes("principal", id.principal);
  p.bytes("key", id.key);
  p.int8(internal::to_ns(now));
  return with_connection([&](pg_connection& conn) -> std::optional<begin_result> {
    pg_result r = internal::exec_prepared(conn, k_find, &p, 1, "find");
    check(r, conn, "find");
    if (PQntuples(r.get()) == 0) return std::nullopt;
    return read_record(r.get(), "find");
  });
}

/// The handler's view of complete()'s transaction: its statements on the same connection.
class pg_transaction final : public transaction {
 public:
  explicit pg_transaction(pg_connection& conn) noexcept : conn_(conn) {}
  [[nodiscard]] store_kind kind() const noexcept override { return store_kind::postgres; }
  std::vector<row> execute(std::string_view statement,
                           std::span<const std::string_view> params) override {
    if (failed_) {
      throw statement_error(
          "postgres store: transaction::execute: an earlier statement of this "
          "transaction failed (" +
          error_ + "); the transaction rolls back");
    }
    try {
      auto rows = postgres_store::run_statement(conn_, statement, params, "transaction::execute");
      if (PQtransactionStatus(conn_.get()) != PQTRANS_INTRANS) {
        fail("transaction::execute",
             "the statement ended the transaction (COMMIT, ROLLBACK and the like are the "
             "store's, not the handler's)");
      }
      return rows;
    } catch (const store_error& e) {
      failed_ = true;
      error_ = e.what();
      // The server answered with an error (the connection is fine): the statement failed and
      // the transaction will roll back. A lost connection stays a plain store_error.
      if (PQstatus(conn_.get()) == CONNECTION_OK) throw statement_error(e.what());
      throw;
    }
  }
  using transaction::execute;

  [[nodiscard]] bool failed() const noexcept { return failed_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  pg_connection& conn_;
  bool failed_ = false;
  std::string error_;
};

complete_outcome postgres_store::complete(const record_key& id, std::string_view token,
                                          wall_time_point now, duration ttl, const work& w) {
  check_record_key(id);
  if (ttl <= duration::zero()) {
    throw std::invalid_argument("postgres store: complete: ttl " + format_duration(ttl) +
                                ": must be > 0");
  }
  bound_params fence;
  fence.bytes("principal", id.principal);
  fence.bytes("key", id.key);
  fence.bytes("token", token);
  return with_connection([&](pg_connection& conn) {
    {
      const command batch[] = {{command::kind::execute, k_tx_begin},
                               {command::kind::execute, k_fence, nullptr, {}, &fence}};
      auto results = run_pipeline(conn, batch, "complete: BEGIN");
      if (!succeeded(results[0]) || !succeeded(results[1])) {
        rollback_quietly(conn);
        fail("complete: BEGIN", first_error(results));
      }
      if (PQntuples(results[1].get()) == 0) {  // taken over, or released
        rollback(conn, "complete");
        return complete_outcome::lease_lost;
      }
    }
    pg_transaction tx(conn);
    stored_response response;
    try {
      response = w(tx);
    } catch (...) {
      rollback_quietly(conn);
      throw;
    }
    if (tx.failed()) {  // the handler caught the error and returned: nothing may commit
      rollback_quietly(conn);
      throw statement_error("postgres store: complete: a statement of the handler failed (" +
                            tx.error() + ") and the handler returned anyway; rolled back");
    }
    const std::string headers = internal::encode_headers(response.headers);
    bound_params st;
    st.bytes("principal", id.principal);
    st.bytes("key", id.key);
    st.bytes("token", token);
    st.int4(response.status);
    st.bytes("headers", headers);
    st.bytes("body", response.body);
    st.int8(internal::add_ns(now, ttl));
    const command batch[] = {{command::kind::execute, k_store, nullptr, {}, &st},
                             {command::kind::execute, k_tx_commit}};
    auto results = run_pipeline(conn, batch, "complete: COMMIT");
    if (!succeeded(results[0]) || !succeeded(results[1])) {
      rollback_quietly(conn);
      fail("complete: COMMIT", first_error(results));
    }
    if (std::string_view(PQcmdTuples(results[0].get())) != "1") {  // impossible: the row is locked
      rollback_quietly(conn);
      fail("complete", "the locked record was not updated; rolled back");
    }
    if (std::string_view(PQcmdStatus(results[1].get())) != "COMMIT") {
      fail("complete: COMMIT", "the server rolled the transaction back");
    }
    return complete_outcome::completed;
  });
}

void postgres_store::release(const record_key& id, std::string_view token) {
  check_record_key(id);
  bound_params p;
  p.bytes("principal", id.principal);
  p.bytes("key", id.key);
  p.bytes("token", token);
  with_connection([&](pg_connection& conn) {
    pg_result r = internal::exec_prepared(conn, k_release, &p, 1, "release");
    check(r, conn, "release");
  });
}

std::size_t postgres_store::purge_expired(wall_time_point now) {
  bound_params p;
  p.int8(internal::to_ns(now));
  return with_connection([&](pg_connection& conn) {
    pg_result r = internal::exec_prepared(conn, k_purge, &p, 1, "purge_expired");
    check(r, conn, "purge_expired");
    const std::string_view n = PQcmdTuples(r.get());
    std::size_t count = 0;
    std::from_chars(n.data(), n.data() + n.size(), count);
    return count;
  });
}

std::vector<row> postgres_store::query(std::string_view statement,
                                       std::span<const std::string_view> params) {
  return with_connection([&](pg_connection& conn) {
    auto rows = run_statement(conn, statement, params, "query");
    if (PQtransactionStatus(conn.get()) != PQTRANS_IDLE) {
      // with_connection discards the connection, which rolls the transaction back.
      fail("query",
           "the statement left a transaction open (BEGIN and the like belong in "
           "complete()'s transaction); rolled back");
    }
    return rows;
  });
}

std::vector<row> postgres_store::run_statement(pg_connection& conn, std::string_view statement,
                                               std::span<const std::string_view> params,
                                               std::string_view what) {
  bound_params p;
  for (std::size_t i = 0; i < params.size(); ++i) {
    p.text("parameter $" + std::to_string(i + 1), params[i]);
  }
  pg_result r;
  const std::string text(statement);
  if (const auto it = conn.statements.find(text); it != conn.statements.end()) {
    r = internal::exec_prepared(conn, it->second.c_str(), &p, 0, what);
    check(r, conn, what);
  } else {
    // Prepare and run in one round trip. A prepared statement outlives a rolled-back
    // transaction, so it is cached as soon as the prepare succeeds.
    std::string name;
    if (conn.statements.size() < k_max_cached_statements) {
      name = "sg_u" + std::to_string(++conn.next_statement);
    }
    const command batch[] = {{command::kind::prepare, name.c_str(), text.c_str()},
                             {command::kind::execute, name.c_str(), nullptr, {}, &p, 0}};
    auto results = run_pipeline(conn, batch, what);
    if (succeeded(results[0]) && !name.empty()) conn.statements.emplace(text, name);
    if (!succeeded(results[0]) || !succeeded(results[1])) fail(what, first_error(results));
    r = std::move(results[1]);
  }
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return {};
  const int rows = PQntuples(r.get());
  const int cols = PQnfields(r.get());
  std::vector<row> out(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i) {
    row& dst = out[static_cast<std::size_t>(i)];
    dst.reserve(static_cast<std::size_t>(cols));
    for (int j = 0; j < cols; ++j) {
      if (PQgetisnull(r.get(), i, j) != 0) {
        dst.emplace_back(std::nullopt);
      } else {
        dst.emplace_back(std::string(field(r.get(), i, j)));
      }
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<store> make_postgres_store(const postgres_options& options) {
  validate(options);
  return std::make_unique<postgres_store>(options);
}

}  // namespace stormguard::guard
