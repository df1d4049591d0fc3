// SPDX-License-Identifier: Apache-2.0
// The retrier's success path performs no heap allocation, nor does a call whose only failure is
// its last attempt. Counted by replacing the global operator new in this test program only,
// counting only inside a scope (GoogleTest itself allocates freely outside it).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <system_error>
#include <utility>

#include "stormguard/random.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/testing/manual_clock.hpp"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};

// Counts the allocations made while alive.
class allocation_scope {
 public:
  allocation_scope() {
    g_allocations = 0;
    g_counting = true;
  }
  ~allocation_scope() { g_counting = false; }
  allocation_scope(const allocation_scope&) = delete;
  allocation_scope& operator=(const allocation_scope&) = delete;
  [[nodiscard]] long count() const { return g_allocations.load(); }
};

}  // namespace

// The replacements below pair malloc with free. GCC (seen with -fsanitize=thread) inlines them
// and then reports -Wmismatched-new-delete between "operator new" and free: a false positive for
// a replaced global allocator.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace std::chrono_literals;
using stormguard::attempt_context;
using stormguard::duration;
using stormguard::failure;
using stormguard::outcome;
using stormguard::random_generator;
using stormguard::retrier;
using stormguard::retry_policy;
using stormguard::testing::manual_clock;

TEST(AllocationCounter, SeesAnAllocationInItsScope) {
  allocation_scope scope;
  auto* p = new std::string(100, 'x');  // beyond the small-string buffer
  delete p;
  EXPECT_GE(scope.count(), 2);
}

TEST(RetrierAllocations, SuccessPathAllocatesNothingForEveryShape) {
  stormguard::real_clock clock;
  random_generator rng(1);
  retrier retry(retry_policy{}, clock, rng);
  allocation_scope scope;
  const auto expected_like =
      retry([](const attempt_context& ctx) -> outcome<int, int> { return ctx.attempt; });
  const auto error_code = retry([](const attempt_context&) { return std::error_code{}; });
  const auto pair = retry([](const attempt_context&) { return std::pair(7, std::error_code{}); });
  const auto throwing = retry([](const attempt_context& ctx) { return ctx.attempt * 2; });
  const long allocations = scope.count();
  EXPECT_EQ(allocations, 0);
  EXPECT_TRUE(expected_like && error_code && pair && throwing);
}

TEST(RetrierAllocations, HooksAndADeadlineAddNoAllocation) {
  stormguard::real_clock clock;
  random_generator rng(2);
  int retries = 0;
  int give_ups = 0;
  auto retry = retrier(retry_policy{}, clock, rng)
                   .on_retry([&](int, const auto&, duration) { ++retries; })
                   .on_give_up([&](const auto&) { ++give_ups; });
  std::stop_source stop;
  allocation_scope scope;
  const auto result = retry([](const attempt_context&) { return std::error_code{}; }, {},
                            {.stop = stop.get_token(), .deadline = clock.now() + 1s});
  const long allocations = scope.count();
  EXPECT_EQ(allocations, 0);
  EXPECT_TRUE(result.ok());
}

TEST(RetrierAllocations, ASingleFailedAttemptAllocatesNothing) {
  manual_clock clock;
  random_generator rng(3);
  retrier retry(retry_policy(stormguard::retry_options{.max_retries = 0}), clock, rng);
  allocation_scope scope;
  const auto result = retry([](const attempt_context&) -> outcome<int, int> { return failure{5}; });
  const long allocations = scope.count();
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(result.last_error, 5);
}

TEST(RetrierAllocations, ErrorsAreKeptInAVectorFromTheSecondFailureOn) {
  manual_clock clock;
  random_generator rng(4);
  retrier retry(retry_policy(stormguard::retry_options{.max_retries = 1}), clock, rng);
  const auto result =
      retry([](const attempt_context& ctx) -> outcome<int, int> { return failure{ctx.attempt}; });
  EXPECT_EQ(result.previous_errors.size(), 1U);
  EXPECT_EQ(result.last_error, 2);
}

}  // namespace
