// SPDX-License-Identifier: Apache-2.0
// A test-only GoogleTest fixture for the tests that run the built `stormguard` through a shell: a
// scratch directory per test (removed afterwards), files written into it, and the program run
// with its output. Use it only where STORMGUARD_CLI_PATH is defined (the CLI is built).
//
//   class PolicyCli : public stormguard::test_support::cli_scratch {};
//   TEST_F(PolicyCli, Checks) { auto r = run("policy check '" + write("p.json", "{}") + "'"); }
//
// Header-only; POSIX only.
#ifndef STORMGUARD_TESTS_SUPPORT_CLI_SCRATCH_HPP
#define STORMGUARD_TESTS_SUPPORT_CLI_SCRATCH_HPP

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.hpp"

namespace stormguard::test_support {

class cli_scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("stormguard-" + std::string(info->test_suite_name()) + "-" + info->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Writes `text` to the file `name` of the scratch directory; its path.
  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  /// `stormguard ARGS` (already shell-quoted) with stderr in the output when `with_stderr`.
  static test_util::run_result run(const std::string& args, bool with_stderr = true) {
    return test_util::run_shell(std::string("'") + STORMGUARD_CLI_PATH + "' " + args +
                                (with_stderr ? " 2>&1" : " 2>/dev/null"));
  }

  std::filesystem::path dir_;
};

}  // namespace stormguard::test_support

#endif  // STORMGUARD_TESTS_SUPPORT_CLI_SCRATCH_HPP
