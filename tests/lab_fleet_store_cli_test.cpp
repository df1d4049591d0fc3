// SPDX-License-Identifier: Apache-2.0
// `stormguard lab --fleet-store auto --processes P`: the lab fleet spread over worker processes
// whose fleet budgets share a real redis-server started for the run, next to the simulator; and
// the same with Redis killed mid-run (the budgets fall back, the run completes), and killed then
// restarted (every process rejoins); a worker's own transport failures reach its report. An
// 11-second scenario at 100 req/s keeps each run short.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_server.hpp"
#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;

struct run_result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

run_result run_cli(const std::string& args) {
  run_result result;
  const fs::path err =
      fs::temp_directory_path() / ("stormguard-lab-fleet-err-" + std::to_string(getpid()) + ".txt");
  const std::string line =
      std::string("'") + STORMGUARD_CLI_PATH + "' " + args + " 2>'" + err.string() + "'";
  FILE* pipe = ::popen(line.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err);
  result.err.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(err);
  return result;
}

class LabFleetStoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ =
        (fs::temp_directory_path() / ("stormguard-lab-fleet-" + std::to_string(getpid()) + ".json"))
            .string();
    // 11 s at 100 req/s from 20 clients; 4 workers x 10 ms; in [2 s, 4 s) the service takes 1 s
    // against a timeout of 200 ms.
    std::ofstream(file_) << R"({"name": "fleet-storm", "seed": 7, "duration": "11s",
      "requests_per_second": 100, "clients": 20, "timeout": "200ms",
      "server": {"workers": 4, "queue_limit": 100, "service_time": "10ms",
                 "service_distribution": "fixed"},
      "incident": {"start": "2s", "end": "4s", "service_time": "1s"}})";
  }
  void TearDown() override { fs::remove(file_); }

  nlohmann::json run_json(const std::string& extra, run_result& r) {
    r = run_cli("lab '" + file_ + "' --scale 1 -s full+fleet --fleet-store auto --json " + extra);
    if (r.exit_code != 0) return {};
    return nlohmann::json::parse(r.out);
  }

  std::string file_;
};

