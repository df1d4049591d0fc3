// SPDX-License-Identifier: Apache-2.0
#include "support/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace stormguard::test_support {

namespace {

using namespace std::chrono_literals;

constexpr auto k_start_timeout = 10s;
constexpr auto k_stop_timeout = 5s;
constexpr auto k_poll = 10ms;
constexpr int k_port_attempts = 5;

std::system_error os_error(const std::string& what) {
  return std::system_error(errno, std::generic_category(), what);
}

/// redis-server in PATH, /usr/bin, /usr/sbin or /usr/local/bin.
std::string find_redis_server() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string_view rest = path;
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      dirs.emplace_back(rest.substr(0, colon));
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  for (const char* d : {"/usr/bin", "/usr/sbin", "/usr/local/bin"}) dirs.emplace_back(d);
  for (const auto& d : dirs) {
    if (d.empty()) continue;
    const std::string candidate = d + "/redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error(
      "redis-server not found (looked in PATH, /usr/bin, /usr/sbin, /usr/local/bin): the Redis "
      "store tests need a real server; run scripts/bootstrap to install Debian's redis-server");
}

std::filesystem::path make_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/stormguard-redis-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw os_error("redis_server: mkdtemp " + pattern);
  return pattern;
}

/// The last `lines` lines of a file ("" if unreadable).
std::string tail(const std::filesystem::path& file, std::size_t lines = 15) {
  std::ifstream in(file, std::ios::binary);
  std::vector<std::string> kept;
  for (std::string line; std::getline(in, line);) {
    kept.push_back(std::move(line));
    if (kept.size() > lines) kept.erase(kept.begin());
  }
  std::string out;
  for (const auto& l : kept) out += l + "\n";
  return out;
}

/// Sends PING to 127.0.0.1:port and says whether +PONG came back (within 1 s).
bool answers_ping(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }
  } const closer{fd};
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return false;
  constexpr std::string_view ping = "*1\r\n$4\r\nPING\r\n";
  if (::send(fd, ping.data(), ping.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(ping.size())) {
    return false;
  }
  std::string reply;
  char buffer[64];
  while (reply.find("\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    reply.append(buffer, static_cast<std::size_t>(n));
  }
  // A server with a password answers NOAUTH: it is up all the same.
  return reply.rfind("+PONG\r\n", 0) == 0 || reply.rfind("-NOAUTH", 0) == 0;
}

/// Waits for `pid` to exit, at most `timeout`; true if it did (and was reaped).
bool reap_within(pid_t pid, std::chrono::steady_clock::duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(k_poll);
  }
}

void stop_process(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  if (!reap_within(pid, k_stop_timeout)) {
    ::kill(pid, SIGKILL);
    reap_within(pid, k_stop_timeout);
  }
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

/// Starts redis-server on `port`; returns its pid.
pid_t spawn(const std::string& exe, std::uint16_t port, const std::filesystem::path& dir,
            const std::filesystem::path& log) {
  std::vector<std::string> args = {exe,      "--port",       std::to_string(port),
                                   "--bind", "127.0.0.1",    "--save",
                                   "",       "--appendonly", "no",
                                   "--dir",  dir.string(),   "--daemonize",
                                   "no",     "--logfile",    ""};
  // A password is set through a configuration file of the directory (redis_server(password)),
  // never on the command line.
  if (const auto conf = dir / "redis.conf"; std::filesystem::exists(conf)) {
    args.insert(args.begin() + 1, conf.string());
    // A configuration that monitors a master is a sentinel's (redis-server --sentinel, which
    // rewrites its file: the file stays in the server's directory).
    std::ifstream in(conf);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.find("sentinel monitor ") != std::string::npos) {
      args.insert(args.begin() + 2, "--sentinel");
    }
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw os_error("redis_server: open " + log.string());
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    throw os_error("redis_server: open /dev/null");
  }
  const bool main_thread = ::syscall(SYS_gettid) == ::getpid();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {  // the child: async-signal-safe calls only
    if (main_thread) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) {
    errno = fork_errno;
    throw os_error("redis_server: fork");
  }
  return pid;
}

}  // namespace

