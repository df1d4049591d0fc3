// SPDX-License-Identifier: Apache-2.0
#include "stormguard/sim/scenario.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "detail/settings_json.hpp"
#include "detail/strict_json.hpp"
#include "sim/builtin_scenarios.hpp"
#include "sim/scenario_fields.hpp"
#include "stormguard/config/policy.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard_engine/defences.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::sim {

namespace {

using json = nlohmann::json;

constexpr std::int64_t k_max_requests = 10'000'000;
constexpr std::size_t k_max_file_bytes = 1024 * 1024;
constexpr int k_max_depth = 64;

namespace sj = stormguard::detail::strict_json;
namespace settings_json = stormguard::detail::settings_json;
using sj::fail;
using sj::limit_text;
using sj::object_reader;
using sj::quote;

std::string quote_duration(duration d) { return "\"" + format_duration(d) + "\""; }

// One policy object of "strategies", read by config's public parser (the policy file format's
// one reader); its errors name the field under `path` ("strategies[2].backoff.cap").
config::policy read_policy_object(const json& entry, const std::string& path) {
  const json file = {{"policies", json::array({entry})}};
  auto policies = config::parse_policies(file.dump());
  if (policies) return std::move(policies->front());
  constexpr std::string_view inner = "policies[0]";
  // Every mention of the wrapper's path, in the field and inside the message ("must be at least
  // policies[0].backoff.base"), becomes the entry's.
  const auto rebase = [&](std::string_view text) {
    std::string out(text);
    for (std::size_t at = out.find(inner); at != std::string::npos;
         at = out.find(inner, at + path.size())) {
      out.replace(at, inner.size(), path);
    }
    return out;
  };
  throw sj::failure{rebase(policies.error().field), rebase(policies.error().message)};
}

// The policy as an object of the file format (config's normalized writer).
nlohmann::ordered_json policy_object(const config::policy& p) {
  return nlohmann::ordered_json::parse(config::to_json(p));
}

// [strategies]: built-in names and inline policy objects (the policy file format).
std::vector<strategy> read_strategies(const json& list, const std::string& field) {
  constexpr std::size_t k_max_strategies = 100;
  if (!list.is_array() || list.empty() || list.size() > k_max_strategies) {
    fail(field, "must be an array of 1 to " + std::to_string(k_max_strategies) +
                    " entries (built-in strategy names or policy objects), got " + quote(list));
  }
  std::vector<strategy> strategies;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = sj::index_path(field, i);
    const json& entry = list[i];
    if (entry.is_string()) {
      const strategy* builtin = find_strategy(entry.get<std::string>());
      if (builtin == nullptr) {
        fail(path, "unknown strategy " + quote(entry) + " (the built-ins are " + strategy_names() +
                       "; or write a policy object)");
      }
      strategies.push_back(*builtin);
    } else if (entry.is_object()) {
      strategies.push_back(from_policy(read_policy_object(entry, path)));
    } else {
      fail(path, "must be a built-in strategy name or a policy object, got " + quote(entry));
    }
    for (std::size_t j = 0; j + 1 < strategies.size(); ++j) {
      if (strategies[j].name == strategies.back().name) {
        fail(path, "the strategy " + detail::quote_for_message(strategies.back().name) +
                       " is given more than once");
      }
    }
  }
  return strategies;
}

// [server.defences]: an object keyed by defence name, each value its settings (each kind's
// `fields`, stormguard/sim/defence_kinds.hpp).
server_defences read_defences(const json& value, const std::string& field) {
  server_defences d;
  if (value.is_null()) return d;
  std::vector<std::string_view> names;
  for_each_defence_kind([&]<class K>(std::type_identity<K>) { names.push_back(K::name); });
  object_reader top(value, field, names);
  for_each_defence_kind([&]<class K>(std::type_identity<K>) {
    if (!top.has(K::name)) return;
    object_reader r(value[std::string(K::name)], top.field(K::name),
                    settings_json::names<K, typename K::options_type>());
    settings_json::read<K>(r, d.of<K>());
    d.enabled = d.enabled.with<K>();
  });
  return d;
}

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// The struct (or value) a field describes: T for T& and std::optional<T>&.
template <class M>
struct value_of {
  using type = M;
};
template <class T>
struct value_of<std::optional<T>> {
  using type = T;
};
template <class M>
using object_type = typename value_of<std::remove_cv_t<M>>::type;

