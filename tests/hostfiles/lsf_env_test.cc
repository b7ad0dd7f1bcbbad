#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hostfiles/host_list.h"
#include "tests/hostfiles/test_util.h"

namespace ddl::hostfiles {
namespace {

using test::describe;
using test::error_of;

using ::testing::ElementsAre;

std::string mcpu_error(const std::string& value) {
  return error_of([&] { parse_lsf_mcpu_hosts(value); });
}

std::string djob_error(const std::string& text) {
  return error_of([&] { parse_lsf_djob_hostfile(text, "/tmp/1234.hostfile"); });
}

// $LSB_MCPU_HOSTS

TEST(LsfMcpuHostsTest, SummitDropsTheBatchNode) {
  EXPECT_THAT(describe(parse_lsf_mcpu_hosts("batch1 1 a26n15 42 b07n01 42")),
              ElementsAre("a26n15 slots=42 given lsf-mcpu-hosts $LSB_MCPU_HOSTS",
                          "b07n01 slots=42 given lsf-mcpu-hosts $LSB_MCPU_HOSTS"));
  EXPECT_THAT(describe(parse_lsf_mcpu_hosts("login3 1 c01n01 8")),
              ElementsAre("c01n01 slots=8 given lsf-mcpu-hosts $LSB_MCPU_HOSTS"));
}

TEST(LsfMcpuHostsTest, KeepsTheFirstHostWhenItRunsRanks) {
  EXPECT_THAT(describe(parse_lsf_mcpu_hosts("hostA 4 hostB 2")),
              ElementsAre("hostA slots=4 given lsf-mcpu-hosts $LSB_MCPU_HOSTS",
                          "hostB slots=2 given lsf-mcpu-hosts $LSB_MCPU_HOSTS"));
}

TEST(LsfMcpuHostsTest, OnlyTheFirstHostCanBeTheLaunchNode) {
  EXPECT_THAT(describe(parse_lsf_mcpu_hosts("a 2 batch7 3")),
              ElementsAre("a slots=2 given lsf-mcpu-hosts $LSB_MCPU_HOSTS",
                          "batch7 slots=3 given lsf-mcpu-hosts $LSB_MCPU_HOSTS"));
}

TEST(LsfMcpuHostsTest, ExtraWhitespaceIsFine) {
  EXPECT_THAT(describe(parse_lsf_mcpu_hosts("  batch1  1\ta 2  \n")),
              ElementsAre("a slots=2 given lsf-mcpu-hosts $LSB_MCPU_HOSTS"));
}

TEST(LsfMcpuHostsTest, OddNumberOfWords) {
  EXPECT_EQ(mcpu_error("batch1 1 a26n15 42 b07n01"),
            "$LSB_MCPU_HOSTS:1:20: odd number of words (5): expected pairs of host and slot "
            "count such as 'node1 42'\n"
            "  batch1 1 a26n15 42 b07n01\n"
            "                     ^~~~~~");
}

TEST(LsfMcpuHostsTest, BadCounts) {
  EXPECT_EQ(mcpu_error("batch1 1 a26n15 many"),
            "$LSB_MCPU_HOSTS:1:17: invalid slot count 'many': write a whole number such as 4\n"
            "  batch1 1 a26n15 many\n"
            "                  ^~~~");
  EXPECT_EQ(mcpu_error("a26n15 0"),
            "$LSB_MCPU_HOSTS:1:8: slot count must be at least 1: leave the host out to give it "
            "no ranks\n"
            "  a26n15 0\n"
            "         ^");
  EXPECT_EQ(mcpu_error("a26n15 -3"),
            "$LSB_MCPU_HOSTS:1:8: slot count '-3' is negative: write a whole number of at least "
            "1\n"
            "  a26n15 -3\n"
            "         ^~");
  EXPECT_EQ(mcpu_error("a26n15 4200000"),
            "$LSB_MCPU_HOSTS:1:8: slot count '4200000' is too large: use at most 1048576\n"
            "  a26n15 4200000\n"
            "         ^~~~~~~");
}

TEST(LsfMcpuHostsTest, BadHostName) {
  EXPECT_EQ(mcpu_error("batch1 1 a26/n15 42"),
            "$LSB_MCPU_HOSTS:1:13: invalid character '/' in host name 'a26/n15': use letters, "
            "digits, '-', '.' and '_'\n"
            "  batch1 1 a26/n15 42\n"
            "              ^");
}

TEST(LsfMcpuHostsTest, EmptyValue) {
  EXPECT_EQ(mcpu_error(" "),
            "$LSB_MCPU_HOSTS:1:1: no hosts: expected pairs of host and slot count such as "
            "'node1 42'\n"
            "   \n"
            "  ^");
}

TEST(LsfMcpuHostsTest, OnlyTheLaunchNode) {
  EXPECT_EQ(mcpu_error("batch1 1"),
            "$LSB_MCPU_HOSTS:1:1: no compute hosts: only the launch node 'batch1' is listed; ask "
            "LSF for compute nodes\n"
            "  batch1 1\n"
            "  ^");
}

TEST(LsfMcpuHostsTest, HostListedTwice) {
  EXPECT_EQ(mcpu_error("batch1 1 a 4 b 4 a 4"),
            "$LSB_MCPU_HOSTS:1:18: host 'a' is already listed at $LSB_MCPU_HOSTS: list each "
            "host once, with all its slots\n"
            "  batch1 1 a 4 b 4 a 4\n"
            "                   ^");
}

// $LSB_DJOB_HOSTFILE

TEST(LsfDjobHostfileTest, OneLinePerSlotWithoutTheBatchNode) {
  const std::string text = "batch1\na26n15\na26n15\na26n15\nb07n01\nb07n01\n";
  EXPECT_THAT(describe(parse_lsf_djob_hostfile(text, "/tmp/1234.hostfile")),
              ElementsAre("a26n15 slots=3 given lsf-hostfile /tmp/1234.hostfile:2",
                          "b07n01 slots=2 given lsf-hostfile /tmp/1234.hostfile:5"));
}

TEST(LsfDjobHostfileTest, BlankLinesWhitespaceAndCrlf) {
  const std::string text = "\n  node1  \r\nnode1\r\n\nnode2";
  EXPECT_THAT(
      describe(parse_lsf_djob_hostfile(text, "h")),
      ElementsAre("node1 slots=2 given lsf-hostfile h:2", "node2 slots=1 given lsf-hostfile h:5"));
}

TEST(LsfDjobHostfileTest, ManyNodes) {
  std::string text = "batch2\n";
  for (int node = 1; node <= 18; ++node) {
    for (int slot = 0; slot < 42; ++slot) {
      text += "a01n" + std::to_string(100 + node) + "\n";
    }
  }
  const HostList list = parse_lsf_djob_hostfile(text, "h");
  ASSERT_EQ(list.size(), 18u);
  EXPECT_EQ(list.total_slots(), 18 * 42);
  EXPECT_EQ(list.hosts()[17].name, "a01n118");
  EXPECT_EQ(list.hosts()[17].origin, "h:" + std::to_string(2 + 17 * 42));
}

TEST(LsfDjobHostfileTest, OneHostPerLine) {
  EXPECT_EQ(djob_error("batch1\na26n15 42\n"),
            "/tmp/1234.hostfile:2:8: unexpected '42' after the host name: an LSF hostfile lists "
            "one host per line\n"
            "  a26n15 42\n"
            "         ^~");
}

TEST(LsfDjobHostfileTest, BadHostName) {
  EXPECT_EQ(djob_error("batch1\n-x\n"),
            "/tmp/1234.hostfile:2:1: host name '-x' starts with '-': check for an option given "
            "where a host was expected\n"
            "  -x\n"
            "  ^~");
}

TEST(LsfDjobHostfileTest, Empty) {
  EXPECT_EQ(djob_error("\n\n"),
            "/tmp/1234.hostfile: no hosts in LSF hostfile: expected one host name per line");
}

TEST(LsfDjobHostfileTest, OnlyTheLaunchNode) {
  EXPECT_EQ(djob_error("batch1\n"),
            "/tmp/1234.hostfile: no compute hosts: only the launch node 'batch1' is listed; ask "
            "LSF for compute nodes");
}

// $LSB_HOSTS

TEST(LsfHostsTest, OneWordPerSlot) {
  EXPECT_THAT(describe(parse_lsf_hosts("batch1 a26n15 a26n15 b07n01")),
              ElementsAre("a26n15 slots=2 given lsf-hostfile $LSB_HOSTS",
                          "b07n01 slots=1 given lsf-hostfile $LSB_HOSTS"));
}

TEST(LsfHostsTest, Errors) {
  EXPECT_EQ(error_of([] { parse_lsf_hosts("batch1 a,b"); }),
            "$LSB_HOSTS:1:9: invalid character ',' in host name 'a,b': use letters, digits, "
            "'-', '.' and '_'\n"
            "  batch1 a,b\n"
            "          ^");
  EXPECT_EQ(error_of([] { parse_lsf_hosts(""); }),
            "$LSB_HOSTS:1:1: no hosts: expected host names such as 'node1 node1'");
  EXPECT_EQ(error_of([] { parse_lsf_hosts("login1"); }),
            "$LSB_HOSTS:1:1: no compute hosts: only the launch node 'login1' is listed; ask LSF "
            "for compute nodes\n"
            "  login1\n"
            "  ^");
}

}  // namespace
}  // namespace ddl::hostfiles
