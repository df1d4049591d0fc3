// SPDX-License-Identifier: Apache-2.0
#include "stormguard/fleet/redis_sync.hpp"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "redis/cluster.hpp"
#include "redis/sentinel.hpp"
#include "redis/sigpipe_guard.hpp"
#include "stormguard/detail/format.hpp"
#include "stormguard/detail/mutex.hpp"
#include "stormguard/detail/redis_url.hpp"
#include "stormguard/duration_text.hpp"
#include "stormguard/version.hpp"

namespace stormguard::fleet {

namespace {

// The exchange, atomic in Redis (fleet protocol 3). KEYS: {KEY}:version (the state), and the
// keys of protocols 1 and 2 ({KEY}:window, {KEY}:clients, {KEY}:claims), only checked. ARGV:
// requests, retries, slice (ms), slices, heartbeat ttl (ms), largest delta, own requests (the
// share's numerator), deposit per request and reserve (micro-retries), this process's fleet
// protocol (k_fleet_protocol), what the process carries from its last sync: the store's
// epoch (0 for none), its heartbeat bucket (-1 for none) and the claim it holds (micro-retries),
// then 1 when its claims are whole retries (fleet_terms::whole_retries; else 0), and the
// micro-retries it asks for (an ask of claims that follow need: 0 for a sync). Returns
// {requests, retries, live clients, credit, epoch, bucket, forgot, learning (ms left)}; for an
// ask, the credit is what it was granted and the bucket the one it carries. An ask adds no counts
// and renews no heartbeat; it is granted nothing in learning mode or without a live bucket.
//
// {KEY}:version is one string: the protocol, a space, and 49 numbers (struct.pack, little-endian
// doubles, exact below 2^53):
//   1 epoch (Redis TIME in us when the state was created)   2 learning mode until (ms)
//   3 next look for the older layouts (ms)   4 g, the heartbeat buckets' width (ms)
//   5 newest slice N   6 newest bucket K   7 unused (0)
//   8-18 requests and 19-29 retries of window slot N mod 11 (the slices N-10..N)
//   30-39 clients and 40-49 the sum of their claims of heartbeat bucket K mod 10 (the clients
//         whose heartbeat expires by K · g; the buckets K-9..K)
// A client's heartbeat and claim are in the bucket of the time its heartbeat expires, and the
// client carries (bucket, claim) itself: its next sync takes them out of that bucket, and when it
// dies they leave with the bucket, at most g after its heartbeat expired. So a sync is TIME, GET
// and SET (which also sets the expiry), whatever the fleet size; at creation and once per
// retention period it also looks for the other layouts (EXISTS). A process of protocol 2 reads
// "3 ..." from {KEY}:version and refuses; this script refuses another protocol's string, and
// the older keys without it (stormguard 0.1 wrote no version), with
// "STORMGUARD_FLEET_PROTOCOL <theirs>", before anything is written. A process that carries an
// epoch other than the store's has found a store that forgot the fleet (restart, FLUSHALL,
// eviction, failover to a lagged replica): for one window from then (learning mode) no process is
// handed a claim larger than the one it carries.
constexpr std::string_view k_script = R"lua(
local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
local slice, slices = tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl, maxd, ours = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[10]
local pe, pb = tonumber(ARGV[11]) or 0, tonumber(ARGV[12]) or -1
local bound = 4000000000000000
local S = slices + 1
local R, W, C, M = 8, 8 + S, 8 + 2 * S, 18 + 2 * S
local size = 27 + 2 * S
local F = '<' .. string.rep('d', size)
local raw = redis.call('GET', KEYS[1])
local v, created
if raw then
  local sp = string.find(raw, ' ', 1, true)
  local theirs = string.sub(raw, 1, (sp or 21) - 1)
  if theirs ~= ours then return redis.error_reply('STORMGUARD_FLEET_PROTOCOL ' .. theirs) end
  v = {struct.unpack(F, raw, sp + 1)}
else
  if redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4]) > 0 then
    return redis.error_reply('STORMGUARD_FLEET_PROTOCOL 1')
  end
  v = {}
  for i = 1, size do v[i] = 0 end
  v[1] = tonumber(t[1]) * 1000000 + tonumber(t[2])
  v[4] = ceil(ttl / 8)
  v[5] = floor(now / slice)
  v[6] = floor(now / v[4])
  created = true
