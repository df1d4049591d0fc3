// SPDX-License-Identifier: Apache-2.0
// The server-side defences of the time-series model (the internal engine target
// stormguard_sim_engine): the scenario's server.defences, each kind of the one list
// (stormguard/sim/defence_kinds.hpp) run by its `runtime` (defences/*.hpp) on
// stormguard::admission's own classes, so that the simulator (virtual time) and `serve`/`lab` (a
// real clock) run the same code a C++ server embeds. server_model (server.hpp) holds one `defences`
// when any defence is enabled and calls it at these points, each kind in list order:
//
//   admit       an attempt reaches the server (after the incident's draw): the first kind whose
//               runtime refuses it decides its answer (an admission::outcome: reply.hpp);
//   line        the waiting line: FIFO, or the queue of the kind that keeps one (lifo-codel),
//               which may drop attempts that waited too long;
//   leave_line  an attempt leaves the line for a worker: a kind may still answer it instead
//               (drop-expired);
//   started     an attempt takes a worker; finished: a worker is free again; cancel: an
//               admitted attempt was turned away or left the line unserved;
//   engaged     another kind, or the full queue, refused or dropped an attempt (the server is
//               overloaded: shed-retries sheds recognised retries while it lasts).
//
// A runtime provides only the hooks it needs (each is detected); those it lacks do nothing.
// Times are ns of the scenario's clock. Not thread-safe: one thread (the simulator's loop, or
// the lab server's event loop) calls it.
#ifndef STORMGUARD_ENGINE_DEFENCES_HPP
#define STORMGUARD_ENGINE_DEFENCES_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "stormguard/admission/reply.hpp"
#include "stormguard/random.hpp"
#include "stormguard/sim/defence_kinds.hpp"
#include "stormguard/sim/scenario.hpp"
#include "stormguard_engine/attempt.hpp"
#include "stormguard_engine/defences/concurrency_limit.hpp"
#include "stormguard_engine/defences/drop_expired.hpp"
#include "stormguard_engine/defences/lifo_codel.hpp"
#include "stormguard_engine/defences/retry_after.hpp"
#include "stormguard_engine/defences/retry_budget.hpp"
#include "stormguard_engine/defences/shed_retries.hpp"
#include "stormguard_engine/seeds.hpp"

