// SPDX-License-Identifier: Apache-2.0
// Internal (private to stormguard::sim): THE description of a scenario's fields, from which the
// reader (parse_scenario), validate(), scale_scenario and the writer (to_json) are all built
// (src/sim/scenario.cpp). A scenario field is one line here and its member in
// stormguard/sim/scenario.hpp; a server defence's settings are its kind's `fields`
// (stormguard/sim/defence_kinds.hpp).
//
// `describe(v, s)` calls the visitor `v` once per field, in the file format's order, with the
// field's spec (its JSON name, whether the file must have it, how scale_scenario scales it, how
// to_json writes it), the member (of s's constness) and its valid range:
//
//   v.text(spec, std::string&, non_empty)            a JSON string
//   v.seed(spec, std::uint64_t&)                     any 64-bit unsigned integer
//   v.time(spec, duration& or optional<duration>&, interval<duration>)   "20ms"
//   v.number(spec, double&, interval<double>)        a finite JSON number
//   v.integer(spec, int&, int64&, optional<int>&, interval<int64>)       a JSON integer
//   v.choice(spec, Enum&, names)                     one of the names (the enum's order)
//   v.object(spec, Struct& or optional<Struct>&, describe_struct)        a nested object
//   v.profile(spec, client_profile&)                 a client profile (config's reader)
//   v.defences(spec, server_defences&)               server.defences (the defence kinds)
//   v.strategies(spec, std::vector<strategy>&)       strategies (names or policy objects)
//   v.check(name, problem)                           a rule between fields: problem() returns
//                                                    the message when it is broken
#ifndef STORMGUARD_SRC_SIM_SCENARIO_FIELDS_HPP
#define STORMGUARD_SRC_SIM_SCENARIO_FIELDS_HPP

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "detail/strict_json.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/sim/scenario.hpp"

namespace stormguard::sim::fields {

/// How scale_scenario changes a field (factor in (0, 1]).
enum class scaling {
  none,                  ///< kept (durations, rates, probabilities)
  times,                 ///< multiplied by the factor
  rounded,               ///< multiplied and rounded to the nearest integer
  rounded_at_least_one,  ///< multiplied, rounded and kept >= 1
};

/// One field of the file format.
struct spec {
  std::string_view name;  ///< its JSON name (the path is the enclosing objects' names + name)
  bool required = true;   ///< false: the file may leave it out (the member keeps its default)
  bool nullable = false;  ///< the file may write null for "none" (an optional member)
  scaling scale = scaling::none;
  /// false: to_json leaves it out when it equals its default (a number's 0, a flag's fallback)
  bool write_default = true;
};

inline constexpr spec required(std::string_view name) { return spec{name}; }
inline constexpr spec optional(std::string_view name) {
  return spec{.name = name, .required = false};
}
inline constexpr spec scaled(std::string_view name, scaling s) {
  return spec{.name = name, .scale = s};
}

/// A range of values, with the words error messages use for it ("in (0, 1h]", "> 0").
template <class T>
struct interval {
  std::optional<T> lo;
  std::optional<T> hi;
  bool lo_open = false;
  bool hi_open = false;
  std::string text;

  [[nodiscard]] bool contains(const T& x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(x)) return false;
    }
    if (lo && (lo_open ? !(x > *lo) : !(x >= *lo))) return false;
    if (hi && (hi_open ? !(x < *hi) : !(x <= *hi))) return false;
    return true;
  }
};

/// (0, max] for a duration: "in (0, 1h]".
inline interval<duration> positive_up_to(duration max) {
  return {duration::zero(), max, true, false,
          "in (0, " + stormguard::detail::strict_json::limit_text(max) + "]"};
}
/// [lo, hi] for an integer: "in [1, 100000]".
inline interval<std::int64_t> between(std::int64_t lo, std::int64_t hi) {
  return {lo, hi, false, false, "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"};
}
/// (0, +inf) for a number: "> 0".
inline interval<double> positive() { return {0.0, std::nullopt, true, false, "> 0"}; }
/// [0, 1]: a fraction.
inline interval<double> fraction() { return {0.0, 1.0, false, false, "in [0, 1]"}; }
/// (0, 1]: a probability that is not zero.
inline interval<double> probability() { return {0.0, 1.0, true, false, "in (0, 1]"}; }

