// SPDX-License-Identifier: Apache-2.0
// Internal (target stormguard_redis): finding a Redis master through Redis Sentinel, shared by the
// guard's Redis store and the fleet budget's Redis syncer (a redis+sentinel:// URL,
// stormguard/detail/redis_url.hpp). Each sentinel is asked in the URL's order, with the caller's
// timeout, `SENTINEL get-master-addr-by-name MASTER`
// (https://redis.io/docs/latest/develop/reference/sentinel-clients/): the first that answers with
// an address gives the master. A client asks again after it loses its master (a failover), and a
// master that answers a write with READONLY has been demoted: the same. Only this question is ours;
// the Redis client is hiredis.
#ifndef STORMGUARD_REDIS_SENTINEL_HPP
#define STORMGUARD_REDIS_SENTINEL_HPP

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <charconv>
#include <optional>
#include <string>
#include <utility>

#include "sigpipe_guard.hpp"
#include "stormguard/detail/redis_url.hpp"

namespace stormguard::redis_detail {

/// The master's address that the first answering sentinel of `url` gives, or nullopt with `why`
/// saying what each failure was (the last one). `url.sentinels` must not be empty.
inline std::optional<std::pair<std::string, int>> master_from_sentinels(
    const stormguard::detail::redis_url& url, const timeval& timeout, std::string& why) {
  const sigpipe_guard no_sigpipe;
  for (const auto& [host, port] : url.sentinels) {
    const std::string where = "sentinel " + host + ":" + std::to_string(port);
    redisContext* c = redisConnectWithTimeout(host.c_str(), port, timeout);
    if (c == nullptr) {
      why = where + ": cannot allocate a hiredis context";
      continue;
    }
    if (c->err != 0 || redisSetTimeout(c, timeout) != REDIS_OK) {
      why = where + ": " + c->errstr;
      redisFree(c);
      continue;
    }
    const char* argv[] = {"SENTINEL", "get-master-addr-by-name", url.sentinel_master.c_str()};
    const std::size_t lens[] = {8, 23, url.sentinel_master.size()};
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, 3, argv, lens));
    std::optional<std::pair<std::string, int>> found;
    if (r == nullptr) {
      why = where + ": " + (c->errstr[0] != '\0' ? c->errstr : "no reply");
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_STRING &&
               r->element[1]->type == REDIS_REPLY_STRING) {
      int p = 0;
      const char* digits = r->element[1]->str;
      const auto [end, ec] = std::from_chars(digits, digits + r->element[1]->len, p);
      if (ec == std::errc() && end == digits + r->element[1]->len && p > 0 && p <= 65535) {
        found.emplace(std::string(r->element[0]->str, r->element[0]->len), p);
      } else {
        why = where + ": a master address with a bad port";
      }
    } else if (r->type == REDIS_REPLY_NIL) {
      why = where + ": monitors no master named \"" + url.sentinel_master + "\"";
    } else if (r->type == REDIS_REPLY_ERROR) {
      why = where + ": " + std::string(r->str, r->len);
    } else {
      why = where + ": an unexpected reply";
    }
    if (r != nullptr) freeReplyObject(r);
    redisFree(c);
    if (found) return found;
  }
  return std::nullopt;
}

}  // namespace stormguard::redis_detail

#endif  // STORMGUARD_REDIS_SENTINEL_HPP
