// SPDX-License-Identifier: Apache-2.0
#include "stormguard/fleet/redis_sync.hpp"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "redis/sigpipe_guard.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/redis_url.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/version.hpp"

namespace stormguard::fleet {

namespace {

// The exchange, atomic in Redis. KEYS: {KEY}:window, {KEY}:clients, {KEY}:claims,
// {KEY}:version. ARGV: client id, requests, retries, slice (ms), slices, heartbeat ttl (ms),
// largest delta, own requests (the share's numerator), deposit per request and reserve
// (micro-retries), and this process's fleet protocol (k_fleet_protocol). Returns {requests,
// retries, live clients, credit} of the window (the current slice and the `slices` before it, as
// detail::sliding_window keeps them). The credit is fleet_budget::claim computed in Lua (the
// same steps; exact while the products stay below 2^53 micro-retries), kept in {KEY}:claims as
// this client's claim ("c:ID", its positive part; "t" holds the sum) until its next sync or the
// expiry of its heartbeat, as fleet_window_store keeps it.
//
// The protocol check comes first and writes nothing when it refuses (an error reply
// "STORMGUARD_FLEET_PROTOCOL <theirs>"): {KEY}:version holds the protocol of the processes that
// share the key. A key of another protocol is refused. So is one written by stormguard 0.1,
// which kept no version (protocol 1): its keys exist without {KEY}:version, or, when it joins a
// key of this protocol later, it is a live client in {KEY}:clients with no claim in {KEY}:claims
// (0.1.0 kept no claims; this script writes a claim for every live client it adds). A successful
// exchange sets {KEY}:version with an expiry no earlier than that of the other three keys.
constexpr std::string_view k_script = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local slice = tonumber(ARGV[4])
local slices = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local maxd = tonumber(ARGV[7])
local ours = ARGV[11]
local marker = redis.call('GET', KEYS[4])
if marker then
  if marker ~= ours then return redis.error_reply('STORMGUARD_FLEET_PROTOCOL ' .. marker) end
  local live = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
  if live > 0 then
    local marked = redis.call('HLEN', KEYS[3]) - redis.call('HEXISTS', KEYS[3], 't')
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
      marked = marked - redis.call('HEXISTS', KEYS[3], 'c:' .. id)
    end
    if live > marked then return redis.error_reply('STORMGUARD_FLEET_PROTOCOL 1') end
  end
elseif redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3]) > 0 then
  return redis.error_reply('STORMGUARD_FLEET_PROTOCOL 1')
end
local function clampto(v, most)
  v = tonumber(v) or 0
  if v < 0 then return 0 end
  if v > most then return most end
  return math.floor(v)
end
local function clamp(v) return clampto(v, maxd) end
local n = math.floor(now / slice)
local dr, dw = clamp(ARGV[2]), clamp(ARGV[3])
if dr > 0 then redis.call('HINCRBY', KEYS[1], 'r:' .. n, dr) end
if dw > 0 then redis.call('HINCRBY', KEYS[1], 'w:' .. n, dw) end
local all = redis.call('HGETALL', KEYS[1])
local req, ret = 0, 0
local stale = {}
for i = 1, #all, 2 do
  local f = all[i]
  local slot = tonumber(string.sub(f, 3))
  if slot == nil or slot < n - slices then
    stale[#stale + 1] = f
  elseif string.sub(f, 1, 1) == 'r' then
    req = req + tonumber(all[i + 1])
  else
    ret = ret + tonumber(all[i + 1])
  end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
redis.call('PEXPIRE', KEYS[1], 2 * slice * (slices + 1))
-- Claims: no live client, no claim; those of clients whose heartbeat expired are freed.
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('DEL', KEYS[3]) end
local claimed = tonumber(redis.call('HGET', KEYS[3], 't') or 0) or 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
  local c = redis.call('HGET', KEYS[3], 'c:' .. id)
  if c then
    claimed = claimed - (tonumber(c) or 0)
    redis.call('HDEL', KEYS[3], 'c:' .. id)
  end
end
claimed = claimed - (tonumber(redis.call('HGET', KEYS[3], 'c:' .. ARGV[1]) or 0) or 0)
if claimed < 0 then claimed = 0 end
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('PEXPIRE', KEYS[2], 2 * ttl)
local live = redis.call('ZCARD', KEYS[2])
-- fleet_budget::claim: the share of the allowance, never more than the others left unclaimed.
local own = clampto(ARGV[8], maxd * 1000)
local deposit = clampto(ARGV[9], 1000000000)
local reserve = clampto(ARGV[10], 60000000000000)
local allowance = req * deposit + reserve - ret * 1000000
local share
if req > 0 and own > 0 then
  share = math.min(1000000, math.floor(own * 1000000 / req))
elseif req > 0 then
  share = math.floor(1000000 / (req + 1))
else
  share = math.floor(1000000 / math.max(1, live))
end
local target
if allowance >= 0 then
  target = math.floor(allowance * share / 1000000)
else
  target = -math.floor(-allowance * share / 1000000)
end
local credit = math.min(target, math.max(0, allowance - claimed))
local bound = 4000000000000000
if credit > bound then credit = bound end
if credit < -bound then credit = -bound end
local keep = math.max(credit, 0)
redis.call('HSET', KEYS[3], 'c:' .. ARGV[1], keep, 't', claimed + keep)
redis.call('PEXPIRE', KEYS[3], 2 * ttl)
redis.call('SET', KEYS[4], ours, 'PX', math.max(2 * slice * (slices + 1), 2 * ttl) + 1000)
return {req, ret, live, credit}
)lua";

