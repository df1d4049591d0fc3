// stormguard/sim/scenario.hpp: what the storm simulator simulates — the load, the server and the
// incident — and the strict parser of scenario files.
//
// A scenario is plain data. `parse_scenario` reads one from JSON text, `load_scenario` from a file,
// and `friday_night()` returns the built-in default (the seed's Friday-night incident, identical
// to scenarios/friday-night.json). Durations in scenario files are JSON strings with a unit
// ("20ms", "1.5s"); rates are plain numbers per second. docs/simulator.md lists every field.
//
//   auto parsed = stormguard::sim::load_scenario("scenarios/friday-night.json");
//   if (!parsed) { std::cerr << parsed.error().message << '\n'; return 1; }
//   stormguard::sim::scenario s = *parsed;
//   s.seed = 7;                                        // plain data: edit freely, then validate()
#ifndef STORMGUARD_SIM_SCENARIO_HPP
#define STORMGUARD_SIM_SCENARIO_HPP

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "stormguard/clock.hpp"
#include "stormguard/retry.hpp"

namespace stormguard::sim {

/// How the server's service time of one attempt is drawn around the phase's service time.
enum class service_distribution {
  fixed,        ///< exactly the phase's service time (the default)
  exponential,  ///< exponential with the phase's service time as its mean (an M/M/c server)
};

/// "fixed" or "exponential"; "unknown" for a value outside the enum.
[[nodiscard]] std::string_view to_string(service_distribution d) noexcept;

/// A period during which the server is slow: every attempt whose service *starts* in
/// [start, end) takes `service_time` (the incident phase) instead of the normal service time.
struct incident {
  duration start{};         ///< from the start of the simulation; >= 0 and < the scenario length
  duration end{};           ///< > start; may exceed the scenario length (the incident never ends)
  duration service_time{};  ///< the service time during the incident; in (0, 1 h]

  friend bool operator==(const incident&, const incident&) = default;
};

/// One simulation setup. Times are virtual: the simulation starts at time_point{} (the epoch).
/// Valid ranges are those checked by validate(); the JSON field names are given in brackets.
struct scenario {
  std::string name;         ///< [name] a short identifier, printed in reports; non-empty
  std::string description;  ///< [description] free text; optional in files (default empty)
  std::uint64_t seed = 0;   ///< [seed] seeds every generator of the run; any 64-bit value
  duration length{};        ///< [duration] simulated time; in (0, 1 h]
  /// [requests_per_second] logical requests per second from all clients together, arriving as a
  /// Poisson process; > 0 and finite, and length · rate <= 10,000,000 requests. The simulator
  /// keeps 30-40 bytes per logical request (measured peak: 320-400 MB at the limit, 1 h at 2,777
  /// req/s), so the limit bounds the memory of a run.
  double requests_per_second = 0.0;
  int clients = 0;     ///< [clients] client instances, each with its own budget; in [1, 100,000]
  duration timeout{};  ///< [timeout] per-attempt timeout; in (0, 1 h]
  int workers = 0;     ///< [server.workers] attempts served concurrently; in [1, 1,000,000]
  /// [server.queue_limit] attempts that may wait for a worker; one more is rejected at once with
  /// a 503. In [0, 100,000,000].
  std::int64_t queue_limit = 0;
  /// [server.service_time] service time outside incidents; in (0, 1 h]
  duration service_time{};
  /// [server.service_distribution] "fixed" or "exponential"; optional (default "fixed").
  service_distribution distribution = service_distribution::fixed;
  std::optional<sim::incident> incident;  ///< [incident] an object, or null for none

  friend bool operator==(const scenario&, const scenario&) = default;
};

/// Why a scenario was rejected. `field` is the JSON path of the offending field ("server.workers",
/// "incident.end"), empty for a document-level problem (bad JSON); `message` is a complete
/// sentence that names the field and quotes the value, e.g.
/// `server.workers: must be an integer in [1, 1000000], got -3`.
struct scenario_error {
  std::string field;
  std::string message;

  friend bool operator==(const scenario_error&, const scenario_error&) = default;
};

/// A parsed scenario or the reason it was rejected.
using scenario_result = stormguard::outcome<scenario, scenario_error>;

/// Parses a scenario from JSON text, strictly: every required field present with the right type
/// and range, no unknown field, durations as strings with a unit (ns, us, ms, s, min; decimals
/// allowed when the result is a whole number of nanoseconds: "1.5s" yes, "0.5ns" no). Bad JSON is
/// reported with its line and column; so are arrays and objects nested more than 64 levels deep
/// (checked before parsing). Error messages quote scalar values as written (shortened to one
/// line) and describe arrays and objects by their type. Never throws for bad input
/// (std::bad_alloc aside).
[[nodiscard]] scenario_result parse_scenario(std::string_view json_text);

/// Reads and parses the file at `path`; the error message starts with the path. An unreadable
/// file (with the system's reason) and a file larger than 1 MiB (checked without reading more
/// than 1 MiB + 1 byte, so /dev/zero is safe) are errors (field empty), not exceptions.
[[nodiscard]] scenario_result load_scenario(const std::filesystem::path& path);

/// Checks the ranges documented on `scenario`. Returns the first violation, or nullopt.
[[nodiscard]] std::optional<scenario_error> validate(const scenario& s);

/// The seed's Friday-night incident, built into the library (equal to the parse of
/// scenarios/friday-night.json): 2,000 req/s from 20 clients, 100 workers × 20 ms (5,000 req/s,
/// 2.5× demand), queue limit 20,000, per-attempt timeout 1 s, service time 1.5 s from t = 10 s to
/// t = 20 s, 60 s simulated, seed 42.
[[nodiscard]] scenario friday_night();

/// The scenario as JSON text in the file format (fields in documented order, durations
/// formatted as "<integer><unit>"); parse_scenario(to_json(s)) == s for every valid scenario.
[[nodiscard]] std::string to_json(const scenario& s);

/// Parses one duration in the file format ("20ms", "1.5s", "2min"): stormguard::parse_duration
/// (stormguard/duration_text.hpp), the grammar the command line uses too. Returns nullopt for
/// anything else, including a negative value, a missing unit or a fraction of a nanosecond.
[[nodiscard]] std::optional<duration> parse_duration(std::string_view text) noexcept;

/// Formats a duration in the file format (stormguard::format_duration), exactly, in the largest of
/// s, ms, us, ns that keeps the number >= 1, with only the decimals needed: "1.5s", "60s", "20ms",
/// "0s". A negative duration gets a leading '-' (which parse_duration rejects).
/// parse_duration(format_duration(d)) == d for every d >= 0.
[[nodiscard]] std::string format_duration(duration d);

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_SCENARIO_HPP
