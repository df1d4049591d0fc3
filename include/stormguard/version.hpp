// SPDX-License-Identifier: Apache-2.0
/// \file
/// The version of stormguard: of the headers a program was compiled with
/// (macros, for `#if`) and of the library it was linked with (version()).
///
/// Example:
///
/// \code{.cpp}
///  #include <stormguard/version.hpp>
///  #if STORMGUARD_VERSION < 200  // before 0.2.0
///  ...
///  #endif
///  std::cout << "stormguard " << stormguard::version() << '\n';  // "stormguard 0.3.0"
/// \endcode
///
/// The versions follow semantic versioning; while the major version is 0, a new minor version may
/// change the API and the ABI (the shared libraries' SONAME is MAJOR.MINOR).
#pragma once

#include <string_view>

#include "stormguard/export.hpp"

// The version of these headers (the build checks that they equal the CMake project's VERSION).
/// The major version of these headers (0 while the API may change with each minor version).
#define STORMGUARD_VERSION_MAJOR 0
/// The minor version of these headers.
#define STORMGUARD_VERSION_MINOR 3
/// The patch version of these headers.
#define STORMGUARD_VERSION_PATCH 0
/// The version of these headers as one number, MAJOR * 10000 + MINOR * 100 + PATCH (0.1.0 is
/// 100), to compare with < and >=. MINOR and PATCH stay below 100.
#define STORMGUARD_VERSION \
  (STORMGUARD_VERSION_MAJOR * 10000 + STORMGUARD_VERSION_MINOR * 100 + STORMGUARD_VERSION_PATCH)

namespace stormguard {

/// Returns the version of the linked library as "MAJOR.MINOR.PATCH"; with a shared library it can
/// differ from the STORMGUARD_VERSION_* macros of the headers a program was compiled with.
/// The view refers to a string literal: it is valid for the life of the program.
/// Thread-safe.
[[nodiscard]] STORMGUARD_EXPORT std::string_view version() noexcept;

}  // namespace stormguard