std::uint16_t redis_server::unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw os_error("redis_server: socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const auto e = os_error("redis_server: bind 127.0.0.1:0");
    ::close(fd);
    throw e;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

redis_server::redis_server() : redis_server(std::string()) {}

redis_server::redis_server(const std::string& password) : redis_server(password, {}) {}

redis_server::redis_server(const std::string& password, const std::vector<std::string>& config) {
  const std::string exe = find_redis_server();
  dir_ = make_temp_dir();
  const auto log = dir_ / "redis.log";
  if (!password.empty() || !config.empty()) {
    std::ofstream conf(dir_ / "redis.conf");
    if (!password.empty()) conf << "requirepass \"" << password << "\"\n";
    for (const std::string& line : config) conf << line << "\n";
    if (!conf.flush()) throw std::runtime_error("redis_server: cannot write redis.conf");
  }
  std::string last_failure;
  try {
    // A cluster node also listens on its port + 10,000 (the cluster bus): at most 55,535.
    const bool cluster =
        std::find(config.begin(), config.end(), "cluster-enabled yes") != config.end();
    for (int attempt = 0; attempt < k_port_attempts; ++attempt) {
      port_ = unused_port();
      for (int again = 0; cluster && port_ > 55'535 && again < 1000; ++again) {
        port_ = unused_port();
      }
      pid_ = spawn(exe, port_, dir_, log);
      const auto deadline = std::chrono::steady_clock::now() + k_start_timeout;
      for (;;) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          last_failure = exe + " on 127.0.0.1:" + std::to_string(port_) + " " +
                         describe_status(status) + "; the end of " + log.string() + ":\n" +
                         tail(log);
          break;
        }
        if (answers_ping(port_)) return;
        if (std::chrono::steady_clock::now() >= deadline) {
          stop_process(pid_);
          pid_ = -1;
          throw std::runtime_error(exe + " on 127.0.0.1:" + std::to_string(port_) +
                                   " did not answer PING within 10 s; the end of " + log.string() +
                                   ":\n" + tail(log));
        }
        std::this_thread::sleep_for(k_poll);
      }
      // Exited: another process may have taken the port between unused_port() and the bind.
      if (last_failure.find("Address already in use") == std::string::npos) break;
    }
    throw std::runtime_error(last_failure);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

redis_server::~redis_server() {
  stop_process(pid_);
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void redis_server::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  reap_within(pid_, k_stop_timeout);
  pid_ = -1;
}

void redis_server::restart() {
  kill();
  const std::string exe = find_redis_server();
  const auto log = dir_ / "redis-restarted.log";
  pid_ = spawn(exe, port_, dir_, log);
  const auto deadline = std::chrono::steady_clock::now() + k_start_timeout;
  while (!answers_ping(port_)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error(
          "redis_server::restart: " + exe + " on 127.0.0.1:" + std::to_string(port_) + " " +
          describe_status(status) + "; the end of " + log.string() + ":\n" + tail(log));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      stop_process(pid_);
      pid_ = -1;
      throw std::runtime_error("redis_server::restart: no answer to PING within 10 s on port " +
                               std::to_string(port_));
    }
    std::this_thread::sleep_for(k_poll);
  }
}

std::string redis_server::url(int db) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db);
}

redis_server& redis_server::shared() {
  static std::mutex mutex;
  static std::unique_ptr<redis_server> server;
  static std::string failure;
  const std::lock_guard lock(mutex);
  if (server) return *server;
  if (!failure.empty()) throw std::runtime_error(failure);
  try {
    server = std::make_unique<redis_server>();
  } catch (const std::exception& e) {
    failure = e.what();
    throw;
  }
  return *server;
}

std::string redis_cli(std::uint16_t port, const std::string& args) {
  const std::string command = "redis-cli -p " + std::to_string(port) + " " + args + " 2>/dev/null";
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) return "";
  std::string text;
  char buffer[512];
  while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, out)) text.append(buffer, n);
  (void)::pclose(out);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

