// SPDX-License-Identifier: Apache-2.0
// Tests of `stormguard exec` with real processes: the built executable runs `sh` scripts that
// count their runs in a file. Skipped when the CLI is not built (STORMGUARD_CLI_PATH undefined).
// Delays are kept to milliseconds (--base 1ms --cap 5ms) so that the whole file runs in a few
// seconds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

struct run_result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
  steady::duration elapsed{};
};

const std::string k_cli = std::string("'") + STORMGUARD_CLI_PATH + "'";
const std::string k_fast = "--base 1ms --cap 5ms ";

// Runs the CLI with `args` (already shell-quoted), capturing stdout and stderr.
run_result run_cli(const std::string& args) {
  run_result result;
  const auto start = steady::now();
  FILE* pipe = ::popen((k_cli + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.elapsed = steady::now() - start;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::size_t count_of(const std::string& text, const std::string& word) {
  std::size_t count = 0;
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++count;
  return count;
}

// A scratch directory per test, with a script that counts its runs in the file "count".
class ExecCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("stormguard-exec-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a script that appends a line to "count", sets $n to the number of runs so far, then
  // runs `body`; returns "sh '<path>'".
  std::string script(const std::string& body) {
    const fs::path path = dir_ / "script.sh";
    std::ofstream(path) << "echo run >> '" << (dir_ / "count").string() << "'\n"
                        << "n=$(wc -l < '" << (dir_ / "count").string() << "')\n"
                        << body << "\n";
    return "sh '" + path.string() + "'";
  }
  // Runs of the script so far.
  int runs() const {
    std::ifstream in(dir_ / "count");
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }
  // Starts the CLI with `args` directly (no shell), stdout and stderr to /dev/null.
  pid_t spawn_cli(const std::vector<std::string>& args) {
    std::vector<std::string> all{STORMGUARD_CLI_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    return rc == 0 ? pid : -1;
  }
  // Waits for the script's first run, then a little more so that it has exited or is sleeping.
  bool wait_for_first_run() const {
    for (const auto start = steady::now(); steady::now() - start < 5s;) {
      if (runs() >= 1) {
        std::this_thread::sleep_for(100ms);
        return true;
      }
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
  // Waits for `pid` at most 5 s (then kills it); the exit code, or -1.
  static int wait_exit_code(pid_t pid) {
    for (const auto start = steady::now(); steady::now() - start < 5s;) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(2ms);
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    (void)::waitpid(pid, &status, 0);
    return -1;
  }

  fs::path dir_;
};

TEST_F(ExecCli, RetriesUntilTheCommandSucceeds) {
  const auto r = run_cli("exec " + k_fast + "-- " + script("[ \"$n\" -gt 2 ] && exit 0; exit 3"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(runs(), 3);
  EXPECT_EQ(count_of(r.output, "retrying in"), 2u) << r.output;
}

TEST_F(ExecCli, StatsPrintsOneSummaryLineAlsoOnSuccessAndWithQuiet) {
  const auto ok = run_cli("exec --stats -q -- true");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.output, "stormguard exec: stats: attempts 1, retries 0, reason success, slept 0s\n");
  const auto failed = run_cli("exec " + k_fast + "--stats --retries 2 -- " + script("exit 3"));
  EXPECT_EQ(failed.exit_code, 3);
  EXPECT_EQ(count_of(failed.output, "stats: attempts 3, retries 2, reason attempts_exhausted"), 1u)
      << failed.output;
}

TEST_F(ExecCli, AlwaysFailingReturnsTheLastStatusAfterRetriesPlusOneAttempts) {
  const auto r = run_cli("exec " + k_fast + "--retries 2 -- " + script("exit $((n + 10))"));
  EXPECT_EQ(r.exit_code, 13) << r.output;
  EXPECT_EQ(runs(), 3);
}

TEST_F(ExecCli, ZeroRetriesMakesOneAttempt) {
  const auto r = run_cli("exec " + k_fast + "--retries 0 -q -- " + script("exit 5"));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCli, StopOnExitStopsAtOnceAndRetriesTheOthers) {
  const auto r = run_cli("exec " + k_fast + "--stop-on-exit 2,64 -- " + script("exit 64"));
  EXPECT_EQ(r.exit_code, 64) << r.output;
  EXPECT_EQ(runs(), 1);
  fs::remove(dir_ / "count");
  const auto other =
      run_cli("exec " + k_fast + "--retries 2 --stop-on-exit 2,64 -- " + script("exit 3"));
  EXPECT_EQ(other.exit_code, 3) << other.output;
  EXPECT_EQ(runs(), 3);
}

TEST_F(ExecCli, RetryOnExitRetriesOnlyTheListedStatuses) {
  const auto r = run_cli("exec " + k_fast + "--retries 2 --retry-on-exit 75,111 -- " +
                         script("[ \"$n\" -eq 1 ] && exit 111; exit 75"));
  EXPECT_EQ(r.exit_code, 75) << r.output;
  EXPECT_EQ(runs(), 3);
  fs::remove(dir_ / "count");
  const auto other = run_cli("exec " + k_fast + "--retry-on-exit 75,111 -- " + script("exit 1"));
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCli, AttemptPastTheTimeoutIsKilledAndRetried) {
  const auto r = run_cli("exec " + k_fast + "--attempt-timeout 200ms -- " +
                         script("[ \"$n\" -eq 1 ] && sleep 10; exit 0"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(runs(), 2);
  EXPECT_LT(r.elapsed, 3s);  // SIGTERM reached the sleep (a grandchild) too
  EXPECT_NE(r.output.find("attempt 1 timed out"), std::string::npos) << r.output;
}

TEST_F(ExecCli, TimingOutOnEveryAttemptExits124) {
  const auto r =
      run_cli("exec " + k_fast + "--retries 1 --attempt-timeout 100ms -- " + script("sleep 10"));
  EXPECT_EQ(r.exit_code, 124) << r.output;
  EXPECT_EQ(runs(), 2);
  EXPECT_LT(r.elapsed, 3s);
}

TEST_F(ExecCli, MissingCommandExits127WithOneAttempt) {
  const auto r = run_cli("exec " + k_fast + "-- '" + (dir_ / "no-such-command").string() + "' x");
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_NE(r.output.find("cannot run"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("retrying"), std::string::npos) << r.output;
  const auto in_path = run_cli("exec " + k_fast + "-- stormguard-no-such-command-in-path");
  EXPECT_EQ(in_path.exit_code, 127) << in_path.output;
}

TEST_F(ExecCli, NonExecutableFileExits127) {
  const fs::path file = dir_ / "not-executable";
  std::ofstream(file) << "exit 0\n";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  const auto r = run_cli("exec " + k_fast + "-- '" + file.string() + "'");
  EXPECT_EQ(r.exit_code, 127) << r.output;
  EXPECT_EQ(r.output.find("retrying"), std::string::npos) << r.output;
}

TEST_F(ExecCli, CommandKilledBySignalNExits128PlusN) {
  const auto r = run_cli("exec " + k_fast + "--retries 1 -- " + script("kill -KILL $$"));
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  EXPECT_EQ(runs(), 2);
  fs::remove(dir_ / "count");
  const auto stopped =
      run_cli("exec " + k_fast + "--stop-on-exit 143 -- " + script("kill -TERM $$"));
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.output;
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCli, DeadlineCutsTheRunningAttemptAndExits124) {
  const auto r = run_cli("exec " + k_fast + "--deadline 300ms -- " + script("sleep 10"));
  EXPECT_EQ(r.exit_code, 124) << r.output;
  EXPECT_EQ(runs(), 1);
  EXPECT_LT(r.elapsed, 3s);
}

TEST_F(ExecCli, DeadlineTooCloseForTheNextDelayExits124WithoutSleeping) {
  const auto r =
      run_cli("exec --base 10s --cap 10s --jitter none --deadline 1s -- " + script("exit 3"));
  EXPECT_EQ(r.exit_code, 124) << r.output;
  EXPECT_EQ(runs(), 1);
  EXPECT_LT(r.elapsed, 900ms);
}

TEST_F(ExecCli, SigtermDuringTheBackoffEndsAt143WithoutAnotherAttempt) {
  (void)script("exit 3");
  const pid_t pid = spawn_cli({"exec", "--base", "10s", "--cap", "10s", "--jitter", "none", "--",
                               "sh", (dir_ / "script.sh").string()});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_first_run());
  const auto start = steady::now();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGTERM);
  EXPECT_LT(steady::now() - start, 1s);
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCli, SigintIsForwardedToTheRunningCommand) {
  (void)script("sleep 10; exit 3");
  const pid_t pid = spawn_cli({"exec", "--base", "1ms", "--", "sh", (dir_ / "script.sh").string()});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_first_run());
  const auto start = steady::now();
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGINT);
  EXPECT_LT(steady::now() - start, 1s);
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCli, SighupIsForwardedToTheRunningCommand) {
  (void)script("sleep 10; exit 3");
  const pid_t pid = spawn_cli({"exec", "--base", "1ms", "--", "sh", (dir_ / "script.sh").string()});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_first_run());
  const auto start = steady::now();
  ASSERT_EQ(::kill(pid, SIGHUP), 0);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGHUP);
  EXPECT_LT(steady::now() - start, 1s);
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCli, SecondSignalKillsACommandThatIgnoresTheFirst) {
  // The ignored dispositions are inherited by the sleep: only SIGKILL ends it.
  (void)script("trap '' INT TERM; sleep 8; exit 3");
  const pid_t pid = spawn_cli({"exec", "--base", "1ms", "sh", (dir_ / "script.sh").string()});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_first_run());
  const auto start = steady::now();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGTERM);
  EXPECT_LT(steady::now() - start, 1500ms);
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCli, CommandThatIgnoresTheSignalIsKilledAfterTheGrace) {
  (void)script("trap '' INT TERM; sleep 8; exit 3");
  const pid_t pid = spawn_cli({"exec", "--base", "1ms", "sh", (dir_ / "script.sh").string()});
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_first_run());
  const auto start = steady::now();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGTERM);
  const auto elapsed = steady::now() - start;
  EXPECT_GT(elapsed, 1500ms);  // the 2 s grace
  EXPECT_LT(elapsed, 3500ms);
  EXPECT_EQ(runs(), 1);
}

