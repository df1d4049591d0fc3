// SPDX-License-Identifier: Apache-2.0
// A real PostgreSQL 15 server for the tests (postgres_server.hpp).
#include "support/postgres_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace stormguard::test_support {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const fs::path k_bin_dir = "/usr/lib/postgresql/15/bin";
constexpr auto k_start_timeout = 30s;
constexpr auto k_stop_timeout = 10s;
constexpr int k_port_attempts = 3;

/// The user the server runs as when we are root (PostgreSQL refuses to run as root).
struct run_as {
  uid_t uid;
  gid_t gid;
};

std::optional<run_as> server_user() {
  if (::geteuid() != 0) return std::nullopt;
  const passwd* pw = ::getpwnam("postgres");  // once, before any fork; not re-entered
  if (pw == nullptr) {
    throw std::runtime_error(
        "postgres_server: running as root, and there is no `postgres` user to run PostgreSQL "
        "as (PostgreSQL refuses to run as root): run scripts/bootstrap (it installs "
        "postgresql-15, whose package creates the user)");
  }
  return run_as{pw->pw_uid, pw->pw_gid};
}

/// Where the temporary directory goes: /dev/shm (tmpfs) when it has room, where initdb takes a
/// third of the time it takes on a disk (0.3 s against 1.2 s here), else /tmp as root (the
/// postgres user must be able to reach it; $TMPDIR may be under /root), else $TMPDIR.
fs::path scratch_base(bool as_root) {
  std::error_code ec;
  const fs::space_info shm = fs::space("/dev/shm", ec);
  if (!ec && fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK | X_OK) == 0 &&
      shm.available >= (std::uintmax_t{512} << 20U)) {
    return "/dev/shm";
  }
  return as_root ? fs::path("/tmp") : fs::temp_directory_path();
}

std::string tail_of(const fs::path& file, std::size_t max_bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "(no log at " + file.string() + ")";
  std::ostringstream all;
  all << in.rdbuf();
  std::string text = all.str();
  if (text.size() > max_bytes) text = "..." + text.substr(text.size() - max_bytes);
  return text;
}

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "postgres_server: socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "postgres_server: bind 127.0.0.1:0");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// fork + exec of `argv` as `user` (if set), in `dir`, stdout and stderr to `log`. With
/// `die_with_parent`, the child gets SIGQUIT when the forking thread exits. Returns the pid.
pid_t spawn(const std::vector<std::string>& argv, const std::optional<run_as>& user,
            const fs::path& dir, const fs::path& log, bool die_with_parent) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string dir_s = dir.string();
  const std::string log_s = log.string();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "postgres_server: fork");
  if (pid != 0) return pid;
  // The child.
  if (user) {
    if (::setgroups(1, &user->gid) != 0 || ::setgid(user->gid) != 0 || ::setuid(user->uid) != 0) {
      ::_exit(126);
    }
  }
  // After setuid, which clears the parent-death signal.
  if (die_with_parent && (::prctl(PR_SET_PDEATHSIG, SIGQUIT) != 0 || ::getppid() != parent)) {
    ::_exit(125);
  }
  const int fd = ::open(log_s.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0 || ::dup2(fd, STDERR_FILENO) < 0 ||
      ::chdir(dir_s.c_str()) != 0) {
    ::_exit(124);
  }
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
  ::execv(args[0], args.data());
  ::_exit(127);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "ended (status " + std::to_string(status) + ")";
}

struct conn_deleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
struct result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};

}  // namespace

postgres_server::postgres_server() {
  for (const char* binary : {"initdb", "postgres"}) {
    if (::access((k_bin_dir / binary).c_str(), X_OK) != 0) {
      throw std::runtime_error("postgres_server: " + (k_bin_dir / binary).string() +
                               " is missing: run scripts/bootstrap (it installs Debian's "
                               "postgresql-15, which the PostgreSQL store's tests start)");
    }
  }
  const auto user = server_user();
  const fs::path base = scratch_base(user.has_value());
  std::string pattern = (base / "stormguard-pg-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "postgres_server: mkdtemp " + pattern);
  }
  dir_ = pattern;
  try {
    if (user && ::chown(dir_.c_str(), user->uid, user->gid) != 0) {
      throw std::system_error(errno, std::generic_category(),
                              "postgres_server: chown " + dir_.string() + " to postgres");
    }
    // initdb: bounded wait (it takes ~2 s).
    const fs::path initdb_log = dir_ / "initdb.log";
    const pid_t initdb = spawn({(k_bin_dir / "initdb").string(), "--no-sync", "--auth=trust",
                                "--username=postgres", "--encoding=UTF8", "--locale=C",
                                "--no-instructions", "--pgdata=" + (dir_ / "data").string()},
                               user, dir_, initdb_log, false);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      const pid_t done = ::waitpid(initdb, &status, WNOHANG);
      if (done == initdb) break;
      if (done < 0 && errno != EINTR) {
        throw std::system_error(errno, std::generic_category(), "postgres_server: waitpid");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(initdb, SIGKILL);
        ::waitpid(initdb, &status, 0);
        throw std::runtime_error("postgres_server: initdb took more than 60 s; its log:\n" +
                                 tail_of(initdb_log, 4000));
      }
      std::this_thread::sleep_for(10ms);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error("postgres_server: initdb " + describe_status(status) +
                               "; its log:\n" + tail_of(initdb_log, 4000));
    }
    start_server();
  } catch (...) {
    stop();
    throw;
  }
}

