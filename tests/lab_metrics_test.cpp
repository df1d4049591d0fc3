// SPDX-License-Identifier: Apache-2.0
// The lab fleet's client-side Prometheus metrics (lab::fleet_options::metrics, `stormguard lab
// --metrics-port`): after a short run with an incident, the counters add up — every ended attempt
// either was retried or ended its logical request, so attempts = requests ended after an attempt +
// retries — and the CLI serves them over HTTP and exits 1 on a port in use.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/registry.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "app/lab_fleet.hpp"
#include "stormguard/metrics/retry_metrics.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;

// 1 s at 60 req/s; the incident [0.25 s, 0.75 s) makes every attempt time out.
stormguard::sim::scenario tiny_storm() {
  stormguard::sim::scenario s = stormguard::sim::friday_night();
  s.name = "lab-metrics";
  s.length = 1s;
  s.requests_per_second = 60;
  s.clients = 2;
  s.timeout = 100ms;
  s.workers = 4;
  s.queue_limit = 100;
  s.service_time = 5ms;
  s.incident = stormguard::sim::incident{250ms, 750ms, 1s};
  return s;
}

// The sum of a counter family's values per label value of `client`, for the series whose label
// `key` (if not empty) equals `value`.
std::map<std::string, double> sum_by_client(const std::vector<prometheus::MetricFamily>& families,
                                            const std::string& name, const std::string& key = "",
                                            const std::string& value = "") {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::string client;
      bool match = key.empty();
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "client") client = l.value;
        if (l.name == key && l.value == value) match = true;
      }
      if (match) out[client] += m.counter.value;
    }
  }
  return out;
}

TEST(LabMetrics, FleetCountersAddUp) {
  prometheus::Registry registry;
  stormguard::metrics::retry_metrics metrics(registry);
  const std::vector<stormguard::sim::strategy> strategies{
      *stormguard::sim::find_strategy("naive"), *stormguard::sim::find_strategy("full+budget")};
  stormguard::lab::fleet_options options;
  options.metrics = &metrics;
  const auto report = stormguard::lab::run_lab(tiny_storm(), strategies, options);
  ASSERT_TRUE(report) << report.error();

  const auto families = registry.Collect();
  const auto attempts = sum_by_client(families, "stormguard_attempts_total");
  const auto retries = sum_by_client(families, "stormguard_retries_total");
  const auto calls = sum_by_client(families, "stormguard_calls_total");
  const auto throttled = sum_by_client(families, "stormguard_calls_total", "reason", "throttled");
  const auto denials = sum_by_client(families, "stormguard_budget_denials_total");
  const auto exhausted =
      sum_by_client(families, "stormguard_calls_total", "reason", "budget_exhausted");
  for (const char* name : {"naive", "full+budget"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(attempts.contains(name));
    EXPECT_GT(attempts.at(name), 0);
    EXPECT_EQ(attempts.at(name), calls.at(name) - throttled.at(name) + retries.at(name));
    EXPECT_EQ(denials.at(name), exhausted.at(name) + throttled.at(name));
  }
  EXPECT_GT(retries.at("naive"), 0);
}

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

const std::string k_cli = std::string("'") + STORMGUARD_CLI_PATH + "'";

class LabMetricsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("stormguard-lab-metrics-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    stormguard::sim::scenario s = tiny_storm();
    s.length = 1500ms;
    file_ = (dir_ / "lab.json").string();
    std::ofstream(file_, std::ios::binary) << stormguard::sim::to_json(s);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string file_;
};

TEST_F(LabMetricsCli, ServesTheFleetMetricsDuringTheRun) {
  if (run_shell("command -v curl >/dev/null 2>&1").exit_code != 0) GTEST_SKIP() << "no curl";
  const std::string err = (dir_ / "err").string();
  // Scrape while the run is under way: poll (at most 100 times, 0.1 s apart, on loopback) until
  // the port is on the stderr line and a success has been counted, so a slow (sanitizer) build
  // is not caught before its first answer.
  const run_result r =
      run_shell(k_cli + " lab '" + file_ +
                "' --scale 1 --strategy naive --metrics-port 0 >/dev/null 2>'" + err +
                "' & pid=$!; out=''; for i in $(seq 100); do port=$(sed -n 's|.*metrics on "
                "http://127.0.0.1:\\([0-9]*\\)/metrics|\\1|p' '" +
                err +
                "'); if [ -n \"$port\" ]; then out=$(curl -s \"http://127.0.0.1:$port/metrics\"); "
                "case \"$out\" in *'outcome=\"success\"'*) break;; esac; fi; sleep 0.1; done; "
                "printf '%s\\n' \"$out\"; wait $pid; echo \" exit $?\"");
  EXPECT_NE(r.output.find("stormguard_attempts_total{client=\"naive\",outcome=\"success\"}"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("stormguard_retries_total{client=\"naive\"}"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" exit 0"), std::string::npos) << r.output;
}

TEST_F(LabMetricsCli, PortInUseExitsOne) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  const run_result r = run_shell(k_cli + " lab '" + file_ + "' --scale 1 --strategy none " +
                                 "--metrics-port " + std::to_string(port) + " 2>&1");
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--metrics-port: cannot serve the metrics on 127.0.0.1:" +
                          std::to_string(port)),
            std::string::npos)
      << r.output;
}

TEST_F(LabMetricsCli, PortIsStrictDecimalInRange) {
  for (const char* bad : {"65536", "0x10", "-1", "+5", "abc"}) {
    const run_result r = run_shell(k_cli + " lab '" + file_ + "' --metrics-port " + bad + " 2>&1");
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
  }
}

#endif  // STORMGUARD_CLI_PATH

}  // namespace
