// SPDX-License-Identifier: Apache-2.0
// The payments endpoint of lab::server (src/lab/charges.hpp).
#include "lab/charges.hpp"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "stormguard/detail/format.hpp"
#include "stormguard/detail/http_syntax.hpp"
#include "stormguard/idempotency.hpp"
#include "stormguard_engine/json_writer.hpp"

namespace stormguard::lab::detail {

namespace {

using stormguard::detail::to_lower_ascii;
using stormguard::detail::trim_ows;

constexpr std::int64_t k_max_amount = 99'999'999;  // Stripe's largest amount: 8 digits

// An error in the guard's shape: RFC 9457 problem details (application/problem+json) with
// "title", "status", "code" and "detail".
guard::stored_response error(int status, std::string_view code, const std::string& message) {
  nlohmann::ordered_json j;
  j["title"] = status == 400   ? "Bad Request"
               : status == 401 ? "Unauthorized"
                               : "Service Unavailable";
  j["status"] = status;
  j["code"] = code;
  j["detail"] = message;
  return {status, {{"Content-Type", "application/problem+json"}}, sim::engine::dump_json(j) + "\n"};
}

// The principal of an Authorization field: "" when absent, the token of "Bearer TOKEN", else
// nullopt (a 401).
std::optional<std::string> principal_of(std::optional<std::string_view> field) {
  if (!field) return std::string();
  const std::string_view value = trim_ows(*field);
  constexpr std::string_view scheme = "bearer";
  if (value.size() <= scheme.size() ||
      !std::equal(scheme.begin(), scheme.end(), value.begin(),
                  [](char a, char b) { return a == to_lower_ascii(b); }) ||
      (value[scheme.size()] != ' ')) {
    return std::nullopt;
  }
  const std::string_view token = trim_ows(value.substr(scheme.size()));
  if (!stormguard::detail::is_b64token(token) || token.size() > guard::max_principal_length)
    return std::nullopt;
  return std::string(token);
}

// The key of the ledger token's digest: its own domain, so that neither a principal's token nor a
// digest in the store opens the ledger.
constexpr std::string_view k_ledger_token_key = "stormguard serve: GET /ledger operator token";

struct charge_body {
  std::int64_t amount = 0;
  std::string currency;
};

// The body, or the reason it is refused.
outcome<charge_body, std::string> parse_body(std::string_view body) {
  // A member named twice is refused (RFC 8259 §4: names SHOULD be unique, and parsers differ on
  // which one wins): two readings of one payment body must never charge different amounts.
  std::vector<std::string> names;
  std::string duplicate;
  const nlohmann::json::parser_callback_t on_event =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (event == nlohmann::json::parse_event_t::key && depth == 1 && duplicate.empty()) {
          const auto& name = parsed.get_ref<const std::string&>();
          if (std::find(names.begin(), names.end(), name) != names.end()) duplicate = name;
          names.push_back(name);
        }
        return true;
      };
  const nlohmann::json j = nlohmann::json::parse(body, on_event, false);
  if (j.is_discarded()) return failure{std::string("the body is not JSON")};
  if (!duplicate.empty()) {
    return failure{"parameter " + stormguard::detail::quote_for_message(duplicate) +
                   " given twice"};
  }
  if (!j.is_object()) return failure{std::string("the body must be a JSON object")};
  charge_body out;
  bool has_amount = false;
  bool has_currency = false;
  for (const auto& [name, value] : j.items()) {
    if (name == "amount") {
      if (!value.is_number_integer() || value.get<std::int64_t>() < 1 ||
          value.get<std::int64_t>() > k_max_amount) {
        return failure{std::string(
            "\"amount\" must be a whole number of the currency's smallest unit in 1..99999999")};
      }
      out.amount = value.get<std::int64_t>();
      has_amount = true;
    } else if (name == "currency") {
      const auto* s = value.get_ptr<const std::string*>();
      if (s == nullptr || s->size() != 3 ||
          !std::all_of(s->begin(), s->end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
        return failure{
            std::string("\"currency\" must be a three-letter ISO 4217 code in lowercase, e.g. "
                        "\"eur\"")};
      }
      out.currency = *s;
      has_currency = true;
    } else {
      return failure{"unknown parameter " + stormguard::detail::quote_for_message(name) +
                     " (a charge has \"amount\" and \"currency\")"};
    }
  }
  if (!has_amount) return failure{std::string("missing parameter \"amount\"")};
  if (!has_currency) return failure{std::string("missing parameter \"currency\"")};
  return out;
}

// "ch_" and 32 hex digits: a UUID v4 from the OS CSPRNG without its dashes.
std::string new_charge_id() {
  std::string uuid = make_idempotency_key();
  std::erase(uuid, '-');
  return "ch_" + uuid;
}

// The 201 of a charge.
guard::stored_response created(const ledger_row& row) {
  nlohmann::ordered_json j;
  j["id"] = row.id;
  j["object"] = "charge";
  j["amount"] = row.amount;
  j["currency"] = row.currency;
  return {201,
          {{"Content-Type", "application/json"}, {"Location", "/charges/" + row.id}},
          sim::engine::dump_json(j) + "\n"};
}

std::int64_t to_int64(const std::optional<std::string>& text) {
  std::int64_t v = 0;
  if (text) (void)std::from_chars(text->data(), text->data() + text->size(), v);
  return v;
}

}  // namespace

charges_endpoint::charges_endpoint(const payments_options& options)
    : options_(options), faults_(options.seed) {
  if (!(options_.fault_after_commit >= 0.0 && options_.fault_after_commit <= 1.0)) {
    throw std::invalid_argument("payments_options.fault_after_commit " +
                                stormguard::detail::format_double(options_.fault_after_commit) +
                                ": must be in [0, 1]");
  }
  if (!options_.ledger_token.empty()) {
    const std::string& token = options_.ledger_token;
    if (!is_ledger_token(token)) {
      // The token is a secret: its length is named, never its bytes.
      throw std::invalid_argument(
          "payments_options.ledger_token (" + std::to_string(token.size()) +
          " bytes): must be a bearer token of 16 to 1024 characters of A-Z a-z 0-9 - . _ ~ + / "
          "(then '=' padding), e.g. from `head -c 24 /dev/urandom | base64`");
    }
    ledger_token_digest_ = guard::principal_digest(token, k_ledger_token_key);
    std::fill(options_.ledger_token.begin(), options_.ledger_token.end(), '\0');
    options_.ledger_token.clear();
  }
  if (options_.idempotency == "off") return;
  store_ = guard::open_store(options_.idempotency);
  const std::string table(ledger_table);
  std::string create;
  switch (store_->kind()) {
    case guard::store_kind::sqlite:
      create = "CREATE TABLE IF NOT EXISTS " + table +
               " (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, principal TEXT NOT NULL, "
               "idem_key TEXT NOT NULL, amount INTEGER NOT NULL, currency TEXT NOT NULL)";
      break;
    case guard::store_kind::postgres:
      create = "CREATE TABLE IF NOT EXISTS " + table +
               " (seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, principal TEXT NOT NULL, "
               "idem_key TEXT NOT NULL, amount BIGINT NOT NULL, currency TEXT NOT NULL)";
      break;
    case guard::store_kind::redis: {  // a list, created by the first RPUSH
      // On a Redis Cluster every charge's record has its own hash slot, and the store refuses a
      // handler's write outside it (docs/idempotency.md, "Redis Sentinel and Redis Cluster"):
      // one ledger list for every charge cannot be written there. Said now, not per charge.
      const auto info = store_->query("INFO", {"cluster"});
      if (!info.empty() && !info.front().empty() && info.front().front() &&
          info.front().front()->find("cluster_enabled:1") != std::string::npos) {
        throw std::invalid_argument(
            "a Redis Cluster cannot keep the payments ledger (one list written by "
            "every charge, whose records are in other hash slots); use one Redis server, or "
            "redis+sentinel:// for failover");
      }
      break;
    }
  }
  if (!create.empty()) {
    try {
      (void)store_->query(create, {});
    } catch (const guard::store_error&) {
      // PostgreSQL: two replicas creating the table at the same instant can collide on its type
      // (a unique violation in pg_type); the second attempt then sees the table.
      (void)store_->query(create, {});
    }
  }
  // GET /ledger's own connection: a ledger read never queues behind a charge's store calls.
  ledger_store_ = guard::open_store(options_.idempotency);
  guard::guard_options guard_options;
  guard_options.principal_key = options_.principal_key;
  registry_ = std::make_shared<prometheus::Registry>();
  guard_metrics_ = std::make_unique<metrics::guard_metrics>(*registry_);
  failure_log_ = std::make_unique<store_failure_log>(*guard_metrics_);
  guard_options.observer = failure_log_.get();
  guard_ = std::make_unique<guard::idempotency_guard>(*store_, guard_options);
}

void store_failure_log::on_store_error(guard::store_operation op,
                                       std::string_view message) noexcept {
  next_.on_store_error(op, message);
  try {
    std::string text = std::string(guard::to_string(guard::classify_store_failure(message))) +
                       " (" + std::string(guard::to_string(op)) + "): " + std::string(message);
    const stormguard::detail::lock hold(mutex_);
    last_ = std::move(text);
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the metric was counted
  }
}

std::string store_failure_log::last() const {
  const stormguard::detail::lock hold(mutex_);
  return last_;
}

std::string charges_endpoint::last_store_failure() const {
  return failure_log_ ? failure_log_->last() : std::string();
}

std::string charges_endpoint::guard_metrics_text() const {
  if (!registry_) return {};
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

charges_endpoint::~charges_endpoint() = default;

std::string_view charges_endpoint::store_name() const noexcept {
  return store_ ? to_string(store_->kind()) : std::string_view("off");
}

charge_answer charges_endpoint::charge(const charge_request& request) {
  charge_answer answer;
  const std::optional<std::string> principal = principal_of(request.authorization);
  if (!principal) {
    answer.response = error(401, "invalid_token",
                            "Authorization must be absent (anonymous) or \"Bearer TOKEN\" with "
                            "a token of at most 255 characters (RFC 6750 b64token)");
    answer.response.headers.emplace_back("WWW-Authenticate", "Bearer error=\"invalid_token\"");
    return answer;
  }
  auto body = parse_body(request.body);
  if (!body) {
    // Before the guard, as Stripe does: nothing ran, the key is not used up.
    answer.response = error(400, "invalid_body", body.error());
    return answer;
  }
  const auto draw_fault = [&] {
    return options_.fault_after_commit > 0.0 && uniform_unit(faults_) < options_.fault_after_commit;
  };

  // The ledger keeps the principal as the guard's records do: a keyed digest, never the token
  // (GET /ledger is unauthenticated, and a token there could be replayed).
  const std::string shown_principal =
      guard_ ? guard_->stored_principal(*principal)
             : guard::principal_digest(*principal, options_.principal_key);
  if (!guard_) {  // off: every attempt that gets here charges
    ledger_row row{new_charge_id(), shown_principal, "", (*body).amount, (*body).currency};
    if (request.idempotency_key) {
      auto key = guard::parse_idempotency_key(*request.idempotency_key);
      row.key = key ? *key : std::string(trim_ows(*request.idempotency_key));
    }
    answer.response = created(row);
    {
      const stormguard::detail::lock hold(memory_mutex_);
      memory_.push_back(std::move(row));
    }
    answer.committed = true;
    answer.drop = draw_fault();
    return answer;
  }

  const guard::request guarded{
      *principal, "POST", request.target, request.body, request.idempotency_key, request.arrived};
  const guard::result r = guard_->handle(guarded, [&](guard::transaction& tx) {
    // The guard accepted the key before running us: it parses.
    const std::string key = *guard::parse_idempotency_key(*request.idempotency_key);
    ledger_row row{new_charge_id(), shown_principal, key, (*body).amount, (*body).currency};
    const std::string amount = std::to_string(row.amount);
    if (tx.kind() == guard::store_kind::redis) {
      const std::string value = sim::engine::dump_json(nlohmann::ordered_json(row));
      (void)tx.execute("RPUSH", {ledger_table, value});
    } else {
      (void)tx.execute("INSERT INTO " + std::string(ledger_table) +
                           " (id, principal, idem_key, amount, currency) VALUES ($1, $2, $3, $4, "
                           "$5)",
                       {row.id, row.principal, row.key, amount, row.currency});
    }
    return created(row);
  });
  answer.response = r.response;
  answer.replayed = r.decision == guard::decision::replayed;
  answer.store_unavailable = r.decision == guard::decision::store_unavailable;
  answer.committed = r.decision == guard::decision::ran;
  answer.drop = answer.committed && draw_fault();
  return answer;
}

ledger_message charges_endpoint::read_ledger(const ledger_query& q) {
  ledger_message m{std::string(store_name()), {}, {}};
  // One row more than the page: whether another page follows.
  const std::int64_t want = q.limit + 1;
  if (!ledger_store_) {  // off: the rows in memory, the cursor an index
    const stormguard::detail::lock hold(memory_mutex_);
    const auto size = static_cast<std::int64_t>(memory_.size());
    for (std::int64_t i = q.after; i < size && i < q.after + want; ++i) {
      m.rows.push_back(memory_[static_cast<std::size_t>(i)]);
    }
  } else if (ledger_store_->kind() == guard::store_kind::redis) {  // the cursor an index
    const std::string first = std::to_string(q.after);
    const std::string last = std::to_string(q.after + want - 1);
    for (const guard::row& r : ledger_store_->query("LRANGE", {ledger_table, first, last})) {
      ledger_row row;
      if (!r.empty() && r.front()) {
        const nlohmann::json j = nlohmann::json::parse(*r.front(), nullptr, false);
        if (j.is_object()) row = j.get<ledger_row>();
      }
      m.rows.push_back(std::move(row));  // a row it cannot read still takes its place
    }
  } else {  // SQL: the cursor is the last row's seq (numbers we wrote: no parameter needed)
    std::int64_t last_seq = q.after;
    for (const guard::row& r : ledger_store_->query(
             "SELECT seq, id, principal, idem_key, amount, currency FROM " +
                 std::string(ledger_table) + " WHERE seq > " + std::to_string(q.after) +
                 " ORDER BY seq LIMIT " + std::to_string(want),
             {})) {
      if (r.size() < 6) continue;
      if (static_cast<std::int64_t>(m.rows.size()) < q.limit) last_seq = to_int64(r[0]);
      m.rows.push_back(ledger_row{r[1].value_or(""), r[2].value_or(""), r[3].value_or(""),
                                  to_int64(r[4]), r[5].value_or("")});
    }
    if (static_cast<std::int64_t>(m.rows.size()) > q.limit) m.next = std::to_string(last_seq);
  }
  if (static_cast<std::int64_t>(m.rows.size()) > q.limit) {
    m.rows.resize(static_cast<std::size_t>(q.limit));
    if (m.next.empty()) m.next = std::to_string(q.after + q.limit);
  }
  // Redis rows that could not be read are not shown (they still count for the cursor).
  std::erase_if(m.rows, [](const ledger_row& row) { return row.id.empty(); });
  return m;
}

guard::stored_response charges_endpoint::ledger(const ledger_query& q) {
  ledger_message m;
  try {
    m = read_ledger(q);
  } catch (const guard::store_error&) {
    // The store's text (host, port, driver messages) stays on the server: a generic detail.
    auto r = error(503, "store_unavailable", "the ledger cannot be read: the store is unavailable");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  return {200,
          {{"Content-Type", "application/json"}},
          sim::engine::dump_json(nlohmann::ordered_json(m)) + "\n"};
}

outcome<ledger_query, std::string> read_ledger_query(
    const std::vector<std::pair<std::string, std::string>>& parameters) {
  ledger_query q;
  bool seen_after = false;
  bool seen_limit = false;
  // At most 18 digits: a cursor below 10^18, so that cursor + page never overflows.
  const auto number = [](const std::string& text, std::int64_t& out) {
    if (text.empty() || text.size() > 18 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc{} && end == text.data() + text.size();
  };
  for (const auto& [name, value] : parameters) {
    const std::string quoted = stormguard::detail::quote_for_message(value);
    if (name == "after") {
      if (std::exchange(seen_after, true)) return failure{std::string("after: given twice")};
      if (!number(value, q.after)) {
        return failure{"after " + quoted +
                       ": must be the \"next\" of the page before (an integer in "
                       "0..999999999999999999)"};
      }
    } else if (name == "limit") {
      if (std::exchange(seen_limit, true)) return failure{std::string("limit: given twice")};
      if (!number(value, q.limit) || q.limit < 1 || q.limit > wire::k_ledger_max_limit) {
        return failure{"limit " + quoted + ": must be an integer in 1.." +
                       std::to_string(wire::k_ledger_max_limit)};
      }
    } else if (name.empty()) {
      return failure{"query " + quoted +
                     ": not name=value pairs joined by '&' without NUL (e.g. limit=100&after=5)"};
    } else {
      return failure{"unknown parameter " + stormguard::detail::quote_for_message(name) +
                     " (GET /ledger takes \"after\" and \"limit\")"};
    }
  }
  return q;
}

std::optional<guard::stored_response> charges_endpoint::ledger_refusal(
    std::optional<std::string_view> authorization) const {
  if (ledger_token_digest_.empty()) {
    return error(404, "ledger_off",
                 "GET /ledger is off: start the server with an operator token "
                 "(serve --ledger-token-file FILE) and send it as Authorization: Bearer TOKEN");
  }
  const std::optional<std::string> token = principal_of(authorization);
  bool same = false;
  if (token && !token->empty()) {
    const std::string digest = guard::principal_digest(*token, k_ledger_token_key);
    unsigned char differ = digest.size() == ledger_token_digest_.size() ? 0 : 1;
    for (std::size_t i = 0; i < std::min(digest.size(), ledger_token_digest_.size()); ++i) {
      differ |= static_cast<unsigned char>(digest[i] ^ ledger_token_digest_[i]);
    }
    same = differ == 0;
  }
  if (same) return std::nullopt;
  guard::stored_response refused =
      error(401, "ledger_token",
            "GET /ledger needs the server's operator token as Authorization: Bearer TOKEN");
  refused.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"stormguard-ledger\"");
  return refused;
}

guard::stored_response ledger_query_error(const std::string& message) {
  return error(400, "invalid_query", message);
}

}  // namespace stormguard::lab::detail
