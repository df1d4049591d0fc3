// The exit-code rule and the error messages of every command (docs/cli.md, "Exit status"): a
// missing or invalid option value, or a bad file that an argument or option names, exits 2; 1 is
// for failures at run time; errors start with "stormguard <cmd>: error:", say what is wrong, and
// echo the user's value quoted (control bytes escaped, at most 80 bytes). Runs the built CLI;
// skipped when it is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "stormguard/sim/scenario.hpp"
#include "support/cli_runner.hpp"
#include "support/http_test_server.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using stormguard::test_support::program_run;
using stormguard::test_support::run_program;
using stormguard::test_support::stderr_mode;

program_run run(std::vector<std::string> args) {
  args.insert(args.begin(), STORMGUARD_CLI_PATH);
  return run_program(args, stderr_mode::capture);
}

class CliMessages : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("stormguard-messages-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  fs::path dir_;
};

struct expected_exit {
  std::vector<std::string> args;
  int code;
  std::string message;  // a part of stderr
};

void check(const expected_exit& e) {
  const program_run r = run(e.args);
  const std::string args = testing::PrintToString(e.args);
  EXPECT_EQ(r.exit_code, e.code) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(e.message), std::string::npos) << args << "\n" << r.err;
  // One line, with the command's prefix (or the tool's, before a subcommand).
  EXPECT_EQ(r.err.rfind("stormguard", 0), 0U) << args << "\n" << r.err;
}

TEST_F(CliMessages, BadValuesAndBadFilesExitTwoForEveryCommand) {
  const std::string broken = write("broken.json", "{\"name\": ");
  for (const expected_exit& e : std::vector<expected_exit>{
           {{}, 2, "stormguard: error: a subcommand is required"},
           {{"bogus"}, 2, "stormguard: error: unknown subcommand \"bogus\""},
           {{"--bogus"}, 2, "stormguard: error: unknown option \"--bogus\""},
           {{"plan", "--base", "x"}, 2, "stormguard plan: error: --base: not a duration: \"x\""},
           {{"plan", "--retries", "abc"}, 2, "stormguard plan: error: --retries: not a whole"},
           {{"plan", "--samples"}, 2, "stormguard plan: error: --samples needs a value"},
           {{"plan", "extra"}, 2, "stormguard plan: error: unexpected argument \"extra\""},
           {{"exec", "--deadline", "soon", "--", "true"}, 2, "stormguard exec: error: --deadline"},
           {{"exec", "--retry-on-exit", "0", "--", "true"}, 2, "stormguard exec: error:"},
           {{"exec"}, 2, "stormguard exec: error:"},
           {{"http", "-d", "@" + (dir_ / "missing").string(), "http://127.0.0.1:1/"},
            2,
            "stormguard http: error: -d: cannot read"},
           {{"http", "--deadline", "-1s", "http://127.0.0.1:1/"}, 2, "negative"},
           {{"http"}, 2, "stormguard http: error: url is required"},
           {{"simulate", (dir_ / "missing.json").string()}, 2, "stormguard simulate: error:"},
           {{"simulate", broken}, 2, "stormguard simulate: error:"},
           {{"simulate", "--seed", "x"}, 2, "stormguard simulate: error: --seed"},
           {{"simulate", "--threads", "0"}, 2, "stormguard simulate: error: --threads"},
       }) {
    check(e);
  }
}

TEST_F(CliMessages, RunTimeFailuresExitOne) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  // A write error on stdout: plan's table, simulate's CSV directory that cannot be created.
  const auto plan = stormguard::test_support::run_program(
      {"/bin/sh", "-c", std::string("'") + STORMGUARD_CLI_PATH + "' plan >/dev/full"},
      stderr_mode::capture);
  EXPECT_EQ(plan.exit_code, 1) << plan.err;
  EXPECT_NE(plan.err.find("stormguard plan: error: cannot write to standard output"),
            std::string::npos)
      << plan.err;
  const std::string file = write("file", "x");
  check({{"simulate", "layers", "--csv", file + "/sub"}, 1, "stormguard simulate: error:"});
}

// Found by trying the tool: "exec --bogus -- true" said "not expected: -- --bogus" and
// "http -x POST URL" called the URL unexpected.
TEST_F(CliMessages, UnknownOptionsAreNamedAsSuch) {
  check(
      {{"exec", "--bogus", "--", "true"}, 2, "stormguard exec: error: unknown option \"--bogus\""});
  check({{"http", "-x", "POST", "http://127.0.0.1:1/"},
         2,
         "stormguard http: error: unknown option \"-x\" (options are case-sensitive: did you "
         "mean -X?)"});
  check({{"plan", "--base=1s", "--frob=3"}, 2, "unknown option \"--frob\""});
  const program_run r = run({"http", "-x", "POST", "http://127.0.0.1:1/"});
  EXPECT_EQ(r.err.find("http://127.0.0.1:1/"), std::string::npos) << r.err;
}

