// SPDX-License-Identifier: Apache-2.0
// A consumer of stormguard::core alone: the version macros and a backoff computed with the
// library's own generator (links the library, static or shared, and runs).
#include <chrono>
#include <iostream>
#include <stormguard/backoff.hpp>
#include <stormguard/random.hpp>
#include <stormguard/version.hpp>
#include <string>

static_assert(STORMGUARD_VERSION == STORMGUARD_VERSION_MAJOR * 10000 +
                                        STORMGUARD_VERSION_MINOR * 100 + STORMGUARD_VERSION_PATCH);

int main() {
  const std::string header_version = std::to_string(STORMGUARD_VERSION_MAJOR) + "." +
                                     std::to_string(STORMGUARD_VERSION_MINOR) + "." +
                                     std::to_string(STORMGUARD_VERSION_PATCH);
  if (stormguard::version() != header_version) {
    std::cerr << "library " << stormguard::version() << " != headers " << header_version << '\n';
    return 1;
  }
  const stormguard::backoff backoff = stormguard::backoff::constant(std::chrono::milliseconds(20));
  stormguard::random_generator random(42);
  if (backoff.delay(1, random) != std::chrono::milliseconds(20)) {
    std::cerr << "unexpected backoff delay\n";
    return 1;
  }
  std::cout << "stormguard " << stormguard::version() << '\n';
  return 0;
}