namespace {

// Polls `ready` every 100 ms for at most 15 s.
template <class F>
bool within_15s(F&& ready) {
  for (int tries = 0; tries < 150; ++tries) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace

redis_sentinel_set::redis_sentinel_set() {
  master_ = std::make_unique<redis_server>();
  const std::string master_port = std::to_string(master_->port());
  replica_ = std::make_unique<redis_server>(
      "", std::vector<std::string>{"replicaof 127.0.0.1 " + master_port});
  if (!within_15s([this] {
        return redis_cli(replica_->port(), "info replication").find("master_link_status:up") !=
               std::string::npos;
      })) {
    throw std::runtime_error("redis_sentinel_set: the replica did not sync with its master");
  }
  const std::string name = k_master_name;
  for (int i = 0; i < 3; ++i) {
    sentinels_.push_back(std::make_unique<redis_server>(
        "",
        std::vector<std::string>{"sentinel monitor " + name + " 127.0.0.1 " + master_port + " 2",
                                 "sentinel down-after-milliseconds " + name + " 1000",
                                 "sentinel failover-timeout " + name + " 3000"}));
  }
  for (const auto& s : sentinels_) {
    if (!within_15s([&s, &name] {
          const std::string master = redis_cli(s->port(), "sentinel master " + name);
          return master.find("num-slaves\n1") != std::string::npos &&
                 master.find("num-other-sentinels\n2") != std::string::npos;
        })) {
      throw std::runtime_error(
          "redis_sentinel_set: a sentinel did not see the replica and the "
          "other sentinels");
    }
  }
}

std::string redis_sentinel_set::url() const {
  std::string hosts;
  for (const auto& s : sentinels_) {
    if (!hosts.empty()) hosts += ",";
    hosts += "127.0.0.1:" + std::to_string(s->port());
  }
  return "redis+sentinel://" + hosts + "/" + k_master_name;
}

bool redis_sentinel_set::kill_master_and_wait_for_failover() {
  master_->kill();
  const std::string replica_port = std::to_string(replica_->port());
  return within_15s([this, &replica_port] {
    for (const auto& s : sentinels_) {
      const std::string addr =
          redis_cli(s->port(), std::string("sentinel get-master-addr-by-name ") + k_master_name);
      if (addr.find(replica_port) == std::string::npos) return false;
    }
    return redis_cli(replica_->port(), "role").rfind("master", 0) == 0;
  });
}

redis_cluster::redis_cluster() {
  const std::vector<std::string> config{"cluster-enabled yes", "cluster-node-timeout 1000",
                                        "cluster-config-file nodes.conf"};
  for (int i = 0; i < 6; ++i) nodes_.push_back(std::make_unique<redis_server>("", config));
  std::string create = "redis-cli --cluster create";
  for (const auto& n : nodes_) create += " 127.0.0.1:" + std::to_string(n->port());
  create += " --cluster-replicas 1 --cluster-yes >/dev/null 2>&1";
  if (std::system(create.c_str()) != 0) throw std::runtime_error("redis-cli --cluster create");
  if (!wait_until_ok()) throw std::runtime_error("the cluster did not reach cluster_state:ok");
  // A replica takes over only once it has synced with its master.
  for (int tries = 0; replicas_up() < 3; ++tries) {
    if (tries == 150) throw std::runtime_error("the replicas did not sync with their masters");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int redis_cluster::replicas_up() {
  int up = 0;
  for (const auto& n : nodes_) {
    const std::string info = redis_cli(n->port(), "info replication");
    if (info.find("role:slave") != std::string::npos &&
        info.find("master_link_status:up") != std::string::npos) {
      ++up;
    }
  }
  return up;
}

std::size_t redis_cluster::master_of(const std::string& key) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->pid() <= 0) continue;
    const std::string reply = redis_cli(nodes_[i]->port(), "get '" + key + "'");
    if (!reply.starts_with("MOVED") && !reply.starts_with("ASK") &&
        !reply.starts_with("CLUSTERDOWN") && !reply.starts_with("Could not connect")) {
      return i;
    }
  }
  return nodes_.size();
}

bool redis_cluster::wait_until_ok() {
  for (int tries = 0; tries < 150; ++tries) {
    bool ok = true;
    for (const auto& n : nodes_) {
      if (n->pid() <= 0) continue;
      ok = ok && redis_cli(n->port(), "cluster info").find("cluster_state:ok") != std::string::npos;
    }
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace stormguard::test_support