end
local g = v[4]
-- The live clients (from `live`) and the sum of their claims, over the heartbeat buckets.
local function live_claims(live)
  local claimed = 0
  for k = v[6] - 9, v[6] do
    if k * g > now then
      live = live + v[C + k % 10]
      claimed = claimed + v[M + k % 10]
    end
  end
  return live, claimed
end
local retain = max(slice * S, ttl + g)
if created then
  v[3] = now + retain
elseif now > v[3] then
  if redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4]) > 0 then
    return redis.error_reply('STORMGUARD_FLEET_PROTOCOL 1')
  end
  v[3] = now + retain
end
local forgot = 0
if pe ~= 0 and pe ~= v[1] then
  forgot = 1
  if v[2] <= now then v[2] = now + slice * slices end
end
local learning = max(0, v[2] - now)
-- The window: slots older than its slices emptied, this sync's deltas into the newest.
local n = max(floor(now / slice), v[5])
if n > v[5] then
  for k = max(v[5] + 1, n - slices), n do
    v[R + k % S] = 0
    v[W + k % S] = 0
  end
  v[5] = n
end
-- Every number a process states is clamped to [0, most]: (tonumber or 0), then min and max.
v[R + n % S] = v[R + n % S] + floor(max(0, min(tonumber(ARGV[1]) or 0, maxd)))
v[W + n % S] = v[W + n % S] + floor(max(0, min(tonumber(ARGV[2]) or 0, maxd)))
local req, ret = 0, 0
for i = 0, slices do
  req = req + v[R + i]
  ret = ret + v[W + i]
end
local own = floor(max(0, min(tonumber(ARGV[7]) or 0, maxd * 1000)))
local deposit = floor(max(0, min(tonumber(ARGV[8]) or 0, 1000000000)))
local reserve = floor(max(0, min(tonumber(ARGV[9]) or 0, 60000000000000)))
local allowance = req * deposit + reserve - ret * 1000000
local wanted = floor(max(0, min(tonumber(ARGV[15]) or 0, 1000000)))
if wanted > 0 then
  -- An ask (fleet_budget::grant): no counts, no heartbeat; all of `wanted` from what no live
  -- process has claimed, added to the asker's claim in its bucket, or nothing.
  local granted = 0
  local live, claimed = live_claims(0)
  if learning == 0 and pe == v[1] and pb > v[6] - 10 and pb <= v[6] and pb * g > now and
      allowance - claimed >= wanted then
    v[M + pb % 10] = v[M + pb % 10] + wanted
    granted = wanted
  end
  redis.call('SET', KEYS[1], ours .. ' ' .. struct.pack(F, unpack(v, 1, size)), 'PX',
    2 * retain + 1000)
  return {req, ret, live, granted, v[1], pb, forgot, learning}
end
-- Heartbeats and claims: this client's previous ones leave their bucket; the live ones summed.
local held = floor(max(0, min(tonumber(ARGV[13]) or 0, bound)))
if pe == v[1] and pb > v[6] - 10 and pb <= v[6] and pb * g > now then
  v[C + pb % 10] = max(0, v[C + pb % 10] - 1)
  v[M + pb % 10] = max(0, v[M + pb % 10] - held)
end
local kb = max(min(ceil((now + ttl) / g), floor(now / g) + 9), v[6] - 9)
if kb > v[6] then
  for k = max(v[6] + 1, kb - 9), kb do
    v[C + k % 10] = 0
    v[M + k % 10] = 0
  end
  v[6] = kb
end
local live, claimed = live_claims(1)
-- fleet_budget::claim: the share of the allowance, never more than the others left unclaimed.
local share
if req > 0 and own > 0 then
  share = min(1000000, floor(own * 1000000 / req))
