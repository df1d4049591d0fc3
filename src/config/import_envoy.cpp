// SPDX-License-Identifier: Apache-2.0
// The Envoy importer: an Envoy route retry_policy, route configuration or bootstrap (JSON or
// YAML) mapped onto stormguard policies. The mapping table, and what cannot be mapped (reported
// in policy::warnings), are in docs/policy.md.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/policy_json.hpp"
#include "detail/strict_json.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/duration_text.hpp"

namespace stormguard::config::detail {

namespace {

namespace sj = stormguard::detail::strict_json;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr duration k_max_interval = 1h;
constexpr std::size_t k_max_yaml_nodes = 100'000;

// ---------------------------------------------------------------------------------------------
// Envoy: route retry_policy (envoy.config.route.v3.RetryPolicy) and the cluster's retry budget
// (envoy.config.cluster.v3.CircuitBreakers.Thresholds.RetryBudget)
// ---------------------------------------------------------------------------------------------

// Envoy's retry_on conditions: what each maps to.
// A gRPC condition's `statuses` holds its gRPC status code (x-envoy-retry-grpc-on).
enum class envoy_condition { statuses, transport, grpc, unmapped };
struct envoy_retry_on {
  std::string_view name;
  envoy_condition kind;
  std::vector<int> statuses;
};
const std::vector<envoy_retry_on>& envoy_conditions() {
  static const std::vector<envoy_retry_on> table = [] {
    std::vector<int> all5xx;
    for (int s = 500; s <= 599; ++s) all5xx.push_back(s);
    return std::vector<envoy_retry_on>{
        {"5xx", envoy_condition::statuses, all5xx},
        {"gateway-error", envoy_condition::statuses, {502, 503, 504}},
        {"retriable-4xx", envoy_condition::statuses, {409}},
        {"retriable-status-codes", envoy_condition::statuses, {}},
        {"reset", envoy_condition::transport, {}},
        {"reset-before-request", envoy_condition::transport, {}},
        {"connect-failure", envoy_condition::transport, {}},
        {"refused-stream", envoy_condition::transport, {}},
        {"http3-post-connect-failure", envoy_condition::transport, {}},
        {"envoy-ratelimited", envoy_condition::unmapped, {}},
        {"retriable-headers", envoy_condition::unmapped, {}},
        {"cancelled", envoy_condition::grpc, {1}},
        {"deadline-exceeded", envoy_condition::grpc, {4}},
        {"internal", envoy_condition::grpc, {13}},
        {"resource-exhausted", envoy_condition::grpc, {8}},
        {"unavailable", envoy_condition::grpc, {14}},
    };
  }();
  return table;
}

// The retry budget of `doc` (a cluster, or a route file with the cluster's settings beside it):
// its retry_budget, or circuit_breakers.thresholds[].retry_budget / max_retries; Envoy's default
// (with a note) when it has none. `prefix` is the path of `doc` in the file.
budget_options envoy_budget(const json& doc, std::vector<std::string>& notes,
                            const std::string& prefix = "") {
  const auto retry_budget = [](const json& value, const std::string& path) {
    sj::object_reader b(value, path, {"budget_percent", "min_retry_concurrency"});
    concurrency_budget_options o;
    if (b.has("budget_percent")) {
      sj::object_reader percent(value["budget_percent"], b.field("budget_percent"), {"value"});
      o.budget_percent = percent.number_between("value", 0, 100);
    }
    if (b.has("min_retry_concurrency")) {
      o.min_retry_concurrency = b.integer("min_retry_concurrency", 0, 1'000'000);
    }
    return o;
  };
  if (doc.contains("retry_budget")) {
    return retry_budget(doc["retry_budget"], sj::join_path(prefix, "retry_budget"));
  }
  if (doc.contains("circuit_breakers")) {
    const json& cb = doc["circuit_breakers"];
    const std::string cb_path = sj::join_path(prefix, "circuit_breakers");
    if (!cb.is_object() || !cb.contains("thresholds") || !cb["thresholds"].is_array()) {
      sj::fail(cb_path, "must be an object with a \"thresholds\" array, got " + sj::quote(cb));
    }
    const json& thresholds = cb["thresholds"];
    for (std::size_t i = 0; i < thresholds.size(); ++i) {
      const std::string path = sj::index_path(cb_path + ".thresholds", i);
      if (!thresholds[i].is_object())
        sj::fail(path, "must be an object, got " + sj::quote(thresholds[i]));
      if (thresholds[i].contains("retry_budget")) {
        return retry_budget(thresholds[i]["retry_budget"], path + ".retry_budget");
      }
      if (thresholds[i].contains("max_retries")) {
        sj::object_reader t(thresholds[i], path,
                            {"priority", "max_connections", "max_pending_requests", "max_requests",
                             "max_retries", "track_remaining", "max_connection_pools"});
        concurrency_budget_options o{0.0, t.integer("max_retries", 0, 1'000'000)};
        return o;
      }
    }
  }
  notes.push_back(
      (prefix.empty() ? std::string() : prefix + ": ") +
      "no retry_budget: Envoy's default circuit breaker allows 3 retries in flight per cluster "
      "(max_retries 3), mapped to the concurrency budget with budget_percent 0 and "
      "min_retry_concurrency 3");
  return concurrency_budget_options{0.0, 3};
}

// The retry_on condition `token` of the retry_policy `r`; an unknown one is an error naming the
// field and listing Envoy's conditions.
const envoy_retry_on& envoy_condition_named(const sj::object_reader& r, const std::string& token) {
  const auto& table = envoy_conditions();
  const auto it = std::find_if(table.begin(), table.end(),
                               [&](const envoy_retry_on& c) { return c.name == token; });
  if (it == table.end()) {
    std::string names;
    for (const auto& c : table) names += (names.empty() ? "" : ", ") + std::string(c.name);
    sj::fail(r.field("retry_on"), "unknown condition " +
                                      stormguard::detail::quote_for_message(token) +
                                      " (Envoy's are " + names + ")");
  }
  return *it;
}

policy read_envoy_policy(const json& value, const std::string& path, std::string name,
                         const budget_options& budget, const std::vector<std::string>& notes) {
  sj::object_reader r(
      value, path,
      {"retry_on", "num_retries", "per_try_timeout", "per_try_idle_timeout", "retry_back_off",
       "rate_limited_retry_back_off", "retriable_status_codes", "retriable_headers",
       "retriable_request_headers", "retry_priority", "retry_host_predicate",
       "host_selection_retry_max_attempts", "retry_options_predicates"});
  policy p;
  p.name = std::move(name);
  check_name(path, p.name);
  p.description = "imported from Envoy " + path;
  p.client = find_client_profile("envoy");  // Envoy's router plays it
  p.budget = budget;
  p.warnings = notes;
  p.retry.max_retries =
      r.has("num_retries") ? static_cast<int>(r.integer("num_retries", 0, 1000)) : 1;
  p.retry.backoff.jitter = jitter::full;
  p.retry.backoff.multiplier = 2.0;
  p.retry.backoff.base = 25ms;
  p.retry.backoff.cap = 250ms;
  if (r.has("retry_back_off")) {
    sj::object_reader b(value["retry_back_off"], r.field("retry_back_off"),
                        {"base_interval", "max_interval"});
    p.retry.backoff.base = proto_duration(b, "base_interval", k_max_interval);
    p.retry.backoff.cap = b.has("max_interval")
                              ? proto_duration(b, "max_interval", k_max_interval)
                              : std::min(p.retry.backoff.base * 10, k_max_interval);
    if (p.retry.backoff.cap < p.retry.backoff.base) {
      sj::fail(b.field("max_interval"), "must be at least base_interval (" +
                                            format_duration(p.retry.backoff.base) + "), got " +
                                            sj::quote(value["retry_back_off"]["max_interval"]));
    }
  }
  if (r.has("per_try_timeout")) p.attempt_timeout = proto_duration(r, "per_try_timeout", 1h);
  std::vector<int> extra;
  if (r.has("retriable_status_codes")) {
    const json& codes = value["retriable_status_codes"];
    if (!codes.is_array() || codes.size() > 500) {
      sj::fail(r.field("retriable_status_codes"),
               "must be an array of HTTP statuses, got " + sj::quote(codes));
    }
    for (std::size_t i = 0; i < codes.size(); ++i) {
      if (!codes[i].is_number_unsigned() || codes[i].get<std::uint64_t>() < 100 ||
          codes[i].get<std::uint64_t>() > 599) {
        sj::fail(sj::index_path(r.field("retriable_status_codes"), i),
                 "must be an HTTP status, an integer in [100, 599], got " + sj::quote(codes[i]));
      }
      extra.push_back(codes[i].get<int>());
    }
  }
  std::vector<int> statuses;
  grpc_codes codes;  // the gRPC conditions' codes
  bool any = false;
  const std::string retry_on = r.has("retry_on") ? r.string("retry_on") : "";
  std::size_t from = 0;
  while (from <= retry_on.size() && !retry_on.empty()) {
    const std::size_t comma = std::min(retry_on.find(',', from), retry_on.size());
    std::string token = retry_on.substr(from, comma - from);
    token.erase(0, token.find_first_not_of(' '));
    token.erase(token.find_last_not_of(' ') + 1);
    from = comma + 1;
    const envoy_retry_on* it = &envoy_condition_named(r, token);
    any = true;
    if (it->kind == envoy_condition::unmapped) {
      p.warnings.push_back(r.field("retry_on") + ": " +
                           stormguard::detail::quote_for_message(token) +
                           " has no stormguard equivalent; ignored");
    }
    if (it->kind == envoy_condition::grpc) {
      codes.insert(it->statuses.front());
      continue;
    }
    const auto& add = it->name == "retriable-status-codes" ? extra : it->statuses;
    statuses.insert(statuses.end(), add.begin(), add.end());
  }
  for (const std::string_view unmapped :
       {"per_try_idle_timeout", "rate_limited_retry_back_off", "retriable_headers",
        "retriable_request_headers", "retry_priority", "retry_host_predicate",
        "host_selection_retry_max_attempts", "retry_options_predicates"}) {
    if (r.has(unmapped)) p.warnings.push_back(r.field(unmapped) + ": not mapped; ignored");
  }
  if (!any) {
    p.warnings.push_back(r.field("retry_on") +
                         ": absent or empty: Envoy retries nothing, so the policy has 0 retries");
    p.retry.max_retries = 0;
  }
  std::sort(statuses.begin(), statuses.end());
  statuses.erase(std::unique(statuses.begin(), statuses.end()), statuses.end());
  p.statuses = retryable_statuses(std::span<const int>(statuses));
  if (!codes.empty()) p.retryable_grpc_codes = codes;
  check_retry(path, p.retry);
  return p;
}

// Envoy's route timeout when a route sets none (RouteAction.timeout): it covers every retry.
constexpr duration k_envoy_default_route_timeout = 15s;

// A route's `timeout` as the policy's deadline: absent → Envoy's default 15 s (with a note);
// "0s" → no deadline (Envoy: disabled).
void read_route_timeout(const json& action, const std::string& path, policy& p) {
  const std::string field = path + ".timeout";
  if (!action.is_object() || !action.contains("timeout")) {
    p.deadline = k_envoy_default_route_timeout;
    p.warnings.push_back(field +
                         ": absent: Envoy's default route timeout, 15s, which covers "
                         "every retry, is the policy's deadline");
    return;
  }
  const json& v = action["timeout"];
  const std::string text = v.is_string() ? v.get<std::string>() : std::string();
  const bool shape = text.size() >= 2 && text.back() == 's' &&
                     std::all_of(text.begin(), text.end() - 1, [](char c) {
                       return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
                     });
  const auto d = shape ? parse_duration(text) : std::nullopt;
  if (!d || *d < duration::zero() || *d > 24h) {
    sj::fail(field,
             "must be a protobuf Duration string such as \"15s\" in [0s, 24h] (0s: no "
             "timeout), got " +
                 sj::quote(v));
  }
  if (*d == duration::zero()) {
    p.deadline = duration::max();
    p.warnings.push_back(field +
                         ": 0s: Envoy applies no route timeout, so the policy has no "
                         "deadline");
  } else {
    p.deadline = *d;
  }
}

// The clusters of a bootstrap (static_resources.clusters), by name.
struct envoy_clusters {
  std::vector<std::pair<std::string, std::size_t>> index;  // name, position
  const json* list = nullptr;
  const json* find(const std::string& name, std::string& path) const {
    for (const auto& [n, i] : index) {
      if (n == name) {
        path = sj::index_path("static_resources.clusters", i);
        return &(*list)[i];
      }
    }
    return nullptr;
  }
};

// Where a route file's policies get their budget: the file's own (a route file with the
// cluster's settings beside it), or the route's cluster in a bootstrap.
struct envoy_budget_source {
  const envoy_clusters* clusters = nullptr;  // a bootstrap: follow each route's cluster
  budget_options file_budget;                // otherwise
  std::vector<std::string> file_notes;
};

// The budget and its notes for a route whose action is `action` (RouteAction) at `path`.
std::pair<budget_options, std::vector<std::string>> route_budget(const envoy_budget_source& src,
                                                                 const json* action,
                                                                 const std::string& path) {
  if (src.clusters == nullptr) return {src.file_budget, src.file_notes};
  std::vector<std::string> notes;
  if (action != nullptr && action->contains("cluster") && (*action)["cluster"].is_string()) {
    const std::string name = (*action)["cluster"].get<std::string>();
    std::string cluster_path;
    if (const json* cluster = src.clusters->find(name, cluster_path)) {
      if (!cluster->is_object())
        sj::fail(cluster_path, "must be an object, got " + sj::quote(*cluster));
      return {envoy_budget(*cluster, notes, cluster_path), notes};
    }
    notes.push_back(path + ".cluster: " + stormguard::detail::quote_for_message(name) +
                    " is not among static_resources.clusters (a dynamic cluster?)");
  } else {
    notes.push_back(path +
                    ": no single cluster (weighted_clusters, cluster_header or another "
                    "action)");
  }
  return {envoy_budget(json::object(), notes, ""), notes};
}

// A RouteConfiguration's policies: each virtual host's retry_policy (named after the host) and
// each route's (host/route name, or host/index), in file order.
void read_route_config(const json& config, const std::string& prefix,
                       const envoy_budget_source& budgets, std::vector<policy>& policies) {
  const std::string hosts_path = sj::join_path(prefix, "virtual_hosts");
  if (!config.is_object() || !config.contains("virtual_hosts")) return;
  const json& hosts = config["virtual_hosts"];
  if (!hosts.is_array()) sj::fail(hosts_path, "must be an array, got " + sj::quote(hosts));
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    const std::string hpath = sj::index_path(hosts_path, h);
    const json& host = hosts[h];
    if (!host.is_object()) sj::fail(hpath, "must be an object, got " + sj::quote(host));
    std::string host_name = std::to_string(h);
    if (host.contains("name")) {
      if (!host["name"].is_string())
        sj::fail(hpath + ".name", "must be a string, got " + sj::quote(host["name"]));
      host_name = host["name"].get<std::string>();
    }
    if (host.contains("retry_policy")) {
      auto [budget, notes] = route_budget(budgets, nullptr, hpath);
      policy p = read_envoy_policy(host["retry_policy"], hpath + ".retry_policy", host_name, budget,
                                   notes);
      read_route_timeout(json::object(), hpath + " (routes without a timeout)", p);
      if (host.contains("hedge_policy")) {
        apply_envoy_hedge_policy(host["hedge_policy"], hpath + ".hedge_policy", p);
      }
      policies.push_back(std::move(p));
    }
    if (!host.contains("routes")) continue;
    const json& routes = host["routes"];
    if (!routes.is_array())
      sj::fail(hpath + ".routes", "must be an array, got " + sj::quote(routes));
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const std::string rpath = sj::index_path(hpath + ".routes", i);
      const json& route = routes[i];
      if (!route.is_object()) sj::fail(rpath, "must be an object, got " + sj::quote(route));
      if (!route.contains("route") || !route["route"].is_object() ||
          !route["route"].contains("retry_policy")) {
        continue;
      }
      std::string name = host_name + "/" + std::to_string(i);
      if (route.contains("name") && route["name"].is_string()) {
        name = host_name + "/" + route["name"].get<std::string>();
      }
      const json& action = route["route"];
      auto [budget, notes] = route_budget(budgets, &action, rpath + ".route");
      policy p = read_envoy_policy(action["retry_policy"], rpath + ".route.retry_policy", name,
                                   budget, notes);
      read_route_timeout(action, rpath + ".route", p);
      if (action.contains("hedge_policy")) {
        apply_envoy_hedge_policy(action["hedge_policy"], rpath + ".route.hedge_policy", p);
      } else if (host.contains("hedge_policy")) {
        apply_envoy_hedge_policy(host["hedge_policy"], hpath + ".hedge_policy", p);
      }
      policies.push_back(std::move(p));
    }
  }
}

