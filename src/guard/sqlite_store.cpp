// SPDX-License-Identifier: Apache-2.0
// The SQLite idempotency store (include/stormguard/guard/stores.hpp) on libsqlite3.
//
// Each step is one transaction opened with BEGIN IMMEDIATE: it takes the database's write lock
// first, so two connections (threads, or processes on the same file) never interleave their reads
// and writes of a record — the second waits up to busy_timeout, then sees the first's outcome.
// Journal mode WAL lets readers (query()) run beside the writer; synchronous=FULL makes every
// commit durable before it returns.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "guard/codec.hpp"
#include "guard/pool.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {
namespace {

constexpr int k_in_progress = 0;
constexpr int k_completed = 1;

/// Why opening or writing failed, when the cause is that the database cannot be written: the
/// file or its directory is not writable, or the file system is read-only. Empty otherwise.
std::string read_only_hint(sqlite3* db, int rc) {
  const int sys = db != nullptr ? sqlite3_system_errno(db) : 0;
  if ((rc & 0xff) != SQLITE_READONLY && sys != EACCES && sys != EROFS && sys != EPERM) return {};
  std::string why = " (read-only";
  if (sys != 0) why += ": " + std::string(std::strerror(sys));
  return why +
         "; the store writes every request: the file and its directory must be writable, on a "
         "writable file system)";
}

/// Why `path` cannot be opened for writing when its directory (to create it, and its WAL) or
/// the file itself is not writable; empty otherwise. (SQLite's own message is "unable to open
/// database file", and its last errno is the read-only retry's.)
std::string unwritable_hint(const std::string& path) {
  std::filesystem::path file(path);
  std::filesystem::path dir = file.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  const bool exists = std::filesystem::exists(file, ec);
  const std::filesystem::path& checked = exists ? file : dir;
  if (::access(checked.c_str(), W_OK) == 0) return {};
  const int why = errno;
  if (why != EACCES && why != EROFS && why != EPERM) return {};
  return " (read-only: " + std::string(exists ? "the file " : "the directory ") +
         detail::quote_for_message(checked.string()) + " is not writable: " + std::strerror(why) +
         "; the store writes every request)";
}

/// One database connection and its prepared statements (by text).
class connection {
 public:
  connection(const std::string& path, std::chrono::milliseconds busy_timeout) : path_(path) {
    sqlite3* db = nullptr;
    const int rc =
        sqlite3_open_v2(path.c_str(), &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    db_ = db;
    if (rc != SQLITE_OK) {
      std::string hint = read_only_hint(db, rc);
      if (hint.empty() && (rc & 0xff) == SQLITE_CANTOPEN) hint = unwritable_hint(path);
      const std::string why = (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) + hint;
      sqlite3_close_v2(db);
      db_ = nullptr;
      throw store_error("sqlite store " + detail::quote_for_message(path) + ": " + why);
    }
    sqlite3_extended_result_codes(db_, 1);
    if (sqlite3_db_readonly(db_, "main") == 1) {  // opened read-only: no write permission
      sqlite3_close_v2(db_);
      db_ = nullptr;
      throw store_error("sqlite store " + detail::quote_for_message(path) +
                        ": the database is read-only (no write permission on the file, or a "
                        "read-only file system); the store writes every request");
    }
    const auto ms = std::clamp<std::int64_t>(busy_timeout.count(), 1, INT32_MAX);
    sqlite3_busy_timeout(db_, static_cast<int>(ms));
    exec_plain("PRAGMA journal_mode=WAL");
    exec_plain("PRAGMA synchronous=FULL");
  }
  ~connection() {
    for (auto& [text, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  [[noreturn]] void fail(std::string_view what) const {
    throw store_error("sqlite store " + detail::quote_for_message(path_) + ": " +
                      std::string(what) + ": " + sqlite3_errmsg(db_) +
                      read_only_hint(db_, sqlite3_extended_errcode(db_)));
  }

  /// A statement without parameters or rows (PRAGMA, BEGIN, COMMIT, ROLLBACK, CREATE).
  void exec_plain(const char* sql) {
    char* err = nullptr;
    if (const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err); rc != SQLITE_OK) {
      const std::string why = (err != nullptr ? std::string(err) : std::string("unknown error")) +
                              read_only_hint(db_, sqlite3_extended_errcode(db_));
      sqlite3_free(err);
      throw store_error("sqlite store " + detail::quote_for_message(path_) + ": " + sql + ": " +
                        why);
    }
  }

  /// The prepared statement for `sql` (prepared on first use), reset and with no bindings.
  sqlite3_stmt* prepare(std::string_view sql) {
    auto it = statements_.find(std::string(sql));
    if (it != statements_.end()) return it->second;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                           &stmt, nullptr) != SQLITE_OK) {
      fail("prepare " + detail::quote_for_message(sql));
    }
    statements_.emplace(std::string(sql), stmt);
    return stmt;
  }

  sqlite3* db() const noexcept { return db_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

/// Resets a statement when the scope ends (so it holds no read lock between uses).
struct reset_on_exit {
  sqlite3_stmt* stmt;
  ~reset_on_exit() {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
  }
};

void bind_blob(connection& c, sqlite3_stmt* s, int i, std::string_view v) {
  if (sqlite3_bind_blob64(s, i, v.data(), v.size(), SQLITE_TRANSIENT) != SQLITE_OK) c.fail("bind");
}
void bind_int(connection& c, sqlite3_stmt* s, int i, std::int64_t v) {
  if (sqlite3_bind_int64(s, i, v) != SQLITE_OK) c.fail("bind");
}
std::string column_blob(sqlite3_stmt* s, int i) {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(s, i));
  const int n = sqlite3_column_bytes(s, i);
  return p != nullptr ? std::string(p, static_cast<std::size_t>(n)) : std::string();
}

/// Steps `s` to completion and returns its rows as text (NULL as nullopt).
std::vector<row> run(connection& c, sqlite3_stmt* s) {
  std::vector<row> rows;
  for (;;) {
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return rows;
    if (rc != SQLITE_ROW) c.fail("step");
    row r;
    const int n = sqlite3_column_count(s);
    r.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      if (sqlite3_column_type(s, i) == SQLITE_NULL) {
        r.emplace_back(std::nullopt);
      } else {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
        r.emplace_back(std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, i))));
      }
    }
    rows.push_back(std::move(r));
  }
}