TEST_F(CliMessages, EchoedValuesAreTruncatedAndEscaped) {
  const std::string huge(100'000, 'a');  // argv holds at most 128 KiB per argument
  const std::string ansi = "\x1b[31mred\x7f";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"plan", "--base", huge},
           {"plan", "--jitter", huge},
           {"plan", "--seed", huge},
           {"plan", "--retries", huge},
           {"plan", "--" + huge},
           {huge},
           {"exec", "--retry-on-exit", huge, "--", "true"},
           {"exec", "--", "/nonexistent/" + huge},
           {"http", "-X", huge, "http://127.0.0.1:1/"},
           {"http", "--key-format", huge, "http://127.0.0.1:1/"},
           {"http", "-d", "@/nonexistent/" + huge, "http://127.0.0.1:1/"},
           {"simulate", "--strategy", huge},
           {"simulate", "--sweep", huge},
           {"simulate", "/nonexistent/" + huge},
       }) {
    const program_run r = run(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_LT(r.err.size(), 1000U)
        << args.front() << " " << args[std::min<std::size_t>(1, args.size() - 1)].substr(0, 20)
        << ": " << r.err.substr(0, 300);
  }
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"plan", "--jitter", ansi},
           {"plan", "--base", ansi},
           {"exec", "--stop-on-exit", ansi, "--", "true"},
           {"http", "-X", ansi, "http://127.0.0.1:1/"},
           {"simulate", "--strategy", ansi},
           {ansi},
       }) {
    const program_run r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\x7f'), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("\\x1b[31mred\\x7f"), std::string::npos) << r.err;
  }
}

TEST_F(CliMessages, ScenarioNameIsEscapedInErrors) {
  // A scenario without an incident cannot be swept: the error names the scenario, whose name
  // holds an ANSI escape and a NUL.
  stormguard::sim::scenario s = stormguard::sim::friday_night();
  s.name = std::string("\x1b[2Jevil\0name", 13);
  s.incident.reset();
  const std::string file = write("evil.json", stormguard::sim::to_json(s));
  const program_run r = run({"simulate", file, "--sweep", "load=100:200:100"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\0'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\x1b[2Jevil\\x00name"), std::string::npos) << r.err;
}

// Found by trying the tool: exec said "the --deadline ran out" when it had not: the next
// retry's delay would have ended past it.
TEST_F(CliMessages, ExecSaysWhenTheNextDelayWouldEndPastTheDeadline) {
  const program_run r = run({"exec", "--base", "10s", "--cap", "10s", "--jitter", "none",
                             "--deadline", "5s", "--", "false"});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_NE(r.err.find("the next retry's delay would end past the --deadline of 5s"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("ran out"), std::string::npos) << r.err;
  const program_run ran_out = run({"exec", "--deadline", "200ms", "--", "sleep", "5"});
  EXPECT_EQ(ran_out.exit_code, 124) << ran_out.err;
  EXPECT_NE(ran_out.err.find("the --deadline of 200ms ran out"), std::string::npos) << ran_out.err;
}

// Found by trying the tool: -v said "not_retryable" for a POST without a key, not why.
TEST_F(CliMessages, HttpSaysWhyAnAttemptIsNotRetried) {
  stormguard::test_support::http_test_server server;
  server.set_fallback({.status = 503, .body = "busy"});
  const program_run post = run({"http", "-v", "-d", "x", server.url("/pay")});
  EXPECT_EQ(post.exit_code, 3) << post.err;
  EXPECT_EQ(server.requests().size(), 1U);
  EXPECT_NE(post.err.find("not_retryable (a POST without --idempotency-key is not retried"),
            std::string::npos)
      << post.err;
  EXPECT_NE(post.err.find("--idempotency-key auto"), std::string::npos) << post.err;
  server.set_fallback({.status = 404, .body = "none"});
  const program_run missing = run({"http", "-v", server.url("/none")});
  EXPECT_EQ(missing.exit_code, 3) << missing.err;
  EXPECT_NE(missing.err.find("not_retryable (HTTP 404 is not retried: only 429, 502, 503, 504 "
                             "are)"),
            std::string::npos)
      << missing.err;
}

#else

TEST(CliMessages, SkippedWithoutTheCli) { GTEST_SKIP() << "STORMGUARD_CLI_PATH is not defined"; }

#endif  // STORMGUARD_CLI_PATH

}  // namespace