// The route configurations of a bootstrap's listeners: every HTTP connection manager filter's
// route_config (a filter with rds instead has its routes elsewhere: counted in `rds`).
void read_bootstrap_listeners(const json& statics, const envoy_budget_source& budgets,
                              std::vector<policy>& policies, std::size_t& rds) {
  if (!statics.contains("listeners")) return;
  const json& listeners = statics["listeners"];
  if (!listeners.is_array()) {
    sj::fail("static_resources.listeners", "must be an array, got " + sj::quote(listeners));
  }
  for (std::size_t l = 0; l < listeners.size(); ++l) {
    const std::string lpath = sj::index_path("static_resources.listeners", l);
    const json& listener = listeners[l];
    if (!listener.is_object() || !listener.contains("filter_chains")) continue;
    const json& chains = listener["filter_chains"];
    for (std::size_t c = 0; chains.is_array() && c < chains.size(); ++c) {
      const std::string cpath = sj::index_path(lpath + ".filter_chains", c);
      if (!chains[c].is_object() || !chains[c].contains("filters")) continue;
      const json& filters = chains[c]["filters"];
      for (std::size_t f = 0; filters.is_array() && f < filters.size(); ++f) {
        const std::string fpath = sj::index_path(cpath + ".filters", f);
        const json& filter = filters[f];
        if (!filter.is_object() || !filter.contains("typed_config")) continue;
        const json& hcm = filter["typed_config"];
        const bool is_hcm = (filter.contains("name") &&
                             filter["name"] == "envoy.filters.network.http_connection_manager") ||
                            (hcm.is_object() && hcm.contains("@type") && hcm["@type"].is_string() &&
                             hcm["@type"].get<std::string>().ends_with(".HttpConnectionManager"));
        if (!is_hcm || !hcm.is_object()) continue;
        if (hcm.contains("rds")) ++rds;
        if (hcm.contains("route_config")) {
          read_route_config(hcm["route_config"], fpath + ".typed_config.route_config", budgets,
                            policies);
        }
      }
    }
  }
}

