// SPDX-License-Identifier: Apache-2.0
/// \file
/// What the storm simulator simulates — the load, the server and the
/// incident — and the strict parser of scenario files.
///
/// A scenario is plain data. `parse_scenario` reads one from JSON text, `load_scenario` from a
/// file, and `friday_night()` returns the built-in default (the Friday-night incident of
/// docs/design.md, "The essay this project started from"; identical to
/// scenarios/friday-night.json). Durations in scenario files are JSON strings with a unit
/// ("20ms", "1.5s"); rates are plain numbers per second. docs/simulator.md lists every field.
///
/// \code{.cpp}
///  auto parsed = stormguard::sim::load_scenario("scenarios/friday-night.json");
///  if (!parsed) { std::cerr << parsed.error().message << '\n'; return 1; }
///  stormguard::sim::scenario s = *parsed;
///  s.seed = 7;                                        // plain data: edit freely, then validate()
/// \endcode
#ifndef STORMGUARD_SIM_SCENARIO_HPP
#define STORMGUARD_SIM_SCENARIO_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stormguard/budget.hpp"
#include "stormguard/client_profile.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/duration_text.hpp"  // durations in the file format
#include "stormguard/export.hpp"
#include "stormguard/input_error.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/retry.hpp"
#include "stormguard/sim/defence_kinds.hpp"
#include "stormguard/sim/strategy.hpp"

namespace stormguard::sim {

/// How the server's service time of one attempt is drawn around the phase's service time.
enum class service_distribution {
  fixed,        ///< exactly the phase's service time (the default)
  exponential,  ///< exponential with the phase's service time as its mean (an M/M/c server)
};

/// The file format's names of service_distribution, in the enum's order.
inline constexpr std::array<std::string_view, 2> k_service_distribution_names{"fixed",
                                                                              "exponential"};

/// "fixed" or "exponential"; "unknown" for a value outside the enum.
[[nodiscard]] constexpr std::string_view to_string(service_distribution d) noexcept {
  const auto i = static_cast<std::size_t>(d);
  return i < k_service_distribution_names.size() ? k_service_distribution_names[i] : "unknown";
}

/// A period of trouble: for attempts in [start, end), the server may be slow (`service_time`),
/// a fraction of attempts may fail at once with a 503 (`error_rate`), and a fraction may be lost
/// by the network (`loss_rate`). Any combination; the defaults change nothing.
struct incident {
  duration start{};  ///< [incident.start] from the start of the simulation; in [0, length)
  duration end{};    ///< [incident.end] > start; may exceed the length (the incident never ends)
  /// [incident.service_time] optional: the service time of every attempt whose service *starts*
  /// in [start, end), instead of the server's (overload included); in (0, 1 h]. nullopt (the
  /// field absent): the server's service time is unchanged.
  std::optional<duration> service_time;
  /// [incident.error_rate] optional, default 0: the fraction of the attempts *sent* in
  /// [start, end) that fail at once with a 503 (a retryable failure) without reaching the server,
  /// which is otherwise healthy. In [0, 1]; each attempt draws independently.
  double error_rate = 0.0;
  /// [incident.loss_rate] optional, default 0: the fraction of the attempts sent in [start, end)
  /// that the network loses: they never reach the server and are never answered, so they end at
  /// their timeout. In [0, 1], and error_rate + loss_rate <= 1 (one draw decides: lost with
  /// probability loss_rate, else a 503 with probability error_rate).
  double loss_rate = 0.0;

  friend bool operator==(const incident&, const incident&) = default;
};

/// A server whose service time depends on its load (a database that answers in 50 ms below 300
/// queries per second and ten times slower above, as in Bronson et al., "Metastable Failures in
/// Distributed Systems", HotOS 2021). The load is the number of attempts that reached the server
/// in the last second (a sliding window kept as 10 slices of 100 ms, the current one included),
/// rejected ones included.
struct overload {
  /// [server.overload.above_rate] attempts per second above which the server is slow; > 0.
  double above_rate = 0.0;
  /// [server.overload.service_time] the service time of an attempt whose service starts while
  /// the load is above `above_rate`; in (0, 1 h].
  duration service_time{};

  friend bool operator==(const overload&, const overload&) = default;
};

/// Stalls of single attempts (the "tail at scale": a garbage collection, a compaction, a noisy
/// neighbour): independently for each attempt whose service starts, with probability
/// `probability` its service takes `length` more, whatever the phase. A stall does not repeat on
/// the next try (a new draw), which is what makes a hedge win.
struct stall {
  /// [server.stall.probability] the fraction of attempts that stall; in (0, 1].
  double probability = 0.0;
  /// [server.stall.duration] the service time a stall adds; in (0, 1 h].
  duration length{};

