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
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "command.hpp"
#include "lab_fleet_syncers.hpp"
#include "output.hpp"
#include "process.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/detail/redis_url.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/sim/simulator.hpp"

extern char** environ;

namespace stormguard::cli {

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// Counts of the workers' fleet budget syncers (summed lab::part_report counts).
struct redis_sync_totals {
  std::int64_t syncs = 0;
  std::int64_t errors = 0;
  std::int64_t rejoins = 0;
};

// A child process with its stdout on a pipe.
struct child {
  pid_t pid = -1;
  int out = -1;
};

// The environment variable that hands a worker the store's URL: never its argv, which any user
// of the machine can read (ps), since the URL may hold the store's password.
constexpr std::string_view k_store_env = "STORMGUARD_LAB_FLEET_STORE";

// This process's environment with `name`=`value` set (replaced if present).
std::vector<std::string> environment_with(std::string_view name, const std::string& value) {
  std::vector<std::string> out;
  const std::string prefix = std::string(name) + "=";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::string_view(*e).rfind(prefix, 0) != 0) out.emplace_back(*e);
  }
  out.push_back(prefix + value);
  return out;
}

// A worker's --fleet-store: the URL is in its environment, of a store of the user's ("-") or of
// one the lab started (`auto`: no password).
constexpr std::string_view k_user_from_env = "-";
constexpr std::string_view k_auto_from_env = "-auto";

// A worker's store URL: `store`, or "-" / "-auto" for the one its parent put in its environment.
std::string worker_store_url(const std::string& store) {
  if (store != k_user_from_env && store != k_auto_from_env) return store;
  const char* url = std::getenv(std::string(k_store_env).c_str());
  return url != nullptr ? url : "";
}

std::optional<child> spawn(const std::vector<std::string>& args, bool quiet_output,
                           const std::vector<std::string>& env) {
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
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    errno = rc;
    return std::nullopt;
  }
  return child{pid, fds[0]};
}

// The workers that may still be signalled. A worker leaves (under the mutex) before it is reaped,
// so a signal never reaches a process that has reused its pid.
class live_workers {
 public:
  explicit live_workers(const std::vector<child>& workers) {
    for (const child& w : workers) pids_.push_back(w.pid);
  }
  void reaping(pid_t pid) {
    const std::lock_guard hold(mutex_);
    std::erase(pids_, pid);
  }
  void signal_all(int signal) {
    const std::lock_guard hold(mutex_);
    for (const pid_t pid : pids_) ::kill(pid, signal);
  }

 private:
  std::mutex mutex_;
  std::vector<pid_t> pids_;
};

