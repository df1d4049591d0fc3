// The postgres idempotency store (include/stormguard/guard/stores.hpp). NOT YET WRITTEN: a stub.
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {

std::unique_ptr<store> make_postgres_store(const postgres_options&) {
  throw store_error("postgres store: not built yet");
}

}  // namespace stormguard::guard
