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
// Round trips: begin() is one statement (below); complete() is two pipelined batches around the
// handler's own statements (BEGIN + lock the row under our token; store the response + COMMIT).
// Every statement is prepared once per connection (all of the store's own in one pipelined batch
// when the connection opens; the handler's on first use, cached by their text). Parameters of the
// store's own statements are bound in binary (BYTEA as raw bytes, BIGINT as 8 bytes big-endian)
// and their results read in binary; the handler's parameters and results are text (store.hpp).
#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "guard/codec.hpp"
#include "guard/pool.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/saturate.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {
namespace {

// Type OIDs of the parameters of the store's own statements (pg_type.dat; fixed since 7.x).
constexpr Oid k_bytea = 17;
constexpr Oid k_int8 = 20;
constexpr Oid k_int4 = 23;

/// How many times begin() re-runs its statement when it returned no row: the existing record
/// was committed by a concurrent transaction after the statement's snapshot (see k_begin_sql).
constexpr int k_begin_attempts = 8;

/// The most handler statements one connection keeps prepared under a name; beyond that they are
/// prepared as the unnamed statement each time (a handler that builds statement texts on the fly
/// must not grow the server's memory without bound).
constexpr std::size_t k_max_cached_statements = 256;

constexpr std::size_t k_max_key_bytes = 255;

struct result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using pg_result = std::unique_ptr<PGresult, result_deleter>;

/// libpq's message without its trailing newline; tabs and newlines inside it become spaces, so
/// that the message reads on one line (in a 503 body and in logs).
std::string one_line(const char* message) {
  std::string out = message != nullptr ? message : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  for (char& c : out) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return detail::escape_control(out, 1000);
}

[[noreturn]] void fail(std::string_view what, std::string_view why) {
  throw store_error("postgres store: " + std::string(what) + ": " + std::string(why));
}

/// A connection and the handler statements prepared on it. Used by one thread at a time (the
/// pool lends it out).
class pg_connection {
 public:
  explicit pg_connection(PGconn* c) noexcept : conn_(c) {}
  pg_connection(const pg_connection&) = delete;
  pg_connection& operator=(const pg_connection&) = delete;
  ~pg_connection() { PQfinish(conn_); }
  [[nodiscard]] PGconn* get() const noexcept { return conn_; }
  /// Usable for the next call: connected, outside any transaction, not in pipeline mode.
  [[nodiscard]] bool healthy() const noexcept {
    return PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_IDLE &&
           PQpipelineStatus(conn_) == PQ_PIPELINE_OFF;
  }

  std::unordered_map<std::string, std::string> statements;  ///< handler statement -> its name
  std::uint64_t next_statement = 0;

 private:
  PGconn* conn_;
};

/// Parameters of one statement. Views passed to bytes() must outlive the statement's execution.
class bound_params {
 public:
  /// Binary (BYTEA, or TEXT's raw bytes).
  void bytes(std::string_view field, std::string_view v) {
    if (v.size() > static_cast<std::size_t>(INT_MAX)) {
      throw std::invalid_argument("postgres store: " + std::string(field) + " of " +
                                  std::to_string(v.size()) + " bytes: at most 2147483647");
    }
    // A null pointer would be SQL NULL: an empty value needs a valid one.
    values_.push_back(v.empty() ? "" : v.data());
    lengths_.push_back(static_cast<int>(v.size()));
    formats_.push_back(1);
  }
  /// Binary BIGINT (8 bytes, big-endian).
  void int8(std::int64_t v) { big_endian(static_cast<std::uint64_t>(v), 8); }
  /// Binary INTEGER (4 bytes, big-endian).
  void int4(std::int32_t v) { big_endian(static_cast<std::uint32_t>(v), 4); }
  /// Text, NUL-terminated (the handler's parameters; text cannot hold NUL).
  void text(std::string_view field, std::string_view v) {
    if (v.find('\0') != std::string_view::npos) {
      throw std::invalid_argument("postgres store: " + std::string(field) + " " +
                                  detail::quote_for_message(v) +
                                  ": contains a NUL byte, which PostgreSQL text cannot hold");
    }
    owned_.emplace_back(v);
    values_.push_back(owned_.back().c_str());
    lengths_.push_back(0);
    formats_.push_back(0);
  }

