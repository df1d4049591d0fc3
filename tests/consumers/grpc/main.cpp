// SPDX-License-Identifier: Apache-2.0
// A consumer of stormguard::grpc: builds a client over a lazy channel (no connection is made)
// and a server's admission, without serving or sending anything.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <stormguard/grpc/admission.hpp>
#include <stormguard/grpc/client.hpp>
#include <stormguard/version.hpp>

int main() {
  const stormguard::grpc::client client("127.0.0.1:1", grpc::InsecureChannelCredentials());
  stormguard::grpc::server_admission admission(
      {.retry_budget = stormguard::ratio_budget_options{}});
  const auto ticket = admission.decide({}, stormguard::time_point::max());
  if (!ticket || !client.channel()) return 1;
  std::cout << "stormguard " << stormguard::version() << '\n';
  return 0;
}
