// SPDX-License-Identifier: Apache-2.0
// Prints the version of the installed stormguard library this program was linked with.
#include <iostream>
#include <stormguard/version.hpp>

int main() {
  std::cout << "stormguard " << stormguard::version() << '\n';
  return stormguard::version().empty() ? 1 : 0;
}