// The value of a member that may be optional: its address, or null when it is empty.
template <class T>
const T* value_or_null(const T& m) {
  return &m;
}
template <class T>
const T* value_or_null(const std::optional<T>& m) {
  return m ? &*m : nullptr;
}

// The names of the fields one level of the description lists (object_reader's known fields).
struct name_list {
  std::vector<std::string_view> names;
  void add(const fields::spec& f) { names.push_back(f.name); }
  template <class... A>
  void text(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void seed(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void time(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void number(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void integer(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void choice(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void object(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void profile(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void defences(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class... A>
  void strategies(const fields::spec& f, A&&...) {
    add(f);
  }
  template <class P>
  void check(std::string_view, P&&) {}
};

template <class T, class Describe>
std::vector<std::string_view> names_of(Describe&& describe) {
  T defaults{};
  name_list list;
  describe(list, defaults);
  return list.names;
}

// Reads one object of the file into the members the description names (parse_scenario). Every
// error is a strict_json::failure naming the field and quoting the value as written.
class reader {
 public:
  reader(const json& object, std::string path, const std::vector<std::string_view>& known)
      : r_(object, std::move(path), known) {}

  void text(const fields::spec& f, std::string& m, bool non_empty) {
    if (!present(f)) return;
    m = r_.string(f.name);
    if (non_empty && m.empty()) fail(r_.field(f.name), "must not be empty");
  }
  void seed(const fields::spec& f, std::uint64_t& m) {
    if (present(f)) m = r_.seed(f.name);
  }
  template <class M>
  void time(const fields::spec& f, M& m, const fields::interval<duration>& range) {
    if (!present(f)) return;
    m = r_.time(f.name, range.text, [&range](duration d) { return range.contains(d); });
  }
  void number(const fields::spec& f, double& m, const fields::interval<double>& range) {
    if (!present(f)) return;
    const double x = r_.number(f.name);
    if (!range.contains(x)) {
      fail(r_.field(f.name), "must be a number " + range.text + ", got " + value_text(f));
    }
    m = x;
  }
  template <class M>
  void integer(const fields::spec& f, M& m, const fields::interval<std::int64_t>& range) {
    if (!present(f)) return;
    using I = object_type<M>;
    m = static_cast<I>(r_.integer(f.name, *range.lo, *range.hi));
  }
  void profile(const fields::spec& f, client_profile& m) {
    if (!present(f)) return;
    // config's reader, the one reader of a client profile (policy files use it too).
    auto read =
        config::parse_client_profile(r_.object()[std::string(f.name)].dump(), r_.field(f.name));
    if (!read) throw sj::failure{read.error().field, read.error().message};
    m = *read;
  }
  template <class E, std::size_t N>
  void choice(const fields::spec& f, E& m, const fields::names<E, N>& names) {
    if (!present(f)) return;
    const std::string text = r_.string(f.name);
    for (std::size_t i = 0; i < N; ++i) {
      if (names.list[i] == text) {
        m = static_cast<E>(i);
        return;
      }
    }
    fail(r_.field(f.name),
         "must be " + names.text() + ", got " + stormguard::detail::quote_for_message(text));
  }
  template <class M, class Describe>
  void object(const fields::spec& f, M& m, Describe&& describe) {
    if (!present(f)) return;
    const json& value = f.required
                            ? r_.required(f.name, f.nullable ? "an object or null" : "an object")
                            : r_.object()[std::string(f.name)];
    using T = object_type<M>;
    if constexpr (is_optional<M>::value) {
      if (value.is_null()) {
        m.reset();
        return;
      }
    }
    reader inner(value, sj::join_path(r_.path(), f.name), names_of<T>(describe));
    if constexpr (is_optional<M>::value) {
      describe(inner, m.emplace());
    } else {
      describe(inner, m);
    }
  }
  void defences(const fields::spec& f, server_defences& m) {
    if (present(f)) m = read_defences(r_.object()[std::string(f.name)], r_.field(f.name));
  }
  void strategies(const fields::spec& f, std::vector<strategy>& m) {
    if (present(f)) m = read_strategies(r_.object()[std::string(f.name)], r_.field(f.name));
  }
  template <class Problem>
  void check(std::string_view name, Problem&& problem) {
    if (auto message = problem()) fail(r_.field(name), *message);
  }

 private:
  // Whether to read the field: a required one always (its absence is an error), an optional one
  // when the object has it.
  [[nodiscard]] bool present(const fields::spec& f) const { return f.required || r_.has(f.name); }
  [[nodiscard]] std::string value_text(const fields::spec& f) const {
    return quote(r_.object()[std::string(f.name)]);
  }

  object_reader r_;
};

scenario read_scenario(const json& doc) {
  if (!doc.is_object()) fail("", "a scenario must be a JSON object, got " + quote(doc));
  scenario s;
  const auto describe = [](auto& v, auto& x) { fields::describe(v, x); };
  reader top(doc, "", names_of<scenario>(describe));
  fields::describe(top, s);
  if (auto problem = validate(s)) throw sj::failure{problem->field, problem->message};
  return s;
}

}  // namespace

namespace fields {

std::optional<std::string> request_bound_problem(const scenario& s) {
  const double seconds = std::chrono::duration<double>(s.length).count();
  const double expected_requests = s.requests_per_second * seconds;
  if (!(expected_requests > static_cast<double>(k_max_requests))) return std::nullopt;
  // The memory of one run at the limit, by the formula the simulator budgets with.
  scenario at_limit = s;
  at_limit.requests_per_second = static_cast<double>(k_max_requests) / seconds;
  const double mb = std::round(estimated_run_bytes(at_limit) / 1e6);
  return "requests_per_second x duration must be at most " + std::to_string(k_max_requests) +
         " logical requests (a memory bound: a run keeps about " + detail::format_double(mb) +
         " MB at the limit), got " + detail::format_double(s.requests_per_second) + " x " +
         format_duration(s.length) + " = " + detail::format_double(expected_requests);
}

}  // namespace fields

namespace {

// Checks the members against the description's ranges (validate); keeps the first violation.
class checker {
 public:
  checker(std::string path, const scenario& whole) : path_(std::move(path)), whole_(whole) {}

  std::optional<scenario_error> problem;

  void text(const fields::spec& f, const std::string& m, bool non_empty) {
    if (non_empty && m.empty()) report(f.name, "must not be empty");
  }
  void seed(const fields::spec&, std::uint64_t) {}
  template <class M>
  void time(const fields::spec& f, const M& m, const fields::interval<duration>& range) {
    const duration* d = value_or_null(m);
    if (d != nullptr && !range.contains(*d)) {
      report(f.name, "must be " + range.text + ", got " + quote_duration(*d));
    }
  }
  void number(const fields::spec& f, double m, const fields::interval<double>& range) {
    if (!range.contains(m)) {
      report(f.name, "must be a number " + range.text + ", got " + detail::format_double(m));
    }
  }
  template <class I>
  void integer(const fields::spec& f, const I& m, const fields::interval<std::int64_t>& range) {
    if constexpr (is_optional<I>::value) {
      if (m) integer(f, *m, range);
    } else if (!range.contains(static_cast<std::int64_t>(m))) {
      report(f.name, "must be an integer " + range.text + ", got " + std::to_string(m));
    }
  }
  void profile(const fields::spec&, const client_profile&) {}
  template <class E, std::size_t N>
  void choice(const fields::spec& f, E m, const fields::names<E, N>& names) {
    if (static_cast<std::size_t>(m) >= N) report(f.name, "must be " + names.text());
  }
  template <class M, class Describe>
  void object(const fields::spec& f, const M& m, Describe&& describe) {
    if (problem) return;
    checker inner(sj::join_path(path_, f.name), whole_);
    if constexpr (is_optional<M>::value) {
      if (!m) return;
      describe(inner, *m);
    } else {
      describe(inner, m);
    }
    problem = std::move(inner.problem);
  }
  void defences(const fields::spec& f, const server_defences& d) {
    // The defences' own classes are the rule for their parameters (engine::check_defence).
    for_each_defence_kind([&]<class K>(std::type_identity<K>) {
      if (problem || !d.enabled.has<K>()) return;
      try {
        engine::check_defence<K>(d.of<K>(), whole_);
      } catch (const std::invalid_argument& e) {
        // The field path says where, the class's own message (without its prefix) which setting.
        report(std::string(f.name) + "." + std::string(K::name), sj::library_message(e));
      }
    });
  }
  void strategies(const fields::spec&, const std::vector<strategy>&) {}
  template <class Problem>
  void check(std::string_view name, Problem&& rule) {
    if (problem) return;
    if (auto message = rule()) report(name, *message);
  }

 private:
  void report(std::string_view name, const std::string& message) {
    if (problem) return;
    std::string field = sj::join_path(path_, name);
    problem = scenario_error{field, field + ": " + message};
  }

  std::string path_;
  const scenario& whole_;
};

// Multiplies the per-server parameters by the factor (scale_scenario).
struct scaler {
  double factor;

  template <class... A>
  void text(A&&...) {}
  template <class... A>
  void seed(A&&...) {}
  template <class... A>
  void time(A&&...) {}
  template <class... A>
  void profile(A&&...) {}
  template <class... A>
  void choice(A&&...) {}
  template <class... A>
  void strategies(A&&...) {}
  template <class... A>
  void check(A&&...) {}

  void number(const fields::spec& f, double& m, const fields::interval<double>&) const {
    if (f.scale != fields::scaling::none) m *= factor;
  }
  template <class I>
  void integer(const fields::spec& f, I& m, const fields::interval<std::int64_t>&) const {
    if constexpr (!is_optional<I>::value) {
      const double x = static_cast<double>(m) * factor;
      switch (f.scale) {
        case fields::scaling::none:
          return;
        case fields::scaling::times:
        case fields::scaling::rounded:
          m = static_cast<I>(std::llround(x));
          return;
        case fields::scaling::rounded_at_least_one:
          m = static_cast<I>(std::max<std::int64_t>(1, std::llround(x)));
          return;
      }
    }
  }
  template <class M, class Describe>
  void object(const fields::spec&, M& m, Describe&& describe) {
    if constexpr (is_optional<M>::value) {
      if (m) describe(*this, *m);
    } else {
      describe(*this, m);
    }
  }
  void defences(const fields::spec&, server_defences& d) const {
    // Each defence's per-server parameters (its kind's `scale`; every kind's, enabled or not).
    for_each_defence_kind([&]<class K>(std::type_identity<K>) {
      if constexpr (requires { K::scale(d.of<K>(), factor); }) K::scale(d.of<K>(), factor);
    });
  }
};

// Writes the members as the file format (to_json).
class writer {
 public:
  explicit writer(nlohmann::ordered_json& out) : out_(out) {}

  void text(const fields::spec& f, const std::string& m, bool) { at(f) = m; }
  void seed(const fields::spec& f, std::uint64_t m) { at(f) = m; }
  template <class M>
  void time(const fields::spec& f, const M& m, const fields::interval<duration>&) {
    if (const duration* d = value_or_null(m)) at(f) = format_duration(*d);
  }
  void number(const fields::spec& f, double m, const fields::interval<double>&) {
    if (f.write_default || m != 0.0) at(f) = m;
  }
  template <class I>
  void integer(const fields::spec& f, const I& m, const fields::interval<std::int64_t>&) {
    if constexpr (is_optional<I>::value) {
      if (m) at(f) = *m;
    } else {
      at(f) = m;
    }
  }
  void profile(const fields::spec& f, const client_profile& m) {
    if (f.write_default || m != client_profile{}) {
      at(f) = nlohmann::ordered_json::parse(config::to_json(m));
    }
  }
  template <class E, std::size_t N>
  void choice(const fields::spec& f, E m, const fields::names<E, N>& names) {
    at(f) = std::string(names.list.at(static_cast<std::size_t>(m)));
  }
  template <class M, class Describe>
  void object(const fields::spec& f, const M& m, Describe&& describe) {
    if constexpr (is_optional<M>::value) {
      if (!m) {
        if (f.required) at(f) = nullptr;
        return;
      }
      writer inner(at(f));
      describe(inner, *m);
    } else {
      writer inner(at(f));
      describe(inner, m);
    }
  }
  void defences(const fields::spec& f, const server_defences& d) {
    if (d.enabled.empty()) return;
    auto& out = at(f);
    for_each_defence_kind([&]<class K>(std::type_identity<K>) {
      if (!d.enabled.has<K>()) return;
      settings_json::write<K>(d.of<K>(), out[std::string(K::name)]);
    });
  }
  void strategies(const fields::spec& f, const std::vector<strategy>& list) {
    if (list.empty()) return;
    auto& out = at(f) = nlohmann::ordered_json::array();
    for (const strategy& strat : list) {
      const strategy* builtin = find_strategy(strat.name);
      if (builtin != nullptr && *builtin == strat) {
        out.push_back(strat.name);
        continue;
      }
      // The policy the strategy runs, whole (a strategy is a policy).
      out.push_back(policy_object(strat.as_policy()));
    }
  }
  template <class P>
  void check(std::string_view, P&&) {}

 private:
  nlohmann::ordered_json& at(const fields::spec& f) { return out_[std::string(f.name)]; }

  nlohmann::ordered_json& out_;
};

}  // namespace

std::optional<scenario_error> validate(const scenario& s) {
  checker check("", s);
  fields::describe(check, s);
  return std::move(check.problem);
}

scenario_result scale_scenario(const scenario& s, double factor) {
  if (!(factor > 0.0 && factor <= 1.0)) {  // also NaN
    return failure{scenario_error{
        "scale", "scale: must be a number in (0, 1], got " + detail::format_double(factor)}};
  }
  scenario scaled = s;
  if (factor != 1.0) {
    scaler scale{factor};
    fields::describe(scale, scaled);
  }
  if (auto problem = validate(scaled)) return failure{*std::move(problem)};
  return scaled;
}

std::string to_json(const scenario& s) {
  nlohmann::ordered_json doc;
  writer write(doc);
  fields::describe(write, s);
  return engine::dump_json(doc, 2) + "\n";
}

scenario_result parse_scenario(std::string_view json_text) {
  try {
    return read_scenario(sj::parse(json_text, k_max_depth, "scenario", " (a scenario needs 2)"));
  } catch (const sj::failure& f) {
    return failure{scenario_error{f.field, f.message}};
  } catch (const json::exception& e) {  // not expected: every access is checked first
    return failure{scenario_error{"", std::string("invalid scenario: ") + e.what()}};
  }
}

scenario_result load_scenario(const std::filesystem::path& path) {
  std::string text;
  try {
    text = sj::read_file(path, k_max_file_bytes, "scenario");
  } catch (const sj::failure& f) {
    return failure{scenario_error{f.field, f.message}};
  }
  auto result = parse_scenario(text);
  if (!result) result.error().message = path.string() + ": " + result.error().message;
  return result;
}

namespace {

// The built-in scenario of that name, parsed from its embedded file (builtin_scenarios.hpp).
std::optional<scenario> parse_builtin(std::string_view name) {
  for (const auto& file : embedded::builtin_scenario_files()) {
    if (file.name != name) continue;
    auto parsed = parse_scenario(file.json);
    if (!parsed) {
      throw std::logic_error("stormguard::sim: the built-in scenario " + std::string(name) +
                             " is invalid: " + parsed.error().message);
    }
    return *std::move(parsed);
  }
  return std::nullopt;
}

}  // namespace

std::optional<scenario> builtin_scenario(std::string_view name) { return parse_builtin(name); }

std::string builtin_scenario_names() {
  std::string names;
  for (const auto& file : embedded::builtin_scenario_files()) {
    names += (names.empty() ? "" : ", ") + std::string(file.name);
  }
  return names;
}

}  // namespace stormguard::sim
