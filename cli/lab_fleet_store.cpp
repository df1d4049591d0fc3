// SPDX-License-Identifier: Apache-2.0
#include "lab_fleet_store.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "command.hpp"
#include "output.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/sim/simulator.hpp"

#ifdef STORMGUARD_CLI_HAS_FLEET
#include "stormguard/fleet/redis_sync.hpp"
#endif

extern char** environ;

namespace stormguard::cli {

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// A child process with its stdout on a pipe.
struct child {
  pid_t pid = -1;
  int out = -1;
};

std::optional<child> spawn(const std::vector<std::string>& args, bool quiet_output) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  if (quiet_output) posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    errno = rc;
    return std::nullopt;
  }
  return child{pid, fds[0]};
}

// Reads the child's whole stdout, then reaps it; its exit status (-1 when killed).
int finish(const child& c, std::string& out) {
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(c.out, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::close(c.out);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool answers(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// `auto`: a redis-server in a private temporary directory on a loopback port, no persistence,
// stopped (and the directory removed) with the object.
class auto_redis {
 public:
  static outcome<std::unique_ptr<auto_redis>, std::string> start() {
    auto r = std::unique_ptr<auto_redis>(new auto_redis());
    const char* tmp = std::getenv("TMPDIR");
    std::string dir =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/stormguard-lab-redis-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) {
      return failure{"--fleet-store auto: cannot create a temporary directory: " +
                     std::string(std::strerror(errno))};
    }
    r->dir_ = dir;
    r->port_ = free_port();
    const std::vector<std::string> args{"redis-server",
                                        "--port",
                                        std::to_string(r->port_),
                                        "--bind",
                                        "127.0.0.1",
                                        "--save",
                                        "",
                                        "--appendonly",
                                        "no",
                                        "--dir",
                                        dir,
                                        "--daemonize",
                                        "no",
                                        "--logfile",
                                        dir + "/redis.log"};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (const int rc =
            posix_spawnp(&r->pid_, "redis-server", nullptr, nullptr, argv.data(), environ);
        rc != 0) {
      r->pid_ = -1;
      return failure{"--fleet-store auto: cannot run redis-server (" +
                     std::string(std::strerror(rc)) + "; scripts/bootstrap installs it)"};
    }
    const auto until = steady::now() + 10s;
    while (!answers(r->port_)) {
      if (steady::now() > until || ::waitpid(r->pid_, nullptr, WNOHANG) == r->pid_) {
        return failure{"--fleet-store auto: redis-server did not start on 127.0.0.1:" +
                       std::to_string(r->port_) + " (its log: " + dir + "/redis.log)"};
      }
      std::this_thread::sleep_for(10ms);
    }
    return r;
  }
  ~auto_redis() {
    kill(SIGTERM);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  auto_redis(const auto_redis&) = delete;
  auto_redis& operator=(const auto_redis&) = delete;

  [[nodiscard]] std::string url() const {
    return "redis://127.0.0.1:" + std::to_string(port_) + "/0";
  }
  // Stops it (SIGKILL for "Redis dies mid-run") and reaps it.
  void kill(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

 private:
  auto_redis() = default;
  std::string dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

std::optional<duration> kill_time(const lab_fleet_store_options& o) {
  if (o.kill_at.empty()) return std::nullopt;
  return parse_duration(o.kill_at);
}

// One strategy's row: invalid when the lab server ran out of descriptors (its accept() failed or
// it refused connections at its cap), as in the one-process lab (lab::run_lab).
lab::lab_comparison compared(std::string name, sim::strategy_result lab_result,
                             sim::strategy_result sim_result, bool completed,
                             const lab::server_stats& st) {
  lab::lab_comparison c{
      std::move(name), std::move(lab_result), std::move(sim_result), completed, true,
      std::string()};
  if (st.accept_errors > 0 || st.connections_refused > 0) {
    c.valid = false;
    c.invalid_reason = fmt::format(
        "the lab server's accept() failed {} times and it closed {} new connections at its "
        "connection cap (descriptors ran out: raise RLIMIT_NOFILE, ulimit -n, or lower --scale); "
        "the figures measure the lab, not the scenario",
        st.accept_errors, st.connections_refused);
  }
  return c;
}

}  // namespace

bool wants_fleet_store(const lab_fleet_store_options& o) noexcept {
  return !o.store.empty() || !o.worker.empty();
}

outcome<lab::lab_report, std::string> run_lab_fleet_store(const lab_fleet_store_options& o,
                                                          const sim::scenario& s,
                                                          std::span<const sim::strategy> strategies,
                                                          const std::atomic<bool>* stop) {
  const std::optional<duration> kill_at = kill_time(o);
  lab::lab_report report{s, {}, false};
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    if (stop != nullptr && stop->load()) {
      report.interrupted = true;
      break;
    }
    std::unique_ptr<auto_redis> redis;
    std::string url = o.store;
    if (o.store == "auto") {
      auto started = auto_redis::start();
      if (!started) return failure{started.error()};
      redis = *std::move(started);
      url = redis->url();
    }
    auto started = lab::server::start(s, {.port = 0, .start_clock = false});
    if (!started) return failure{started.error()};
    const std::unique_ptr<lab::server> srv = *std::move(started);
    // Every worker starts its fleet at one instant of the steady clock (one clock for every
    // process of the machine), far enough ahead for the workers to be up.
    const steady::time_point start = steady::now() + 1500ms;
    const std::string key =
        "stormguard-lab-" + std::to_string(::getpid()) + "-" + std::to_string(i);
    std::vector<child> workers;
    for (int k = 0; k < o.processes; ++k) {
      std::vector<std::string> args = o.worker_base;
      for (const std::string& a :
           {std::string("--strategy"), strategies[i].name, std::string("--fleet-worker"),
            std::to_string(k) + "/" + std::to_string(o.processes), std::string("--fleet-server"),
            srv->url(), std::string("--fleet-start"),
            std::to_string(
                std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch())
                    .count()),
            std::string("--fleet-store"), url, std::string("--fleet-key"), key}) {
        args.push_back(a);
      }
      auto c = spawn(args, false);
      if (!c) {
        for (const child& w : workers) ::kill(w.pid, SIGTERM);
        std::string ignored;
        for (const child& w : workers) (void)finish(w, ignored);
        return failure{"cannot start a worker process: " + std::string(std::strerror(errno))};
      }
      workers.push_back(*c);
    }
    std::this_thread::sleep_until(start);
    srv->start_clock();
    std::jthread killer;
    if (redis && kill_at) {
      killer = std::jthread([&redis, at = start + *kill_at](std::stop_token token) {
        while (!token.stop_requested() && steady::now() < at) std::this_thread::sleep_for(10ms);
        if (!token.stop_requested()) {
          report_log("lab", "killing redis-server (--fleet-store-kill-at)");
          redis->kill(SIGKILL);
        }
      });
    }
    std::vector<sim::strategy_result> parts;
    std::string error;
    for (const child& w : workers) {
      std::string out;
      const int status = finish(w, out);
      if (status != 0 && error.empty()) {
        error = "a worker process failed (exit status " + std::to_string(status) + ")";
      }
      if (status == 0) {
        try {
          parts.push_back(lab::part_from_json(out));
        } catch (const std::invalid_argument& e) {
          if (error.empty()) error = e.what();
        }
      }
    }
    if (killer.joinable()) {
      killer.request_stop();
      killer.join();
    }
    const lab::server_stats st = srv->stats();
    srv->stop();
    if (!error.empty()) return failure{error};
    sim::strategy modelled = strategies[i];
    if (kill_at) modelled.fleet_store.outage = sim::fleet_store_outage{*kill_at, s.length};
    sim::strategy_result merged = lab::merge_parts(s, parts, st);
    merged.name = strategies[i].name;
    report.strategies.push_back(compared(strategies[i].name, std::move(merged),
                                         sim::simulate(s, modelled),
                                         !(stop != nullptr && stop->load()), st));
  }
  return report;
}

int run_lab_fleet_worker(const lab_fleet_store_options& o, const sim::scenario& s,
                         const sim::strategy& strategy, const std::atomic<bool>* stop) {
  const auto slash = o.worker.find('/');
  std::size_t k = 0;
  std::size_t parts = 0;
  try {
    k = std::stoul(o.worker.substr(0, slash));
    parts = std::stoul(o.worker.substr(slash + 1));
  } catch (const std::exception&) {
    report_error("lab", "--fleet-worker must be K/P");
    return exit_usage;
  }
  const sim::scenario part = lab::fleet_part(s, k, parts);
  lab::fleet_options options;
  options.stop = stop;
#ifdef STORMGUARD_CLI_HAS_FLEET
  // One thread syncs every client's budget of this process, off the fleet's thread.
  struct pool {
    std::mutex mutex;
    std::vector<fleet::redis_sync*> syncs;
    std::atomic<bool> said_down{false};
    std::atomic<bool> said_up{false};
  };
  auto shared = std::make_shared<pool>();
  std::jthread syncer([shared](std::stop_token token) {
    while (!token.stop_requested()) {
      {
        const std::lock_guard hold(shared->mutex);
        for (fleet::redis_sync* one : shared->syncs) (void)one->sync_once(false);
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  const std::string label = "lab worker " + o.worker;
  options.attach_fleet_budget = [&o, shared, k, label](std::size_t client, fleet_budget& budget,
                                                       clock& time) -> std::shared_ptr<void> {
    auto log = [shared, label](std::string_view line) {
      const bool down = line.find("falling back") != std::string_view::npos;
      std::atomic<bool>& said = down ? shared->said_down : shared->said_up;
      if (!said.exchange(true)) report_warning("lab", label + ": " + std::string(line));
    };
    fleet::redis_sync_options so;
    so.url = o.store;
    so.key = o.key;
    so.client_id = "p" + std::to_string(k) + "-c" + std::to_string(client);
    so.start_thread = false;
    auto* sync = new fleet::redis_sync(budget, std::move(so), time, std::move(log));
    {
      const std::lock_guard hold(shared->mutex);
      shared->syncs.push_back(sync);
    }
    return std::shared_ptr<fleet::redis_sync>(sync, [shared](fleet::redis_sync* gone) {
      {
        const std::lock_guard hold(shared->mutex);
        std::erase(shared->syncs, gone);
      }
      delete gone;
    });
  };
#else
  report_warning("lab",
                 "--fleet-store: this stormguard was built without the fleet component "
                 "(STORMGUARD_WITH_FLEET=OFF): the fleet budgets use the simulator's store "
                 "model");
#endif
  const auto start = steady::time_point(std::chrono::nanoseconds(o.start_ns));
  auto run = lab::run_fleet_part(part, strategy, o.server_url, start, options);
  if (!run) {
    report_error("lab", printable_message(run.error()));
    return exit_failure;
  }
  if (!write_all(stdout, lab::part_to_json((*run).result))) return exit_failure;
  return exit_success;
}

}  // namespace stormguard::cli