  [[nodiscard]] int size() const noexcept { return static_cast<int>(values_.size()); }
  [[nodiscard]] const char* const* values() const noexcept { return values_.data(); }
  [[nodiscard]] const int* lengths() const noexcept { return lengths_.data(); }
  [[nodiscard]] const int* formats() const noexcept { return formats_.data(); }

 private:
  void big_endian(std::uint64_t v, int n) {
    std::string& s = owned_.emplace_back(static_cast<std::size_t>(n), '\0');
    for (int i = n - 1; i >= 0; --i) {
      s[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xffU);
      v >>= 8U;
    }
    values_.push_back(s.data());
    lengths_.push_back(n);
    formats_.push_back(1);
  }

  std::deque<std::string> owned_;  // a deque: push_back never moves the strings already there
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

/// One command of a pipelined batch.
struct command {
  enum class kind : std::uint8_t { prepare, execute };
  kind what = kind::execute;
  const char* name = "";
  const char* text = nullptr;            ///< prepare: the statement
  std::span<const Oid> types{};          ///< prepare: the parameters' types (empty: inferred)
  const bound_params* params = nullptr;  ///< execute: its parameters (nullptr: none)
  int result_format = 1;                 ///< execute: 1 binary, 0 text
};

/// Sends `commands` in one pipeline (one round trip) and returns each one's result (a failed
/// command's result holds the error; the ones after it PGRES_PIPELINE_ABORTED). Throws
/// store_error when the connection fails; the connection is then unhealthy (discarded).
std::vector<pg_result> run_pipeline(pg_connection& conn, std::span<const command> commands,
                                    std::string_view what) {
  PGconn* c = conn.get();
  if (PQenterPipelineMode(c) != 1) fail(what, one_line(PQerrorMessage(c)));
  for (const command& cmd : commands) {
    int sent = 0;
    if (cmd.what == command::kind::prepare) {
      sent = PQsendPrepare(c, cmd.name, cmd.text, static_cast<int>(cmd.types.size()),
                           cmd.types.empty() ? nullptr : cmd.types.data());
    } else if (cmd.params != nullptr) {
      sent = PQsendQueryPrepared(c, cmd.name, cmd.params->size(), cmd.params->values(),
                                 cmd.params->lengths(), cmd.params->formats(), cmd.result_format);
    } else {
      sent = PQsendQueryPrepared(c, cmd.name, 0, nullptr, nullptr, nullptr, cmd.result_format);
    }
    if (sent != 1) fail(what, one_line(PQerrorMessage(c)));
  }
  if (PQpipelineSync(c) != 1) fail(what, one_line(PQerrorMessage(c)));
  std::vector<pg_result> results(commands.size());
  std::size_t i = 0;
  for (;;) {
    pg_result r(PQgetResult(c));
    if (!r) {  // the end of one command's results
      if (PQstatus(c) != CONNECTION_OK) fail(what, one_line(PQerrorMessage(c)));
      if (++i > commands.size()) fail(what, "libpq pipeline out of step");
      continue;
    }
    if (PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) break;
    if (PQstatus(c) != CONNECTION_OK) fail(what, one_line(PQerrorMessage(c)));
    if (i < results.size() && !results[i]) results[i] = std::move(r);
  }
  if (i != commands.size()) fail(what, "libpq pipeline out of step");
  if (PQexitPipelineMode(c) != 1) fail(what, one_line(PQerrorMessage(c)));
  for (auto& r : results) {
    if (!r) fail(what, "libpq pipeline returned no result");
  }
  return results;
}

[[nodiscard]] bool succeeded(const pg_result& r) noexcept {
  const ExecStatusType s = PQresultStatus(r.get());
  return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK || s == PGRES_EMPTY_QUERY;
}

/// The first error among `results` (the one that aborted the pipeline).
std::string first_error(const std::vector<pg_result>& results) {
  for (const auto& r : results) {
    if (!succeeded(r) && PQresultStatus(r.get()) != PGRES_PIPELINE_ABORTED) {
      return one_line(PQresultErrorMessage(r.get()));
    }
  }
  return "aborted";
}

/// Throws store_error unless `r` succeeded; `c`'s message when the connection failed.
void check(const pg_result& r, const pg_connection& conn, std::string_view what) {
  if (!r) fail(what, one_line(PQerrorMessage(conn.get())));
  if (!succeeded(r)) {
    const char* m = PQresultErrorMessage(r.get());
    fail(what, one_line(m != nullptr && *m != '\0' ? m : PQerrorMessage(conn.get())));
  }
}

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

// --- reading binary results ---

std::string_view field(const PGresult* r, int row, int col) {
  return {PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col))};
}