namespace stormguard::sim::engine {

// Domain tag of the defences' generator (the concurrency limit's jitter and Retry-After draws).
inline constexpr std::uint64_t k_tag_defences = 0x646566656e636573ULL;  // "defences"

// A defence's answer to an attempt: which kind (its index in defence_kinds) and the outcome it
// is answered with (admission::reply_for).
struct defence_answer {
  std::size_t defence = 0;
  admission::outcome outcome = admission::outcome::unavailable;
  friend constexpr bool operator==(const defence_answer&, const defence_answer&) = default;
};

// validate()'s check of kind K's options in `s`: the runtime's own `check`, or its constructor.
// Throws std::invalid_argument naming the field and the value.
template <class K>
void check_defence(const typename K::options_type& o, const scenario& s) {
  using R = typename K::runtime;
  if constexpr (requires { R::check(o, s); }) {
    R::check(o, s);
  } else {
    const R r(o, s);
  }
}

class defences {
 public:
  // The defences of `s.defences` (whose parameters validate() has checked).
  explicit defences(const scenario& s) : rng_(seeds::mix(s.seed, k_tag_defences)) {
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if (s.defences.enabled.has<K>()) slot.emplace(s.defences.of<K>(), s);
    });
  }

  // An attempt reaches the server now: the first refusal, or nullopt (it goes on to the workers
  // and the line).
  [[nodiscard]] std::optional<defence_answer> admit(std::int64_t now,
                                                    const attempt_labels& labels) {
    std::optional<defence_answer> answer;
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->admit(now, labels); }) {
        if (answer || !slot) return;
        if (const auto o = slot->admit(now, labels)) answer = defence_answer{defence_index<K>, *o};
      }
    });
    // shed-retries' own refusals are no sign of overload (they would keep it on for as long as
    // retries come).
    if (answer && answer->defence != defence_index<shed_retries_defence>) engaged(now);
    return answer;
  }

  // A refusal or a drop (of a kind but shed-retries, or of the full queue) now: the kinds that
  // watch for overload (shed-retries) hear it.
  void engaged(std::int64_t now) {
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->engaged(now); }) {
        if (slot) slot->engaged(now);
      }
    });
  }

  // An attempt leaves the line for a worker now: an answer instead of service, or nullopt.
  [[nodiscard]] std::optional<defence_answer> leave_line(std::int64_t now, std::int64_t deadline) {
    std::optional<defence_answer> answer;
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->leave_line(now, deadline); }) {
        if (answer || !slot) return;
        if (const auto o = slot->leave_line(now, deadline)) {
          answer = defence_answer{defence_index<K>, *o};
        }
      }
    });
    if (answer) engaged(now);
    return answer;
  }

  // An admitted attempt was turned away after all (the line was full) or left the line unserved.
  void cancel() noexcept {
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->cancel(); }) {
        if (slot) slot->cancel();
      }
    });
  }

  // An admitted attempt that reached the server at `arrived` takes a worker now and will complete
  // at now + service.
  void started(std::int64_t now, std::int64_t arrived, std::int64_t service) {
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->started(now, arrived, service); }) {
        if (slot) slot->started(now, arrived, service);
      }
    });
  }

  // A worker finished now.
  void finished(std::int64_t now) {
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->finished(now, rng_); }) {
        if (slot) slot->finished(now, rng_);
      }
    });
  }

  // The Retry-After of the answer `o` given now, or nullopt for none: for every refusal, the one
  // a pacing kind chooses when one is enabled (retry-after); else, when the reply carries one
  // (reply_for: the concurrency limit's), drawn by the first enabled kind that draws one (whole
  // seconds in [1 s, 5 s]). `paced` is set when a pacing kind chose it.
  [[nodiscard]] std::optional<duration> retry_after_for(admission::outcome o, std::int64_t now,
                                                        bool* paced = nullptr) {
    std::optional<duration> d;
    if (o == admission::outcome::served) return d;
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->pace(now, rng_); }) {
        if (!d && slot) d = slot->pace(now, rng_);
      }
    });
    if (paced != nullptr) *paced = d.has_value();
    if (d || !admission::reply_for(o).retry_after) return d;
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->retry_after(rng_); }) {
        if (!d && slot) d = slot->retry_after(rng_);
      }
    });
    return d.value_or(duration{});
  }

  // True when an enabled kind keeps the waiting line (else the server's FIFO).
  [[nodiscard]] bool keeps_line() const noexcept { return line_index() < k_defence_count; }

  // Puts `waiting` in the kept line (keeps_line() must be true).
  void push(const queued_attempt& waiting) {
    with_line([&](auto& line, std::size_t) { (void)line.push(at(waiting.arrived), waiting); });
  }

  // The next attempt from the kept line at `now`, or nullopt; attempts the line drops are passed
  // to on_drop(queued_attempt&, defence_answer) first.
  template <class OnDrop>
  std::optional<queued_attempt> pop(std::int64_t now, OnDrop&& on_drop) {
    std::optional<queued_attempt> next;
    with_line([&](auto& line, std::size_t index, auto dropped) {
      next = line.pop(at(now), [&](queued_attempt& a) {
        engaged(now);
        on_drop(a, defence_answer{index, dropped});
      });
    });
    return next;
  }

  // The attempts in the kept line (0 without one).
  [[nodiscard]] std::size_t line_size() const noexcept {
    std::size_t n = 0;
    for_each([&]<class K>(std::type_identity<K>, const auto& slot) {
      if constexpr (requires { slot->line.size(); }) {
        if (slot) n += slot->line.size();
      }
    });
    return n;
  }

  [[nodiscard]] static time_point at(std::int64_t now) noexcept {
    return time_point(duration(now));
  }

 private:
  template <class List>
  struct slots_of;
  template <class... K>
  struct slots_of<std::tuple<K...>> {
    using type = std::tuple<std::optional<typename K::runtime>...>;
  };
  using slots = typename slots_of<defence_kinds>::type;

  // Calls f(type_identity<K>, slot) for each kind in list order (slot: optional<K::runtime>).
  template <class F>
  void for_each(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::type_identity<std::tuple_element_t<I, defence_kinds>>{}, std::get<I>(slots_)), ...);
    }
    (std::make_index_sequence<k_defence_count>{});
  }
  template <class F>
  void for_each(F&& f) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::type_identity<std::tuple_element_t<I, defence_kinds>>{}, std::get<I>(slots_)), ...);
    }
    (std::make_index_sequence<k_defence_count>{});
  }

  // The index of the enabled kind that keeps the line, or k_defence_count.
  [[nodiscard]] std::size_t line_index() const noexcept {
    std::size_t index = k_defence_count;
    for_each([&]<class K>(std::type_identity<K>, const auto& slot) {
      if constexpr (requires { slot->line; }) {
        if (slot && index == k_defence_count) index = defence_index<K>;
      }
    });
    return index;
  }

  // f(line, index, outcome of a drop) for the enabled kind that keeps the line.
  template <class F>
  void with_line(F&& f) {
    bool done = false;
    for_each([&]<class K>(std::type_identity<K>, auto& slot) {
      if constexpr (requires { slot->line; }) {
        if (done || !slot) return;
        done = true;
        if constexpr (std::is_invocable_v<F&, decltype(slot->line)&, std::size_t>) {
          f(slot->line, defence_index<K>);
        } else {
          f(slot->line, defence_index<K>, K::runtime::k_dropped);
        }
      }
    });
  }

  random_generator rng_;
  slots slots_;
};

}  // namespace stormguard::sim::engine

#endif  // STORMGUARD_ENGINE_DEFENCES_HPP
