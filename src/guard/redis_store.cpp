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
// Needs Redis 7 or later (the scripts declare flags: "#!lua"). Not for Redis Cluster:
// complete()'s script runs the handler's commands on keys it does not declare in KEYS, which a
// single server (or a primary with replicas) allows.
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "guard/codec.hpp"
#include "guard/pool.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {

namespace {

// --- the scripts ---------------------------------------------------------------------------

// le(a, b): a <= b for two int64 values written in decimal (std::to_string: no leading zeros, a
// '-' for negatives). Exact: compares sign, then length, then at most two chunks of <= 15 digits
// (tonumber is exact below 2^53), never the strings with '<' (strcoll, the server's locale).
constexpr std::string_view k_lua_le = R"lua(
local function le(a, b)
  local na, nb = a:sub(1, 1) == '-', b:sub(1, 1) == '-'
  if na ~= nb then return na end
  if na then a, b = b:sub(2), a:sub(2) end
  if #a ~= #b then return #a < #b end
  local n = #a - 15
  if n > 0 then
    local ha, hb = tonumber(a:sub(1, n)), tonumber(b:sub(1, n))
    if ha ~= hb then return ha < hb end
    a, b = a:sub(n + 1), b:sub(n + 1)
  end
  return tonumber(a) <= tonumber(b)
end
)lua";

// begin. KEYS[1] the record; ARGV: now, fingerprint, token, lease_expires, expires, pexpire_ms.
// Returns {'acquired', took_over 0|1}, {'in_progress', fingerprint, lease_expires} or
// {'completed', fingerprint, status, headers, body}.
constexpr std::string_view k_lua_begin = R"lua(
local k = KEYS[1]
local now = ARGV[1]
local r = redis.call('HMGET', k, 'state', 'fingerprint', 'lease_expires', 'expires', 'status',
                     'headers', 'body')
local took_over = 0
if r[1] then
  if not r[4] or (r[1] ~= 'completed' and (r[1] ~= 'in_progress' or not r[3])) then
    return redis.error_reply('ERR stormguard record ' .. k .. ' is corrupt (state ' ..
                             tostring(r[1]) .. ')')
  end
  if not le(r[4], now) then
    if r[1] == 'completed' then return {'completed', r[2], r[5], r[6], r[7]} end
    if not le(r[3], now) then return {'in_progress', r[2], r[3]} end
    took_over = 1
  end
end
redis.call('DEL', k)
redis.call('HSET', k, 'state', 'in_progress', 'fingerprint', ARGV[2], 'token', ARGV[3],
           'lease_expires', ARGV[4], 'expires', ARGV[5])
redis.call('PEXPIRE', k, ARGV[6])
return {'acquired', took_over}
)lua";

// complete. KEYS[1] the record; ARGV: token, expires, pexpire_ms, status, headers, body, n, then
// the n queued commands, each as its argument count and its arguments (name first).
// Returns 1 (completed), 0 (lease lost: nothing run) or an error.
//
// A Redis script is atomic (no other command runs meanwhile) but it does NOT roll back: when its
// third command fails, the first two stay written. So what can be checked is checked before the
// first command runs: out of memory (the script flags, see script_texts), and every queued
// command (it exists, may run in a script, has a valid number of arguments: COMMAND INFO). What
// can only fail while running (a WRONGTYPE, a value that is not an integer) leaves the commands
// before it applied and the record in progress.
constexpr std::string_view k_lua_complete = R"lua(
local k = KEYS[1]
local r = redis.call('HMGET', k, 'state', 'token')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[7])
local checked = {}
local i = 8
for c = 1, n do
  local argc = tonumber(ARGV[i])
  local name = string.lower(ARGV[i + 1])
  local info = checked[name]
  if info and #info[10] > 0 and argc >= 2 then  -- a container (CLIENT, CONFIG...): its subcommand
    name = name .. '|' .. string.lower(ARGV[i + 2])
    info = checked[name]
  end
  if not info then
    info = redis.call('COMMAND', 'INFO', name)[1]
    if info and #info[10] > 0 and argc >= 2 then
      checked[name] = info
      name = name .. '|' .. string.lower(ARGV[i + 2])
      info = checked[name] or redis.call('COMMAND', 'INFO', name)[1]
    end
    if not info then
      return redis.error_reply('ERR queued command ' .. c .. ': unknown command ' .. name ..
                               ' (nothing was written)')
    end
    for _, flag in ipairs(info[3]) do
      if flag.ok == 'noscript' then
        return redis.error_reply('ERR queued command ' .. c .. ': ' .. name ..
                                 ' cannot run in a script (nothing was written)')
      end
    end
    checked[name] = info
  end
  local arity = info[2]
  if (arity >= 0 and argc ~= arity) or (arity < 0 and argc < -arity) then
    return redis.error_reply('ERR queued command ' .. c .. ': wrong number of arguments for ' ..
                             name .. ' (nothing was written)')
  end
  i = i + argc + 1