std::uint64_t read_big_endian(std::string_view v, std::size_t n, std::string_view column) {
  if (v.size() != n) {
    fail("begin", "column " + std::string(column) + " has " + std::to_string(v.size()) +
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
  if (o.connect_timeout < std::chrono::seconds(1)) {
    throw std::invalid_argument("postgres_options.connect_timeout " +
                                format_duration(o.connect_timeout) +
                                ": must be >= 1s (libpq counts whole seconds)");
  }
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
  /// Runs `f(connection)` on a pooled connection; discards the connection when it is left
  /// unhealthy (broken, inside a transaction, in pipeline mode), whether `f` returns or throws.
  template <class F>
  auto with_connection(F&& f);
  /// ROLLBACK; throws store_error when it fails.
  static void rollback(pg_connection& conn, std::string_view what);
  /// ROLLBACK, ignoring failure (the connection, if left in a transaction, is then discarded).
  static void rollback_quietly(pg_connection& conn) noexcept;

  std::string url_;
  std::string table_;
  std::string connect_timeout_;  // whole seconds, as libpq takes it
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

std::string quoted(std::string_view table) { return "\"" + std::string(table) + "\""; }

postgres_store::postgres_store(const postgres_options& o)
    : url_(o.url),
      table_(o.table),
      connect_timeout_(std::to_string(std::min<std::int64_t>(
          INT_MAX, std::chrono::ceil<std::chrono::seconds>(o.connect_timeout).count()))),
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

  // The first connection creates the table and proves the server reachable.
  { auto first = pool_.acquire(); }
  table_ready_ = true;
}

std::unique_ptr<pg_connection> postgres_store::open_connection() {
  // dbname with expand_dbname = 1: the URL's own parameters, then ours; connect_timeout after it
  // overrides one in the URL, fallback_application_name does not override application_name.
  const char* const keys[] = {"dbname", "connect_timeout", "fallback_application_name", nullptr};
  const char* const values[] = {url_.c_str(), connect_timeout_.c_str(), "stormguard", nullptr};
  PGconn* raw = PQconnectdbParams(keys, values, 1);
  if (raw == nullptr) fail("cannot connect", "libpq: out of memory");
  auto conn = std::make_unique<pg_connection>(raw);
  if (PQstatus(raw) != CONNECTION_OK) fail("cannot connect", one_line(PQerrorMessage(raw)));
  // A library does not print the server's NOTICEs ("relation ... already exists, skipping").
  PQsetNoticeProcessor(
      raw, [](void*, const char*) {}, nullptr);
  if (!table_ready_) create_table(*conn);

  // The session's isolation (READ COMMITTED: begin's ON CONFLICT and complete's FOR UPDATE wait
  // for a concurrent writer and then see its outcome, where REPEATABLE READ or SERIALIZABLE, if
  // the server defaulted to them, would fail with a serialization error), then every statement
  // of the store, prepared in one round trip.
  std::vector<command> commands;
  commands.reserve(statements_.size() + 2);
  commands.push_back({command::kind::prepare, "sg_session",
                      "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"});
  commands.push_back({command::kind::execute, "sg_session"});
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
  const std::string sql =
      "BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(lock_key("stormguard:" + table_)) +
      "); CREATE TABLE IF NOT EXISTS " + t +
      " (principal BYTEA NOT NULL, key BYTEA NOT NULL, fingerprint BYTEA NOT NULL,"
      " state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),"
      " token BYTEA NOT NULL, took_over BOOLEAN NOT NULL DEFAULT FALSE,"
      " lease_expires BIGINT NOT NULL, expires BIGINT NOT NULL,"
      " status INTEGER, headers BYTEA, body BYTEA, PRIMARY KEY (principal, key));"
      " CREATE INDEX IF NOT EXISTS " +
      index + " ON " + t + " (expires); COMMIT";
  // Simple-query protocol: several statements in one round trip. It carries no value from
  // outside (the table name was validated as an identifier, the lock key is ours).
  pg_result r(PQexec(conn.get(), sql.c_str()));
  if (!r || !succeeded(r)) {
    const char* m = r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn.get());
    fail("create table " + t, one_line(m) + layout_hint(r.get(), t));
  }
}

template <class F>
auto postgres_store::with_connection(F&& f) {
  auto lease = pool_.acquire();
  struct health_check {
    internal::pool<pg_connection>::lease& l;
    ~health_check() {
      if (!l->healthy()) l.discard();
    }
  } check_on_exit{lease};
  return f(*lease);
}

void postgres_store::rollback(pg_connection& conn, std::string_view what) {
  pg_result r(PQexecPrepared(conn.get(), k_tx_rollback, 0, nullptr, nullptr, nullptr, 1));
  check(r, conn, std::string(what) + ": ROLLBACK");
}

void postgres_store::rollback_quietly(pg_connection& conn) noexcept {
  if (PQstatus(conn.get()) != CONNECTION_OK || PQpipelineStatus(conn.get()) != PQ_PIPELINE_OFF) {
    return;  // discarded by with_connection
  }
  pg_result r(PQexecPrepared(conn.get(), k_tx_rollback, 0, nullptr, nullptr, nullptr, 1));
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
      pg_result r(
          PQexecPrepared(conn.get(), k_begin, p.size(), p.values(), p.lengths(), p.formats(), 1));
      check(r, conn, "begin");
      if (PQntuples(r.get()) == 0) continue;  // committed after our snapshot: again
      const PGresult* res = r.get();
      begin_result out;
      if (read_big_endian(field(res, 0, 0), 1, "acquired") != 0) {
        out.outcome = begin_outcome::acquired;
        out.took_over = read_big_endian(field(res, 0, 1), 1, "took_over") != 0;
        return out;
      }
      const std::string_view state = field(res, 0, 2);
      const std::string_view fp_found = field(res, 0, 3);
      if (fp_found.size() != out.fingerprint.size()) {
        fail("begin", "the stored fingerprint has " + std::to_string(fp_found.size()) +
                          " bytes, expected 32");
      }
      std::memcpy(out.fingerprint.data(), fp_found.data(), out.fingerprint.size());
      out.lease_expires = internal::from_ns(
          static_cast<std::int64_t>(read_big_endian(field(res, 0, 4), 8, "lease_expires")));
      if (state == "completed") {
        out.outcome = begin_outcome::completed;
        stored_response response;
        if (PQgetisnull(res, 0, 5) == 0) {
          response.status = static_cast<std::int32_t>(
              static_cast<std::uint32_t>(read_big_endian(field(res, 0, 5), 4, "status")));
        }
        auto headers = internal::decode_headers(field(res, 0, 6));
        if (!headers) fail("begin", "the stored headers are corrupt");
        response.headers = std::move(*headers);
        response.body.assign(field(res, 0, 7));
        out.response = std::move(response);
      } else {
        out.outcome = begin_outcome::in_progress;
      }
      return out;
    }
    fail("begin", "the record changed under " + std::to_string(k_begin_attempts) +
                      " attempts in a row; try again");
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
      fail("transaction::execute", "an earlier statement of this transaction failed (" + error_ +
                                       "); the transaction rolls back");
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
      fail("complete", "a statement of the handler failed (" + tx.error() +
                           ") and the handler returned anyway; rolled back");
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
    pg_result r(
        PQexecPrepared(conn.get(), k_release, p.size(), p.values(), p.lengths(), p.formats(), 1));
    check(r, conn, "release");
  });
}

std::size_t postgres_store::purge_expired(wall_time_point now) {
  bound_params p;
  p.int8(internal::to_ns(now));
  return with_connection([&](pg_connection& conn) {
    pg_result r(
        PQexecPrepared(conn.get(), k_purge, p.size(), p.values(), p.lengths(), p.formats(), 1));
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
    r.reset(PQexecPrepared(conn.get(), it->second.c_str(), p.size(), p.values(), p.lengths(),
                           p.formats(), 0));
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
