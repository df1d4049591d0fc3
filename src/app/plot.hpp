// SPDX-License-Identifier: Apache-2.0
// app/plot.hpp (the application layer: not installed): pictures of the simulator's reports, drawn
// by gnuplot (http://www.gnuplot.info/; the Debian package gnuplot-nox, installed by
// scripts/bootstrap, has the pngcairo and svg terminals used here).
//
// Each gnuplot_script overload is a pure function of a report (it never runs the model: the report
// carries what the plot needs): it returns a complete gnuplot program with the data inline
// (datablocks). The library only writes scripts; running gnuplot is the caller's business (the
// CLI runs it as a child process), which keeps the scripts testable without gnuplot and
// reproducible by hand (`gnuplot script.gp`).
//
// Every line can be told apart even where lines coincide: each has its own colour, dash type and
// point marker (markers staggered along the time axis), and a line whose data equal an earlier
// line's says so in its key ("full+quota (= full+budget)"). Axes start a little below zero so that
// a strategy at zero stays visible, and the panels of one picture share their margins so that
// their axes line up.
//
//   auto report = stormguard::sim::simulate(stormguard::sim::friday_night(),
//                                           stormguard::sim::builtin_strategies());
//   auto format = stormguard::sim::plot_format_for("storm.png");          // plot_format::png
//   std::ofstream("storm.gp") << stormguard::sim::gnuplot_script(report, *format, "storm.png");
//   // then: gnuplot storm.gp
#ifndef STORMGUARD_APP_PLOT_HPP
#define STORMGUARD_APP_PLOT_HPP

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/layers.hpp"
#include "app/occ.hpp"
#include "app/sweep.hpp"
#include "stormguard/sim/simulator.hpp"

namespace stormguard::sim {

/// The image formats: PNG (gnuplot's pngcairo terminal) and SVG (its svg terminal).
enum class plot_format { png, svg };

/// The format for a file name by its extension, ".png" or ".svg" (case-insensitive); nullopt for
/// anything else.
[[nodiscard]] std::optional<plot_format> plot_format_for(const std::filesystem::path& file);

/// A time-series scenario: two panels over simulated time, attempts per second (top) and goodput
/// per second (bottom), one line per strategy, in 100-ms bins (strategy_result::fine_series,
/// scaled to per second) so that the waves of synchronised retries stay visible, with the demand
/// (logical requests per second) and the server's capacity (workers ÷ service time, lower during
/// a slow incident) as black lines; the incident is shaded.
[[nodiscard]] std::string gnuplot_script(const simulation_report& report, plot_format format,
                                         const std::string& output);

/// brooker-occ: the blog's two panels (mean calls and mean time against the client count, one
/// line per algorithm), and a third panel with the writes reaching the server over time in one
/// trial (exponential without jitter against full jitter, at the swept client count nearest to
/// 100): the clusters of no-jitter backoff against the spread of full jitter, from
/// occ_report::timelines.
[[nodiscard]] std::string gnuplot_script(const occ_report& report, plot_format format,
                                         const std::string& output);

/// A load sweep: mean attempts per second after the incident (top) and the success ratio
/// (bottom) against the load, one line per strategy.
[[nodiscard]] std::string gnuplot_script(const load_sweep_report& report, plot_format format,
                                         const std::string& output);

/// layers: the attempts at the bottom per top-level request for every row, on a log scale.
[[nodiscard]] std::string gnuplot_script(const layers_report& report, plot_format format,
                                         const std::string& output);

/// The clients sweep as two panels (during the incident, over the whole run), one line per
/// strategy with the palette of every other plot (a missing figure is drawn as 0).
[[nodiscard]] std::string gnuplot_script(const clients_sweep_report& report, plot_format format,
                                         const std::string& output);

/// The lines a plot tells apart, each by its own colour and marker (and dash type); the 16
/// built-in strategies and one of the user's all differ. An 18th line repeats the first's.
inline constexpr int k_distinct_lines = 17;

}  // namespace stormguard::sim

#endif  // STORMGUARD_APP_PLOT_HPP
