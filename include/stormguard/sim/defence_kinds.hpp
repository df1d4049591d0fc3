// SPDX-License-Identifier: Apache-2.0
/// \file
/// The one list of server-side defences, and what is built from it: their names, the set of
/// defences one server runs (`defence_set`, `parse_defences`) and their parameters in a scenario
/// (`server_defences`).
///
/// The simulator, `stormguard serve` and `stormguard lab` select the defences a server runs by
/// name, one list for all:
///
///     none               no defence: a FIFO queue that serves whatever it holds
///     drop-expired       never start a request whose caller's deadline has passed, or will pass
///                        before the server's estimate of its service time
///                        (defences/drop_expired.hpp)
///     lifo-codel         adaptive LIFO + CoDel queue (defences/lifo_codel.hpp)
///     retry-budget       server-side retry budget (defences/retry_budget.hpp)
///     shed-retries       recognised retries refused first while the server is overloaded
///                        (defences/shed_retries.hpp)
///     concurrency-limit  adaptive concurrency limit (defences/concurrency_limit.hpp)
///     retry-after        every refusal's Retry-After chosen from the overload's age
///                        (defences/retry_after.hpp)
///
/// `a+b` combines defences in one server; `all` is every one but the opt-in shed-retries. Each kind
/// is a type with its name, its options and their settings (`fields`), as the budget kinds are
/// (stormguard/budget_kinds.hpp):
///
///     struct retry_budget_defence {
///       static constexpr std::string_view name = "retry-budget";      // files, --defence
///       static constexpr std::string_view stats_key = "refused_retry_budget";  // lab /stats
///       static constexpr std::string_view reason = "retry_refused";   // metrics label
///       using options_type = ratio_budget_options;                    // its parameters
///       template <class Self, class F> static void fields(Self& o, F&& f);  // their ranges
///       static void scale(options_type&, double factor);              // optional (scale_scenario)
///       struct runtime;                                               // the server's side
///     };
///
/// and the scenario reader and writer, validate(), scale_scenario, the simulator's and the lab's
/// server, the lab's /stats and /metrics and the CLI's `--defence` go through this list.
/// Everything here is plain data or a pure function: thread-safe.
#ifndef STORMGUARD_SIM_DEFENCE_KINDS_HPP
#define STORMGUARD_SIM_DEFENCE_KINDS_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "stormguard/export.hpp"
#include "stormguard/input_error.hpp"
#include "stormguard/outcome.hpp"
#include "stormguard/sim/defences/concurrency_limit.hpp"
#include "stormguard/sim/defences/drop_expired.hpp"
#include "stormguard/sim/defences/lifo_codel.hpp"
#include "stormguard/sim/defences/retry_after.hpp"
#include "stormguard/sim/defences/retry_budget.hpp"
#include "stormguard/sim/defences/shed_retries.hpp"

namespace stormguard::detail {
template <class List>
struct defence_options_of;
template <class... K>
struct defence_options_of<std::tuple<K...>> {
  using type = std::tuple<typename K::options_type...>;
};
}  // namespace stormguard::detail

namespace stormguard::sim {

/// THE list of server defences, in canonical order (the order of names in reports, and the order
/// in which a server consults them for each request). Adding a defence: its own header under
/// defences/ (a kind as in the file comment) and its runtime in the engine
/// (src/sim/engine/include/stormguard_engine/defences/), their include lines, and one line here.
using defence_kinds = std::tuple<drop_expired_defence,       //
                                 lifo_codel_defence,         //
                                 retry_budget_defence,       //
                                 shed_retries_defence,       //
                                 concurrency_limit_defence,  //
                                 retry_after_defence>;

/// The number of defence kinds.
inline constexpr std::size_t k_defence_count = std::tuple_size_v<defence_kinds>;
static_assert(k_defence_count <= 32, "defence_set keeps one bit per kind");

/// Calls f(std::type_identity<K>{}) for each kind K of defence_kinds, in list order.
template <class F>
constexpr void for_each_defence_kind(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::type_identity<std::tuple_element_t<I, defence_kinds>>{}), ...);
  }
  (std::make_index_sequence<k_defence_count>{});
}

/// The position of kind K in defence_kinds.
template <class K>
inline constexpr std::size_t defence_index = [] {
  std::size_t found = k_defence_count;
  std::size_t i = 0;
  for_each_defence_kind([&]<class X>(std::type_identity<X>) {
    if (std::is_same_v<X, K>) found = i;
    ++i;
  });
  return found;
}();

