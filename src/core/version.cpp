// SPDX-License-Identifier: Apache-2.0
#include "stormguard/version.hpp"

#define STORMGUARD_STRINGIZE_(x) #x
#define STORMGUARD_STRINGIZE(x) STORMGUARD_STRINGIZE_(x)

namespace stormguard {

std::string_view version() noexcept {
  return STORMGUARD_STRINGIZE(STORMGUARD_VERSION_MAJOR) "." STORMGUARD_STRINGIZE(
      STORMGUARD_VERSION_MINOR) "." STORMGUARD_STRINGIZE(STORMGUARD_VERSION_PATCH);
}

}  // namespace stormguard
