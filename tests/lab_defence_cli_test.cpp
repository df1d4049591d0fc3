// SPDX-License-Identifier: Apache-2.0
// `stormguard lab --defence` on real loopback sockets against the simulator's run of the same
// scenario (the lab's JSON holds both): for drop-expired, the concurrency limit and the retry
// budget, the same recovery verdict, amplifications within 15 %, and each defence's own count
// (expired_dropped, rejected, server_refused) above zero on both sides. An 8-second scenario: a
// 1-s incident slows the 4 workers from 20 ms to 300 ms per request (timeout 200 ms).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

namespace fs = std::filesystem;
using stormguard::test_util::run_result;
using stormguard::test_util::run_shell;

const std::string k_cli = std::string("'") + STORMGUARD_CLI_PATH + "'";

class LabDefenceCli : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    file_ = (fs::temp_directory_path() /
             ("stormguard-lab-defence-" + std::to_string(::getpid()) + "-" + GetParam() + ".json"))
                .string();
    std::ofstream(file_, std::ios::binary) << R"({"name": "lab-defence", "seed": 42,
      "duration": "8s", "requests_per_second": 100, "clients": 4, "timeout": "200ms",
      "server": {"workers": 4, "queue_limit": 1000, "service_time": "20ms"},
      "incident": {"start": "1s", "end": "2s", "service_time": "300ms"}})";
  }
  void TearDown() override { fs::remove(file_); }

  std::string file_;
};

// |lab - sim| <= 15 % of sim.
void expect_within_15_percent(const nlohmann::json& lab, const nlohmann::json& sim,
                              const char* key) {
  ASSERT_TRUE(lab[key].is_number() && sim[key].is_number()) << key;
  const double l = lab[key].get<double>();
  const double s = sim[key].get<double>();
  EXPECT_LE(std::abs(l - s), 0.15 * s) << key << ": lab " << l << ", sim " << s;
}

TEST_P(LabDefenceCli, AgreesWithTheSimulator) {
  const std::string defence = GetParam();
  const run_result r =
      run_shell(k_cli + " lab '" + file_ + "' --scale 1 --strategy full --defence " + defence +
                " --json 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto doc = nlohmann::json::parse(r.output);
  ASSERT_EQ(doc["strategies"].size(), 1U) << r.output;
  const auto& lab = doc["strategies"][0]["lab"];
  const auto& sim = doc["strategies"][0]["sim"];
  EXPECT_EQ(lab["defence"], defence);
  EXPECT_EQ(sim["defence"], defence);
  EXPECT_EQ(lab["recovery_s"].is_null(), sim["recovery_s"].is_null())
      << "lab " << lab["recovery_s"] << ", sim " << sim["recovery_s"];
  expect_within_15_percent(lab, sim, "incident_amplification");
  expect_within_15_percent(lab, sim, "served_amplification");
  // The server counts the incident's served attempts from the lab's own label
  // (x-stormguard-incident), so the figure is the simulator's, not null.
  expect_within_15_percent(lab, sim, "incident_served_amplification");
  const char* own = defence == "drop-expired" ? "expired_dropped"
                    : defence == "concurrency-limit" || defence == "concurrency-limit+shed-retries"
                        ? "rejected"
                        : "server_refused";
  EXPECT_GT(lab[own].get<std::int64_t>(), 0) << own;
  EXPECT_GT(sim[own].get<std::int64_t>(), 0) << own;
}

INSTANTIATE_TEST_SUITE_P(Defences, LabDefenceCli,
                         ::testing::Values("drop-expired", "concurrency-limit", "retry-budget",
                                           "concurrency-limit+shed-retries"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::erase(name, '-');
                           std::erase(name, '+');
                           return name;
                         });

// Client profiles on real sockets: clients that send neither a deadline nor an attempt label
// (go-retryablehttp) give drop-expired and the server's retry budget nothing to act on, and the
// lab says so as the simulator does; gRPC's own label (grpc-previous-rpc-attempts) is read.
TEST(LabClientProfile, WhatTheClientsSendDecidesWhatTheServerCanDo) {
  const auto file = fs::temp_directory_path() /
                    ("stormguard-lab-profile-" + std::to_string(::getpid()) + ".json");
  const auto run = [&](const char* profile, const char* defences) {
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        << R"({"name": "lab-profile", "seed": 42, "client_profile": ")" << profile << R"(",
      "duration": "8s", "requests_per_second": 100, "clients": 4, "timeout": "200ms",
      "server": {"workers": 4, "queue_limit": 1000, "service_time": "20ms"},
      "incident": {"start": "1s", "end": "2s", "service_time": "300ms"}})";
    const run_result r =
        run_shell(k_cli + " lab '" + file.string() + "' --scale 1 --strategy full --defence " +
                  defences + " --json 2>/dev/null");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? nlohmann::json::parse(r.output) : nlohmann::json::object();
  };
  const auto go = run("go-retryablehttp", "drop-expired,retry-budget");
  ASSERT_EQ(go["strategies"].size(), 2U) << go;
  for (const auto& row : go["strategies"]) {
    const auto& lab = row["lab"];
    const auto& sim = row["sim"];
    EXPECT_EQ(lab["expired_dropped"], 0) << lab["defence"];
    EXPECT_EQ(sim["expired_dropped"], 0) << sim["defence"];
    EXPECT_EQ(lab["server_refused"], 0) << lab["defence"];
    EXPECT_EQ(sim["server_refused"], 0) << sim["defence"];
    expect_within_15_percent(lab, sim, "incident_amplification");
  }
  const auto grpc = run("grpc", "retry-budget");
  ASSERT_EQ(grpc["strategies"].size(), 1U) << grpc;
  EXPECT_GT(grpc["strategies"][0]["lab"]["server_refused"].get<std::int64_t>(), 0);
  EXPECT_GT(grpc["strategies"][0]["sim"]["server_refused"].get<std::int64_t>(), 0);
  fs::remove(file);
}

#endif  // STORMGUARD_CLI_PATH

}  // namespace