/// A set of defences (the empty set is "none").
class defence_set {
 public:
  constexpr defence_set() noexcept = default;
  /// The set "all": every defence but those a kind marks opt-in (`static constexpr bool in_all
  /// = false`: shed-retries, which measured no better against clients that retry on their own
  /// schedule; docs/admission.md, "Shedding recognised retries").
  [[nodiscard]] static constexpr defence_set all() noexcept {
    defence_set s;
    std::size_t i = 0;
    for_each_defence_kind([&]<class K>(std::type_identity<K>) {
      if constexpr (requires { K::in_all; }) {
        if (K::in_all) s = s.with_index(i);
      } else {
        s = s.with_index(i);
      }
      ++i;
    });
    return s;
  }
  /// This set with kind K added.
  template <class K>
  [[nodiscard]] constexpr defence_set with() const noexcept {
    return with_index(defence_index<K>);
  }
  /// This set with the kind at position `index` of defence_kinds added (an index past the list:
  /// the set unchanged).
  [[nodiscard]] constexpr defence_set with_index(std::size_t index) const noexcept {
    defence_set s = *this;
    if (index < k_defence_count) s.bits_ |= std::uint32_t{1} << index;
    return s;
  }
  /// True when kind K is in the set.
  template <class K>
  [[nodiscard]] constexpr bool has() const noexcept {
    return has_index(defence_index<K>);
  }
  /// True when the kind at position `index` of defence_kinds is in the set.
  [[nodiscard]] constexpr bool has_index(std::size_t index) const noexcept {
    return index < k_defence_count && (bits_ >> index & 1U) != 0;
  }
  /// True for "none".
  [[nodiscard]] constexpr bool empty() const noexcept { return bits_ == 0; }
  friend constexpr bool operator==(defence_set, defence_set) noexcept = default;

 private:
  std::uint32_t bits_ = 0;
};

/// Reads "none", "all", one defence name, or names joined by '+' (each at most once, "none" and
/// "all" only alone). For anything else (an empty part, an unknown name, a repeated name, a
/// comma) an input_error (field "defence") whose message quotes the value and lists the accepted
/// names. Never throws for bad input.
[[nodiscard]] STORMGUARD_EXPORT outcome<defence_set, input_error> parse_defences(
    std::string_view text);

/// "none", or the names in canonical order joined by '+' (every name: still written out, not
/// "all", so that reports say what ran).
[[nodiscard]] STORMGUARD_EXPORT std::string to_string(defence_set set);

/// "none, all, drop-expired, lifo-codel, retry-budget, concurrency-limit": every name
/// parse_defences accepts, for help texts and error messages.
[[nodiscard]] STORMGUARD_EXPORT std::string defence_names();

/// The server-side defences a scenario's server runs, and the parameters of every kind (those of
/// a kind not enabled are kept, unused). In a scenario file, [server.defences] is an object keyed
/// by defence name, each value an object of that defence's settings (all optional, the library's
/// defaults otherwise):
///
///     "defences": {"drop-expired": {"service_estimate": "20ms"},
///                  "lifo-codel": {"target": "5ms", "interval": "100ms"},
///                  "retry-budget": {"ratio": 0.1, "window": "10s", "min_retries_per_second": 10},
///                  "concurrency-limit": {"initial_limit": 100, "max_limit": 1000}}
///
/// Absent or {}: no defence (the FIFO server that serves whatever it holds).
struct server_defences {
  /// The defences enabled (the keys present).
  defence_set enabled;
  /// Each kind's parameters, in list order (K::options_type); see of().
  typename stormguard::detail::defence_options_of<defence_kinds>::type options{};

  /// The parameters of kind K.
  template <class K>
  [[nodiscard]] typename K::options_type& of() noexcept {
    return std::get<defence_index<K>>(options);
  }
  /// The parameters of kind K.
  template <class K>
  [[nodiscard]] const typename K::options_type& of() const noexcept {
    return std::get<defence_index<K>>(options);
  }

  friend bool operator==(const server_defences&, const server_defences&) = default;
};

}  // namespace stormguard::sim

#endif  // STORMGUARD_SIM_DEFENCE_KINDS_HPP
