// SPDX-License-Identifier: Apache-2.0
/// \file
/// The one list of retry budget kinds, and what is built from it —
/// the options of any kind (`budget_options`), its name (`budget_kind`), the budget of any kind
/// (`any_budget`, `make_budget`) and a dispatch to the concrete class (`visit_budget`).
///
/// Policy files (stormguard::config), the simulator, the metrics' `budget` label and every
/// executor (the retrier, the HTTP clients' per-host budgets, `exec`, the lab) go through this
/// list, so a kind is known everywhere once it is in it.
///
/// Each kind is an options type that names its kind and its class:
///
/// \code{.cpp}
///  struct ratio_budget_options {
///    static constexpr std::string_view kind = "ratio";   // policy files, metric labels
///    using budget_type = ratio_budget;                   // what make_budget builds
///    template <class Self, class F> static void fields(Self& o, F&& f);   // its settings
///    ...
///  };
/// \endcode
///
/// and the class it names has `using options_type = ratio_budget_options;` and the retry_budget
/// calls (budget.hpp). Example:
///
/// \code{.cpp}
///  stormguard::budget_options options = stormguard::retry_quota_options{};
///  std::cout << stormguard::budget_kind(options);              // "quota"
///  stormguard::any_budget budget(options);                     // a retry_quota inside
///  stormguard::retrier retry(policy, clock, rng, budget);      // any kind, one type
///  stormguard::visit_budget(options, [&](auto& b) { /* b is a retry_quota& */ });
/// \endcode
///
/// Everything here is std only. any_budget is as thread-safe as the budget it holds (every class
/// of budget.hpp is thread-safe); the functions keep no state.
#ifndef STORMGUARD_BUDGET_KINDS_HPP
#define STORMGUARD_BUDGET_KINDS_HPP

#include <concepts>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "stormguard/budget.hpp"
#include "stormguard/clock.hpp"
#include "stormguard/fleet_budget.hpp"
#include "stormguard/random.hpp"
#include "stormguard/retry_breaker.hpp"

namespace stormguard {

/// What an options type in budget_options provides: its kind's name and the class it builds
/// (constructible from the options), and its settings' list (see ratio_budget_options::fields).
template <class O>
concept budget_kind_options = requires {
  { O::kind } -> std::convertible_to<std::string_view>;
  typename O::budget_type;
}
&&std::constructible_from<typename O::budget_type, const O&>;

/// THE list of budget kinds, in the order policy files document them. Adding a kind: its own
/// header and source (an options type with `kind`, `budget_type` and `fields`, and the class,
/// with `options_type` and the retry_budget calls) with their two lines in CMakeLists.txt, then
/// its include line above and one line here. Config (parsing and printing policies), the simulator,
/// the metrics and every executor then know it.
using budget_options = std::variant<no_budget,                      //
                                    ratio_budget_options,           //
                                    token_bucket_throttle_options,  //
                                    retry_quota_options,            //
                                    adaptive_throttle_options,      //
                                    concurrency_budget_options,     //
                                    fleet_budget_options,           //
                                    retry_breaker_options>;

namespace detail {
template <class Variant>
struct budget_list;
template <class... O>
struct budget_list<std::variant<O...>> {
  static_assert((budget_kind_options<O> && ...), "every kind names its kind and its class");
  // The classes, in list order, behind std::monostate (the empty any_budget being built).
  using budgets = std::variant<std::monostate, typename O::budget_type...>;
  template <class F>
  static constexpr void for_each(F&& f) {
    (f(std::type_identity<O>{}), ...);
  }
};
}  // namespace detail

/// Calls f(std::type_identity<O>{}) for each options type O of budget_options, in list order.
template <class F>
constexpr void for_each_budget_kind(F&& f) {
  detail::budget_list<budget_options>::for_each(std::forward<F>(f));
}

/// The kind's name of `options`: "none", "ratio", "token_bucket", "quota", "adaptive" or
/// "concurrency" (O::kind). The names of policy files and of the metrics' `budget` label.
[[nodiscard]] constexpr std::string_view budget_kind(const budget_options& options) noexcept {
  return std::visit([](const auto& o) -> std::string_view { return o.kind; }, options);
}

/// The kind's name of a budget class B (B::options_type::kind), or "custom" for a type that
/// does not name its options (a user's own retry_budget).
template <class B>
[[nodiscard]] constexpr std::string_view budget_kind_of() noexcept {
  if constexpr (requires { std::remove_cvref_t<B>::options_type::kind; }) {
    return std::remove_cvref_t<B>::options_type::kind;
  } else {
    return "custom";
  }
}

/// The default options of the kind called `kind` (exact match), or std::nullopt.
[[nodiscard]] inline std::optional<budget_options> default_budget_options(std::string_view kind) {
  std::optional<budget_options> found;
  for_each_budget_kind([&]<class O>(std::type_identity<O>) {
    if (!found && O::kind == kind) found = O{};
  });
  return found;
}

/// The kinds' names in list order, each quoted, joined as `"none", "ratio", ... or "breaker"`
/// (for error messages).
[[nodiscard]] inline std::string budget_kind_names() {
  std::string names;
  std::size_t i = 0;
  constexpr std::size_t n = std::variant_size_v<budget_options>;
  for_each_budget_kind([&]<class O>(std::type_identity<O>) {
    if (i > 0) names += (i + 1 == n) ? " or " : ", ";
    names += "\"" + std::string(O::kind) + "\"";
    ++i;
  });
  return names;
}

/// Builds the budget that `options` name (O::budget_type, validated by its constructor: throws
/// std::invalid_argument naming the field and the value), on the stack, and returns f(budget&).
/// The dispatch to the concrete class, for an executor that wants the class's own type (no
/// indirection per call); the budget lives only during f.
template <class F>
decltype(auto) visit_budget(const budget_options& options, F&& f) {
  return std::visit(
      [&f]<class O>(const O& o) -> decltype(auto) {
        typename O::budget_type budget(o);
        return std::forward<F>(f)(budget);
      },
      options);
}

/// A retry budget of any kind of the list, chosen at run time: the class that its options name,
/// held in place (no allocation beyond the class's own). Satisfies retry_budget and the budget
/// protocol's optional calls (retry_ended, request_ended), forwarding each call to the class
/// (the optional ones only when the class has them). Thread-safe as the class it holds. Neither
/// copyable nor movable (budgets are shared by reference); make_budget gives one on the heap.
class any_budget {
 public:
  /// Builds the class `options` name. Throws std::invalid_argument as that class's constructor
  /// (naming the field and the value).
  explicit any_budget(const budget_options& options) : options_(options) {
    std::visit(
        [this]<class O>(const O& o) { budget_.template emplace<typename O::budget_type>(o); },
        options);
  }
  any_budget(const any_budget&) = delete;
  any_budget& operator=(const any_budget&) = delete;