struct reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;
struct context_deleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

class failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The store refused the exchange: the key is shared by processes of another fleet protocol.
class protocol_refused : public failure {
 public:
  using failure::failure;
};

// The release that speaks fleet protocol `protocol` (as the script's error reply names it).
std::string release_of(std::string_view protocol) {
  if (protocol == "1") return "stormguard 0.1, which writes no version";
  if (protocol == std::to_string(k_fleet_protocol)) return "stormguard 0.2 or later";
  return "another stormguard release";
}

// The refusal of the script's error reply `error` ("... STORMGUARD_FLEET_PROTOCOL <theirs>"),
// naming both protocols and their releases.
protocol_refused refusal(std::string_view key, std::string_view error) {
  constexpr std::string_view tag = "STORMGUARD_FLEET_PROTOCOL ";
  std::string_view theirs = error.substr(error.find(tag) + tag.size());
  theirs = theirs.substr(0, std::min(theirs.find_first_of(" \r\n"), std::size_t{20}));
  return protocol_refused(
      "fleet key " + detail::quote_for_message(std::string(key)) +
      " is shared by processes of fleet protocol " +
      detail::quote_for_message(std::string(theirs)) + " (" + release_of(theirs) +
      "); this process speaks fleet protocol " + std::to_string(k_fleet_protocol) +
      " (stormguard " + std::string(version()) +
      "): refusing to share a budget across versions (give each version its own "
      "budget.fleet.key, or stop the other processes and let the key expire)");
}

std::string generated_client_id() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::random_device rd;
  const std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  std::array<char, 17> hex{};
  const auto [end, ec] = std::to_chars(hex.data(), hex.data() + 16, r, 16);
  (void)ec;  // 16 hex digits hold any 64-bit value
  return std::string(host.data()) + "/" + std::to_string(getpid()) + "/" +
         std::string(hex.data(), end);
}

void check_key(const std::string& key) {
  const bool printable = std::all_of(
      key.begin(), key.end(), [](char c) { return c > ' ' && c < 127 && c != '{' && c != '}'; });
  if (key.empty() || key.size() > 200 || !printable) {
    throw std::invalid_argument(
        "budget.fleet.key must be 1 to 200 printable ASCII characters other than '{' and '}', "
        "got " +
        detail::quote_for_message(key));
  }
}

}  // namespace

struct redis_sync::impl {
  fleet_budget& budget;
  redis_sync_options options;
  detail::redis_url endpoint;
  clock& time;
  log_hook log;
  std::string window_key;
  std::string clients_key;
  std::string claims_key;
  std::string version_key;
  std::string slice_ms;
  std::string ttl_ms;
  std::string shown_url;  // redacted

  detail::mutex mutex;  // one sync at a time; guards the connection and the stats
  context_ptr ctx STORMGUARD_GUARDED_BY(mutex);
  std::string sha STORMGUARD_GUARDED_BY(mutex);
  redis_sync_stats stats STORMGUARD_GUARDED_BY(mutex);
  bool said_down STORMGUARD_GUARDED_BY(mutex) = false;
  bool said_refused STORMGUARD_GUARDED_BY(mutex) = false;  // the refusal is said once too
  // Reconnection backoff: failed round trips in a row, and the earliest time of the next try.
  std::int64_t failures_in_row STORMGUARD_GUARDED_BY(mutex) = 0;
  time_point next_try STORMGUARD_GUARDED_BY(mutex){};
  std::minstd_rand jitter STORMGUARD_GUARDED_BY(mutex);

