// SPDX-License-Identifier: Apache-2.0
// stormguard/detail/redact.hpp: secrets never reach a message.
#include "stormguard/detail/redact.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using stormguard::detail::redact;
using stormguard::detail::redact_header_value;

TEST(Redact, HidesTheUserinfoPasswordOfAUrl) {
  EXPECT_EQ(redact("postgres:postgresql://app:hunter2@db:5432/app"),
            "postgres:postgresql://app:***@db:5432/app");
  EXPECT_EQ(redact("cannot reach http://u:p%40ss@[::1]:8080/x?y=1 (refused)"),
            "cannot reach http://u:***@[::1]:8080/x?y=1 (refused)");
  EXPECT_EQ(redact("redis://:s3cret@cache:6379/0"), "redis://:***@cache:6379/0");
}

TEST(Redact, HidesAUserinfoWithoutColonWhole) {
  EXPECT_EQ(redact("https://ghp_abc123@github.com/x"), "https://***@github.com/x");
}

TEST(Redact, HidesSecretKeyValuePairsOfConnectionStringsAndQueries) {
  EXPECT_EQ(redact("host=db user=app password=hunter2 dbname=app"),
            "host=db user=app password=*** dbname=app");
  EXPECT_EQ(redact("host=db password = 'a b\\' c' port=5"), "host=db password = *** port=5");
  EXPECT_EQ(redact("http://h/p?user=x&token=abc&n=1"), "http://h/p?user=x&token=***&n=1");
  EXPECT_EQ(redact("PASSWORD=x"), "PASSWORD=***");
}

TEST(Redact, HidesCredentialHeaderValuesKeepingTheScheme) {
  EXPECT_EQ(redact("-H 'Authorization: Bearer abc.def' refused"), "-H 'Authorization: Bearer ***");
  EXPECT_EQ(redact("header \"Cookie: session=abc\x01\": a control byte"), "header \"Cookie: ***");
  EXPECT_EQ(redact("x-api-key:k1\nnext line"), "x-api-key:***\nnext line");
  EXPECT_EQ(redact("sent Bearer tok123, then"), "sent Bearer ***, then");
}

TEST(Redact, LeavesTextWithoutSecretsAlone) {
  for (const std::string text :
       {"connection to server at \"127.0.0.1\", port 5432 failed: Connection refused",
        "http://127.0.0.1:8080/charges", "passage=1 tokens are fine", "Content-Type: text/plain",
        "the bearer of bad news", ""}) {
    EXPECT_EQ(redact(text), text);
  }
}

TEST(RedactHeaderValue, HidesCredentialFieldsAndRedactsOthers) {
  EXPECT_EQ(redact_header_value("authorization", "Basic dXNlcjpwdw=="), "Basic ***");
  EXPECT_EQ(redact_header_value("X-Auth-Token", "abc"), "***");
  EXPECT_EQ(redact_header_value("Referer", "http://u:pw@h/"), "http://u:***@h/");
  EXPECT_EQ(redact_header_value("Accept", "*/*"), "*/*");
}

}  // namespace
