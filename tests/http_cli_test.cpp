// SPDX-License-Identifier: Apache-2.0
// Tests of `stormguard http`: the built executable (STORMGUARD_CLI_PATH) against the loopback test
// server of tests/support/ running in this process. Backoff is 1 ms .. 2 ms, so the file runs in
// about a second.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/http_test_server.hpp"

extern char** environ;

namespace {

#ifdef STORMGUARD_CLI_PATH

using namespace std::chrono_literals;
using stormguard::test_support::http_test_server;
using stormguard::test_support::scripted_response;
namespace fs = std::filesystem;

struct cli_result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the CLI with `args` (already shell-quoted); stdout and stderr apart.
cli_result run_cli(const std::string& args) {
  cli_result result;
  const std::string err_path =
      ::testing::TempDir() + "http_cli_stderr_" + std::to_string(::getpid());
  const std::string command =
      std::string("'") + STORMGUARD_CLI_PATH + "' http " + args + " 2>'" + err_path + "'";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  result.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  fs::remove(err_path);
  return result;
}

const std::string k_fast = "--base 1ms --cap 2ms ";

scripted_response status(int code, std::string body = "") {
  scripted_response r;
  r.status = code;
  r.body = body.empty() ? "status " + std::to_string(code) : std::move(body);
  return r;
}

std::size_t count_of(const std::string& text, const std::string& word) {
  std::size_t count = 0;
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++count;
  return count;
}

TEST(HttpCli, PrintsTheBodyAndExitsZero) {
  http_test_server server;
  server.script({status(200, "hello\n")});
  const auto r = run_cli(k_fast + "'" + server.url("/greeting") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\n");
  EXPECT_EQ(r.err, "");
  ASSERT_EQ(server.requests().size(), 1U);
  EXPECT_EQ(server.requests()[0].method, "GET");
  EXPECT_EQ(server.requests()[0].target, "/greeting");
}

TEST(HttpCli, IncludePrintsStatusLineAndHeaders) {
  http_test_server server;
  scripted_response r = status(201, "made");
  r.headers = {{"X-Id", "7"}};
  server.script({r});
  const auto got = run_cli("-i '" + server.url() + "'");
  EXPECT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(got.out.rfind("HTTP/1.1 201 Created\r\n", 0), 0U) << got.out;
  EXPECT_NE(got.out.find("X-Id: 7\r\n"), std::string::npos) << got.out;
  EXPECT_NE(got.out.find("\r\n\r\nmade"), std::string::npos) << got.out;
}

TEST(HttpCli, RetriesAndLogsEachAttemptWithVerbose) {
  http_test_server server;
  scripted_response limited = status(429);
  limited.headers = {{"Retry-After", "0"}};
  server.script({status(503), limited, status(200, "ok")});
  const auto r = run_cli(k_fast + "-v '" + server.url() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ok");
  EXPECT_EQ(server.requests().size(), 3U);
  EXPECT_EQ(count_of(r.err, "stormguard http: attempt "), 3U) << r.err;
  EXPECT_NE(r.err.find("attempt 1: HTTP 503; retrying in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("attempt 2: HTTP 429, Retry-After: 0 (0s); retrying in "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("attempt 3: HTTP 200; success"), std::string::npos) << r.err;
}

TEST(HttpCli, FinalHttpErrorExitsThreeWithTheBody) {
  http_test_server server;
  server.script({status(404, "no such thing")});
  const auto r = run_cli(k_fast + "'" + server.url() + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "no such thing");
  EXPECT_NE(r.err.find("HTTP 404 after 1 attempt: not_retryable (HTTP 404 is not retried: only "
                       "429, 502, 503, 504 are); exit status 3"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(server.requests().size(), 1U);
}

TEST(HttpCli, PostWithoutKeyIsNotRetriedAndWithAutoKeyIsRetriedWithOneKey) {
  http_test_server server;
  server.script({status(503), status(503), status(200)});
  const auto unkeyed = run_cli(k_fast + "-d 'amount=1' '" + server.url() + "'");
  EXPECT_EQ(unkeyed.exit_code, 3) << unkeyed.err;
  EXPECT_EQ(server.count("POST"), 1U);

  const auto keyed =
      run_cli(k_fast + "-v -d 'amount=1' --idempotency-key auto '" + server.url() + "'");
  EXPECT_EQ(keyed.exit_code, 0) << keyed.err;
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 3U);
  const auto key = requests[1].header("Idempotency-Key");
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(requests[2].header("Idempotency-Key"), key);
  EXPECT_EQ(requests[2].body, "amount=1");
  EXPECT_EQ(count_of(keyed.err, "Idempotency-Key: " + *key), 2U) << keyed.err;
}

TEST(HttpCli, SendsMethodHeadersBodyFromFileAndCallerKey) {
  http_test_server server;
  const fs::path file = fs::path(::testing::TempDir()) / "http_cli_body.json";
  std::ofstream(file, std::ios::binary) << "{\"a\":\n1}";
  const auto r =
      run_cli("-X PUT -H 'Content-Type: application/json' -H 'X-A:  b ' -d @'" + file.string() +
              "' --idempotency-key order-9 --key-format bare '" + server.url("/o") + "'");
  fs::remove(file);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].body, "{\"a\":\n1}");
  EXPECT_EQ(requests[0].header("Content-Type"), "application/json");
  EXPECT_EQ(requests[0].header("X-A"), "b");
  EXPECT_EQ(requests[0].header("Idempotency-Key"), "order-9");
}

TEST(HttpCli, ConnectionRefusedIsRetriedThenExitsFour) {
  const auto port = stormguard::test_support::closed_port();
  const auto r =
      run_cli(k_fast + "--retries 2 -v 'http://127.0.0.1:" + std::to_string(port) + "/'");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_EQ(count_of(r.err, "transport error 7 "), 4U) << r.err;  // 3 attempts + the summary
  EXPECT_NE(r.err.find("after 3 attempts: attempts_exhausted; exit status 4"), std::string::npos)
      << r.err;
}

TEST(HttpCli, BudgetExhaustionExitsFive) {
  // The default budget's reserve is 10 retries/s over 10 s: 100 retries, then fail fast.
  http_test_server server;
  server.set_fallback(status(503));
  const auto r = run_cli("--base 1us --cap 1us --retries 500 '" + server.url() + "'");
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("budget_exhausted"), std::string::npos) << r.err;
  EXPECT_EQ(server.requests().size(), 101U);
}

TEST(HttpCli, RetryAfterTooLongAndDeadlineExitSix) {
  http_test_server server;
  scripted_response later = status(503);
  later.headers = {{"Retry-After", "120"}};
  server.script({later});
  const auto too_long = run_cli(k_fast + "--max-retry-after 10s '" + server.url() + "'");
  EXPECT_EQ(too_long.exit_code, 6) << too_long.err;
  EXPECT_NE(too_long.err.find("retry_after_too_long"), std::string::npos) << too_long.err;
  EXPECT_EQ(server.requests().size(), 1U);

  scripted_response slow = status(200);
  slow.delay = 5s;
  server.set_fallback(slow);
  const auto start = std::chrono::steady_clock::now();
  const auto late = run_cli(k_fast + "--deadline 300ms '" + server.url() + "'");
  EXPECT_EQ(late.exit_code, 6) << late.err;
  EXPECT_NE(late.err.find("deadline_exceeded"), std::string::npos) << late.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(HttpCli, DeadlineThatCutsTheLastAttemptExitsSix) {
  // Found by trying it: with --retries 0 the deadline gave exit 4 (attempts_exhausted), with
  // retries left exit 6; the docs say 6.
  http_test_server server;
  scripted_response slow = status(200);
  slow.delay = 5s;
  server.set_fallback(slow);
  const auto r = run_cli(k_fast + "--retries 0 --deadline 300ms '" + server.url() + "'");
  EXPECT_EQ(r.exit_code, 6) << r.err;
  EXPECT_NE(r.err.find("deadline_exceeded"), std::string::npos) << r.err;
}

TEST(HttpCli, ThePolicyFilesDeadlineEndsTheCall) {
  http_test_server server;
  scripted_response slow = status(200);
  slow.delay = 5s;
  server.set_fallback(slow);
  const fs::path policy = fs::path(::testing::TempDir()) /
                          ("http_cli_deadline_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(policy);
    out << R"({"policies": [{"name": "short", "retries": 3, "deadline": "300ms"}]})";
  }
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_cli("--policy '" + policy.string() + "' '" + server.url() + "'");
  fs::remove(policy);
  EXPECT_EQ(r.exit_code, 6) << r.err;
  EXPECT_NE(r.err.find("deadline_exceeded"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(HttpCli, NonAsciiHostIsLookedUpInItsAsciiFormNotCalledAMalformedUrl) {
  // Found by trying it: exit 4 with "transport error 3" (CURLE_URL_MALFORMAT) in the C locale.
  // `.invalid` never resolves (RFC 6761), so the name lookup fails at once.
  const auto r = run_cli(k_fast + "--retries 0 -v 'http://ex\xC3\xA4mple.invalid/'");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.err.find("transport error 6 "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("xn--exmple-cua.invalid"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("error 3 "), std::string::npos) << r.err;
}

TEST(HttpCli, ResponseHeadersOverLibcurlsLimitAreNotRetried) {
  // Found by trying it: 100,000 header fields were fetched 4 times.
  http_test_server server;
  scripted_response many = status(200);
  for (int i = 0; i < 100000; ++i) many.headers.emplace_back("X-H" + std::to_string(i), "v");
  server.set_fallback(many);
  const auto r = run_cli(k_fast + "-v '" + server.url() + "'");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_EQ(server.requests().size(), 1U);
  EXPECT_NE(r.err.find("response too large"), std::string::npos) << r.err;
}

TEST(HttpCli, GetWithDataSendsTheBodyAndAnEmptyHeaderValueIsSent) {
  // Found by hand: `-X GET -d` dropped the body and `-H 'X-Empty:'` dropped the header.
  http_test_server server;
  const auto r = run_cli(k_fast + "-X GET -d 'q=1' -H 'X-Empty:' -H 'Accept:' '" +
                         server.url("/search") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1U);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].body, "q=1");
  EXPECT_EQ(requests[0].header("X-Empty"), "");
  EXPECT_EQ(requests[0].header("Accept"), "");
}

TEST(HttpCli, ZeroBaseWarnsThatEveryRetryStartsAtOnce) {
  // Found by hand: `--base 0s` (any --cap) made every delay 0 without a word.
  http_test_server server;
  server.script({status(503), status(200)});
  const auto zero = run_cli("--base 0s --retries 1 '" + server.url("/") + "'");
  EXPECT_EQ(zero.exit_code, 0) << zero.err;
  EXPECT_NE(zero.err.find("stormguard http: warning: --base is 0s: every retry starts at once"),
            std::string::npos)
      << zero.err;
  EXPECT_EQ(server.requests().size(), 2U);
  const auto fast = run_cli(k_fast + "--retries 1 '" + server.url("/") + "'");
  EXPECT_EQ(fast.exit_code, 0) << fast.err;
  EXPECT_EQ(fast.err.find("warning"), std::string::npos) << fast.err;
}

TEST(HttpCli, AReaderThatWentAwayExitsOneNotBySigpipe) {
  // Found by hand: `stormguard http URL | true` died of SIGPIPE (141); the docs say exit 1.
  http_test_server server;
  server.script({status(200, std::string(1 << 20, 'x'))});  // more than a pipe buffer
  const std::string status_path =
      ::testing::TempDir() + "http_cli_status_" + std::to_string(::getpid());
  const std::string command = std::string("{ '") + STORMGUARD_CLI_PATH + "' http '" +
                              server.url("/") + "' 2>/dev/null; echo $? >'" + status_path +
                              "'; } | true";
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(status_path);
  int exit_code = -1;
  in >> exit_code;
  fs::remove(status_path);
  EXPECT_EQ(exit_code, 1);
}

TEST(HttpCli, BadInputIsAUsageErrorNamingTheOptionAndValue) {
  struct bad_case {
    std::string args;
    std::string message;
  };
  const bad_case cases[] = {
      {"-X 'GE T' http://127.0.0.1/",
       "-X: not an HTTP method (a token such as GET or POST): \"GE T\""},
      {"-H 'NoColon' http://127.0.0.1/", "-H: not a header line 'Name: value': \"NoColon\""},
      {"-H 'Idempotency-Key: x' http://127.0.0.1/",
       "-H: \"Idempotency-Key: x\": use --idempotency-key"},
      {"-d @/nonexistent/body http://127.0.0.1/",
       "-d: cannot read \"/nonexistent/body\": No such file or directory"},
      {"ftp://127.0.0.1/f", "url: the scheme must be http or https, got \"ftp\""},
      {"--idempotency-key 'caf\xc3\xa9' http://127.0.0.1/", "--idempotency-key: "},
      {"--key-format fancy http://127.0.0.1/", "--key-format: unknown format \"fancy\""},
      {"--attempt-timeout 0s http://127.0.0.1/", "--attempt-timeout: must be > 0, got \"0s\""},
      {"--deadline soon http://127.0.0.1/", "--deadline: not a duration: \"soon\""},
      {"--base 5s --cap 1s http://127.0.0.1/", "--cap: "},
      // Found by hand: a directory was sent as an empty body (exit 0), /dev/zero was read until
      // memory ran out, and a Content-Length that differs from the body made the server wait.
      {"-d @'" + ::testing::TempDir() + "' http://127.0.0.1/",
       "-d: cannot read \"" + ::testing::TempDir() + "\": Is a directory"},
      {"-d @/dev/zero http://127.0.0.1/",
       "-d: \"/dev/zero\" holds more than 256 MiB, the largest body -d @FILE sends"},
      {"-H 'Content-Length: 5' http://127.0.0.1/",
       "-H: \"Content-Length: 5\": Content-Length is computed from the body (-d)"},
      {"-X HEAD -d x http://127.0.0.1/", "body: a HEAD request cannot carry a body"},
      // "AUTO" was sent as the literal key "AUTO", the same on every run.
      {"--idempotency-key AUTO http://127.0.0.1/",
       "--idempotency-key: \"AUTO\" would be sent as a literal key, the same for every request"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find("stormguard http: error: " + c.message), std::string::npos)
        << c.args << "\n"
        << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

// A regular file over the limit is refused from its size, before it is read: the process never
// holds its 256 MiB (it did: the file was read until the limit was passed).
TEST(HttpCli, ADataFileOverTheLimitIsRefusedBeforeItIsRead) {
  const std::string path = ::testing::TempDir() + "http_cli_big_" + std::to_string(::getpid());
  { std::ofstream out(path); }
  fs::resize_file(path, (std::uintmax_t{300} << 20));  // sparse: no disk used
  const std::string body = "@" + path;
  std::vector<char*> argv = {const_cast<char*>(STORMGUARD_CLI_PATH),
                             const_cast<char*>("http"),
                             const_cast<char*>("-d"),
                             const_cast<char*>(body.c_str()),
                             const_cast<char*>("http://127.0.0.1:1/"),
                             nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  rusage usage{};
  ASSERT_EQ(::wait4(pid, &status, 0, &usage), pid);
  fs::remove(path);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  // ru_maxrss is in KiB; the file's 300 MiB (or the limit's 256) would show.
  EXPECT_LT(usage.ru_maxrss, 128 * 1024) << "KiB: the file was read";
}

#endif  // STORMGUARD_CLI_PATH

}  // namespace
