// SPDX-License-Identifier: Apache-2.0
#include "app/models.hpp"

#include <array>

namespace stormguard::sim {

namespace {

constexpr unsigned bits(std::initializer_list<model_option> options) {
  unsigned b = 0;
  for (const model_option o : options) b |= static_cast<unsigned>(o);
  return b;
}

constexpr std::array k_models{
    model_info{model_kind::time_series, "time-series scenarios",
               "clients, a server and an incident, second by second (a built-in name or a JSON "
               "file)",
               bits({model_option::strategies, model_option::sweep}), "load"},
    model_info{model_kind::brooker_occ, "brooker-occ",
               "Brooker 2015's optimistic-concurrency experiment: work per client count, for the "
               "five backoff algorithms",
               bits({model_option::trials, model_option::sweep}), "clients"},
    model_info{model_kind::layers, "layers",
               "retries at every layer of a call stack: the attempts that reach the bottom",
               bits({model_option::strategies, model_option::layers}), ""},
};

}  // namespace

std::span<const model_info> models() noexcept { return k_models; }

const model_info& model_for(std::string_view scenario_argument) noexcept {
  for (const model_info& m : k_models) {
    if (m.kind != model_kind::time_series && m.name == scenario_argument) return m;
  }
  return k_models.front();
}

std::string models_taking(model_option o) {
  std::string text;
  std::size_t count = 0;
  for (const model_info& m : k_models) count += m.takes(o) ? 1 : 0;
  std::size_t seen = 0;
  for (const model_info& m : k_models) {
    if (!m.takes(o)) continue;
    if (seen > 0) text += seen + 1 == count ? " and " : ", ";
    text += m.name;
    ++seen;
  }
  return text;
}

}  // namespace stormguard::sim
