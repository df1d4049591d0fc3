// SPDX-License-Identifier: Apache-2.0
#include "stormguard/admission/defences.hpp"

#include <stdexcept>

namespace stormguard::admission {

namespace {

constexpr std::array<std::string_view, 4> k_names{"drop-expired", "lifo-codel", "retry-budget",
                                                  "concurrency-limit"};

[[noreturn]] void reject(std::string_view text, std::string_view why) {
  throw std::invalid_argument("defence \"" + std::string(text) + "\": " + std::string(why) +
                              " (accepted: none, all, drop-expired, lifo-codel, retry-budget, "
                              "concurrency-limit, or names joined by '+')");
}

}  // namespace

std::string_view to_string(defence d) noexcept {
  const auto i = static_cast<std::size_t>(d);
  return i < k_names.size() ? k_names[i] : std::string_view("unknown");
}

defence_set parse_defences(std::string_view text) {
  if (text == "none") return {};
  if (text == "all") return defence_set::all();
  if (text.find(',') != std::string_view::npos) {
    reject(text, "a comma separates rows, not the defences of one server: use '+'");
  }
  defence_set set;
  std::string_view rest = text;
  while (true) {
    const std::size_t plus = rest.find('+');
    const std::string_view part = rest.substr(0, plus);
    if (part.empty()) reject(text, "an empty name");
    if (part == "none" || part == "all") reject(text, "\"" + std::string(part) + "\" stands alone");
    bool known = false;
    for (const defence d : k_all_defences) {
      if (part != to_string(d)) continue;
      if (set.has(d)) reject(text, "\"" + std::string(part) + "\" given twice");
      set = set.with(d);
      known = true;
    }
    if (!known) reject(text, "unknown name \"" + std::string(part) + "\"");
    if (plus == std::string_view::npos) break;
    rest.remove_prefix(plus + 1);
  }
  return set;
}

std::string to_string(defence_set set) {
  if (set.empty()) return "none";
  std::string out;
  for (const defence d : k_all_defences) {
    if (!set.has(d)) continue;
    if (!out.empty()) out += '+';
    out += to_string(d);
  }
  return out;
}

}  // namespace stormguard::admission
