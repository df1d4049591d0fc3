// SPDX-License-Identifier: Apache-2.0
// `stormguard simulate`'s fleet options for time-series scenarios: --clients N and --scale X
// (the fleet's size), the store model of fleet budgets (--store-rtt, --store-outage,
// --store-capacity, --fleet-sync), and the clients sweep (--sweep clients=LIST|LO:HI:STEP), which
// reruns the scenario at each fleet size and reports amplification, incident amplification, success
// and recovery per strategy and size (table, --csv, --plot, --json).
#ifndef STORMGUARD_CLI_SIMULATE_FLEET_HPP
#define STORMGUARD_CLI_SIMULATE_FLEET_HPP

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "app/models.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::cli {

struct fleet_flags {
  std::string clients;
  CLI::Option* clients_option = nullptr;
  std::string scale;
  CLI::Option* scale_option = nullptr;
  std::string store_rtt;
  CLI::Option* store_rtt_option = nullptr;
  std::string store_outage;
  CLI::Option* store_outage_option = nullptr;
  std::string store_capacity;
  CLI::Option* store_capacity_option = nullptr;
  std::string fleet_sync;
  CLI::Option* fleet_sync_option = nullptr;
  std::string fleet_shards;
  CLI::Option* fleet_shards_option = nullptr;
};

// Adds --clients, --scale, --store-rtt, --store-outage, --store-capacity, --fleet-sync and
// --fleet-shards to
// `simulate`.
void add_fleet_flags(CLI::App& sub, fleet_flags& flags);

// False (after printing why) when a fleet flag is given for a model other than the time series.
[[nodiscard]] bool fleet_flags_apply(const fleet_flags& flags, const sim::model_info& model);

// Applies the fleet flags to a loaded time-series scenario and its strategies; false after
// printing a usage error.
[[nodiscard]] bool apply_fleet_flags(const fleet_flags& flags, sim::scenario& scenario,
                                     std::vector<sim::strategy>& strategies);

// Whether a --sweep value asks for a clients sweep of a time-series scenario.
[[nodiscard]] bool is_clients_sweep(std::string_view sweep);

// Where a clients sweep writes.
struct clients_sweep_output {
  bool json = false;
  std::filesystem::path csv_dir;  // empty: no CSV
  std::string plot;               // empty: no plot
};

// Runs the clients sweep `spec` ("clients=20,200" or "clients=LO:HI:STEP") of `scenario` for
// `strategies` and prints it; the exit status.
[[nodiscard]] int run_clients_sweep(const std::string& spec, const sim::scenario& scenario,
                                    const std::vector<sim::strategy>& strategies, unsigned threads,
                                    const clients_sweep_output& output);

}  // namespace stormguard::cli

#endif  // STORMGUARD_CLI_SIMULATE_FLEET_HPP
