// SPDX-License-Identifier: Apache-2.0
// A test-only runner for the built `stormguard` executable: runs it with an argument vector (no
// shell), stdin on /dev/null, stdout and stderr captured in files, or stderr broken on purpose
// (/dev/full, closed, a pipe whose reader has gone), and a bounded wait.
//
//   auto r = stormguard::test_support::run_program({cli, "plan", "--base", "-1s"},
//                                                  stormguard::test_support::stderr_mode::closed);
//   EXPECT_EQ(r.exit_code, 2);
//
// Header-only; POSIX only.
#ifndef STORMGUARD_TESTS_SUPPORT_CLI_RUNNER_HPP
#define STORMGUARD_TESTS_SUPPORT_CLI_RUNNER_HPP

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace stormguard::test_support {

/// Where the program's stderr goes.
enum class stderr_mode {
  capture,      ///< a file, returned in program_run::err
  dev_full,     ///< /dev/full: every write fails with ENOSPC
  closed,       ///< file descriptor 2 closed (as `2>&-`)
  broken_pipe,  ///< a pipe whose read end is closed: a write fails with EPIPE (and SIGPIPE)
};

/// How a run ended.
struct program_run {
  int exit_code = -1;      ///< the exit status, or -1 when killed by a signal or not started
  int signal = 0;          ///< the signal that killed it, 0 if it exited
  bool timed_out = false;  ///< killed (SIGKILL) by run_program after `limit`
  std::string out;         ///< stdout
  std::string err;         ///< stderr (stderr_mode::capture only)
};

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Runs argv[0] (a path) with `argv`, waits at most `limit` (then SIGKILL), and returns how it
/// ended with what it wrote.
inline program_run run_program(const std::vector<std::string>& argv, stderr_mode mode,
                               std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  program_run result;
  static int counter = 0;
  const std::string base =
      "/tmp/stormguard-cli-runner-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  const std::string out_path = base + ".out";
  const std::string err_path = base + ".err";
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);

  int broken[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  switch (mode) {
    case stderr_mode::capture:
      posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0600);
      break;
    case stderr_mode::dev_full:
      posix_spawn_file_actions_addopen(&actions, 2, "/dev/full", O_WRONLY, 0);
      break;
    case stderr_mode::closed:
      posix_spawn_file_actions_addclose(&actions, 2);
      break;
    case stderr_mode::broken_pipe:
      if (::pipe2(broken, O_CLOEXEC) != 0) return result;
      ::close(broken[0]);
      posix_spawn_file_actions_adddup2(&actions, broken[1], 2);
      break;
  }
  // SIGPIPE at its default disposition in the child, whatever the test runner's is.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, raw[0], &actions, &attr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (broken[1] >= 0) ::close(broken[1]);
  if (rc != 0) return result;

  int status = 0;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return result;
    if (std::chrono::steady_clock::now() - start > limit) {
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = read_whole_file(out_path);
  if (mode == stderr_mode::capture) result.err = read_whole_file(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return result;
}

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_CLI_RUNNER_HPP