  friend bool operator==(const stall&, const stall&) = default;
};

/// One simulation setup. Times are virtual: the simulation starts at time_point{} (the epoch).
/// Valid ranges are those checked by validate(); the JSON field names are given in brackets.
struct scenario {
  std::string name;         ///< [name] a short identifier, printed in reports; non-empty
  std::string description;  ///< [description] free text; optional in files (default empty)
  std::uint64_t seed = 0;   ///< [seed] seeds every generator of the run; any 64-bit value
  duration length{};        ///< [duration] simulated time; in (0, 1 h]
  /// [requests_per_second] logical requests per second from all clients together, arriving as a
  /// Poisson process; > 0 and finite, and length · rate <= 10,000,000 requests. A run keeps 32
  /// bytes per logical request (about 340 MB at the limit, 1 h at 2,777 req/s), so the limit
  /// bounds the memory of a run; check_work (simulator.hpp) bounds its work.
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
  /// [server.overload] optional (absent or null: the service time does not depend on the load).
  std::optional<sim::overload> overload;
  /// [server.stall] optional (absent or null: no stalls): see sim::stall. Drawn from its own
  /// generator (seeded from the scenario's seed), so it changes no other draw.
  std::optional<sim::stall> stall;
  std::optional<sim::incident> incident;  ///< [incident] an object, or null for none
  /// [max_retries] optional: replaces the max_retries of every strategy that retries (max_retries
  /// > 0), for a scenario whose application retries a fixed number of times (metastable: once).
  /// In [1, 1000]. nullopt (absent): each strategy's own.
  std::optional<int> max_retries;
  /// [strategies] optional: the strategies this scenario runs instead of the built-in set, in
  /// order. In the file, an array of 1 to 100 entries, each a built-in strategy's name ("full")
  /// or a policy object of the policy file format (docs/policy.md), run as from_policy(p) does;
  /// names unique. Empty (absent): the built-ins.
  std::vector<strategy> strategies;
  /// [server.defences] optional: the server-side defences (server_defences,
  /// stormguard/sim/defence_kinds.hpp); default none.
  server_defences defences;
  /// [client_profile] optional, default "stormguard": the kind of client the fleet runs
  /// (stormguard/client_profile.hpp): a built-in's name ("go-retryablehttp", "curl", ...) or an
  /// object of its fields. It says what the clients send (attempt label, deadline) and honour
  /// (pushback, Retry-After), so what the server's defences can see and what they achieve. A
  /// strategy whose policy names its own client_profile plays that one instead.
  client_profile client{};
  /// [repeating_clients] optional, in [0, 1], default 0: the fraction of the clients (the first
  /// round(fraction × clients) of them) that send every logical request to one target of their
  /// own, the same GET again and again as a page that polls does, instead of a target per logical
  /// request. To a server that fingerprints requests (admission::retry_signal_recognizer) such a
  /// client's next request after a failed answer looks like a retry: the false alarms of the weak
  /// signal. The simulator and `lab` play it; they send at the scenario's rate per client.
  double repeating_clients = 0.0;

