// SPDX-License-Identifier: Apache-2.0
// The simulator's figures do not change by accident: `stormguard simulate ... --json` is rerun for
// every recording under tests/data/simulate/ (tests/data/simulate/README.md says how each was
// made) and compared with it, per scenario, strategy and key.
//
// What is compared: every key of the recording (a key the output gained since is ignored), every
// row of the recording (a row is found by its name, strategy, algorithm, client count, load and
// where it retries; rows and strategies added since are ignored). Integers and strings must be
// equal; a number printed with decimals must print the same at the recording's precision (the
// writer may print 1.2 where the recording says 1.2000).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

#ifdef STORMGUARD_CLI_PATH

using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The recording, with every number that has a fraction or an exponent turned into a string of
// its printed text, so that its precision is kept.
json parse_recording(const std::string& text) {
  static const std::regex number(
      R"(([:\[,]\s*)(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)(?=\s*[,\]}]))");
  std::string quoted;
  std::sregex_iterator it(text.begin(), text.end(), number);
  std::size_t from = 0;
  for (; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    quoted.append(text, from, static_cast<std::size_t>(m.position(0)) - from);
    quoted += m.str(1);
    const bool fractional = m[3].matched || m[4].matched;
    quoted += fractional ? "\"#" + m.str(2) + "\"" : m.str(2);
    from = static_cast<std::size_t>(m.position(0) + m.length(0));
  }
  quoted.append(text, from);
  return json::parse(quoted);
}

// A printed number of the recording ("#1.2000") against the value now.
void expect_same_number(const std::string& printed, const json& actual, const std::string& where) {
  ASSERT_TRUE(actual.is_number()) << where << ": now " << actual.dump();
  const double now = actual.get<double>();
  const std::string text = printed.substr(1);
  const auto e = text.find_first_of("eE");
  if (e != std::string::npos) {  // an exponent: equal to its significant digits
    const double recorded = std::stod(text);
    const auto dot = text.find('.');
    const int digits = dot == std::string::npos || dot > e ? 0 : static_cast<int>(e - dot - 1);
    EXPECT_LE(std::fabs(now - recorded), std::fabs(recorded) * 0.5 * std::pow(10.0, -digits))
        << where << ": recorded " << text << ", now " << now;
    return;
  }
  const auto dot = text.find('.');
  const int decimals = static_cast<int>(text.size() - dot - 1);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, now);
  EXPECT_EQ(std::string(buffer), text) << where;
}

// The keys that name a row of an array.
const char* const k_identity[] = {"name", "strategy", "algorithm", "clients", "load", "retries_at"};

bool same_row(const json& recorded, const json& actual) {
  if (!actual.is_object()) return false;
  for (const char* key : k_identity) {
    if (!recorded.contains(key)) continue;
    if (!actual.contains(key)) return false;
    const json& r = recorded[key];
    const json& a = actual[key];
    if (r.is_string() && r.get<std::string>().starts_with("#")) {
      if (!a.is_number() ||
          std::fabs(a.get<double>() - std::stod(r.get<std::string>().substr(1))) > 1e-9) {
        return false;
      }
    } else if (r != a) {
      return false;
    }
  }
  return true;
}

bool has_identity(const json& row) {
  if (!row.is_object()) return false;
  for (const char* key : k_identity) {
    if (row.contains(key)) return true;
  }
  return false;
}

