// SPDX-License-Identifier: Apache-2.0
#include "defence_option.hpp"

#include <type_traits>

namespace stormguard::cli {

std::optional<std::vector<defence_row>> parse_defence_option(const std::string& text,
                                                             bool rows_allowed,
                                                             std::string& error) {
  std::vector<defence_row> rows;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    if (comma != std::string::npos && !rows_allowed) {
      error = "--defence " + text +
              ": one server runs one set of defences: join them with '+' (a comma gives rows on "
              "simulate and lab)";
      return std::nullopt;
    }
    const std::string part = text.substr(start, comma - start);
    const auto set = sim::parse_defences(part);
    if (!set) {
      error = "--defence: " + set.error().message;
      return std::nullopt;
    }
    for (const defence_row& r : rows) {
      if (r.set == *set) {
        error = "--defence: \"" + part + "\" is given more than once";
        return std::nullopt;
      }
    }
    rows.push_back(defence_row{part, *set});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return rows;
}

std::string defence_option_help(std::string_view lead, std::string_view tail) {
  std::string text = std::string(lead) + ": none (default)";
  sim::for_each_defence_kind(
      [&]<class K>(std::type_identity<K>) { text += ", " + std::string(K::name); });
  text += ", a+b combined, " + std::string(tail);
  // The kinds `all` leaves out (opt-in, by name only).
  std::string opt_in;
  std::size_t index = 0;
  sim::for_each_defence_kind([&]<class K>(std::type_identity<K>) {
    if (!sim::defence_set::all().has_index(index++)) {
      opt_in += (opt_in.empty() ? "" : ", ") + std::string(K::name);
    }
  });
  if (!opt_in.empty()) text += " (all: every defence but " + opt_in + ")";
  return text;
}

sim::scenario with_defences(const sim::scenario& s, const defence_row& row) {
  sim::scenario out = s;
  out.defences.enabled = row.set;
  return out;
}

sim::simulation_report simulate_defences(const sim::scenario& s,
                                         std::span<const sim::strategy> strategies,
                                         const std::vector<defence_row>& rows, unsigned threads,
                                         const sim::progress_callback& progress) {
  sim::simulation_report report{s, {}};
  for (const defence_row& row : rows) {
    sim::simulation_report one =
        sim::simulate(with_defences(s, row), strategies, threads, progress);
    for (sim::strategy_result& r : one.strategies) {
      r.defence = row.name;
      report.strategies.push_back(std::move(r));
    }
  }
  return report;
}

}  // namespace stormguard::cli