// True while process `pid` exists and is not a zombie (a killed grandchild is reparented, and
// its new parent may be slow to reap it).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return ::kill(pid, 0) == 0;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

TEST_F(ExecCli, SigintEndsAGrandchildThatIgnoresIt) {
  // The command (the group's leader) dies of SIGINT at once; the grandchild it started ignores
  // SIGINT and would outlive stormguard unless the group is swept with SIGKILL.
  const fs::path pidfile = dir_ / "grandchild.pid";
  (void)script("sh -c 'trap \"\" INT; exec sleep 30' &\necho $! > '" + pidfile.string() +
               ".tmp'\nmv '" + pidfile.string() + ".tmp' '" + pidfile.string() + "'\nwait");
  const pid_t pid = spawn_cli({"exec", "--base", "1ms", "--", "sh", (dir_ / "script.sh").string()});
  ASSERT_GT(pid, 0);
  pid_t grandchild = 0;
  for (const auto start = steady::now(); grandchild == 0 && steady::now() - start < 5s;) {
    std::ifstream(pidfile) >> grandchild;
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_GT(grandchild, 0);
  std::this_thread::sleep_for(50ms);  // the grandchild has set its trap and exec'd sleep
  ASSERT_TRUE(running(grandchild));
  const auto start = steady::now();
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGINT);
  EXPECT_LT(steady::now() - start, 1500ms);
  bool gone = false;
  for (const auto wait_start = steady::now(); !gone && steady::now() - wait_start < 3s;) {
    gone = !running(grandchild);
    if (!gone) std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " still runs";
  if (!gone) ::kill(grandchild, SIGKILL);
  EXPECT_EQ(runs(), 1);
}

TEST_F(ExecCli, OptionsAfterTheCommandAreTheCommands) {
  const auto r = run_cli("exec " + k_fast + "-q echo hello --retries 9 world");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "hello --retries 9 world\n");
  const auto dashes = run_cli("exec " + k_fast + "-q -- echo hello --retries 9 world");
  EXPECT_EQ(dashes.exit_code, 0) << dashes.output;
  EXPECT_EQ(dashes.output, "hello --retries 9 world\n");
  for (const char* args : {"exec -q echo -- x --help", "exec -q -- echo -- x --help"}) {
    const auto inner = run_cli(args);
    EXPECT_EQ(inner.exit_code, 0) << args << ": " << inner.output;
    EXPECT_EQ(inner.output, "-- x --help\n") << args;
  }
  // Options before the command are stormguard's, with or without --.
  const auto before = run_cli("exec " + k_fast + "--retries 1 -q " + script("exit 5"));
  EXPECT_EQ(before.exit_code, 5) << before.output;
  EXPECT_EQ(runs(), 2);
}

