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
  return detail::parse_redis_url(url, "redis_options.url");
}

}  // namespace stormguard::guard::internal