TEST_F(LabFleetStoreCli, TwoProcessesShareOneRedisNextToTheSimulator) {
  run_result r;
  const nlohmann::json j = run_json("--processes 2", r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("2 processes sharing the fleet store auto"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("falling back"), std::string::npos) << r.err;
  const auto& s = j.at("strategies").at(0);
  EXPECT_EQ(s.at("name"), "full+fleet");
  EXPECT_TRUE(s.at("completed").get<bool>());
  const double lab = s.at("lab").at("amplification").get<double>();
  const double sim = s.at("sim").at("amplification").get<double>();
  EXPECT_NEAR(lab, sim, 0.2 * sim) << r.out;
  EXPECT_GT(s.at("lab").at("logical_requests").get<int>(), 600) << r.out;  // both parts ran
  // The recovery verdict is the simulator's: both recover.
  EXPECT_FALSE(s.at("lab").at("recovery_s").is_null()) << r.out;
  EXPECT_FALSE(s.at("sim").at("recovery_s").is_null()) << r.out;
}

// The built-in hedged+fleet charges its copies to the fleet budget, which the workers share
// through the real Redis as full+fleet's: every client's syncer synced, the copies went out, and
// the run is valid next to the simulator.
TEST_F(LabFleetStoreCli, HedgedFleetSharesOneRedisAcrossProcesses) {
  run_result r;
  r = run_cli("lab '" + file_ +
              "' --scale 1 -s hedged+fleet --fleet-store auto --json --processes 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NE(r.err.find("hedged+fleet: the fleet store answered "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("; 0 of 20 syncers never synced"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("falling back"), std::string::npos) << r.err;
  const auto& s = j.at("strategies").at(0);
  EXPECT_EQ(s.at("name"), "hedged+fleet");
  EXPECT_TRUE(s.at("valid").get<bool>()) << r.out;
  EXPECT_GT(s.at("lab").at("hedges_sent").get<int>(), 0) << r.out;
  const double lab = s.at("lab").at("amplification").get<double>();
  const double sim = s.at("sim").at("amplification").get<double>();
  EXPECT_NEAR(lab, sim, 0.2 * sim) << r.out;
  EXPECT_FALSE(s.at("lab").at("recovery_s").is_null()) << r.out;
}

TEST_F(LabFleetStoreCli, RedisKilledMidRunFallsBackAndTheRunCompletes) {
  run_result r;
  const nlohmann::json j = run_json("--processes 2 --fleet-store-kill-at 3s", r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("killing redis-server"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("falling back to local counts"), std::string::npos) << r.err;
  const auto& s = j.at("strategies").at(0);
  EXPECT_TRUE(s.at("completed").get<bool>());
  // The fallback's bound (docs/lab.md): each process's local ratio budget with the fleet floor
  // divided by the last live clients, so the fleet grants at most ratio x requests + the fleet
  // floor per window: 1 + 0.1 + 10/s x 10 s / 1,000 requests per window = 1.2 here.
  EXPECT_LE(s.at("lab").at("amplification").get<double>(), 1.2 + 0.05) << r.out;
  EXPECT_NEAR(s.at("lab").at("amplification").get<double>(),
              s.at("sim").at("amplification").get<double>(), 0.15)
      << r.out;
}

// Redis killed at 3 s and restarted on the same port (empty) at 5 s, the fleet over 3 processes:
// each worker says once that it falls back and once that it rejoins, every client's syncer (7 per
// worker) rejoins exactly once, and the run stays within the fallback's bound.
TEST_F(LabFleetStoreCli, RedisKilledAndRestartedMidRunIsRejoinedByEveryProcess) {
  run_result r;
  const nlohmann::json j =
      run_json("--processes 3 --fleet-store-kill-at 3s --fleet-store-restart-at 5s", r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("killing redis-server"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("redis-server restarted on the same port"), std::string::npos) << r.err;
  const auto count = [&](const std::string& what) {
    int n = 0;
    for (auto at = r.err.find(what); at != std::string::npos; at = r.err.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("falling back to local counts"), 3) << r.err;
  EXPECT_EQ(count("answers again: rejoined the fleet"), 3) << r.err;
  EXPECT_NE(r.err.find("; 20 rejoins after a failure"), std::string::npos)
      << r.err;  // 1 per client
  const auto& s = j.at("strategies").at(0);
  EXPECT_TRUE(s.at("completed").get<bool>());
  EXPECT_TRUE(s.at("valid").get<bool>()) << r.out;
  // Within the fallback's bound (as above), and near the simulator's outage of [3 s, 5 s).
  EXPECT_LE(s.at("lab").at("amplification").get<double>(), 1.2 + 0.05) << r.out;
  EXPECT_NEAR(s.at("lab").at("amplification").get<double>(),
              s.at("sim").at("amplification").get<double>(), 0.15)
      << r.out;
}

// FLUSHALL 3 s in (--fleet-store-flush-at): the store answers but has forgotten the fleet. Every
// client's syncer (20) finds another epoch once at its next sync (within max_sync_interval, 2 s),
// the report says so (count, time, in a window of the incident: not comparable with the
// simulator, whose store never forgets), and the run, flushed on purpose, stays valid.
TEST_F(LabFleetStoreCli, AFlushedStoreIsFoundAndReported) {
  run_result r;
  const nlohmann::json j = run_json("--processes 2 --fleet-store-flush-at 3s", r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("FLUSHALL sent to redis-server"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("had forgotten the fleet"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("falling back"), std::string::npos) << r.err;
  const auto& s = j.at("strategies").at(0);
  EXPECT_TRUE(s.at("valid").get<bool>()) << r.out;
  EXPECT_FALSE(s.at("comparable").get<bool>()) << r.out;
  const auto& forgot = s.at("store_forgot");
  EXPECT_EQ(forgot.at("syncs").get<int>(), 20) << r.out;
  EXPECT_GE(forgot.at("first_at_s").get<double>(), 2.9) << r.out;
  EXPECT_LE(forgot.at("first_at_s").get<double>(), 5.5) << r.out;
  EXPECT_TRUE(forgot.at("during_incident").get<bool>()) << r.out;
  // Without a fault nothing is reported.
  const nlohmann::json plain = run_json("--processes 2", r);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(plain.at("strategies").at(0).at("store_forgot").is_null()) << r.out;
}

// A worker whose connects all fail (no server at its --fleet-server address) reports its
// transport failures to the parent (lab::part_report: the parent then calls the run invalid and
// exits 3, as the one-process lab does), and its syncers' failures on a Redis that is not there.
// A worker killed by a signal (SIGKILL 3 s in, --fleet-worker-kill-at): the run completes with
// the other worker, and the report says it is invalid, naming the worker and the signal (exit
// 3); before, lab exited 1 with "a worker process failed (exit status -1)" and no report.
TEST_F(LabFleetStoreCli, AWorkerKilledBySignalMakesTheRunInvalidAndNamesTheSignal) {
  run_result r;
  const nlohmann::json j = [&] {
    r = run_cli("lab '" + file_ +
                "' --scale 1 -s full+fleet --fleet-store auto --json --processes 2 "
                "--fleet-worker-kill-at 3s");
    return r.out.empty() ? nlohmann::json() : nlohmann::json::parse(r.out);
  }();
  EXPECT_EQ(r.exit_code, 3) << r.err;
  ASSERT_TRUE(j.contains("strategies")) << r.out << r.err;
  const nlohmann::json& run = j.at("strategies").at(0);
  EXPECT_FALSE(run.at("valid").get<bool>());
  const std::string why = run.at("invalid_reason").get<std::string>();
  // The worker by its index and pid (the one the lab said it killed), the signal by number and
  // by name: not "exit status -1".
  const std::string killing = "killing worker 0/2 (pid ";
  const std::size_t at = r.err.find(killing);
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string pid =
      r.err.substr(at + killing.size(), r.err.find(')', at) - at - killing.size());
  ASSERT_FALSE(pid.empty()) << r.err;
  EXPECT_NE(why.find("worker 0/2 (pid " + pid + ") was killed by signal 9 (SIGKILL)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("1 of 2 parts"), std::string::npos) << why;
  EXPECT_EQ(why.find("exit status"), std::string::npos) << why;
  EXPECT_NE(r.err.find("the run is invalid"), std::string::npos) << r.err;
  // The surviving worker's half of the fleet is still reported, with its figures.
  const nlohmann::json& lab = run.at("lab");
  const double requests = lab.at("logical_requests").get<double>();
  const double sim = run.at("sim").at("logical_requests").get<double>();
  EXPECT_GT(requests, 0.3 * sim);
  EXPECT_LT(requests, 0.7 * sim);
  EXPECT_GE(lab.at("attempts").get<double>(), requests);
  EXPECT_GT(lab.at("amplification").get<double>(), 0.99);
  EXPECT_GT(lab.at("success_ratio").get<double>(), 0.3);
}

// The pid of the process whose command line holds every one of `words` as an argument (0 when
// none): a worker of this test's lab run, found by its scenario file and --fleet-worker K/P.
pid_t find_process(const std::vector<std::string>& words) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::vector<std::string> args;
    for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
    bool all = !args.empty();
    for (const std::string& w : words) {
      all = all && std::find(args.begin(), args.end(), w) != args.end();
    }
    if (all) return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

// `lab FILE --scale 1 -s full+fleet --fleet-store auto --json --processes 2` through popen (the
// shell exec'd: its pid is the lab's), its stderr to a file of its own.
class two_worker_lab {
 public:
  two_worker_lab(const std::string& file, const std::string& tag)
      : file_(file),
        err_(fs::temp_directory_path() /
             ("stormguard-lab-fleet-" + tag + "-" + std::to_string(getpid()))) {
    const std::string line = std::string("exec '") + STORMGUARD_CLI_PATH + "' lab '" + file +
                             "' --scale 1 -s full+fleet --fleet-store auto --json --processes 2 "
                             "2>'" +
                             err_.string() + "'";
    pipe_ = ::popen(line.c_str(), "r");
  }
  two_worker_lab(const two_worker_lab&) = delete;
  two_worker_lab& operator=(const two_worker_lab&) = delete;
  ~two_worker_lab() {
    if (pipe_ != nullptr) (void)finish();
  }
  [[nodiscard]] bool started() const { return pipe_ != nullptr; }

  // Worker 1/2's pid once it runs (the workers start 1.5 s before the run), or 0 after 10 s.
  [[nodiscard]] pid_t worker() const {
    pid_t pid = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (pid == 0 && std::chrono::steady_clock::now() < until) {
      pid = find_process({file_, "--fleet-worker", "1/2"});
      if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return pid;
  }

  struct ended {
    int status = -1;
    std::string out;
    std::string err;
  };
  // Reads its stdout to the end and waits for it.
  ended finish() {
    ended e;
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe_)) > 0) e.out.append(buffer, n);
    e.status = ::pclose(pipe_);
    pipe_ = nullptr;
    std::ifstream in(err_);
    e.err.assign(std::istreambuf_iterator<char>(in), {});
    fs::remove(err_);
    return e;
  }

 private:
  std::string file_;
  fs::path err_;
  FILE* pipe_ = nullptr;
};

// A worker stopped alone by SIGTERM (sent by someone else than the lab: an operator, a service
// manager) finishes early and prints the report of the part it ran; the lab does not count that
// short part as a whole one (before, the run was reported valid with that worker's part cut
// short): the run is invalid, the reason names the worker, its pid and the signal, and the other
// worker's part is reported (exit 3).
TEST_F(LabFleetStoreCli, AWorkerStoppedAloneBySigtermMakesTheRunInvalid) {
  two_worker_lab lab(file_, "term");
  ASSERT_TRUE(lab.started());
  // Worker 1 is stopped about 3 s into its 11 s.
  const pid_t worker = lab.worker();
  if (worker != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(4500));
    ::kill(worker, SIGTERM);
  }
  const auto [status, out, errors] = lab.finish();
  ASSERT_NE(worker, 0) << "worker 1/2 never seen; " << errors;
  ASSERT_TRUE(WIFEXITED(status)) << errors;
  EXPECT_EQ(WEXITSTATUS(status), 3) << errors;
  const nlohmann::json run = nlohmann::json::parse(out).at("strategies").at(0);
  EXPECT_TRUE(run.at("completed").get<bool>());
  EXPECT_FALSE(run.at("valid").get<bool>());
  const std::string why = run.at("invalid_reason").get<std::string>();
  EXPECT_NE(why.find("worker 1/2 (pid " + std::to_string(worker) +
                     ") was stopped by signal 15 (SIGTERM) before the end of the run"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("1 of 2 parts"), std::string::npos) << why;
  // Worker 0's half of the fleet, whole.
  const double requests = run.at("lab").at("logical_requests").get<double>();
  const double sim = run.at("sim").at("logical_requests").get<double>();
  EXPECT_GT(requests, 0.3 * sim);
  EXPECT_LT(requests, 0.7 * sim);
}

// SIGTERM to the lab process alone (not to its process group, as a terminal's Ctrl-C): it passes
// the stop on to its workers, and the run ends early with the partial report (exit 143) instead
// of at the end of the run.
TEST_F(LabFleetStoreCli, SigtermToTheLabAloneStopsItsWorkersToo) {
  two_worker_lab lab(file_, "stop");
  ASSERT_TRUE(lab.started());
  // The lab is the parent of worker 1/2; it is stopped about 3 s into the 11-s run.
  const pid_t worker = lab.worker();
  pid_t parent = 0;
  if (worker != 0) {
    std::ifstream stat("/proc/" + std::to_string(worker) + "/stat");
    const std::string text{std::istreambuf_iterator<char>(stat), {}};
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string state;
    fields >> state >> parent;  // fields 3 and 4: state, ppid
  }
  std::chrono::steady_clock::time_point signalled{};
  if (parent > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(4500));
    signalled = std::chrono::steady_clock::now();
    ::kill(parent, SIGTERM);
  }
  const auto [status, out, errors] = lab.finish();
  const auto ended = std::chrono::steady_clock::now();
  ASSERT_GT(parent, 0) << "the lab process never seen; " << errors;
  EXPECT_LT(ended - signalled, std::chrono::seconds(3)) << "the run went on to its end";
  ASSERT_TRUE(WIFEXITED(status)) << errors;
  EXPECT_EQ(WEXITSTATUS(status), 143) << errors;
  const nlohmann::json report = nlohmann::json::parse(out);
  EXPECT_TRUE(report.at("interrupted").get<bool>());
  EXPECT_FALSE(report.at("strategies").at(0).at("completed").get<bool>());
}

TEST_F(LabFleetStoreCli, AWorkerReportsItsOwnTransportFailures) {
  const fs::path two = fs::temp_directory_path() /
                       ("stormguard-lab-fleet-short-" + std::to_string(getpid()) + ".json");
  std::ofstream(two) << R"({"name": "short", "seed": 7, "duration": "2s",
    "requests_per_second": 50, "clients": 4, "timeout": "200ms",
    "server": {"workers": 4, "queue_limit": 100, "service_time": "10ms"}, "incident": null})";
  // A port where nothing listens: bound, then closed.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  const auto start =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          (std::chrono::steady_clock::now() + std::chrono::milliseconds(200)).time_since_epoch())
          .count();
  const run_result r = run_cli("lab '" + two.string() +
                               "' --scale 1 --strategy full+fleet --fleet-worker 0/1 "
                               "--fleet-server http://127.0.0.1:" +
                               std::to_string(port) + " --fleet-start " + std::to_string(start) +
                               " --fleet-store redis://127.0.0.1:" + std::to_string(port) +
                               "/0 --fleet-key worker-test");
  fs::remove(two);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json part = nlohmann::json::parse(r.out);
  EXPECT_GT(part.at("logical_requests").get<int>(), 50) << r.out;
  // Every attempt failed to connect: each is a transport failure, none a time-out.
  EXPECT_EQ(part.at("transport_failures").get<int>(), part.at("attempts").get<int>()) << r.out;
  EXPECT_FALSE(part.at("first_transport_failure").get<std::string>().empty()) << r.out;
  EXPECT_EQ(part.at("fleet_syncs").get<int>(), 0) << r.out;
  EXPECT_GT(part.at("fleet_sync_errors").get<int>(), 0) << r.out;
}

TEST_F(LabFleetStoreCli, BadFleetOptionsExitTwo) {
  const std::string base = "lab '" + file_ + "' --scale 1 -s full+fleet ";
  EXPECT_EQ(run_cli(base + "--fleet-store auto --processes 0").exit_code, 2);
  // --fleet-worker-kill-at needs a second worker and a time within the scenario.
  EXPECT_EQ(run_cli(base + "--fleet-store auto --fleet-worker-kill-at 3s").exit_code, 2);
  EXPECT_EQ(run_cli(base + "--fleet-store auto --processes 2 --fleet-worker-kill-at 11s").exit_code,
            2);
  EXPECT_EQ(
      run_cli(base + "--fleet-store auto --processes 2 --fleet-worker-kill-at soon").exit_code, 2);
  // An empty value is refused, not taken for "not given" (the run went ahead without the fault).
  for (const char* flag : {"--fleet-worker-kill-at", "--fleet-store-kill-at",
                           "--fleet-store-restart-at", "--fleet-store-flush-at"}) {
    const run_result empty =
        run_cli(base + "--fleet-store auto --processes 2 " + std::string(flag) + " ''");
    EXPECT_EQ(empty.exit_code, 2) << flag;
    EXPECT_NE(empty.err.find(std::string(flag) + " needs a duration"), std::string::npos)
        << empty.err;
  }
  EXPECT_EQ(run_cli(base + "--fleet-store auto --processes 65").exit_code, 2);
  const run_result url = run_cli(base + "--fleet-store http://u:hunter2@h");
  EXPECT_EQ(url.exit_code, 2);
  EXPECT_EQ(url.err.find("hunter2"), std::string::npos) << url.err;
  EXPECT_EQ(run_cli(base + "--fleet-store redis://127.0.0.1:1 --fleet-store-kill-at 3s").exit_code,
            2);
  // A FLUSHALL needs the lab's own redis-server and a time within the scenario.
  EXPECT_EQ(run_cli(base + "--fleet-store redis://127.0.0.1:1 --fleet-store-flush-at 3s").exit_code,
            2);
  EXPECT_EQ(run_cli(base + "--fleet-store auto --fleet-store-flush-at 11s").exit_code, 2);
  EXPECT_EQ(run_cli(base + "--fleet-store auto --defence drop-expired").exit_code, 2);
  // A restart needs a kill before it, within the scenario.
  EXPECT_EQ(run_cli(base + "--fleet-store auto --fleet-store-restart-at 5s").exit_code, 2);
  EXPECT_EQ(
      run_cli(base + "--fleet-store auto --fleet-store-kill-at 5s --fleet-store-restart-at 4s")
          .exit_code,
      2);
  EXPECT_EQ(
      run_cli(base + "--fleet-store auto --fleet-store-kill-at 5s --fleet-store-restart-at 20s")
          .exit_code,
      2);
  // A URL the store's parser refuses is a usage error before any worker starts, the password
  // redacted (it started the workers, which failed with exit 1).
  const run_result db = run_cli(base + "--fleet-store redis://:hunter2@127.0.0.1:6399/x");
  EXPECT_EQ(db.exit_code, 2) << db.err;
  EXPECT_NE(db.err.find("--fleet-store"), std::string::npos) << db.err;
  EXPECT_EQ(db.err.find("hunter2"), std::string::npos) << db.err;
  EXPECT_EQ(run_cli(base + "--fleet-store ''").exit_code, 2);  // was accepted and ignored
  // More processes than the scenario's 20 clients (each ran one client: 64 clients).
  const run_result many = run_cli(base + "--fleet-store auto --processes 21");
  EXPECT_EQ(many.exit_code, 2) << many.err;
  EXPECT_NE(many.err.find("--processes 21 is above the scenario's 20 clients"), std::string::npos)
      << many.err;
  // The options of --fleet-store without it (were ignored).
  for (const char* alone : {"--processes 4", "--fleet-store-kill-at 3s",
                            "--fleet-store-restart-at 5s", "--fleet-store-flush-at 3s"}) {
    const run_result r = run_cli(base + alone);
    EXPECT_EQ(r.exit_code, 2) << alone;
    EXPECT_NE(r.err.find("applies with --fleet-store only"), std::string::npos) << r.err;
  }
}

// The store's URL reaches the workers through their environment, never their arguments: any
// user of the machine can read a process's arguments (ps, /proc/PID/cmdline), and the URL may
// hold a password.
TEST_F(LabFleetStoreCli, TheStoresPasswordNeverReachesAWorkersArguments) {
  const fs::path two =
      fs::temp_directory_path() / ("stormguard-lab-fleet-pw-" + std::to_string(getpid()) + ".json");
  std::ofstream(two) << R"({"name": "short", "seed": 7, "duration": "2s",
    "requests_per_second": 50, "clients": 4, "timeout": "200ms",
    "server": {"workers": 4, "queue_limit": 100, "service_time": "10ms"}, "incident": null})";
  // Port 1: nothing listens, the workers run in their fallback; what matters is their argv.
  const std::string line =
      std::string("'") + STORMGUARD_CLI_PATH + "' lab '" + two.string() +
      "' --scale 1 -s full+fleet --processes 2 --fleet-store "
      "redis://:s3cretpw@127.0.0.1:1/0 >/dev/null 2>&1 & p=$!; seen=0; leaked=0; "
      "while kill -0 $p 2>/dev/null; do a=$(for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' "
      "<$f 2>/dev/null; echo; done | grep -e --fleet-worker | grep -v grep); "
      "[ -n \"$a\" ] && seen=1; case \"$a\" in *s3cretpw*) leaked=1;; esac; sleep 0.02; done; "
      "echo seen=$seen leaked=$leaked";
  const auto r = stormguard::test_util::run_shell(line);
  fs::remove(two);
  EXPECT_NE(r.output.find("seen=1"), std::string::npos) << r.output;  // the workers were seen
  EXPECT_NE(r.output.find("leaked=0"), std::string::npos) << r.output;
}

// A 2-s scenario of 4 clients at 50 req/s and a policy file whose ratio budget is a fleet budget
// taking its store's password from the environment variable STORMGUARD_TEST_FLEET_PW (its own
// store URL is overridden by --fleet-store); both removed with the object.
class short_run_files {
 public:
  short_run_files() {
    std::ofstream(scenario) << R"({"name": "short", "seed": 7, "duration": "2s",
      "requests_per_second": 50, "clients": 4, "timeout": "200ms",
      "server": {"workers": 4, "queue_limit": 100, "service_time": "10ms"}, "incident": null})";
    std::ofstream(policy) << R"({"policies": [{"name": "pf", "budget": {"kind": "ratio",
      "ratio": 0.1, "min_retries_per_second": 10, "fleet": {"store": "redis://127.0.0.1:1/0",
      "key": "pf", "password_env": "STORMGUARD_TEST_FLEET_PW"}}}]})";
  }
  ~short_run_files() {
    fs::remove(scenario);
    fs::remove(policy);
  }
  short_run_files(const short_run_files&) = delete;
  short_run_files& operator=(const short_run_files&) = delete;
  // The lab over 2 processes with the policy's strategy and `store`.
  [[nodiscard]] run_result run(const std::string& store) const {
    return run_cli("lab '" + scenario.string() + "' --scale 1 --policy '" + policy.string() +
                   "' -s pf --processes 2 --json --fleet-store '" + store + "'");
  }
  const fs::path scenario =
      fs::temp_directory_path() / ("stormguard-lab-fleet-s-" + std::to_string(getpid()) + ".json");
  const fs::path policy =
      fs::temp_directory_path() / ("stormguard-lab-fleet-p-" + std::to_string(getpid()) + ".json");
};

