// SPDX-License-Identifier: Apache-2.0
// The POSIX process runner behind `stormguard exec`: runs a command once in its own process
// group with a time limit (SIGTERM, then SIGKILL after a grace), and forwards SIGINT, SIGTERM,
// SIGHUP and SIGQUIT received by stormguard to the running command (SIGKILL on a second signal or
// once the grace has passed).
//
//   stormguard::cli::interrupt_forwarder forwarder;   // installs the signal handlers
//   auto status = stormguard::cli::run_process({"sh", "-c", "exit 3"}, std::chrono::seconds(5),
//                                              std::chrono::seconds(2), forwarder);
//   status.exit_status();                             // 3
//
// Linux/POSIX only (posix_spawnp, waitid, pidfd_open when the kernel has it).
#ifndef STORMGUARD_CLI_PROCESS_HPP
#define STORMGUARD_CLI_PROCESS_HPP

#include <sys/types.h>

#include <atomic>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "stormguard/clock.hpp"
#include "stormguard/detail/mutex.hpp"

namespace stormguard::cli {

/// How one run of a command ended.
struct child_status {
  enum class kind {
    exited,        ///< exited on its own; value = the exit code (0..255)
    signaled,      ///< killed by a signal it was not sent by the time limit; value = the signal
    timed_out,     ///< ran past its time limit and was killed; value = the signal that ended it
    spawn_failed,  ///< could not be started (not found, not executable…); value = the errno
  };
  kind how = kind::exited;
  int value = 0;

  /// The shell-style exit status: the exit code; 128 + N for signal N; 124 for a time-out
  /// (like timeout(1)); 127 when the command could not be started.
  [[nodiscard]] int exit_status() const noexcept;
  /// "exited with status 3", "was killed by signal 9 (SIGKILL)", "timed out (ended by SIGTERM)",
  /// "could not be started: No such file or directory".
  [[nodiscard]] std::string describe() const;
};

/// Status 124: a time-out (the attempt timeout or the deadline), as timeout(1) reports it.
inline constexpr int k_exit_timed_out = 124;
/// Status 127: the command could not be found or executed, as the shells report it.
inline constexpr int k_exit_cannot_run = 127;

/// Catches SIGINT, SIGTERM, SIGHUP and SIGQUIT while it lives: the first signal requests a stop
/// on token() and is forwarded to the process group of the command being run (if any). Then the
/// group gets SIGKILL on a second signal, or once `kill_grace` has passed since the first (a
/// command that ignores the signal cannot keep stormguard running); a group attached after that
/// gets SIGKILL at once. The handler only writes the signal number to a self-pipe
/// (async-signal-safe); a thread does the rest. The previous dispositions are restored on
/// destruction.
///
/// At most one instance per process (the handler's pipe is process-wide state, as signal
/// dispositions are). attach/detach/received/token are thread-safe.
class interrupt_forwarder {
 public:
  /// Throws std::system_error when the pipe, the handlers or the thread cannot be set up.
  explicit interrupt_forwarder(duration kill_grace = std::chrono::seconds(2));
  ~interrupt_forwarder();
  interrupt_forwarder(const interrupt_forwarder&) = delete;
  interrupt_forwarder& operator=(const interrupt_forwarder&) = delete;

  /// Stopped when one of the signals arrives.
  [[nodiscard]] std::stop_token token() const noexcept { return stop_.get_token(); }
  /// The first signal received (SIGINT, SIGTERM, SIGHUP or SIGQUIT), 0 if none.
  [[nodiscard]] int received() const noexcept { return received_.load(); }

  /// From now on, forward signals to process group `pgid`. If a signal already arrived, it is
  /// sent to the group at once (SIGKILL if the escalation already happened) (so a command started
  /// just as the signal came still gets it).
  void attach(pid_t pgid);
  /// Stop forwarding (call before reaping the group's leader, so that its id cannot be reused
  /// by an unrelated group while a signal is being forwarded).
  void detach();

 private:
  void loop();

  int pipe_[2] = {-1, -1};
  std::stop_source stop_;
  std::atomic<int> received_{0};
  duration kill_grace_;
  stormguard::detail::mutex mutex_;
  pid_t pgid_ STORMGUARD_GUARDED_BY(mutex_) = 0;
  // escalated: the group (and any attached later) gets SIGKILL
  bool killing_ STORMGUARD_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

/// Runs `argv` (argv[0] looked up in PATH) with stdin/stdout/stderr inherited, in a new process
/// group whose id is the child's pid, with the forwarded signals at their default dispositions and
/// no signal blocked. Waits until it exits or `time_limit` passes (duration::max() = no limit);
/// past the limit the whole group gets SIGTERM, and SIGKILL once `grace` has passed (or at once
/// when the command leaves earlier, which sweeps up what it left in its group). A signal received
/// by `forwarder` ends the group the same way: forwarded, then SIGKILL once `grace` has passed
/// (by the forwarder), and SIGKILL to whatever remains in the group as soon as the command itself
/// has ended (a background job that ignores SIGINT, for one). Returns how the command ended.
/// Precondition: argv is not empty.
[[nodiscard]] child_status run_process(const std::vector<std::string>& argv, duration time_limit,
                                       duration grace, interrupt_forwarder& forwarder);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_PROCESS_HPP