  friend bool operator==(const scenario&, const scenario&) = default;
};

/// The client profile that plays `strat` in `s`: the strategy's own (its policy's
/// client_profile), else the scenario's.
[[nodiscard]] inline const client_profile& profile_of(const scenario& s,
                                                      const config::policy& strat) noexcept {
  return strat.client ? *strat.client : s.client;
}

/// Why a scenario was rejected (stormguard/input_error.hpp): `field` is the JSON path of the
/// offending field ("server.workers", "incident.end"), empty for a document-level problem (bad
/// JSON); `message` is a complete sentence that names the field and quotes the value, e.g.
/// `server.workers: must be an integer in [1, 1000000], got -3`.
using scenario_error = input_error;

/// A parsed scenario or the reason it was rejected.
using scenario_result = stormguard::outcome<scenario, scenario_error>;

/// Parses a scenario from JSON text, strictly: every required field present with the right type
/// and range, no unknown field, durations as strings with a unit (ns, us, ms, s, min; decimals
/// allowed when the result is a whole number of nanoseconds: "1.5s" yes, "0.5ns" no). Bad JSON is
/// reported with its line and column; so are arrays and objects nested more than 64 levels deep
/// (checked before parsing). Error messages quote scalar values as written (shortened to one
/// line) and describe arrays and objects by their type. Never throws for bad input
/// (std::bad_alloc aside).
[[nodiscard]] STORMGUARD_EXPORT scenario_result parse_scenario(std::string_view json_text);

/// Reads and parses the file at `path`; the error message starts with the path. An unreadable
/// file (with the system's reason) and a file larger than 1 MiB (checked without reading more
/// than 1 MiB + 1 byte, so /dev/zero is safe) are errors (field empty), not exceptions.
[[nodiscard]] STORMGUARD_EXPORT scenario_result load_scenario(const std::filesystem::path& path);

/// Checks the ranges documented on `scenario`. Returns the first violation, or nullopt.
[[nodiscard]] STORMGUARD_EXPORT std::optional<scenario_error> validate(const scenario& s);

/// `s` scaled down by `factor` in (0, 1], for running a scenario on real sockets at a load that
/// one machine holds (`stormguard serve --scale`, `lab --scale`): requests_per_second,
/// server.workers, server.queue_limit and server.overload.above_rate are multiplied by `factor`,
/// and clients too, and so are the per-server parameters of server.defences (each kind's
/// `scale`: the retry budget's min_retries_per_second, rounded; a non-zero concurrency-limit
/// initial_limit, at least 1);
/// clients and workers are rounded to the nearest integer and kept >= 1, queue_limit rounded to the
/// nearest integer (>= 0). Everything else stays: durations, timeout, service times, the incident's
/// rates, max_retries and the strategies (each client's rate, policy and budget are those of the
/// full-size scenario, so a budget's floor keeps its share of each client's traffic). factor 1
/// returns `s` unchanged. An error (field "scale") for a factor that is not a finite number in (0,
/// 1], or when the result fails validate() (which it does only if `s` does). Never throws
/// (std::bad_alloc aside). Thread-safe (a pure function).
[[nodiscard]] STORMGUARD_EXPORT scenario_result scale_scenario(const scenario& s, double factor);

/// The built-in scenario called `name`: "friday-night", "no-incident", "metastable",
/// "metastable-slowdown", "outage-80", "outage-80-fleet", "tail-at-scale" or
/// "friday-night-fleet" (friday-night from 2,000 clients of 1 req/s), each equal to
/// scenarios/NAME.json; nullopt otherwise. The functions below name five of them.
[[nodiscard]] STORMGUARD_EXPORT std::optional<scenario> builtin_scenario(std::string_view name);

/// The names builtin_scenario knows, joined by ", ".
[[nodiscard]] STORMGUARD_EXPORT std::string builtin_scenario_names();

/// The Friday-night incident (docs/design.md, "The essay this project started from"), built into
/// the library (equal to the parse of scenarios/friday-night.json): 2,000 req/s from 20 clients,
/// 100 workers × 20 ms (5,000 req/s, 2.5× demand), queue limit 20,000, per-attempt timeout 1 s,
/// service time 1.5 s from t = 10 s to t = 20 s, 60 s simulated, seed 42.
[[nodiscard]] inline scenario friday_night() { return *builtin_scenario("friday-night"); }

/// The scenario of the file scenarios/metastable.json (equal to it): the example of Bronson et
/// al., "Metastable Failures in Distributed Systems" (HotOS 2021). One application sends 280
/// queries/s to a database of 100 workers that answers in 50 ms (2,000/s) while it receives at
/// most 300 attempts/s, and in 500 ms (200/s) above; timeout 1 s, one retry (max_retries 1);
/// from t = 10 s to 20 s the network loses every attempt; 60 s simulated, seed 42.
[[nodiscard]] inline scenario metastable() { return *builtin_scenario("metastable"); }

/// The scenario of scenarios/metastable-slowdown.json: metastable() with a stronger trigger,
/// a 10-s slowdown in which the database takes 1 s per query (as long as the timeout, so every
/// attempt in it times out and is retried) instead of the network outage. It reaches the stuck
/// state at every load whose doubled load exceeds the overload threshold, so a load sweep finds
/// the boundary of the stable region (about 150 queries/s in the paper).
[[nodiscard]] inline scenario metastable_slowdown() {
  return *builtin_scenario("metastable-slowdown");
}

/// The scenario of scenarios/outage-80.json: 2,000 logical req/s from 20 clients against a
/// healthy server (100 workers × 20 ms); from t = 30 s to 60 s, 80 % of attempts fail at once
/// with a 503; 3 retries; 90 s simulated, seed 42 (the Google SRE book, chapter 21; docs/design.md,
/// "The essay this project started from").
[[nodiscard]] inline scenario outage_80() { return *builtin_scenario("outage-80"); }

/// The scenario of scenarios/outage-80-fleet.json: outage_80() with the same load from 1,000
/// clients (2 req/s each), to show that a ratio budget's per-client floor multiplies with the
/// fleet.
[[nodiscard]] inline scenario outage_80_fleet() { return *builtin_scenario("outage-80-fleet"); }

/// The scenario as JSON text in the file format (fields in documented order, durations
/// formatted as "<integer><unit>"); parse_scenario(to_json(s)) == s for every valid scenario.
[[nodiscard]] STORMGUARD_EXPORT std::string to_json(const scenario& s);

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_SCENARIO_HPP