elseif req > 0 then
  share = floor(1000000 / (req + 1))
else
  share = floor(1000000 / live)
end
local target
if allowance >= 0 then
  target = floor(allowance * share / 1000000)
else
  target = -floor(-allowance * share / 1000000)
end
local credit = min(target, max(0, allowance - claimed))
if ARGV[14] == '1' and credit > 0 then credit = credit - credit % 1000000 end
if learning > 0 then
  if pe == 0 then held = 0 end
  credit = min(credit, held)
end
if credit > bound then credit = bound end
if credit < -bound then credit = -bound end
v[C + kb % 10] = v[C + kb % 10] + 1
v[M + kb % 10] = v[M + kb % 10] + max(credit, 0)
redis.call('SET', KEYS[1], ours .. ' ' .. struct.pack(F, unpack(v, 1, size)), 'PX',
  2 * retain + 1000)
return {req, ret, live, credit, v[1], kb, forgot, learning}
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
  if (protocol == "2") return "stormguard 0.2, three keys without epochs";
  if (protocol == std::to_string(k_fleet_protocol)) return "stormguard 0.3 or later";
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
  std::string version_key;  // the state
  std::string window_key;   // protocols 1 and 2, only checked
  std::string clients_key;  // idem
  std::string claims_key;   // idem
  std::string slice_ms;
  std::string ttl_ms;
  const std::string slices_text = std::to_string(ratio_budget::k_slices);
  const std::string max_delta_text = std::to_string(fleet_window_store::k_max_delta);
  const std::string protocol_text = std::to_string(k_fleet_protocol);
  duration retention{};   // how long the store keeps the state after a sync (the script's retain)
  std::string shown_url;  // redacted

  // A Redis server the store may be reached at.
  using node = redis_detail::node;
  // The most nodes remembered (the URL's, and a Redis Cluster's), the most tried by one connect,
  // and the most redirections one exchange follows.
  static constexpr std::size_t k_max_nodes = 64;
  static constexpr std::size_t k_nodes_per_connect = 3;
  static constexpr int k_max_redirects = 3;

  detail::mutex mutex;  // one sync at a time; guards the connection and the stats
  context_ptr ctx STORMGUARD_GUARDED_BY(mutex);
  // The nodes known to serve the store: the URL's first; with a Redis Cluster, those its
  // CLUSTER SLOTS lists and its MOVED redirections name. `current` is the one connected to (or
  // tried next).
  std::vector<node> nodes STORMGUARD_GUARDED_BY(mutex);
  std::size_t current STORMGUARD_GUARDED_BY(mutex) = 0;
  std::string sha STORMGUARD_GUARDED_BY(mutex);
  redis_sync_stats stats STORMGUARD_GUARDED_BY(mutex);
  bool said_down STORMGUARD_GUARDED_BY(mutex) = false;
  bool said_refused STORMGUARD_GUARDED_BY(mutex) = false;  // the refusal is said once too
  // Reconnection backoff: failed round trips in a row, and the earliest time of the next try.
  std::int64_t failures_in_row STORMGUARD_GUARDED_BY(mutex) = 0;
  time_point next_try STORMGUARD_GUARDED_BY(mutex){};
  std::minstd_rand jitter STORMGUARD_GUARDED_BY(mutex);
  // What the process carries from its last successful sync (the script's ARGV 11-13): the
  // store's epoch, its heartbeat bucket (-1: none, after a failed round trip) and its claim.
  long long epoch STORMGUARD_GUARDED_BY(mutex) = 0;
  long long bucket STORMGUARD_GUARDED_BY(mutex) = -1;
  long long held STORMGUARD_GUARDED_BY(mutex) = 0;
  time_point last_success STORMGUARD_GUARDED_BY(mutex){};

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
    nodes.push_back(node{endpoint.host, endpoint.port});
    version_key = "{" + options.key + "}:version";
    window_key = "{" + options.key + "}:window";
    clients_key = "{" + options.key + "}:clients";
    claims_key = "{" + options.key + "}:claims";
    const auto window_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(budget.options().ratio.window)
            .count();
    const auto slice = (window_ms + ratio_budget::k_slices - 1) / ratio_budget::k_slices;
    const auto ttl =
        std::chrono::duration_cast<std::chrono::milliseconds>(options.heartbeat_ttl).count();
    slice_ms = std::to_string(slice);
    ttl_ms = std::to_string(ttl);
    retention = std::chrono::milliseconds(
        std::max(slice * (ratio_budget::k_slices + 1), ttl + (ttl + 7) / 8));
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
    return command(ctx.get(), args);
  }
  static reply_ptr command(redisContext* c, const std::vector<std::string>& args) {
    const std::vector<std::string_view> views(args.begin(), args.end());
    return command(c, std::span<const std::string_view>(views));
  }

  // The same over views (no copy: a sync's arguments are built in place); at most 32.
  reply_ptr command(std::span<const std::string_view> args) STORMGUARD_REQUIRES(mutex) {
    return command(ctx.get(), args);
  }
  static reply_ptr command(redisContext* c, std::span<const std::string_view> args) {
    std::array<const char*, 32> argv{};
    std::array<std::size_t, 32> lens{};
    const std::size_t n = std::min(args.size(), argv.size());
    for (std::size_t i = 0; i < n; ++i) {
      argv[i] = args[i].data();
      lens[i] = args[i].size();
    }
    auto* raw = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(n), argv.data(), lens.data()));
    if (raw == nullptr) {
      throw failure(std::string(args.front()) + ": " +
                    (c->errstr[0] != '\0' ? c->errstr : "no reply"));
    }
    return reply_ptr(raw);
  }

  // One round trip's timeout as hiredis takes it.
  timeval timeout_tv() const {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(options.timeout).count();
    return timeval{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
  }

  // A connection to `to`, authenticated, on the URL's database, with the script loaded.
  context_ptr open(const node& to) STORMGUARD_REQUIRES(mutex) {
    const timeval tv = timeout_tv();
    context_ptr c(redisConnectWithTimeout(to.host.c_str(), to.port, tv));
    if (!c) throw failure("connect: cannot allocate a hiredis context");
    if (c->err != 0) throw failure(std::string("connect: ") + c->errstr);
    if (redisSetTimeout(c.get(), tv) != REDIS_OK) throw failure("setting the timeout");
    if (endpoint.has_password) {
      std::vector<std::string> auth{"AUTH"};
      if (!endpoint.user.empty()) auth.push_back(endpoint.user);
      auth.push_back(endpoint.password);
      const reply_ptr r = command(c.get(), auth);
      // The server's own words on AUTH never echo the password; say only that it was refused.
      if (r->type == REDIS_REPLY_ERROR) throw failure("AUTH refused");
    }
    if (endpoint.db != 0) {
      const reply_ptr r = command(c.get(), {"SELECT", std::to_string(endpoint.db)});
      if (r->type == REDIS_REPLY_ERROR) throw failure(std::string("SELECT: ") + r->str);
    }
    const reply_ptr r = command(c.get(), {"SCRIPT", "LOAD", std::string(k_script)});
    if (r->type != REDIS_REPLY_STRING) {
      throw failure(std::string("SCRIPT LOAD: ") +
                    (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply"));
    }
    sha.assign(r->str, r->len);
    return c;
  }

  // The index of `n` among the known nodes, added (when there is room) if new.
  std::size_t remember(const node& n) STORMGUARD_REQUIRES(mutex) {
    const auto it = std::find(nodes.begin(), nodes.end(), n);
    if (it != nodes.end()) return static_cast<std::size_t>(it - nodes.begin());
    if (nodes.size() >= k_max_nodes) return current;
    nodes.push_back(n);
    return nodes.size() - 1;
  }

  // Connects to the current node, or, when it does not answer, to the next known ones (at most
  // k_nodes_per_connect per sync): after a Redis Cluster's failover the old master is gone, and
  // any other node redirects to the new one. On a cluster, remembers its nodes (CLUSTER SLOTS;
  // a server without cluster support answers an error, ignored).
  void connect() STORMGUARD_REQUIRES(mutex) {
    std::string why;
    if (!endpoint.sentinels.empty()) {
      // Redis Sentinel: the master is wherever the sentinels say now.
      const auto master = redis_detail::master_from_sentinels(endpoint, timeout_tv(), why);
      if (!master) throw failure("no sentinel named the master: " + why);
      const node at{master->first, master->second};
      ctx = open(at);
      nodes.assign(1, at);
      current = 0;
      return;
    }
    const std::size_t n = nodes.size();
    for (std::size_t k = 0; k < std::min(n, k_nodes_per_connect); ++k) {
      const std::size_t i = (current + k) % n;
      try {
        ctx = open(nodes[i]);
        current = i;
        learn_cluster_nodes();
        return;
      } catch (const failure& e) {
        ctx.reset();
        why = e.what();
      }
    }
    current = (current + 1) % n;  // the next sync starts from the next node
    throw failure(why);
  }

  void learn_cluster_nodes() STORMGUARD_REQUIRES(mutex) {
    const reply_ptr r = command({"CLUSTER", "SLOTS"});
    const auto ranges = redis_detail::slot_ranges_of(r.get(), nodes[current].host);
    if (!ranges) return;  // not a cluster
    for (const auto& range : *ranges) {
      (void)remember(range.master);
      for (const auto& replica : range.replicas) (void)remember(replica);
    }
  }

  // What one exchange returns besides the answer (the script's elements 5 to 8).
  struct carried {
    long long epoch = 0;
    long long bucket = -1;
    bool forgot = false;
    long long learning_ms = 0;
  };

  fleet_answer exchange(const fleet_deltas& out, const fleet_terms& terms, bool known,
                        carried& back, long long wanted = 0) STORMGUARD_REQUIRES(mutex) {
    if (!ctx) connect();
    // The numbers written in place (24 characters hold any long long), the rest as views.
    std::array<std::array<char, 24>, 10> digits{};
    std::size_t used = 0;
    const auto number = [&digits, &used](long long v) {
      auto& d = digits.at(used++);
      const auto [end, ec] = std::to_chars(d.data(), d.data() + d.size(), v);
      (void)ec;
      return std::string_view(d.data(), static_cast<std::size_t>(end - d.data()));
    };
    std::array<std::string_view, 22> args{"EVALSHA",
                                          sha,
                                          "4",
                                          version_key,
                                          window_key,
                                          clients_key,
                                          claims_key,
                                          number(out.requests),
                                          number(out.retries),
                                          slice_ms,
                                          slices_text,
                                          ttl_ms,
                                          max_delta_text,
                                          number(terms.own_requests),
                                          number(terms.deposit),
                                          number(terms.reserve),
                                          protocol_text,
                                          number(known ? epoch : 0),
                                          number(known ? bucket : -1),
                                          number(held),
                                          terms.whole_retries ? "1" : "0",
                                          number(wanted)};
    // Sends the exchange on `c`, once more with EVAL when the server lost its script cache (a
    // restart, SCRIPT FLUSH, a node of a cluster that never loaded it).
    // The script's SHA1 is the same on every node (SCRIPT LOAD of the same text).
    const std::string script_sha = sha;
    const auto send = [&args, &script_sha](redisContext* c) {
      args[0] = "EVALSHA";
      args[1] = script_sha;
      reply_ptr reply = command(c, args);
      if (reply->type == REDIS_REPLY_ERROR &&
          std::string_view(reply->str, reply->len).starts_with("NOSCRIPT")) {
        args[0] = "EVAL";
        args[1] = k_script;
        reply = command(c, args);
      }
      return reply;
    };
    reply_ptr r = send(ctx.get());
    // A Redis Cluster: MOVED names the master that now serves the key's slot (after a failover
    // or a resharding): connect to it and send again. ASK names the node the slot is moving to,
    // for this command only (ASKING first, on a connection of its own).
    for (int hop = 0; r->type == REDIS_REPLY_ERROR; ++hop) {
      const std::string_view error(r->str, r->len);
      const auto to = redis_detail::redirection_of(error, nodes[current].host);
      if (!to) break;
      if (hop == k_max_redirects) {
        throw failure("more than " + std::to_string(k_max_redirects) +
                      " redirections of a Redis Cluster: " + std::string(error));
      }
      if (!to->ask) {
        ctx.reset();
        current = remember(to->to);
        ctx = open(to->to);
        r = send(ctx.get());
      } else {
        context_ptr once = open(to->to);
        const reply_ptr asking = command(once.get(), {"ASKING"});
        if (asking->type == REDIS_REPLY_ERROR) throw failure("ASKING: " + std::string(asking->str));
        r = send(once.get());
      }
    }
    if (r->type == REDIS_REPLY_ERROR) {
      const std::string_view error(r->str, r->len);
      if (error.find("STORMGUARD_FLEET_PROTOCOL ") != std::string_view::npos) {
        throw refusal(options.key, error);
      }
      throw failure(std::string("EVALSHA: ") + r->str);
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 8) throw failure("an unexpected reply");
    std::array<long long, 8> v{};
    for (std::size_t i = 0; i < 8; ++i) {
      if (r->element[i]->type != REDIS_REPLY_INTEGER) throw failure("an unexpected reply");
      v[i] = r->element[i]->integer;
    }
    back = carried{v[4], v[5], v[6] != 0, v[7]};
    return fleet_answer{fleet_view{v[0], v[1], v[2]}, v[3]};
  }

  // An ask of a budget whose claims follow need (fleet_budget::credit_asker), on the syncer's
  // connection (after a sync in progress: at most two timeouts in all): the micro-retries
  // granted, or -1 when there is no connection or no live heartbeat to ask with, or the round
  // trip failed (the next sync reconnects).
  std::int64_t ask(std::int64_t wanted) noexcept {
    const detail::lock hold(mutex);
    if (!ctx || bucket < 0 || epoch == 0) return -1;
    try {
      const redis_detail::sigpipe_guard no_sigpipe;
      carried back;
      ++stats.asks;
      const fleet_answer a = exchange(fleet_deltas{}, budget.terms(), true, back, wanted);
      const long long granted = std::clamp<long long>(a.credit, 0, wanted);
      held += granted;
      if (granted > 0) ++stats.asks_granted;
      return granted;
    } catch (...) {
      ctx.reset();
      return -1;
    }
  }
  static std::int64_t ask_for(void* context, time_point, std::int64_t wanted) noexcept {
    return static_cast<impl*>(context)->ask(wanted);
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
      // The epoch is shown only while the store must still hold the state of the last sync.
      const bool known = epoch != 0 && start - last_success < retention;
      carried back;
      const fleet_answer answer = exchange(out, terms, known, back);
      const fleet_view& view = answer.view;
      const time_point end = time.now();
      budget.end_sync(end, answer);
      epoch = back.epoch;
      bucket = back.bucket;
      held = std::max<long long>(answer.credit, 0);
      last_success = end;
      stats.learning = back.learning_ms > 0;
      if (back.forgot) {
        ++stats.forgotten;
        stats.last_forgotten = end;
      }
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
      if (back.forgot) {
        say("fleet budget " + options.key + ": store " + shown_url +
            " had forgotten the fleet (restarted empty, flushed, evicted or failed over): "
            "learning mode for one window, no process handed a larger claim than it held");
      }
      return true;
    } catch (const std::exception& e) {
      ctx.reset();  // reconnect at the next try
      // Whether the script ran is unknown: the claim it may have written stays in its bucket
      // until the bucket expires (never freed twice); the epoch and the claim held are kept, so
      // that a store that comes back empty is recognised.
      bucket = -1;
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
  if (budget.options().ask_for_credit) budget.set_asker(&impl::ask_for, impl_.get());
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
  // No ask reaches the syncer once it is gone (set_asker waits for one in progress).
  if (impl_->budget.options().ask_for_credit) impl_->budget.set_asker(nullptr, nullptr);
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
