// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for stormguard::parse_retry_after (and parse_http_date): every input must keep
// the invariants of fuzz/retry_after_invariants.hpp: no crash or sanitizer report, never a
// negative delay, digits-only input gives exactly its value or saturates at duration::max(), the
// parse is deterministic, and a date's delay is exactly max(0, date - now), saturated.
//
//   make fuzz                      # FUZZ_SECONDS=60 by default; see the Makefile
//   build-fuzz/fuzz/retry_after_fuzz -dict=fuzz/retry_after.dict build-fuzz/corpus/retry_after \
//       fuzz/corpus/retry_after
//
// A crash leaves build-fuzz/crash-<sha1>: copy it into fuzz/corpus/retry_after/ (the unit test
// RetryAfterCorpus.EveryCorpusFileKeepsTheInvariants then checks it on every test run) and add a
// named test for it in tests/retry_after_test.cpp.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "retry_after_invariants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string failure = stormguard::fuzz::check_retry_after_invariants(input);
  if (!failure.empty()) {
    std::fprintf(stderr, "retry_after invariant violated: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
