// SPDX-License-Identifier: Apache-2.0
// The server's side of lifo-codel (stormguard/sim/defences/lifo_codel.hpp): the waiting line
// becomes an adaptive LIFO + CoDel queue; an attempt CoDel drops is answered 503 (codel_dropped).
#ifndef STORMGUARD_ENGINE_DEFENCES_LIFO_CODEL_HPP
#define STORMGUARD_ENGINE_DEFENCES_LIFO_CODEL_HPP

#include "stormguard/admission/codel.hpp"
#include "stormguard/admission/reply.hpp"
#include "stormguard/sim/defences/lifo_codel.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/attempt.hpp"

namespace stormguard::sim {

struct lifo_codel_defence::runtime {
  // Throws std::invalid_argument for bad options (admission::codel's rule).
  runtime(const options_type& o, const scenario&) : line(o) {}
  // validate()'s rule for the options: admission::codel's (std::invalid_argument).
  static void check(const options_type& o, const scenario&) { const admission::codel c(o); }

  // The outcome of an attempt dropped from the line.
  static constexpr admission::outcome k_dropped = admission::outcome::codel_dropped;

  // The waiting line (at most one kind of the list keeps one).
  admission::adaptive_lifo_queue<engine::queued_attempt> line;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_ENGINE_DEFENCES_LIFO_CODEL_HPP
