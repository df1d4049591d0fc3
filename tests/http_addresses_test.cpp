// SPDX-License-Identifier: Apache-2.0
// stormguard/http/addresses.hpp: resolve entries, IP literals, a host's addresses and the address
// of each hedged copy (gRFC A6: copies to distinct backends).
#include <gtest/gtest.h>

#include <asio/cancellation_signal.hpp>
#include <asio/io_context.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "stormguard/http/addresses.hpp"
#include "stormguard/http/client.hpp"

namespace {

using stormguard::http::copy_address;
using stormguard::http::host_addresses;
using stormguard::http::host_of_url;
using stormguard::http::is_ip_literal;
using stormguard::http::known_host_addresses;
using stormguard::http::parse_resolve_entry;
using list = std::vector<std::string>;

TEST(IpLiteral, AcceptsIpv4AndIpv6WithoutBrackets) {
  EXPECT_TRUE(is_ip_literal("127.0.0.2"));
  EXPECT_TRUE(is_ip_literal("::1"));
  EXPECT_TRUE(is_ip_literal("2001:db8::7"));
  EXPECT_FALSE(is_ip_literal("[::1]"));
  EXPECT_FALSE(is_ip_literal("localhost"));
  EXPECT_FALSE(is_ip_literal("127.0.0.256"));
  EXPECT_FALSE(is_ip_literal(""));
}

TEST(ResolveEntry, ParsesHostPortAndAddressesInOrder) {
  const auto e = parse_resolve_entry("API.Example:8443:10.0.0.2,[2001:db8::1],10.0.0.1");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->host, "api.example");
  EXPECT_EQ(e->port, 8443);
  EXPECT_EQ(e->addresses, (list{"10.0.0.2", "2001:db8::1", "10.0.0.1"}));
}

TEST(ResolveEntry, RejectsMalformedEntries) {
  for (const char* bad :
       {"", "host", "host:80", "host:80:", ":80:1.2.3.4", "host:0:1.2.3.4", "host:65536:1.2.3.4",
        "host:x:1.2.3.4", "host:80:name", "host:80:1.2.3.4,", "host:80:::1"}) {
    EXPECT_FALSE(parse_resolve_entry(bad)) << bad;
  }
}

TEST(HostAddresses, AResolveEntryForTheHostAndPortWins) {
  const list resolve{"a.test:80:10.0.0.9", "a.test:8080:10.0.0.1,10.0.0.2,10.0.0.1"};
  EXPECT_EQ(host_addresses("http://A.test:8080/x", resolve), (list{"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(host_addresses("http://a.test/x", resolve), (list{"10.0.0.9"}));
}

TEST(HostAddresses, AnIpLiteralOrABadUrlHasNothingToSpread) {
  EXPECT_TRUE(host_addresses("http://127.0.0.1:80/", {}).empty());
  EXPECT_TRUE(host_addresses("http://[::1]:80/", {}).empty());
  EXPECT_TRUE(host_addresses("not a url", {}).empty());
}

TEST(HostAddresses, ANameIsResolvedBySystem) {
  const list got = host_addresses("http://localhost:80/", {});
  ASSERT_FALSE(got.empty());
  for (const auto& a : got) EXPECT_TRUE(is_ip_literal(a)) << a;
}

TEST(HostOfUrl, GivesTheLowercaseHostAndThePortOrTheSchemesDefault) {
  const auto a = host_of_url("http://API.Example/x");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "api.example");
  EXPECT_EQ(a->port, 80);
  const auto b = host_of_url("https://[::1]:8443/");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 8443);
  EXPECT_FALSE(host_of_url("not a url"));
}

TEST(KnownHostAddresses, AnEntryOrALiteralIsKnownANameWithoutAnEntryIsNot) {
  const list resolve{"a.test:8080:10.0.0.1,10.0.0.2"};
  EXPECT_EQ(known_host_addresses("http://a.test:8080/", resolve), (list{"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(known_host_addresses("http://127.0.0.1:8080/", resolve), list{});
  EXPECT_EQ(known_host_addresses("not a url", resolve), list{});
  EXPECT_FALSE(known_host_addresses("http://a.test:9090/", resolve));  // the system's to say
  EXPECT_FALSE(known_host_addresses("http://localhost/", {}));
}

TEST(AsioHostResolver, ResolvesANameOnTheExecutorWithoutBlockingIt) {
  asio::io_context io;
  std::optional<list> got;
  asio::cancellation_signal cancel;
  stormguard::http::asio_host_resolver(io.get_executor(), "localhost", 80, cancel.slot(),
                                       [&](list a) { got = std::move(a); });
  EXPECT_FALSE(got);  // never inside the call: the lookup runs on Asio's resolver thread
  io.run();
  ASSERT_TRUE(got);
  ASSERT_FALSE(got->empty());
  for (const auto& a : *got) EXPECT_TRUE(is_ip_literal(a)) << a;
}

TEST(AsioHostResolver, ACancelledLookupStillCompletesOnce) {
  asio::io_context io;
  int calls = 0;
  asio::cancellation_signal cancel;
  stormguard::http::asio_host_resolver(io.get_executor(), "localhost", 80, cancel.slot(),
                                       [&](const list&) { ++calls; });
  // Whether Asio's thread had begun getaddrinfo (then it answers) or not (then nothing), the
  // completion runs exactly once, on the executor.
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_EQ(calls, 0);
  io.run();
  EXPECT_EQ(calls, 1);
}

TEST(CopyAddress, CopyIFromTheSecondGoesToAddressIMinusOneModN) {
  const list two{"a", "b"};
  EXPECT_EQ(copy_address(two, 1), "");
  EXPECT_EQ(copy_address(two, 2), "b");
  EXPECT_EQ(copy_address(two, 3), "a");
  EXPECT_EQ(copy_address(two, 4), "b");
  const list three{"a", "b", "c"};
  EXPECT_EQ(copy_address(three, 3), "c");
  EXPECT_EQ(copy_address(three, 5), "b");
  EXPECT_EQ(copy_address(list{"a"}, 2), "");
  EXPECT_EQ(copy_address(list{}, 2), "");
}

TEST(ClientOptions, AMalformedResolveEntryOrConnectAddressIsRejected) {
  stormguard::http::client_options o;
  o.resolve = {"host:80:not-an-address"};
  EXPECT_THROW(stormguard::http::client{o}, std::invalid_argument);
  stormguard::http::client c;
  stormguard::http::request r;
  r.url = "http://127.0.0.1:1/";
  r.connect_address = "example.com";
  EXPECT_THROW((void)c.perform(r), std::invalid_argument);
}

}  // namespace