void postgres_server::start_server() {
  const auto user = server_user();
  for (int attempt = 1;; ++attempt) {
    port_ = free_port();
    exited_ = false;
    std::promise<pid_t> started;
    auto pid_future = started.get_future();  // the promise moves into the keeper
    const std::vector<std::string> argv = {(k_bin_dir / "postgres").string(),
                                           "-D",
                                           (dir_ / "data").string(),
                                           "-p",
                                           std::to_string(port_),
                                           "-k",
                                           dir_.string(),
                                           "-c",
                                           "listen_addresses=127.0.0.1",
                                           "-c",
                                           "fsync=off",
                                           "-c",
                                           "max_connections=200"};
    keeper_ = std::thread([this, argv, user, started = std::move(started)]() mutable {
      pid_t pid = -1;
      try {
        pid = spawn(argv, user, dir_, dir_ / "server.log", true);
      } catch (...) {
        started.set_exception(std::current_exception());
        return;
      }
      started.set_value(pid);
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      exit_status_ = status;
      exited_ = true;
    });
    pid_ = pid_future.get();  // rethrows the keeper's failure to fork

    const std::string conninfo = url() + "?connect_timeout=2";
    const auto deadline = std::chrono::steady_clock::now() + k_start_timeout;
    while (!exited_ && PQping(conninfo.c_str()) != PQPING_OK) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("postgres_server: the server did not accept connections on " +
                                 url() + " within 30 s; the tail of its log:\n" + log_tail());
      }
      std::this_thread::sleep_for(20ms);
    }
    if (!exited_) return;
    keeper_.join();
    pid_ = -1;
    const std::string log = log_tail();
    if (attempt < k_port_attempts && log.find("could not bind") != std::string::npos) continue;
    throw std::runtime_error("postgres_server: the server " + describe_status(exit_status_) +
                             " while starting; the tail of its log:\n" + log);
  }
}

void postgres_server::stop() noexcept {
  if (pid_ > 0) {
    ::kill(pid_, SIGQUIT);  // immediate shutdown: the data is thrown away anyway
    const auto deadline = std::chrono::steady_clock::now() + k_stop_timeout;
    while (!exited_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    if (!exited_) ::kill(pid_, SIGKILL);
  }
  if (keeper_.joinable()) keeper_.join();
  pid_ = -1;
  if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

postgres_server::~postgres_server() { stop(); }

std::string postgres_server::url(std::string_view database) const {
  return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + std::string(database);
}

std::string postgres_server::create_database() {
  const std::string name = "db_" + std::to_string(++databases_);
  std::unique_ptr<PGconn, conn_deleter> conn(PQconnectdb(url().c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error("postgres_server: connect: " +
                             std::string(PQerrorMessage(conn.get())));
  }
  std::unique_ptr<PGresult, result_deleter> r(
      PQexec(conn.get(), ("CREATE DATABASE " + name).c_str()));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    throw std::runtime_error("postgres_server: CREATE DATABASE " + name + ": " +
                             PQresultErrorMessage(r.get()));
  }
  return url(name);
}

std::string postgres_server::log_tail(std::size_t max_bytes) const {
  return tail_of(dir_ / "server.log", max_bytes);
}

postgres_server& shared_postgres_server() {
  static std::mutex mutex;
  static std::unique_ptr<postgres_server> server;  // destroyed (the server stopped) at exit
  static std::string error;
  const std::lock_guard lock(mutex);
  if (server) return *server;
  if (!error.empty()) throw std::runtime_error(error);
  try {
    server = std::make_unique<postgres_server>();
  } catch (const std::exception& e) {
    error = e.what();
    throw;
  }
  return *server;
}

std::string unique_table_name() {
  static std::atomic<std::uint64_t> next{0};
  return "t_" + std::to_string(::getpid()) + "_" + std::to_string(++next);
}

}  // namespace stormguard::test_support
