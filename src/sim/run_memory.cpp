// SPDX-License-Identifier: Apache-2.0
// The memory of one run (estimated_run_bytes), in a file of its own: the scenario's validation
// (scenario.cpp: the bound on requests_per_second x duration) and the simulator's planning of
// parallel runs (simulator.cpp) both use it, and neither file depends on the other for it.
#include <cstdint>

#include "stormguard/sim/simulator.hpp"
#include "stormguard_engine/driver.hpp"

namespace stormguard::sim {

double estimated_run_bytes(const scenario& s) noexcept {
  // Per logical request the engine keeps one request record and one latency (int64 ns);
  // the latencies' reserve is 5 % above the expected count, plus 16.
  return (engine::expected_requests(s) * 1.05 + 16) *
         static_cast<double>(sizeof(engine::request) + sizeof(std::int64_t));
}

}  // namespace stormguard::sim
