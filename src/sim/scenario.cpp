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
#include "stormguard/config/policy.hpp"
#include "stormguard/detail/enum_names.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/sim/simulator.hpp"
#include "stormguard_engine/defences.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::sim {

namespace {

using json = nlohmann::json;

constexpr std::int64_t k_max_requests = 10'000'000;
constexpr int k_max_clients = 100'000;
constexpr int k_max_workers = 1'000'000;
constexpr std::int64_t k_max_queue_limit = 100'000'000;
constexpr duration k_max_length = std::chrono::hours(1);
constexpr duration k_max_timeout = std::chrono::hours(1);
constexpr duration k_max_service_time = std::chrono::hours(1);
constexpr std::size_t k_max_file_bytes = 1024 * 1024;
constexpr int k_max_depth = 64;
constexpr int k_max_retries = 1000;

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
  const auto rebase = [&](std::string_view text) {
    return text.starts_with(inner) ? path + std::string(text.substr(inner.size()))
                                   : std::string(text);
  };
  throw sj::failure{rebase(policies.error().field), rebase(policies.error().message)};
}

// The policy as an object of the file format (config's normalized writer).
nlohmann::ordered_json policy_object(const config::policy& p) {
  return nlohmann::ordered_json::parse(config::to_json(p));
}

// [strategies]: built-in names and inline policy objects (the policy file format).
std::vector<strategy> read_strategies(const json& list) {
  constexpr std::size_t k_max_strategies = 100;
  if (!list.is_array() || list.empty() || list.size() > k_max_strategies) {
    fail("strategies", "must be an array of 1 to " + std::to_string(k_max_strategies) +
                           " entries (built-in strategy names or policy objects), got " +
                           quote(list));
  }
  std::vector<strategy> strategies;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = sj::index_path("strategies", i);
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

// A JSON boolean field, or `fallback` when absent.
bool read_bool(const object_reader& r, std::string_view key, bool fallback) {
  if (!r.has(key)) return fallback;
  const json& v = r.object()[std::string(key)];
  if (!v.is_boolean()) fail(r.field(key), "must be true or false, got " + quote(v));
  return v.get<bool>();
}

// [server.defences]: an object keyed by defence name, each value its settings (each kind's
// `fields`, stormguard/sim/defence_kinds.hpp).
server_defences read_defences(const json& value) {
  server_defences d;
  if (value.is_null()) return d;
  std::vector<std::string_view> names;
  for_each_defence_kind([&]<class K>(std::type_identity<K>) { names.push_back(K::name); });
  object_reader top(value, "server.defences", names);
  for_each_defence_kind([&]<class K>(std::type_identity<K>) {
    if (!top.has(K::name)) return;
    object_reader r(value[std::string(K::name)], top.field(K::name),
                    settings_json::names<K, typename K::options_type>());
    settings_json::read<K>(r, d.of<K>());
    d.enabled = d.enabled.with<K>();
  });
  return d;
}

scenario read_scenario(const json& doc) {
  if (!doc.is_object()) fail("", "a scenario must be a JSON object, got " + quote(doc));
  object_reader top(doc, "",
                    {"name", "description", "seed", "duration", "requests_per_second", "clients",
                     "timeout", "server", "incident", "max_retries", "strategies",
                     "clients_label_attempts", "clients_honour_pushback"});
  scenario s;
  s.name = top.string("name");
  if (top.has("description")) s.description = top.string("description");
  s.seed = top.seed("seed");
  s.length = top.positive_time("duration", k_max_length);
  s.requests_per_second = top.number("requests_per_second");
  s.clients = static_cast<int>(top.integer("clients", 1, k_max_clients));
  s.timeout = top.positive_time("timeout", k_max_timeout);

  object_reader server(top.required("server", "an object"), "server",
                       {"workers", "queue_limit", "service_time", "service_distribution",
                        "overload", "defences", "stall"});
  s.workers = static_cast<int>(server.integer("workers", 1, k_max_workers));
  s.queue_limit = server.integer("queue_limit", 0, k_max_queue_limit);
  s.service_time = server.positive_time("service_time", k_max_service_time);
  if (server.has("service_distribution")) {
    const std::string d = server.string("service_distribution");
    if (d == "fixed") {
      s.distribution = service_distribution::fixed;
    } else if (d == "exponential") {
      s.distribution = service_distribution::exponential;
    } else {
      fail("server.service_distribution",
           "must be \"fixed\" or \"exponential\", got " + detail::quote_for_message(d));
    }
  }

  if (server.has("defences")) s.defences = read_defences(doc["server"]["defences"]);
  s.clients_label_attempts = read_bool(top, "clients_label_attempts", true);
  s.clients_honour_pushback = read_bool(top, "clients_honour_pushback", true);

  if (server.has("overload") && !doc["server"]["overload"].is_null()) {
    object_reader overload_reader(doc["server"]["overload"], "server.overload",
                                  {"above_rate", "service_time"});
    overload o;
    o.above_rate = overload_reader.number("above_rate");
    if (!std::isfinite(o.above_rate) || o.above_rate <= 0.0) {
      fail("server.overload.above_rate", "must be a number > 0 (attempts per second), got " +
                                             quote(doc["server"]["overload"]["above_rate"]));
    }
    o.service_time = overload_reader.positive_time("service_time", k_max_service_time);
    s.overload = o;
  }
  if (server.has("stall") && !doc["server"]["stall"].is_null()) {
    object_reader stall_reader(doc["server"]["stall"], "server.stall", {"probability", "duration"});
    stall st;
    st.probability = stall_reader.number("probability");
    if (!(st.probability > 0.0 && st.probability <= 1.0)) {
      fail("server.stall.probability",
           "must be a number in (0, 1], got " + quote(doc["server"]["stall"]["probability"]));
    }
    st.length = stall_reader.positive_time("duration", k_max_service_time);
    s.stall = st;
  }

  const json& inc = top.required("incident", "an object or null");
  if (!inc.is_null()) {
    object_reader incident_reader(inc, "incident",
                                  {"start", "end", "service_time", "error_rate", "loss_rate"});
    const duration length = s.length;
    const duration start =
        incident_reader.time("start", "in [0, duration) = [0, " + format_duration(length) + ")",
                             [length](duration d) { return d >= duration::zero() && d < length; });
    const duration end =
        incident_reader.time("end", "after incident.start (" + format_duration(start) + ")",
                             [start](duration d) { return d > start; });
    incident i{start, end, std::nullopt, 0.0, 0.0};
    if (incident_reader.has("service_time")) {
      i.service_time = incident_reader.positive_time("service_time", k_max_service_time);
    }
    const auto fraction = [&](std::string_view key) {
      const double value = incident_reader.number(key);
      if (!(value >= 0.0 && value <= 1.0)) {
        fail(incident_reader.field(key),
             "must be a number in [0, 1], got " + quote(inc[std::string(key)]));
      }
      return value;
    };
    if (incident_reader.has("error_rate")) i.error_rate = fraction("error_rate");
    if (incident_reader.has("loss_rate")) i.loss_rate = fraction("loss_rate");
    s.incident = i;
  }

  if (top.has("max_retries")) {
    s.max_retries = static_cast<int>(top.integer("max_retries", 1, k_max_retries));
  }

  if (top.has("strategies")) s.strategies = read_strategies(doc["strategies"]);

  if (auto problem = validate(s)) throw sj::failure{problem->field, problem->message};
  return s;
}

}  // namespace