TEST_F(ExecCli, ZeroCapWarnsButRuns) {
  const auto r = run_cli("exec --base 0s --cap 0s --retries 1 -- " + script("exit 3"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(runs(), 2);
  EXPECT_NE(r.output.find("warning: --base and --cap are 0s: every retry starts at once"),
            std::string::npos)
      << r.output;
  const auto quiet = run_cli("exec --base 0s --cap 0s --retries 1 -q -- " + script("exit 3"));
  EXPECT_EQ(quiet.exit_code, 3) << quiet.output;
  EXPECT_EQ(quiet.output, "");
}

TEST_F(ExecCli, ZeroBaseWarnsWhateverTheCap) {
  // Found by hand: `--base 0s` with the default --cap 3s makes every delay 0 too, silently.
  const auto r = run_cli("exec --base 0s --retries 1 -- " + script("exit 3"));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(runs(), 2);
  EXPECT_NE(r.output.find("warning: --base is 0s: every retry starts at once"), std::string::npos)
      << r.output;
}

TEST_F(ExecCli, QuietSilencesTheAttemptLog) {
  const auto r = run_cli("exec " + k_fast + "--quiet -- " + script("[ \"$n\" -gt 2 ] || exit 1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(runs(), 3);
  EXPECT_EQ(r.output, "");
}

TEST_F(ExecCli, StdoutIsTheCommands) {
  const auto r = run_cli("exec " + k_fast + "-q -- echo hello");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "hello\n");
}

TEST_F(ExecCli, BadCommandLinesAreUsageErrors) {
  for (const char* args :
       {"exec --retry-on-exit 0 -- true", "exec --retry-on-exit 256 -- true",
        "exec --retry-on-exit 3,,4 -- true", "exec --stop-on-exit x -- true",
        "exec --retry-on-exit 3 --stop-on-exit 4 -- true", "exec --attempt-timeout 5 -- true",
        "exec --deadline 0s -- true", "exec --base 1 -- true", "exec", "exec --"}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
  }
  const auto r = run_cli("exec --retry-on-exit 3,300 -- true");
  EXPECT_NE(r.output.find("--retry-on-exit"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"300\""), std::string::npos) << r.output;
}

TEST_F(ExecCli, HelpDocumentsTheExitStatuses) {
  const auto r = run_cli("exec --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* text : {"124", "127", "128+N", "130/143", "what it leaves in its group"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text;
  }
}

TEST_F(ExecCli, ZeroBaseNeverWaitsAtAnyRetryNumber) {
  // From retry 1025 the ceiling's power overflows to infinity; 0 x infinity waited the cap.
  const auto r =
      run_cli("exec --retries 1030 --base 0s --cap 100ms --jitter none -q --stats -- false");
  EXPECT_NE(r.output.find("attempts 1031, retries 1030, reason attempts_exhausted, slept 0s"),
            std::string::npos)
      << r.output;
}

#endif  // STORMGUARD_CLI_PATH

}  // namespace
