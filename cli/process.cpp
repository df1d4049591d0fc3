// SPDX-License-Identifier: Apache-2.0
// The POSIX process runner of `stormguard exec` (see process.hpp).
#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>

#include "stormguard/detail/saturate.hpp"

extern char** environ;

namespace stormguard::cli {

namespace {

// The write end of the self-pipe, for the signal handler (the only state a handler may reach).
volatile std::sig_atomic_t g_signal_pipe = -1;

extern "C" void on_interrupt(int signal) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signal);
  // Non-blocking: if the pipe is full, enough signals are already queued.
  const ssize_t ignored = ::write(g_signal_pipe, &byte, 1);
  (void)ignored;
  errno = saved;
}

constexpr int k_forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
struct sigaction g_previous[std::size(k_forwarded)];

std::system_error errno_error(const char* what) {
  return std::system_error(errno, std::generic_category(), what);
}

time_point now() {
  return std::chrono::time_point_cast<duration>(std::chrono::steady_clock::now());
}

// A pidfd for `pid` (readable once it exits), or -1 when the kernel has no pidfd_open.
int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -1 : static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

// Waits until `pid` has exited (without reaping it) or `until` passes; true if it exited.
bool wait_exit(pid_t pid, int pidfd, time_point until) {
  while (true) {
    siginfo_t info{};
    const int r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid) return true;
    if (r != 0 && errno != EINTR) return true;  // ECHILD: nothing left to wait for
    const time_point t = now();
    if (t >= until) return false;
    // Sleep until the pidfd is readable (the child exited) or the limit; without a pidfd, poll
    // the child every 5 ms. Waits are cut into 1-hour slices (poll takes an int of ms).
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - t);
    const auto slice = std::min<std::chrono::milliseconds>(
        left, pidfd >= 0 ? std::chrono::hours(1) : std::chrono::milliseconds(5));
    pollfd p{pidfd, POLLIN, 0};
    (void)::poll(pidfd >= 0 ? &p : nullptr, pidfd >= 0 ? 1 : 0, static_cast<int>(slice.count()));
  }
}

}  // namespace

int child_status::exit_status() const noexcept {
  switch (how) {
    case kind::exited:
      return value;
    case kind::signaled:
      return 128 + value;
    case kind::timed_out:
      return k_exit_timed_out;
    case kind::spawn_failed:
      return k_exit_cannot_run;
  }
  return 1;
}

std::string child_status::describe() const {
  const auto signal_name = [](int s) {
    const char* abbrev = ::sigabbrev_np(s);
    return abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(s);
  };
  switch (how) {
    case kind::exited:
      return "exited with status " + std::to_string(value);
    case kind::signaled:
      return "was killed by signal " + std::to_string(value) + " (" + signal_name(value) + ")";
    case kind::timed_out:
      return "timed out (ended by " + signal_name(value) + ")";
    case kind::spawn_failed:
      return std::string("could not be started: ") + std::strerror(value);
  }
  return "ended";
}

interrupt_forwarder::interrupt_forwarder(duration kill_grace) : kill_grace_(kill_grace) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0) throw errno_error("pipe2");
  // The handler must never block; the reading thread does.
  (void)::fcntl(pipe_[1], F_SETFL, O_NONBLOCK);
  g_signal_pipe = pipe_[1];
  thread_ = std::thread([this] { loop(); });
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < std::size(k_forwarded); ++i) {
    (void)::sigaction(k_forwarded[i], &action, &g_previous[i]);
  }
}