// The syncers' successful round trips, from the line "...: the fleet store answered S syncs".
long syncs_answered(const std::string& err) {
  const auto at = err.find("the fleet store answered ");
  return at == std::string::npos ? -1 : std::stol(err.substr(at + 25));
}

// A store where nothing listens: every worker's budgets run in their fallback, which the
// simulator's column does not model (it models a working store). The run is invalid, exit 3, the
// store named (redacted) in the reason; it was reported valid and comparable, exit 0. (A store
// killed on purpose, --fleet-store-kill-at, keeps its verdict: RedisKilledMidRun... above.)
TEST_F(LabFleetStoreCli, AnUnreachableStoreMakesTheRunInvalid) {
  const short_run_files files;
  const std::string store = "redis://:s3cretpw@127.0.0.1:" +
                            std::to_string(stormguard::test_support::redis_server::unused_port()) +
                            "/0";
  const run_result r = files.run(store);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.at("valid").get<bool>()) << r.out;
  const nlohmann::json& row = j.at("strategies").at(0);
  EXPECT_FALSE(row.at("valid").get<bool>()) << r.out;
  EXPECT_FALSE(row.at("comparable").get<bool>()) << r.out;
  const std::string why = row.at("invalid_reason").get<std::string>();
  EXPECT_NE(why.find("the fleet store redis://:***@127.0.0.1:"), std::string::npos) << why;
  EXPECT_NE(why.find("4 of 4 syncers never synced"), std::string::npos) << why;
  EXPECT_NE(r.err.find("4 of 4 syncers never synced"), std::string::npos) << r.err;
  EXPECT_EQ((r.out + r.err).find("s3cretpw"), std::string::npos);
}

