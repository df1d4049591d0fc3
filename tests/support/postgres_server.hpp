// SPDX-License-Identifier: Apache-2.0
// A real PostgreSQL 15 server for the tests of the PostgreSQL idempotency store: initdb in a fresh
// temporary directory, the server on a free 127.0.0.1 port, stopped and the directory deleted
// at the end.
//
//   TEST(PostgresStore, Something) {
//     auto& server = stormguard::test_support::shared_postgres_server();  // throws if it cannot
//     auto store = stormguard::guard::make_postgres_store(
//         {.url = server.url(), .table = stormguard::test_support::unique_table_name()});
//   }
//
// The binaries are Debian's (/usr/lib/postgresql/15/bin, package postgresql-15, installed by
// scripts/bootstrap); when they are missing the server throws a message that says to run
// scripts/bootstrap (the tests fail: they do not skip). PostgreSQL refuses to run as root: as
// root, initdb and the server run as the `postgres` user (which the package creates).
//
// Fast rather than durable: initdb --no-sync, the server with fsync=off, trust authentication
// (user postgres, no password), listening on 127.0.0.1 only (and a Unix socket in the temporary
// directory). The directory is on /dev/shm (tmpfs) when it has room. Starting takes about half a
// second there (initdb; over a second on a disk), so a test executable shares one server
// (shared_postgres_server) and isolates its tests by table (unique_table_name) or database
// (create_database).
#ifndef STORMGUARD_TESTS_SUPPORT_POSTGRES_SERVER_HPP
#define STORMGUARD_TESTS_SUPPORT_POSTGRES_SERVER_HPP

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>

namespace stormguard::test_support {

/// One PostgreSQL server process. Not copyable. Thread-safe after construction (url(),
/// create_database() and log_tail() may be called from any thread).
class postgres_server {
 public:
  /// Runs initdb and starts the server; returns once a connection succeeds (at most ~30 s).
  /// Throws std::runtime_error saying what failed, with the tail of initdb's or the server's log.
  postgres_server();
  /// Stops the server (SIGQUIT: immediate shutdown, its data is thrown away) and deletes the
  /// temporary directory.
  ~postgres_server();
  postgres_server(const postgres_server&) = delete;
  postgres_server& operator=(const postgres_server&) = delete;

  /// postgresql://postgres@127.0.0.1:PORT/DATABASE
  [[nodiscard]] std::string url(std::string_view database = "postgres") const;
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  /// Creates a new, empty database and returns its URL. Throws std::runtime_error.
  [[nodiscard]] std::string create_database();
  /// The last `max_bytes` of the server's log.
  [[nodiscard]] std::string log_tail(std::size_t max_bytes = 4000) const;

 private:
  void start_server();
  void stop() noexcept;

  std::filesystem::path dir_;  // the temporary directory: data/, the socket, the logs
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  // The server is started by `keeper_`, which then waits for it to exit: a server started with
  // PR_SET_PDEATHSIG dies with the thread that forked it, so that thread lives exactly as long
  // as the server (and a test executable that crashes takes its server down with it).
  std::thread keeper_;
  std::atomic<bool> exited_{false};
  std::atomic<int> exit_status_{0};
  std::atomic<std::uint64_t> databases_{0};
};

/// The process-wide server: started by the first call, stopped at exit. Every call after a
/// failed start throws the same message again, so every test that needs it fails with it.
[[nodiscard]] postgres_server& shared_postgres_server();

/// A table name no other call in this process returns ("t_<pid>_<counter>"), for a test's own
/// store table.
[[nodiscard]] std::string unique_table_name();

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_POSTGRES_SERVER_HPP
