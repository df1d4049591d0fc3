// SPDX-License-Identifier: Apache-2.0
#include "stormguard/fleet_budget.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "stormguard/random.hpp"
#include "stormguard/testing/scripted_random.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_status;
using stormguard::fleet_budget;
using stormguard::fleet_budget_options;
using stormguard::fleet_deltas;
using stormguard::fleet_view;
using stormguard::fleet_window_store;
using stormguard::random_generator;
using stormguard::ratio_budget;
using stormguard::ratio_budget_options;
using stormguard::time_point;
using stormguard::testing::fraction;
using stormguard::testing::scripted_random;

constexpr time_point t0{};

fleet_budget_options options_with(double ratio, std::int64_t floor) {
  fleet_budget_options o;
  o.ratio = ratio_budget_options{.ratio = ratio, .min_retries_per_second = floor};
  return o;
}

bool retry(fleet_budget& b, time_point now, random_generator& g) {
  return b.try_withdraw(now, attempt_status::failure, g);
}

// Retries `b` grants at `now` until it refuses one (at most 1,000).
int grants_until_refused(fleet_budget& b, time_point now, random_generator& g) {
  int granted = 0;
  while (granted < 1000 && retry(b, now, g)) ++granted;
  return granted;
}

std::string error_of(const fleet_budget_options& o) {
  try {
    fleet_budget b(o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(FleetBudgetOptions, BadValuesNameTheField) {
  auto o = options_with(0.1, 10);
  o.sync_interval = 5ms;
  EXPECT_NE(error_of(o).find("sync_interval must be in [10ms, 10s], got 5ms"), std::string::npos)
      << error_of(o);
  o = options_with(0.1, 10);
  o.max_sync_interval = 50ms;
  EXPECT_NE(error_of(o).find("max_sync_interval"), std::string::npos) << error_of(o);
  o = options_with(0.1, 10);
  o.sync_every_requests = 0;
  EXPECT_NE(error_of(o).find("sync_every_requests must be in [1, 1000000], got 0"),
            std::string::npos);
  o = options_with(0.1, 10);
  o.expected_clients = -1;
  EXPECT_NE(error_of(o).find("expected_clients"), std::string::npos);
  for (const std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1025}}) {
    o = options_with(0.1, 10);
    o.shards = bad;
    EXPECT_NE(error_of(o).find("shards must be in [1, 1024], got " + std::to_string(bad)),
              std::string::npos)
        << error_of(o);
  }
  o = options_with(-0.5, 10);  // the ratio fields: ratio_budget's own validation
  EXPECT_NE(error_of(o).find("ratio must be in [0, 1000], got -0.5"), std::string::npos);
  EXPECT_EQ(error_of(options_with(0.1, 10)), "");
}

TEST(FleetBudget, AloneItGrantsExactlyTheFleetsAllowance) {
  fleet_budget b(options_with(0.1, 0));
  random_generator g(1);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(b.try_admit(t0, g));
  const fleet_deltas out = b.begin_sync(t0);
  EXPECT_EQ(out, (fleet_deltas{100, 0}));
  b.end_sync(t0, fleet_view{100, 0, 1});  // the store saw only this process
  EXPECT_EQ(b.current_mode(t0), fleet_budget::mode::joined);
  EXPECT_EQ(b.share_ppm(), 1'000'000);
  int granted = 0;
  while (retry(b, t0, g)) ++granted;
  EXPECT_EQ(granted, 10);  // 10 % of 100 requests
}

// A process that syncs before its first request (a one-shot command: `stormguard exec` syncs
// once before its first attempt) while the rest of the fleet's requests fill the window counts
// the request it is about to make: a share of 1 / (R + 1), not 0, which refused every retry of
// every short run after the first.
TEST(FleetBudget, AProcessWithNoRequestYetCountsTheOneItIsAboutToMake) {
  fleet_budget b(options_with(0.1, 10));  // fleet floor: 10/s over 10 s = 100 retries
  random_generator g(1);
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{40, 8, 4});  // earlier runs: 40 requests, 8 retries, 4 live
  EXPECT_EQ(b.share_ppm(), 1'000'000 / 41);
  // allowance = 0.1 · 40 + 100 − 8 = 96 retries; 1/41 of it is this process's (2.34).
  EXPECT_EQ(b.credit_micro(), 96'000'000LL * (1'000'000 / 41) / 1'000'000);
  ASSERT_TRUE(b.try_admit(t0, g));
  EXPECT_TRUE(retry(b, t0, g));
}

