// SPDX-License-Identifier: Apache-2.0
// A consumer of the shared stormguard::http and stormguard::config: a policy parsed by the one
// library configures a client of the other, and config's error comes back as a value naming the
// field.
#include <iostream>
#include <stormguard/config/policy.hpp>
#include <stormguard/http/client.hpp>
#include <stormguard/http/policy.hpp>
#include <stormguard/http/syntax.hpp>
#include <stormguard/version.hpp>

int main() {
  const auto policies = stormguard::config::parse_policies(
      R"({"policies": [{"name": "api", "retries": 2, "budget": "ratio"}]})");
  if (!policies) {
    std::cerr << policies.error().message << '\n';
    return 1;
  }
  const stormguard::http::client client(stormguard::http::client_options_for(policies->at(0)));
  if (!stormguard::http::is_token("GET") || stormguard::http::is_token("G T")) return 1;
  const auto bad =
      stormguard::config::parse_policies(R"({"policies": [{"name": "api", "retries": -1}]})");
  if (bad) {
    std::cerr << "a negative retries value was accepted\n";
    return 1;
  }
  if (bad.error().field.find("retries") == std::string::npos) {
    std::cerr << "policy_error names '" << bad.error().field << "'\n";
    return 1;
  }
  std::cout << "stormguard " << stormguard::version() << '\n';
  return 0;
}