// A Redis that requires a password, named by the policy's budget.fleet.password_env, while
// --fleet-store gives the URL without one: the workers keep password_env (they dropped it, and
// no syncer ever synced). A URL with its own password wins over password_env. `auto` (no
// password) ignores it. The password appears nowhere in the output.
TEST_F(LabFleetStoreCli, APolicysPasswordEnvIsKeptWhenFleetStoreGivesTheURL) {
  const stormguard::test_support::redis_server redis("lab-fleet-pw-7");
  const short_run_files files;
  ::setenv("STORMGUARD_TEST_FLEET_PW", "lab-fleet-pw-7", 1);
  const run_result kept = files.run(redis.url());
  ::setenv("STORMGUARD_TEST_FLEET_PW", "wrong-pw", 1);
  const run_result url_wins =
      files.run("redis://:lab-fleet-pw-7@127.0.0.1:" + std::to_string(redis.port()) + "/0");
  const run_result automatic = files.run("auto");
  ::unsetenv("STORMGUARD_TEST_FLEET_PW");
  for (const run_result* r : {&kept, &url_wins, &automatic}) {
    EXPECT_EQ(r->exit_code, 0) << r->err;
    EXPECT_GT(syncs_answered(r->err), 0) << r->err;
    EXPECT_NE(r->err.find("0 of 4 syncers never synced"), std::string::npos) << r->err;
    EXPECT_EQ((r->out + r->err).find("lab-fleet-pw-7"), std::string::npos) << r->err;
    EXPECT_EQ((r->out + r->err).find("wrong-pw"), std::string::npos) << r->err;
  }
}

#endif  // STORMGUARD_CLI_PATH

}  // namespace
