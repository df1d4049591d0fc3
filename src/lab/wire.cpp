// SPDX-License-Identifier: Apache-2.0
#include "lab/wire.hpp"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <iterator>

namespace stormguard::lab::wire {

void to_json(nlohmann::ordered_json& j, const stats_message& m) {
  j = nlohmann::ordered_json::object();
  j["scenario"] = m.scenario;
  j["phase"] = m.phase;
  j["clock_started"] = m.stats.clock_started;
  j["elapsed_s"] = std::chrono::duration<double>(m.stats.elapsed).count();
  for (std::size_t i = 0; i < std::size(k_stats_counts); ++i)
    j[k_stats_counts[i].name] = m.stats.*k_stats_counts[i].member;
  sim::for_each_defence_kind([&]<class K>(std::type_identity<K>) {
    j[std::string(K::stats_key)] = m.stats.defence_decisions[sim::defence_index<K>];
  });
  j["retry_signals"] = nlohmann::ordered_json::object();
  j["retry_signals_malformed"] = nlohmann::ordered_json::object();
  for (const admission::retry_signal s : admission::k_retry_signals) {
    const std::string name(admission::signal_name(s));
    j["retry_signals"][name] = m.stats.retry_signals[admission::index_of(s)];
    if (admission::is_label(s)) {
      j["retry_signals_malformed"][name] = m.stats.retry_signals_malformed[admission::index_of(s)];
    }
  }
  j["workers"] = m.workers;
  j["queue_limit"] = m.queue_limit;
  j["instance"] = fmt::format("{:016x}", m.stats.instance);
}

namespace {

// An object of counts keyed by admission::signal_name; absent (a server of an earlier version),
// a missing key or a value that is no integer reads as 0.
void read_signal_counts(const nlohmann::json& j, const char* name,
                        std::array<std::int64_t, admission::k_retry_signal_count>& out) {
  out.fill(0);
  const auto it = j.find(name);
  if (it == j.end() || !it->is_object()) return;
  for (const admission::retry_signal s : admission::k_retry_signals) {
    const auto v = it->find(std::string(admission::signal_name(s)));
    if (v != it->end() && v->is_number_integer())
      out[admission::index_of(s)] = v->get<std::int64_t>();
  }
}

}  // namespace

void from_json(const nlohmann::json& j, stats_message& m) {
  j.at("scenario").get_to(m.scenario);
  j.at("phase").get_to(m.phase);
  j.at("clock_started").get_to(m.stats.clock_started);
  m.stats.elapsed = std::chrono::duration_cast<duration>(
      std::chrono::duration<double>(j.at("elapsed_s").get<double>()));
  for (std::size_t i = 0; i < std::size(k_stats_counts); ++i) {
    if (i >= k_stats_required_counts && !j.contains(k_stats_counts[i].name)) {
      m.stats.*k_stats_counts[i].member = 0;
      continue;
    }
    const nlohmann::json& v = j.at(k_stats_counts[i].name);
    if (!v.is_number_integer()) {
      throw nlohmann::json::type_error::create(
          302, std::string(k_stats_counts[i].name) + " is not an integer", &v);
    }
    m.stats.*k_stats_counts[i].member = v.get<std::int64_t>();
  }
  sim::for_each_defence_kind([&]<class K>(std::type_identity<K>) {
    std::int64_t& n = m.stats.defence_decisions[sim::defence_index<K>];
    n = 0;
    const auto it = j.find(std::string(K::stats_key));
    if (it == j.end()) return;
    if (!it->is_number_integer()) {
      throw nlohmann::json::type_error::create(
          302, std::string(K::stats_key) + " is not an integer", &*it);
    }
    n = it->get<std::int64_t>();
  });
  read_signal_counts(j, "retry_signals", m.stats.retry_signals);
  read_signal_counts(j, "retry_signals_malformed", m.stats.retry_signals_malformed);
  j.at("workers").get_to(m.workers);
  j.at("queue_limit").get_to(m.queue_limit);
  // Optional (a server of an earlier version): 0.
  m.stats.instance = 0;
  if (const auto it = j.find("instance"); it != j.end() && it->is_string()) {
    const std::string& hex = it->get_ref<const std::string&>();
    (void)std::from_chars(hex.data(), hex.data() + hex.size(), m.stats.instance, 16);
  }
}

void to_json(nlohmann::ordered_json& j, const ledger_row& r) {
  j = nlohmann::ordered_json::object();
  j["id"] = r.id;
  j["principal"] = r.principal;
  j["key"] = r.key;
  j["amount"] = r.amount;
  j["currency"] = r.currency;
}

void from_json(const nlohmann::json& j, ledger_row& r) {
  const auto text = [&](const char* name) {
    const auto it = j.find(name);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  r.id = text("id");
  r.principal = text("principal");
  r.key = text("key");
  const auto amount = j.find("amount");
  r.amount = amount != j.end() && amount->is_number_integer() ? amount->get<std::int64_t>() : 0;
  r.currency = text("currency");
}

void to_json(nlohmann::ordered_json& j, const ledger_message& m) {
  j = nlohmann::ordered_json::object();
  j["store"] = m.store;
  j["rows"] = nlohmann::ordered_json::array();
  for (const ledger_row& row : m.rows) j["rows"].push_back(row);
  if (!m.next.empty()) j["next"] = m.next;
}

void from_json(const nlohmann::json& j, ledger_message& m) {
  const nlohmann::json& rows = j.at("rows");
  if (!rows.is_array())
    throw nlohmann::json::type_error::create(302, "rows is not an array", &rows);
  const auto store = j.find("store");
  m.store = store != j.end() && store->is_string() ? store->get<std::string>() : std::string();
  const auto next = j.find("next");
  m.next = next != j.end() && next->is_string() ? next->get<std::string>() : std::string();
  m.rows.clear();
  for (const nlohmann::json& row : rows) {
    if (row.is_object()) m.rows.push_back(row.get<ledger_row>());
  }
}

}  // namespace stormguard::lab::wire