namespace {
constexpr std::array<std::string_view, 2> k_service_distribution_names{"fixed", "exponential"};
}  // namespace

std::string_view to_string(service_distribution value) noexcept {
  return detail::enum_name(value, k_service_distribution_names);
}

// One duration grammar for files and command lines: the core's (stormguard/duration_text.hpp).
namespace {

// A scenario_error for `field`, its message prefixed with the field.
scenario_error field_error(std::string field, const std::string& problem) {
  std::string message = field + ": " + problem;
  return scenario_error{std::move(field), std::move(message)};
}

// The incident's fields, for a scenario of `length`.
std::optional<scenario_error> validate_incident(const incident& inc, duration length) {
  const auto error = field_error;
  if (inc.start < duration::zero() || inc.start >= length) {
    return error("incident.start", "must be >= 0 and before duration (" + format_duration(length) +
                                       "), got " + quote_duration(inc.start));
  }
  if (inc.end <= inc.start) {
    return error("incident.end", "must be after incident.start (" + format_duration(inc.start) +
                                     "), got " + quote_duration(inc.end));
  }
  if (inc.service_time &&
      (*inc.service_time <= duration::zero() || *inc.service_time > k_max_service_time)) {
    return error("incident.service_time", "must be in (0, " + limit_text(k_max_service_time) +
                                              "], got " + quote_duration(*inc.service_time));
  }
  if (!(inc.error_rate >= 0.0 && inc.error_rate <= 1.0)) {
    return error("incident.error_rate",
                 "must be a number in [0, 1], got " + detail::format_double(inc.error_rate));
  }
  if (!(inc.loss_rate >= 0.0 && inc.loss_rate <= 1.0)) {
    return error("incident.loss_rate",
                 "must be a number in [0, 1], got " + detail::format_double(inc.loss_rate));
  }
  if (inc.error_rate + inc.loss_rate > 1.0) {
    return error("incident.loss_rate", "error_rate + loss_rate must be at most 1, got " +
                                           detail::format_double(inc.error_rate) + " + " +
                                           detail::format_double(inc.loss_rate));
  }
  return std::nullopt;
}

// The server's overload fields.
std::optional<scenario_error> validate_overload(const overload& o) {
  const auto error = field_error;
  if (!std::isfinite(o.above_rate) || o.above_rate <= 0.0) {
    return error("server.overload.above_rate",
                 "must be a number > 0, got " + detail::format_double(o.above_rate));
  }
  if (o.service_time <= duration::zero() || o.service_time > k_max_service_time) {
    return error("server.overload.service_time", "must be in (0, " +
                                                     limit_text(k_max_service_time) + "], got " +
                                                     quote_duration(o.service_time));
  }
  return std::nullopt;
}

}  // namespace

