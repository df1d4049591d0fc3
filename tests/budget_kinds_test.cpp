// SPDX-License-Identifier: Apache-2.0
#include "stormguard/budget_kinds.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "stormguard/budget_protocol.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/testing/manual_clock.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using stormguard::any_budget;
using stormguard::attempt_report;
using stormguard::attempt_status;
using stormguard::budget_options;
using stormguard::random_generator;
using stormguard::time_point;

const time_point t0{};

// ---------------------------------------------------------------------------------------------
// The list: names, classes, order.
// ---------------------------------------------------------------------------------------------

TEST(BudgetKinds, TheListNamesEachKindAndItsClassInFileOrder) {
  std::vector<std::string> names;
  stormguard::for_each_budget_kind([&]<class O>(std::type_identity<O>) {
    names.emplace_back(O::kind);
    // The class names its options back, and the options name the class.
    static_assert(std::is_same_v<typename O::budget_type::options_type, O>);
    EXPECT_EQ(stormguard::budget_kind(budget_options(O{})), O::kind);
    EXPECT_EQ(stormguard::budget_kind_of<typename O::budget_type>(), O::kind);
  });
  EXPECT_EQ(names, (std::vector<std::string>{"none", "ratio", "token_bucket", "quota", "adaptive",
                                             "concurrency", "fleet", "breaker"}));
  EXPECT_EQ(stormguard::budget_kind_names(),
            "\"none\", \"ratio\", \"token_bucket\", \"quota\", \"adaptive\", "
            "\"concurrency\", \"fleet\" or \"breaker\"");
}

TEST(BudgetKinds, AdaptiveIsCalledAsInPolicyFiles) {
  EXPECT_EQ(stormguard::budget_kind_of<stormguard::adaptive_throttle>(), "adaptive");
  struct own_budget {};
  EXPECT_EQ(stormguard::budget_kind_of<own_budget>(), "custom");
}

TEST(BudgetKinds, DefaultOptionsByName) {
  EXPECT_EQ(stormguard::default_budget_options("quota"),
            budget_options(stormguard::retry_quota_options{}));
  EXPECT_EQ(stormguard::default_budget_options("none"), budget_options(stormguard::no_budget{}));
  EXPECT_FALSE(stormguard::default_budget_options("adaptive_throttle").has_value());
  EXPECT_FALSE(stormguard::default_budget_options("").has_value());
}

TEST(BudgetKinds, FieldsListEverySettingWithItsRange) {
  std::vector<std::string> names;
  const stormguard::retry_quota_options quota{.max_tokens = 40};
  stormguard::retry_quota_options::fields(
      quota, [&](std::string_view name, const auto& value, const auto& lo, const auto& hi) {
        names.emplace_back(name);
        EXPECT_LE(lo, value) << name;
        EXPECT_LE(value, hi) << name;
        if (name == "retry_cost") {
          EXPECT_EQ(hi, 40) << "a cost is at most max_tokens";
        }
      });
  EXPECT_EQ(names, (std::vector<std::string>{"max_tokens", "retry_cost", "timeout_cost",
                                             "no_retry_increment"}));
}

// ---------------------------------------------------------------------------------------------
// visit_budget: the concrete class.
// ---------------------------------------------------------------------------------------------

TEST(VisitBudget, BuildsTheClassTheOptionsName) {
  stormguard::for_each_budget_kind([]<class O>(std::type_identity<O>) {
    const bool same = stormguard::visit_budget(O{}, [](auto& b) {
      return std::is_same_v<std::decay_t<decltype(b)>, typename O::budget_type>;
    });
    EXPECT_TRUE(same) << O::kind;
  });
}

TEST(VisitBudget, InvalidOptionsThrowAsTheClass) {
  const auto message = stormguard::test_util::invalid_argument_message([] {
    stormguard::visit_budget(stormguard::ratio_budget_options{.ratio = -1}, [](auto&) {});
  });
  EXPECT_NE(message.find("ratio"), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------
// any_budget: every call forwarded to the class held.
// ---------------------------------------------------------------------------------------------

TEST(AnyBudget, QuotaGrantsWhatItsTokensPayFor) {
  any_budget budget(stormguard::retry_quota_options{.max_tokens = 10});
  random_generator g(1);
  EXPECT_EQ(budget.kind(), "quota");
  EXPECT_TRUE(budget.try_admit(t0, g));
  EXPECT_TRUE(budget.try_withdraw(t0, attempt_status::failure, g));  // 10 -> 5
  EXPECT_TRUE(budget.try_withdraw(t0, attempt_status::failure, g));  // 5 -> 0
  EXPECT_FALSE(budget.try_withdraw(t0, attempt_status::failure, g));
  EXPECT_EQ(budget.level(t0), 0.0);
  budget.record(t0, attempt_report{attempt_status::success, 2, attempt_status::failure});
  EXPECT_EQ(budget.level(t0), 5.0);  // a success on a retry pays its cost back
}

TEST(AnyBudget, ConcurrencyHearsTheEndOfRetriesAndRequests) {
  any_budget budget(
      stormguard::concurrency_budget_options{.budget_percent = 0, .min_retry_concurrency = 1});
  random_generator g(1);
  ASSERT_TRUE(budget.try_admit(t0, g));
  EXPECT_TRUE(budget.try_withdraw(t0, attempt_status::failure, g));
  EXPECT_FALSE(budget.try_withdraw(t0, attempt_status::failure, g));  // one in flight
  budget.retry_ended(t0);
  EXPECT_TRUE(budget.try_withdraw(t0, attempt_status::failure, g));
  budget.retry_ended(t0);
  budget.request_ended(t0);
  budget.visit([](auto& b) {
    if constexpr (std::is_same_v<std::decay_t<decltype(b)>, stormguard::concurrency_budget>) {
      EXPECT_EQ(b.active(), 0);
      EXPECT_EQ(b.retries_in_flight(), 0);
    } else {
      ADD_FAILURE() << "not a concurrency_budget";
    }
  });
}

TEST(AnyBudget, NoneGrantsEverythingAndHasNoLevel) {
  any_budget budget(stormguard::no_budget{});
  random_generator g(1);
  EXPECT_EQ(budget.kind(), "none");
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(budget.try_withdraw(t0, attempt_status::failure, g));
  EXPECT_LT(budget.level(t0), 0.0);
}

TEST(AnyBudget, InvalidOptionsThrowAsTheClass) {
  EXPECT_THROW(any_budget(stormguard::token_bucket_throttle_options{.max_tokens = 0.0001}),
               std::invalid_argument);
  EXPECT_THROW((void)stormguard::make_budget(stormguard::adaptive_throttle_options{.k = 0.5}),
               std::invalid_argument);
}

TEST(AnyBudget, TheRetrierStopsWhereTheKindSays) {
  // A token bucket of 4 tokens grants ceil(4 / 2) - 1 = 1 retry when every attempt fails.
  stormguard::testing::manual_clock clock;
  random_generator rng(3);
  auto budget = stormguard::make_budget(stormguard::token_bucket_throttle_options{.max_tokens = 4});
  stormguard::retry_options options;
  options.max_retries = 10;
  stormguard::retrier retry(stormguard::retry_policy(options), clock, rng, *budget);
  const auto result =
      retry([](const stormguard::attempt_context&) -> stormguard::outcome<int, int> {
        return stormguard::failure{1};
      });
  EXPECT_EQ(result.reason, stormguard::end_reason::budget_exhausted);
  EXPECT_EQ(result.attempts, 2);
}

}  // namespace