// A full bootstrap (envoy.config.bootstrap.v3.Bootstrap): static_resources.listeners → HTTP
// connection managers → route_config → virtual_hosts → routes; each route's cluster in
// static_resources.clusters gives its budget.
std::vector<policy> read_envoy_bootstrap(const json& doc) {
  const json& statics = doc["static_resources"];
  if (!statics.is_object()) {
    sj::fail("static_resources", "must be an object, got " + sj::quote(statics));
  }
  envoy_clusters clusters;
  if (statics.contains("clusters")) {
    const json& list = statics["clusters"];
    if (!list.is_array())
      sj::fail("static_resources.clusters", "must be an array, got " + sj::quote(list));
    clusters.list = &list;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (list[i].is_object() && list[i].contains("name") && list[i]["name"].is_string()) {
        clusters.index.emplace_back(list[i]["name"].get<std::string>(), i);
      }
    }
  }
  envoy_budget_source budgets;
  budgets.clusters = &clusters;
  std::vector<policy> policies;
  std::size_t rds = 0;
  read_bootstrap_listeners(statics, budgets, policies, rds);
  if (policies.empty()) {
    sj::fail("static_resources",
             "no route with a retry_policy in the listeners' HTTP connection managers "
             "(route_config.virtual_hosts[].routes[].route.retry_policy or "
             "virtual_hosts[].retry_policy)" +
                 (rds > 0 ? " — " + std::to_string(rds) +
                                " of them take their routes from RDS, which is not in this file"
                          : std::string()));
  }
  check_unique_names(policies, "retry policies");
  return policies;
}