end
i = 8
for c = 1, n do
  local argc = tonumber(ARGV[i])
  local res = redis.pcall(unpack(ARGV, i + 1, i + argc))
  if type(res) == 'table' and res.err then
    return redis.error_reply('ERR queued command ' .. c .. ' (' .. ARGV[i + 1] .. ') failed: ' ..
                             res.err .. '; the ' .. (c - 1) .. ' queued before it stay ' ..
                             'written (Redis scripts do not roll back); the record stays ' ..
                             'in progress')
  end
  i = i + argc + 1
end
redis.call('HSET', k, 'state', 'completed', 'expires', ARGV[2], 'status', ARGV[4], 'headers',
           ARGV[5], 'body', ARGV[6])
redis.call('HDEL', k, 'token', 'lease_expires')
redis.call('PEXPIRE', k, ARGV[3])
return 1
)lua";

// release. KEYS[1] the record; ARGV[1] the token. Returns 1 (deleted) or 0.
constexpr std::string_view k_lua_release = R"lua(
local r = redis.call('HMGET', KEYS[1], 'state', 'token')
if r[1] == 'in_progress' and r[2] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

enum script_id : std::uint8_t { k_begin, k_complete, k_release, k_script_count };

const std::array<std::string, k_script_count>& script_texts() {
  // "#!lua" (Redis 7 script flags, none given): a script that may write is refused as a whole
  // when the server is out of memory (maxmemory), before its first command, instead of failing
  // at its first write with the commands before it applied.
  static const std::array<std::string, k_script_count> texts = {
      "#!lua" + std::string(k_lua_le) + std::string(k_lua_begin),
      "#!lua" + std::string(k_lua_complete), "#!lua" + std::string(k_lua_release)};
  return texts;
}

// The most arguments of one queued command: the script passes them through Lua's unpack(),
// which stops at its C stack limit (LUAI_MAXCSTACK, 8000 in Redis's Lua 5.1).
constexpr std::size_t k_max_queued_args = 7000;

constexpr std::size_t k_max_record_key_part = 255;

// --- hiredis plumbing ------------------------------------------------------------------------

