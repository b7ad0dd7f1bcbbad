#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hostfiles/host_list.h"
#include "tests/hostfiles/test_util.h"

namespace ddl::hostfiles {
namespace {

using ::testing::ElementsAre;

/// Name and slots, and whether the count was written; kind and origin are checked separately.
std::vector<std::string> slots_of(const HostList& list) {
  std::vector<std::string> out;
  for (const Host& h : list.hosts()) {
    out.push_back(h.name + ":" + std::to_string(h.slots) + (h.slots_given ? "" : " (counted)"));
  }
  return out;
}

std::string error_of(const std::string& text, std::string_view source = "-H") {
  return test::error_of([&] { parse_hosts_option(text, source); });
}

TEST(HostsOptionTest, BareNames) {
  const HostList list = parse_hosts_option("h1,h2");
  EXPECT_EQ(list.hosts(),
            (std::vector<Host>{{"h1", 1, std::nullopt, false, SourceKind::kHostsOption, "-H"},
                               {"h2", 1, std::nullopt, false, SourceKind::kHostsOption, "-H"}}));
}

TEST(HostsOptionTest, SlotCounts) {
  const HostList list = parse_hosts_option("h1:4,h2:4");
  EXPECT_EQ(list.hosts(),
            (std::vector<Host>{{"h1", 4, std::nullopt, true, SourceKind::kHostsOption, "-H"},
                               {"h2", 4, std::nullopt, true, SourceKind::kHostsOption, "-H"}}));
  EXPECT_EQ(list.total_slots(), 8);
}

TEST(HostsOptionTest, RepeatedBareHostsAddSlots) {
  EXPECT_THAT(slots_of(parse_hosts_option("a,a,b")), ElementsAre("a:2 (counted)", "b:1 (counted)"));
  EXPECT_THAT(slots_of(parse_hosts_option("A,b,a")), ElementsAre("A:2 (counted)", "b:1 (counted)"));
}

TEST(HostsOptionTest, SourceNamesTheOriginAndErrors) {
  const HostList list = parse_hosts_option("x:2", "--hosts");
  EXPECT_EQ(list.hosts().front().origin, "--hosts");
  EXPECT_EQ(list.hosts().front().kind, SourceKind::kHostsOption);
  EXPECT_EQ(error_of("x,", "--hosts"),
            "--hosts:1:3: empty host name: remove the extra ','\n"
            "  x,\n"
            "    ^");
}

TEST(HostsOptionTest, Ipv4Addresses) {
  EXPECT_THAT(slots_of(parse_hosts_option("10.0.0.1:2,192.168.1.20")),
              ElementsAre("10.0.0.1:2", "192.168.1.20:1 (counted)"));
}

TEST(HostsOptionTest, BracketedIpv6Addresses) {
  EXPECT_THAT(slots_of(parse_hosts_option("[fe80::1]:2,[::1],[2001:db8::ff00:42:8329]:1")),
              ElementsAre("fe80::1:2", "::1:1 (counted)", "2001:db8::ff00:42:8329:1"));
  EXPECT_THAT(slots_of(parse_hosts_option("[fe80::1%eth0]:3,[::ffff:10.0.0.1]")),
              ElementsAre("fe80::1%eth0:3", "::ffff:10.0.0.1:1 (counted)"));
}

TEST(HostsOptionTest, SlurmRanges) {
  EXPECT_THAT(slots_of(parse_hosts_option("node[01-04,07],gpu[1-2]")),
              ElementsAre("node01:1 (counted)", "node02:1 (counted)", "node03:1 (counted)",
                          "node04:1 (counted)", "node07:1 (counted)", "gpu1:1 (counted)",
                          "gpu2:1 (counted)"));
}

TEST(HostsOptionTest, RangeWithSlotsGivesEachNodeTheSlots) {
  EXPECT_THAT(slots_of(parse_hosts_option("node[01-03]:2,login5:1")),
              ElementsAre("node01:2", "node02:2", "node03:2", "login5:1"));
}

TEST(HostsOptionTest, SpacesAroundEntriesAreIgnored) {
  EXPECT_THAT(slots_of(parse_hosts_option(" a:2 , b ")), ElementsAre("a:2", "b:1 (counted)"));
}

TEST(HostsOptionTest, EmptyList) {
  EXPECT_EQ(error_of(""), "-H:1:1: empty host list: give hosts such as '-H node1:4,node2:4'");
  EXPECT_EQ(error_of("  "),
            "-H:1:1: empty host list: give hosts such as '-H node1:4,node2:4'\n"
            "    \n"
            "  ^");
}

TEST(HostsOptionTest, EmptyNames) {
  EXPECT_EQ(error_of("a,,b"),
            "-H:1:3: empty host name: remove the extra ','\n"
            "  a,,b\n"
            "    ^");
  EXPECT_EQ(error_of(",a"),
            "-H:1:1: empty host name: remove the extra ','\n"
            "  ,a\n"
            "  ^");
}

TEST(HostsOptionTest, BareIpv6NeedsBrackets) {
  EXPECT_EQ(error_of("a,fe80::1"),
            "-H:1:3: IPv6 address 'fe80::1' needs brackets: write '[fe80::1]'\n"
            "  a,fe80::1\n"
            "    ^~~~~~~");
  EXPECT_EQ(error_of("::1"),
            "-H:1:1: IPv6 address '::1' needs brackets: write '[::1]'\n"
            "  ::1\n"
            "  ^~~");
}

TEST(HostsOptionTest, Ipv6Mistakes) {
  EXPECT_EQ(error_of("[fe80::1"),
            "-H:1:1: unclosed '[' in '[fe80::1': add ']' after the address\n"
            "  [fe80::1\n"
            "  ^~~~~~~~");
  EXPECT_EQ(error_of("[]:2"),
            "-H:1:1: empty IPv6 address '[]': write an address such as '[fe80::1]'\n"
            "  []:2\n"
            "  ^~");
  EXPECT_EQ(error_of("[fe80::g1]"),
            "-H:1:8: invalid character 'g' in IPv6 address 'fe80::g1': use hex digits, ':' and "
            "'.'\n"
            "  [fe80::g1]\n"
            "         ^");
  EXPECT_EQ(error_of("[fe80::1]2"),
            "-H:1:10: unexpected '2' after ']': write '[fe80::1]' or '[fe80::1]:4'\n"
            "  [fe80::1]2\n"
            "           ^");
  EXPECT_EQ(error_of("[fe80::1%]"),
            "-H:1:9: empty zone after '%' in IPv6 address 'fe80::1%': add an interface such as "
            "'%eth0' or drop the '%'\n"
            "  [fe80::1%]\n"
            "          ^");
  EXPECT_EQ(error_of("[fe80::1%e/0]"),
            "-H:1:11: invalid character '/' in the zone of IPv6 address 'fe80::1%e/0': use "
            "letters, digits, '-', '.' and '_'\n"
            "  [fe80::1%e/0]\n"
            "            ^");
}

TEST(HostsOptionTest, LeadingBracketWithoutColonIsNotARange) {
  EXPECT_EQ(error_of("[01-04]"),
            "-H:1:1: '[01-04]' is not an IPv6 address: put a name before a range "
            "('node[01-04]') or write an address such as '[fe80::1]'\n"
            "  [01-04]\n"
            "  ^~~~~~~");
}

TEST(HostsOptionTest, BadSlotCounts) {
  EXPECT_EQ(error_of("a:four"),
            "-H:1:3: invalid slot count 'four': write a whole number such as 4\n"
            "  a:four\n"
            "    ^~~~");
  EXPECT_EQ(error_of("a:4x"),
            "-H:1:3: invalid slot count '4x': write a whole number such as 4\n"
            "  a:4x\n"
            "    ^~");
  EXPECT_EQ(error_of("a:-2"),
            "-H:1:3: slot count '-2' is negative: write a whole number of at least 1\n"
            "  a:-2\n"
            "    ^~");
  EXPECT_EQ(error_of("a:0"),
            "-H:1:3: slot count must be at least 1: leave the host out to give it no ranks\n"
            "  a:0\n"
            "    ^");
  EXPECT_EQ(error_of("a:"),
            "-H:1:3: missing slot count: write a whole number such as 4\n"
            "  a:\n"
            "    ^");
  EXPECT_EQ(error_of("a:+4"),
            "-H:1:3: invalid slot count '+4': write a whole number such as 4\n"
            "  a:+4\n"
            "    ^~");
}

TEST(HostsOptionTest, SlotCountLimits) {
  EXPECT_THAT(slots_of(parse_hosts_option("a:1048576")), ElementsAre("a:1048576"));
  EXPECT_EQ(error_of("a:1048577"),
            "-H:1:3: slot count '1048577' is too large: use at most 1048576\n"
            "  a:1048577\n"
            "    ^~~~~~~");
  EXPECT_EQ(error_of("a:99999999999999999999999"),
            "-H:1:3: slot count '99999999999999999999999' is too large: use at most 1048576\n"
            "  a:99999999999999999999999\n"
            "    ^~~~~~~~~~~~~~~~~~~~~~~");
}

TEST(HostsOptionTest, MissingHostBeforeCount) {
  EXPECT_EQ(error_of("a,:4"),
            "-H:1:3: missing host name before ':4': write 'node1:4'\n"
            "  a,:4\n"
            "    ^");
}

TEST(HostsOptionTest, DuplicateWithCountsConflicts) {
  EXPECT_EQ(error_of("a:4,a:2"),
            "-H:1:5: host 'a' is already listed at -H: list each host once, with all its slots\n"
            "  a:4,a:2\n"
            "      ^");
  EXPECT_EQ(error_of("node[1-3],node2:2"),
            "-H:1:11: host 'node2' is already listed at -H: list each host once, with all its "
            "slots\n"
            "  node[1-3],node2:2\n"
            "            ^");
}

TEST(HostsOptionTest, InvalidHostNameCharacters) {
  EXPECT_EQ(error_of("no de"),
            "-H:1:3: invalid character ' ' in host name 'no de': use letters, digits, '-', '.' "
            "and '_'\n"
            "  no de\n"
            "    ^");
  EXPECT_EQ(error_of("a/b"),
            "-H:1:2: invalid character '/' in host name 'a/b': use letters, digits, '-', '.' "
            "and '_'\n"
            "  a/b\n"
            "   ^");
  EXPECT_EQ(error_of("x,a@b:2"),
            "-H:1:4: invalid character '@' in host name 'a@b': give the user name in "
            "~/.ssh/config instead\n"
            "  x,a@b:2\n"
            "     ^");
}

TEST(HostsOptionTest, RangeErrorsPointIntoTheArgument) {
  EXPECT_EQ(error_of("a,node[5-2]:2"),
            "-H:1:8: range '5-2' counts down from 5 to 2: write 'node[2-5]'\n"
            "  a,node[5-2]:2\n"
            "         ^~~");
  EXPECT_EQ(error_of("node[1-2"),
            "-H:1:5: unclosed '[' in 'node[1-2': add ']' after the range\n"
            "  node[1-2\n"
            "      ^~~~");
  EXPECT_EQ(error_of("node[]:2"),
            "-H:1:5: empty range '[]' in 'node[]': write numbers such as '[1-4]'\n"
            "  node[]:2\n"
            "      ^~");
}

TEST(HostsOptionTest, ColonInsideBracketsIsPartOfTheRange) {
  EXPECT_EQ(error_of("n[1:2]"),
            "-H:1:3: invalid range '1:2' in 'n[1:2]': write numbers such as '1-4' or '7'\n"
            "  n[1:2]\n"
            "    ^~~");
}

TEST(HostsOptionTest, ExpansionLimit) {
  EXPECT_EQ(error_of("n[1-2000000]:1"),
            "-H:1:1: 'n[1-2000000]' makes the host list longer than 1000000 names: check the "
            "ranges\n"
            "  n[1-2000000]:1\n"
            "  ^~~~~~~~~~~~");
}

TEST(HostsOptionTest, RoundTripThroughText) {
  const HostList first = parse_hosts_option("node[01-03]:2,[fe80::1]:4,gpu7");
  std::string text;
  for (const Host& h : first.hosts()) {
    const bool ipv6 = h.name.find(':') != std::string::npos;
    if (!text.empty()) text += ",";
    text += ipv6 ? "[" + h.name + "]" : h.name;
    if (h.slots_given) text += ":" + std::to_string(h.slots);
  }
  EXPECT_EQ(text, "node01:2,node02:2,node03:2,[fe80::1]:4,gpu7");
  EXPECT_EQ(parse_hosts_option(text).hosts(), first.hosts());
}

}  // namespace
}  // namespace ddl::hostfiles