std::vector<policy> read_envoy(const json& doc) {
  if (!doc.is_object()) sj::fail("", "an Envoy file must be an object, got " + sj::quote(doc));
  if (doc.contains("static_resources")) return read_envoy_bootstrap(doc);
  envoy_budget_source budgets;
  budgets.file_budget = envoy_budget(doc, budgets.file_notes);
  std::vector<policy> policies;
  if (doc.contains("retry_policy")) {
    policies.push_back(read_envoy_policy(doc["retry_policy"], "retry_policy", "retry_policy",
                                         budgets.file_budget, budgets.file_notes));
    if (doc.contains("hedge_policy")) {
      apply_envoy_hedge_policy(doc["hedge_policy"], "hedge_policy", policies.back());
    }
  }
  read_route_config(doc, "", budgets, policies);
  if (policies.empty()) {
    sj::fail("",
             "no retry_policy found: expected {\"retry_policy\": {...}}, a route "
             "configuration with virtual_hosts[].retry_policy or "
             "virtual_hosts[].routes[].route.retry_policy, or a bootstrap with "
             "static_resources.listeners");
  }
  check_unique_names(policies, "retry policies");
  return policies;
}

// YAML (yaml-cpp) to JSON, so that one reader serves both. Plain scalars become null, booleans,
// integers or numbers when they read as such (YAML 1.2 core schema), quoted ones stay strings.
// Nesting and the number of nodes are bounded (aliases could otherwise expand exponentially).
class yaml_converter {
 public:
  json convert(const YAML::Node& node, const std::string& path, int depth) {
    if (++nodes_ > k_max_yaml_nodes) {
      sj::fail(path, "more than " + std::to_string(k_max_yaml_nodes) +
                         " YAML nodes (aliases included): not a retry policy");
    }
    if (depth > k_max_depth) {
      sj::fail(path, "nested more than " + std::to_string(k_max_depth) + " levels deep");
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return nullptr;
      case YAML::NodeType::Scalar:
        return scalar(node);
      case YAML::NodeType::Sequence: {
        json array = json::array();
        std::size_t i = 0;
        for (const auto& item : node)
          array.push_back(convert(item, sj::index_path(path, i++), depth + 1));
        return array;
      }
      case YAML::NodeType::Map: {
        json object = json::object();
        for (const auto& item : node) {
          if (!item.first.IsScalar()) sj::fail(path, "a key that is not a string");
          const std::string key = item.first.Scalar();
          const std::string field = sj::join_path(path, key);
          if (object.contains(key))
            sj::fail(sj::field_text(field), "the field appears more than once");
          object[key] = convert(item.second, field, depth + 1);
        }
        return object;
      }
    }
    return nullptr;
  }