  /// Returns f(B&) with the class held (f(const B&) for a const any_budget).
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit(
        [&f]<class B>(B& b) -> decltype(auto) {
          if constexpr (std::same_as<B, std::monostate>) {
            return std::forward<F>(f)(unreachable_budget());
          } else {
            return std::forward<F>(f)(b);
          }
        },
        budget_);
  }
  /// Returns f(const B&) with the class held, for a const any_budget (see the non-const visit).
  template <class F>
  decltype(auto) visit(F&& f) const {
    return const_cast<any_budget&>(*this).visit(
        [&f](auto& b) -> decltype(auto) { return std::forward<F>(f)(std::as_const(b)); });
  }

  /// retry_budget: the class's try_admit.
  template <bit_generator G>
  [[nodiscard]] bool try_admit(time_point now, G& g) {
    return visit([&](auto& b) { return b.try_admit(now, g); });
  }
  /// retry_budget: the class's try_withdraw.
  template <bit_generator G>
  [[nodiscard]] bool try_withdraw(time_point now, attempt_status status, G& g) {
    return visit([&](auto& b) { return b.try_withdraw(now, status, g); });
  }
  /// retry_budget: the class's record.
  void record(time_point now, const attempt_report& report) {
    visit([&](auto& b) { b.record(now, report); });
  }
  /// Budget protocol: the class's retry_ended, if it has one (else nothing).
  void retry_ended(time_point now) {
    visit([&](auto& b) {
      if constexpr (requires { b.retry_ended(now); }) b.retry_ended(now);
    });
  }
  /// Budget protocol: the class's request_ended, if it has one (else nothing).
  void request_ended(time_point now) {
    visit([&](auto& b) {
      if constexpr (requires { b.request_ended(now); }) b.request_ended(now);
    });
  }

  /// The retries the budget would grant now (the class's level(now)); negative for a kind
  /// without a level (none, adaptive). For the metrics' budget level gauge.
  [[nodiscard]] double level(time_point now) const {
    return visit([&](const auto& b) -> double {
      if constexpr (requires { b.level(now); }) {
        return b.level(now);
      } else {
        return -1.0;
      }
    });
  }

  /// Its kind's name (budget_kind(options())).
  [[nodiscard]] std::string_view kind() const noexcept { return budget_kind(options_); }
  /// The options it was built from.
  [[nodiscard]] const budget_options& options() const noexcept { return options_; }

 private:
  using budgets = detail::budget_list<budget_options>::budgets;
  // The constructor always holds a class: monostate is only the state while emplacing.
  static no_budget& unreachable_budget() noexcept {
    static no_budget none;
    return none;
  }
  budget_options options_;
  budgets budget_;
};

static_assert(retry_budget<any_budget>);

/// A budget of the kind `options` name, on the heap (any_budget is not movable). Throws
/// std::invalid_argument as the class's constructor.
[[nodiscard]] inline std::unique_ptr<any_budget> make_budget(const budget_options& options) {
  return std::make_unique<any_budget>(options);
}

}  // namespace stormguard

#endif  // STORMGUARD_BUDGET_KINDS_HPP