TEST(FleetBudget, SpendsOnlyItsShareOfTheFleetsAllowance) {
  fleet_budget b(options_with(0.1, 10));  // fleet floor: 10/s over 10 s = 100 retries
  random_generator g(1);
  for (int i = 0; i < 100; ++i) (void)b.try_admit(t0, g);
  (void)b.begin_sync(t0);
  // The fleet: 1,000 requests (this process 100 of them), 50 retries spent, 10 live clients.
  b.end_sync(t0, fleet_view{1000, 50, 10});
  EXPECT_EQ(b.share_ppm(), 100'000);
  // allowance = 0.1 · 1000 + 100 − 50 = 150 retries; a tenth of it is this process's.
  EXPECT_EQ(b.credit_micro(), 15'000'000);
  int granted = 0;
  while (retry(b, t0, g)) ++granted;
  EXPECT_EQ(granted, 15);
}

TEST(FleetBudget, AFractionalShareIsADrawNeverRoundedUp) {
  // 0.3 retries of credit: 100 live clients with no requests share a floor of 3/s over 10 s.
  fleet_budget b(options_with(0.0, 3));
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{0, 0, 100});
  EXPECT_EQ(b.credit_micro(), 300'000);
  scripted_random lose({fraction(0.35)});
  EXPECT_FALSE(b.try_withdraw(t0, attempt_status::failure, lose));
  // The fractional credit is used up by the draw: a second retry cannot draw again.
  scripted_random win({fraction(0.0)});
  EXPECT_FALSE(b.try_withdraw(t0, attempt_status::failure, win));

  fleet_budget c(options_with(0.0, 3));
  (void)c.begin_sync(t0);
  c.end_sync(t0, fleet_view{0, 0, 100});
  scripted_random lucky({fraction(0.25)});
  EXPECT_TRUE(c.try_withdraw(t0, attempt_status::failure, lucky));
  EXPECT_EQ(c.credit_micro(), 300'000 - 1'000'000);  // in debt until deposits or the next sync
}

TEST(FleetBudget, AFleetThatOverspentCarriesItsShareOfTheDebt) {
  // The fleet granted 200 retries against 1,000 requests (allowance 100 − 200 = −100: its views
  // were stale). This process (a tenth of the requests) owes 10 retries: its next 100 requests
  // repay them before it may retry again. Clamping the allowance to 0 would forgive the debt at
  // every sync, and a fleet whose views are stale would overspend again and again.
  fleet_budget b(options_with(0.1, 0));
  random_generator g(1);
  for (int i = 0; i < 100; ++i) (void)b.try_admit(t0, g);
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{1000, 200, 10});
  EXPECT_EQ(b.credit_micro(), -10'000'000);
  for (int i = 0; i < 100; ++i) (void)b.try_admit(t0, g);
  EXPECT_FALSE(retry(b, t0, g));  // credit 0: repaid, nothing to spend
  for (int i = 0; i < 10; ++i) (void)b.try_admit(t0, g);
  EXPECT_TRUE(retry(b, t0, g));
}

TEST(FleetBudget, DepositsThatLeaveTheWindowTakeTheirCreditWithThem) {
  // Between syncs the credit follows the process's own ratio balance over its window: 100
  // requests give 10 retries while they are in the window, none once they have left it.
  fleet_budget_options o = options_with(0.1, 0);
  o.max_sync_interval = 10s;  // joined for 30 s after the sync
  fleet_budget b(o);
  random_generator g(1);
  for (int i = 0; i < 100; ++i) (void)b.try_admit(t0, g);
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{100, 0, 1});
  EXPECT_EQ(b.credit_micro(), 10'000'000);
  EXPECT_FALSE(retry(b, t0 + 12s, g));
  EXPECT_EQ(b.current_mode(t0 + 12s), fleet_budget::mode::joined);
}

TEST(FleetBudget, FractionalDrawsGrantTheShareOnAverage) {
  // 200,000 processes with 0.3 retries of credit each: 60,000 expected; the draws' standard
  // deviation is sqrt(200000 · 0.3 · 0.7) ≈ 205, so ±1,000 (≈ 5σ) fails only for a broken formula
  // (rounding up would give 200,000, rounding down 0).
  random_generator g(42);
  std::int64_t granted = 0;
  for (int i = 0; i < 200'000; ++i) {
    fleet_budget b(options_with(0.0, 3));
    (void)b.begin_sync(t0);
    b.end_sync(t0, fleet_view{0, 0, 100});
    granted += retry(b, t0, g) ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(granted), 60'000.0, 1'000.0);
}

TEST(FleetBudget, BeforeTheFirstSyncOnlyTheRatioHolds) {
  fleet_budget b(options_with(0.1, 10));
  random_generator g(1);
  for (int i = 0; i < 20; ++i) (void)b.try_admit(t0, g);
  EXPECT_EQ(b.current_mode(t0), fleet_budget::mode::fallback);
  int granted = 0;
  while (retry(b, t0, g)) ++granted;
  EXPECT_EQ(granted, 2);  // 10 % of 20; the fleet floor is not this process's
}

TEST(FleetBudget, ExpectedClientsGiveTheFallbackItsPartOfTheFloor) {
  auto o = options_with(0.0, 10);  // floor only: 10/s · 10 s = 100 retries for the fleet
  o.expected_clients = 25;
  fleet_budget b(o);
  random_generator g(1);
  int granted = 0;
  while (retry(b, t0, g)) ++granted;
  EXPECT_EQ(granted, 4);  // 100 / 25
}

