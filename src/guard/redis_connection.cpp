// SPDX-License-Identifier: Apache-2.0
// The Redis store's connection layer (src/guard/redis_connection.hpp).
#include "guard/redis_connection.hpp"

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <limits>
#include <stdexcept>

#include "stormguard/detail/format.hpp"
#include "stormguard/detail/redis_url.hpp"

namespace stormguard::guard::internal {

endpoint parse_url(const std::string& url) {
  // The one parser of Redis URLs (shared with the fleet's syncer); its messages redact the
  // password.
  const detail::redis_url parsed = detail::parse_redis_url(url, "redis_options.url");
  endpoint e;
  e.host = parsed.host;
  e.port = parsed.port;
  e.db = parsed.db;
  e.user = parsed.user;
  e.password = parsed.password;
  e.has_password = parsed.has_password;
  return e;
}

}  // namespace stormguard::guard::internal
