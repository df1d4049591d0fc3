// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the framing scan of `serve`'s requests (src/lab/http_framing.hpp: the
// request head and a chunked body's framing, read on the raw bytes of a connection before evhttp
// parses them). Every input must keep these invariants:
//   - no crash, no sanitizer report, no unbounded memory (the scan keeps at most one line);
//   - the verdict does not depend on how the bytes arrive: the input fed at once and fed in
//     pieces (their sizes drawn from the input's first byte) gives the same problem, the same
//     reading() and the same bytes after the scan's rewrites;
//   - the only rewrite is a chunk extension's first byte (';' or a tab) into a space;
//   - a problem found stays, whatever is fed after it or after restart();
//   - describe() answers 400, 414 or 431 for a problem and 0 for none.
//
//   make fuzz FUZZ_TARGET=http_framing FUZZ_SECONDS=60
//
// A crash leaves build-fuzz/crash-<sha1>: copy it into fuzz/corpus/http_framing/ and add a named
// raw-socket test for it in tests/integration/lab_framing_test.cpp.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lab/http_framing.hpp"

namespace {

using stormguard::lab::detail::describe;
using stormguard::lab::detail::framing_problem;
using stormguard::lab::detail::framing_scan;

constexpr std::size_t k_head_bytes = 1024;  // small, so that the limits are reached

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "http_framing invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned split = data[0];
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::string whole = input;
  framing_scan at_once(k_head_bytes);
  at_once.feed(whole.data(), whole.size());

  std::string pieces = input;
  framing_scan in_pieces(k_head_bytes);
  for (std::size_t at = 0, k = 0; at < pieces.size(); ++k) {
    const std::size_t n =
        std::min<std::size_t>(pieces.size() - at, 1 + ((split >> (k % 8)) & 7U) * (k % 5 + 1));
    in_pieces.feed(pieces.data() + at, n);
    at += n;
  }

  if (at_once.problem() != in_pieces.problem()) fail("the problem depends on the pieces");
  if (at_once.reading() != in_pieces.reading()) fail("reading() depends on the pieces");
  if (whole != pieces) fail("the rewrites depend on the pieces");
  for (std::size_t i = 0; i < input.size(); ++i) {
    if (whole[i] != input[i] && !(whole[i] == ' ' && (input[i] == ';' || input[i] == '\t'))) {
      fail("a byte other than an extension's first was rewritten");
    }
  }

  const framing_problem found = at_once.problem();
  const int status = describe(found).status;
  if ((found == framing_problem::none) != (status == 0)) fail("describe() and none disagree");
  if (found != framing_problem::none && status != 400 && status != 414 && status != 431) {
    fail("a status other than 400, 414 or 431");
  }
  if (found != framing_problem::none) {
    std::string again = input;
    at_once.restart();
    at_once.feed(again.data(), again.size());
    if (at_once.problem() != found || at_once.reading()) fail("a problem did not stay");
  }
  return 0;
}
