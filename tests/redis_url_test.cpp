// SPDX-License-Identifier: Apache-2.0
#include "stormguard/detail/redis_url.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace {

using stormguard::detail::parse_redis_url;
using stormguard::detail::redact_redis_url;

std::string error_of(const std::string& url) {
  try {
    (void)parse_redis_url(url, "budget.fleet.store");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RedisUrl, ReadsHostPortDbAndUserInfo) {
  auto r = parse_redis_url("redis://127.0.0.1:6380/2", "f");
  EXPECT_EQ(r.host, "127.0.0.1");
  EXPECT_EQ(r.port, 6380);
  EXPECT_EQ(r.db, 2);
  EXPECT_FALSE(r.has_password);
  r = parse_redis_url("redis://s3cret@cache", "f");
  EXPECT_EQ(r.host, "cache");
  EXPECT_EQ(r.port, 6379);
  EXPECT_TRUE(r.has_password);
  EXPECT_EQ(r.user, "");
  EXPECT_EQ(r.password, "s3cret");
  r = parse_redis_url("redis://app:p%40ss%3Aword@[::1]:7000/0", "f");
  EXPECT_EQ(r.host, "::1");
  EXPECT_EQ(r.port, 7000);
  EXPECT_EQ(r.user, "app");
  EXPECT_EQ(r.password, "p@ss:word");
}

TEST(RedisUrl, ErrorsNameTheFieldAndNeverThePassword) {
  const std::string e = error_of("redis://app:hunter2@cache:99999/0");
  EXPECT_NE(e.find("budget.fleet.store \"redis://app:***@cache:99999/0\": PORT"), std::string::npos)
      << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos);
  EXPECT_NE(error_of("rediss://cache").find("hiredis >= 1.0"), std::string::npos);
  EXPECT_NE(error_of("http://cache").find("expected redis://"), std::string::npos);
  for (const char* bad : {"redis://", "redis://:@h", "redis://h:", "redis://h/", "redis://h/x",
                          "redis://[::1", "redis://h?x=1", "redis://u:p%4@h", "redis://h:0"}) {
    EXPECT_NE(error_of(bad), "") << bad;
  }
}

TEST(RedisUrl, ASentinelUrlNamesItsSentinelsAndTheMaster) {
  auto r =
      parse_redis_url("redis+sentinel://app:s3cret@10.0.0.1,10.0.0.2:26380,[::1]/orders/3", "f");
  ASSERT_EQ(r.sentinels.size(), 3U);
  EXPECT_EQ(r.sentinels[0], (std::pair<std::string, int>{"10.0.0.1", 26379}));
  EXPECT_EQ(r.sentinels[1], (std::pair<std::string, int>{"10.0.0.2", 26380}));
  EXPECT_EQ(r.sentinels[2], (std::pair<std::string, int>{"::1", 26379}));
  EXPECT_EQ(r.sentinel_master, "orders");
  EXPECT_EQ(r.db, 3);
  EXPECT_EQ(r.user, "app");
  EXPECT_EQ(r.password, "s3cret");
  EXPECT_EQ(r.host, "10.0.0.1");  // the first sentinel
  r = parse_redis_url("redis+sentinel://s1/m", "f");
  EXPECT_EQ(r.sentinels.size(), 1U);
  EXPECT_EQ(r.db, 0);
  EXPECT_TRUE(parse_redis_url("redis://h", "f").sentinels.empty());
  for (const char* bad :
       {"redis+sentinel://s1", "redis+sentinel://s1/", "redis+sentinel://s1/a b",
        "redis+sentinel://s1,/m", "redis+sentinel://s1:0/m", "redis+sentinel://s1/m/",
        "redis+sentinel://s1/m/x", "redis+sentinel://:hunter2@s1"}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e, "") << bad;
    EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  }
  std::string seventeen = "redis+sentinel://h";
  for (int i = 0; i < 16; ++i) seventeen += ",h";
  EXPECT_NE(error_of(seventeen + "/m").find("at most 16 sentinels"), std::string::npos);
  EXPECT_NE(error_of("redis+sentinel://s1").find("/MASTER"), std::string::npos);
  EXPECT_NE(error_of("redis+sentinel://127.0.0.1 :26379/m").find("HOST holds a space"),
            std::string::npos);
  EXPECT_NE(error_of("redis://ca che:6379").find("HOST holds a space"), std::string::npos);
}

// Text that is not a URL (no "://") may still carry a password before an '@': hidden whole.
TEST(RedisUrl, TextWithoutASchemeSeparatorHidesWhatPrecedesItsLastAt) {
  EXPECT_EQ(redact_redis_url("redis+sentinel//u:sPw9@127.0.0.1/m"), "***@127.0.0.1/m");
  EXPECT_EQ(redact_redis_url("u:sPw9@127.0.0.1"), "***@127.0.0.1");
  EXPECT_EQ(redact_redis_url("redis:/u:sPw9@h"), "***@h");
  EXPECT_EQ(redact_redis_url("u:sPw9@h://x"), "***@h://x");  // the '@' before "://"
  EXPECT_EQ(redact_redis_url("cache:6379"), "cache:6379");
  const std::string e = error_of("redis:/u:sPw9@h");
  EXPECT_NE(e, "");
  EXPECT_EQ(e.find("sPw9"), std::string::npos) << e;
}

TEST(RedisUrl, RedactsWhateverTheTextIs) {
  EXPECT_EQ(redact_redis_url("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
  EXPECT_EQ(redact_redis_url("redis://pw@h"), "redis://***@h");
  EXPECT_EQ(redact_redis_url("redis://h:1/0"), "redis://h:1/0");
  EXPECT_EQ(redact_redis_url("not a url"), "not a url");
  EXPECT_EQ(redact_redis_url("x://a:b@c@d/e"), "x://a:***@d/e");
  // A password with characters that end a URL's authority in free text is hidden whole.
  EXPECT_EQ(redact_redis_url("redis://u:Top Secret@h:1/0"), "redis://u:***@h:1/0");
  EXPECT_EQ(redact_redis_url("redis://u:Ab/Cd+Ef==@h:1/0"), "redis://u:***@h:1/0");
  EXPECT_EQ(redact_redis_url("redis://u:a?b#c\"d'e\tf@h"), "redis://u:***@h");
  EXPECT_EQ(redact_redis_url("redis://Ab/Cd@h"), "redis://***@h");
}

TEST(RedisUrl, AnUnencodedSlashQuestionMarkOrHashInThePasswordIsNamedNeverShown) {
  for (const char* url : {"redis://u:Ab/Cd+Ef==@h:1/0", "redis://u:p?w@h", "redis://u:p#w@h"}) {
    const std::string e = error_of(url);
    EXPECT_NE(e.find("percent-encode"), std::string::npos) << e;
    EXPECT_EQ(e.find("Cd+Ef"), std::string::npos) << e;
    EXPECT_EQ(e.find("p?w"), std::string::npos) << e;
    EXPECT_EQ(e.find("p#w"), std::string::npos) << e;
  }
  // Percent-encoded, they are part of the password.
  EXPECT_EQ(error_of("redis://u:Ab%2FCd@h:1/0"), "");
}

}  // namespace
