// The redis idempotency store (include/stormguard/guard/stores.hpp). NOT YET WRITTEN: a stub.
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {

std::unique_ptr<store> make_redis_store(const redis_options&) {
  throw store_error("redis store: not built yet");
}

}  // namespace stormguard::guard
