// SPDX-License-Identifier: Apache-2.0
// The Redis idempotency store (include/stormguard/guard/stores.hpp), on hiredis.
//
// A record is one hash per (principal, key), under the key
//   PREFIX ":" len(principal) ":" principal ":" key
// (the principal's length in decimal makes the split unambiguous: principal "a:b" with key "c"
// and principal "a" with key "b:c" are different keys). Its fields:
//   state          "in_progress" or "completed"
//   fingerprint    the request's SHA-256, 32 bytes as they are
//   token          in progress: the lease's token
//   lease_expires  in progress: nanoseconds since the epoch of the guard's wall_time_point
//   expires        nanoseconds since the epoch of the guard's wall_time_point
//   status         completed: the response's status, decimal
//   headers        completed: per header, its name then its value, each as a 4-byte big-endian
//                  length and the bytes (internal::encode_headers, codec.hpp)
//   body           completed: the response's body
// Times are the guard's (never Redis's TIME): its clock is the one the replicas agree on, and a
// test's manual clock works. The key also carries a PEXPIRE of the ttl (relative milliseconds)
// so that Redis garbage-collects it; begin() decides by `expires`, never by whether the key is
// there, so the two clocks need not agree.
//
// Each step is one round trip: a Lua script (loaded with SCRIPT LOAD when a connection opens,
// called with EVALSHA; on NOSCRIPT — the script cache was flushed — loaded again and retried
// once). Lua numbers are doubles, which cannot hold nanoseconds since the epoch exactly, so the
// scripts compare the decimal texts (le() below).
//
// Needs Redis 7 or later (the scripts declare flags: "#!lua"). On a Redis Cluster each step goes
// to the master serving its record's hash slot (redis_routes.hpp); complete()'s script runs the
// handler's queued commands on keys it does not declare in KEYS, so on a Cluster their keys are
// checked first (COMMAND GETKEYS) and one of another slot refuses the step before anything is
// written; the others are declared in KEYS, so that the server checks them too (a slot being
// migrated answers ASK or TRYAGAIN, never runs the script where only some of them are).
#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "guard/codec.hpp"
#include "guard/pool.hpp"
#include "guard/redis_connection.hpp"
#include "guard/redis_routes.hpp"
#include "guard/redis_scripts.hpp"
#include "redis/cluster.hpp"
#include "redis/sentinel.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/redact.hpp"
#include "stormguard/detail/redis_url.hpp"
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {

namespace {

using internal::argv_builder;
using internal::connection;
using internal::endpoint;
using internal::is_text;
using internal::k_begin;
using internal::k_complete;
using internal::k_max_queued_args;
using internal::k_release;
using internal::k_script_count;
using internal::parse_url;
using internal::reply_ptr;
using internal::script_id;
using internal::script_texts;
using internal::sigpipe_guard;
using internal::text_of;
using internal::upper_ascii;

constexpr std::size_t k_max_record_key_part = 255;

void validate(const redis_options& o) {
  if (o.url.empty()) throw std::invalid_argument("redis_options.url \"\": must not be empty");
  const bool prefix_ok =
      !o.prefix.empty() && o.prefix.size() <= 63 &&
      std::all_of(o.prefix.begin(), o.prefix.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  if (!prefix_ok) {
    throw std::invalid_argument("redis_options.prefix " + detail::quote_for_message(o.prefix) +
                                ": must be 1..63 characters of printable ASCII without spaces");
  }
  if (o.timeout <= std::chrono::milliseconds::zero()) {
    throw std::invalid_argument("redis_options.timeout " + std::to_string(o.timeout.count()) +
                                "ms: must be > 0");
  }
  if (o.max_connections < 1 || o.max_connections > 1024) {
    throw std::invalid_argument("redis_options.max_connections " +
                                std::to_string(o.max_connections) + ": must be 1..1024");
  }
}

// --- encodings -------------------------------------------------------------------------------

std::string nanos_text(wall_time_point t) { return std::to_string(internal::to_ns(t)); }

/// A duration as PEXPIRE's relative milliseconds, rounded up, at least 1.
std::string pexpire_text(duration d) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(d).count();
  return std::to_string(std::max<std::int64_t>(1, ms));
}

template <class Int>
std::optional<Int> parse_int(std::string_view s) {
  Int v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// --- the transaction -------------------------------------------------------------------------

/// Queues commands for complete()'s script. Not thread-safe (one handler).
class redis_transaction final : public transaction {
 public:
  [[nodiscard]] store_kind kind() const noexcept override { return store_kind::redis; }

  std::vector<row> execute(std::string_view statement,
                           std::span<const std::string_view> params) override {
    if (statement.empty()) {
      throw std::invalid_argument("statement \"\": a Redis command's name must not be empty");
    }
    if (std::any_of(statement.begin(), statement.end(),
                    [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
      throw std::invalid_argument("statement " + detail::quote_for_message(statement) +
                                  ": a Redis command's name has no spaces or control bytes");
    }
    if (upper_ascii(statement) == "SELECT") {
      throw std::invalid_argument("statement " + detail::quote_for_message(statement) +
                                  ": would move the record's own writes to another database; "
                                  "use a store whose url names that database");
    }
    if (params.size() + 1 > k_max_queued_args) {
      throw std::invalid_argument("statement " + detail::quote_for_message(statement) + " with " +
                                  std::to_string(params.size()) + " arguments: at most " +
                                  std::to_string(k_max_queued_args - 1) +
                                  " (Lua's unpack limit in the script that runs it)");
    }
    std::vector<std::string> command;
    command.reserve(params.size() + 1);
    command.emplace_back(statement);
    for (const auto p : params) command.emplace_back(p);
    commands_.push_back(std::move(command));
    return {};
  }
  using transaction::execute;

  [[nodiscard]] const std::vector<std::vector<std::string>>& commands() const noexcept {
    return commands_;
  }

 private:
  std::vector<std::vector<std::string>> commands_;
};

// --- the store -------------------------------------------------------------------------------

/// Commands that query() refuses: they would leave the pooled connection in another state
/// (another database, a MULTI, subscribed, replies turned off, another protocol, closed).
bool changes_connection_state(std::string_view statement,
                              std::span<const std::string_view> params) {
  // READONLY and READWRITE: a Redis Cluster's replica connection would serve (stale) reads.
  static constexpr std::array<std::string_view, 20> refused = {
      "SELECT",       "MULTI",        "EXEC",       "DISCARD",    "WATCH",
      "UNWATCH",      "SUBSCRIBE",    "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE",
      "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR",    "RESET",      "HELLO",
      "AUTH",         "QUIT",         "READONLY",   "READWRITE",  "ASKING"};
  const std::string name = upper_ascii(statement);
  if (std::find(refused.begin(), refused.end(), name) != refused.end()) return true;
  if (name == "CLIENT" && !params.empty()) {
    static constexpr std::array<std::string_view, 6> refused_sub = {
        "REPLY", "TRACKING", "SETNAME", "NO-EVICT", "NO-TOUCH", "SETINFO"};
    const std::string sub = upper_ascii(params.front());
    return std::find(refused_sub.begin(), refused_sub.end(), sub) != refused_sub.end();
  }
  return false;
}

/// The store. Thread-safe: the pool lends each connection to one thread at a time, and
/// everything else is immutable after construction.
class redis_store final : public store {
 public:
  explicit redis_store(const redis_options& o)
      : endpoint_(parse_url(o.url)),
        prefix_(o.prefix),
        timeout_(o.timeout),
        where_("redis store " + detail::escape_control(detail::redact_redis_url(o.url), 200)),
        routes_(
            redis_detail::node{endpoint_.host, endpoint_.port}, o.max_connections,
            [this](const redis_detail::node& n) { return open(n); },
            [this](pooled& c, argv_builder& argv) { return call(c, argv); }, where_) {
    // Open one connection now: a store that cannot be reached fails here (stores.hpp). It also
    // says whether the server is a Redis Cluster (redis_routes.hpp).
    {
      auto first = routes_.seed_connection();
      if (endpoint_.sentinels.empty()) routes_.discover(first);
      if (o.require_noeviction && !routes_.cluster()) check_eviction_policy(first);
    }
    if (o.require_noeviction && routes_.cluster()) {
      for (const std::size_t master : routes_.masters()) {
        auto conn = routes_.connection_at(master);
        check_eviction_policy(conn, " (node " + routes_.name_of(master) + ")");
      }
    }
    check_schema();
  }

  [[nodiscard]] store_kind kind() const noexcept override { return store_kind::redis; }

  begin_result begin(const record_key& id, const fingerprint& fp, std::string_view token,
                     wall_time_point now, duration lease, duration ttl) override {
    if (lease <= duration::zero()) {
      throw std::invalid_argument("lease " + std::to_string(lease.count()) + "ns: must be > 0");
    }
    if (ttl <= duration::zero()) {
      throw std::invalid_argument("ttl " + std::to_string(ttl.count()) + "ns: must be > 0");
    }
    const std::string key = record_key_of(id);
    const std::string now_text = nanos_text(now);
    const std::string lease_text = std::to_string(internal::add_ns(now, lease));
    const std::string expires_text = std::to_string(internal::add_ns(now, ttl));
    const std::string pexpire = pexpire_text(std::max(ttl, lease));
    const std::string_view fp_text(reinterpret_cast<const char*>(fp.data()), fp.size());
    const std::array<std::string_view, 6> args = {now_text,   fp_text,      token,
                                                  lease_text, expires_text, pexpire};

    const reply_ptr reply = run_script(k_begin, key, args);
    const redisReply* r = reply.get();
    auto corrupt = [&](std::string_view why) {
      return store_error(where_ + ": begin on " + detail::quote_for_message(key) +
                         ": unexpected reply (" + std::string(why) + ")");
    };
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || !is_text(r->element[0])) {
      throw corrupt("not an array with a state");
    }
    const std::string_view state = text_of(*r->element[0]);
    begin_result out;
    auto read_fingerprint = [&](const redisReply* e) {
      if (!is_text(e) || e->len != out.fingerprint.size()) throw corrupt("fingerprint");
      std::copy_n(e->str, e->len, reinterpret_cast<char*>(out.fingerprint.data()));
    };
    if (state == "acquired") {
      if (r->element[1]->type != REDIS_REPLY_INTEGER) throw corrupt("took_over");
      out.outcome = begin_outcome::acquired;
      out.took_over = r->element[1]->integer != 0;
    } else if (state == "in_progress") {
      if (r->elements != 3 || !is_text(r->element[2])) throw corrupt("in_progress");
      out.outcome = begin_outcome::in_progress;
      read_fingerprint(r->element[1]);
      const auto lease_expires = parse_int<std::int64_t>(text_of(*r->element[2]));
      if (!lease_expires) throw corrupt("lease_expires");
      out.lease_expires = internal::from_ns(*lease_expires);
    } else if (state == "completed") {
      if (r->elements != 5 || !is_text(r->element[2]) || !is_text(r->element[3]) ||
          !is_text(r->element[4])) {
        throw corrupt("completed");
      }
      out.outcome = begin_outcome::completed;
      read_fingerprint(r->element[1]);
      stored_response response;
      const auto status = parse_int<int>(text_of(*r->element[2]));
      auto headers = internal::decode_headers(text_of(*r->element[3]));
      if (!status || !headers) throw corrupt("stored response");
      response.status = *status;
      response.headers = std::move(*headers);
      response.body.assign(text_of(*r->element[4]));
      out.response = std::move(response);
    } else {
      throw corrupt("state " + detail::quote_for_message(state));
    }
    return out;
  }

  complete_outcome complete(const record_key& id, std::string_view token, wall_time_point now,
                            duration ttl, const work& w) override {
    if (ttl <= duration::zero()) {
      throw std::invalid_argument("ttl " + std::to_string(ttl.count()) + "ns: must be > 0");
    }
    const std::string key = record_key_of(id);
    // The work first, with no connection held: it only queues. If it throws, nothing was sent.
    redis_transaction tx;
    const stored_response response = w(tx);

    const std::string expires_text = std::to_string(internal::add_ns(now, ttl));
    const std::string pexpire = pexpire_text(ttl);
    const std::string status = std::to_string(response.status);
    const std::string headers = internal::encode_headers(response.headers);
    const auto& commands = tx.commands();
    const std::string count = std::to_string(commands.size());
    std::vector<std::string> argc_texts;
    argc_texts.reserve(commands.size());
    std::size_t total = 7;
    for (const auto& c : commands) {
      argc_texts.push_back(std::to_string(c.size()));
      total += 1 + c.size();
    }
    std::vector<std::string_view> args;
    args.reserve(total);
    args.insert(args.end(), {token, expires_text, pexpire, status, headers, response.body, count});
    for (std::size_t i = 0; i < commands.size(); ++i) {
      args.emplace_back(argc_texts[i]);
      args.insert(args.end(), commands[i].begin(), commands[i].end());
    }

    const std::vector<std::string> declared = routes_.cluster() && !commands.empty()
                                                  ? keys_in_the_records_slot(key, commands)
                                                  : std::vector<std::string>{};
    const reply_ptr reply = run_script(k_complete, key, args, declared);
    if (reply->type != REDIS_REPLY_INTEGER) {
      throw store_error(where_ + ": complete on " + detail::quote_for_message(key) +
                        ": unexpected reply");
    }
    return reply->integer == 1 ? complete_outcome::completed : complete_outcome::lease_lost;
  }

  std::optional<begin_result> find(const record_key& id, wall_time_point now) override {
    const std::string key = record_key_of(id);
    argv_builder argv;
    for (const std::string_view a :
         {std::string_view("HMGET"), std::string_view(key), std::string_view("state"),
          std::string_view("fingerprint"), std::string_view("lease_expires"),
          std::string_view("expires"), std::string_view("status"), std::string_view("headers"),
          std::string_view("body")}) {
      argv.add(a);
    }
    const reply_ptr reply = routes_.run(key, [&](pooled& conn) { return call(conn, argv); });
    const redisReply* r = reply.get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 7) {
      throw store_error(where_ + ": find on " + detail::quote_for_message(key) + ": " +
                        (r->type == REDIS_REPLY_ERROR ? detail::escape_control(text_of(*r))
                                                      : std::string("unexpected reply")));
    }
    auto text = [&](std::size_t i) -> std::optional<std::string_view> {
      if (!is_text(r->element[i])) return std::nullopt;
      return text_of(*r->element[i]);
    };
    const auto state = text(0);
    const auto fp = text(1);
    const auto expires = text(3) ? parse_int<std::int64_t>(*text(3)) : std::nullopt;
    const std::int64_t now_ns = internal::to_ns(now);
    if (!state || !fp || !expires || *expires <= now_ns) return std::nullopt;
    begin_result out;
    if (fp->size() != out.fingerprint.size()) return std::nullopt;
    std::copy_n(fp->data(), fp->size(), reinterpret_cast<char*>(out.fingerprint.data()));
    if (*state == "in_progress") {
      const auto lease = text(2) ? parse_int<std::int64_t>(*text(2)) : std::nullopt;
      if (!lease || *lease <= now_ns) return std::nullopt;
      out.outcome = begin_outcome::in_progress;
      out.lease_expires = internal::from_ns(*lease);
      return out;
    }
    const auto status = text(4) ? parse_int<int>(*text(4)) : std::nullopt;
    auto headers = internal::decode_headers(text(5).value_or(""));
    if (*state != "completed" || !status || !headers) return std::nullopt;
    out.outcome = begin_outcome::completed;
    out.response = stored_response{*status, std::move(*headers), std::string(text(6).value_or(""))};
    return out;
  }

  void release(const record_key& id, std::string_view token) override {
    const std::string key = record_key_of(id);
    const std::array<std::string_view, 1> args = {token};
    (void)run_script(k_release, key, args);
  }

  std::size_t purge_expired(wall_time_point) override { return 0; }

  std::vector<row> query(std::string_view statement,
                         std::span<const std::string_view> params) override {
    if (statement.empty()) {
      throw std::invalid_argument("statement \"\": a Redis command's name must not be empty");
    }
    if (changes_connection_state(statement, params)) {
      throw std::invalid_argument(
          "statement " + detail::quote_for_message(statement) +
          ": refused, it would change the state of a pooled connection (its database, "
          "transaction, subscriptions, replies or protocol)");
    }
    argv_builder argv;
    argv.reserve(params.size() + 1);
    argv.add(statement);
    for (const auto p : params) argv.add(p);
    // On a Redis Cluster: sent to the seed, and redirected to the node serving its key.
    const reply_ptr reply =
        routes_.run(std::nullopt, [&](pooled& conn) { return call(conn, argv); });
    if (reply->type == REDIS_REPLY_ERROR) {
      throw store_error(where_ + ": " + detail::escape_control(statement, 80) + ": " +
                        detail::escape_control(text_of(*reply)));
    }
    std::vector<row> rows;
    auto cell = [&](const redisReply* e) -> std::optional<std::string> {
      switch (e->type) {
        case REDIS_REPLY_STRING:
        case REDIS_REPLY_STATUS:
        case REDIS_REPLY_ERROR:
          return std::string(text_of(*e));
        case REDIS_REPLY_INTEGER:
          return std::to_string(e->integer);
        case REDIS_REPLY_NIL:
          return std::nullopt;
        default:
          throw store_error(where_ + ": " + detail::escape_control(statement, 80) +
                            ": a reply nested more than two arrays deep (not supported)");
      }
    };
    if (reply->type != REDIS_REPLY_ARRAY) {
      rows.push_back({cell(reply.get())});
      return rows;
    }
    rows.reserve(reply->elements);
    for (std::size_t i = 0; i < reply->elements; ++i) {
      const redisReply* e = reply->element[i];
      row r;
      if (e->type == REDIS_REPLY_ARRAY) {  // a nested array: one row, one column per element
        r.reserve(e->elements);
        for (std::size_t j = 0; j < e->elements; ++j) r.push_back(cell(e->element[j]));
      } else {
        r.push_back(cell(e));
      }
      rows.push_back(std::move(r));
    }
    return rows;
  }

 private:
  using pooled = internal::redis_routes::pooled;

  /// Refuses a server whose maxmemory-policy may evict keys: an evicted record lets a retry run
  /// its request again, and an evicted ledger row loses a write that was answered as done.
  /// `node`: on a Redis Cluster, the master checked (" (node HOST:PORT)"), said in the errors.
  void check_eviction_policy(pooled& conn, const std::string& node = "") const {
    argv_builder argv;
    for (const std::string_view a : {"CONFIG", "GET", "maxmemory-policy"}) argv.add(a);
    const reply_ptr reply = call(conn, argv);
    const redisReply* r = reply.get();
    if (r->type == REDIS_REPLY_ERROR) {
      throw store_error(where_ + node + ": cannot read maxmemory-policy (CONFIG GET: " +
                        detail::escape_control(text_of(*r)) +
                        "); the store needs noeviction: set redis_options.require_noeviction "
                        "to false only when the server is known to be noeviction");
    }
    // RESP2 (the connections never send HELLO): an array [name, value].
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_text(r->element[1])) {
      throw store_error(where_ + node + ": CONFIG GET maxmemory-policy: unexpected reply");
    }
    const std::string_view policy = text_of(*r->element[1]);
    if (policy != "noeviction") {
      throw store_error(
          where_ + node + ": the server's maxmemory-policy is " +
          detail::quote_for_message(policy) +
          ": under memory pressure it would evict idempotency records (a retry then runs its "
          "request again) and the handler's writes; set maxmemory-policy noeviction (redis.conf, "
          "or CONFIG SET maxmemory-policy noeviction)");
    }
  }

  /// Marks a prefix without a version as version 1 (SET NX: two processes opening it at once
  /// write one value), then refuses a prefix of another version (internal::schema_check). The
  /// key `<prefix>:schema` cannot be a record's (`<prefix>:<length>:...`) and has no expiry.
  void check_schema() {
    const std::string key = prefix_ + ":schema";
    const std::string version = std::to_string(internal::k_record_schema_version);
    argv_builder set;
    for (const std::string_view a : {std::string_view("SET"), std::string_view(key),
                                     std::string_view(version), std::string_view("NX")}) {
      set.add(a);
    }
    const reply_ptr written = routes_.run(key, [&](pooled& conn) { return call(conn, set); });
    argv_builder get;
    get.add("GET");
    get.add(key);
    const reply_ptr read = routes_.run(key, [&](pooled& conn) { return call(conn, get); });
    for (const redisReply* r : {written.get(), read.get()}) {
      if (r->type == REDIS_REPLY_ERROR) {
        throw store_error(where_ + ": cannot read or write the schema version (" +
                          detail::quote_for_message(key) +
                          "): " + detail::escape_control(text_of(*r)));
      }
    }
    internal::schema_check(where_ + ": prefix " + detail::quote_for_message(prefix_),
                           is_text(read.get()) ? text_of(*read) : std::string_view("(none)"));
  }

  [[nodiscard]] std::string record_key_of(const record_key& id) const {
    if (id.principal.size() > k_max_record_key_part) {
      throw std::invalid_argument("record_key.principal of " + std::to_string(id.principal.size()) +
                                  " bytes: at most 255");
    }
    if (id.key.size() > k_max_record_key_part) {
      throw std::invalid_argument("record_key.key of " + std::to_string(id.key.size()) +
                                  " bytes: at most 255");
    }
    std::string k;
    k.reserve(prefix_.size() + 8 + id.principal.size() + id.key.size());
    k += prefix_;
    k += ':';
    k += std::to_string(id.principal.size());
    k += ':';
    k += id.principal;
    k += ':';
    k += id.key;
    return k;
  }

  [[nodiscard]] timeval timeout_timeval() const noexcept {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout_.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout_.count() % 1000) * 1000);
    return tv;
  }

  /// hiredis's error on a broken connection, as store_error (after which it is discarded).
  [[nodiscard]] store_error io_error(const redisContext* c, std::string_view doing) const {
    std::string why = c->errstr[0] != '\0' ? std::string(c->errstr) : std::string("I/O error");
    if (c->err == REDIS_ERR_IO && why.find("temporarily unavailable") != std::string::npos) {
      why += " (no reply within the timeout of " + std::to_string(timeout_.count()) + "ms)";
    }
    return store_error(where_ + ": " + std::string(doing) + ": " + why);
  }

  /// A new connection: connected, timeouts set, the database selected, named (CLIENT SETNAME
  /// PREFIX: CLIENT LIST shows the store's connections) and the scripts loaded — all in one
  /// pipelined round trip after the connect.
  std::unique_ptr<connection> open(const redis_detail::node& at) const {
    const timeval tv = timeout_timeval();
    std::string host = at.host;
    int port = at.port;
    if (!endpoint_.sentinels.empty()) {
      // Redis Sentinel: each new connection goes to the master the sentinels name now (after a
      // failover the pool's broken connections are discarded and replaced by new ones).
      std::string why;
      const auto master = redis_detail::master_from_sentinels(endpoint_, tv, why);
      if (!master) throw store_error(where_ + ": connect: no sentinel named the master: " + why);
      host = master->first;
      port = master->second;
    }
    // On a Redis Cluster the node is named: it is not always the URL's.
    const std::string connect =
        routes_.cluster() ? "connect to " + host + ":" + std::to_string(port) : "connect";
    redisContext* ctx = nullptr;
    {
      const sigpipe_guard no_sigpipe;
      ctx = redisConnectWithTimeout(host.c_str(), port, tv);
    }
    if (ctx == nullptr) {
      throw store_error(where_ + ": " + connect + ": cannot allocate a hiredis context");
    }
    auto conn = std::make_unique<connection>(ctx);
    if (ctx->err != 0) throw io_error(ctx, connect);
    if (redisSetTimeout(ctx, tv) != REDIS_OK) throw io_error(ctx, "setting the timeout");

    const sigpipe_guard no_sigpipe;
    std::vector<std::vector<std::string>> commands;
    if (endpoint_.has_password) {  // first: Redis refuses every other command until AUTH
      if (endpoint_.user.empty()) {
        commands.push_back({"AUTH", endpoint_.password});
      } else {
        commands.push_back({"AUTH", endpoint_.user, endpoint_.password});
      }
    }
    const bool select = endpoint_.db != 0;
    if (select) commands.push_back({"SELECT", std::to_string(endpoint_.db)});
    commands.push_back({"CLIENT", "SETNAME", prefix_});
    for (const auto& text : script_texts()) commands.push_back({"SCRIPT", "LOAD", text});
    for (const auto& c : commands) {
      argv_builder argv;
      for (const auto& a : c) argv.add(a);
      if (redisAppendCommandArgv(ctx, argv.argc(), argv.argv(), argv.argvlen()) != REDIS_OK) {
        throw io_error(ctx, connect);
      }
    }
    std::size_t script = 0;
    for (const auto& c : commands) {
      void* raw = nullptr;
      if (redisGetReply(ctx, &raw) != REDIS_OK) throw io_error(ctx, connect);
      const reply_ptr reply(static_cast<redisReply*>(raw));
      if (reply->type == REDIS_REPLY_ERROR) {
        // AUTH's arguments are the credentials: only the command's name is said.
        throw store_error(where_ + ": " + connect + ": " + c[0] +
                          (c[0] == "AUTH" ? "" : " " + c[1]) + ": " +
                          detail::escape_control(text_of(*reply)));
      }
      if (c[0] == "SCRIPT") {
        if (reply->type != REDIS_REPLY_STRING) {
          throw store_error(where_ + ": connect: SCRIPT LOAD: unexpected reply");
        }
        conn->sha[script++] = std::string(text_of(*reply));
      }
    }
    return conn;
  }

  /// Sends one command and reads its reply; on a broken connection discards it and throws.
  reply_ptr call(pooled& conn, argv_builder& argv) const {
    void* raw = nullptr;
    {
      const sigpipe_guard no_sigpipe;
      raw = redisCommandArgv(conn->ctx, argv.argc(), argv.argv(), argv.argvlen());
    }
    if (raw == nullptr) {
      const store_error e = io_error(conn->ctx, detail::escape_control(argv.name(), 80));
      conn.discard();
      throw e;
    }
    return reply_ptr(static_cast<redisReply*>(raw));
  }

  /// EVALSHA of a script on one key; NOSCRIPT: SCRIPT LOAD and once more. An error reply throws.
  /// `declared`: more keys declared after the record's (KEYS[2..]; the script reads only
  /// KEYS[1]): on a Redis Cluster, the keys of the handler's queued commands, so that the
  /// server checks them before it runs anything (all in one slot; during a slot's migration,
  /// ASK or TRYAGAIN instead of running on a node that holds only some of them).
  reply_ptr eval(pooled& conn, script_id script, std::string_view key,
                 std::span<const std::string_view> args,
                 std::span<const std::string> declared = {}) const {
    const std::string count = std::to_string(1 + declared.size());
    for (int attempt = 0;; ++attempt) {
      argv_builder argv;
      argv.reserve(args.size() + declared.size() + 4);
      argv.add("EVALSHA");
      argv.add(conn->sha[script]);
      argv.add(count);
      argv.add(key);
      for (const auto& d : declared) argv.add(d);
      for (const auto a : args) argv.add(a);
      reply_ptr reply = call(conn, argv);
      if (reply->type != REDIS_REPLY_ERROR) return reply;
      const std::string_view message = text_of(*reply);
      if (attempt == 0 && message.substr(0, 8) == "NOSCRIPT") {
        argv_builder load;
        load.add("SCRIPT");
        load.add("LOAD");
        load.add(script_texts()[script]);
        const reply_ptr loaded = call(conn, load);
        if (loaded->type != REDIS_REPLY_STRING) {
          throw store_error(where_ + ": SCRIPT LOAD: " +
                            (loaded->type == REDIS_REPLY_ERROR
                                 ? detail::escape_control(text_of(*loaded))
                                 : std::string("unexpected reply")));
        }
        conn->sha[script] = std::string(text_of(*loaded));
        continue;
      }
      return reply;  // another error: run_script says it (after a redirection is followed)
    }
  }

  /// A script on `key`, where its slot is served; an error reply throws store_error, or
  /// statement_error when the completing script refused a queued command before running any
  /// ("(nothing was written)": deterministic, and the store answered).
  reply_ptr run_script(script_id script, std::string_view key,
                       std::span<const std::string_view> args,
                       std::span<const std::string> declared = {}) {
    reply_ptr reply =
        routes_.run(key, [&](pooled& conn) { return eval(conn, script, key, args, declared); });
    if (reply->type == REDIS_REPLY_ERROR) {
      static constexpr std::array<std::string_view, k_script_count> names = {"begin", "complete",
                                                                             "release"};
      const std::string_view message = text_of(*reply);
      std::string what = where_ + ": " + std::string(names[script]) + " on " +
                         detail::quote_for_message(key) + ": " + detail::escape_control(message);
      if (script == k_complete && message.starts_with("ERR queued command ") &&
          message.ends_with("(nothing was written)")) {
        throw statement_error(std::move(what));
      }
      throw store_error(std::move(what));
    }
    return reply;
  }

  /// The replies of COMMAND GETKEYS for each queued command, pipelined on `conn` (one round
  /// trip); an I/O failure discards the connection and throws store_error.
  std::vector<reply_ptr> queued_keys(pooled& conn,
                                     const std::vector<std::vector<std::string>>& commands) const {
    const sigpipe_guard no_sigpipe;
    const auto failed = [&] {
      const store_error e = io_error(conn->ctx, "COMMAND GETKEYS");
      conn.discard();
      return e;
    };
    for (const auto& c : commands) {
      argv_builder argv;
      argv.reserve(c.size() + 2);
      argv.add("COMMAND");
      argv.add("GETKEYS");
      for (const auto& a : c) argv.add(a);
      if (redisAppendCommandArgv(conn->ctx, argv.argc(), argv.argv(), argv.argvlen()) != REDIS_OK) {
        throw failed();
      }
    }
    std::vector<reply_ptr> replies;
    for (std::size_t i = 0; i < commands.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(conn->ctx, &raw) != REDIS_OK) throw failed();
      replies.emplace_back(static_cast<redisReply*>(raw));
    }
    return replies;
  }

  /// On a Redis Cluster, complete()'s script runs on one node, and Redis refuses a key of
  /// another slot only when the script reaches it, after the commands before it were written.
  /// So the keys of every queued command are asked for first (queued_keys: one round trip) and
  /// returned, without repeats, to be declared with the script (eval). A key of another slot, or
  /// the record's own key, refuses the whole step with statement_error before anything is
  /// written (a command with no key, or one the script will refuse itself, passes here).
  std::vector<std::string> keys_in_the_records_slot(
      std::string_view key, const std::vector<std::vector<std::string>>& commands) {
    const std::uint16_t record_slot = redis_detail::slot_of(key);
    std::vector<std::string> declared;
    const reply_ptr none = routes_.run(key, [&](pooled& conn) {
      const std::vector<reply_ptr> replies = queued_keys(conn, commands);
      for (std::size_t i = 0; i < replies.size(); ++i) {
        const redisReply* r = replies[i].get();
        if (r->type != REDIS_REPLY_ARRAY) continue;  // no keys, or an error the script reports
        for (std::size_t j = 0; j < r->elements; ++j) {
          if (!is_text(r->element[j])) continue;
          const std::string_view k = text_of(*r->element[j]);
          const std::string refused = where_ + ": complete on " + detail::quote_for_message(key) +
                                      ": queued command " + std::to_string(i + 1) + " (" +
                                      detail::escape_control(commands[i][0], 40) + ") names key " +
                                      detail::quote_for_message(k);
          if (k == key) {
            throw statement_error(refused +
                                  ", the record itself, which only the store writes; nothing "
                                  "was written");
          }
          const std::uint16_t slot = redis_detail::slot_of(k);
          if (slot != record_slot) {
            throw statement_error(refused + " of hash slot " + std::to_string(slot) +
                                  ", the record is in slot " + std::to_string(record_slot) +
                                  ": on a Redis Cluster the handler's writes must share the "
                                  "record's slot (docs/idempotency.md, \"Redis Sentinel and "
                                  "Redis Cluster\"); nothing was written");
          }
          if (std::find(declared.begin(), declared.end(), k) == declared.end()) {
            declared.emplace_back(k);
          }
        }
      }
      return reply_ptr{};  // nothing to redirect: the replies were read here
    });
    (void)none;
    return declared;
  }

  endpoint endpoint_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::string where_;
  internal::redis_routes routes_;
};

}  // namespace

std::unique_ptr<store> make_redis_store(const redis_options& options) {
  validate(options);
  return std::make_unique<redis_store>(options);
}

}  // namespace stormguard::guard
