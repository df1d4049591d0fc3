// SPDX-License-Identifier: Apache-2.0
// The `fleet` object of a ratio budget in policy files (docs/policy.md, "Fleet budget").
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "config/fleet_json.hpp"
#include "detail/settings_json.hpp"
#include "detail/strict_json.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/detail/redis_url.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/fleet_budget.hpp"

namespace stormguard::config::detail {

namespace sj = stormguard::detail::strict_json;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

namespace {

using namespace std::chrono_literals;

constexpr std::size_t k_max_key = 200;
constexpr std::size_t k_max_env_name = 128;

void check_key(const std::string& field, const std::string& key) {
  if (key.empty() || key.size() > k_max_key) {
    sj::fail(field, "must be 1 to 200 characters, got " + std::to_string(key.size()));
  }
  for (const char c : key) {
    if (c < 0x21 || c > 0x7e || c == '{' || c == '}') {
      sj::fail(field,
               "must be printable ASCII without spaces, '{' or '}', got " + sj::quote(json(key)));
    }
  }
}

void check_env_name(const std::string& field, const std::string& name) {
  const auto ok_first = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  bool ok = !name.empty() && name.size() <= k_max_env_name && ok_first(name[0]);
  for (const char c : name) ok = ok && (ok_first(c) || (c >= '0' && c <= '9'));
  if (!ok) {
    sj::fail(field,
             "must be the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*, at most 128 "
             "characters), got " +
                 sj::quote(json(name)));
  }
}

void check_store(const std::string& field, const std::string& url) {
  try {
    (void)stormguard::detail::parse_redis_url(url, "");
  } catch (const std::invalid_argument& e) {
    std::string message = e.what();  // ` "URL": why`, the URL redacted
    if (!message.empty() && message[0] == ' ') message.erase(0, 1);
    sj::fail(field, message);
  }
}

fleet_store_options read_fleet_object(const json& value, const std::string& path,
                                      fleet_budget_options& o) {
  if (!value.is_object()) {
    sj::fail(path,
             "must be an object {\"store\": URL, \"key\": KEY, ...}, got " + sj::quote(value));
  }
  sj::object_reader r(value, path,
                      {"store", "key", "sync_interval", "max_sync_interval", "expected_clients",
                       "password_env", "shards", "ask_for_credit"});
  fleet_store_options store;
  if (r.has("store")) {
    store.url = r.string("store");
    check_store(r.field("store"), store.url);
  }
  (void)r.required("key", "a string: the service's fleet key");
  store.key = r.string("key");
  check_key(r.field("key"), store.key);
  if (r.has("password_env")) {
    store.password_env = r.string("password_env");
    check_env_name(r.field("password_env"), store.password_env);
  }
  if (r.has("sync_interval")) o.sync_interval = r.time_between("sync_interval", 10ms, 10s);
  if (r.has("max_sync_interval")) {
    o.max_sync_interval = r.time_between("max_sync_interval", o.sync_interval, 60s);
  } else if (o.max_sync_interval < o.sync_interval) {
    o.max_sync_interval = o.sync_interval;  // the default (2 s) below a longer sync_interval
  }
  if (r.has("expected_clients")) o.expected_clients = r.integer("expected_clients", 0, 10'000'000);
  if (r.has("ask_for_credit")) {
    const json& v = value["ask_for_credit"];
    if (!v.is_boolean())
      sj::fail(r.field("ask_for_credit"), "must be a boolean, got " + sj::quote(v));
    o.ask_for_credit = v.get<bool>();
  }
  if (r.has("shards")) {
    const json& k = value["shards"];
    if (k.is_string() && k.get<std::string>() == "auto") {
      if (o.expected_clients <= 0) {
        sj::fail(r.field("shards"),
                 "\"auto\" sizes the shards from the fleet: it needs \"expected_clients\" > 0");
      }
      // Every process busy, syncing each sync_interval; each store at most half busy.
      const std::int64_t needed = fleet_budget::shards_for(
          o.expected_clients, o.sync_interval, fleet_budget::k_measured_store_capacity, 0.5);
      if (needed > fleet_budget::k_max_shards) {
        sj::fail(r.field("shards"), "\"auto\" needs " + std::to_string(needed) + " shards for " +
                                        std::to_string(o.expected_clients) +
                                        " expected_clients, more than 1024: raise sync_interval");
      }
      o.shards = needed;
    } else if (k.is_string()) {
      sj::fail(r.field("shards"),
               "must be an integer in [1, 1024] or \"auto\", got " + sj::quote(k));
    } else {
      o.shards = r.integer("shards", 1, fleet_budget::k_max_shards);
    }
  }
  return store;
}

}  // namespace

std::optional<budget_options> read_fleet_budget(std::string_view kind, const json& fields,
                                                const std::string& path,
                                                const std::string& kind_field) {
  const bool has_fleet = fields.is_object() && fields.contains("fleet");
  if (kind == fleet_budget_options::kind && !has_fleet) {
    sj::fail(kind_field,
             "\"fleet\" is written as a ratio budget with a \"fleet\" object: {\"kind\": "
             "\"ratio\", ..., \"fleet\": {\"store\": URL, \"key\": KEY}}");
  }
  if (!has_fleet) return std::nullopt;
  if (kind != ratio_budget_options::kind && kind != fleet_budget_options::kind) {
    sj::fail(sj::join_path(path, "fleet"),
             "applies only to a budget of kind \"ratio\" (a fleet budget is the ratio budget "
             "kept for the whole fleet), got kind " +
                 stormguard::detail::quote_for_message(kind));
  }
  // A ratio budget's settings, and the fleet object.
  std::vector<std::string_view> known{"kind"};
  for (std::string_view name :
       stormguard::detail::settings_json::names<ratio_budget_options, ratio_budget_options>())
    known.push_back(name);
  known.push_back("fleet");
  sj::object_reader r(fields, path, known);
  fleet_budget_options o;
  stormguard::detail::settings_json::read<ratio_budget_options>(r, o.ratio);
  o.store = read_fleet_object(fields["fleet"], r.field("fleet"), o);
  try {
    fleet_budget budget(o);  // the library's own validation, as a backstop
    (void)budget;
  } catch (const std::invalid_argument& e) {
    sj::fail(path, sj::library_message(e));
  }
  return budget_options(o);
}

void write_fleet_budget(const budget_options& options, ordered_json& b) {
  const auto* o = std::get_if<fleet_budget_options>(&options);
  if (o == nullptr) return;
  b["kind"] = std::string(ratio_budget_options::kind);
  ordered_json f;
  if (!o->store.url.empty()) f["store"] = stormguard::detail::redact_redis_url(o->store.url);
  f["key"] = o->store.key;
  f["sync_interval"] = format_duration(o->sync_interval);
  f["max_sync_interval"] = format_duration(o->max_sync_interval);
  f["expected_clients"] = o->expected_clients;
  if (o->shards != 1) f["shards"] = o->shards;        // absent: one (as files before shards read)
  if (o->ask_for_credit) f["ask_for_credit"] = true;  // absent: shares only
  if (!o->store.password_env.empty()) f["password_env"] = o->store.password_env;
  b["fleet"] = std::move(f);
}

}  // namespace stormguard::config::detail
