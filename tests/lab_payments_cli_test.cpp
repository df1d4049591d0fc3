// SPDX-License-Identifier: Apache-2.0
// `stormguard lab payments` end to end, small: 300 charges with a fault rate of 0.2 audited as no
// double charge and no lost charge behind the SQLite guard (one replica, two replicas, two
// `stormguard serve` processes sharing one SQLite file), two replicas sharing a real PostgreSQL
// and a real Redis (tests/support/), the double charges it finds with --idempotency off (exit 1),
// and the usage errors (exit 2, naming the option).
#include <gtest/gtest.h>

#ifdef STORMGUARD_CLI_PATH

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/cli_runner.hpp"
#include "support/postgres_server.hpp"
#include "support/redis_server.hpp"

extern char** environ;

namespace {

using stormguard::test_support::program_run;
using stormguard::test_support::run_program;
using stormguard::test_support::stderr_mode;

const std::string k_cli = STORMGUARD_CLI_PATH;

// The operator token of GET /ledger that serve_child gives `serve` and lab_payments gives a run
// with --server, in a file (--ledger-token-file).
std::string ledger_token_file() {
  static const struct file {
    std::string path = "/tmp/stormguard-lab-payments-token-" + std::to_string(::getpid());
    file() { std::ofstream(path) << "lab-payments-test-token-0123456789\n"; }
    ~file() { std::remove(path.c_str()); }
  } token;
  return token.path;
}

// `stormguard lab payments ARGS...`; with --server, also --ledger-token-file (serve_child's).
program_run lab_payments(std::vector<std::string> args) {
  if (std::find(args.begin(), args.end(), "--server") != args.end()) {
    args.insert(args.end(), {"--ledger-token-file", ledger_token_file()});
  }
  args.insert(args.begin(), {k_cli, "lab", "payments"});
  return run_program(args, stderr_mode::capture, std::chrono::seconds(60));
}

// The --json object of a run (null when stdout is not JSON).
nlohmann::json audit_of(const program_run& r) {
  return nlohmann::json::parse(r.out, nullptr, false);
}

TEST(LabPaymentsCli, SqliteGuardAt20PercentFaultsHasNoDuplicateAndNoLostCharge) {
  const program_run r = lab_payments({"--charges", "300", "--fault-after-commit", "0.2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json a = audit_of(r);
  ASSERT_TRUE(a.is_object()) << r.out;
  EXPECT_EQ(a["charges"], 300);
  EXPECT_EQ(a["ledger_rows"], 300);
  EXPECT_EQ(a["duplicates"], 0);
  EXPECT_EQ(a["lost"], 0);
  EXPECT_EQ(a["unconfirmed"], 0);
  EXPECT_GT(a["attempts"].get<int>(), 300) << "the faults made the client retry";
  EXPECT_GT(a["replayed"].get<int>(), 0) << "the retries were answered from the guard";
  EXPECT_EQ(a["dropped"], a["replayed"]) << "every dropped answer was replayed, none re-run";
  EXPECT_EQ(a["store"], "sqlite");
  EXPECT_EQ(a["passed"], true);
  // The policy is printed on stderr; the table without --json ends with the verdict.
  EXPECT_NE(r.err.find("policy: 9 retries"), std::string::npos) << r.err;
}

TEST(LabPaymentsCli, IdempotencyOffFindsTheDoubleChargesAndExits1) {
  const program_run r = lab_payments({"--charges", "300", "--idempotency", "off"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAIL: "), std::string::npos) << r.out;
  const program_run j = lab_payments({"--charges", "300", "--idempotency", "off", "--json"});
  EXPECT_EQ(j.exit_code, 1);
  const nlohmann::json a = audit_of(j);
  ASSERT_TRUE(a.is_object()) << j.out;
  EXPECT_GT(a["duplicates"].get<int>(), 0);
  EXPECT_EQ(a["lost"], 0);
  EXPECT_EQ(a["ledger_rows"], a["attempts"]) << "off: every attempt that got there charged";
  EXPECT_EQ(a["passed"], false);
}

TEST(LabPaymentsCli, TwoReplicasSharingSqliteHaveNoDuplicate) {
  const program_run r = lab_payments({"--charges", "300", "--replicas", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json a = audit_of(r);
  ASSERT_TRUE(a.is_object()) << r.out;
  EXPECT_EQ(a["servers"], 2);
  EXPECT_EQ(a["duplicates"], 0);
  EXPECT_EQ(a["lost"], 0);
  EXPECT_EQ(a["ledger_rows"], 300);
  EXPECT_GT(a["replayed"].get<int>(), 0);
}

TEST(LabPaymentsCli, TwoReplicasSharingPostgresHaveNoDuplicate) {
  const std::string url = stormguard::test_support::shared_postgres_server().create_database();
  const program_run r = lab_payments(
      {"--charges", "200", "--replicas", "2", "--idempotency", "postgres:" + url, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json a = audit_of(r);
  ASSERT_TRUE(a.is_object()) << r.out;
  EXPECT_EQ(a["store"], "postgres");
  EXPECT_EQ(a["servers"], 2);
  EXPECT_EQ(a["ledger_rows"], 200);
  EXPECT_EQ(a["duplicates"], 0);
  EXPECT_EQ(a["lost"], 0);
  EXPECT_GT(a["replayed"].get<int>(), 0);
}

TEST(LabPaymentsCli, TwoReplicasSharingRedisHaveNoDuplicate) {
  const std::string url = stormguard::test_support::redis_server::shared().url();
  const program_run r = lab_payments(
      {"--charges", "200", "--replicas", "2", "--idempotency", "redis:" + url, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json a = audit_of(r);
  ASSERT_TRUE(a.is_object()) << r.out;
  EXPECT_EQ(a["store"], "redis");
  EXPECT_EQ(a["servers"], 2);
  EXPECT_EQ(a["ledger_rows"], 200);
  EXPECT_EQ(a["duplicates"], 0);
  EXPECT_EQ(a["lost"], 0);
  EXPECT_GT(a["replayed"].get<int>(), 0);
}

// `stormguard serve ARGS...` as a child; the URL of its first stdout line. Ended at the end.
class serve_child {
 public:
  explicit serve_child(std::vector<std::string> args) {
    args.insert(args.begin(),
                {k_cli, "serve", "no-incident", "--ledger-token-file", ledger_token_file()});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    if (::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    std::string line;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{out[0], POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char c = 0;
      if (::read(out[0], &c, 1) != 1 || c == '\n') break;
      line += c;
    }
    ::close(out[0]);
    const std::string prefix = "listening on ";
    if (line.rfind(prefix, 0) == 0) url_ = line.substr(prefix.size());
  }
  ~serve_child() {  // SIGTERM, so that serve removes its temporary store; SIGKILL after 2 s
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 400; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  serve_child(const serve_child&) = delete;
  serve_child& operator=(const serve_child&) = delete;
  [[nodiscard]] const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

TEST(LabPaymentsCli, TwoServeProcessesSharingOneSqliteFileHaveNoDuplicate) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("stormguard-lab-payments-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string spec = "sqlite:" + (dir / "ledger.db").string();
  {
    const serve_child a({"--idempotency", spec, "--fault-after-commit", "0.2", "--seed", "1"});
    const serve_child b({"--idempotency", spec, "--fault-after-commit", "0.2", "--seed", "2"});
    ASSERT_FALSE(a.url().empty());
    ASSERT_FALSE(b.url().empty());
    const program_run r =
        lab_payments({"--charges", "200", "--server", a.url(), "--server", b.url(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const nlohmann::json audit = audit_of(r);
    ASSERT_TRUE(audit.is_object()) << r.out;
    EXPECT_EQ(audit["servers"], 2);
    EXPECT_EQ(audit["ledger_rows"], 200) << "each shared row counted once";
    EXPECT_EQ(audit["duplicates"], 0);
    EXPECT_EQ(audit["lost"], 0);
    EXPECT_GT(audit["dropped"].get<int>(), 0);
    EXPECT_TRUE(audit["fault_after_commit"].is_null()) << "the servers' business";
  }
  std::filesystem::remove_all(dir);
}

TEST(LabPaymentsCli, TwoServeProcessesSharingRedisHaveNoDuplicate) {
  // The issue's set-up: two `stormguard serve` processes on one Redis, the client alternating
  // between them (a retry lands on the other process).
  const std::string spec = "redis:" + stormguard::test_support::redis_server::shared().url();
  const serve_child a({"--idempotency", spec, "--fault-after-commit", "0.2", "--seed", "1"});
  const serve_child b({"--idempotency", spec, "--fault-after-commit", "0.2", "--seed", "2"});
  ASSERT_FALSE(a.url().empty());
  ASSERT_FALSE(b.url().empty());
  const program_run r =
      lab_payments({"--charges", "200", "--server", a.url(), "--server", b.url(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json audit = audit_of(r);
  ASSERT_TRUE(audit.is_object()) << r.out;
  EXPECT_EQ(audit["store"], "redis");
  EXPECT_EQ(audit["ledger_rows"], 200) << "this run's rows, each once";
  EXPECT_EQ(audit["duplicates"], 0);
  EXPECT_EQ(audit["lost"], 0);
  EXPECT_GT(audit["dropped"].get<int>(), 0);
}

TEST(LabPaymentsCli, AServerWithAnotherLedgerTokenFailsTheAuditNamingTheOption) {
  const serve_child serve({});
  ASSERT_FALSE(serve.url().empty());
  const std::string other = ledger_token_file() + "-other";
  std::ofstream(other) << "another-operator-token-987654\n";
  const program_run r = run_program({k_cli, "lab", "payments", "--charges", "2", "--server",
                                     serve.url(), "--ledger-token-file", other},
                                    stderr_mode::capture, std::chrono::seconds(60));
  std::remove(other.c_str());
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot read the ledger"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("status 401"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--ledger-token-file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("another-operator-token"), std::string::npos) << "the token is printed";
}

TEST(LabPaymentsCli, AStoreOutageIsSaidOnceAndTheAuditGivesNoVerdict) {
  // serve on its own Redis, which dies before the run: every attempt is a 503 from the guard.
  auto redis = std::make_unique<stormguard::test_support::redis_server>();
  const serve_child serve({"--idempotency", "redis:" + redis->url()});
  ASSERT_FALSE(serve.url().empty());
  ::kill(redis->pid(), SIGKILL);
  redis.reset();
  const std::filesystem::path policy =
      std::filesystem::temp_directory_path() /
      ("stormguard-lab-payments-policy-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(policy);
    out << R"({"policies": [{"name": "once", "retries": 1, "backoff": {"base": "1ms", "cap": "1ms"},
               "max_retry_after": "1ms"}]})";
  }
  const program_run r = lab_payments({"--charges", "4", "--concurrency", "2", "--server",
                                      serve.url(), "--policy", policy.string()});
  std::filesystem::remove(policy);
  // The ledger cannot be read while the store is down: no verdict, a run-time failure.
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot read the ledger"), std::string::npos) << r.err;
  const std::string warning = "warning: a server answered 503";
  const auto first = r.err.find(warning);
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(warning, first + 1), std::string::npos) << "said once: " << r.err;
}

TEST(LabPaymentsCli, AServerRestartedDuringTheRunIsDetectedNotANegativeCount) {
  // serve restarted on its port, on the same SQLite file, while the charges run: its /stats
  // counters begin again at 0. The audit says so and counts the client's attempts, never a
  // negative difference.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("stormguard-lab-payments-restart-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string spec = "sqlite:" + (dir / "ledger.db").string();
  auto first = std::make_unique<serve_child>(
      std::vector<std::string>{"--idempotency", spec, "--fault-after-commit", "0.1"});
  const std::string url = first->url();
  ASSERT_FALSE(url.empty());
  const std::string port = url.substr(url.rfind(':') + 1, url.size() - url.rfind(':') - 2);
  program_run r;
  // 3,000 charges: about 2 s on a quiet release build (1,400 charges/s), so the restart at
  // 0.7 s falls inside the run on any build.
  std::thread run([&] { r = lab_payments({"--charges", "3000", "--server", url, "--json"}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  first.reset();  // SIGTERM, waited for
  const serve_child second({"--port", port, "--idempotency", spec, "--fault-after-commit", "0.1"});
  EXPECT_EQ(second.url(), url);
  run.join();
  std::filesystem::remove_all(dir);
  const nlohmann::json audit = audit_of(r);
  ASSERT_TRUE(audit.is_object()) << r.out << r.err;
  EXPECT_EQ(audit["counters_reset"], true) << r.out;
  EXPECT_EQ(audit["attempts"], audit["client_attempts"]) << r.out;
  EXPECT_GT(audit["attempts"].get<int>(), 0) << r.out;
  EXPECT_TRUE(audit["dropped"].is_null()) << r.out;
  EXPECT_EQ(audit["duplicates"], 0) << r.out;
  EXPECT_EQ(audit["lost"], 0) << r.out;
}

TEST(LabPaymentsCli, AStoreThatStaysDownEndsTheRunAfterConsecutive503s) {
  // serve on its own Redis, which dies before the run: every attempt is a 503 from the guard.
  // With the default policy (10 attempts, Retry-After 1 s honoured) 3,000 charges took minutes;
  // the run gives up after 100 consecutive 503s.
  auto redis = std::make_unique<stormguard::test_support::redis_server>();
  const serve_child serve({"--idempotency", "redis:" + redis->url()});
  ASSERT_FALSE(serve.url().empty());
  ::kill(redis->pid(), SIGKILL);
  redis.reset();
  const auto began = std::chrono::steady_clock::now();
  const program_run r = lab_payments({"--charges", "3000", "--server", serve.url()});
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(30));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("gave up after 100 consecutive 503s"), std::string::npos) << r.err;
}

// `stormguard lab payments ARGS...` as a child, stdout and stderr to files; SIGINT after
// `after`; how long it took to exit from the signal, and how it ended.
struct interrupted_run {
  int status = -1;
  std::chrono::steady_clock::duration took{};
  std::string out;
};
interrupted_run interrupt_lab_payments(std::vector<std::string> args,
                                       std::chrono::milliseconds after) {
  interrupted_run result;
  args.insert(args.begin(), {k_cli, "lab", "payments"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = std::filesystem::temp_directory_path() /
                          ("stormguard-lab-payments-int-" + std::to_string(::getpid()));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return result;
  std::this_thread::sleep_for(after);
  ::kill(pid, SIGINT);
  const auto sent = std::chrono::steady_clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() - sent > std::chrono::seconds(30)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.took = std::chrono::steady_clock::now() - sent;
  result.status = status;
  std::ifstream in(out);
  result.out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::filesystem::remove(out);
  return result;
}

TEST(LabPaymentsCli, SigintEndsALongRunWithinASecondWithThePartialAudit) {
  // A run of a million charges, interrupted after 1.5 s: the charges in flight and their backoff
  // sleeps are cancelled (it took ~9 s: every charge in flight finished its retries first).
  const interrupted_run r =
      interrupt_lab_payments({"--charges", "1000000", "--fault-after-commit", "0.5", "--json"},
                             std::chrono::milliseconds(1500));
  // On a quiet machine the run ends 0.1–0.3 s after the signal (the figure in docs/idempotency.md);
  // the bound leaves room for a loaded CI machine (3.9 s seen with the suite running in parallel,
  // the audit's reads and the store's fsyncs waiting on a busy disk) and still catches the ~9 s
  // of a run that lets every charge in flight finish its retries.
  EXPECT_LT(r.took, std::chrono::milliseconds(5000));
  ASSERT_TRUE(WIFEXITED(r.status)) << r.status;
  EXPECT_EQ(WEXITSTATUS(r.status), 130);
  const nlohmann::json audit = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(audit.is_object()) << r.out;
  EXPECT_EQ(audit["interrupted"], true);
  EXPECT_EQ(audit["duplicates"], 0);
  EXPECT_LT(audit["charges"].get<int>(), 1000000);
}

TEST(LabPaymentsCli, TheVerdictLineSaysHowManyFailedAndMaxFailedMakesThemFail) {
  // No retry, and every committed charge left unanswered: no double charge, no lost charge, yet
  // every charge failed for its client (and each is in the ledger: unconfirmed).
  const std::filesystem::path policy =
      std::filesystem::temp_directory_path() /
      ("stormguard-lab-payments-noretry-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(policy);
    out << R"({"policies": [{"name": "none", "retries": 0}]})";
  }
  const std::vector<std::string> base = {"--charges", "4",        "--fault-after-commit",
                                         "1",         "--policy", policy.string()};
  const program_run table = lab_payments(base);
  EXPECT_EQ(table.exit_code, 0) << table.out << table.err;
  EXPECT_NE(table.out.find("PASS: no double charge, no lost charge; 4 of 4 charges failed, 4 "
                           "unconfirmed"),
            std::string::npos)
      << table.out;
  std::vector<std::string> strict = base;
  strict.insert(strict.end(), {"--max-failed", "0"});
  const program_run failed = lab_payments(strict);
  std::filesystem::remove(policy);
  EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  EXPECT_NE(failed.out.find("FAIL: 0 double charges, 0 lost charges; 4 of 4 charges failed "
                            "(--max-failed 0), 4 unconfirmed"),
            std::string::npos)
      << failed.out;
}

TEST(LabPaymentsCli, ThePolicysDeadlineReachesEachChargeAndHedgingIsRefused) {
  // Every answer dropped, one retry 1 s later: the policy's 200 ms deadline leaves one attempt per
  // charge (two without it).
  const std::filesystem::path policy =
      std::filesystem::temp_directory_path() /
      ("stormguard-lab-payments-deadline-" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(policy);
    out << R"({"policies": [{"name": "short", "retries": 1, "deadline": "200ms",
               "backoff": {"base": "1s", "cap": "1s", "jitter": "none"}},
              {"name": "hedged", "hedging": {"max_attempts": 2, "delay": "50ms"}}]})";
  }
  const program_run r =
      lab_payments({"--charges", "3", "--fault-after-commit", "1", "--idempotency", "off", "--json",
                    "--policy", policy.string() + ":short"});
  const program_run hedged =
      lab_payments({"--charges", "3", "--policy", policy.string() + ":hedged"});
  std::filesystem::remove(policy);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json audit = audit_of(r);
  ASSERT_TRUE(audit.is_object()) << r.out << r.err;
  EXPECT_EQ(audit["client_attempts"], 3) << r.out;
  EXPECT_EQ(audit["failed"], 3) << r.out;
  EXPECT_EQ(hedged.exit_code, 2) << hedged.out << hedged.err;
  EXPECT_NE(hedged.err.find("hedging"), std::string::npos) << hedged.err;
}

TEST(LabPaymentsCli, BadOptionsExit2NamingTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--charges", "0"}, "--charges"},
      {{"--charges", "x"}, "--charges"},
      {{"--fault-after-commit", "1.5"}, "--fault-after-commit"},
      {{"--fault-after-commit", "-1"}, "--fault-after-commit"},
      {{"--replicas", "0"}, "--replicas"},
      {{"--replicas", "65"}, "--replicas"},
      {{"--concurrency", "0"}, "--concurrency"},
      {{"--idempotency", "bogus:x"}, "--idempotency"},
      {{"--idempotency", "nothing"}, "--idempotency"},
      {{"--server", "ftp://x/"}, "--server"},
      {{"--server", "http://"}, "--server"},
      {{"--server", "http:///x"}, "--server"},
      {{"--server", "http://127.0.0.1:9/", "--server", "http://127.0.0.1:9"}, "given twice"},
      {{"--server", "http://127.0.0.1:9/", "--server", "http://localhost:9/"}, "given twice"},
      {{"--server", "http://127.0.0.1:80/", "--server", "http://127.0.0.1"}, "given twice"},
      {{"--max-failed", "-1"}, "--max-failed"},
      {{"--seed", "18446744073709551616"}, "--seed"},
      {{"--fault-after-commit", "nan"}, "--fault-after-commit"},
      {{"--server", "http://127.0.0.1:1/", "--replicas", "2"}, "--replicas"},
      {{"--strategy", "naive"}, "--strategy"},
      {{"--scale", "0.5"}, "--scale"},
      {{"--policy", "/nonexistent.json"}, "--policy"},
      // Each replica would open its own in-memory database: a false FAIL.
      {{"--idempotency", "sqlite::memory:", "--replicas", "2"}, "share no key"},
  };
  for (const auto& [args, option] : cases) {
    const program_run r = lab_payments(args);
    EXPECT_EQ(r.exit_code, 2) << args.front() << " " << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find(option), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // The payments options belong to lab payments only.
  const program_run other = run_program({k_cli, "lab", "no-incident", "--charges", "10"},
                                        stderr_mode::capture, std::chrono::seconds(10));
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("--charges applies to lab payments only"), std::string::npos)
      << other.err;
  // An unreachable store: a failure at run time.
  const program_run unreachable =
      lab_payments({"--charges", "10", "--idempotency", "sqlite:/nonexistent/dir/l.db"});
  EXPECT_EQ(unreachable.exit_code, 1) << unreachable.err;
  // A server that does not answer fails before the first charge, not after every retry.
  const auto began = std::chrono::steady_clock::now();
  const program_run dead = lab_payments({"--server", "http://127.0.0.1:1/", "--charges", "1000"});
  EXPECT_EQ(dead.exit_code, 1) << dead.err;
  EXPECT_NE(dead.err.find("cannot reach the server http://127.0.0.1:1/"), std::string::npos)
      << dead.err;
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10));
}

}  // namespace

#endif  // STORMGUARD_CLI_PATH
