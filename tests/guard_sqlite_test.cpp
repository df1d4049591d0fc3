// SPDX-License-Identifier: Apache-2.0
// The SQLite store: the shared conformance suite (tests/guard_store_suite.hpp) on a real
// database file, and what only SQLite has (a file, its lock).
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "guard_store_suite.hpp"
#include "stormguard/guard/stores.hpp"

namespace stormguard_test {
namespace {

namespace fs = std::filesystem;

/// A temporary directory removed at the end of the test executable.
const fs::path& scratch() {
  static const struct dir {
    fs::path path;
    dir() {
      std::string tmpl = (fs::temp_directory_path() / "stormguard-sqlite-XXXXXX").string();
      if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
      path = tmpl;
    }
    ~dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } d;
  return d.path;
}

std::unique_ptr<sg::store> make_in(const std::string& table) {
  return sg::make_sqlite_store({.path = (scratch() / "suite.db").string(), .table = table});
}

}  // namespace

STORMGUARD_INSTANTIATE_SQL_STORE_SUITE(Sqlite, (store_factory{"sqlite", make_in}));

/// The store_error message of opening `path`, or "opened".
std::string open_message(const std::string& path) {
  try {
    (void)sg::make_sqlite_store({.path = path});
  } catch (const sg::store_error& e) {
    return e.what();
  }
  return "opened";
}

TEST(SqliteStore, AReadOnlyPathIsReportedAsReadOnly) {
  // A directory the store cannot write to, and a database file it cannot write. Checked in a
  // child process that runs as an unprivileged user when the tests run as root (root writes
  // anywhere).
  std::string tmpl = (fs::temp_directory_path() / "stormguard-ro-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  fs::create_directory(dir / "ro");
  (void)sg::make_sqlite_store({.path = (dir / "file.db").string()});
  fs::remove(dir / "file.db-wal");
  fs::remove(dir / "file.db-shm");
  ::chmod(dir.c_str(), 0755);
  ::chmod((dir / "ro").c_str(), 0555);
  ::chmod((dir / "file.db").c_str(), 0444);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    const std::string in_dir = open_message((dir / "ro" / "new.db").string());
    const std::string file = open_message((dir / "file.db").string());
    std::fprintf(stderr, "read-only directory: %s\nread-only file: %s\n", in_dir.c_str(),
                 file.c_str());
    const bool ok = in_dir.find("read-only") != std::string::npos &&
                    file.find("the database is read-only") != std::string::npos;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::error_code ec;
  ::chmod((dir / "ro").c_str(), 0755);
  fs::remove_all(dir, ec);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the messages on stderr";
}

TEST(SqliteStore, OptionsOutOfRangeNameTheField) {
  auto message = [](const sg::sqlite_options& o) {
    try {
      (void)sg::make_sqlite_store(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  const std::string path = (scratch() / "opts.db").string();
  EXPECT_EQ(message({.path = ""}), "sqlite_options.path \"\": must not be empty");
  EXPECT_NE(message({.path = path, .table = "x; DROP TABLE y"}).find("sqlite_options.table"),
            std::string::npos);
  EXPECT_NE(message({.path = path, .table = std::string(64, 't')}).find("at most 63"),
            std::string::npos);
  EXPECT_NE(message({.path = path, .busy_timeout = std::chrono::milliseconds(0)})
                .find("sqlite_options.busy_timeout 0s"),
            std::string::npos);
  EXPECT_NE(message({.path = path, .max_connections = 0}).find("sqlite_options.max_connections 0"),
            std::string::npos);
}

TEST(SqliteStore, AFileThatCannotBeOpenedIsAStoreErrorNamingIt) {
  const std::string path = (scratch() / "no-such-dir" / "x.db").string();
  try {
    (void)sg::make_sqlite_store({.path = path});
    FAIL() << "opened " << path;
  } catch (const sg::store_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-dir"), std::string::npos) << e.what();
  }
}

TEST(SqliteStore, TheJournalIsWal) {
  const std::string path = (scratch() / "wal.db").string();
  auto s = sg::make_sqlite_store({.path = path});
  const auto rows = s->query("PRAGMA journal_mode", {});
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0][0].value_or(""), "wal");
}

TEST(SqliteStore, StatementsTakeDollarParametersInAnyOrder) {
  auto s = sg::make_sqlite_store({.path = (scratch() / "params.db").string()});
  const auto rows = s->query("SELECT $2 || '-' || $1, NULL", {"a", "b"});
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0][0].value_or(""), "b-a");
  EXPECT_FALSE(rows[0][1].has_value());
  EXPECT_THROW((void)s->query("SELECT $1", {}), std::invalid_argument);
  EXPECT_THROW((void)s->query("SELEKT 1", {}), sg::store_error);
}

TEST(SqliteStore, ALockedDatabaseGets503WithRetryAfterAndTheHandlerNeverRuns) {
  const std::string path = (scratch() / "locked.db").string();
  auto s = sg::make_sqlite_store({.path = path, .busy_timeout = std::chrono::milliseconds(50)});
  // Another process's writer holds the lock (here: a raw connection in an exclusive transaction).
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  stormguard::testing::manual_clock clock;
  sg::guard_options o;
  o.time = &clock;
  o.unavailable_retry_after = std::chrono::seconds(3);
  sg::idempotency_guard g(*s, o);
  int runs = 0;
  const auto r = g.handle({"p", "POST", "/charges", "{}", "k"}, [&](sg::transaction&) {
    ++runs;
    return sg::stored_response{};
  });
  EXPECT_EQ(r.decision, sg::decision::store_unavailable);
  EXPECT_EQ(r.response.status, 503);
  bool retry_after = false;
  for (const auto& [n, v] : r.response.headers) retry_after |= (n == "Retry-After" && v == "3");
  EXPECT_TRUE(retry_after);
  EXPECT_EQ(runs, 0);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  EXPECT_EQ(g.handle({"p", "POST", "/charges", "{}", "k"},
                     [&](sg::transaction&) {
                       ++runs;
                       return sg::stored_response{};
                     })
                .decision,
            sg::decision::ran)
      << "once the store is back, the request runs";
  EXPECT_EQ(runs, 1);
}

TEST(SqliteStore, TwoStoresOnOneFileShareTheRecords) {
  const std::string path = (scratch() / "shared.db").string();
  auto a = sg::make_sqlite_store({.path = path});
  auto b = sg::make_sqlite_store({.path = path});
  const auto fp = sg::fingerprint_of("POST", "/", "");
  const auto t = stormguard::testing::manual_clock().wall_now();
  ASSERT_EQ(a->begin({"p", "k"}, fp, "ta", t, 30s, 24h).outcome, sg::begin_outcome::acquired);
  EXPECT_EQ(b->begin({"p", "k"}, fp, "tb", t, 30s, 24h).outcome, sg::begin_outcome::in_progress);
}

}  // namespace stormguard_test