/// The known spellings of an enum, in its order.
template <class E, std::size_t N>
struct names {
  std::array<std::string_view, N> list;
  /// "\"fixed\" or \"exponential\"".
  [[nodiscard]] std::string text() const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      out += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + ("\"" + std::string(list[i]) + "\"");
    }
    return out;
  }
};

// The ten-million-request bound (a memory bound); its message in scenario.cpp.
[[nodiscard]] std::optional<std::string> request_bound_problem(const scenario& s);

/// incident (stormguard/sim/scenario.hpp, sim::incident), for a scenario of length `length`.
template <class V, class I>
void describe_incident(V& v, I& i, duration length) {
  v.time(required("start"), i.start,
         interval<duration>{duration::zero(), length, false, true,
                            "in [0, duration) = [0, " + format_duration(length) + ")"});
  v.time(required("end"), i.end,
         interval<duration>{i.start, std::nullopt, true, false,
                            "after incident.start (" + format_duration(i.start) + ")"});
  v.time(optional("service_time"), i.service_time, positive_up_to(std::chrono::hours(1)));
  v.number(spec{.name = "error_rate", .required = false, .write_default = false}, i.error_rate,
           fraction());
  v.number(spec{.name = "loss_rate", .required = false, .write_default = false}, i.loss_rate,
           fraction());
  v.check("loss_rate", [&i]() -> std::optional<std::string> {
    if (i.error_rate + i.loss_rate <= 1.0) return std::nullopt;
    return "error_rate + loss_rate must be at most 1, got " +
           stormguard::detail::format_double(i.error_rate) + " + " +
           stormguard::detail::format_double(i.loss_rate);
  });
}

/// server.overload (sim::overload).
template <class V, class O>
void describe_overload(V& v, O& o) {
  v.number(scaled("above_rate", scaling::times), o.above_rate, positive());
  v.time(required("service_time"), o.service_time, positive_up_to(std::chrono::hours(1)));
}

/// server.stall (sim::stall).
template <class V, class S>
void describe_stall(V& v, S& st) {
  v.number(required("probability"), st.probability, probability());
  v.time(required("duration"), st.length, positive_up_to(std::chrono::hours(1)));
}

inline constexpr names<service_distribution, 2> k_distributions{k_service_distribution_names};

/// server (the server's members of sim::scenario).
template <class V, class S>
void describe_server(V& v, S& s) {
  v.integer(scaled("workers", scaling::rounded_at_least_one), s.workers, between(1, 1'000'000));
  v.integer(scaled("queue_limit", scaling::rounded), s.queue_limit, between(0, 100'000'000));
  v.time(required("service_time"), s.service_time, positive_up_to(std::chrono::hours(1)));
  v.choice(optional("service_distribution"), s.distribution, k_distributions);
  v.object(spec{.name = "overload", .required = false, .nullable = true}, s.overload,
           [](auto& w, auto& o) { describe_overload(w, o); });
  v.defences(optional("defences"), s.defences);
  v.object(spec{.name = "stall", .required = false, .nullable = true}, s.stall,
           [](auto& w, auto& st) { describe_stall(w, st); });
}

/// The scenario: every field of the file format, in its order.
template <class V, class S>
void describe(V& v, S& s) {
  v.text(required("name"), s.name, /*non_empty=*/true);
  v.text(optional("description"), s.description, /*non_empty=*/false);
  v.seed(required("seed"), s.seed);
  v.time(required("duration"), s.length, positive_up_to(std::chrono::hours(1)));
  v.number(scaled("requests_per_second", scaling::times), s.requests_per_second, positive());
  v.check("requests_per_second", [&s] { return request_bound_problem(s); });
  v.integer(scaled("clients", scaling::rounded_at_least_one), s.clients, between(1, 1'000'000));
  v.time(required("timeout"), s.timeout, positive_up_to(std::chrono::hours(1)));
  v.object(required("server"), s, [](auto& w, auto& server) { describe_server(w, server); });
  v.object(spec{.name = "incident", .nullable = true}, s.incident,
           [&s](auto& w, auto& i) { describe_incident(w, i, s.length); });
  v.integer(optional("max_retries"), s.max_retries, between(1, 1000));
  v.profile(spec{.name = "client_profile", .required = false, .write_default = false}, s.client);
  v.number(spec{.name = "repeating_clients", .required = false, .write_default = false},
           s.repeating_clients, fraction());
  v.strategies(optional("strategies"), s.strategies);
}

}  // namespace stormguard::sim::fields

#endif  // STORMGUARD_SRC_SIM_SCENARIO_FIELDS_HPP
