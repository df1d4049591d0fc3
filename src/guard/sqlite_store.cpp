// The sqlite idempotency store (include/stormguard/guard/stores.hpp). NOT YET WRITTEN: a stub.
#include "stormguard/guard/stores.hpp"

namespace stormguard::guard {

std::unique_ptr<store> make_sqlite_store(const sqlite_options&) {
  throw store_error("sqlite store: not built yet");
}

}  // namespace stormguard::guard
