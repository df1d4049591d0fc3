// SPDX-License-Identifier: Apache-2.0
// The version macros of stormguard/version.hpp agree with the library's version() (the build
// checks that the macros equal the CMake project's VERSION).
#include "stormguard/version.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(Version, LibraryVersionIsTheHeadersMacros) {
  const std::string expected = std::to_string(STORMGUARD_VERSION_MAJOR) + "." +
                               std::to_string(STORMGUARD_VERSION_MINOR) + "." +
                               std::to_string(STORMGUARD_VERSION_PATCH);
  EXPECT_EQ(stormguard::version(), expected);
}

TEST(Version, CombinedNumberOrdersVersions) {
  static_assert(STORMGUARD_VERSION == STORMGUARD_VERSION_MAJOR * 10000 +
                                          STORMGUARD_VERSION_MINOR * 100 +
                                          STORMGUARD_VERSION_PATCH);
  EXPECT_LT(STORMGUARD_VERSION_MINOR, 100);
  EXPECT_LT(STORMGUARD_VERSION_PATCH, 100);
}

}  // namespace
