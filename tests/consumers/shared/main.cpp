// SPDX-License-Identifier: Apache-2.0
// A consumer of the shared stormguard::http and stormguard::config: a policy parsed by the one
// library configures a client of the other, and config's exception type is caught here (its
// typeinfo is exported).
#include <iostream>
#include <stormguard/config/policy.hpp>
#include <stormguard/http/client.hpp>
#include <stormguard/http/policy.hpp>
#include <stormguard/http/syntax.hpp>
#include <stormguard/version.hpp>

int main() {
  const auto policies = stormguard::config::parse_policies(
      R"({"policies": [{"name": "api", "retries": 2, "budget": "ratio"}]})");
  const stormguard::http::client client(stormguard::http::client_options_for(policies.at(0)));
  if (!stormguard::http::is_token("GET") || stormguard::http::is_token("G T")) return 1;
  try {
    (void)stormguard::config::parse_policies(R"({"policies": [{"name": "api", "retries": -1}]})");
    std::cerr << "a negative retries value was accepted\n";
    return 1;
  } catch (const stormguard::config::policy_error& e) {
    if (e.field().find("retries") == std::string::npos) {
      std::cerr << "policy_error names '" << e.field() << "'\n";
      return 1;
    }
  }
  std::cout << "stormguard " << stormguard::version() << '\n';
  return 0;
}
