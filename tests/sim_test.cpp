// SPDX-License-Identifier: Apache-2.0
// Tests of the storm simulator: scenarios, strategies, the simulation and its reports.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/layers.hpp"
#include "app/occ.hpp"
#include "app/plot.hpp"
#include "app/report.hpp"
#include "app/sweep.hpp"
#include "stormguard/sim/parallel.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"

namespace {

using namespace std::chrono_literals;
namespace sim = stormguard::sim;

#ifndef STORMGUARD_SOURCE_DIR
#error "tests are compiled with STORMGUARD_SOURCE_DIR"
#endif

const std::string k_scenarios = std::string(STORMGUARD_SOURCE_DIR) + "/scenarios/";

// A small storm, fast enough for sanitizer builds: 500 req/s from 2 clients against 25 workers ×
// 20 ms (1,250 req/s, 2.5× demand, like friday-night); 1.5 s per request from t = 2 s to 8 s;
// 20 s simulated.
sim::scenario small_storm() {
  sim::scenario s;
  s.name = "small-storm";
  s.seed = 7;
  s.length = 20s;
  s.requests_per_second = 500.0;
  s.clients = 2;
  s.timeout = 1s;
  s.workers = 25;
  s.queue_limit = 2'000;
  s.service_time = 20ms;
  s.incident = sim::incident{2s, 8s, 1500ms};
  return s;
}

sim::scenario small_calm() {
  sim::scenario s = small_storm();
  s.name = "small-calm";
  s.length = 5s;
  s.incident.reset();
  return s;
}

const sim::strategy& strategy_named(std::string_view name) {
  const sim::strategy* s = sim::find_strategy(name);
  if (s == nullptr) throw std::logic_error("no strategy " + std::string(name));
  return *s;
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

TEST(ScenarioFile, FridayNightJsonEqualsTheBuiltInScenario) {
  auto parsed = sim::load_scenario(k_scenarios + "friday-night.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, sim::friday_night());
}

TEST(ScenarioFile, NoIncidentJsonIsFridayNightWithoutTheIncident) {
  auto parsed = sim::load_scenario(k_scenarios + "no-incident.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  sim::scenario expected = sim::friday_night();
  expected.name = "no-incident";
  expected.description = (*parsed).description;
  expected.incident.reset();
  EXPECT_EQ(*parsed, expected);
}

TEST(ScenarioFile, MissingFileIsAnErrorNamingThePath) {
  auto parsed = sim::load_scenario("/nonexistent/storm.json");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("/nonexistent/storm.json"), std::string::npos);
}

TEST(ScenarioParser, RoundTripsThroughToJson) {
  sim::scenario s = small_storm();
  s.distribution = sim::service_distribution::exponential;
  auto parsed = sim::parse_scenario(sim::to_json(s));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, s);
  auto friday = sim::parse_scenario(sim::to_json(sim::friday_night()));
  ASSERT_TRUE(friday) << friday.error().message;
  EXPECT_EQ(*friday, sim::friday_night());
}

// Replaces the first occurrence of `from` in friday-night's JSON by `to`.
std::string friday_with(const std::string& from, const std::string& to) {
  std::string text = sim::to_json(sim::friday_night());
  const auto at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("not in the scenario: " + from);
  return text.replace(at, from.size(), to);
}

struct bad_input {
  std::string label;
  std::string json;
  std::string field;       // expected scenario_error::field
  std::string in_message;  // expected to appear in the message
};

// GoogleTest prints the parameter into the test's name as CTest lists it ("# GetParam() = ...");
// without this it dumps the object's bytes, hundreds of characters long.
void PrintTo(const bad_input& input, std::ostream* os) { *os << input.label; }

class ScenarioParserRejects : public ::testing::TestWithParam<bad_input> {};

TEST_P(ScenarioParserRejects, WithAnErrorNamingTheFieldAndValue) {
  const bad_input& input = GetParam();
  auto parsed = sim::parse_scenario(input.json);
  ASSERT_FALSE(parsed) << input.label;
  EXPECT_EQ(parsed.error().field, input.field) << parsed.error().message;
  EXPECT_NE(parsed.error().message.find(input.in_message), std::string::npos)
      << "message: " << parsed.error().message;
  if (!input.field.empty()) {
    EXPECT_EQ(parsed.error().message.rfind(input.field, 0), 0u) << parsed.error().message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    BadInputs, ScenarioParserRejects,
    ::testing::Values(
        bad_input{"missing field", friday_with("\"clients\": 20,", ""), "clients", "missing"},
        bad_input{"missing nested field", friday_with("\"workers\": 100,", ""), "server.workers",
                  "missing"},
        bad_input{"wrong type", friday_with("\"clients\": 20", "\"clients\": \"20\""), "clients",
                  "\"20\""},
        bad_input{"fractional integer", friday_with("\"workers\": 100", "\"workers\": 100.5"),
                  "server.workers", "100.5"},
        bad_input{"negative rate",
                  friday_with("\"requests_per_second\": 2000.0", "\"requests_per_second\": -5"),
                  "requests_per_second", "-5"},
        bad_input{"zero rate",
                  friday_with("\"requests_per_second\": 2000.0", "\"requests_per_second\": 0"),
                  "requests_per_second", "got 0"},
        bad_input{"rate as string",
                  friday_with("\"requests_per_second\": 2000.0", "\"requests_per_second\": \"2k\""),
                  "requests_per_second", "\"2k\""},
        bad_input{"unknown field",
                  friday_with("\"clients\": 20,", "\"clients\": 20, \"colour\": 1,"), "colour",
                  "unknown field"},
        bad_input{"unknown nested field",
                  friday_with("\"workers\": 100,", "\"workers\": 100, \"threads\": 4,"),
                  "server.threads", "unknown field"},
        bad_input{"duration without unit", friday_with("\"timeout\": \"1s\"", "\"timeout\": \"1\""),
                  "timeout", "\"1\""},
        bad_input{"duration as number", friday_with("\"timeout\": \"1s\"", "\"timeout\": 1000"),
                  "timeout", "1000"},
        bad_input{"negative duration", friday_with("\"timeout\": \"1s\"", "\"timeout\": \"-1s\""),
                  "timeout", "\"-1s\""},
        bad_input{"zero duration", friday_with("\"duration\": \"60s\"", "\"duration\": \"0s\""),
                  "duration", "\"0s\""},
        bad_input{"incident ends before it starts",
                  friday_with("\"end\": \"20s\"", "\"end\": \"5s\""), "incident.end", "\"5s\""},
        bad_input{"negative seed", friday_with("\"seed\": 42", "\"seed\": -1"), "seed", "-1"},
        bad_input{"duplicate field",
                  friday_with("\"clients\": 20,", "\"clients\": 20, \"clients\": 2,"), "clients",
                  "more than once"},
        bad_input{"not an object", "[1, 2]", "", "JSON object"},
        bad_input{"bad JSON with its line", "{\n  \"name\": \"x\",\n  \"seed\": 42,,\n}", "",
                  "line 3"},
        bad_input{"empty input", "", "", "invalid JSON"},
        bad_input{"zero duration as written",
                  friday_with("\"timeout\": \"1s\"", "\"timeout\": \"0ms\""), "timeout",
                  "must be in (0, 1h], got \"0ms\""},
        bad_input{"timeout above one hour",
                  friday_with("\"timeout\": \"1s\"", "\"timeout\": \"9223372036854775807ns\""),
                  "timeout", "must be in (0, 1h], got \"9223372036854775807ns\""},
        bad_input{"unparsable duration range",
                  friday_with("\"timeout\": \"1s\"", "\"timeout\": \"5000000h\""), "timeout",
                  "in (0, 1h]"},
        bad_input{"service time above one hour",
                  friday_with("\"service_time\": \"20ms\"", "\"service_time\": \"2h\""),
                  "server.service_time", "got \"2h\""},
        bad_input{"incident service above 1h",
                  friday_with("\"service_time\": \"1.5s\"", "\"service_time\": \"61min\""),
                  "incident.service_time", "got \"61min\""},
        bad_input{"incident start at the end",
                  friday_with("\"start\": \"10s\"", "\"start\": \"1min\""), "incident.start",
                  "[0, 60s), got \"1min\""},
        bad_input{"more than ten million requests",
                  friday_with("\"requests_per_second\": 2000.0", "\"requests_per_second\": 200000"),
                  "requests_per_second", "requests_per_second x duration must be at most 10000000"},
        bad_input{"array described by type",
                  friday_with("\"name\": \"friday-night\"", "\"name\": [[1, 2], [3]]"), "name",
                  "got an array"},
        bad_input{"object described by type",
                  friday_with("\"name\": \"friday-night\"", "\"name\": {\"a\": [1]}"), "name",
                  "got an object"},
        bad_input{"deeply nested arrays",
                  friday_with("\"name\": \"friday-night\"",
                              "\"name\": " + std::string(100'000, '[') + std::string(100'000, ']')),
                  "", "nested more than 64 levels deep at line 2, column 74"},
        bad_input{"deeply nested document", std::string(100'000, '[') + std::string(100'000, ']'),
                  "", "nested more than 64 levels"}),
    [](const ::testing::TestParamInfo<bad_input>& param_info) {
      std::string name;
      for (char c : param_info.param.label)
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(ScenarioParser, IgnoresBracketsInsideStringsWhenCheckingTheDepth) {
  const std::string brackets = std::string(100, '[') + "\\\"" + std::string(100, '{');
  auto parsed =
      sim::parse_scenario(friday_with("\"description\": \"", "\"description\": \"" + brackets));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ((*parsed).description.substr(0, 101), std::string(100, '[') + "\"");
}

TEST(ScenarioValidate, RejectsTimeoutAndServiceTimesAboveOneHour) {
  sim::scenario s = small_storm();
  s.timeout = 1h + 1ns;
  ASSERT_TRUE(sim::validate(s));
  EXPECT_EQ(sim::validate(s)->field, "timeout");
  s = small_storm();
  s.service_time = stormguard::duration::max();
  ASSERT_TRUE(sim::validate(s));
  EXPECT_EQ(sim::validate(s)->field, "server.service_time");
  s = small_storm();
  s.incident->service_time = 2h;
  ASSERT_TRUE(sim::validate(s));
  EXPECT_EQ(sim::validate(s)->field, "incident.service_time");
  s = small_storm();
  s.timeout = 1h;
  s.service_time = 1h;
  s.incident->service_time = 1h;
  EXPECT_FALSE(sim::validate(s));
}

TEST(ScenarioValidate, BoundsTheLogicalRequestsToTenMillion) {
  sim::scenario s = small_storm();
  s.length = 1h;
  s.requests_per_second = 10'000'000.0 / 3600.0;
  EXPECT_FALSE(sim::validate(s));
  s.requests_per_second = 2778;
  const auto problem = sim::validate(s);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->field, "requests_per_second");
  EXPECT_NE(problem->message.find("2778 x 3600s"), std::string::npos) << problem->message;
}

// A scratch file removed at the end of the test.
struct temp_file {
  explicit temp_file(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("stormguard-sim-test-" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" + name)) {}
  ~temp_file() { std::filesystem::remove(path); }
  std::filesystem::path path;
};

TEST(ScenarioFile, LargerThanOneMebibyteIsRejectedNamingTheLimit) {
  temp_file file("large.json");
  {
    std::ofstream out(file.path, std::ios::binary);
    out << std::string(1024 * 1024, ' ') << sim::to_json(sim::friday_night());
  }
  auto parsed = sim::load_scenario(file.path);
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find(file.path.string()), std::string::npos);
  EXPECT_NE(parsed.error().message.find("larger than 1048576 bytes (1 MiB)"), std::string::npos)
      << parsed.error().message;
}

TEST(ScenarioFile, AnEndlessFileIsRejectedAtTheSizeLimit) {
  if (!std::filesystem::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  auto parsed = sim::load_scenario("/dev/zero");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("1 MiB"), std::string::npos) << parsed.error().message;
}

TEST(ScenarioFile, ReadErrorIsReportedWithTheSystemReasonNotAsInvalidJson) {
  // Reading /proc/self/mem from offset 0 fails with EIO on Linux.
  if (!std::filesystem::exists("/proc/self/mem")) GTEST_SKIP() << "no /proc/self/mem";
  auto parsed = sim::load_scenario("/proc/self/mem");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("cannot read the scenario file ("), std::string::npos)
      << parsed.error().message;
  EXPECT_EQ(parsed.error().message.find("invalid JSON"), std::string::npos)
      << parsed.error().message;
}

TEST(ParseDuration, AcceptsUnitsAndExactDecimals) {
  EXPECT_EQ(stormguard::parse_duration("20ms"), std::optional<stormguard::duration>(20ms));
  EXPECT_EQ(stormguard::parse_duration("1.5s"), std::optional<stormguard::duration>(1500ms));
  EXPECT_EQ(stormguard::parse_duration("2min"), std::optional<stormguard::duration>(120s));
  EXPECT_EQ(stormguard::parse_duration("1h"), std::optional<stormguard::duration>(1h));
  EXPECT_EQ(stormguard::parse_duration("250us"), std::optional<stormguard::duration>(250us));
  EXPECT_EQ(stormguard::parse_duration("7ns"), std::optional<stormguard::duration>(7ns));
  EXPECT_EQ(stormguard::parse_duration("0s"), std::optional<stormguard::duration>(0s));
}

TEST(ParseDuration, RejectsAnythingElse) {
  for (const char* text : {"", "1", "s", "-1s", "1.s", ".5s", "1.2.3s", "0.5ns", "1 s", "1S",
                           "1sec", "+1s", "1e3ms", "99999999999999999999s", "10000000h"}) {
    EXPECT_FALSE(stormguard::parse_duration(text)) << text;
  }
}

TEST(FormatDuration, IsTheExactInverseOfParseDuration) {
  EXPECT_EQ(stormguard::format_duration(1500ms), "1.5s");
  EXPECT_EQ(stormguard::format_duration(60s), "60s");
  EXPECT_EQ(stormguard::format_duration(20ms), "20ms");
  EXPECT_EQ(stormguard::format_duration(0s), "0s");
  for (auto d : {stormguard::duration(1), stormguard::duration(1'000'000'001),
                 stormguard::duration(123'456'789), stormguard::duration(999)}) {
    EXPECT_EQ(stormguard::parse_duration(stormguard::format_duration(d)), std::optional(d));
  }
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

TEST(BuiltinStrategies, AreTheDocumentedTableInOrder) {
  std::vector<std::string> names;
  for (const auto& s : sim::builtin_strategies()) names.push_back(s.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"none", "naive", "exponential", "equal", "full",
                                      "decorrelated", "full+budget", "full+throttle", "full+quota",
                                      "full+adaptive", "full+envoy", "full+fleet", "full+breaker",
                                      "hedged", "hedged+fleet", "hedged-unbudgeted"}));
  EXPECT_EQ(strategy_named("none").retry.max_retries, 0);
  const auto& naive = strategy_named("naive").retry;
  EXPECT_EQ(naive.max_retries, 3);
  EXPECT_EQ(naive.backoff, stormguard::backoff::constant(100ms).options());
  EXPECT_EQ(strategy_named("full").retry.backoff.jitter, stormguard::jitter::full);
  EXPECT_EQ(strategy_named("full").retry.backoff.cap, 3s);
  const auto* budget =
      std::get_if<stormguard::ratio_budget_options>(&strategy_named("full+budget").budget);
  ASSERT_NE(budget, nullptr);
  EXPECT_EQ(*budget, stormguard::ratio_budget_options{});
  EXPECT_TRUE(std::holds_alternative<stormguard::no_budget>(strategy_named("full").budget));
  const auto* envoy =
      std::get_if<stormguard::concurrency_budget_options>(&strategy_named("full+envoy").budget);
  ASSERT_NE(envoy, nullptr);
  EXPECT_EQ(*envoy, stormguard::concurrency_budget_options{});
  // hedged+fleet hedges as hedged does; its copies are charged to full+fleet's fleet budget.
  const sim::strategy& hedged_fleet = strategy_named("hedged+fleet");
  ASSERT_TRUE(hedged_fleet.hedging.has_value());
  EXPECT_EQ(hedged_fleet.hedging, strategy_named("hedged").hedging);
  EXPECT_EQ(hedged_fleet.retry.max_retries, 0);
  const auto* fleet = std::get_if<stormguard::fleet_budget_options>(&hedged_fleet.budget);
  ASSERT_NE(fleet, nullptr);
  const auto* full_fleet =
      std::get_if<stormguard::fleet_budget_options>(&strategy_named("full+fleet").budget);
  ASSERT_NE(full_fleet, nullptr);
  EXPECT_EQ(fleet->ratio, full_fleet->ratio);
  EXPECT_EQ(fleet->sync_interval, full_fleet->sync_interval);
}

TEST(FindStrategy, ReturnsNullForAnUnknownName) {
  EXPECT_EQ(sim::find_strategy("Full"), nullptr);
  EXPECT_EQ(sim::find_strategy(""), nullptr);
  EXPECT_NE(sim::strategy_names().find("full+budget"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The simulation
// ---------------------------------------------------------------------------------------------

TEST(Simulate, SameSeedGivesByteIdenticalJson) {
  const auto a = sim::to_json(sim::simulate(small_storm(), sim::builtin_strategies()));
  const auto b = sim::to_json(sim::simulate(small_storm(), sim::builtin_strategies()));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.rfind("{\"scenario\":\"small-storm\",\"seed\":7,\"strategies\":[", 0), 0u);
}

TEST(Simulate, DifferentSeedsGiveDifferentRuns) {
  sim::scenario other = small_storm();
  other.seed = 8;
  const auto& full = strategy_named("full");
  EXPECT_NE(sim::to_csv(sim::simulate(small_storm(), full)),
            sim::to_csv(sim::simulate(other, full)));
}

TEST(Simulate, EveryStrategySeesTheSameArrivals) {
  const auto report = sim::simulate(small_storm(), sim::builtin_strategies());
  for (const auto& r : report.strategies) {
    EXPECT_EQ(r.logical_requests, report.strategies.front().logical_requests) << r.name;
  }
  // A Poisson process of 500/s over 20 s: 10,000 expected, within 5 standard deviations.
  EXPECT_NEAR(static_cast<double>(report.strategies.front().logical_requests), 10000.0, 5 * 100.0);
}

TEST(Simulate, WithoutAnIncidentNoStrategyRetries) {
  for (const auto& strat : sim::builtin_strategies()) {
    if (strat.hedging) continue;  // hedges answer slowness, not failures (sim_hedging_test.cpp)
    const auto r = sim::simulate(small_calm(), strat);
    // Adaptive throttling (the SRE book's formula) rejects a few requests at its cold start,
    // while each client's first requests are still in flight and none is accepted yet; every
    // other strategy admits every request.
    if (strat.name == "full+adaptive") {
      EXPECT_GT(r.throttled, 0);
      EXPECT_LT(r.throttled, r.logical_requests / 100);
    } else {
      EXPECT_EQ(r.throttled, 0) << r.name;
    }
    EXPECT_EQ(r.attempts + r.throttled, r.logical_requests) << r.name;  // no retries
    ASSERT_TRUE(r.amplification) << r.name;
    EXPECT_DOUBLE_EQ(*r.amplification,
                     static_cast<double>(r.attempts) / static_cast<double>(r.logical_requests))
        << r.name;
    EXPECT_EQ(r.failures, 0) << r.name;
    EXPECT_EQ(r.timeouts, 0) << r.name;
    EXPECT_EQ(r.successes + r.requests_in_flight + r.throttled, r.logical_requests) << r.name;
    // Only the requests still being served when the simulation stops (and the cold-start
    // rejections) have not succeeded.
    ASSERT_TRUE(r.success_ratio) << r.name;
    EXPECT_GE(*r.success_ratio, 0.98) << r.name;
    EXPECT_FALSE(r.recovery_s) << r.name;
    EXPECT_FALSE(r.incident_amplification) << r.name;
    ASSERT_TRUE(r.p99_latency_ms) << r.name;
    EXPECT_DOUBLE_EQ(*r.p99_latency_ms, 20.0) << r.name;
  }
}

TEST(Simulate, ConservesAttemptsAndLogicalRequestsForEveryStrategy) {
  sim::scenario exponential_service = small_storm();
  exponential_service.distribution = sim::service_distribution::exponential;
  for (const auto& s : {small_storm(), exponential_service}) {
    for (const auto& strat : sim::builtin_strategies()) {
      const auto r = sim::simulate(s, strat);
      EXPECT_EQ(r.attempts,
                r.successes + r.failures + r.timeouts + r.in_flight_attempts + r.hedges_cancelled)
          << r.name;
      EXPECT_EQ(r.logical_requests, r.successes + r.attempts_exhausted + r.budget_exhausted +
                                        r.throttled + r.requests_in_flight)
          << r.name;
      std::int64_t attempts = 0, successes = 0, failures = 0, timeouts = 0, logical = 0;
      for (const auto& b : r.series) {
        attempts += b.attempts;
        successes += b.successes;
        failures += b.failures;
        timeouts += b.timeouts;
        logical += b.logical_requests;
        EXPECT_LE(b.queue_length, s.queue_limit);
      }
      EXPECT_EQ(attempts, r.attempts) << r.name;
      EXPECT_EQ(successes, r.successes) << r.name;
      EXPECT_EQ(failures, r.failures) << r.name;
      EXPECT_EQ(timeouts, r.timeouts) << r.name;
      EXPECT_EQ(logical, r.logical_requests) << r.name;
      const int most =
          strat.hedging ? strat.hedging->options.max_attempts : strat.retry.max_retries + 1;
      EXPECT_LE(r.attempts, r.logical_requests * most) << r.name;
      if (std::holds_alternative<stormguard::no_budget>(strat.budget)) {
        EXPECT_EQ(r.budget_exhausted, 0) << r.name;
      }
    }
  }
}

// ratio_budget guarantees, per client, that the retries granted in any span of window are at most
// ratio · (the requests in (t - window - window/10, t], t the last of those retries) +
// min_retries_per_second · window. Summed over the clients, for a span ending at `span_end` (a
// whole second), from the 1-s bins of the run.
double ratio_budget_bound(const sim::strategy_result& r, const sim::scenario& s,
                          const stormguard::ratio_budget_options& options,
                          stormguard::duration span_end) {
  const auto window_start =
      std::max(stormguard::duration::zero(), span_end - options.window - options.window / 10);
  std::int64_t deposits = 0;
  for (auto k = window_start / 1s; k < span_end / 1s && k < std::ssize(r.series); ++k) {
    deposits += r.series[static_cast<std::size_t>(k)].logical_requests;
  }
  const double window_s = std::chrono::duration<double>(options.window).count();
  return options.ratio * static_cast<double>(deposits) +
         static_cast<double>(s.clients * options.min_retries_per_second) * window_s;
}

// Retries sent in [from, to) (whole seconds): attempts minus first attempts, from the bins.
std::int64_t retries_sent(const sim::strategy_result& r, stormguard::duration from,
                          stormguard::duration to) {
  std::int64_t retries = 0;
  for (auto k = from / 1s; k < to / 1s; ++k) {
    const auto& b = r.series[static_cast<std::size_t>(k)];
    retries += b.attempts - b.logical_requests;
  }
  return retries;
}

TEST(Simulate, BudgetBoundsIncidentAttemptsByRatioPlusFloor) {
  // No attempt fails before the incident [2 s, 8 s), so the retries sent in it were granted in
  // it: a span shorter than window, bounded by ratio_budget_bound at its end.
  const sim::scenario s = small_storm();
  const auto& strat = strategy_named("full+budget");
  const auto options = std::get<stormguard::ratio_budget_options>(strat.budget);
  ASSERT_LE(s.incident->end - s.incident->start, options.window);
  const auto r = sim::simulate(s, strat);

  const double max_retries = ratio_budget_bound(r, s, options, s.incident->end);
  const std::int64_t retries_in_incident = retries_sent(r, s.incident->start, s.incident->end);
  EXPECT_LE(static_cast<double>(retries_in_incident), max_retries);
  // The storm is heavy enough that the budget, not the policy, is what stopped the retries.
  EXPECT_GT(r.budget_exhausted, 0);
  EXPECT_GT(static_cast<double>(retries_in_incident), 0.5 * max_retries);
  // The retries of the logical requests started in the incident were granted in [2 s, 20 s):
  // two spans of at most window, [2 s, 12 s) and [12 s, 20 s).
  ASSERT_TRUE(r.incident_amplification);
  const double bound =
      ratio_budget_bound(r, s, options, 12s) + ratio_budget_bound(r, s, options, 20s);
  EXPECT_LE(*r.incident_amplification,
            1.0 + bound / static_cast<double>(r.incident_logical_requests));
}

// Retries started during the incident, and the successes of its whole seconds. In small_storm
// no attempt fails before the incident, so every retry started in it was granted in it.
struct incident_counts {
  std::int64_t retries = 0;
  std::int64_t successes = 0;
};
incident_counts count_incident(const sim::scenario& s, const sim::strategy_result& r) {
  incident_counts c;
  c.retries = r.incident_attempts - r.incident_logical_requests;
  for (auto k = s.incident->start / 1s; k < s.incident->end / 1s; ++k) {
    c.successes += r.series[static_cast<std::size_t>(k)].successes;
  }
  return c;
}

TEST(Simulate, TokenBucketBoundsIncidentRetriesByItsFormula) {
  // gRFC A6: a retry is granted only while tokens > max / 2 after its failure took one token,
  // and tokens <= max − failures + ratio · successes. So per client the retries granted in a
  // span are < max / 2 + ratio · (successes in it).
  const sim::scenario s = small_storm();
  const auto& strat = strategy_named("full+throttle");
  const auto o = std::get<stormguard::token_bucket_throttle_options>(strat.budget);
  const auto r = sim::simulate(s, strat);
  const auto c = count_incident(s, r);
  const double bound = s.clients * o.max_tokens / 2.0 + o.token_ratio * c.successes;
  EXPECT_LT(static_cast<double>(c.retries), bound);
  EXPECT_GT(c.retries, 0);
  EXPECT_GT(r.budget_exhausted, 0);
}

TEST(Simulate, RetryQuotaBoundsIncidentRetriesByItsFormula) {
  // AWS standard mode: each retry costs at least retry_cost; the quota holds max_tokens and a
  // success returns at most max(no_retry_increment, timeout_cost). Per client the retries
  // granted in a span are <= (max_tokens + successes · timeout_cost) / retry_cost.
  const sim::scenario s = small_storm();
  const auto& strat = strategy_named("full+quota");
  const auto o = std::get<stormguard::retry_quota_options>(strat.budget);
  const auto r = sim::simulate(s, strat);
  const auto c = count_incident(s, r);
  const auto refund = std::max(o.no_retry_increment, o.timeout_cost);
  const std::int64_t bound = (s.clients * o.max_tokens + c.successes * refund) / o.retry_cost;
  EXPECT_LE(c.retries, bound);
  EXPECT_GT(c.retries, 0);
  EXPECT_GT(r.budget_exhausted, 0);
}

TEST(Simulate, AdaptiveThrottleRejectsFirstAttemptsDuringTheStorm) {
  const auto r = sim::simulate(small_storm(), strategy_named("full+adaptive"));
  const auto full = sim::simulate(small_storm(), strategy_named("full"));
  EXPECT_GT(r.throttled, r.incident_logical_requests / 2);
  EXPECT_LT(r.attempts, full.attempts);
  EXPECT_EQ(r.logical_requests, r.successes + r.attempts_exhausted + r.budget_exhausted +
                                    r.throttled + r.requests_in_flight);
}

TEST(Simulate, NaiveAmplifiesMoreThanFullWithBudget) {
  const auto naive = sim::simulate(small_storm(), strategy_named("naive"));
  const auto budget = sim::simulate(small_storm(), strategy_named("full+budget"));
  EXPECT_GT(naive.amplification.value_or(0), budget.amplification.value_or(0));
  ASSERT_TRUE(naive.incident_amplification && budget.incident_amplification);
  EXPECT_GT(*naive.incident_amplification, 3.0);
  EXPECT_LT(*budget.incident_amplification, 1.5);
  EXPECT_GT(naive.peak_load_ratio, budget.peak_load_ratio);
}

TEST(Simulate, WithoutRetriesTheServerRecoversAfterTheIncident) {
  const auto none = sim::simulate(small_storm(), strategy_named("none"));
  ASSERT_TRUE(none.recovery_s);
  EXPECT_GE(*none.recovery_s, 0.0);
  EXPECT_LE(*none.recovery_s, 20.0 - 8.0 - 5.0);  // a 5-s run must fit before the end
  EXPECT_EQ(none.attempts, none.logical_requests);
  EXPECT_GT(none.wasted_work, 0);  // the server served attempts whose clients had given up
}

// A scenario in which no logical request arrives at all.
sim::scenario no_arrivals(double rate) {
  sim::scenario s = small_storm();
  s.requests_per_second = rate;
  return s;
}

TEST(Simulate, TinyRateSchedulesNoArrivalInsteadOfOverflowing) {
  for (double rate : {1e-10, 3.2e-10, 1e-300, std::numeric_limits<double>::denorm_min()}) {
    for (const auto& strat : sim::builtin_strategies()) {
      const auto r = sim::simulate(no_arrivals(rate), strat);
      EXPECT_EQ(r.logical_requests, 0) << rate;
      EXPECT_EQ(r.attempts, 0) << rate;
      EXPECT_EQ(r.series.size(), 20u) << rate;
    }
  }
}

TEST(Simulate, ZeroRequestsLeaveTheRatiosUndefinedNotZero) {
  const auto r = sim::simulate(no_arrivals(1e-10), strategy_named("naive"));
  EXPECT_FALSE(r.amplification);
  EXPECT_FALSE(r.success_ratio);
  EXPECT_FALSE(r.incident_amplification);
  EXPECT_FALSE(r.recovery_s);  // was 0 s: empty bins used to count as recovered
  EXPECT_FALSE(r.p99_latency_ms);
}

TEST(Simulate, IncidentAmplificationIsUndefinedWithoutRequestsInTheIncident) {
  // 1 request/s with a 1-us incident: almost surely no arrival inside it.
  sim::scenario s = small_storm();
  s.requests_per_second = 1;
  s.incident = sim::incident{2s, 2s + 1us, 1500ms};
  const auto r = sim::simulate(s, strategy_named("none"));
  ASSERT_EQ(r.incident_logical_requests, 0);
  EXPECT_FALSE(r.incident_amplification);
  EXPECT_TRUE(r.amplification);
}

TEST(Simulate, RecoveryIgnoresBinsWithoutDemand) {
  // A server that answers at once (1 ns) and a low rate: every bin with demand is fully served,
  // so recovery starts at the first bin with demand after the incident, not at an empty one.
  sim::scenario s = small_storm();
  s.requests_per_second = 0.5;
  s.service_time = 1ns;
  s.incident = sim::incident{2s, 3s, 1ns};
  bool found = false;
  for (std::uint64_t seed = 1; seed < 200 && !found; ++seed) {
    s.seed = seed;
    const auto r = sim::simulate(s, strategy_named("none"));
    if (r.series[3].logical_requests != 0) continue;  // want an empty bin right after the end
    found = true;
    std::size_t first = 3;
    while (r.series[first].logical_requests == 0) ++first;
    ASSERT_TRUE(r.recovery_s) << "seed " << seed;
    EXPECT_DOUBLE_EQ(*r.recovery_s, static_cast<double>(first) - 3.0) << "seed " << seed;
    EXPECT_GT(*r.recovery_s, 0.0) << "seed " << seed;
  }
  EXPECT_TRUE(found);
}

TEST(Simulate, TimesAtTheirMaximaDoNotOverflow) {
  // Every duration at its documented maximum, and an incident that never ends.
  sim::scenario s = small_storm();
  s.length = 1h;
  s.requests_per_second = 1;
  s.timeout = 1h;
  s.service_time = 1h;
  s.distribution = sim::service_distribution::exponential;
  s.incident = sim::incident{1s, stormguard::duration::max(), 1h};
  for (const auto& strat : sim::builtin_strategies()) {
    const auto r = sim::simulate(s, strat);
    EXPECT_EQ(r.attempts,
              r.successes + r.failures + r.timeouts + r.in_flight_attempts + r.hedges_cancelled)
        << r.name;
    EXPECT_EQ(r.series.size(), 3600u);
    EXPECT_FALSE(r.recovery_s);
  }
}

TEST(Simulate, RejectsAnInvalidScenario) {
  sim::scenario s = small_storm();
  s.workers = 0;
  EXPECT_THROW((void)sim::simulate(s, strategy_named("none")), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Reports
// ---------------------------------------------------------------------------------------------

TEST(ToCsv, HasAHeaderAndOneRowPerSecond) {
  const auto r = sim::simulate(small_calm(), strategy_named("full"));
  const std::string csv = sim::to_csv(r);
  EXPECT_EQ(csv.rfind("t,logical_requests,attempts,successes,failures,timeouts,queue_length\n", 0),
            0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 5);
}

TEST(ToJson, HasEveryMetricWithNullForMissingValues) {
  const auto json =
      sim::to_json(sim::simulate(small_calm(), std::span(&strategy_named("none"), 1)));
  for (const char* key :
       {"\"name\":\"none\"", "\"logical_requests\":", "\"attempts\":", "\"amplification\":1.0000",
        "\"peak_load_ratio\":", "\"success_ratio\":", "\"p99_latency_ms\":20.0",
        "\"recovery_s\":null", "\"incident_amplification\":null", "\"budget_exhausted\":0"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
}

TEST(ToJson, UndefinedRatiosAreNull) {
  const auto json =
      sim::to_json(sim::simulate(no_arrivals(1e-10), std::span(&strategy_named("naive"), 1)));
  for (const char* key : {"\"amplification\":null", "\"incident_amplification\":null",
                          "\"success_ratio\":null", "\"recovery_s\":null"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
}

TEST(FormatTable, ZeroRequestsPrintNotApplicableInsteadOfZero) {
  const auto table =
      sim::format_table(sim::simulate(no_arrivals(1e-10), sim::builtin_strategies()));
  EXPECT_EQ(table.find("0.00x"), std::string::npos) << table;
  EXPECT_EQ(table.find("0.0%"), std::string::npos) << table;
  EXPECT_EQ(table.find(" 0 s"), std::string::npos) << table;
  EXPECT_NE(table.find("\nnaive                     0         0     n/a       n/a   0.0x      n/a"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("No logical request arrived"), std::string::npos) << table;
}

TEST(FormatTable, LatencyColumnSaysSuccessfulOnlyAndALegendExplainsTheColumns) {
  const auto table = sim::format_table(sim::simulate(small_storm(), sim::builtin_strategies()));
  EXPECT_NE(table.find(" p99 ok ms "), std::string::npos) << table;
  EXPECT_EQ(table.find(" p99 ms "), std::string::npos) << table;
  for (const char* column :
       {"ampl. = ", "incident = ", "peak = ", "success = ", "p99 ok ms = ", "recovery = "}) {
    EXPECT_NE(table.find(column), std::string::npos) << column << " in " << table;
  }
}

// A report built by hand: three strategies with the given success ratios, no incident.
sim::simulation_report report_with_success(
    const std::vector<std::pair<std::string, double>>& rows) {
  sim::simulation_report report{small_calm(), {}};
  for (const auto& [name, success] : rows) {
    sim::strategy_result r;
    r.name = name;
    r.logical_requests = 100;
    r.attempts = 100;
    r.amplification = 1.0;
    r.success_ratio = success;
    r.series.resize(5);
    report.strategies.push_back(r);
  }
  return report;
}

TEST(FormatTable, ALongStrategyNameWidensTheFirstColumnForEveryRow) {
  auto strategies = std::vector<sim::strategy>{*sim::find_strategy("none")};
  strategies.push_back(*sim::find_strategy("full+budget"));
  strategies.back().name = "a-policy-name-from-a-file";
  const auto table = sim::format_table(sim::simulate(small_storm(), strategies));
  // Every row's second column (requests, right-aligned) ends at the same offset as the header's.
  std::istringstream lines(table);
  std::vector<std::size_t> offsets;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("strategy ", 0) == 0 || line.rfind("none ", 0) == 0 ||
        line.rfind("a-policy-name-from-a-file ", 0) == 0) {
      const std::size_t second = line.find_first_not_of(' ', line.find(' '));
      offsets.push_back(line.find(' ', second));
    }
  }
  ASSERT_EQ(offsets.size(), 3U) << table;
  EXPECT_EQ(offsets[0], offsets[1]) << table;
  EXPECT_EQ(offsets[0], offsets[2]) << table;
}

TEST(FormatTable, ListsEveryStrategyTiedForBestOrWorst) {
  const auto table = sim::format_table(
      report_with_success({{"a", 0.9}, {"b", 0.2}, {"c", 0.2}, {"d", 0.5}, {"e", 0.9}}));
  EXPECT_NE(table.find("Success ratio: best a and e (90.0%), worst b and c (20.0%).\n"),
            std::string::npos)
      << table;
}

// Rows of one strategy under several server defences are told apart in the prose as in the
// table ("full @drop-expired"): the summary said "best full and full".
TEST(FormatTable, TheProseNamesEachRowWithItsDefence) {
  auto report = report_with_success({{"full", 0.9}, {"full", 0.2}});
  report.strategies[1].defence = "drop-expired";
  const auto table = sim::format_table(report);
  EXPECT_NE(table.find("best full (90.0%), worst full @drop-expired (20.0%)"), std::string::npos)
      << table;
}

TEST(FormatTable, AdaptsTheProseToASingleStrategy) {
  const auto table =
      sim::format_table(sim::simulate(small_storm(), std::span(&strategy_named("none"), 1)));
  EXPECT_EQ(table.find("ranged from"), std::string::npos) << table;
  EXPECT_EQ(table.find("Every strategy"), std::string::npos) << table;
  EXPECT_NE(table.find("During the incident none sent 1.00x attempts per logical request"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Success ratio of none: "), std::string::npos) << table;
}

TEST(Describe, PrintsSmallCapacitiesWithSignificantDigits) {
  sim::scenario s = sim::friday_night();
  s.service_time = 1h;
  s.incident->service_time = 400s;
  const std::string text = sim::describe(s);
  EXPECT_NE(text.find("100 workers x 3600s = 0.028 req/s capacity (1.4e-05x demand)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(0.25 req/s capacity)"), std::string::npos) << text;
  EXPECT_NE(sim::describe(sim::friday_night()).find("= 5,000 req/s capacity (2.5x demand)"),
            std::string::npos);
}

TEST(FormatTable, HasOneRowPerStrategyAndNamesTheScenario) {
  const auto table = sim::format_table(sim::simulate(small_storm(), sim::builtin_strategies()));
  EXPECT_EQ(table.rfind("small-storm: 500 logical req/s from 2 clients", 0), 0u) << table;
  for (const auto& s : sim::builtin_strategies()) {
    EXPECT_NE(table.find("\n" + s.name + " "), std::string::npos) << s.name;
  }
}

// ---------------------------------------------------------------------------------------------
// brooker-occ
// ---------------------------------------------------------------------------------------------

sim::occ_options small_occ() {
  sim::occ_options o;
  o.clients_from = 10;
  o.clients_to = 30;
  o.clients_step = 10;
  o.trials = 8;
  return o;
}

TEST(OccAlgorithms, AreBrookersFiveWithTheLibrarysBackoffInItsPublishedConvention) {
  const auto algorithms = sim::occ_algorithms(sim::occ_options{});
  std::vector<std::string> names;
  for (const auto& a : algorithms) names.push_back(a.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"none", "exponential", "equal", "full", "decorrelated"}));
  EXPECT_EQ(algorithms[0].retry.backoff.cap, 0ns);  // none: retry at once
  for (std::size_t i = 1; i < algorithms.size(); ++i) {
    const auto& b = algorithms[i].retry.backoff;
    EXPECT_EQ(b.base, 5ms);
    EXPECT_EQ(b.cap, 2000ms);
    EXPECT_EQ(b.exponent, stormguard::ceiling_exponent::retry);
    // The first retry's ceiling is 10 time units, as in the blog's code (5 · 2^1).
    EXPECT_EQ(stormguard::backoff(b).ceiling(1), 10ms) << algorithms[i].name;
  }
}

TEST(OccTrial, OneClientWritesOnceAfterFourNetworkDelays) {
  // One client never conflicts: one write, and the time is the sum of four |Normal(10, 2)|
  // delays: mean 40, standard deviation 4 (2 · sqrt(4)).
  const auto algorithms = sim::occ_algorithms(sim::occ_options{});
  constexpr int k_trials = 4000;
  double sum = 0.0;
  double sum_sq = 0.0;
  for (int t = 0; t < k_trials; ++t) {
    const auto r = sim::simulate_occ_trial(1, algorithms[3], static_cast<std::uint64_t>(t),
                                           sim::occ_options{});
    EXPECT_EQ(r.calls, 1);
    const double units = std::chrono::duration<double, std::milli>(r.time).count();
    sum += units;
    sum_sq += units * units;
  }
  const double mean = sum / k_trials;
  const double sd = std::sqrt(sum_sq / k_trials - mean * mean);
  // Standard error of the mean: 4 / sqrt(4000) = 0.063; a delay of Normal(10, 1) or (11, 2) fails.
  EXPECT_NEAR(mean, 40.0, 0.3);
  EXPECT_NEAR(sd, 4.0, 0.3);
}

TEST(OccTrial, EveryClientWritesAtLeastOnceAndFailsAtMostOncePerOtherSuccess) {
  const auto algorithms = sim::occ_algorithms(sim::occ_options{});
  for (const auto& a : algorithms) {
    for (int n : {2, 17, 60}) {
      const auto r = sim::simulate_occ_trial(n, a, 9, sim::occ_options{});
      EXPECT_GE(r.calls, n) << a.name;
      // A failed write needs a success between its read and its write, and a client's rounds do
      // not overlap: at most n - 1 failures per client.
      EXPECT_LE(r.calls, static_cast<std::int64_t>(n) * n) << a.name;
      EXPECT_GT(r.time, 0ns);
    }
  }
}

TEST(OccSweep, IsIdenticalForOneAndTwoThreads) {
  sim::occ_options one = small_occ();
  one.threads = 1;
  sim::occ_options two = small_occ();
  two.threads = 2;
  const auto a = sim::simulate_occ(one);
  const auto b = sim::simulate_occ(two);
  EXPECT_EQ(a.sweep, b.sweep);
  EXPECT_EQ(sim::to_json(a), sim::to_json(b));
  EXPECT_EQ(a.sweep.size(), 3u * 5u);
  sim::occ_options other = small_occ();
  other.seed = 43;
  EXPECT_NE(sim::to_json(sim::simulate_occ(other)), sim::to_json(a));
}

TEST(OccSweep, NoJitterExponentialDoesMoreWorkThanFullJitter) {
  // The blog's finding at 50 clients: no-jitter exponential makes about twice the calls of full
  // jitter (the model: 625 vs 334 over 100 trials); 20 trials keep the test fast and the margin
  // wide.
  sim::occ_options o;
  o.clients_from = o.clients_to = 50;
  o.trials = 20;
  const auto r = sim::simulate_occ(o);
  ASSERT_EQ(r.sweep.size(), 5u);
  const auto& exponential = r.sweep[1];
  const auto& full = r.sweep[3];
  ASSERT_EQ(exponential.algorithm, "exponential");
  ASSERT_EQ(full.algorithm, "full");
  EXPECT_GT(exponential.calls, 1.4 * full.calls);
  EXPECT_GT(exponential.time, full.time);
}

TEST(OccSweep, ReportsProgressUpToTheTotal) {
  std::size_t last_done = 0;
  std::size_t total = 0;
  int calls = 0;
  (void)sim::simulate_occ(small_occ(), [&](std::size_t done, std::size_t of) {
    EXPECT_GE(done, last_done);
    last_done = done;
    total = of;
    ++calls;
  });
  EXPECT_EQ(total, 3u * 5u * 8u);
  EXPECT_EQ(last_done, total);
  EXPECT_GT(calls, 1);
}

TEST(OccSweep, RejectsBadOptionsNamingTheField) {
  sim::occ_options o = small_occ();
  o.trials = 0;
  EXPECT_NE(sim::validate(o).value_or("").find("trials"), std::string::npos);
  EXPECT_THROW((void)sim::simulate_occ(o), std::invalid_argument);
  o = small_occ();
  o.clients_to = 5;
  EXPECT_NE(sim::validate(o).value_or("").find("clients_to"), std::string::npos);
  o = small_occ();
  o.cap = 1ms;
  EXPECT_NE(sim::validate(o).value_or("").find("cap"), std::string::npos);
}

TEST(OccReport, JsonCsvAndTableHaveTheDocumentedShape) {
  const auto r = sim::simulate_occ(small_occ());
  const std::string json = sim::to_json(r);
  EXPECT_EQ(json.rfind("{\"scenario\":\"brooker-occ\",\"seed\":42,\"trials\":8,\"sweep\":[{"
                       "\"clients\":10,\"algorithm\":\"none\",\"calls\":",
                       0),
            0u)
      << json;
  EXPECT_NE(json.find("{\"clients\":30,\"algorithm\":\"decorrelated\",\"calls\":"),
            std::string::npos);
  const std::string csv = sim::to_csv(r);
  EXPECT_EQ(csv.rfind("clients,algorithm,calls,time\n10,none,", 0), 0u) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 15);
  const std::string table = sim::format_table(r);
  EXPECT_NE(table.find("At 30 clients, calls from fewest: "), std::string::npos) << table;
}

TEST(ParallelFor, RunsEveryIndexOnceAndRethrowsATasksException) {
  std::vector<int> hits(1000, 0);
  sim::parallel_for(hits.size(), 2, [&](std::size_t i) { ++hits[i]; });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 1000);
  EXPECT_THROW(sim::parallel_for(100, 2,
                                 [](std::size_t i) {
                                   if (i == 37) throw std::runtime_error("task 37");
                                 }),
               std::runtime_error);
  EXPECT_EQ(sim::resolve_threads(8, 3), 3u);
  EXPECT_GE(sim::resolve_threads(0, 100), 1u);
}

// ---------------------------------------------------------------------------------------------
// Generalised incidents, overload, max_retries; the built-in scenarios of issues 4 and 6
// ---------------------------------------------------------------------------------------------

TEST(ScenarioFile, BuiltInScenariosEqualTheirFiles) {
  for (const char* name : {"friday-night", "no-incident", "metastable", "metastable-slowdown",
                           "outage-80", "outage-80-fleet"}) {
    auto parsed = sim::load_scenario(k_scenarios + name + ".json");
    ASSERT_TRUE(parsed) << parsed.error().message;
    const auto builtin = sim::builtin_scenario(name);
    ASSERT_TRUE(builtin) << name;
    EXPECT_EQ(*parsed, *builtin) << name;
  }
  EXPECT_FALSE(sim::builtin_scenario("brooker-occ"));
  EXPECT_FALSE(sim::builtin_scenario("Friday-night"));
}

TEST(ScenarioParser, RoundTripsTheNewFields) {
  sim::scenario s = small_storm();
  s.incident = sim::incident{2s, 8s, std::nullopt, 0.25, 0.5};
  s.overload = sim::overload{300.5, 400ms};
  s.max_retries = 2;
  auto parsed = sim::parse_scenario(sim::to_json(s));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, s);
}

INSTANTIATE_TEST_SUITE_P(
    NewFields, ScenarioParserRejects,
    ::testing::Values(
        bad_input{"error rate above one",
                  friday_with("\"service_time\": \"1.5s\"",
                              "\"service_time\": \"1.5s\", \"error_rate\": 1.5"),
                  "incident.error_rate", "[0, 1], got 1.5"},
        bad_input{"loss rate as string",
                  friday_with("\"service_time\": \"1.5s\"",
                              "\"service_time\": \"1.5s\", \"loss_rate\": \"all\""),
                  "incident.loss_rate", "\"all\""},
        bad_input{"rates adding up to more than one",
                  friday_with("\"service_time\": \"1.5s\"",
                              "\"service_time\": \"1.5s\", \"error_rate\": 0.6, \"loss_rate\": "
                              "0.6"),
                  "incident.loss_rate", "at most 1"},
        bad_input{"overload threshold zero",
                  friday_with("\"service_distribution\": \"fixed\"",
                              "\"service_distribution\": \"fixed\", \"overload\": "
                              "{\"above_rate\": 0, \"service_time\": \"1s\"}"),
                  "server.overload.above_rate", "got 0"},
        bad_input{"overload without service time",
                  friday_with("\"service_distribution\": \"fixed\"",
                              "\"service_distribution\": \"fixed\", \"overload\": "
                              "{\"above_rate\": 10}"),
                  "server.overload.service_time", "missing"},
        bad_input{"max retries zero",
                  friday_with("\"clients\": 20,", "\"clients\": 20, \"max_retries\": 0,"),
                  "max_retries", "[1, 1000], got 0"},
        bad_input{"repeating clients above one",
                  friday_with("\"clients\": 20,", "\"clients\": 20, \"repeating_clients\": 1.2,"),
                  "repeating_clients", "[0, 1], got 1.2"}),
    [](const ::testing::TestParamInfo<bad_input>& param_info) {
      std::string name;
      for (char c : param_info.param.label)
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(Incident, ErrorRateOneFailsEveryAttemptSentInItAtOnce) {
  sim::scenario s = small_storm();
  s.incident = sim::incident{2s, 8s, std::nullopt, 1.0, 0.0};
  const auto r = sim::simulate(s, strategy_named("none"));
  // Without retries, the attempts sent in the incident are its logical requests: all 503s, and
  // nothing else fails (the server is healthy).
  EXPECT_EQ(r.failures, r.incident_logical_requests);
  EXPECT_EQ(r.timeouts, 0);
  EXPECT_EQ(r.lost, 0);
  // (Bin 2 still has the answers of attempts sent just before 2 s.)
  for (std::size_t k = 3; k < 8; ++k) EXPECT_EQ(r.series[k].successes, 0) << k;
  EXPECT_GT(r.series[9].successes, 0);
}

TEST(Incident, LossRateOneLosesEveryAttemptWhichThenTimesOut) {
  sim::scenario s = small_storm();
  s.incident = sim::incident{2s, 8s, std::nullopt, 0.0, 1.0};
  const auto r = sim::simulate(s, strategy_named("none"));
  EXPECT_EQ(r.lost, r.incident_logical_requests);
  EXPECT_EQ(r.timeouts, r.lost);  // each lost attempt ends at its timeout
  EXPECT_EQ(r.failures, 0);
  EXPECT_EQ(r.wasted_work, 0);  // the server never saw them
}

TEST(Incident, RatesDrawIndependentlyWithTheGivenProbability) {
  sim::scenario s = small_storm();
  s.incident = sim::incident{2s, 8s, std::nullopt, 0.3, 0.2};
  const auto r = sim::simulate(s, strategy_named("none"));
  const auto n = static_cast<double>(r.incident_logical_requests);  // ~3,000 attempts
  const double sd_lost = std::sqrt(n * 0.2 * 0.8);
  const double sd_failed = std::sqrt(n * 0.3 * 0.7);
  EXPECT_NEAR(static_cast<double>(r.lost), 0.2 * n, 5 * sd_lost);
  EXPECT_NEAR(static_cast<double>(r.failures), 0.3 * n, 5 * sd_failed);
}

TEST(Incident, WithoutServiceTimeTheServerKeepsItsOwn) {
  sim::scenario s = small_storm();
  s.incident = sim::incident{2s, 8s, std::nullopt, 0.0, 0.0};
  const auto r = sim::simulate(s, strategy_named("naive"));
  EXPECT_EQ(r.attempts, r.logical_requests);  // nothing failed: an incident that does nothing
  ASSERT_TRUE(r.p99_latency_ms);
  EXPECT_DOUBLE_EQ(*r.p99_latency_ms, 20.0);
}

TEST(Overload, AboveTheRateTheServiceTimeIsTheOverloads) {
  sim::scenario s = small_calm();  // 500 req/s
  s.overload = sim::overload{400.0, 30ms};
  const auto slow = sim::simulate(s, strategy_named("none"));
  ASSERT_TRUE(slow.p99_latency_ms);
  EXPECT_DOUBLE_EQ(*slow.p99_latency_ms, 30.0);
  s.overload = sim::overload{600.0, 30ms};  // above the load: never slow
  const auto fast = sim::simulate(s, strategy_named("none"));
  EXPECT_DOUBLE_EQ(fast.p99_latency_ms.value_or(0), 20.0);
}

TEST(MaxRetries, TheScenarioOverridesRetryingStrategiesOnly) {
  sim::scenario s = small_storm();
  s.max_retries = 1;
  for (const char* name : {"naive", "full"}) {
    const auto r = sim::simulate(s, strategy_named(name));
    EXPECT_LE(r.attempts, 2 * r.logical_requests) << name;
    EXPECT_GT(r.attempts, r.logical_requests) << name;
  }
  const auto none = sim::simulate(s, strategy_named("none"));
  EXPECT_EQ(none.attempts, none.logical_requests);
}

TEST(IncidentAmplification, CountsAllAttemptsOfTheRequestsStartedInTheIncident) {
  // Every attempt of a request started in the incident counts, even a retry after its end.
  sim::scenario s = small_storm();
  s.incident = sim::incident{2s, 8s, std::nullopt, 1.0, 0.0};
  const auto r = sim::simulate(s, strategy_named("naive"));
  // naive retries after 100 ms: a request started in the last 0.3 s of the incident makes some
  // retries after it, which succeed; every other one makes 4 attempts.
  EXPECT_GT(r.incident_attempts, 4 * r.incident_logical_requests * 9 / 10);
  EXPECT_LE(r.incident_attempts, 4 * r.incident_logical_requests);
}

// outage-80 with its incident moved to [5 s, 35 s) and 37 s simulated: the same 30-s incident,
// without the calm minutes around it, to keep the test fast.
sim::scenario outage_80_short() {
  sim::scenario s = sim::outage_80();
  s.length = 37s;
  s.incident->start = 5s;
  s.incident->end = 35s;
  return s;
}

TEST(Outage80, WithoutABudgetAmplificationIsTheGeometricSum) {
  const sim::scenario s = outage_80_short();
  const auto& full = strategy_named("full");
  const double p = s.incident->error_rate;
  const int retries = full.retry.max_retries;
  // Attempts per logical request A = min(G, retries + 1), G geometric with failure p:
  // E[A] = sum p^k (k = 0..retries), E[A^2] = sum (2k + 1) p^k.
  double mean = 0.0;
  double square = 0.0;
  for (int k = 0; k <= retries; ++k) {
    mean += std::pow(p, k);
    square += (2.0 * k + 1.0) * std::pow(p, k);
  }
  ASSERT_NEAR(mean, 2.952, 1e-9);  // 1 + 0.8 + 0.8^2 + 0.8^3
  const auto r = sim::simulate(s, full);
  ASSERT_TRUE(r.incident_amplification);
  const double n = static_cast<double>(r.incident_logical_requests);
  const double se = std::sqrt((square - mean * mean) / n);
  // Retries after the incident succeed: requests started in its last 0.7 s (the longest full
  // jitter wait, 0.1 + 0.2 + 0.4 s) may stop early, at most (mean - 1) attempts each.
  const double window = std::chrono::duration<double>(s.incident->end - s.incident->start).count();
  const double edge = 0.7 / window * (mean - 1.0);
  EXPECT_LE(*r.incident_amplification, mean + 5 * se);
  EXPECT_GE(*r.incident_amplification, mean - edge - 5 * se);
}

TEST(Outage80, TheRatioBudgetHoldsAmplificationToItsRatioPlusTheFloorsShare) {
  const sim::scenario s = outage_80_short();
  const auto& strat = strategy_named("full+budget");
  const auto options = std::get<stormguard::ratio_budget_options>(strat.budget);
  const auto r = sim::simulate(s, strat);
  ASSERT_TRUE(r.incident_amplification);
  const double n = static_cast<double>(r.incident_logical_requests);
  // The rigorous bound: the retries of the incident's requests were granted in [5 s, 36 s):
  // spans of window ending at 15, 25, 35 and 37 s.
  double granted = 0.0;
  for (auto end : {15s, 25s, 35s, 37s}) granted += ratio_budget_bound(r, s, options, end);
  EXPECT_LE(*r.incident_amplification, 1.0 + granted / n);
  // From the parameters: 1 + ratio + the floor's share (clients x floor / rate = 0.1 here),
  // plus what the budget saved up before the incident (ratio x rate x 1.1 window + the reserve),
  // spent at its start, spread over the incident's requests.
  const double rate = s.requests_per_second;
  const double window_s = std::chrono::duration<double>(options.window).count();
  const double floor_share = static_cast<double>(s.clients * options.min_retries_per_second) / rate;
  ASSERT_DOUBLE_EQ(floor_share, 0.1);
  const double saved = options.ratio * rate * 1.1 * window_s +
                       static_cast<double>(s.clients * options.min_retries_per_second) * window_s;
  EXPECT_LE(*r.incident_amplification, 1.0 + options.ratio + floor_share + saved / n);
  EXPECT_GE(*r.incident_amplification, 1.0 + options.ratio);  // the budget was spent
}

TEST(Outage80Fleet, ThePerClientFloorMultipliesWithTheFleet) {
  // 1,000 clients x 10 retries/s = 10,000 retries/s of floor against 2,000 req/s x 1.95 retries
  // wanted per request: the budget never binds, and full+budget amplifies like full.
  sim::scenario s = sim::outage_80_fleet();  // a 10-s incident is enough here (and fast)
  s.length = 17s;
  s.incident->start = 5s;
  s.incident->end = 15s;
  const auto& strat = strategy_named("full+budget");
  const auto options = std::get<stormguard::ratio_budget_options>(strat.budget);
  ASSERT_GT(static_cast<double>(s.clients * options.min_retries_per_second),
            s.requests_per_second * 1.952);
  const auto budget = sim::simulate(s, strat);
  const auto full = sim::simulate(s, strategy_named("full"));
  ASSERT_TRUE(budget.incident_amplification && full.incident_amplification);
  EXPECT_NEAR(*budget.incident_amplification, *full.incident_amplification, 0.05);
  EXPECT_GT(*budget.incident_amplification, 2.5);
}

TEST(Metastable, AtTheirLoadRetriesKeepTheDatabaseOverloadedAfterTheOutage) {
  const sim::scenario s = sim::metastable();
  const auto naive = sim::simulate(s, strategy_named("naive"));
  EXPECT_FALSE(naive.recovery_s);  // stuck
  // After the outage every logical request sends its attempt and its one retry: about 2 x 280.
  std::int64_t attempts = 0;
  std::int64_t goodput = 0;
  for (std::size_t k = 25; k < 60; ++k) {
    attempts += naive.series[k].attempts;
    goodput += naive.series[k].successes;
  }
  EXPECT_NEAR(static_cast<double>(attempts) / 35.0, 2 * s.requests_per_second,
              0.1 * 2 * s.requests_per_second);
  EXPECT_EQ(goodput, 0);
  const auto none = sim::simulate(s, strategy_named("none"));
  EXPECT_TRUE(none.recovery_s);
  const auto budget = sim::simulate(s, strategy_named("full+budget"));
  EXPECT_TRUE(budget.recovery_s);
}

TEST(LoadSweep, IsIdenticalForOneAndTwoThreadsAndFindsTheLimits) {
  const std::vector<sim::strategy> strategies{strategy_named("full"),
                                              strategy_named("full+budget")};
  const sim::load_range range{250, 280, 30};
  const auto one = sim::sweep_load(sim::metastable(), strategies, range, 1);
  const auto two = sim::sweep_load(sim::metastable(), strategies, range, 2);
  EXPECT_EQ(one.points, two.points);
  EXPECT_EQ(sim::to_json(one), sim::to_json(two));
  ASSERT_EQ(one.points.size(), 2u * 2u);
  ASSERT_EQ(one.limits.size(), 2u);
  // At metastable's own 280 req/s full gets stuck (its retries double the load past the
  // overload threshold) and full+budget does not.
  EXPECT_EQ(one.limits[0], (sim::stability_limit{"full", 250.0, 280.0}));
  EXPECT_EQ(one.limits[1], (sim::stability_limit{"full+budget", 280.0, std::nullopt}));
  const std::string table = sim::format_table(one);
  EXPECT_NE(table.find("full+budget widens the stable region of full from 250 to 280 req/s (at "
                       "least: it never failed): +30 req/s"),
            std::string::npos)
      << table;
}

TEST(LoadSweep, RejectsABadRangeAndAScenarioWithoutAnEndingIncident) {
  EXPECT_TRUE(sim::validate(sim::load_range{0, 10, 1}));
  EXPECT_TRUE(sim::validate(sim::load_range{10, 5, 1}));
  EXPECT_TRUE(sim::validate(sim::load_range{1, 10, 0}));
  EXPECT_TRUE(sim::validate(sim::load_range{1, 1e9, 1}));
  EXPECT_FALSE(sim::validate(sim::load_range{0.5, 1.5, 0.1}));
  EXPECT_EQ(sim::loads_of(sim::load_range{0.5, 1.5, 0.1}).size(), 11u);
  EXPECT_EQ(sim::loads_of(sim::load_range{0.1, 0.3, 0.1}), (std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_THROW((void)sim::sweep_load(small_calm(), sim::builtin_strategies(), {1, 2, 1}),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// layers
// ---------------------------------------------------------------------------------------------

sim::layers_options small_layers() {
  sim::layers_options o;
  o.requests_per_second = 200;
  o.length = 5s;
  return o;
}

TEST(Layers, RetriesMultiplyToFourToTheLayersAtTheBottom) {
  const std::vector<sim::strategy> strategies{strategy_named("none"), strategy_named("full")};
  for (int layers : {1, 2, 3}) {
    sim::layers_options o = small_layers();
    o.layers = layers;
    const auto report = sim::simulate_layers(o, strategies);
    ASSERT_EQ(report.rows.size(), 3u);  // none; full at every layer; full at the top only
    const auto& none = report.rows[0];
    const auto& every = report.rows[1];
    const auto& top = report.rows[2];
    ASSERT_GT(every.top_requests, 0);
    std::int64_t expected = every.top_requests;
    for (int k = 0; k < layers; ++k) {
      expected *= 4;  // 4 attempts per call at every layer, the bottom failing them all
      EXPECT_EQ(every.layer_attempts[static_cast<std::size_t>(k)], expected) << k;
    }
    EXPECT_EQ(every.bottom_attempts, expected);
    EXPECT_EQ(top.bottom_attempts, 4 * top.top_requests);
    EXPECT_TRUE(top.top_only);
    EXPECT_EQ(none.bottom_attempts, none.top_requests);
  }
}

TEST(Layers, ARatioBudgetAtEachLayerBoundsTheProduct) {
  const auto report =
      sim::simulate_layers(small_layers(), std::span(&strategy_named("full+budget"), 1));
  const auto& row = report.rows[0];
  const auto options =
      std::get<stormguard::ratio_budget_options>(strategy_named("full+budget").budget);
  // Per layer, retries <= ratio x (calls, counted twice: the run spans two windows of window) +
  // the floor over those two windows; the product over the layers bounds the bottom.
  const double top = static_cast<double>(row.top_requests);
  double bound = 1.0;
  double calls = top;
  for (int k = 0; k < report.options.layers; ++k) {
    const double per_layer =
        1.0 + 2.0 * options.ratio +
        2.0 * static_cast<double>(options.min_retries_per_second) * 10.0 / calls;
    bound *= per_layer;
    calls *= per_layer;
  }
  ASSERT_TRUE(row.bottom_amplification);
  EXPECT_LE(*row.bottom_amplification, bound);
  EXPECT_GT(*row.bottom_amplification, 1.0);
  EXPECT_GT(row.budget_exhausted, 0);
}

TEST(Layers, ReportsHaveTheDocumentedShape) {
  const auto report = sim::simulate_layers(small_layers(), std::span(&strategy_named("full"), 1));
  const std::string json = sim::to_json(report);
  EXPECT_EQ(json.rfind("{\"scenario\":\"layers\",\"seed\":42,\"layers\":3,\"strategies\":[{"
                       "\"name\":\"full\",\"retries_at\":\"every layer\",",
                       0),
            0u)
      << json;
  EXPECT_NE(json.find("\"bottom_amplification\":64.0000"), std::string::npos) << json;
  EXPECT_EQ(sim::to_csv(report).rfind(
                "strategy,retries_at,top_requests,bottom_attempts,bottom_amplification,layer_1,"
                "layer_2,layer_3\n",
                0),
            0u);
  EXPECT_NE(sim::format_table(report).find("64.00x"), std::string::npos);
  sim::layers_options bad = small_layers();
  bad.layers = 0;
  EXPECT_NE(sim::validate(bad).value_or("").find("layers"), std::string::npos);
  EXPECT_THROW((void)sim::simulate_layers(bad, sim::builtin_strategies()), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Plots (the scripts; tests/simulate_cli_test.cpp runs gnuplot)
// ---------------------------------------------------------------------------------------------

TEST(Plot, FormatComesFromTheExtension) {
  EXPECT_EQ(sim::plot_format_for("a/b.png"), std::optional(sim::plot_format::png));
  EXPECT_EQ(sim::plot_format_for("B.SVG"), std::optional(sim::plot_format::svg));
  EXPECT_FALSE(sim::plot_format_for("b.pdf"));
  EXPECT_FALSE(sim::plot_format_for("png"));
}

TEST(Plot, TimeSeriesScriptShadesTheIncidentAndHasOneLinePerStrategy) {
  const std::vector<sim::strategy> strategies{strategy_named("none"), strategy_named("naive"),
                                              strategy_named("full+budget")};
  const auto report = sim::simulate(small_storm(), strategies);
  const std::string script = sim::gnuplot_script(report, sim::plot_format::svg, "/tmp/it's.svg");
  EXPECT_NE(script.find("set terminal svg"), std::string::npos);
  EXPECT_NE(script.find("set output '/tmp/it''s.svg'"), std::string::npos) << script.substr(0, 300);
  EXPECT_NE(script.find("set object 1 rect from 2, graph 0 to 8, graph 1"), std::string::npos);
  // 100-ms bins: 200 data rows per strategy for 20 s.
  const auto first = script.find("$d0 << EOD\n");
  const auto end = script.find("EOD\n", first + 11);
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(std::count(script.begin() + static_cast<std::ptrdiff_t>(first) + 11,
                       script.begin() + static_cast<std::ptrdiff_t>(end), '\n'),
            200);
  for (const auto& s : strategies) {
    EXPECT_NE(script.find("title '" + s.name + "'"), std::string::npos) << s.name;
  }
}

TEST(FineSeries, AddsUpToTheOneSecondSeries) {
  const auto r = sim::simulate(small_storm(), strategy_named("exponential"));
  ASSERT_EQ(r.fine_series.size(), 10 * r.series.size());
  for (std::size_t k = 0; k < r.series.size(); ++k) {
    std::int64_t attempts = 0;
    std::int64_t successes = 0;
    for (std::size_t f = 10 * k; f < 10 * k + 10; ++f) {
      attempts += r.fine_series[f].attempts;
      successes += r.fine_series[f].successes;
    }
    EXPECT_EQ(attempts, r.series[k].attempts) << k;
    EXPECT_EQ(successes, r.series[k].successes) << k;
  }
}

TEST(Simulate, ParallelStrategiesGiveTheSequentialReport) {
  const std::vector<sim::strategy> strategies{strategy_named("none"), strategy_named("naive"),
                                              strategy_named("full"),
                                              strategy_named("full+budget")};
  const auto sequential = sim::simulate(small_storm(), strategies);
  const auto parallel = sim::simulate(small_storm(), strategies, 2);
  EXPECT_EQ(sim::to_json(sequential), sim::to_json(parallel));
}

// ---------------------------------------------------------------------------------------------
// Issue 10: work and memory bounds, plots every reader can read, layers on threads
// ---------------------------------------------------------------------------------------------

sim::scenario largest_valid() {
  sim::scenario s = sim::friday_night();
  s.length = 1h;
  s.requests_per_second = 2777;  // 9,997,200 logical requests: just inside the 10 M limit
  return s;
}

TEST(WorkBound, AcceptsTheLargestValidScenarioWithTheBuiltInStrategies) {
  EXPECT_FALSE(sim::check_work(largest_valid(), sim::builtin_strategies()));
}

TEST(WorkBound, RejectsAThousandRetriesForAnHourWithTheEstimateAndTheBound) {
  sim::scenario s = largest_valid();
  s.max_retries = 1000;
  s.incident = sim::incident{0s, 1h, std::nullopt, 1.0, 0.0};
  const auto problem = sim::check_work(s, sim::builtin_strategies());
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->field, "max_retries");
  // 9,997,200 requests x 1001 attempts, and the bound.
  EXPECT_NE(problem->message.find("10,007,197,200 attempts"), std::string::npos)
      << problem->message;
  EXPECT_NE(problem->message.find("50,000,000"), std::string::npos) << problem->message;
  EXPECT_THROW((void)sim::simulate(s, strategy_named("naive")), std::invalid_argument);
  // A strategy that does not retry is not bound by the scenario's max_retries.
  EXPECT_FALSE(sim::check_work(s, std::span(&strategy_named("none"), 1)));
}

TEST(WorkBound, APolicysOwnRetriesAreNamedNotTheScenariosFields) {
  // The scenario's max_retries does not apply to a policy from a file: the error names the
  // policy's `retries` and the policy, and says what to lower.
  sim::scenario s = largest_valid();
  s.incident = sim::incident{0s, 1h, std::nullopt, 1.0, 0.0};
  sim::strategy storm = strategy_named("naive");
  storm.name = "storm";
  storm.scenario_retries = false;
  storm.retry.max_retries = 1000;
  const auto problem = sim::check_work(s, std::span(&storm, 1));
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->field, "retries");
  EXPECT_EQ(problem->message.rfind("retries of policy \"storm\": 1000 makes", 0), 0U)
      << problem->message;
  EXPECT_NE(problem->message.find("lower the policy's retries"), std::string::npos)
      << problem->message;
  EXPECT_NE(problem->message.find("10,007,197,200 attempts"), std::string::npos)
      << problem->message;
}

TEST(MemoryBound, RunsSideBySideAreCappedByTheScenarioNotTheThreadCount) {
  // At the largest scenario a run needs ~336 MB: two fit in the bound, whatever --threads says.
  EXPECT_EQ(sim::parallel_runs(largest_valid(), 10, 10), 2u);
  EXPECT_EQ(sim::parallel_runs(largest_valid(), 1, 10), 1u);
  EXPECT_LE(2 * sim::estimated_run_bytes(largest_valid()), sim::k_max_parallel_bytes);
  // A small scenario runs on every thread asked for.
  EXPECT_EQ(sim::parallel_runs(small_storm(), 10, 10), 10u);
}

TEST(Plot, IdenticalSeriesAreNamedInTheKeyAndDrawnDistinctly) {
  // Without an incident no strategy retries: none and full+throttle give the same series.
  const std::vector<sim::strategy> strategies{strategy_named("none"),
                                              strategy_named("full+throttle")};
  const auto report = sim::simulate(small_calm(), strategies);
  ASSERT_EQ(report.strategies[0].fine_series, report.strategies[1].fine_series);
  const std::string script = sim::gnuplot_script(report, sim::plot_format::png, "x.png");
  EXPECT_NE(script.find("title 'full+throttle (= none)'"), std::string::npos);
  // Each line has its own dash type and marker, and the markers start at different rows.
  EXPECT_NE(script.find("set linetype 1 lc rgb '#555555' lw 1.5 dt 1 pt 1"), std::string::npos);
  EXPECT_NE(script.find("set linetype 2 lc rgb '#d62728' lw 1.5 dt 2 pt 2"), std::string::npos);
  EXPECT_NE(script.find("$d0 using 1:2 every 40::0 with points"), std::string::npos);
  EXPECT_NE(script.find("$d1 using 1:2 every 40::3 with points"), std::string::npos);
}

// Every built-in strategy (and one of the user's) gets its own colour and its own marker: a key
// of 16 strategies with two red circles cannot be read.
TEST(Plot, SeventeenLinesDifferInColourAndInMarker) {
  const std::vector<sim::strategy> strategies{strategy_named("none")};
  const std::string script =
      sim::gnuplot_script(sim::simulate(small_calm(), strategies), sim::plot_format::png, "x.png");
  std::set<std::string> colours;
  std::set<std::string> markers;
  for (int lt = 1; lt <= sim::k_distinct_lines; ++lt) {
    const std::string head = "set linetype " + std::to_string(lt) + " lc rgb '";
    const std::size_t at = script.find(head);
    ASSERT_NE(at, std::string::npos) << lt;
    const std::size_t end = script.find('\n', at);
    const std::string line = script.substr(at, end - at);
    colours.insert(line.substr(head.size(), 7));
    markers.insert(line.substr(line.find(" pt ")));
  }
  EXPECT_EQ(colours.size(), static_cast<std::size_t>(sim::k_distinct_lines));
  EXPECT_EQ(markers.size(), static_cast<std::size_t>(sim::k_distinct_lines));
  EXPECT_GE(sim::k_distinct_lines, static_cast<int>(sim::builtin_strategies().size()) + 1);
}

// The clients sweep's plot uses the same palette: strategy k is line type k + 1, never the
// first's again before the eighteenth.
TEST(Plot, ClientsSweepGivesEachStrategyItsOwnLineType) {
  sim::clients_sweep_report report{small_storm(), {20, 200}, {}, {}};
  const auto builtins = sim::builtin_strategies();
  for (const sim::strategy& st : builtins) report.strategies.push_back(st.name);
  for (int clients : report.sizes) {
    for (const sim::strategy& st : builtins) {
      report.points.push_back({clients, st.name, 1.5, 2.0, 1.0, 3.0, true, {}});
    }
  }
  const std::string script = sim::gnuplot_script(report, sim::plot_format::svg, "x.svg");
  EXPECT_NE(script.find("set linetype 17 lc rgb"), std::string::npos);
  for (std::size_t a = 0; a < builtins.size(); ++a) {
    EXPECT_NE(script.find("$s" + std::to_string(a) + " using 1:3 with linespoints lt " +
                          std::to_string(a + 1) + " title '" + builtins[a].name + "'"),
              std::string::npos)
        << builtins[a].name;
  }
  EXPECT_NE(script.find("$s0 << EOD\n20 1.5000 2.0000\n200 1.5000 2.0000\nEOD\n"),
            std::string::npos);
}

// A scenario with stalls exists for its tail: the table shows the p99.9 next to the p99; one
// without stalls keeps its columns.
TEST(Report, TheTableOfAScenarioWithStallsHasAP999Column) {
  sim::scenario tail = *sim::builtin_scenario("tail-at-scale");
  tail.length = std::chrono::seconds(5);
  const std::vector<sim::strategy> strategies{strategy_named("none"), strategy_named("hedged")};
  const std::string table = sim::format_table(sim::simulate(tail, strategies));
  EXPECT_NE(table.find("p99 ok ms  p99.9 ok ms  recovery\n"), std::string::npos) << table;
  EXPECT_NE(table.find("p99.9 ok ms = the same at p99.9"), std::string::npos);
  const std::string calm = sim::format_table(sim::simulate(small_calm(), strategies));
  EXPECT_EQ(calm.find("p99.9"), std::string::npos) << calm;
}

TEST(Plot, TimeSeriesShowsDemandCapacityAStrategyAtZeroAndAlignedPanels) {
  const std::vector<sim::strategy> strategies{strategy_named("naive")};
  const auto report = sim::simulate(small_storm(), strategies);
  const std::string script = sim::gnuplot_script(report, sim::plot_format::png, "x.png");
  EXPECT_NE(script.find("$demand << EOD\n"), std::string::npos);
  EXPECT_NE(script.find("title 'demand (logical req/s)'"), std::string::npos);
  // 25 workers / 20 ms = 1,250 req/s; 25 / 1.5 s during the incident (2 s to 8 s).
  EXPECT_NE(script.find("$capacity << EOD\n0 1250\n2 1250\n2 16.6667\n8 16.6667\n8 1250\n20 "
                        "1250\nEOD\n"),
            std::string::npos)
      << script.substr(script.find("$capacity"), 120);
  // Both panels start below zero (a strategy with no goodput stays visible) ...
  const auto first = script.find("set yrange [-");
  ASSERT_NE(first, std::string::npos);
  EXPECT_NE(script.find("set yrange [-", first + 1), std::string::npos);
  // ... and share fixed margins, so that their time axes line up.
  EXPECT_NE(script.find("set lmargin at screen 0.08\nset rmargin at screen 0.80\n"),
            std::string::npos);
}

TEST(Plot, OccScriptDrawsTheReportsTimelinesWithoutRerunningTheModel) {
  sim::occ_options o;
  o.clients_from = 10;
  o.clients_to = 20;
  o.trials = 2;
  sim::occ_report report = sim::simulate_occ(o);
  ASSERT_EQ(report.timelines.size(), 2u);
  EXPECT_EQ(report.timelines[0].algorithm, "exponential");
  EXPECT_EQ(report.timelines[1].clients, 20);
  // The script shows what the report carries: here a made-up timeline of 3 writes.
  report.timelines[1].write_times = {0ms, 5ms, 15ms};
  const std::string script = sim::gnuplot_script(report, sim::plot_format::png, "x.png");
  EXPECT_NE(script.find("$t1 << EOD\n0 2\n10 1\nEOD\n"), std::string::npos);
}

TEST(Plot, LayersKeepsABarForAStrategyNearZero) {
  sim::layers_report report{small_layers(), {}};
  report.rows.push_back(sim::layers_row{"full", false, 1000, 64000, 64.0, {4, 16, 64}, 0, 0, 0});
  report.rows.push_back(
      sim::layers_row{"full+adaptive", false, 10000, 2, 0.0002, {1, 1, 2}, 0, 9998, 0});
  const std::string script = sim::gnuplot_script(report, sim::plot_format::png, "x.png");
  EXPECT_NE(script.find("set yrange [6.667e-05:*]"), std::string::npos) << script;
}

TEST(Layers, RowsRunOnThreadsWithTheSameReport) {
  const auto strategies = sim::builtin_strategies();
  const auto one = sim::simulate_layers(small_layers(), strategies, 1);
  std::size_t last_total = 0;
  const auto two = sim::simulate_layers(
      small_layers(), strategies, 2, [&](std::size_t, std::size_t total) { last_total = total; });
  EXPECT_EQ(sim::to_json(one), sim::to_json(two));
  EXPECT_EQ(last_total, one.rows.size());
}

TEST(ScenarioParser, NestedDuplicateKeyIsNamedByItsFullPath) {
  std::string text = sim::to_json(sim::friday_night());
  text.replace(text.find("\"workers\": 100"), 14, "\"workers\": 100, \"workers\": 5");
  const auto parsed = sim::parse_scenario(text);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().field, "server.workers");
  EXPECT_EQ(parsed.error().message, "server.workers: the field appears more than once");
}

TEST(ScenarioParser, EchoedValuesAreEscapedAndCut) {
  std::string text = sim::to_json(sim::friday_night());
  text.replace(text.find("\"timeout\": \"1s\""), 15,
               "\"timeout\": \"\\u001b[31m" + std::string(1000, 'x') + "\"");
  const auto parsed = sim::parse_scenario(text);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().message.find('\x1b'), std::string::npos) << parsed.error().message;
  EXPECT_NE(parsed.error().message.find("\"\\x1b[31mxxx"), std::string::npos)
      << parsed.error().message;
  EXPECT_LT(parsed.error().message.size(), 300u);
}

TEST(SweepLoad, AScenarioNameInAnErrorIsEscaped) {
  sim::scenario s = small_calm();
  s.name = std::string("evil\x1b[2J", 8) + std::string(1, '\0');
  try {
    (void)sim::sweep_load(s, sim::builtin_strategies(), {100, 200, 100});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\x1b'), std::string::npos) << what;
    EXPECT_NE(what.find("\"evil\\x1b[2J\\x00\""), std::string::npos) << what;
  }
}

TEST(BuiltinScenarios, AreTheScenarioFilesInTheDocumentedOrder) {
  EXPECT_EQ(sim::builtin_scenario_names(),
            "friday-night, no-incident, metastable, metastable-slowdown, outage-80, "
            "outage-80-fleet, tail-at-scale, friday-night-fleet");
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(STORMGUARD_SCENARIOS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const auto parsed = sim::load_scenario(entry.path());
    ASSERT_TRUE(parsed) << entry.path();
    EXPECT_EQ(sim::builtin_scenario(entry.path().stem().string()), *parsed) << entry.path();
  }
  EXPECT_EQ(files, 8u);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Strategies from policies (stormguard::config), full+envoy
// ---------------------------------------------------------------------------------------------

namespace {

stormguard::config::policy policy_like(const sim::strategy& s) {
  stormguard::config::policy p;
  p.name = s.name;
  p.retry = s.retry;
  p.budget = s.budget;
  return p;
}

}  // namespace

TEST(FromPolicy, APolicyWithABuiltInsValuesRunsExactlyAsTheBuiltIn) {
  const sim::scenario s = small_storm();
  for (const char* name : {"full+budget", "full+envoy"}) {
    const auto& builtin = strategy_named(name);
    const sim::strategy mine = sim::from_policy(policy_like(builtin));
    EXPECT_FALSE(mine.scenario_retries);
    EXPECT_EQ(sim::simulate(s, mine).series, sim::simulate(s, builtin).series) << name;
  }
}

TEST(FromPolicy, TheAttemptTimeoutReplacesTheScenariosTimeout) {
  const sim::scenario s = small_calm();  // 20 ms per request, timeout 1 s: nothing times out
  auto p = policy_like(strategy_named("none"));
  p.attempt_timeout = 10ms;  // below the service time: every attempt times out
  const auto impatient = sim::simulate(s, sim::from_policy(p));
  const auto patient = sim::simulate(s, strategy_named("none"));
  EXPECT_EQ(patient.timeouts, 0);
  EXPECT_EQ(impatient.successes, 0);
  EXPECT_GT(impatient.timeouts, 0);
}

TEST(FromPolicy, A503IsRetriedOnlyWhenThePolicyRetries503) {
  sim::scenario s = outage_80_short();
  auto p = policy_like(strategy_named("full"));
  p.name = "no-503";
  p.statuses.remove(503);
  const auto r = sim::simulate(s, sim::from_policy(p));
  EXPECT_EQ(r.attempts, r.logical_requests);  // every failure is a 503: nothing is retried
  EXPECT_GT(r.failures, 0);
}

TEST(FromPolicy, TheScenariosMaxRetriesAppliesToBuiltInsOnly) {
  sim::scenario s = small_storm();
  s.max_retries = 1;
  auto p = policy_like(strategy_named("naive"));
  p.name = "mine";
  const auto mine = sim::simulate(s, sim::from_policy(p));
  EXPECT_GT(mine.attempts, 2 * mine.logical_requests);  // its own 3 retries
}

TEST(ScenarioStrategies, ParseBuiltInNamesAndInlinePoliciesAndRoundTrip) {
  std::string text = sim::to_json(small_storm());
  text.insert(text.rfind('}'), R"(, "strategies": ["full", {"name": "mine", "retries": 1,
      "budget": "concurrency", "attempt_timeout": "2s", "retryable_statuses": [429]}])");
  const auto parsed = sim::parse_scenario(text);
  ASSERT_TRUE(parsed) << parsed.error().message;
  ASSERT_EQ((*parsed).strategies.size(), 2u);
  EXPECT_EQ((*parsed).strategies[0], strategy_named("full"));
  EXPECT_EQ((*parsed).strategies[1].name, "mine");
  EXPECT_EQ((*parsed).strategies[1].attempt_timeout, 2s);
  EXPECT_FALSE((*parsed).strategies[1].retries_503);
  const auto again = sim::parse_scenario(sim::to_json(*parsed));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *parsed);
}

TEST(ScenarioStrategies, RejectsUnknownNamesBadPoliciesAndDuplicates) {
  const auto field_of = [](const std::string& strategies) {
    std::string text = sim::to_json(small_storm());
    text.insert(text.rfind('}'), ", \"strategies\": " + strategies);
    const auto parsed = sim::parse_scenario(text);
    return parsed ? std::string("accepted") : parsed.error().field;
  };
  EXPECT_EQ(field_of(R"(["fulll"])"), "strategies[0]");
  EXPECT_EQ(field_of(R"([{"name": "x", "retries": -2}])"), "strategies[0].retries");
  EXPECT_EQ(field_of(R"(["full", "full"])"), "strategies[1]");
  EXPECT_EQ(field_of(R"([])"), "strategies");
  EXPECT_EQ(field_of(R"([3])"), "strategies[0]");
  // A message that names another field of the same policy names it by the scenario's path too.
  std::string text = sim::to_json(small_storm());
  text.insert(text.rfind('}'), R"(, "strategies": [{"name": "x", "backoff": {"base": "1s",
      "cap": "500ms"}}])");
  const auto parsed = sim::parse_scenario(text);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().field, "strategies[0].backoff.cap");
  EXPECT_NE(parsed.error().message.find("strategies[0].backoff.base"), std::string::npos)
      << parsed.error().message;
  EXPECT_EQ(parsed.error().message.find("policies[0]"), std::string::npos)
      << parsed.error().message;
}

TEST(Simulate, EnvoysBudgetBoundsRetriesInFlightPerClient) {
  // With every attempt of the incident failing at once (a 503) and retries in flight bounded by
  // max(3, 20 % of the requests in flight) per client, the retries stay far below full's.
  const sim::scenario s = outage_80_short();
  const auto envoy = sim::simulate(s, strategy_named("full+envoy"));
  const auto full = sim::simulate(s, strategy_named("full"));
  ASSERT_TRUE(envoy.incident_amplification && full.incident_amplification);
  EXPECT_LT(*envoy.incident_amplification, 1.5);
  EXPECT_GT(*full.incident_amplification, 2.5);
  EXPECT_GT(envoy.budget_exhausted, 0);
}

namespace {

// Recovery needs one run of 5 whole seconds with demand after the incident: a run that ends
// sooner reports it as not measurable ("n/a"), never as "never".
TEST(SimRecovery, IsNotMeasurableWhenTheRunEndsWithinFiveSecondsOfTheIncident) {
  sim::scenario s = small_storm();
  s.length = 12s;  // the incident ends at 8 s: 4 whole seconds after it
  const auto short_run = sim::simulate(s, strategy_named("none"));
  EXPECT_FALSE(short_run.recovery_measurable);
  EXPECT_FALSE(short_run.recovery_s);
  s.length = 13s;  // 5 whole seconds after it
  const auto long_enough = sim::simulate(s, strategy_named("none"));
  EXPECT_TRUE(long_enough.recovery_measurable);
  const auto table = sim::format_table(sim::simulation_report{s, {long_enough}});
  s.length = 12s;
  const auto short_table = sim::format_table(sim::simulation_report{s, {short_run}});
  EXPECT_NE(short_table.find("Recovery cannot be measured: fewer than 5 whole seconds"),
            std::string::npos)
      << short_table;
  EXPECT_EQ(short_table.find("Never recovered"), std::string::npos) << short_table;
  EXPECT_EQ(table.find("Recovery cannot be measured"), std::string::npos) << table;
}

}  // namespace
