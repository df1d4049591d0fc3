// SPDX-License-Identifier: Apache-2.0
#include "stormguard/sim/defence_kinds.hpp"

namespace stormguard::sim {

namespace {

failure<input_error> reject(std::string_view text, std::string_view why) {
  return failure{
      input_error{"defence", "defence \"" + std::string(text) + "\": " + std::string(why) +
                                 " (accepted: " + defence_names() + ", or names joined by '+')"}};
}

}  // namespace

std::string defence_names() {
  std::string out = "none, all";
  for_each_defence_kind(
      [&]<class K>(std::type_identity<K>) { out += ", " + std::string(K::name); });
  return out;
}

outcome<defence_set, input_error> parse_defences(std::string_view text) {
  if (text == "none") return defence_set{};
  if (text == "all") return defence_set::all();
  if (text.find(',') != std::string_view::npos) {
    return reject(text, "a comma separates rows, not the defences of one server: use '+'");
  }
  defence_set set;
  std::string_view rest = text;
  while (true) {
    const std::size_t plus = rest.find('+');
    const std::string_view part = rest.substr(0, plus);
    if (part.empty()) return reject(text, "an empty name");
    if (part == "none" || part == "all") {
      return reject(text, "\"" + std::string(part) + "\" stands alone");
    }
    bool known = false;
    bool twice = false;
    for_each_defence_kind([&]<class K>(std::type_identity<K>) {
      if (part != K::name) return;
      twice = set.has<K>();
      set = set.with<K>();
      known = true;
    });
    if (twice) return reject(text, "\"" + std::string(part) + "\" given twice");
    if (!known) return reject(text, "unknown name \"" + std::string(part) + "\"");
    if (plus == std::string_view::npos) break;
    rest.remove_prefix(plus + 1);
  }
  return set;
}

std::string to_string(defence_set set) {
  if (set.empty()) return "none";
  std::string out;
  for_each_defence_kind([&]<class K>(std::type_identity<K>) {
    if (!set.has<K>()) return;
    if (!out.empty()) out += '+';
    out += K::name;
  });
  return out;
}

}  // namespace stormguard::sim