// Reads the child's whole stdout, then reaps it (leaving `live` first, when given); how it ended:
// exited with its status (child_status::kind::exited) or killed by a signal (kind::signaled, the
// signal's number).
child_status finish(const child& c, std::string& out, live_workers* live = nullptr) {
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
  if (live != nullptr) live->reaping(c.pid);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return child_status{child_status::kind::signaled, WTERMSIG(status)};
  return child_status{child_status::kind::exited, WIFEXITED(status) ? WEXITSTATUS(status) : 1};
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
    if (auto problem = r->run()) return failure{*std::move(problem)};
    return r;
  }
  // Starts redis-server again on the same port and directory (after kill): "Redis restarted".
  std::optional<std::string> restart() { return run(); }
  ~auto_redis() {
    kill(SIGTERM);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  auto_redis(const auto_redis&) = delete;
  auto_redis& operator=(const auto_redis&) = delete;

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
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
  // Runs redis-server on port_ and waits (at most 10 s) until it accepts connections; what went
  // wrong otherwise.
  std::optional<std::string> run() {
    const std::vector<std::string> args{"redis-server",
                                        "--port",
                                        std::to_string(port_),
                                        "--bind",
                                        "127.0.0.1",
                                        "--save",
                                        "",
                                        "--appendonly",
                                        "no",
                                        "--dir",
                                        dir_,
                                        "--daemonize",
                                        "no",
                                        "--logfile",
                                        dir_ + "/redis.log"};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (const int rc = posix_spawnp(&pid_, "redis-server", nullptr, nullptr, argv.data(), environ);
        rc != 0) {
      pid_ = -1;
      return "--fleet-store auto: cannot run redis-server (" + std::string(std::strerror(rc)) +
             "; scripts/bootstrap installs it)";
    }
    const auto until = steady::now() + 10s;
    while (!answers(port_)) {
      if (steady::now() > until || ::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        return "--fleet-store auto: redis-server did not start on 127.0.0.1:" +
               std::to_string(port_) + " (its log: " + dir_ + "/redis.log)";
      }
      std::this_thread::sleep_for(10ms);
    }
    return std::nullopt;
  }
  std::string dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

std::optional<duration> kill_time(const std::string& at) {
  if (at.empty()) return std::nullopt;
  return parse_duration(at);
}

// A thread that kills `redis` at `at` and, when `again` is given, starts it again then on its
// port; it gives up when stopped first.
std::jthread kill_and_restart(auto_redis& redis, steady::time_point at,
                              std::optional<steady::time_point> again) {
  return std::jthread([&redis, at, again](std::stop_token token) {
    const auto wait = [&token](steady::time_point until) {
      while (!token.stop_requested() && steady::now() < until) std::this_thread::sleep_for(10ms);
      return !token.stop_requested();
    };
    if (!wait(at)) return;
    report_log("lab", "killing redis-server (--fleet-store-kill-at)");
    redis.kill(SIGKILL);
    if (!again || !wait(*again)) return;
    if (auto problem = redis.restart()) {
      report_warning("lab", *problem);
    } else {
      report_log("lab", "redis-server restarted on the same port (--fleet-store-restart-at)");
    }
  });
}

// A thread that sends FLUSHALL to the redis-server on `port` at `at` (--fleet-store-flush-at),
// over a raw socket (the command is one RESP array); it gives up when stopped first.
std::jthread flush_at(std::uint16_t port, steady::time_point at) {
  return std::jthread([port, at](std::stop_token token) {
    while (!token.stop_requested() && steady::now() < at) std::this_thread::sleep_for(1ms);
    if (token.stop_requested()) return;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    constexpr std::string_view command = "*1\r\n$8\r\nFLUSHALL\r\n";
    std::array<char, 64> reply{};
    const bool sent = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
                      ::send(fd, command.data(), command.size(), MSG_NOSIGNAL) ==
                          static_cast<ssize_t>(command.size()) &&
                      ::recv(fd, reply.data(), reply.size(), 0) > 0 && reply[0] == '+';
    ::close(fd);
    if (sent) {
      report_log("lab", "FLUSHALL sent to redis-server (--fleet-store-flush-at)");
    } else {
      report_warning("lab", "--fleet-store-flush-at: FLUSHALL was not answered");
    }
  });
}

// What the workers of one run left: their reports, the first failure that ends the command
// ("" when none), and the workers killed by a signal (their parts are missing: the run is
// invalid, but the others' figures are still reported).
struct collected {
  std::vector<lab::part_report> reports;
  std::string error;
  // "worker 1/4 (pid 4242) was killed by signal 9 (SIGKILL)", joined by "; "
  std::string killed;
};

// The status with which a worker says that SIGINT or SIGTERM stopped it before the end of its
// run, after printing its report of the part it ran (128 + the signal, as the shells count it).
bool stopped_by_signal(const child_status& end) noexcept {
  return end.how == child_status::kind::exited &&
         (end.value == 128 + SIGINT || end.value == 128 + SIGTERM);
}

// "SIGTERM" for 15; "signal N" for a number the C library does not name.
std::string signal_name(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  return abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(signal);
}

// Waits for every worker (worker k of `workers.size()`) and reads its report. A worker stopped
// by SIGINT/SIGTERM reported part of its run: its report is kept when this process was stopped
// too (Ctrl-C reaches the whole process group: the run is interrupted, its partial report
// printed), and counts as a worker killed otherwise (stopped alone, its part is cut short).
collected collect(const std::vector<child>& workers, const std::atomic<bool>* stop,
                  live_workers& live) {
  collected c;
  for (std::size_t k = 0; k < workers.size(); ++k) {
    std::string out;
    const child_status end = finish(workers[k], out, &live);
    const std::string name =
        fmt::format("worker {}/{} (pid {})", k, workers.size(), workers[k].pid);
    const bool interrupted = stop != nullptr && stop->load();
    if (end.how == child_status::kind::signaled) {
      c.killed += fmt::format("{}{} {}", c.killed.empty() ? "" : "; ", name, end.describe());
    } else if (stopped_by_signal(end) && !interrupted) {
      c.killed += fmt::format("{}{} was stopped by signal {} ({}) before the end of the run",
                              c.killed.empty() ? "" : "; ", name, end.value - 128,
                              signal_name(end.value - 128));
    } else if (end.value != 0 && !stopped_by_signal(end)) {
      // It ended on its own with a failure (a bad option, a server it could not reach): the
      // command fails (exit 1), as for any other failure at run time.
      if (c.error.empty()) {
        c.error = fmt::format("{} {} (its message is above)", name, end.describe());
      }
    } else {
      try {
        c.reports.push_back(lab::part_report_from_json(out));
      } catch (const std::invalid_argument& e) {
        if (c.error.empty()) c.error = e.what();
      }
    }
  }
  return c;
}

// Passes a stop on to the workers (SIGINT), once `stop` is set: a SIGINT or SIGTERM sent to this
// process alone (`kill PID`, where a terminal's Ctrl-C reaches the whole process group) would
// otherwise wait for the end of the run. A worker that has the signal already stops the same.
std::jthread forward_stop(live_workers& live, const std::atomic<bool>* stop) {
  return std::jthread([&live, stop](std::stop_token token) {
    while (!token.stop_requested()) {
      if (stop != nullptr && stop->load()) {
        live.signal_all(SIGINT);
        return;
      }
      std::this_thread::sleep_for(10ms);
    }
  });
}

// Kills worker 0 of `workers` with SIGKILL at `at` (--fleet-worker-kill-at), unless the run
// ends first; says so on stderr, naming the worker and its pid.
std::jthread kill_worker(pid_t pid, std::size_t workers, steady::time_point at) {
  return std::jthread([pid, workers, at](std::stop_token token) {
    while (!token.stop_requested() && steady::now() < at) std::this_thread::sleep_for(10ms);
    if (token.stop_requested()) return;
    report_log("lab",
               fmt::format("killing worker 0/{} (pid {}) with SIGKILL (--fleet-worker-kill-at)",
                           workers, pid));
    ::kill(pid, SIGKILL);
  });
}

// One line on stderr with the workers' syncer counts, when they used a store.
void say_sync_totals(const std::string& strategy, const std::vector<lab::part_report>& reports,
                     duration length) {
  redis_sync_totals t;
  std::int64_t syncers = 0;
  std::int64_t never = 0;
  double fallback_s = 0;
  for (const lab::part_report& p : reports) {
    t.syncs += p.fleet_syncs;
    t.errors += p.fleet_sync_errors;
    t.rejoins += p.fleet_rejoins;
    syncers += p.fleet_syncers;
    never += p.fleet_never_synced;
    fallback_s += p.fleet_fallback_s;
  }
  if (t.syncs + t.errors == 0) return;
  const double run_s = std::chrono::duration<double>(length).count() * static_cast<double>(syncers);
  report_log("lab", fmt::format("{}: the fleet store answered {} syncs and failed {}; {} rejoins "
                                "after a failure; {} of {} syncers never synced; the budgets ran "
                                "in their fallback {:.1f} % of the run",
                                strategy, t.syncs, t.errors, t.rejoins, never, syncers,
                                run_s > 0 ? std::min(fallback_s / run_s, 1.0) * 100 : 0.0));
}

// What the workers' syncers saw of a store that forgot the fleet (lab::part_report's counts).
struct forgetting {
  std::int64_t syncs = 0;
  double at_s = -1;
  bool in_incident = false;
};

forgetting forgot_of(const std::vector<lab::part_report>& reports, const sim::scenario& s,
                     const sim::strategy& strategy) {
  forgetting f;
  for (const lab::part_report& p : reports) {
    f.syncs += p.fleet_forgotten;
    if (p.fleet_forgotten_at_s >= 0 && (f.at_s < 0 || p.fleet_forgotten_at_s < f.at_s)) {
      f.at_s = p.fleet_forgotten_at_s;
    }
  }
  if (f.syncs > 0) {
    const auto* fleet = std::get_if<fleet_budget_options>(&strategy.budget);
    const duration window = fleet != nullptr ? fleet->ratio.window : std::chrono::seconds(10);
    f.in_incident = lab::forgetting_touches_incident(
        s, std::chrono::duration_cast<duration>(std::chrono::duration<double>(f.at_s)), window);
  }
  return f;
}

// Why one strategy's run is invalid ("" when valid): a worker's own sockets or the server's
// failed, as in the one-process lab; a worker was killed (its part of the fleet is missing from
// the lab's column); the store did not serve the run (`store_why`, "" when it did or was
// stopped on purpose); or it forgot the fleet within a window of the incident when nobody
// flushed or restarted it on purpose (the figures then measure a store fault the simulator's
// column does not model).
std::string invalid_reason(const collected& done, const lab::server_stats& st, std::size_t workers,
                           const sim::strategy& strategy, const std::string& store_why,
                           const forgetting& forgot, bool forgot_on_purpose) {
  std::string invalid = lab::parts_invalid_reason(done.reports, st);
  const auto add = [&invalid](const std::string& why) {
    if (!why.empty()) invalid += (invalid.empty() ? "" : "; ") + why;
  };
  if (!done.killed.empty()) {
    // A fleet budget's claims held by the killed worker stay reserved until its heartbeat
    // expires (3 x max_sync_interval): the survivors spent less than the whole allowance.
    const bool fleet = std::holds_alternative<fleet_budget_options>(strategy.budget);
    add(done.killed + fmt::format(": the lab's column holds {} of {} parts of the fleet{}",
                                  done.reports.size(), workers,
                                  fleet ? ", and the killed worker's budget claims came back "
                                          "only after the store's heartbeat"
                                        : ""));
  }
  add(store_why);
  if (forgot.in_incident && !forgot_on_purpose) {
    add(
        fmt::format("the fleet store forgot the fleet {:.1f} s into the run ({} syncs found "
                    "another epoch: restarted empty, flushed, evicted or failed over), within a "
                    "window of the incident, whose figures then include a store fault the "
                    "simulator's column does not model",
                    forgot.at_s, forgot.syncs));
  }
  return invalid;
}

// lab::parts_store_reason with the store named as the user knows it: the URL redacted, or
// `auto` and the address of the redis-server the lab started.
std::string store_reason(const std::vector<lab::part_report>& reports, const std::string& url,
                         bool auto_store, const sim::scenario& s) {
  const std::string name = auto_store
                               ? "auto (redis-server at " + detail::redact_redis_url(url) + ")"
                               : detail::redact_redis_url(url);
  return lab::parts_store_reason(reports, name, s.length);
}

// Starts the --processes workers of one strategy's run (this executable again, with the hidden
// --fleet-worker options); the store's URL reaches them in the environment, never in their
// arguments. If one cannot start, those started are stopped and the error says why.
outcome<std::vector<child>, std::string> start_workers(
    const lab_fleet_store_options& o, const std::string& strategy, const std::string& server_url,
    steady::time_point start, bool auto_store, const std::string& url, const std::string& key) {
  std::vector<child> workers;
  for (int k = 0; k < o.processes; ++k) {
    std::vector<std::string> args = o.worker_base;
    for (const std::string& a :
         {std::string("--strategy"), strategy, std::string("--fleet-worker"),
          std::to_string(k) + "/" + std::to_string(o.processes), std::string("--fleet-server"),
          server_url, std::string("--fleet-start"),
          std::to_string(
              std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch())
                  .count()),
          std::string("--fleet-store"), std::string(auto_store ? k_auto_from_env : k_user_from_env),
          std::string("--fleet-key"), key}) {
      args.push_back(a);
    }
    auto c = spawn(args, false, environment_with(k_store_env, url));  // "-": the URL is there
    if (!c) {
      const std::string why = std::strerror(errno);
      for (const child& w : workers) ::kill(w.pid, SIGTERM);
      std::string ignored;
      for (const child& w : workers) (void)finish(w, ignored);
      return failure{"cannot start a worker process: " + why};
    }
    workers.push_back(*c);
  }
  return workers;
}

}  // namespace

