// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the policy parser (stormguard::config::parse_policies) in its three
// formats: every input must keep the invariants of fuzz/policy_invariants.hpp (no crash, no
// exception, and a normalized form that parses back to the same policies).
//
//   make fuzz FUZZ_TARGET=policy   # FUZZ_SECONDS=60 by default; see the Makefile
//
// A crash leaves build-fuzz/crash-<sha1>: copy it into fuzz/corpus/policy/ (the unit test
// PolicyCorpus.EveryCorpusFileKeepsTheInvariants then checks it on every test run).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "policy_invariants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string failure = stormguard::fuzz::check_policy_invariants(input);
  if (!failure.empty()) {
    std::fprintf(stderr, "policy invariant violated: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