  impl(fleet_budget& b, redis_sync_options o, clock& c, log_hook l)
      : budget(b),
        options(std::move(o)),
        endpoint(detail::parse_redis_url(options.url, "budget.fleet.store")),
        time(c),
        log(std::move(l)),
        shown_url(detail::redact_redis_url(options.url)) {
    check_key(options.key);
    jitter.seed(static_cast<std::uint_fast32_t>(std::random_device{}()));
    using namespace std::chrono_literals;
    if (options.timeout < 1ms || options.timeout > 10s) {
      throw std::invalid_argument("budget.fleet timeout must be in [1ms, 10s], got " +
                                  format_duration(options.timeout));
    }
    const duration max_interval = budget.options().max_sync_interval;
    if (options.heartbeat_ttl == duration::zero()) options.heartbeat_ttl = 3 * max_interval;
    if (options.heartbeat_ttl < max_interval || options.heartbeat_ttl > 1h) {
      throw std::invalid_argument("budget.fleet heartbeat_ttl must be in [max_sync_interval (" +
                                  format_duration(max_interval) + "), 1h], got " +
                                  format_duration(options.heartbeat_ttl));
    }
    if (!options.password.empty()) {
      endpoint.password = options.password;
      endpoint.has_password = true;
    }
    if (options.client_id.empty()) options.client_id = generated_client_id();
    window_key = "{" + options.key + "}:window";
    clients_key = "{" + options.key + "}:clients";
    claims_key = "{" + options.key + "}:claims";
    version_key = "{" + options.key + "}:version";
    const auto window_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(budget.options().ratio.window)
            .count();
    slice_ms = std::to_string((window_ms + ratio_budget::k_slices - 1) / ratio_budget::k_slices);
    ttl_ms = std::to_string(
        std::chrono::duration_cast<std::chrono::milliseconds>(options.heartbeat_ttl).count());
  }

  void notify() noexcept STORMGUARD_REQUIRES(mutex) {
    if (!options.on_sync) return;
    try {
      options.on_sync(stats);
    } catch (...) {
      // A failed observer never changes what the budget does.
    }
  }

  void say(std::string_view line) noexcept {
    if (!log) return;
    try {
      log(line);
    } catch (...) {
      // A failed diagnostic never changes what the budget does.
    }
  }

