// SPDX-License-Identifier: Apache-2.0
// A consumer of stormguard::http: builds a client (libcurl's handles) without sending anything.
#include <iostream>
#include <stormguard/http/client.hpp>
#include <stormguard/http/syntax.hpp>
#include <stormguard/version.hpp>

int main() {
  const stormguard::http::client client;
  if (!stormguard::http::is_token("GET") || stormguard::http::is_token("G T")) return 1;
  std::cout << "stormguard " << stormguard::version() << '\n';
  return 0;
}
