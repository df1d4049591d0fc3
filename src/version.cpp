#include "stormguard/version.hpp"

// The build sets STORMGUARD_VERSION_STRING from project(stormguard VERSION ...).
#ifndef STORMGUARD_VERSION_STRING
#error "STORMGUARD_VERSION_STRING must be defined by the build (see CMakeLists.txt)"
#endif

namespace stormguard {

std::string_view version() noexcept { return STORMGUARD_VERSION_STRING; }

}  // namespace stormguard
