// SPDX-License-Identifier: Apache-2.0
// The `stormguard` launcher (cli/launcher.cpp) and the programs it runs: every subcommand has its
// program; the launcher replaces itself with it (same process id), also when it is started
// through a symbolic link from another folder; each program needs only the shared libraries its
// command uses (the reason for the split: docs/performance.md, "A command's start").
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/cli_runner.hpp"
#include "test_util.hpp"

#ifdef STORMGUARD_CLI_PATH

namespace {

namespace fs = std::filesystem;
using stormguard::test_support::program_run;
using stormguard::test_support::run_program;
using stormguard::test_support::stderr_mode;

const std::vector<std::string> k_subcommands = {"simulate", "exec",  "plan", "http",
                                                "policy",   "serve", "lab",  "tune"};

std::string program(const std::string& name) {
  return std::string(STORMGUARD_CLI_PROGRAM_DIR) + "/stormguard-" + name;
}

// The DT_NEEDED entries of an ELF file ("libc.so.6", ...), from `readelf -d`.
std::vector<std::string> needed(const std::string& file) {
  const program_run r = run_program({"/usr/bin/readelf", "-d", file}, stderr_mode::capture);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> names;
  const std::string key = "Shared library: [";
  for (std::size_t at = r.out.find(key); at != std::string::npos; at = r.out.find(key, at)) {
    at += key.size();
    names.push_back(r.out.substr(at, r.out.find(']', at) - at));
  }
  return names;
}

bool needs_one_of(const std::vector<std::string>& libraries, const std::string& prefix) {
  return std::any_of(libraries.begin(), libraries.end(),
                     [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

TEST(Launcher, EverySubcommandHasItsProgram) {
  for (const std::string& name : k_subcommands) {
    EXPECT_TRUE(fs::exists(program(name))) << program(name);
    const program_run r = run_program({STORMGUARD_CLI_PATH, name, "--help"}, stderr_mode::capture);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("stormguard " + name), std::string::npos) << r.out;
  }
  EXPECT_TRUE(fs::exists(program("all")));
}

TEST(Launcher, KeepsTheProcessId) {
  // bash prints its own pid, then becomes the launcher, which becomes stormguard-exec, whose
  // child prints its parent's pid: the same number when no process was added on the way.
  const program_run r = run_program(
      {"/bin/bash", "--noprofile", "--norc", "-c",
       "echo $$; exec \"$0\" exec --quiet -- /bin/sh -c 'echo $PPID'", STORMGUARD_CLI_PATH},
      stderr_mode::capture);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::size_t newline = r.out.find('\n');
  ASSERT_NE(newline, std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(0, newline + 1), r.out.substr(newline + 1)) << r.out;
}

TEST(Launcher, FindsItsProgramsThroughASymbolicLink) {
  const fs::path dir =
      fs::temp_directory_path() / ("stormguard-launcher-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink(fs::absolute(STORMGUARD_CLI_PATH), dir / "stormguard");
  const program_run r =
      run_program({(dir / "stormguard").string(), "plan", "--retries", "1"}, stderr_mode::capture);
  fs::remove_all(dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("retry"), std::string::npos) << r.out;
}

TEST(Launcher, ExitStatusAndMessagesAreTheCommands) {
  const program_run unknown = run_program({STORMGUARD_CLI_PATH, "nope"}, stderr_mode::capture);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("stormguard: error: unknown subcommand \"nope\""), std::string::npos)
      << unknown.err;
  const program_run bad =
      run_program({STORMGUARD_CLI_PATH, "plan", "--base", "-1s"}, stderr_mode::capture);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err.rfind("stormguard plan: error:", 0), 0U) << bad.err;
}

// What a subcommand's own program prints and returns is what stormguard-all (every subcommand in
// one program, as `stormguard` was before the launcher) prints and returns.
TEST(Launcher, ASubcommandsProgramAnswersAsTheWholeCommandDoes) {
  const std::vector<std::vector<std::string>> command_lines = {
      {"plan", "--retries", "2", "--samples", "100", "--seed", "7", "--json"},
      {"plan", "--base", "-1s"},
      {"plan", "--bogus"},
      {"plan", "--base"},
      {"plan", "--version"},
      {"plan", "simulate"},
      {"plan", "--retries", "1", "--retries", "2"},
      {"http"},
      {"http", "--version"},
      {"http", "-X"},
      {"http", "--deadline", "soon", "http://127.0.0.1:1/"},
      {"exec"},
      {"exec", "--retries", "x", "--", "true"},
      {"exec", "--quiet", "--", "/bin/sh", "-c", "exit 3"},
      {"policy"},
      {"policy", "check"},
      {"serve"},
      {"serve", "no-such-scenario"},
      {"lab"},
      {"lab", "payments", "--bogus"},
      {"simulate", "no-such-scenario"},
      {"simulate", "--strategy", "nope"},
  };
  std::vector<std::vector<std::string>> all = command_lines;
  for (const std::string& name : k_subcommands) all.push_back({name, "--help"});
  all.push_back({"lab", "payments", "--help"});
  all.push_back({"policy", "check", "--help"});
  for (const std::vector<std::string>& args : all) {
    std::vector<std::string> through_launcher = args;
    through_launcher.insert(through_launcher.begin(), STORMGUARD_CLI_PATH);
    std::vector<std::string> whole = args;
    whole.insert(whole.begin(), program("all"));
    const program_run a = run_program(through_launcher, stderr_mode::capture);
    const program_run b = run_program(whole, stderr_mode::capture);
    std::string line;
    for (const std::string& word : args) line += " " + word;
    EXPECT_EQ(a.exit_code, b.exit_code) << "stormguard" << line;
    EXPECT_EQ(a.out, b.out) << "stormguard" << line;
    EXPECT_EQ(a.err, b.err) << "stormguard" << line;
  }
}

TEST(Launcher, EachProgramNeedsOnlyWhatItsCommandUses) {
#ifdef STORMGUARD_TEST_SANITIZED
  GTEST_SKIP() << "a sanitizer adds its runtime to every program";
#else
  if (!fs::exists("/usr/bin/readelf")) GTEST_SKIP() << "no /usr/bin/readelf";
  // The launcher: no shared library where it is built freestanding, the C library elsewhere.
  const std::vector<std::string> launcher = needed(STORMGUARD_CLI_PATH);
  EXPECT_TRUE(launcher.empty() || launcher == std::vector<std::string>{"libc.so.6"});
  // The server side (libevent, prometheus-cpp, the guard's stores) only where a server runs.
  for (const char* name : {"plan", "policy", "exec", "http", "simulate"}) {
    const std::vector<std::string> libraries = needed(program(name));
    for (const char* server : {"libevent", "libprometheus", "libpq", "libsqlite3"}) {
      EXPECT_FALSE(needs_one_of(libraries, server)) << "stormguard-" << name << " needs " << server;
    }
  }
  // libcurl only where HTTP requests are made.
  for (const char* name : {"plan", "policy", "exec", "simulate"}) {
    EXPECT_FALSE(needs_one_of(needed(program(name)), "libcurl")) << "stormguard-" << name;
  }
  EXPECT_TRUE(needs_one_of(needed(program("http")), "libcurl"));
#endif
}

// A program linked with the static C++ runtime (cli/CMakeLists.txt) must not load the shared one
// through a C++ library: two copies of libstdc++ in one process.
TEST(Launcher, NoProgramLoadsTwoCxxRuntimes) {
  if (!fs::exists("/usr/bin/ldd") || !fs::exists("/usr/bin/readelf")) GTEST_SKIP() << "no ldd";
  std::vector<std::string> names = k_subcommands;
  names.emplace_back("all");
  for (const std::string& name : names) {
    if (needs_one_of(needed(program(name)), "libstdc++")) continue;
    const program_run r = run_program({"/usr/bin/ldd", program(name)}, stderr_mode::capture);
    EXPECT_EQ(r.out.find("libstdc++"), std::string::npos) << "stormguard-" << name << ":\n"
                                                          << r.out;
  }
}

// Run from the build tree (no <prefix>/share/doc/stormguard beside it), --help names the source
// tree's docs/, and every guide it names exists.
TEST(Launcher, HelpFromTheBuildTreeNamesGuidesThatExist) {
  for (const std::string& name : k_subcommands) {
    const program_run r = run_program({STORMGUARD_CLI_PATH, name, "--help"}, stderr_mode::capture);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    int named = 0;
    for (std::size_t at = r.out.find(".md"); at != std::string::npos;
         at = r.out.find(".md", at + 3)) {
      const std::size_t start = r.out.find_last_of(" \n(", at) + 1;
      const std::string path = r.out.substr(start, at + 3 - start);
      if (path.front() != '/') continue;  // a guide named without its folder
      EXPECT_TRUE(fs::exists(path)) << name << " --help names " << path;
      ++named;
    }
    if (name == "serve" || name == "lab" || name == "simulate") {
      EXPECT_GT(named, 0) << name << " --help names no guide:\n" << r.out;
    }
  }
}

}  // namespace

#endif  // STORMGUARD_CLI_PATH
