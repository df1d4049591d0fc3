// SPDX-License-Identifier: Apache-2.0
// `stormguard --version`: the library version, the components the program was built with, and
// the libcurl and Asio versions.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <asio/version.hpp>
#include <string>

#include "stormguard/version.hpp"
#include "support/cli_runner.hpp"

namespace {

using stormguard::test_support::run_program;
using stormguard::test_support::stderr_mode;

TEST(VersionCli, NamesTheLibraryItsComponentsAndItsDependencies) {
  const auto run = run_program({STORMGUARD_CLI_PATH, "--version"}, stderr_mode::capture);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string asio = std::to_string(ASIO_VERSION / 100000) + "." +
                           std::to_string(ASIO_VERSION / 100 % 1000) + "." +
                           std::to_string(ASIO_VERSION % 100);
  EXPECT_EQ(
      run.out,
      "stormguard " + std::string(stormguard::version()) +
          "\ncomponents: core testing config sim asio http http_policy metrics metrics_http guard "
          "metrics_guard admission grpc grpc_policy metrics_grpc fleet lab\n"
          "libcurl " +
          curl_version_info(CURLVERSION_NOW)->version + ", Asio " + asio + "\n");
}

}  // namespace