void expect_covers(const json& recorded, const json& actual, const std::string& where) {
  if (recorded.is_object()) {
    ASSERT_TRUE(actual.is_object()) << where << ": now " << actual.dump();
    for (const auto& [key, value] : recorded.items()) {
      ASSERT_TRUE(actual.contains(key)) << where << ": the key " << key << " is gone";
      expect_covers(value, actual[key], where + "." + key);
    }
  } else if (recorded.is_array()) {
    ASSERT_TRUE(actual.is_array()) << where << ": now " << actual.dump();
    for (std::size_t i = 0; i < recorded.size(); ++i) {
      const json& row = recorded[i];
      if (has_identity(row)) {
        const json* match = nullptr;
        for (const json& candidate : actual) {
          if (same_row(row, candidate)) {
            match = &candidate;
            break;
          }
        }
        std::string id = where + "[" + std::to_string(i) + "]";
        if (row.contains("name")) id = where + "[" + row["name"].dump() + "]";
        ASSERT_NE(match, nullptr) << id << ": no such row now";
        expect_covers(row, *match, id);
      } else {
        ASSERT_LT(i, actual.size()) << where << ": fewer elements now";
        expect_covers(row, actual[i], where + "[" + std::to_string(i) + "]");
      }
    }
  } else if (recorded.is_string() && recorded.get<std::string>().starts_with("#")) {
    expect_same_number(recorded.get<std::string>(), actual, where);
  } else {
    EXPECT_EQ(recorded, actual) << where;
  }
}

struct recording {
  const char* file;       // under tests/data/simulate/
  const char* arguments;  // of `stormguard simulate`
};

// Each recording and the command that made it (tests/data/simulate/README.md).
const recording k_recordings[] = {
    {"friday-night.json", "friday-night --json"},
    {"metastable.json", "metastable --json"},
    {"metastable-slowdown.json", "metastable-slowdown --json"},
    {"no-incident.json", "no-incident --json"},
    {"outage-80.json", "outage-80 --json"},
    {"outage-80-fleet.json", "outage-80-fleet --json"},
    {"tail-at-scale.json", "tail-at-scale --json"},
    {"friday-night-fleet.json", "friday-night-fleet --json"},
    {"layers.json", "layers --json"},
    {"layers-1.json", "layers --layers 1 --json"},
    {"brooker-occ.json", "brooker-occ --json"},
    {"friday-night-sweep.json", "friday-night --sweep load=1000:3000:1000 --json"},
};

class SimGolden : public ::testing::TestWithParam<recording> {};

TEST_P(SimGolden, SameFiguresAsTheRecording) {
  const recording& r = GetParam();
  const std::string path = std::string(STORMGUARD_SOURCE_DIR "/tests/data/simulate/") + r.file;
  const std::string text = read_file(path);
  ASSERT_FALSE(text.empty()) << "cannot read " << path;
  const json recorded = parse_recording(text);
  const auto run = stormguard::test_util::run_shell(
      std::string("'" STORMGUARD_CLI_PATH "' simulate ") + r.arguments + " 2>/dev/null");
  ASSERT_EQ(run.exit_code, 0) << r.arguments;
  const json actual = json::parse(run.output);
  expect_covers(recorded, actual, r.file);
}

// The comparison itself fails on a changed figure, a missing key and a missing row.
TEST(SimGoldenCompare, FailsOnADifference) {
  const json recorded = parse_recording(R"({"strategies":[{"name":"a","x":1.2500,"n":3}]})");
  const json same =
      json::parse(R"({"strategies":[{"name":"b"},{"name":"a","x":1.25,"n":3,"y":1}]})");
  expect_covers(recorded, same, "same");
  EXPECT_FALSE(::testing::Test::HasFailure());
  for (const char* changed :
       {R"({"strategies":[{"name":"a","x":1.2501,"n":3}]})",
        R"({"strategies":[{"name":"a","x":1.25,"n":4}]})", R"({"strategies":[{"name":"a","n":3}]})",
        R"({"strategies":[{"name":"b","x":1.25,"n":3}]})"}) {
    ::testing::TestPartResultArray failures;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      expect_covers(recorded, json::parse(changed), "changed");
    }
    EXPECT_GT(failures.size(), 0) << changed;
  }
}

INSTANTIATE_TEST_SUITE_P(Recordings, SimGolden, ::testing::ValuesIn(k_recordings),
                         [](const ::testing::TestParamInfo<recording>& param) {
                           std::string name = param.param.file;
                           name = name.substr(0, name.find('.'));
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

#endif  // STORMGUARD_CLI_PATH

}  // namespace