  reply_ptr command(const std::vector<std::string>& args) STORMGUARD_REQUIRES(mutex) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* raw = static_cast<redisReply*>(
        redisCommandArgv(ctx.get(), static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (raw == nullptr) {
      throw failure(std::string(args.front()) + ": " +
                    (ctx->errstr[0] != '\0' ? ctx->errstr : "no reply"));
    }
    return reply_ptr(raw);
  }

  void connect() STORMGUARD_REQUIRES(mutex) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(options.timeout).count();
    const timeval tv{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
    ctx.reset(redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, tv));
    if (!ctx) throw failure("connect: cannot allocate a hiredis context");
    if (ctx->err != 0) throw failure(std::string("connect: ") + ctx->errstr);
    if (redisSetTimeout(ctx.get(), tv) != REDIS_OK) throw failure("setting the timeout");
    if (endpoint.has_password) {
      std::vector<std::string> auth{"AUTH"};
      if (!endpoint.user.empty()) auth.push_back(endpoint.user);
      auth.push_back(endpoint.password);
      const reply_ptr r = command(auth);
      // The server's own words on AUTH never echo the password; say only that it was refused.
      if (r->type == REDIS_REPLY_ERROR) throw failure("AUTH refused");
    }
    if (endpoint.db != 0) {
      const reply_ptr r = command({"SELECT", std::to_string(endpoint.db)});
      if (r->type == REDIS_REPLY_ERROR) throw failure(std::string("SELECT: ") + r->str);
    }
    const reply_ptr r = command({"SCRIPT", "LOAD", std::string(k_script)});
    if (r->type != REDIS_REPLY_STRING) {
      throw failure(std::string("SCRIPT LOAD: ") +
                    (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply"));
    }
    sha.assign(r->str, r->len);
  }

  fleet_answer exchange(const fleet_deltas& out, const fleet_terms& terms)
      STORMGUARD_REQUIRES(mutex) {
    if (!ctx) connect();
    std::vector<std::string> args{"EVALSHA",
                                  sha,
                                  "4",
                                  window_key,
                                  clients_key,
                                  claims_key,
                                  version_key,
                                  options.client_id,
                                  std::to_string(out.requests),
                                  std::to_string(out.retries),
                                  slice_ms,
                                  std::to_string(ratio_budget::k_slices),
                                  ttl_ms,
                                  std::to_string(fleet_window_store::k_max_delta),
                                  std::to_string(terms.own_requests),
                                  std::to_string(terms.deposit),
                                  std::to_string(terms.reserve),
                                  std::to_string(k_fleet_protocol)};
    reply_ptr r = command(args);
    if (r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).starts_with("NOSCRIPT")) {
      args[0] = "EVAL";  // the server lost its script cache (a restart, SCRIPT FLUSH)
      args[1] = std::string(k_script);
      r = command(args);
    }
    if (r->type == REDIS_REPLY_ERROR) {
      const std::string_view error(r->str, r->len);
      if (error.find("STORMGUARD_FLEET_PROTOCOL ") != std::string_view::npos) {
        throw refusal(options.key, error);
      }
      throw failure(std::string("EVALSHA: ") + r->str);
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) throw failure("an unexpected reply");
    std::array<long long, 4> v{};
    for (std::size_t i = 0; i < 4; ++i) {
      if (r->element[i]->type != REDIS_REPLY_INTEGER) throw failure("an unexpected reply");
      v[i] = r->element[i]->integer;
    }
    return fleet_answer{fleet_view{v[0], v[1], v[2]}, v[3]};
  }

  // The wait before the next try after `failures` failed round trips in a row: sync_interval,
  // doubling, at most max_sync_interval, drawn uniformly in [half, all] of it so that a fleet
  // whose store restarts does not reconnect in step.
  duration backoff(std::int64_t failures) STORMGUARD_REQUIRES(mutex) {
    const duration most = budget.options().max_sync_interval;
    duration d = budget.options().sync_interval;
    for (std::int64_t k = 1; k < failures && d < most; ++k) d *= 2;
    d = std::min(d, most);
    const auto half = d.count() / 2;
    return duration(half + static_cast<duration::rep>(std::uniform_int_distribution<std::int64_t>(
                               0, d.count() - half)(jitter)));
  }

  bool sync(bool force) {
    const time_point start = time.now();
    if (!force && !budget.sync_due(start)) return false;
    const detail::lock hold(mutex);
    if (!force && failures_in_row > 0 && start < next_try) return false;  // backing off
    const fleet_deltas out = budget.begin_sync(start);
    const fleet_terms terms = budget.terms();
    const redis_detail::sigpipe_guard no_sigpipe;
    try {
      const fleet_answer answer = exchange(out, terms);
      const fleet_view& view = answer.view;
      const time_point end = time.now();
      budget.end_sync(end, answer);
      ++stats.syncs;
      stats.last_latency = end - start;
      stats.store_up = true;
      stats.refused = false;
      stats.live_clients = view.live_clients;
      stats.share_ppm = budget.share_ppm();
      stats.fallback = budget.current_mode(end) == fleet_budget::mode::fallback;
      if (failures_in_row > 0 && stats.syncs > 1) ++stats.rejoins;
      failures_in_row = 0;
      notify();
      if (said_down) {
        said_down = said_refused = false;
        say("fleet budget " + options.key + ": store " + shown_url +
            " answers again: rejoined the fleet (" + std::to_string(view.live_clients) +
            " live clients)");
      }
      return true;
    } catch (const std::exception& e) {
      ctx.reset();  // reconnect at the next try
      const time_point end = time.now();
      budget.sync_failed(end);
      ++failures_in_row;
      next_try = end + backoff(failures_in_row);
      ++stats.errors;
      stats.store_up = false;
      stats.fallback = true;
      stats.refused = dynamic_cast<const protocol_refused*>(&e) != nullptr;
      if (stats.refused) ++stats.refusals;
      notify();
      if (stats.refused && !said_refused) {
        said_down = said_refused = true;
        say("fleet budget " + options.key + ": store " + shown_url + " refused: " + e.what() +
            "; falling back to local counts");
      } else if (!said_down) {
        said_down = true;
        // What the fallback grants: a process that never synced knows no live count, so it has
        // no part of the fleet's floor unless the policy names expected_clients.
        const bool no_floor = budget.live_clients() == 0 && budget.options().expected_clients == 0;
        say("fleet budget " + options.key + ": store " + shown_url + " unavailable (" + e.what() +
            "): falling back to local counts" +
            (no_floor ? " (this process's ratio only, no floor until a sync counts the live "
                        "clients: set budget.fleet.expected_clients for one)"
                      : ""));
      }
      return false;
    }
  }
};

redis_sync::redis_sync(fleet_budget& budget, redis_sync_options options, clock& clock, log_hook log)
    : impl_(std::make_unique<impl>(budget, std::move(options), clock, std::move(log))) {
  if (!impl_->options.start_thread) return;
  thread_ = std::jthread([this](std::stop_token stop) {
    // Wake a few times per sync interval (the budget decides whether a sync is due).
    const duration poll =
        std::clamp<duration>(impl_->budget.options().sync_interval / 4,
                             std::chrono::milliseconds(1), std::chrono::milliseconds(25));
    while (!stop.stop_requested()) {
      (void)impl_->sync(false);
      (void)impl_->time.sleep_for(poll, stop);
    }
  });
}

redis_sync::~redis_sync() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

bool redis_sync::sync_once(bool force) { return impl_->sync(force); }

redis_sync_stats redis_sync::stats() const {
  const detail::lock hold(impl_->mutex);
  return impl_->stats;
}

const std::string& redis_sync::client_id() const noexcept { return impl_->options.client_id; }

}  // namespace stormguard::fleet