TEST(FleetBudget, AFailedSyncFallsBackWithTheLastFleetSizeAndLosesNoDeltas) {
  fleet_budget b(options_with(0.0, 10));
  random_generator g(1);
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{0, 0, 50});  // 50 live clients
  for (int i = 0; i < 7; ++i) (void)b.try_admit(t0 + 1s, g);
  const fleet_deltas carried = b.begin_sync(t0 + 1s);
  EXPECT_EQ(carried.requests, 7);
  b.sync_failed(t0 + 1s);
  EXPECT_EQ(b.current_mode(t0 + 1s), fleet_budget::mode::fallback);
  EXPECT_EQ(b.fallbacks(), 1);
  int granted = 0;
  while (retry(b, t0 + 1s, g)) ++granted;
  EXPECT_EQ(granted, 2);  // floor 100 retries / 50 clients
  (void)b.try_admit(t0 + 2s, g);
  const fleet_deltas next = b.begin_sync(t0 + 2s);
  EXPECT_EQ(next, (fleet_deltas{8, 2}));  // the 7 from the failed sync, 1 since, 2 retries
  b.end_sync(t0 + 2s, fleet_view{8, 2, 50});
  EXPECT_EQ(b.current_mode(t0 + 2s), fleet_budget::mode::joined);
}

// A store that lost its window during an outage (Redis restarted empty) holds only what was
// reported after it: the rejoining process's share counts only the requests it still owed and
// later ones, so the fleet's shares still sum to at most 1; after a whole window it counts its
// whole window again.
TEST(FleetBudget, AfterAnOutageTheShareCountsOnlyWhatTheStoreCanHold) {
  fleet_budget b(options_with(0.1, 0));
  random_generator g(1);
  for (int i = 0; i < 100; ++i) (void)b.try_admit(t0, g);
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{300, 0, 3});  // joined: 100 of the fleet's 300
  EXPECT_EQ(b.share_ppm(), 333'333);
  for (int i = 0; i < 50; ++i) (void)b.try_admit(t0 + 2s, g);  // owed to the store
  (void)b.begin_sync(t0 + 2s);
  b.sync_failed(t0 + 2s);  // the outage begins
  for (int i = 0; i < 50; ++i) (void)b.try_admit(t0 + 3s, g);
  const fleet_deltas carried = b.begin_sync(t0 + 4s);
  EXPECT_EQ(carried.requests, 100);
  // The restarted store holds the three processes' carried requests: 300 in all. The local
  // window holds 200; the store only the 100 this process reported since.
  b.end_sync(t0 + 4s, fleet_view{300, 0, 3});
  EXPECT_EQ(b.share_ppm(), 333'333);
  EXPECT_EQ(b.credit_micro(), 9'999'990);  // a third of 0.1 x 300
  // Once the requests from before the outage have left the window, the whole window counts
  // again: the outage's 100 and 100 new ones.
  for (int i = 0; i < 100; ++i) (void)b.try_admit(t0 + 11500ms, g);
  (void)b.begin_sync(t0 + 11500ms);
  b.end_sync(t0 + 11500ms, fleet_view{1000, 0, 3});
  EXPECT_EQ(b.share_ppm(), 200'000);
}

TEST(FleetBudget, AViewThatCannotBeTrueCountsAsAFailedSync) {
  fleet_budget b(options_with(0.1, 10));
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{100, 0, 1});
  (void)b.begin_sync(t0 + 100ms);
  b.end_sync(t0 + 100ms, fleet_view{-5, 0, 1});
  EXPECT_EQ(b.current_mode(t0 + 100ms), fleet_budget::mode::fallback);
  (void)b.begin_sync(t0 + 200ms);
  b.end_sync(t0 + 200ms, fleet_view{100, 0, 1});
  (void)b.begin_sync(t0 + 300ms);
  b.end_sync(t0 + 300ms, fleet_view{100, 0, 0});  // no live client: not even this one
  EXPECT_EQ(b.current_mode(t0 + 300ms), fleet_budget::mode::fallback);
  EXPECT_EQ(b.fallbacks(), 2);
}

TEST(FleetBudget, AStaleViewFallsBack) {
  fleet_budget b(options_with(0.1, 10));  // max_sync_interval 2 s
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{100, 0, 1});
  EXPECT_EQ(b.current_mode(t0 + 6s), fleet_budget::mode::joined);
  EXPECT_EQ(b.current_mode(t0 + 6s + 1ns), fleet_budget::mode::fallback);
}

TEST(FleetBudget, SyncIsDueByIntervalAndTraffic) {
  auto o = options_with(0.1, 10);
  o.sync_every_requests = 3;
  fleet_budget b(o);
  random_generator g(1);
  EXPECT_TRUE(b.sync_due(t0));  // the first sync at once
  (void)b.begin_sync(t0);
  EXPECT_FALSE(b.sync_due(t0 + 5s));  // one in progress
  b.end_sync(t0, fleet_view{0, 0, 1});
  (void)b.try_admit(t0, g);
  (void)b.try_admit(t0, g);
  EXPECT_FALSE(b.sync_due(t0 + 150ms));  // interval passed, but only 2 requests
  (void)b.try_admit(t0, g);
  EXPECT_FALSE(b.sync_due(t0 + 99ms));  // 3 requests, interval not passed
  EXPECT_TRUE(b.sync_due(t0 + 100ms));
  fleet_budget idle(o);
  (void)idle.begin_sync(t0);
  idle.end_sync(t0, fleet_view{0, 0, 1});
  EXPECT_FALSE(idle.sync_due(t0 + 1999ms));
  EXPECT_TRUE(idle.sync_due(t0 + 2s));  // max_sync_interval, with no traffic at all
}