/// Blocks SIGPIPE in this thread while hiredis writes to a socket the server may have closed
/// (hiredis 0.14 uses write(), not send(MSG_NOSIGNAL)), and consumes a SIGPIPE that the write
/// raised, so that a store never kills its process nor changes its signal handlers. libpq does
/// the same (pq_block_sigpipe / pq_reset_sigpipe in fe-secure.c).
class sigpipe_guard {
 public:
  sigpipe_guard() noexcept {
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;
  ~sigpipe_guard() {
    const int saved_errno = errno;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        const timespec zero{};
        while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved_errno;
  }

 private:
  sigset_t old_{};
  bool was_pending_ = false;
};

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

/// One connection: its hiredis context and the SHA-1 of each script as SCRIPT LOAD answered.
struct connection {
  explicit connection(redisContext* c) noexcept : ctx(c) {}
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() {
    if (ctx != nullptr) redisFree(ctx);
  }
  redisContext* ctx;
  std::array<std::string, k_script_count> sha;
};

std::string_view text_of(const redisReply& r) noexcept { return {r.str, r.len}; }

bool is_text(const redisReply* r) noexcept {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

/// An argument vector for hiredis: pointers and lengths of views the caller keeps alive.
class argv_builder {
 public:
  void reserve(std::size_t n) {
    data_.reserve(n);
    size_.reserve(n);
  }
  void add(std::string_view s) {
    data_.push_back(s.data());
    size_.push_back(s.size());
  }
  [[nodiscard]] int argc() const noexcept { return static_cast<int>(data_.size()); }
  [[nodiscard]] std::string_view name() const noexcept {
    return data_.empty() ? std::string_view("command") : std::string_view(data_[0], size_[0]);
  }
  [[nodiscard]] const char** argv() noexcept { return data_.data(); }
  [[nodiscard]] const std::size_t* argvlen() const noexcept { return size_.data(); }

 private:
  std::vector<const char*> data_;
  std::vector<std::size_t> size_;
};

std::string upper_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// --- options ---------------------------------------------------------------------------------

struct endpoint {
  std::string host;
  int port = 6379;
  long long db = 0;
};

/// redis://HOST[:PORT][/DB]; HOST may be an IPv6 address in brackets ([::1]).
endpoint parse_url(const std::string& url) {
  auto bad = [&](std::string_view why) {
    return std::invalid_argument("redis_options.url " + detail::quote_for_message(url) + ": " +
                                 std::string(why));
  };
  constexpr std::string_view scheme = "redis://";
  std::string_view rest = url;
  if (rest.substr(0, scheme.size()) != scheme) {
    throw bad("expected redis://HOST[:PORT][/DB]");
  }
  rest.remove_prefix(scheme.size());
  if (rest.find_first_of("@?#") != std::string_view::npos) {
    throw bad("user info, query and fragment are not supported: redis://HOST[:PORT][/DB]");
  }
  endpoint e;
  std::string_view path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (path.empty()) throw bad("an empty DB after '/' (write redis://HOST:PORT/0, or no '/')");
  }
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) throw bad("'[' without ']' around an IPv6 host");
    e.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw bad("expected ':' PORT after the IPv6 host");
      port = rest.substr(1);
      if (port.empty()) throw bad("an empty PORT after ':'");
    }
  } else {
    const auto colon = rest.find(':');
    e.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) throw bad("an empty PORT after ':'");
    }
  }
  if (e.host.empty()) throw bad("no HOST");
  auto parse_number = [](std::string_view digits, long long& out) {
    if (digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc{} && end == digits.data() + digits.size();
  };
  if (!port.empty()) {
    long long p = 0;
    if (!parse_number(port, p) || p < 1 || p > 65535) {
      throw bad("PORT " + detail::quote_for_message(port) + " is not 1..65535");
    }
    e.port = static_cast<int>(p);
  }
  if (!path.empty()) {
    if (!parse_number(path, e.db) || e.db > std::numeric_limits<int>::max()) {
      throw bad("DB " + detail::quote_for_message(path) + " is not a database number 0..2^31-1");
    }
  }
  return e;
}

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
  static constexpr std::array<std::string_view, 17> refused = {
      "SELECT",    "MULTI",      "EXEC",       "DISCARD",     "WATCH",        "UNWATCH",
      "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE",
      "MONITOR",   "RESET",      "HELLO",      "AUTH",        "QUIT"};
  const std::string name = upper_ascii(statement);
  if (std::find(refused.begin(), refused.end(), name) != refused.end()) return true;
  if (name == "CLIENT" && !params.empty()) {
    const std::string sub = upper_ascii(params.front());
    return sub == "REPLY" || sub == "TRACKING";
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
        where_("redis store " + detail::escape_control(o.url, 200)),
        pool_(o.max_connections, [this] { return open(); }) {
    // Open one connection now: a store that cannot be reached fails here (stores.hpp).
    auto first = pool_.acquire();
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

    auto conn = pool_.acquire();
    const reply_ptr reply = eval(conn, k_begin, key, args);
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

    auto conn = pool_.acquire();
    const reply_ptr reply = eval(conn, k_complete, key, args);
    if (reply->type != REDIS_REPLY_INTEGER) {
      throw store_error(where_ + ": complete on " + detail::quote_for_message(key) +
                        ": unexpected reply");
    }
    return reply->integer == 1 ? complete_outcome::completed : complete_outcome::lease_lost;
  }

  void release(const record_key& id, std::string_view token) override {
    const std::string key = record_key_of(id);
    const std::array<std::string_view, 1> args = {token};
    auto conn = pool_.acquire();
    (void)eval(conn, k_release, key, args);
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
    auto conn = pool_.acquire();
    const reply_ptr reply = call(conn, argv);
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
  using pooled = internal::pool<connection>::lease;

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
  std::unique_ptr<connection> open() const {
    const timeval tv = timeout_timeval();
    redisContext* ctx = nullptr;
    {
      const sigpipe_guard no_sigpipe;
      ctx = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv);
    }
    if (ctx == nullptr) throw store_error(where_ + ": connect: cannot allocate a hiredis context");
    auto conn = std::make_unique<connection>(ctx);
    if (ctx->err != 0) throw io_error(ctx, "connect");
    if (redisSetTimeout(ctx, tv) != REDIS_OK) throw io_error(ctx, "setting the timeout");

    const sigpipe_guard no_sigpipe;
    std::vector<std::vector<std::string>> commands;
    const bool select = endpoint_.db != 0;
    if (select) commands.push_back({"SELECT", std::to_string(endpoint_.db)});
    commands.push_back({"CLIENT", "SETNAME", prefix_});
    for (const auto& text : script_texts()) commands.push_back({"SCRIPT", "LOAD", text});
    for (const auto& c : commands) {
      argv_builder argv;
      for (const auto& a : c) argv.add(a);
      if (redisAppendCommandArgv(ctx, argv.argc(), argv.argv(), argv.argvlen()) != REDIS_OK) {
        throw io_error(ctx, "connect");
      }
    }
    std::size_t script = 0;
    for (const auto& c : commands) {
      void* raw = nullptr;
      if (redisGetReply(ctx, &raw) != REDIS_OK) throw io_error(ctx, "connect");
      const reply_ptr reply(static_cast<redisReply*>(raw));
      if (reply->type == REDIS_REPLY_ERROR) {
        throw store_error(where_ + ": connect: " + c[0] + " " + c[1] + ": " +
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
  reply_ptr eval(pooled& conn, script_id script, std::string_view key,
                 std::span<const std::string_view> args) const {
    for (int attempt = 0;; ++attempt) {
      argv_builder argv;
      argv.reserve(args.size() + 4);
      argv.add("EVALSHA");
      argv.add(conn->sha[script]);
      argv.add("1");
      argv.add(key);
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
      static constexpr std::array<std::string_view, k_script_count> names = {"begin", "complete",
                                                                             "release"};
      throw store_error(where_ + ": " + std::string(names[script]) + " on " +
                        detail::quote_for_message(key) + ": " + detail::escape_control(message));
    }
  }

  endpoint endpoint_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::string where_;
  internal::pool<connection> pool_;
};

}  // namespace

std::unique_ptr<store> make_redis_store(const redis_options& options) {
  validate(options);
  return std::make_unique<redis_store>(options);
}

}  // namespace stormguard::guard
