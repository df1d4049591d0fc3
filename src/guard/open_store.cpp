// SPDX-License-Identifier: Apache-2.0
// open_store(): a store from an `--idempotency` spec (include/stormguard/guard/store.hpp).
#include <stdexcept>
#include <string>

#include "stormguard/detail/format.hpp"
#include "stormguard/guard/store.hpp"
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {

std::unique_ptr<store> open_store(std::string_view spec) {
  const auto colon = spec.find(':');
  auto bad = [&](std::string_view why) {
    return std::invalid_argument("store " + detail::quote_for_message(spec) + ": " +
                                 std::string(why));
  };
  if (colon == std::string_view::npos) {
    throw bad("expected sqlite:PATH, postgres:URL or redis:URL");
  }
  const std::string_view scheme = spec.substr(0, colon);
  const std::string rest(spec.substr(colon + 1));
  if (rest.empty()) throw bad("nothing after '" + std::string(scheme) + ":'");
  if (scheme == "sqlite") return make_sqlite_store({.path = rest});
  if (scheme == "postgres") return make_postgres_store({.url = rest});
  if (scheme == "redis") return make_redis_store({.url = rest});
  throw bad("unknown store '" + std::string(scheme) +
            "' (expected sqlite:PATH, postgres:URL or redis:URL)");
}

}  // namespace stormguard::guard