TEST(FleetWindowStore, ClampsDeltasAndExpiresClients) {
  fleet_window_store store(10s, 300ms);
  EXPECT_EQ(store.sync(t0, "a", {5, 1}), (fleet_view{5, 1, 1}));
  EXPECT_EQ(store.sync(t0 + 100ms, "b", {-7, fleet_window_store::k_max_delta + 9}),
            (fleet_view{5, 1 + fleet_window_store::k_max_delta, 2}));
  EXPECT_EQ(store.sync(t0 + 350ms, "b", {0, 0}).live_clients, 1);       // a's heartbeat expired
  EXPECT_EQ(store.sync(t0 + 12s, "b", {0, 0}), (fleet_view{0, 0, 1}));  // the window moved on
  EXPECT_THROW(fleet_window_store(0s, 1s), std::invalid_argument);
  EXPECT_THROW(fleet_window_store(10s, 0s), std::invalid_argument);
}

// Claims that follow need (fleet_budget_options::ask_for_credit): the asker of a process that
// talks to a fleet_window_store directly (round trip 0).
struct store_asker {
  fleet_window_store* store = nullptr;
  std::string name;
  fleet_budget* budget = nullptr;
  std::int64_t asked = 0;  // micro-retries asked for
  static std::int64_t ask(void* context, time_point now, std::int64_t wanted) noexcept {
    auto& self = *static_cast<store_asker*>(context);
    self.asked += wanted;
    return self.store->ask(now, self.name, wanted, self.budget->terms());
  }
};

// A fleet of `clients` processes sharing one store, each sending `rate_per_client` logical
// requests per second whose every attempt fails (each wants 3 retries), syncing with round trip 0.
// Returns {logical requests, retries granted} over `seconds`.
struct fleet_totals {
  std::int64_t requests = 0;
  std::int64_t retries = 0;
  std::int64_t shared_retries = 0;  // what one ratio_budget shared by all clients granted
};
// `claims`: the store hands out credit (fleet_window_store's four-argument sync, what the Redis
// script does); false: a store that only counts.
// `shards`: the budget kept in K shards, one store each, client c on shard c mod K.
// `ask`: claims that follow need (fleet_budget_options::ask_for_credit; with `claims`).
fleet_totals run_failing_fleet(int clients, double rate_per_client, int seconds,
                               bool claims = false, int shards = 1, bool ask = false) {
  std::vector<fleet_window_store> stores(static_cast<std::size_t>(shards),
                                         fleet_window_store(10s, 6s));
  std::vector<std::unique_ptr<fleet_budget>> budgets;
  std::vector<std::string> names;
  std::vector<std::unique_ptr<store_asker>> askers;
  for (int c = 0; c < clients; ++c) {
    auto o = options_with(0.1, 10);
    o.shards = shards;
    o.ask_for_credit = ask;
    budgets.push_back(std::make_unique<fleet_budget>(o));
    names.push_back("client-" + std::to_string(c));
    askers.push_back(std::make_unique<store_asker>(store_asker{
        &stores[static_cast<std::size_t>(c % shards)], names.back(), budgets.back().get()}));
    budgets.back()->set_asker(&store_asker::ask, askers.back().get());
  }
  random_generator g(7);
  fleet_totals totals;
  ratio_budget shared(ratio_budget_options{.ratio = 0.1, .min_retries_per_second = 10});
  const auto step = 10ms;
  const double per_step = rate_per_client * 0.01;
  std::vector<double> owed(static_cast<std::size_t>(clients), 0.0);
  for (time_point now = t0; now < t0 + std::chrono::seconds(seconds); now += step) {
    for (int c = 0; c < clients; ++c) {
      auto& b = *budgets[static_cast<std::size_t>(c)];
      auto& debt = owed[static_cast<std::size_t>(c)];
      // Spread the clients' phases so they neither send nor sync in lockstep.
      debt += per_step * (1.0 + 0.5 * static_cast<double>(c % 7) / 7.0) / (1.0 + 0.5 * 3.0 / 7.0);
      while (debt >= 1.0) {
        debt -= 1.0;
        (void)b.try_admit(now, g);
        ++totals.requests;
        for (int r = 0; r < 3 && retry(b, now, g); ++r) ++totals.retries;
        shared.deposit(now);
        for (int r = 0; r < 3 && shared.try_withdraw(now); ++r) ++totals.shared_retries;
      }
      if (b.sync_due(now)) {
        const fleet_deltas out = b.begin_sync(now);
        const std::string& name = names[static_cast<std::size_t>(c)];
        fleet_window_store& store = stores[static_cast<std::size_t>(c % shards)];
        if (claims) {
          b.end_sync(now, store.sync(now, name, out, b.terms()));
        } else {
          b.end_sync(now, store.sync(now, name, out));
        }
      }
    }
  }
  return totals;
}

// The overshoot of the file comment, against what one ratio_budget shared by the whole fleet
// grants on the same traffic; L, the age of a process's view of the fleet, is its sync interval
// here (round trip 0).

