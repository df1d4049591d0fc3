// SPDX-License-Identifier: Apache-2.0
// The server's defences in the one server model (stormguard_engine/defences.hpp, server.hpp) and
// in whole simulations: drop-expired never starts an attempt past its deadline, the retry budget
// refuses labelled retries with "do not retry" (server_refused), clients that neither label nor
// honour pushback defeat it, the scenario's server.defences parse strictly, and hostile headers
// never win an admission that their absence would not.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stormguard/admission/deadline.hpp"
#include "stormguard/admission/retry_admission.hpp"
#include "stormguard/retry_headers.hpp"
#include "stormguard/sim/defence_kinds.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"
#include "stormguard_engine/server.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::sim::concurrency_limit_defence;
using stormguard::sim::defence_set;
using stormguard::sim::drop_expired_defence;
using stormguard::sim::lifo_codel_defence;
using stormguard::sim::retry_budget_defence;
namespace engine = stormguard::sim::engine;

stormguard::sim::scenario quiet_server(defence_set set) {
  stormguard::sim::scenario s = stormguard::sim::friday_night();
  s.incident.reset();
  s.workers = 1;
  s.service_time = 10ms;
  s.defences.enabled = set;
  return s;
}

TEST(ServerModelDefences, DropExpiredNeverStartsAnAttemptPastItsDeadline) {
  const auto s = quiet_server(defence_set{}.with<drop_expired_defence>());
  engine::server_model model(s);
  ASSERT_EQ(model.admit(0), engine::admission::accepted);
  ASSERT_TRUE(model.take(0, {0, 1, 0, 1'000'000'000}));  // the only worker
  // Two attempts wait: the first's caller gives up at 5 ms, the second's at 1 s.
  ASSERT_EQ(model.admit(0), engine::admission::accepted);
  EXPECT_FALSE(model.take(0, {1, 1, 0, 5'000'000}));
  ASSERT_EQ(model.admit(0), engine::admission::accepted);
  EXPECT_FALSE(model.take(0, {2, 1, 0, 1'000'000'000}));
  std::vector<std::uint32_t> expired;
  const auto next = model.finish(
      10'000'000, [&](const engine::queued_attempt& a, const engine::defence_answer& why) {
        EXPECT_EQ(why.outcome, stormguard::admission::outcome::expired);
        expired.push_back(a.request);
      });
  ASSERT_TRUE(next);
  EXPECT_EQ(next->attempt.request, 2U);
  EXPECT_EQ(expired, std::vector<std::uint32_t>{1});
}

// The head of a FIFO line whose older attempts were dropped is always just short of its deadline:
// drop-expired does not start what cannot finish before it (the service estimate: by default
// the scenario's service time, here 10 ms).
TEST(ServerModelDefences, DropExpiredDoesNotStartWhatCannotFinishBeforeTheDeadline) {
  for (const bool literal : {false, true}) {
    auto s = quiet_server(defence_set{}.with<drop_expired_defence>());
    if (literal)
      s.defences.of<drop_expired_defence>().service_estimate = 0s;  // only passed deadlines
    engine::server_model model(s);
    ASSERT_TRUE(model.take(0, {0, 1, 0, 1'000'000'000}));
    EXPECT_FALSE(model.take(0, {1, 1, 0, 20'000'001}));  // starts at 10 ms, done 1 ns early
    EXPECT_FALSE(model.take(0, {2, 1, 0, 25'000'000}));  // at 20 ms, 5 ms left for 10 ms of work
    std::vector<std::uint32_t> dropped;
    auto next = model.finish(10'000'000,
                             [&](const engine::queued_attempt& a, const engine::defence_answer&) {
                               dropped.push_back(a.request);
                             });
    ASSERT_TRUE(next);
    EXPECT_EQ(next->attempt.request, 1U);
    EXPECT_TRUE(dropped.empty());
    next = model.finish(20'000'000,
                        [&](const engine::queued_attempt& a, const engine::defence_answer&) {
                          dropped.push_back(a.request);
                        });
    if (literal) {
      ASSERT_TRUE(next);  // its deadline has not passed: started, and late
      EXPECT_EQ(next->attempt.request, 2U);
    } else {
      EXPECT_FALSE(next);
      EXPECT_EQ(dropped, std::vector<std::uint32_t>{2});
    }
  }
}

// Also on arrival at an idle server: a deadline already passed (grpc-timeout: 0) or nearer than
// the service estimate is never started; no deadline (absent or malformed grpc-timeout) is.
TEST(ServerModelDefences, DropExpiredChecksTheDeadlineOnArrivalToo) {
  const auto s = quiet_server(defence_set{}.with<drop_expired_defence>());  // 10 ms of service
  engine::server_model model(s);
  const auto labels = [](std::int64_t deadline) {
    return engine::attempt_labels{stormguard::attempt_info{}, deadline};
  };
  EXPECT_EQ(model.admit(1'000, labels(1'000)).by.outcome,
            stormguard::admission::outcome::expired);  // grpc-timeout: 0
  EXPECT_EQ(model.admit(1'000, labels(10'001'000)).by.outcome,
            stormguard::admission::outcome::expired);
  EXPECT_EQ(model.admit(1'000, labels(10'001'001)), engine::admission::accepted);
  EXPECT_EQ(model.admit(1'000, labels(engine::k_no_deadline)), engine::admission::accepted);
  const auto none = quiet_server(defence_set{}.with<lifo_codel_defence>());
  engine::server_model without(none);
  EXPECT_EQ(without.admit(1'000, labels(1'000)), engine::admission::accepted);
}

TEST(ServerModelDefences, WithoutDropExpiredTheExpiredAttemptIsServed) {
  const auto s = quiet_server(defence_set{}.with<lifo_codel_defence>());
  engine::server_model model(s);
  ASSERT_TRUE(model.take(0, {0, 1, 0, 1'000'000'000}));
  EXPECT_FALSE(model.take(0, {1, 1, 0, 5'000'000}));
  const auto next =
      model.finish(10'000'000, [](const engine::queued_attempt&, const engine::defence_answer&) {
        ADD_FAILURE() << "nothing is dropped";
      });
  ASSERT_TRUE(next);
  EXPECT_EQ(next->attempt.request, 1U);
}

TEST(ServerModelDefences, TheRetryBudgetRefusesLabelledRetriesOnly) {
  auto s = quiet_server(defence_set{}.with<retry_budget_defence>());
  s.defences.of<retry_budget_defence>() = {
      .ratio = 0.0, .window = 10s, .min_retries_per_second = 0};
  engine::server_model model(s);
  const engine::attempt_labels first{stormguard::attempt_info{1, false}, engine::k_no_deadline};
  const engine::attempt_labels retry{stormguard::attempt_info{2, false}, engine::k_no_deadline};
  EXPECT_EQ(model.admit(0, first), engine::admission::accepted);
  EXPECT_EQ(model.admit(0, retry).by.outcome, stormguard::admission::outcome::retry_refused);
}

// shed-retries: a retry recognised by a label or by the weak signal is refused at the door only
// while another defence (here the full queue) refused or dropped within the hold; first attempts
// never.
TEST(ServerModelDefences, ShedRetriesRefusesRecognisedRetriesOnlyWhileOverloaded) {
  auto s = quiet_server(defence_set{}.with<stormguard::sim::shed_retries_defence>());
  s.queue_limit = 1;
  engine::server_model model(s);
  const engine::attempt_labels first{stormguard::attempt_info{1, false}, engine::k_no_deadline};
  const engine::attempt_labels labelled{stormguard::attempt_info{2, false}, engine::k_no_deadline};
  const engine::attempt_labels weak{stormguard::attempt_info{1, false}, engine::k_no_deadline,
                                    true};
  // Calm: a retry is admitted like any request.
  ASSERT_EQ(model.admit(0, labelled), engine::admission::accepted);
  ASSERT_TRUE(model.take(0, {0, 2, 0}).has_value());  // takes the one worker
  ASSERT_EQ(model.admit(0, weak), engine::admission::accepted);
  ASSERT_FALSE(model.take(0, {1, 2, 0}).has_value());  // queued: the line is full now
  // The full queue turns a first attempt away: the server is overloaded for the hold (100 ms).
  EXPECT_EQ(model.admit(1'000'000, first), engine::admission::rejected);
  EXPECT_EQ(model.admit(2'000'000, labelled).by.outcome,
            stormguard::admission::outcome::retry_shed);
  EXPECT_EQ(model.admit(3'000'000, weak).by.outcome, stormguard::admission::outcome::retry_shed);
  // A first attempt is not shed (the full queue still turns it away), nor is one whose label is
  // malformed: a malformed label is never a recognised retry.
  EXPECT_EQ(model.admit(4'000'000, first), engine::admission::rejected);
  const engine::attempt_labels malformed{stormguard::attempt_info{2, true}, engine::k_no_deadline};
  EXPECT_EQ(model.admit(4'000'000, malformed), engine::admission::rejected);
  // The shedder's own refusals do not prolong the overload: 100 ms after the last rejection
  // (at 4 ms) a retry is no longer shed; the full queue turns it away as it would a first
  // attempt.
  EXPECT_EQ(model.admit(104'000'000, weak), engine::admission::rejected);
}

stormguard::sim::strategy_result run(const stormguard::sim::scenario& s, const char* name) {
  const stormguard::sim::strategy* strat = stormguard::sim::find_strategy(name);
  EXPECT_NE(strat, nullptr);
  return stormguard::sim::simulate(s, *strat);
}

TEST(SimulateDefences, NoneIsTodaysModel) {
  const auto s = stormguard::sim::friday_night();
  const auto r = run(s, "full");
  EXPECT_EQ(r.defence, "none");
  EXPECT_EQ(r.wasted_work, 198'028);
  EXPECT_EQ(r.expired_dropped, 0);
  EXPECT_EQ(r.server_refused, 0);
  EXPECT_GT(r.served, 0);
}

TEST(SimulateDefences, TheServerBudgetHoldsRetriesAndClientsStop) {
  auto s = stormguard::sim::friday_night();
  s.defences.enabled = defence_set{}.with<retry_budget_defence>();
  const auto r = run(s, "naive");
  EXPECT_EQ(r.defence, "retry-budget");
  EXPECT_GT(r.server_refused, 0);
  ASSERT_TRUE(r.incident_served_amplification);
  EXPECT_LE(*r.incident_served_amplification, 1.2);
  EXPECT_TRUE(r.recovery_s);
}

TEST(SimulateDefences, ClientsThatNeitherLabelNorHonourDefeatTheServerBudget) {
  auto s = stormguard::sim::friday_night();
  s.defences.enabled = defence_set{}.with<retry_budget_defence>();
  s.client = *stormguard::find_client_profile("envoy");  // no label, no pushback
  const auto r = run(s, "naive");
  EXPECT_EQ(r.server_refused, 0);
  EXPECT_FALSE(r.recovery_s);  // the storm goes on: every retry looks like a first attempt
}

// Clients that label nothing are still recognised by the weak signal: a retry whose previous
// answer the server saw fail. The simulator is deterministic, so shed-retries beside lifo-codel
// changes the run only if it recognised (and shed) something; repeating_clients changes nothing
// for a server that reads no fingerprint, and changes a shedding server's run (a polling
// client's next first attempt after a failure looks like a retry).
TEST(SimulateDefences, ShedRetriesRecognisesUnlabelledRetriesByTheirFingerprint) {
  auto s = stormguard::sim::friday_night();
  s.client = *stormguard::find_client_profile("go-retryablehttp");  // no label, no deadline
  s.defences.enabled = defence_set{}.with<lifo_codel_defence>();
  const auto codel = run(s, "naive");
  s.repeating_clients = 1.0;  // every client polls one target
  const auto codel_polling = run(s, "naive");
  EXPECT_EQ(codel_polling.attempts, codel.attempts);
  EXPECT_EQ(codel_polling.rejected, codel.rejected);
  s.repeating_clients = 0.0;
  s.defences.enabled = s.defences.enabled.with<stormguard::sim::shed_retries_defence>();
  const auto shed = run(s, "naive");
  EXPECT_NE(shed.rejected, codel.rejected);
  s.repeating_clients = 1.0;
  const auto shed_polling = run(s, "naive");
  EXPECT_NE(shed_polling.rejected, shed.rejected);
}

TEST(SimulateDefences, DropExpiredDropsAndLifoCodelEndsTheStorm) {
  auto s = stormguard::sim::friday_night();
  s.defences.enabled = defence_set{}.with<drop_expired_defence>().with<lifo_codel_defence>();
  const auto r = run(s, "full");
  EXPECT_GT(r.expired_dropped, 0);
  EXPECT_LE(r.wasted_work, 1'980);  // <= 1 % of the 198,028 without defence
  EXPECT_TRUE(r.recovery_s);
}

// Dropping what cannot finish before its deadline ends the metastable state of the strategies
// without a client budget: only the attempts that began before their deadline and overran it in
// the incident's 1.5 s service remain wasted (100 workers x ceil(10 s / 1.5 s) = 700).
TEST(SimulateDefences, DropExpiredAloneEndsTheStormOfTheUnbudgetedStrategies) {
  auto s = stormguard::sim::friday_night();
  s.defences.enabled = defence_set{}.with<drop_expired_defence>();
  for (const char* name : {"naive", "exponential", "equal", "full", "decorrelated"}) {
    const auto r = run(s, name);
    EXPECT_GT(r.expired_dropped, 0) << name;
    EXPECT_LE(r.wasted_work, 1'980) << name;  // <= 1 % of the 198,028 without defence
    EXPECT_TRUE(r.recovery_s) << name;
    EXPECT_GT(r.server_refused, 0) << name;  // drops heard by callers still waiting
  }
  // With only passed deadlines dropped, the FIFO head overruns each time: the storm goes on.
  s.defences.of<drop_expired_defence>().service_estimate = 0s;
  const auto literal = run(s, "full");
  EXPECT_GT(literal.wasted_work, 100'000);
  EXPECT_FALSE(literal.recovery_s);
  EXPECT_EQ(literal.server_refused, 0);  // nobody was still listening
}

// Where every per-process budget fails (20,000 clients), the server's retry budget holds: the
// served amplification of the incident's requests stays <= 1.2 and recovery is no later than that
// of clients that never retry (+ 2 s).
TEST(SimulateDefences, TheServerBudgetHoldsTheFleetAt2000And20000Clients) {
  for (const int clients : {0, 20'000}) {
    auto s = *stormguard::sim::builtin_scenario("friday-night-fleet");
    if (clients != 0) s.clients = clients;
    const auto never_retry = run(s, "none");
    ASSERT_TRUE(never_retry.recovery_s);
    EXPECT_FALSE(run(s, "full+budget").recovery_s) << clients;  // the client budgets fail
    s.defences.enabled = defence_set{}.with<retry_budget_defence>();
    const auto r = run(s, "full");
    ASSERT_TRUE(r.incident_served_amplification);
    EXPECT_LE(*r.incident_served_amplification, 1.2) << clients;
    ASSERT_TRUE(r.recovery_s) << clients;
    EXPECT_LE(*r.recovery_s, *never_retry.recovery_s + 2.0) << clients;
    EXPECT_GT(r.server_refused, 0);
  }
}

// Without an incident, no defence costs a request: every built-in strategy that retries a 503
// keeps >= 99.9 % success under each defence (the rest are requests still in flight at the end),
// and nothing is refused, the concurrency limiter's start-up and probe windows included.
TEST(SimulateDefences, NoIncidentCostsNothingUnderAnyDefence) {
  auto s = *stormguard::sim::builtin_scenario("no-incident");
  for (const char* name :
       {"none", "drop-expired", "lifo-codel", "retry-budget", "concurrency-limit", "all"}) {
    s.defences.enabled = *stormguard::sim::parse_defences(name);
    const auto report = stormguard::sim::simulate(s, stormguard::sim::builtin_strategies());
    for (std::size_t i = 0; i < report.strategies.size(); ++i) {
      const auto& r = report.strategies[i];
      if (!stormguard::sim::builtin_strategies()[i].retries_503) continue;
      ASSERT_TRUE(r.success_ratio);
      EXPECT_GE(*r.success_ratio, 0.999) << name << " " << r.name;
      EXPECT_EQ(r.rejected, 0) << name << " " << r.name;
      EXPECT_EQ(r.server_refused, 0) << name << " " << r.name;
      // The rest: still in flight at the end, or throttled locally by adaptive throttling.
      EXPECT_EQ(r.successes + r.requests_in_flight + r.throttled, r.logical_requests)
          << name << " " << r.name;
    }
  }
}

TEST(ScenarioDefences, ParseWriteBackAndNameTheBadField) {
  const std::string base =
      R"({"name":"x","seed":1,"duration":"10s","requests_per_second":10,"clients":1,
          "timeout":"1s","incident":null,"client_profile":"curl",
          "server":{"workers":1,"queue_limit":1,"service_time":"10ms","defences":)";
  const auto parsed = stormguard::sim::parse_scenario(
      base + R"({"drop-expired":{},"retry-budget":{"ratio":0.2,"min_retries_per_second":3}}}})");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_TRUE((*parsed).defences.enabled.has<drop_expired_defence>());
  EXPECT_TRUE((*parsed).defences.enabled.has<retry_budget_defence>());
  EXPECT_FALSE((*parsed).defences.enabled.has<lifo_codel_defence>());
  EXPECT_EQ((*parsed).defences.of<retry_budget_defence>().min_retries_per_second, 3);
  EXPECT_EQ((*parsed).client, *stormguard::find_client_profile("curl"));
  const auto again = stormguard::sim::parse_scenario(stormguard::sim::to_json(*parsed));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *parsed);

  const auto unknown = stormguard::sim::parse_scenario(base + R"({"drop-everything":{}}}})");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("drop-everything"), std::string::npos);
  const auto bad = stormguard::sim::parse_scenario(base + R"({"lifo-codel":{"target":"0s"}}}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "server.defences.lifo-codel.target");

  const auto estimate =
      stormguard::sim::parse_scenario(base + R"({"drop-expired":{"service_estimate":"0s"}}}})");
  ASSERT_TRUE(estimate) << estimate.error().message;
  EXPECT_EQ((*estimate).defences.of<drop_expired_defence>().service_estimate,
            stormguard::duration::zero());
  const auto estimate_again = stormguard::sim::parse_scenario(stormguard::sim::to_json(*estimate));
  ASSERT_TRUE(estimate_again) << estimate_again.error().message;
  EXPECT_EQ(*estimate_again, *estimate);
  EXPECT_FALSE(
      (*parsed).defences.of<drop_expired_defence>().service_estimate);  // absent: the service time
  const auto bad_estimate =
      stormguard::sim::parse_scenario(base + R"({"drop-expired":{"service_estimate":"2h"}}}})");
  ASSERT_FALSE(bad_estimate);
  EXPECT_EQ(bad_estimate.error().field, "server.defences.drop-expired.service_estimate");
}

// Hostile headers, end to end: the server reads them as parse_attempt / parse_grpc_timeout do,
// and never admits what the same request without the header would not be admitted.
TEST(HostileHeaders, NeverWinMoreThanTheirAbsence) {
  stormguard::admission::retry_admission hostile({.ratio = 0.0, .min_retries_per_second = 0});
  stormguard::admission::retry_admission absent({.ratio = 0.0, .min_retries_per_second = 0});
  const stormguard::time_point now{};
  for (const char* value : {"-1", "99999999999", "two", "", "1 1", "0", "+1", "0x2", "1.0"}) {
    const auto info = stormguard::parse_attempt(std::string_view(value), std::nullopt);
    EXPECT_TRUE(info.malformed) << value;
    EXPECT_FALSE(hostile.admit(now, info)) << value;  // a retry of unknown number: no budget
    EXPECT_TRUE(absent.admit(now, stormguard::parse_attempt(std::nullopt, std::nullopt)));
  }
  // grpc-timeout: 0 = already expired; huge values saturate; malformed = no deadline (as absent).
  using stormguard::admission::deadline_of;
  using stormguard::admission::expired;
  EXPECT_TRUE(expired(now, deadline_of(now, stormguard::parse_grpc_timeout("0m"))));
  EXPECT_FALSE(expired(now + 1h, deadline_of(now, stormguard::parse_grpc_timeout("99999999H"))));
  for (const char* value : {"", "1", "123456789S", "-1S", "1 S", "1s", "abcS", "1SS"}) {
    EXPECT_EQ(deadline_of(now, stormguard::parse_grpc_timeout(value)),
              stormguard::time_point::max())
        << value;
  }
  // Pushback garbage: "do not retry", as gRFC A6 says.
  for (const char* value : {"-1", "abc", "", "1.5", "99999999999999999999999"}) {
    const auto p = stormguard::parse_pushback(value);
    if (std::string_view(value) == "99999999999999999999999") {
      EXPECT_FALSE(p.do_not_retry);  // a huge delay saturates; the client's max_retry_after ends it
    } else {
      EXPECT_TRUE(p.do_not_retry) << value;
    }
  }
}

}  // namespace

TEST(Defences, ParseCombinationsAndRejectWhatIsNotOne) {
  using stormguard::sim::parse_defences;
  EXPECT_TRUE(parse_defences("none")->empty());
  EXPECT_EQ(*parse_defences("all"), defence_set::all());
  const defence_set two = *parse_defences("lifo-codel+drop-expired");
  EXPECT_TRUE(two.has<drop_expired_defence>());
  EXPECT_TRUE(two.has<lifo_codel_defence>());
  EXPECT_FALSE(two.has<retry_budget_defence>());
  EXPECT_EQ(to_string(two), "drop-expired+lifo-codel");
  EXPECT_EQ(to_string(defence_set::all()),
            "drop-expired+lifo-codel+retry-budget+concurrency-limit+retry-after");
  for (const char* bad : {"", "+", "bogus", "retry-budget+", "retry-budget+retry-budget",
                          "none+retry-budget", "all+lifo-codel", "drop-expired,lifo-codel"}) {
    const auto parsed = parse_defences(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().field, "defence");
    EXPECT_NE(parsed.error().message.find(std::string("\"") + bad + "\""), std::string::npos)
        << parsed.error().message;
  }
  EXPECT_NE(parse_defences("drop-expired,lifo-codel").error().message.find("use '+'"),
            std::string::npos);
  EXPECT_NE(parse_defences("retry-budget+retry-budget").error().message.find("given twice"),
            std::string::npos);
  EXPECT_EQ(stormguard::sim::defence_names(),
            "none, all, drop-expired, lifo-codel, retry-budget, shed-retries, concurrency-limit, "
            "retry-after");
  // shed-retries is opt-in: named, never in "all".
  EXPECT_FALSE(defence_set::all().has<stormguard::sim::shed_retries_defence>());
  EXPECT_EQ(to_string(*parse_defences("shed-retries+retry-budget")), "retry-budget+shed-retries");
}

// Client profiles (stormguard/client_profile.hpp): what the clients send and honour decides what
// the server's defences can do for them.
namespace profiles {

using stormguard::find_client_profile;

stormguard::sim::strategy constant_backoff(const std::string& name, stormguard::duration delay) {
  stormguard::config::policy p;
  p.name = name;
  p.retry.max_retries = 3;
  p.retry.backoff = {
      .base = delay, .cap = delay, .multiplier = 1.0, .jitter = stormguard::jitter::none};
  return stormguard::sim::from_policy(p);
}

TEST(ClientProfiles, ClientsThatSendNoDeadlineGiveDropExpiredNothingToDrop) {
  auto s = stormguard::sim::friday_night();
  s.defences.enabled = defence_set{}.with<drop_expired_defence>();
  const auto ours = run(s, "full");
  EXPECT_GT(ours.expired_dropped, 0);
  EXPECT_TRUE(ours.recovery_s);
  s.client = *find_client_profile("go-retryablehttp");
  const auto theirs = run(s, "full");
  EXPECT_EQ(theirs.expired_dropped, 0);
  EXPECT_EQ(theirs.server_refused, 0);
  EXPECT_FALSE(theirs.recovery_s);  // as with no defence: the storm goes on
  EXPECT_GT(theirs.attempts, 3 * ours.attempts / 2);
}

TEST(ClientProfiles, GrpcsOwnLabelIsReadByTheServerBudgetAndItsPushbackHonoured) {
  auto s = stormguard::sim::friday_night();
  s.defences.enabled = defence_set{}.with<retry_budget_defence>();
  s.client = *find_client_profile("grpc");
  const auto r = run(s, "naive");
  EXPECT_GT(r.server_refused, 0);
  EXPECT_TRUE(r.recovery_s);
  // Labelled but deaf to the pushback: refused retries are retried again.
  s.client.honours_pushback = false;
  const auto deaf = run(s, "naive");
  EXPECT_EQ(deaf.server_refused, 0);
  EXPECT_GT(deaf.attempts, r.attempts);
}

// The concurrency limit answers 503 + Retry-After in [1, 5] s (the delays themselves:
// DriverProfile in sim_engine_test.cpp). Clients that come back after it are served; clients
// that retry on their own 100 ms backoff spend their three retries while the limit still holds.
TEST(ClientProfiles, ClientsThatHonourRetryAfterAreServedMoreThanThoseThatIgnoreIt) {
  auto s = stormguard::sim::friday_night();
  s.defences.enabled = defence_set{}.with<concurrency_limit_defence>();
  const auto quick = constant_backoff("quick", 100ms);
  const auto with = [&](stormguard::retry_after_use use) {
    s.client.retry_after = use;
    return stormguard::sim::simulate(s, quick);
  };
  using enum stormguard::retry_after_use;
  const auto ignored = with(ignore);
  const auto minimum_ = with(minimum);
  const auto replaced = with(replace);
  EXPECT_GT(minimum_.successes, ignored.successes);
  EXPECT_GT(replaced.successes, ignored.successes);
  EXPECT_GT(ignored.rejected, minimum_.rejected);
}

// Clients that obey Retry-After exactly and nothing else (go-retryablehttp's 1-2-4-8 s, 4
// retries): with retry-after, the refusals of the other defences tell them to come back about
// when the overload may be over, instead of four times during it.
TEST(ClientProfiles, RetryAfterPacingHoldsClientsThatObeyNothingElse) {
  auto s = stormguard::sim::scale_scenario(stormguard::sim::friday_night(), 0.1);
  ASSERT_TRUE(s) << s.error().message;
  stormguard::config::policy go;
  go.name = "go";
  go.retry.max_retries = 4;
  go.retry.backoff = {
      .base = 1s, .cap = 30s, .multiplier = 2.0, .jitter = stormguard::jitter::none};
  go.attempt_timeout = 1s;
  go.client = find_client_profile("go-retryablehttp");
  const auto strat = stormguard::sim::from_policy(go);
  const auto others = defence_set{}
                          .with<drop_expired_defence>()
                          .with<lifo_codel_defence>()
                          .with<retry_budget_defence>()
                          .with<concurrency_limit_defence>();
  s->defences.enabled = others;
  const auto unpaced = stormguard::sim::simulate(*s, strat);
  s->defences.enabled = others.with<stormguard::sim::retry_after_defence>();
  const auto paced = stormguard::sim::simulate(*s, strat);
  EXPECT_NE(paced.defence.find("retry-after"), std::string::npos) << paced.defence;
  ASSERT_TRUE(paced.amplification && unpaced.amplification && paced.success_ratio);
  EXPECT_LT(*paced.amplification, *unpaced.amplification - 0.1);
  EXPECT_LE(*paced.amplification, 1.3);
  EXPECT_GE(*paced.success_ratio, 0.97);
  ASSERT_TRUE(paced.recovery_s);
  EXPECT_LE(*paced.recovery_s, 7.0);
}

TEST(ClientProfiles, ABrowsersFetchNeverRetriesNorHedges) {
  auto s = stormguard::sim::friday_night();
  s.client = *find_client_profile("browser-fetch");
  const auto r = run(s, "naive");
  EXPECT_EQ(r.attempts, r.logical_requests - r.throttled);
  const auto hedged = stormguard::sim::find_strategy("full");
  ASSERT_NE(hedged, nullptr);
  stormguard::sim::strategy h = *hedged;
  h.retry.max_retries = 0;
  h.hedging = stormguard::config::hedging_config{};
  const auto rh = stormguard::sim::simulate(s, h);
  EXPECT_EQ(rh.hedges_sent, 0);
  s.client = *find_client_profile("stormguard");
  EXPECT_GT(stormguard::sim::simulate(s, h).hedges_sent, 0);  // the same strategy, our client
  EXPECT_EQ(rh.attempts, rh.logical_requests - rh.throttled);
}

TEST(ClientProfiles, APolicysOwnProfileWinsOverTheScenarios) {
  auto s = stormguard::sim::friday_night();
  s.defences.enabled = defence_set{}.with<drop_expired_defence>();
  stormguard::config::policy p = stormguard::sim::find_strategy("full")->as_policy();
  p.client = find_client_profile("curl");
  const auto r = stormguard::sim::simulate(s, stormguard::sim::from_policy(p));
  EXPECT_EQ(r.expired_dropped, 0);  // curl sends no deadline, whatever the scenario's clients do
  EXPECT_FALSE(r.recovery_s);
}

TEST(ClientProfiles, TheScenarioWritesItsProfileOnlyWhenItIsNotTheDefault) {
  auto s = stormguard::sim::friday_night();
  EXPECT_EQ(stormguard::sim::to_json(s).find("client_profile"), std::string::npos);
  s.client = *find_client_profile("go-retryablehttp");
  const std::string text = stormguard::sim::to_json(s);
  EXPECT_NE(text.find(R"("client_profile": "go-retryablehttp")"), std::string::npos) << text;
  const auto again = stormguard::sim::parse_scenario(text);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, s);
  s.client.sends_deadline = true;  // no longer the built-in: written field by field
  const auto custom = stormguard::sim::parse_scenario(stormguard::sim::to_json(s));
  ASSERT_TRUE(custom) << custom.error().message;
  EXPECT_EQ(custom->client.name, stormguard::k_custom_client_profile);
  EXPECT_TRUE(custom->client.sends_deadline);
  const auto bad = stormguard::sim::parse_scenario(
      R"({"name":"x","seed":1,"duration":"10s","requests_per_second":10,"clients":1,
          "timeout":"1s","incident":null,"client_profile":{"attempt_label":"x-envoy-attempt-count"},
          "server":{"workers":1,"queue_limit":1,"service_time":"10ms"}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "client_profile.deadline");
}

}  // namespace profiles