std::optional<scenario_error> validate(const scenario& s) {
  const auto error = field_error;
  if (s.name.empty()) return error("name", "must not be empty");
  if (s.length <= duration::zero() || s.length > k_max_length) {
    return error("duration", "must be in (0, " + limit_text(k_max_length) + "], got " +
                                 quote_duration(s.length));
  }
  if (!std::isfinite(s.requests_per_second) || s.requests_per_second <= 0.0) {
    return error("requests_per_second",
                 "must be a number > 0, got " + detail::format_double(s.requests_per_second));
  }
  const double expected_requests =
      s.requests_per_second * std::chrono::duration<double>(s.length).count();
  if (expected_requests > static_cast<double>(k_max_requests)) {
    // The memory of one run at the limit, by the formula the simulator budgets with.
    scenario at_limit = s;
    at_limit.requests_per_second =
        static_cast<double>(k_max_requests) / std::chrono::duration<double>(s.length).count();
    const double mb = std::round(estimated_run_bytes(at_limit) / 1e6);
    return error(
        "requests_per_second",
        "requests_per_second x duration must be at most " + std::to_string(k_max_requests) +
            " logical requests (a memory bound: a run keeps about " + detail::format_double(mb) +
            " MB at the limit), got " + detail::format_double(s.requests_per_second) + " x " +
            format_duration(s.length) + " = " + detail::format_double(expected_requests));
  }
  if (s.clients < 1 || s.clients > k_max_clients) {
    return error("clients", "must be an integer in [1, " + std::to_string(k_max_clients) +
                                "], got " + std::to_string(s.clients));
  }
  if (s.timeout <= duration::zero() || s.timeout > k_max_timeout) {
    return error("timeout", "must be in (0, " + limit_text(k_max_timeout) + "], got " +
                                quote_duration(s.timeout));
  }
  if (s.workers < 1 || s.workers > k_max_workers) {
    return error("server.workers", "must be an integer in [1, " + std::to_string(k_max_workers) +
                                       "], got " + std::to_string(s.workers));
  }
  if (s.queue_limit < 0 || s.queue_limit > k_max_queue_limit) {
    return error("server.queue_limit", "must be an integer in [0, " +
                                           std::to_string(k_max_queue_limit) + "], got " +
                                           std::to_string(s.queue_limit));
  }
  if (s.service_time <= duration::zero() || s.service_time > k_max_service_time) {
    return error("server.service_time", "must be in (0, " + limit_text(k_max_service_time) +
                                            "], got " + quote_duration(s.service_time));
  }
  if (s.distribution != service_distribution::fixed &&
      s.distribution != service_distribution::exponential) {
    return error("server.service_distribution", "must be \"fixed\" or \"exponential\"");
  }
  if (s.incident) {
    if (auto problem = validate_incident(*s.incident, s.length)) return problem;
  }
  if (s.overload) {
    if (auto problem = validate_overload(*s.overload)) return problem;
  }
  if (s.stall) {
    if (!(s.stall->probability > 0.0 && s.stall->probability <= 1.0)) {
      return error("server.stall.probability",
                   "must be in (0, 1], got " + detail::format_double(s.stall->probability));
    }
    if (s.stall->length <= duration::zero() || s.stall->length > k_max_service_time) {
      return error("server.stall.duration", "must be in (0, " + limit_text(k_max_service_time) +
                                                "], got " + quote_duration(s.stall->length));
    }
  }
  if (s.max_retries && (*s.max_retries < 1 || *s.max_retries > k_max_retries)) {
    return error("max_retries", "must be an integer in [1, " + std::to_string(k_max_retries) +
                                    "], got " + std::to_string(*s.max_retries));
  }
  // The defences' own classes are the rule for their parameters (engine::check_defence).
  std::optional<scenario_error> problem;
  for_each_defence_kind([&]<class K>(std::type_identity<K>) {
    if (problem || !s.defences.enabled.has<K>()) return;
    try {
      engine::check_defence<K>(s.defences.of<K>(), s);
    } catch (const std::invalid_argument& e) {
      problem = error("server.defences." + std::string(K::name), e.what());
    }
  });
  return problem;
}

