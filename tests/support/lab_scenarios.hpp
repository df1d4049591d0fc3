// SPDX-License-Identifier: Apache-2.0
// The small scenario the tests of `serve` (stormguard::lab::server) run on raw sockets: one
// client at 10 requests per second for 10 s, a 500 ms timeout, and the server's workers, queue
// and service time as the test needs them. Header-only.
#ifndef STORMGUARD_TESTS_SUPPORT_LAB_SCENARIOS_HPP
#define STORMGUARD_TESTS_SUPPORT_LAB_SCENARIOS_HPP

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "stormguard/sim/scenario.hpp"

namespace stormguard::test_support {

/// A 10 s scenario named "tiny" (seed 7) with `workers` workers, a queue of `queue_limit` and
/// `service` per request.
inline sim::scenario tiny_scenario(
    int workers = 1, std::int64_t queue_limit = 10,
    std::chrono::milliseconds service = std::chrono::milliseconds(20)) {
  sim::scenario s;
  s.name = "tiny";
  s.seed = 7;
  s.length = std::chrono::seconds(10);
  s.requests_per_second = 10;
  s.clients = 1;
  s.timeout = std::chrono::milliseconds(500);
  s.workers = workers;
  s.queue_limit = queue_limit;
  s.service_time = service;
  return s;
}

/// The operator token the tests give a server for GET /ledger (payments_options::ledger_token),
/// and the header field line that sends it.
inline constexpr std::string_view k_ledger_token = "test-operator-token-0123456789";
inline std::string ledger_authorization() {
  return "Authorization: Bearer " + std::string(k_ledger_token) + "\r\n";
}

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_LAB_SCENARIOS_HPP
