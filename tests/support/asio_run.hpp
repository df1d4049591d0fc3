// SPDX-License-Identifier: Apache-2.0
// Test-only: runs an asio::io_context until a condition holds, for the asynchronous HTTP tests.
//
//   stormguard::test_support::run_until(io, [&] { return got.has_value(); });
//
// Header-only.
#ifndef STORMGUARD_TESTS_SUPPORT_ASIO_RUN_HPP
#define STORMGUARD_TESTS_SUPPORT_ASIO_RUN_HPP

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <chrono>

namespace stormguard::test_support {

/// Runs `io` until `done()` or `limit` has passed (then the test fails), restarting it when it
/// ran out of work.
template <class F>
void run_until(asio::io_context& io, F&& done,
               std::chrono::steady_clock::duration limit = std::chrono::seconds(10)) {
  using namespace std::chrono_literals;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), end) << "the io_context did not get there in time";
    if (io.stopped()) io.restart();
    (void)io.run_one_for(20ms);
  }
}

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_ASIO_RUN_HPP
