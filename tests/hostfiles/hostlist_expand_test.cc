#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hostfiles/host_list.h"
#include "tests/hostfiles/test_util.h"

namespace ddl::hostfiles {
namespace {

using test::error_of;

using ::testing::ElementsAre;

/// Expands `text` as the whole of line 1 of "$SLURM_JOB_NODELIST".
std::vector<std::string> expand(const std::string& text) {
  return expand_hostlist(text, Position{"$SLURM_JOB_NODELIST", 1, 1, text});
}

std::string expand_error(const std::string& text) {
  return error_of([&] { expand(text); });
}

TEST(ExpandHostlistTest, PlainNamesAndCommas) {
  EXPECT_THAT(expand("node1"), ElementsAre("node1"));
  EXPECT_THAT(expand("a,b.example.com,c_1,10.0.0.7"),
              ElementsAre("a", "b.example.com", "c_1", "10.0.0.7"));
}

TEST(ExpandHostlistTest, RangesWithZeroPaddingAndSeveralGroups) {
  EXPECT_THAT(expand("node[01-04,07],gpu[1-2]"),
              ElementsAre("node01", "node02", "node03", "node04", "node07", "gpu1", "gpu2"));
}

TEST(ExpandHostlistTest, PaddingFollowsTheFirstNumber) {
  EXPECT_THAT(expand("n[08-11]"), ElementsAre("n08", "n09", "n10", "n11"));
  EXPECT_THAT(expand("n[8-11]"), ElementsAre("n8", "n9", "n10", "n11"));
  EXPECT_THAT(expand("n[098-101]"), ElementsAre("n098", "n099", "n100", "n101"));
  EXPECT_THAT(expand("n[0-2]"), ElementsAre("n0", "n1", "n2"));
  EXPECT_THAT(expand("n[007]"), ElementsAre("n007"));
  EXPECT_THAT(expand("n[1-2,005]"), ElementsAre("n1", "n2", "n005"));
}

TEST(ExpandHostlistTest, SeveralGroupsInOneNameLastTurnsFastest) {
  EXPECT_THAT(expand("r[1-2]n[1-2]"), ElementsAre("r1n1", "r1n2", "r2n1", "r2n2"));
  EXPECT_THAT(expand("a[1,3]-ib[0-1]x"), ElementsAre("a1-ib0x", "a1-ib1x", "a3-ib0x", "a3-ib1x"));
}

TEST(ExpandHostlistTest, GroupWithoutPrefixAndSingleNumbers) {
  EXPECT_THAT(expand("[1-3]"), ElementsAre("1", "2", "3"));
  EXPECT_THAT(expand("n[5]"), ElementsAre("n5"));
  EXPECT_THAT(expand("n[5-5]"), ElementsAre("n5"));
}

TEST(ExpandHostlistTest, ExactlyTheLimitOfNames) {
  const std::vector<std::string> names = expand("n[1-1000000]");
  ASSERT_EQ(names.size(), 1000000u);
  EXPECT_EQ(names.front(), "n1");
  EXPECT_EQ(names[499999], "n500000");
  EXPECT_EQ(names.back(), "n1000000");
}

TEST(ExpandHostlistTest, MoreThanAMillionNamesIsAnError) {
  EXPECT_EQ(expand_error("n[1-1000001]"),
            "$SLURM_JOB_NODELIST:1:1: 'n[1-1000001]' makes the host list longer than 1000000 "
            "names: check the ranges\n"
            "  n[1-1000001]\n"
            "  ^~~~~~~~~~~~");
  EXPECT_EQ(expand_error("a[1-600000],b[1-400001]"),
            "$SLURM_JOB_NODELIST:1:13: 'b[1-400001]' makes the host list longer than 1000000 "
            "names: check the ranges\n"
            "  a[1-600000],b[1-400001]\n"
            "              ^~~~~~~~~~~");
}

TEST(ExpandHostlistTest, HugeProductsFailBeforeAllocating) {
  EXPECT_THAT(expand_error("n[0-999999999999999999][0-999999999999999999]"),
              ::testing::StartsWith("$SLURM_JOB_NODELIST:1:1: 'n[0-999999999999999999][0-"
                                    "999999999999999999]' makes the host list longer than "
                                    "1000000 names"));
}

TEST(ExpandHostlistTest, TooMuchTextIsAnError) {
  const std::string prefix(200, 'x');
  EXPECT_EQ(error_of([&] {
              expand_hostlist(prefix + "[1-100000]", Position{"s", 1, 0, {}});
            }),
            "s:1: '" + prefix +
                "[1-100000]' makes the host list longer than 16 MiB: check the "
                "ranges");
}

TEST(ExpandHostlistTest, BackwardsRangeNamesBothNumbersAndTheFix) {
  EXPECT_EQ(expand_error("node[5-2]"),
            "$SLURM_JOB_NODELIST:1:6: range '5-2' counts down from 5 to 2: write 'node[2-5]'\n"
            "  node[5-2]\n"
            "       ^~~");
  EXPECT_EQ(expand_error("n[1,09-03]x"),
            "$SLURM_JOB_NODELIST:1:5: range '09-03' counts down from 9 to 3: write "
            "'n[1,03-09]x'\n"
            "  n[1,09-03]x\n"
            "      ^~~~~");
}

TEST(ExpandHostlistTest, UnclosedBracket) {
  EXPECT_EQ(expand_error("a,node[1-3"),
            "$SLURM_JOB_NODELIST:1:7: unclosed '[' in 'node[1-3': add ']' after the range\n"
            "  a,node[1-3\n"
            "        ^~~~");
  EXPECT_EQ(expand_error("node[1-3,b"),
            "$SLURM_JOB_NODELIST:1:5: unclosed '[' in 'node[1-3,b': add ']' after the range\n"
            "  node[1-3,b\n"
            "      ^~~~~~");
}

TEST(ExpandHostlistTest, UnmatchedClosingBracket) {
  EXPECT_EQ(expand_error("node1]"),
            "$SLURM_JOB_NODELIST:1:6: unmatched ']' in 'node1]': remove it or add '[' before "
            "the range\n"
            "  node1]\n"
            "       ^");
}

TEST(ExpandHostlistTest, EmptyBrackets) {
  EXPECT_EQ(expand_error("node[]"),
            "$SLURM_JOB_NODELIST:1:5: empty range '[]' in 'node[]': write numbers such as "
            "'[1-4]'\n"
            "  node[]\n"
            "      ^~");
}

TEST(ExpandHostlistTest, EmptyRangeBetweenCommas) {
  EXPECT_EQ(expand_error("n[1,,3]"),
            "$SLURM_JOB_NODELIST:1:5: empty range in '[1,,3]': remove the extra ','\n"
            "  n[1,,3]\n"
            "      ^");
  EXPECT_EQ(expand_error("n[1,]"),
            "$SLURM_JOB_NODELIST:1:5: empty range in '[1,]': remove the extra ','\n"
            "  n[1,]\n"
            "      ^");
}

TEST(ExpandHostlistTest, RangesAreNumbers) {
  EXPECT_EQ(expand_error("node[a-b]"),
            "$SLURM_JOB_NODELIST:1:6: invalid range 'a-b' in 'node[a-b]': write numbers such "
            "as '1-4' or '7'\n"
            "  node[a-b]\n"
            "       ^~~");
  EXPECT_EQ(expand_error("n[1-]"),
            "$SLURM_JOB_NODELIST:1:3: invalid range '1-' in 'n[1-]': write numbers such as "
            "'1-4' or '7'\n"
            "  n[1-]\n"
            "    ^~");
  EXPECT_EQ(expand_error("n[1-2-3]"),
            "$SLURM_JOB_NODELIST:1:3: invalid range '1-2-3' in 'n[1-2-3]': write numbers such "
            "as '1-4' or '7'\n"
            "  n[1-2-3]\n"
            "    ^~~~~");
  EXPECT_EQ(expand_error("n[1[2]]"),
            "$SLURM_JOB_NODELIST:1:3: invalid range '1[2' in 'n[1[2]]': write numbers such as "
            "'1-4' or '7'\n"
            "  n[1[2]]\n"
            "    ^~~");
}

TEST(ExpandHostlistTest, RangeNumbersHaveAtMost18Digits) {
  EXPECT_EQ(expand_error("n[1234567890123456789]"),
            "$SLURM_JOB_NODELIST:1:3: range number '1234567890123456789' is too long: use at "
            "most 18 digits\n"
            "  n[1234567890123456789]\n"
            "    ^~~~~~~~~~~~~~~~~~~");
}

TEST(ExpandHostlistTest, EmptyNames) {
  EXPECT_EQ(expand_error("a,,b"),
            "$SLURM_JOB_NODELIST:1:3: empty host name: remove the extra ','\n"
            "  a,,b\n"
            "    ^");
  EXPECT_EQ(expand_error(",a"),
            "$SLURM_JOB_NODELIST:1:1: empty host name: remove the extra ','\n"
            "  ,a\n"
            "  ^");
  EXPECT_EQ(expand_error(""), "$SLURM_JOB_NODELIST:1:1: empty host list: name at least one host");
}

TEST(ExpandHostlistTest, InvalidCharacters) {
  EXPECT_EQ(expand_error("no de"),
            "$SLURM_JOB_NODELIST:1:3: invalid character ' ' in host name 'no de': use letters, "
            "digits, '-', '.' and '_'\n"
            "  no de\n"
            "    ^");
  EXPECT_EQ(expand_error("n[1-2]/x"),
            "$SLURM_JOB_NODELIST:1:7: invalid character '/' in host name 'n[1-2]/x': use "
            "letters, digits, '-', '.' and '_'\n"
            "  n[1-2]/x\n"
            "        ^");
  EXPECT_EQ(expand_error("a\x01"),
            "$SLURM_JOB_NODELIST:1:2: invalid character '\\x01' in host name 'a\\x01': use "
            "letters, digits, '-', '.' and '_'\n"
            "  a\\x01\n"
            "   ^~~~");
}

TEST(ExpandHostlistTest, NamesMayNotStartWithADash) {
  EXPECT_EQ(expand_error("-oProxyCommand"),
            "$SLURM_JOB_NODELIST:1:1: host name '-oProxyCommand' starts with '-': check for an "
            "option given where a host was expected\n"
            "  -oProxyCommand\n"
            "  ^~~~~~~~~~~~~~");
}

TEST(ExpandHostlistTest, NamesHaveALengthLimit) {
  EXPECT_THAT(expand(std::string(255, 'a')), ElementsAre(std::string(255, 'a')));
  EXPECT_EQ(error_of([] {
              expand_hostlist(std::string(250, 'a') + "[1-100000]", Position{"s", 0, 0, {}});
            }),
            "s: host name is longer than 255 characters: use a shorter name or the address");
}

TEST(ExpandHostlistTest, ColumnsAreRelativeToWhereTheTextStarts) {
  // The text starts at column 10 of a hostfile line.
  const Position where{"hosts.txt", 4, 10, "         node[3-1] slots=2"};
  EXPECT_EQ(error_of([&] { expand_hostlist("node[3-1]", where); }),
            "hosts.txt:4:15: range '3-1' counts down from 3 to 1: write 'node[1-3]'\n"
            "           node[3-1] slots=2\n"
            "                ^~~");
}

}  // namespace
}  // namespace ddl::hostfiles
