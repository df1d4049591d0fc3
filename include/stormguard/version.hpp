// stormguard/version.hpp — the version of the stormguard library that a program was linked with.
//
// Example:
//
//   #include <stormguard/version.hpp>
//   std::cout << "stormguard " << stormguard::version() << '\n';  // "stormguard 0.1.0"
#pragma once

#include <string_view>

namespace stormguard {

/// Returns the library version as "MAJOR.MINOR.PATCH" (the VERSION of the CMake project).
/// The view refers to a string literal: it is valid for the life of the program.
/// Thread-safe.
[[nodiscard]] std::string_view version() noexcept;

}  // namespace stormguard