 private:
  static json scalar(const YAML::Node& node) {
    const std::string& text = node.Scalar();
    if (node.Tag() == "!") return text;  // quoted
    if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
      return nullptr;
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    // A JSON number (the YAML 1.2 JSON schema) is parsed as JSON; anything else stays a string.
    const bool numeric = text.find_first_not_of("0123456789+-.eE") == std::string::npos;
    if (numeric) {
      const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded() && parsed.is_number()) return parsed;
    }
    return text;
  }
  std::size_t nodes_ = 0;
};

json parse_envoy_text(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    return sj::parse(text, k_max_depth, "Envoy file");
  }
  // yaml-cpp recurses once per level of nesting: bound it first (flow and block style alike, by
  // brackets and by indentation).
  if (auto deep = sj::find_excess_depth(text, k_max_depth)) {
    sj::fail("", "invalid YAML: nested more than " + std::to_string(k_max_depth) +
                     " levels deep at line " + std::to_string(deep->line));
  }
  std::size_t line_start = 0;
  std::size_t line_number = 1;
  while (line_start < text.size()) {
    const std::size_t content = text.find_first_not_of(" -", line_start);
    if (content == std::string_view::npos) break;
    if (content - line_start > 4 * static_cast<std::size_t>(k_max_depth)) {
      sj::fail("", "invalid YAML: indented more than " + std::to_string(4 * k_max_depth) +
                       " columns at line " + std::to_string(line_number));
    }
    const std::size_t end = text.find('\n', line_start);
    if (end == std::string_view::npos) break;
    line_start = end + 1;
    ++line_number;
  }
  YAML::Node root;
  try {
    // Every document, so that a second one is an error rather than silently dropped (as JSON
    // with content after its value is).
    const std::vector<YAML::Node> documents = YAML::LoadAll(std::string(text));
    if (documents.size() > 1) {
      sj::fail("", "a YAML file with " + std::to_string(documents.size()) +
                       " documents: an Envoy route file holds one (split the others into "
                       "files of their own)");
    }
    if (!documents.empty()) root = documents.front();
  } catch (const YAML::Exception& e) {
    sj::fail("", "invalid YAML: " + std::string(e.what()));
  }
  yaml_converter converter;
  return converter.convert(root, "", 0);
}

}  // namespace

std::vector<policy> import_envoy(std::string_view text) {
  return read_envoy(parse_envoy_text(text));
}

}  // namespace stormguard::config::detail