interrupt_forwarder::~interrupt_forwarder() {
  for (std::size_t i = 0; i < std::size(k_forwarded); ++i) {
    (void)::sigaction(k_forwarded[i], &g_previous[i], nullptr);
  }
  const unsigned char quit = 0;
  while (::write(pipe_[1], &quit, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  g_signal_pipe = -1;
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void interrupt_forwarder::loop() {
  // After the first signal: when the group gets SIGKILL if no second signal came before.
  std::optional<time_point> kill_at;
  while (true) {
    int timeout_ms = -1;
    if (kill_at) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_at - now());
      timeout_ms = static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(
          left.count(), 0, std::chrono::milliseconds(std::chrono::hours(1)).count()));
    }
    pollfd p{pipe_[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (kill_at && now() >= *kill_at) {
        kill_at.reset();
        const stormguard::detail::lock hold(mutex_);
        killing_ = true;
        if (pgid_ > 0) (void)::kill(-pgid_, SIGKILL);
      }
      continue;
    }
    unsigned char byte = 0;
    const ssize_t n = ::read(pipe_[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == 0) return;
    const int signal = byte;
    int none = 0;
    const bool first = received_.compare_exchange_strong(none, signal);
    stop_.request_stop();
    const stormguard::detail::lock hold(mutex_);
    if (first) {
      kill_at = detail::saturating_add(now(), kill_grace_);
      if (pgid_ > 0) (void)::kill(-pgid_, signal);
    } else {
      // A second signal: the command had its chance to stop.
      kill_at.reset();
      killing_ = true;
      if (pgid_ > 0) (void)::kill(-pgid_, SIGKILL);
    }
  }
}

void interrupt_forwarder::attach(pid_t pgid) {
  const stormguard::detail::lock hold(mutex_);
  pgid_ = pgid;
  // A signal that came before attach (between the stop check and the spawn) still reaches it.
  if (const int signal = received_.load(); signal != 0) {
    (void)::kill(-pgid_, killing_ ? SIGKILL : signal);
  }
}

void interrupt_forwarder::detach() {
  const stormguard::detail::lock hold(mutex_);
  pgid_ = 0;
}

child_status run_process(const std::vector<std::string>& argv, duration time_limit, duration grace,
                         interrupt_forwarder& forwarder) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  posix_spawnattr_t attr;
  if (const int rc = ::posix_spawnattr_init(&attr); rc != 0) {
    return child_status{child_status::kind::spawn_failed, rc};
  }
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : k_forwarded) sigaddset(&defaults, s);
  // stormguard ignores SIGPIPE (main.cpp); an ignored signal stays ignored across exec, so the
  // command gets the default back: `yes | head -1` in it must end as it does in a shell.
  sigaddset(&defaults, SIGPIPE);
  (void)::posix_spawnattr_setflags(
      &attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  (void)::posix_spawnattr_setpgroup(&attr, 0);  // a new group, id = the child's pid
  (void)::posix_spawnattr_setsigmask(&attr, &none);
  (void)::posix_spawnattr_setsigdefault(&attr, &defaults);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), environ);
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0) return child_status{child_status::kind::spawn_failed, rc};

  forwarder.attach(pid);
  const int pidfd = open_pidfd(pid);
  const time_point start = now();
  bool timed_out = false;
  if (!wait_exit(pid, pidfd, detail::saturating_add(start, time_limit))) {
    timed_out = true;
    (void)::kill(-pid, SIGTERM);
    const bool left = wait_exit(pid, pidfd, detail::saturating_add(now(), grace));
    // The leader is not reaped yet, so the group id is still ours: sweep what remains.
    (void)::kill(-pid, SIGKILL);
    if (!left) (void)wait_exit(pid, pidfd, time_point::max());
  }
  forwarder.detach();
  if (!timed_out && forwarder.received() != 0) {
    // A signal to stormguard ends the whole group as a time-out does: the signal was forwarded,
    // the leader had the grace to end (then the forwarder sent SIGKILL); now that it has ended,
    // sweep what it leaves in its group (a background job ignores SIGINT). Checked after detach,
    // so that a signal arriving up to here is seen; the leader is not reaped yet, so the group id
    // is still ours.
    (void)::kill(-pid, SIGKILL);
  }
  if (pidfd >= 0) ::close(pidfd);
  int status = 0;
  pid_t reaped = -1;
  while ((reaped = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  // Only if someone else reaped it (SIGCHLD ignored): the status is lost; count a failure.
  if (reaped != pid) return child_status{child_status::kind::exited, 1};
  if (WIFSIGNALED(status)) {
    return child_status{timed_out ? child_status::kind::timed_out : child_status::kind::signaled,
                        WTERMSIG(status)};
  }
  if (timed_out) return child_status{child_status::kind::timed_out, SIGTERM};
  return child_status{child_status::kind::exited, WEXITSTATUS(status)};
}

}  // namespace stormguard::cli