bool wants_fleet_store(const lab_fleet_store_options& o) noexcept {
  return !o.store.empty() || !o.worker.empty();
}

outcome<lab::lab_report, std::string> run_lab_fleet_store(const lab_fleet_store_options& o,
                                                          const sim::scenario& s,
                                                          std::span<const sim::strategy> strategies,
                                                          const std::atomic<bool>* stop) {
  const std::optional<duration> kill_at = kill_time(o.kill_at);
  const std::optional<duration> restart_at = kill_time(o.restart_at);
  lab::lab_report report{s, {}, false, o.transport};
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
    auto listener = lab::start_grpc_listener(*srv, o.transport);
    if (!listener) return failure{listener.error()};
    const std::string server_target =
        o.transport == lab::lab_transport_kind::grpc ? listener->target : srv->url();
    // Every worker starts its fleet at one instant of the steady clock (one clock for every
    // process of the machine), far enough ahead for the workers to be up.
    const steady::time_point start = steady::now() + 1500ms;
    const std::string key =
        "stormguard-lab-" + std::to_string(::getpid()) + "-" + std::to_string(i);
    auto spawned =
        start_workers(o, strategies[i].name, server_target, start, redis != nullptr, url, key);
    if (!spawned) return failure{spawned.error()};
    const std::vector<child> workers = *std::move(spawned);
    std::this_thread::sleep_until(start);
    srv->start_clock();
    std::jthread killer;
    if (redis && kill_at) {
      killer = kill_and_restart(*redis, start + *kill_at,
                                restart_at ? std::optional(start + *restart_at) : std::nullopt);
    }
    std::jthread flusher;
    if (const std::optional<duration> at = kill_time(o.flush_at); redis && at) {
      flusher = flush_at(redis->port(), start + *at);
    }
    std::jthread worker_killer;
    if (const std::optional<duration> at = kill_time(o.worker_kill_at)) {
      worker_killer = kill_worker(workers.front().pid, workers.size(), start + *at);
    }
    live_workers live(workers);
    std::jthread forwarder = forward_stop(live, stop);
    collected done = collect(workers, stop, live);
    for (std::jthread* t : {&forwarder, &killer, &flusher, &worker_killer}) {
      if (t->joinable()) {
        t->request_stop();
        t->join();
      }
    }
    const std::string& error = done.error;
    std::vector<lab::part_report>& reports = done.reports;
    const lab::server_stats st = srv->stats();
    srv->stop();
    listener->stop();  // after the server, which has answered every call it held
    if (!error.empty()) return failure{error};
    say_sync_totals(strategies[i].name, reports, s.length);
    sim::strategy modelled = strategies[i];
    if (kill_at) {
      modelled.fleet_store.outage =
          sim::fleet_store_outage{*kill_at, restart_at ? *restart_at : s.length};
    }
    std::vector<sim::strategy_result> parts;
    for (const lab::part_report& p : reports) parts.push_back(p.result);
    sim::strategy_result merged = lab::merge_parts(s, parts, st);
    merged.name = strategies[i].name;
    const forgetting forgot = forgot_of(reports, s, strategies[i]);
    std::string invalid =
        invalid_reason(done, st, workers.size(), strategies[i],
                       kill_at ? std::string() : store_reason(reports, url, !!redis, s), forgot,
                       !o.flush_at.empty() || restart_at.has_value());
    const bool valid = invalid.empty();
    lab::lab_comparison c{strategies[i].name,
                          std::move(merged),
                          sim::simulate(s, modelled),
                          !(stop != nullptr && stop->load()),
                          valid,
                          std::move(invalid)};
    c.store_forgot = forgot.syncs;
    c.store_forgot_at_s = forgot.at_s;
    c.store_forgot_in_incident = forgot.in_incident;
    report.strategies.push_back(std::move(c));
    if (stop != nullptr && stop->load()) {  // this run was cut short: no further one (as run_lab)
      report.interrupted = true;
      break;
    }
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
  const auto start = steady::time_point(std::chrono::nanoseconds(o.start_ns));
  worker_syncers syncers(worker_store{worker_store_url(o.store), o.store == k_auto_from_env, o.key,
                                      "lab worker " + o.worker, k, start});
  lab::fleet_options options;
  options.stop = stop;
  options.attach_fleet_budget = syncers.hook();
  options.transport = o.transport;
  auto run = lab::run_fleet_part(part, strategy, o.server_url, start, options);
  if (!run) {
    report_error("lab", printable_message(run.error()));
    return exit_failure;
  }
  lab::part_report out{std::move((*run).result), (*run).transport_failures,
                       (*run).first_transport_failure};
  syncers.finish(out);  // the syncers' counts (the run destroyed its syncers: their counts kept)
  if (!write_all(stdout, lab::part_report_to_json(out))) return exit_failure;
  return exit_success;
}

}  // namespace stormguard::cli