/// A user statement with parameters $1..$N bound by name (as text), run to completion.
std::vector<row> run_user(connection& c, std::string_view sql,
                          std::span<const std::string_view> params) {
  sqlite3_stmt* s = c.prepare(sql);
  reset_on_exit reset{s};
  const int expected = sqlite3_bind_parameter_count(s);
  if (expected != static_cast<int>(params.size())) {
    throw std::invalid_argument("sqlite store: statement " + detail::quote_for_message(sql) +
                                " has " + std::to_string(expected) + " parameters, " +
                                std::to_string(params.size()) + " given");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string name = "$" + std::to_string(i + 1);
    const int index = sqlite3_bind_parameter_index(s, name.c_str());
    if (index == 0) {
      throw std::invalid_argument("sqlite store: statement " + detail::quote_for_message(sql) +
                                  " has no parameter " + name + " (write them $1..$N)");
    }
    if (sqlite3_bind_text64(s, index, params[i].data(), params[i].size(), SQLITE_TRANSIENT,
                            SQLITE_UTF8) != SQLITE_OK) {
      c.fail("bind");
    }
  }
  return run(c, s);
}

/// BEGIN IMMEDIATE ... COMMIT, rolled back when the scope ends without commit().
class write_transaction {
 public:
  explicit write_transaction(connection& c) : c_(c) { c_.exec_plain("BEGIN IMMEDIATE"); }
  ~write_transaction() {
    if (open_) sqlite3_exec(c_.db(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  write_transaction(const write_transaction&) = delete;
  write_transaction& operator=(const write_transaction&) = delete;
  void commit() {
    c_.exec_plain("COMMIT");
    open_ = false;
  }

 private:
  connection& c_;
  bool open_ = true;
};

class sqlite_transaction final : public transaction {
 public:
  explicit sqlite_transaction(connection& c) : c_(c) {}
  [[nodiscard]] store_kind kind() const noexcept override { return store_kind::sqlite; }
  std::vector<row> execute(std::string_view statement,
                           std::span<const std::string_view> params) override {
    if (failed_) {
      throw statement_error("sqlite store: an earlier statement of this transaction failed (" +
                            error_ + "); the transaction rolls back");
    }
    try {
      return run_user(c_, statement, params);
    } catch (const store_error& e) {
      failed_ = true;
      error_ = e.what();
      throw statement_error(e.what());
    }
  }
  using transaction::execute;

  [[nodiscard]] bool failed() const noexcept { return failed_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  connection& c_;
  bool failed_ = false;
  std::string error_;
};

bool valid_table(std::string_view t) {
  if (t.empty() || t.size() > 63) return false;
  if (!(std::isalpha(static_cast<unsigned char>(t[0])) != 0 || t[0] == '_')) return false;
  return std::all_of(t.begin(), t.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_';
  });
}

class sqlite_store final : public store {
 public:
  /// Marks a table without a version as version 1 (in one write transaction, so that two
  /// processes opening it at once write one row), then refuses a table of another version
  /// (internal::schema_check).
  void check_schema(connection& c) {
    const std::string schema = t_ + "_schema";
    c.exec_plain(("BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS " + schema +
                  " (version INTEGER NOT NULL); INSERT INTO " + schema + " (version) SELECT " +
                  std::to_string(internal::k_record_schema_version) +
                  " WHERE NOT EXISTS (SELECT 1 FROM " + schema + "); COMMIT")
                     .c_str());
    sqlite3_stmt* s = c.prepare("SELECT version FROM " + schema);
    const reset_on_exit reset{s};
    for (const row& r : run(c, s)) {
      internal::schema_check(
          "sqlite store " + detail::quote_for_message(options_.path) + ": table " + t_,
          r.empty() || !r[0] ? std::string_view("(none)") : std::string_view(*r[0]));
    }
  }

  explicit sqlite_store(const sqlite_options& o)
      : options_(o),
        pool_(
            o.max_connections,
            [this] { return std::make_unique<connection>(options_.path, options_.busy_timeout); }),
        t_(o.table) {
    select_ =
        "SELECT state, token, fingerprint, lease_expires, expires, status, headers, body "
        "FROM " +
        t_ + " WHERE principal = ?1 AND key = ?2";
    upsert_ = "INSERT OR REPLACE INTO " + t_ +
              " (principal, key, fingerprint, state, token, lease_expires, expires) "
              "VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6)";
    finish_ = "UPDATE " + t_ +
              " SET state = 1, token = NULL, status = ?3, headers = ?4, body = ?5, expires = ?6 "
              "WHERE principal = ?1 AND key = ?2";
    release_ =
        "DELETE FROM " + t_ + " WHERE principal = ?1 AND key = ?2 AND state = 0 AND token = ?3";
    purge_ = "DELETE FROM " + t_ + " WHERE expires <= ?1";
    auto c = pool_.acquire();  // the first connection: fails early, creates the table
    c->exec_plain(("CREATE TABLE IF NOT EXISTS " + t_ +
                   " (principal BLOB NOT NULL, key BLOB NOT NULL, fingerprint BLOB NOT NULL,"
                   " state INTEGER NOT NULL, token TEXT, lease_expires INTEGER NOT NULL,"
                   " expires INTEGER NOT NULL, status INTEGER, headers BLOB, body BLOB,"
                   " PRIMARY KEY (principal, key)) WITHOUT ROWID")
                      .c_str());
    check_schema(*c);
  }

  [[nodiscard]] store_kind kind() const noexcept override { return store_kind::sqlite; }

  begin_result begin(const record_key& id, const fingerprint& fp, std::string_view token,
                     wall_time_point now, duration lease, duration ttl) override {
    check_positive(lease, "lease");
    check_positive(ttl, "ttl");
    auto c = pool_.acquire();
    write_transaction tx(*c);
    bool took_over = false;
    if (auto found = live_record(*c, id, now, took_over)) return std::move(*found);
    begin_result out;
    out.took_over = took_over;
    sqlite3_stmt* s = c->prepare(upsert_);
    reset_on_exit reset{s};
    bind_key(*c, s, id);
    bind_blob(*c, s, 3, std::string_view(reinterpret_cast<const char*>(fp.data()), fp.size()));
    if (sqlite3_bind_text64(s, 4, token.data(), token.size(), SQLITE_TRANSIENT, SQLITE_UTF8) !=
        SQLITE_OK) {
      c->fail("bind");
    }
    bind_int(*c, s, 5, internal::add_ns(now, lease));
    bind_int(*c, s, 6, internal::add_ns(now, ttl));
    if (sqlite3_step(s) != SQLITE_DONE) c->fail("insert");
    tx.commit();
    out.outcome = begin_outcome::acquired;
    return out;
  }

  complete_outcome complete(const record_key& id, std::string_view token, wall_time_point now,
                            duration ttl, const work& w) override {
    check_positive(ttl, "ttl");
    auto c = pool_.acquire();
    write_transaction tx(*c);
    if (!held(*c, id, token)) return complete_outcome::lease_lost;
    sqlite_transaction user(*c);
    const stored_response r = w(user);
    if (user.failed()) {  // the handler caught the error and returned: nothing may commit
      throw statement_error("sqlite store: a statement of the handler failed (" + user.error() +
                            ") and the handler returned anyway; rolled back");
    }
    sqlite3_stmt* s = c->prepare(finish_);
    reset_on_exit reset{s};
    bind_key(*c, s, id);
    bind_int(*c, s, 3, r.status);
    bind_blob(*c, s, 4, internal::encode_headers(r.headers));
    bind_blob(*c, s, 5, r.body);
    bind_int(*c, s, 6, internal::add_ns(now, ttl));
    if (sqlite3_step(s) != SQLITE_DONE) c->fail("update");
    tx.commit();
    return complete_outcome::completed;
  }

  std::optional<begin_result> find(const record_key& id, wall_time_point now) override {
    auto c = pool_.acquire();
    bool took_over = false;
    return live_record(*c, id, now, took_over);
  }

  void release(const record_key& id, std::string_view token) override {
    auto c = pool_.acquire();
    sqlite3_stmt* s = c->prepare(release_);
    reset_on_exit reset{s};
    bind_key(*c, s, id);
    if (sqlite3_bind_text64(s, 3, token.data(), token.size(), SQLITE_TRANSIENT, SQLITE_UTF8) !=
        SQLITE_OK) {
      c->fail("bind");
    }
    if (sqlite3_step(s) != SQLITE_DONE) c->fail("delete");
  }

  std::size_t purge_expired(wall_time_point now) override {
    auto c = pool_.acquire();
    sqlite3_stmt* s = c->prepare(purge_);
    reset_on_exit reset{s};
    bind_int(*c, s, 1, internal::to_ns(now));
    if (sqlite3_step(s) != SQLITE_DONE) c->fail("delete");
    return static_cast<std::size_t>(sqlite3_changes64(c->db()));
  }

  std::vector<row> query(std::string_view statement,
                         std::span<const std::string_view> params) override {
    auto c = pool_.acquire();
    return run_user(*c, statement, params);
  }
  using store::query;

 private:
  /// The live record `id` as begin() reports it (completed, or in progress under an unexpired
  /// lease); nullopt when there is none, `took_over` set when an in-progress one's lease expired.
  std::optional<begin_result> live_record(connection& c, const record_key& id, wall_time_point now,
                                          bool& took_over) {
    const std::int64_t now_ns = internal::to_ns(now);
    sqlite3_stmt* s = c.prepare(select_);
    reset_on_exit reset{s};
    bind_key(c, s, id);
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return std::nullopt;
    if (rc != SQLITE_ROW) c.fail("select");
    const int state = sqlite3_column_int(s, 0);
    const std::int64_t lease_expires = sqlite3_column_int64(s, 3);
    const bool live = sqlite3_column_int64(s, 4) > now_ns;
    begin_result out;
    if (live && state == k_completed) {
      out.outcome = begin_outcome::completed;
      copy_fingerprint(s, out);
      auto headers = internal::decode_headers(column_blob(s, 6));
      if (!headers) throw store_error("sqlite store: a stored response's headers are corrupt");
      out.response =
          stored_response{sqlite3_column_int(s, 5), std::move(*headers), column_blob(s, 7)};
      return out;
    }
    if (live && state == k_in_progress && lease_expires > now_ns) {
      out.outcome = begin_outcome::in_progress;
      copy_fingerprint(s, out);
      out.lease_expires = internal::from_ns(lease_expires);
      return out;
    }
    took_over = live && state == k_in_progress;
    return std::nullopt;
  }

  static void check_positive(duration d, std::string_view name) {
    if (d <= duration::zero()) {
      throw std::invalid_argument("sqlite store: " + std::string(name) + " " + format_duration(d) +
                                  ": must be > 0");
    }
  }
  static void bind_key(connection& c, sqlite3_stmt* s, const record_key& id) {
    bind_blob(c, s, 1, id.principal);
    bind_blob(c, s, 2, id.key);
  }
  static void copy_fingerprint(sqlite3_stmt* s, begin_result& out) {
    const std::string f = column_blob(s, 2);
    if (f.size() != out.fingerprint.size()) {
      throw store_error("sqlite store: a stored fingerprint is corrupt");
    }
    std::copy(f.begin(), f.end(), out.fingerprint.begin());
  }
  /// Whether the record is in progress under `token` (inside the write transaction).
  bool held(connection& c, const record_key& id, std::string_view token) {
    sqlite3_stmt* s = c.prepare(select_);
    reset_on_exit reset{s};
    bind_key(c, s, id);
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return false;
    if (rc != SQLITE_ROW) c.fail("select");
    if (sqlite3_column_int(s, 0) != k_in_progress) return false;
    const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, 1));
    return t != nullptr &&
           std::string_view(t, static_cast<std::size_t>(sqlite3_column_bytes(s, 1))) == token;
  }

  sqlite_options options_;
  internal::pool<connection> pool_;
  std::string t_;
  std::string select_, upsert_, finish_, release_, purge_;
};

void validate(const sqlite_options& o) {
  auto bad = [](std::string_view field, const std::string& value, std::string_view why) {
    return std::invalid_argument("sqlite_options." + std::string(field) + " " + value + ": " +
                                 std::string(why));
  };
  if (o.path.empty()) throw bad("path", "\"\"", "must not be empty");
  if (o.path.find('\0') != std::string::npos) {
    throw bad("path", detail::quote_for_message(o.path), "must not contain a NUL byte");
  }
  if (!valid_table(o.table)) {
    throw bad("table", detail::quote_for_message(o.table),
              "must be [A-Za-z_][A-Za-z0-9_]*, at most 63 characters");
  }
  if (o.busy_timeout <= std::chrono::milliseconds::zero()) {
    throw bad("busy_timeout", format_duration(o.busy_timeout), "must be > 0");
  }
  if (o.max_connections < 1 || o.max_connections > 1024) {
    throw bad("max_connections", std::to_string(o.max_connections), "must be 1..1024");
  }
}

}  // namespace

std::unique_ptr<store> make_sqlite_store(const sqlite_options& options) {
  validate(options);
  return std::make_unique<sqlite_store>(options);
}

}  // namespace stormguard::guard