TEST(FleetBudget, TwoHundredClientsSyncingEvery100msGrantWhatOneSharedBudgetWould) {
  // 200 clients of 10 requests/s: each syncs every 100 ms (L = 0.1 s). Measured: 4.9 % over
  // one shared budget (6,585 against 6,277 retries).
  const fleet_totals t = run_failing_fleet(200, 10.0, 30);
  EXPECT_GT(t.requests, 55'000);
  const auto shared = static_cast<double>(t.shared_retries);
  EXPECT_LE(static_cast<double>(t.retries), shared * 1.07) << t.retries << " vs " << shared;
  EXPECT_GE(static_cast<double>(t.retries), shared * 0.9) << t.retries << " vs " << shared;
}

TEST(FleetBudget, TwoThousandClientsOfOneRequestPerSecondStayWithinTheirSyncBound) {
  // 2,000 clients of 1 request/s, every attempt failing: per-process ratio budgets would each
  // keep a floor of 10 retries/s and grant all 3 retries of every request (3x the demand). Each
  // client syncs once per request here (L = 1 s). Measured: 12.6 % over one
  // shared budget (6,996 against 6,212). The shares are fractional (about 0.1 retry per client
  // per second).
  const fleet_totals t = run_failing_fleet(2000, 1.0, 30);
  EXPECT_GT(t.requests, 55'000);
  const auto shared = static_cast<double>(t.shared_retries);
  EXPECT_LE(static_cast<double>(t.retries), shared * 1.15) << t.retries << " vs " << shared;
  EXPECT_GE(static_cast<double>(t.retries), shared * 0.9) << t.retries << " vs " << shared;
  EXPECT_LT(static_cast<double>(t.retries), 0.2 * static_cast<double>(t.requests));
}

// With a store that hands out credit, no two processes hold the same credit: what one process
// spends between its syncs is not handed out again to another that syncs meanwhile, nor to
// itself. A store that only counts hands the spent credit out again (150 retries here against
// an allowance of 120).
TEST(FleetBudget, AStoreThatHandsOutCreditNeverHandsOutTheSameCreditTwice) {
  fleet_window_store store(10s, 6s);
  fleet_budget a(options_with(0.1, 10));  // fleet floor: 10/s over 10 s = 100 retries
  fleet_budget b(options_with(0.1, 10));
  random_generator g(1);
  for (int i = 0; i < 100; ++i) {
    (void)a.try_admit(t0, g);
    (void)b.try_admit(t0, g);
  }
  const auto sync = [&](fleet_budget& p, const std::string& name) {
    const fleet_deltas out = p.begin_sync(t0);
    const stormguard::fleet_answer answer = store.sync(t0, name, out, p.terms());
    p.end_sync(t0, answer);
    return answer;
  };
  (void)sync(a, "a");
  (void)sync(b, "b");
  EXPECT_EQ(store.claimed(), 120'000'000);  // a: 110 alone at first, then each 60 of 120
  (void)sync(a, "a");                       // a: its share, 60 of the 120
  EXPECT_EQ(a.credit_micro(), 60'000'000);
  EXPECT_EQ(b.credit_micro(), 10'000'000);  // b synced when a held 110
  (void)sync(b, "b");
  EXPECT_EQ(b.credit_micro(), 60'000'000);
  // a spends its 60 and syncs: the store sees 60 retries, and b still holds its 60.
  EXPECT_EQ(grants_until_refused(a, t0, g), 60);
  const stormguard::fleet_answer again = sync(a, "a");
  EXPECT_EQ(again.view, (fleet_view{200, 60, 2}));
  EXPECT_EQ(again.credit, 0);  // half of the 60 left is its share, but b holds all 60
  EXPECT_EQ(grants_until_refused(a, t0, g), 0);
  EXPECT_EQ(grants_until_refused(b, t0, g), 60);  // 120 in all: the fleet's allowance
  // The counting store's answer to the same view: half of what it sees left, again.
  fleet_budget counting(options_with(0.1, 10));
  for (int i = 0; i < 100; ++i) (void)counting.try_admit(t0, g);
  (void)counting.begin_sync(t0);
  counting.end_sync(t0, fleet_view{200, 60, 2});
  EXPECT_EQ(counting.credit_micro(), 30'000'000);
}

TEST(FleetWindowStore, FreesTheClaimOfAClientWhoseHeartbeatExpired) {
  fleet_window_store store(10s, 300ms);
  const stormguard::fleet_terms terms{100, 100'000, 100'000'000};
  EXPECT_EQ(store.sync(t0, "a", {100, 0}, terms).credit, 110'000'000);         // alone: all of it
  EXPECT_EQ(store.sync(t0 + 100ms, "b", {100, 0}, terms).credit, 10'000'000);  // what is left
  EXPECT_EQ(store.claimed(), 120'000'000);
  // a stops syncing; once its heartbeat has expired its claim goes back to the fleet.
  const stormguard::fleet_answer b = store.sync(t0 + 350ms, "b", {0, 0}, terms);
  EXPECT_EQ(b.view.live_clients, 1);
  EXPECT_EQ(b.credit, 60'000'000);  // b's share (100 of 200 requests) of the 120
  EXPECT_EQ(store.claimed(), 60'000'000);
}

// A grant that leaves the window frees allowance in the store's window, which the next sync
// hands out; the process does not count it back into its credit meanwhile (it would spend it a
// second time: the fleet's retries during the Friday-night incident came back as one burst
// when the first retries left the window).
TEST(FleetBudget, AGrantLeavingTheWindowComesBackOnlyThroughTheStore) {
  fleet_budget_options o = options_with(0.1, 0);
  o.max_sync_interval = 10s;  // joined for 30 s after the sync
  fleet_budget b(o);
  random_generator g(1);
  for (int i = 0; i < 10; ++i) (void)b.try_admit(t0, g);
  (void)b.begin_sync(t0);
  b.end_sync(t0, fleet_view{10, 0, 1});
  EXPECT_EQ(b.credit_micro(), 1'000'000);
  EXPECT_TRUE(retry(b, t0, g));
  for (int i = 0; i < 10; ++i) (void)b.try_admit(t0 + 5s, g);  // +1 retry of deposits
  EXPECT_EQ(b.credit_micro(), 1'000'000);
  // At 11.5 s the first ten requests and the grant have left the window: the deposits take
  // their retry with them, and the grant's comes back at the next sync, not before.
  EXPECT_EQ(b.current_mode(t0 + 11500ms), fleet_budget::mode::joined);
  EXPECT_FALSE(retry(b, t0 + 11500ms, g));
  EXPECT_EQ(b.credit_micro(), 0);
  (void)b.begin_sync(t0 + 11500ms);
  b.end_sync(t0 + 11500ms, fleet_view{10, 0, 1});  // the store: 10 requests, no retry left
  EXPECT_EQ(b.credit_micro(), 1'000'000);
}

TEST(FleetBudget, WithClaimsTwoThousandClientsOfOneRequestPerSecondGrantWhatOneSharedBudgetWould) {
  // The fleet of the test above (2,000 clients of 1 request/s, each syncing once per request,
  // every attempt failing) with a store that hands out credit: the age of a view no longer
  // matters, since no credit is handed out twice. Measured: 5,722 retries against 6,212 for
  // one shared budget (−7.9 %: a client holds its claim until its next request, about 1 s, so
  // the fleet spends a little less than one budget would; a counting store: +12.6 %).
  const fleet_totals t = run_failing_fleet(2000, 1.0, 30, true);
  EXPECT_GT(t.requests, 55'000);
  const auto shared = static_cast<double>(t.shared_retries);
  EXPECT_LE(static_cast<double>(t.retries), shared * 1.02) << t.retries << " vs " << shared;
  EXPECT_GE(static_cast<double>(t.retries), shared * 0.9) << t.retries << " vs " << shared;
}

TEST(FleetBudget, WithClaimsTwoHundredClientsSyncingEvery100msGrantWhatOneSharedBudgetWould) {
  // Measured: 6,281 retries against 6,277 for one shared budget (+0.06 %; a counting store:
  // +4.9 %).
  const fleet_totals t = run_failing_fleet(200, 10.0, 30, true);
  EXPECT_GT(t.requests, 55'000);
  const auto shared = static_cast<double>(t.shared_retries);
  EXPECT_LE(static_cast<double>(t.retries), shared * 1.02) << t.retries << " vs " << shared;
  EXPECT_GE(static_cast<double>(t.retries), shared * 0.9) << t.retries << " vs " << shared;
}

// Shards (fleet_budget_options::shards): K budgets, each with the ratio of its own processes'
// requests and 1/K of the floor, sum to the fleet's allowance: spread evenly, the fleet grants
// what one shared budget would, never more.
TEST(FleetBudget, FourShardsOfAnEvenFleetGrantWhatOneSharedBudgetWould) {
  const fleet_totals one = run_failing_fleet(200, 10.0, 30, true, 1);
  const fleet_totals four = run_failing_fleet(200, 10.0, 30, true, 4);
  EXPECT_EQ(four.requests, one.requests);
  const auto shared = static_cast<double>(four.shared_retries);
  EXPECT_LE(static_cast<double>(four.retries), shared * 1.02) << four.retries << " vs " << shared;
  EXPECT_GE(static_cast<double>(four.retries), shared * 0.9) << four.retries << " vs " << shared;
  EXPECT_NEAR(static_cast<double>(four.retries), static_cast<double>(one.retries),
              0.03 * static_cast<double>(one.retries));
}

// What sharding costs: a shard spends only its own allowance. When only the processes of one
// shard of four make requests, they have their ratio and a quarter of the floor, where one
// shared budget would give them the whole floor.
TEST(FleetBudget, AShardSpendsOnlyItsOwnPartOfTheFloor) {
  auto o = options_with(0.0, 10);  // the floor alone: 10/s · 10 s = 100 retries for the fleet
  o.shards = 4;
  fleet_budget b(o);
  fleet_window_store shard0(10s, 6s);
  random_generator g(1);
  (void)b.try_admit(t0, g);
  ASSERT_TRUE(b.sync_due(t0));
  const fleet_deltas out = b.begin_sync(t0);
  b.end_sync(t0, shard0.sync(t0, "only", out, b.terms()));
  EXPECT_EQ(b.terms().reserve, 25'000'000);  // 25 retries in micro-retries
  EXPECT_EQ(grants_until_refused(b, t0, g), 25);
  // Unsharded, the same process alone holds the fleet's whole floor.
  fleet_budget whole(options_with(0.0, 10));
  fleet_window_store store(10s, 6s);
  (void)whole.try_admit(t0, g);
  const fleet_deltas d = whole.begin_sync(t0);
  whole.end_sync(t0, store.sync(t0, "only", d, whole.terms()));
  EXPECT_EQ(grants_until_refused(whole, t0, g), 100);
}

// `clients` processes of `rate` requests/s share one store; one request in `fail_every` fails
// once (its retry succeeds). Returns {failed requests, their retries granted} over `seconds`.
std::pair<std::int64_t, std::int64_t> run_rare_failures(int clients, double rate, int fail_every,
                                                        int seconds, bool ask) {
  fleet_window_store store(10s, 6s);
  std::vector<std::unique_ptr<fleet_budget>> budgets;
  std::vector<std::unique_ptr<store_asker>> askers;
  for (int c = 0; c < clients; ++c) {
    auto o = options_with(0.1, 10);
    o.ask_for_credit = ask;
    budgets.push_back(std::make_unique<fleet_budget>(o));
    askers.push_back(std::make_unique<store_asker>(
        store_asker{&store, "client-" + std::to_string(c), budgets.back().get()}));
    budgets.back()->set_asker(&store_asker::ask, askers.back().get());
  }
  random_generator g(11);
  std::int64_t requests = 0;
  std::int64_t failures = 0;
  std::int64_t retried = 0;
  std::vector<double> owed(static_cast<std::size_t>(clients), 0.0);
  const auto step = 50ms;
  for (time_point now = t0; now < t0 + std::chrono::seconds(seconds); now += step) {
    for (int c = 0; c < clients; ++c) {
      auto& b = *budgets[static_cast<std::size_t>(c)];
      auto& debt = owed[static_cast<std::size_t>(c)];
      debt += rate * 0.05 * (1.0 + 0.5 * static_cast<double>(c % 7) / 7.0) / (1.0 + 1.5 / 7.0);
      while (debt >= 1.0) {
        debt -= 1.0;
        (void)b.try_admit(now, g);
        if (++requests % fail_every != 0) continue;
        ++failures;
        if (retry(b, now, g)) ++retried;
      }
      if (b.sync_due(now)) {
        const fleet_deltas out = b.begin_sync(now);
        b.end_sync(now, store.sync(now, askers[static_cast<std::size_t>(c)]->name, out, b.terms()));
      }
    }
  }
  return {failures, retried};
}

// At 2,000 processes of 0.1 request/s a share of the allowance is about a sixth of a retry, so
// with shares alone most of a healthy day's rare failures land on a process without a whole
// retry and are not retried, though the fleet has ten times the allowance they need. Claims
// that follow need retry every one of them. Measured: 25 of 111 with shares, 111 with asks.
TEST(FleetBudget, ClaimsThatFollowNeedRetryTheRareFailuresOfAFleetOfTinyShares) {
  const auto [failures, shares] = run_rare_failures(2000, 0.1, 100, 60, false);
  const auto [failures_too, asked] = run_rare_failures(2000, 0.1, 100, 60, true);
  ASSERT_EQ(failures, failures_too);
  EXPECT_GT(failures, 100);
  EXPECT_LT(static_cast<double>(shares), 0.6 * static_cast<double>(failures))
      << shares << " of " << failures;
  EXPECT_EQ(asked, failures) << asked << " of " << failures;
}

// Every attempt failing: the asks never hand out more than one shared budget would (measured:
// 6,223 retries against 6,212, +0.18 %: the draws on
// the fractions of the processes' own deposits).
TEST(FleetBudget, ClaimsThatFollowNeedNeverSpendMoreThanOneSharedBudget) {
  const fleet_totals t = run_failing_fleet(2000, 1.0, 30, true, 1, true);
  EXPECT_GT(t.requests, 55'000);
  const auto shared = static_cast<double>(t.shared_retries);
  EXPECT_LE(static_cast<double>(t.retries), shared * 1.02) << t.retries << " vs " << shared;
  EXPECT_GE(static_cast<double>(t.retries), shared * 0.9) << t.retries << " vs " << shared;
}

TEST(FleetWindowStore, HandsOutWholeRetriesAndGrantsAsksAllOrNothing) {
  fleet_window_store store(10s, 6s);
  // 25 requests of 0.1 and a floor of 10.3 retries over the window: 12.8 retries.
  const stormguard::fleet_terms terms{25, 100'000, 10'300'000, true};
  const stormguard::fleet_answer a = store.sync(t0, "a", {25, 0}, terms);
  EXPECT_EQ(a.credit, 12'000'000);  // its share, 12.8, rounded down: the 0.8 stays in the pool
  EXPECT_EQ(store.sync(t0, "b", {0, 0}, terms).credit, 0);  // share 25/26 of 12.8, all claimed
  EXPECT_EQ(store.ask(t0, "b", 1'000'000, terms), 0);       // 0.8 unclaimed: all or nothing
  EXPECT_EQ(store.ask(t0, "b", 800'000, terms), 800'000);
  EXPECT_EQ(store.claimed(), 12'800'000);
  EXPECT_EQ(store.ask(t0, "nobody", 1, terms), 0);  // never synced: not live
  EXPECT_EQ(store.ask(t0 + 7s, "a", 1, terms), 0);  // its heartbeat expired
  EXPECT_EQ(store.claimed(), 0);
}

TEST(FleetBudget, AnAskInVainWaitsForTheNextSyncAndTheCreditDrawsAsBefore) {
  fleet_budget_options o = options_with(0.1, 0);
  o.ask_for_credit = true;
  fleet_budget b(o);
  int calls = 0;
  struct refusing {
    int* calls;
    static std::int64_t ask(void* c, time_point, std::int64_t wanted) noexcept {
      ++*static_cast<refusing*>(c)->calls;
      EXPECT_EQ(wanted, 500'000);  // the rest of one retry
      return -1;                   // the store could not be asked
    }
  } asker{&calls};
  b.set_asker(&refusing::ask, &asker);
  random_generator g(1);
  for (int i = 0; i < 5; ++i) (void)b.try_admit(t0, g);  // 0.5 retry of its own deposits
  scripted_random never({fraction(0.99), fraction(0.99)});
  EXPECT_FALSE(b.try_withdraw(t0, attempt_status::failure,
                              never));  // before the first sync: fallback, no ask
  EXPECT_EQ(calls, 0);
  (void)b.begin_sync(t0);
  b.end_sync(t0, stormguard::fleet_answer{fleet_view{5, 0, 1}, 0});  // no claim
  for (int i = 0; i < 5; ++i) (void)b.try_admit(t0, g);              // 0.5 retry since the sync
  EXPECT_EQ(b.credit_micro(), 500'000);
  EXPECT_FALSE(b.try_withdraw(t0, attempt_status::failure,
                              never));  // asked in vain, then drew on its 0.5 and lost it
  EXPECT_EQ(calls, 1);
  for (int i = 0; i < 5; ++i) (void)b.try_admit(t0, g);
  EXPECT_EQ(b.credit_micro(), 500'000);
  scripted_random always({fraction(0.0)});
  EXPECT_TRUE(
      b.try_withdraw(t0, attempt_status::failure, always));  // no second ask before the next sync
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(b.asks(), (std::pair<std::int64_t, std::int64_t>{1, 0}));
}

TEST(FleetBudget, RemovingTheAskerWaitsForTheAskInProgress) {
  fleet_budget_options o = options_with(0.1, 0);
  o.ask_for_credit = true;
  fleet_budget b(o);
  struct blocking {
    std::atomic<bool> entered{false};
    std::atomic<bool> release{false};
    std::atomic<bool> returned{false};
    static std::int64_t ask(void* c, time_point, std::int64_t wanted) noexcept {
      auto& self = *static_cast<blocking*>(c);
      self.entered = true;
      while (!self.release) std::this_thread::yield();
      self.returned = true;
      return wanted;
    }
  } asker;
  b.set_asker(&blocking::ask, &asker);
  random_generator g(1);
  (void)b.begin_sync(t0);
  b.end_sync(t0, stormguard::fleet_answer{fleet_view{0, 0, 1}, 0});
  std::thread retrying([&] {
    random_generator own(2);
    EXPECT_TRUE(retry(b, t0, own));  // granted by the ask
  });
  while (!asker.entered) std::this_thread::yield();
  std::thread removing([&] {
    b.set_asker(nullptr, nullptr);
    EXPECT_TRUE(asker.returned.load());  // never while the ask still used its context
  });
  asker.release = true;
  retrying.join();
  removing.join();
  EXPECT_EQ(b.asks(), (std::pair<std::int64_t, std::int64_t>{1, 1}));
}

TEST(FleetBudget, ShardsForSizesAFleetToItsStores) {
  // 2,000 busy processes at 100 ms ask 20,000 syncs/s; one store of 29,000 at most half busy
  // serves 14,500: two shards.
  EXPECT_EQ(fleet_budget::shards_for(2000, 100ms, 29'000.0, 0.5), 2);
  EXPECT_EQ(fleet_budget::shards_for(1000, 100ms, 29'000.0, 0.5), 1);
  EXPECT_EQ(fleet_budget::shards_for(0, 100ms, 29'000.0, 0.5), 1);
  EXPECT_EQ(fleet_budget::shards_for(100'000, 100ms, 29'000.0, 0.5), 69);
  // Beyond k_max_shards: said as it is (the callers refuse it), never clamped.
  EXPECT_EQ(fleet_budget::shards_for(10'000'000, 10ms, 1.0, 1.0), 1'000'000'000);
  const auto error = [](auto f) {
    try {
      (void)f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error([] { return fleet_budget::shards_for(-1, 100ms, 29'000.0); }).find("clients"),
            std::string::npos);
  EXPECT_NE(error([] { return fleet_budget::shards_for(1, 0ms, 29'000.0); }).find("sync_interval"),
            std::string::npos);
  EXPECT_NE(error([] { return fleet_budget::shards_for(1, 100ms, 0.0); }).find("store_capacity"),
            std::string::npos);
  EXPECT_NE(
      error([] { return fleet_budget::shards_for(1, 100ms, std::nan("")); }).find("store_capacity"),
      std::string::npos);
  EXPECT_NE(error([] { return fleet_budget::shards_for(1, 100ms, 29'000.0, 1.5); }).find("share"),
            std::string::npos);
}

}  // namespace
