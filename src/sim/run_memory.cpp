// SPDX-License-Identifier: Apache-2.0
// The memory of one run (estimated_run_bytes), in a file of its own: the scenario's validation
// (scenario.cpp: the bound on requests_per_second x duration) and the simulator's planning of
// parallel runs (simulator.cpp) both use it, and neither file depends on the other for it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "stormguard/fleet_budget.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/strategy.hpp"
#include "stormguard_engine/driver.hpp"
#include "stormguard_engine/fleet.hpp"
#include "stormguard_engine/fleet_sync.hpp"

namespace stormguard::sim {

namespace {

// The largest client of any budget kind (its generator and budget), and a fleet budget's state
// in the store model: the memory per client of a run, at most.
template <class Variant>
struct largest_client;
template <class... Options>
struct largest_client<std::variant<Options...>> {
  static constexpr std::size_t value =
      std::max({sizeof(engine::client<typename Options::budget_type>)...});
};
constexpr std::size_t k_client_bytes =
    largest_client<budget_config>::value + engine::fleet_sync<fleet_budget>::k_client_bytes;

}  // namespace

double estimated_run_bytes(const scenario& s) noexcept {
  // Per logical request the engine keeps one request record and one latency (int64 ns);
  // the latencies' reserve is 5 % above the expected count, plus 16. Per client, its budget and
  // generator and the store model's state (which a million clients make worth counting).
  return (engine::expected_requests(s) * 1.05 + 16) *
             static_cast<double>(sizeof(engine::request) + sizeof(std::int64_t)) +
         static_cast<double>(std::max(1, s.clients)) * static_cast<double>(k_client_bytes);
}

}  // namespace stormguard::sim