scenario_result scale_scenario(const scenario& s, double factor) {
  if (!(factor > 0.0 && factor <= 1.0)) {  // also NaN
    return failure{scenario_error{
        "scale", "scale: must be a number in (0, 1], got " + detail::format_double(factor)}};
  }
  scenario scaled = s;
  if (factor != 1.0) {
    const auto at_least_one = [](double x) { return std::max<std::int64_t>(1, std::llround(x)); };
    scaled.requests_per_second = s.requests_per_second * factor;
    scaled.clients = static_cast<int>(at_least_one(s.clients * factor));
    scaled.workers = static_cast<int>(at_least_one(s.workers * factor));
    scaled.queue_limit = std::llround(static_cast<double>(s.queue_limit) * factor);
    if (scaled.overload) scaled.overload->above_rate = s.overload->above_rate * factor;
    // Each defence's per-server parameters (its kind's `scale`; every kind's, enabled or not).
    for_each_defence_kind([&]<class K>(std::type_identity<K>) {
      if constexpr (requires { K::scale(scaled.defences.of<K>(), factor); }) {
        K::scale(scaled.defences.of<K>(), factor);
      }
    });
  }
  if (auto problem = validate(scaled)) return failure{*std::move(problem)};
  return scaled;
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

std::string to_json(const scenario& s) {
  nlohmann::ordered_json doc;
  doc["name"] = s.name;
  doc["description"] = s.description;
  doc["seed"] = s.seed;
  doc["duration"] = format_duration(s.length);
  doc["requests_per_second"] = s.requests_per_second;
  doc["clients"] = s.clients;
  doc["timeout"] = format_duration(s.timeout);
  doc["server"]["workers"] = s.workers;
  doc["server"]["queue_limit"] = s.queue_limit;
  doc["server"]["service_time"] = format_duration(s.service_time);
  doc["server"]["service_distribution"] = std::string(to_string(s.distribution));
  if (s.overload) {
    doc["server"]["overload"]["above_rate"] = s.overload->above_rate;
    doc["server"]["overload"]["service_time"] = format_duration(s.overload->service_time);
  }
  if (!s.defences.enabled.empty()) {
    auto& out = doc["server"]["defences"];
    for_each_defence_kind([&]<class K>(std::type_identity<K>) {
      if (!s.defences.enabled.has<K>()) return;
      settings_json::write<K>(s.defences.of<K>(), out[std::string(K::name)]);
    });
  }
  if (s.stall) {
    doc["server"]["stall"]["probability"] = s.stall->probability;
    doc["server"]["stall"]["duration"] = format_duration(s.stall->length);
  }
  if (s.incident) {
    doc["incident"]["start"] = format_duration(s.incident->start);
    doc["incident"]["end"] = format_duration(s.incident->end);
    if (s.incident->service_time) {
      doc["incident"]["service_time"] = format_duration(*s.incident->service_time);
    }
    if (s.incident->error_rate != 0.0) doc["incident"]["error_rate"] = s.incident->error_rate;
    if (s.incident->loss_rate != 0.0) doc["incident"]["loss_rate"] = s.incident->loss_rate;
  } else {
    doc["incident"] = nullptr;
  }
  if (s.max_retries) doc["max_retries"] = *s.max_retries;
  if (!s.clients_label_attempts) doc["clients_label_attempts"] = false;
  if (!s.clients_honour_pushback) doc["clients_honour_pushback"] = false;
  if (!s.strategies.empty()) {
    doc["strategies"] = nlohmann::ordered_json::array();
    for (const strategy& strat : s.strategies) {
      const strategy* builtin = find_strategy(strat.name);
      if (builtin != nullptr && *builtin == strat) {
        doc["strategies"].push_back(strat.name);
        continue;
      }
      // The policy the strategy runs, whole (a strategy is a policy).
      doc["strategies"].push_back(policy_object(strat.as_policy()));
    }
  }
  return engine::dump_json(doc, 2) + "\n";
}

}  // namespace stormguard::sim
