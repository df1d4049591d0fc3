// SPDX-License-Identifier: Apache-2.0
// A real redis-server for the tests of the Redis idempotency store: started in a fresh temporary
// directory on a free 127.0.0.1 port, stopped and its directory deleted at the end.
//
//   auto& server = stormguard::test_support::redis_server::shared();   // one per test process
//   auto store = stormguard::guard::make_redis_store({.url = server.url(), .prefix = "my_test"});
//
// The server is Debian's redis-server (7.x; scripts/bootstrap installs it), run in the
// foreground without persistence: `--port P --bind 127.0.0.1 --save "" --appendonly no --dir TMP
// --daemonize no`, its log in TMP/redis.log. The constructor waits (at most 10 s, polling every
// 10 ms) until it answers PING; when it does not, or exits, it throws with the log's tail. When
// redis-server is not installed it throws telling to run scripts/bootstrap: the tests fail,
// they are not skipped. Tests share one server per process and isolate themselves by key prefix
// (or by database number: url(db)).
//
// When started on the main thread, the server gets PR_SET_PDEATHSIG (SIGTERM), so a test process
// that crashes or is killed by a ctest timeout does not leave it running (Linux sends the signal
// when the starting *thread* exits, hence only the main thread).
//
// Thread-safety: the accessors may be called from any thread; shared() is thread-safe.
#ifndef STORMGUARD_TESTS_SUPPORT_REDIS_SERVER_HPP
#define STORMGUARD_TESTS_SUPPORT_REDIS_SERVER_HPP

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace stormguard::test_support {

class redis_server {
 public:
  /// Starts a server (see the file comment). Throws std::runtime_error saying what went wrong.
  redis_server();
  /// The same, with `password` required of clients (Redis's requirepass, set through a
  /// configuration file in the server's directory, not its command line; empty = none). A letter,
  /// digit or punctuation other than '"' and '\' only.
  explicit redis_server(const std::string& password);
  /// The same, with more lines of configuration in that file (e.g. "cluster-enabled yes"; each
  /// line as redis.conf writes it, without a newline).
  redis_server(const std::string& password, const std::vector<std::string>& config);
  /// SIGTERM (redis-server then exits without saving), waits for it (at most 5 s, then SIGKILL)
  /// and deletes its directory.
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  /// The server of this test process, started on first use and stopped at exit. Throws as the
  /// constructor; after a failed start every call throws the same message without trying again.
  static redis_server& shared();

  /// A port on 127.0.0.1 where nothing listens (bound, then closed): for "the server is down".
  static std::uint16_t unused_port();

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  /// "redis://127.0.0.1:PORT/DB".
  [[nodiscard]] std::string url(int db = 0) const;
  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  /// Kills the server with SIGKILL (a crash: no shutdown, its data lost) and reaps it; the
  /// directory stays. No effect when it is not running.
  void kill();
  /// Starts a new server on the same port and directory (after kill()) and waits until it
  /// answers PING (at most 10 s). Throws std::runtime_error with the log's tail when it does
  /// not (e.g. another process took the port meanwhile).
  void restart();

 private:
  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

/// One line of `redis-cli -p PORT ARGS...` (its whole output, trailing newline removed; "" when
/// it could not run). Test set-up only: ARGS are passed through a shell.
std::string redis_cli(std::uint16_t port, const std::string& args);

/// A master, its replica and three Redis Sentinels (quorum 2, down-after 1 s, failover-timeout
/// 3 s) on 127.0.0.1, each a redis_server of its own; the constructor waits (at most 15 s) until
/// the replica has synced and the sentinels see the replica and each other. Throws
/// std::runtime_error when they do not.
class redis_sentinel_set {
 public:
  redis_sentinel_set();
  /// The name the sentinels know the master by.
  static constexpr const char* k_master_name = "stormguard-master";
  /// "redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/stormguard-master".
  [[nodiscard]] std::string url() const;
  [[nodiscard]] redis_server& master() { return *master_; }
  [[nodiscard]] redis_server& replica() { return *replica_; }
  /// Kills the master (SIGKILL) and waits (at most 15 s) until the sentinels name the replica
  /// as the master; false when they do not.
  bool kill_master_and_wait_for_failover();

 private:
  std::unique_ptr<redis_server> master_;
  std::unique_ptr<redis_server> replica_;
  std::vector<std::unique_ptr<redis_server>> sentinels_;
};

/// A Redis Cluster of three masters and three replicas on 127.0.0.1 (cluster-node-timeout 1 s),
/// each a redis_server of its own, formed with `redis-cli --cluster create`; the constructor
/// waits (at most 15 s each) until every node says cluster_state:ok and every replica has synced
/// with its master. Throws std::runtime_error when they do not.
class redis_cluster {
 public:
  redis_cluster();
  [[nodiscard]] redis_server& node(std::size_t i) { return *nodes_.at(i); }
  [[nodiscard]] std::size_t size() const { return nodes_.size(); }
  /// The index of the live node that serves `key`'s slot as master (the others, replicas
  /// included, answer MOVED), or size() when none does.
  [[nodiscard]] std::size_t master_of(const std::string& key);
  /// Waits (at most 15 s) until every live node says cluster_state:ok; false when one does not.
  bool wait_until_ok();

 private:
  [[nodiscard]] int replicas_up();
  std::vector<std::unique_ptr<redis_server>> nodes_;
};

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_REDIS_SERVER_HPP
