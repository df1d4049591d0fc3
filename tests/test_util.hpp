// Helpers shared by the unit tests.
#ifndef STORMGUARD_TESTS_TEST_UTIL_HPP
#define STORMGUARD_TESTS_TEST_UTIL_HPP

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

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

}  // namespace stormguard::test_util

#endif  // STORMGUARD_TESTS_TEST_UTIL_HPP
