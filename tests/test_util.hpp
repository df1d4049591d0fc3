// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the unit tests.
#ifndef STORMGUARD_TESTS_TEST_UTIL_HPP
#define STORMGUARD_TESTS_TEST_UTIL_HPP

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>
#include <string>

// STORMGUARD_TEST_SANITIZED: defined in an AddressSanitizer or ThreadSanitizer build (GCC's
// __SANITIZE_*__, clang's __has_feature), for the few tests a sanitizer's cost or address-space
// reservation makes meaningless; each says why when it skips.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STORMGUARD_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STORMGUARD_TEST_SANITIZED 1
#endif
#endif

namespace stormguard::test_util {

// Runs `f` and returns the message of the std::invalid_argument it throws ("" and a failure if
// it throws nothing).
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected std::invalid_argument";
  return {};
}

// The environment a test gives a child it runs out of file descriptors on purpose
// (RLIMIT_NOFILE 64). UBSan's vptr check probes memory through a pipe(); with no descriptor free
// the probe fails and the check reports a false "invalid vptr" on a valid object. The asan preset
// compiles that one check recoverable (-fsanitize-recover=vptr) and CI's UBSAN_OPTIONS halt on it
// everywhere else; only such a child reports it and goes on. Harmless in other builds.
inline constexpr const char* k_out_of_descriptors_env =
    "UBSAN_OPTIONS=halt_on_error=0:print_stacktrace=0";

// What a shell command printed on its stdout, and its exit status (-1 if it did not exit).
struct run_result {
  int exit_code = -1;
  std::string output;
};

// Runs `command` with /bin/sh and captures its stdout (redirect 2>&1 in `command` for stderr).
inline run_result run_shell(const std::string& command) {
  run_result result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace stormguard::test_util

#endif  // STORMGUARD_TESTS_TEST_UTIL_HPP
