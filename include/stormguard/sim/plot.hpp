// stormguard/sim/plot.hpp: pictures of the simulator's reports, drawn by gnuplot
// (http://www.gnuplot.info/; the Debian package gnuplot-nox, installed by scripts/bootstrap, has
// the pngcairo and svg terminals used here).
//
// Each gnuplot_script overload is a pure function of a report: it returns a complete gnuplot
// program with the data inline (datablocks), which run_gnuplot executes. Keeping the two apart
// makes the scripts testable without gnuplot and reproducible by hand (`gnuplot script.gp`).
//
//   auto report = stormguard::sim::simulate(stormguard::sim::friday_night(),
//                                           stormguard::sim::builtin_strategies());
//   auto format = stormguard::sim::plot_format_for("storm.png");          // plot_format::png
//   if (auto error = stormguard::sim::run_gnuplot(
//           stormguard::sim::gnuplot_script(report, *format, "storm.png"))) {
//     std::cerr << *error << '\n';
//   }
#ifndef STORMGUARD_SIM_PLOT_HPP
#define STORMGUARD_SIM_PLOT_HPP

#include <filesystem>
#include <optional>
#include <string>

#include "stormguard/sim/layers.hpp"
#include "stormguard/sim/occ.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard/sim/sweep.hpp"

namespace stormguard::sim {

/// The image formats: PNG (gnuplot's pngcairo terminal) and SVG (its svg terminal).
enum class plot_format { png, svg };

/// The format for a file name by its extension, ".png" or ".svg" (case-insensitive); nullopt for
/// anything else.
[[nodiscard]] std::optional<plot_format> plot_format_for(const std::filesystem::path& file);

/// A time-series scenario: two panels over simulated time, attempts per second (top) and goodput
/// per second (bottom), one line per strategy, in 100-ms bins (strategy_result::fine_series,
/// scaled to per second) so that the waves of synchronised retries stay visible; the incident is
/// shaded.
[[nodiscard]] std::string gnuplot_script(const simulation_report& report, plot_format format,
                                         const std::string& output);

/// brooker-occ: the blog's two panels (mean calls and mean time against the client count, one
/// line per algorithm), and a third panel with the writes reaching the server over time in one
/// trial (exponential without jitter against full jitter, at the swept client count nearest to
/// 100): the clusters of no-jitter backoff against the spread of full jitter. The trial is rerun
/// here (simulate_occ_trial with occ_trial_seed, trial 0).
[[nodiscard]] std::string gnuplot_script(const occ_report& report, plot_format format,
                                         const std::string& output);

/// A load sweep: mean attempts per second after the incident (top) and the success ratio
/// (bottom) against the load, one line per strategy.
[[nodiscard]] std::string gnuplot_script(const load_sweep_report& report, plot_format format,
                                         const std::string& output);

/// layers: the attempts at the bottom per top-level request for every row, on a log scale.
[[nodiscard]] std::string gnuplot_script(const layers_report& report, plot_format format,
                                         const std::string& output);

/// Runs `gnuplot` (found on PATH) on `script`, through a temporary file. Returns nullopt on
/// success, or a message: gnuplot missing (with the package to install), or its exit status
/// (gnuplot's own messages go to stderr). Blocks until gnuplot exits.
[[nodiscard]] std::optional<std::string> run_gnuplot(const std::string& script);

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_PLOT_HPP
