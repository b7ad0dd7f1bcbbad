#include "hostfiles/rankfile.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/hostfiles/rankfile_text.h"
#include "tests/hostfiles/test_util.h"

namespace ddl::hostfiles {
namespace {

using test::error_of;

/// The what() of the InputError that parsing `text` throws, or "" when it parses.
std::string parse_error(std::string_view text, std::string_view source = "ranks.txt") {
  try {
    parse_rankfile(text, source);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

RankfileEntry entry(int rank, std::string host, std::vector<SlotSpec> slots = {}) {
  RankfileEntry e;
  e.rank = rank;
  e.host = std::move(host);
  e.slots = std::move(slots);
  return e;
}

RankfileEntry relative(int rank, int node, std::vector<SlotSpec> slots = {}) {
  RankfileEntry e;
  e.rank = rank;
  e.relative_node = node;
  e.slots = std::move(slots);
  return e;
}

SlotSpec socket_cores(int socket, std::vector<CpuRange> cpus) {
  SlotSpec s;
  s.socket = socket;
  s.cpus = std::move(cpus);
  return s;
}

SlotSpec all_cores(int socket) {
  SlotSpec s;
  s.socket = socket;
  s.all_cores = true;
  return s;
}

SlotSpec logical(std::vector<CpuRange> cpus) {
  SlotSpec s;
  s.cpus = std::move(cpus);
  return s;
}

HostList allocation_of(const std::vector<std::string>& names) {
  HostList list;
  for (const std::string& name : names) {
    Host host;
    host.name = name;
    host.slots = 4;
    host.slots_given = true;
    host.kind = SourceKind::kSlurm;
    host.origin = "$SLURM_JOB_NODELIST";
    list.add(host, Position{"$SLURM_JOB_NODELIST", 0, 0, {}});
  }
  return list;
}

// --- parsing ---------------------------------------------------------------------------------

TEST(RankfileParse, ReadsSocketCoreLines) {
  const Rankfile rf = parse_rankfile(
      "rank 0=node01 slot=0:0-6\n"
      "rank 1=node01 slot=1:0-6\n",
      "ranks.txt");
  ASSERT_EQ(rf.entries.size(), 2u);
  EXPECT_EQ(rf.entries[0].rank, 0);
  EXPECT_EQ(rf.entries[0].host, "node01");
  EXPECT_EQ(rf.entries[0].relative_node, std::nullopt);
  ASSERT_EQ(rf.entries[0].slots.size(), 1u);
  EXPECT_EQ(rf.entries[0].slots[0].socket, 0);
  EXPECT_FALSE(rf.entries[0].slots[0].all_cores);
  EXPECT_EQ(rf.entries[0].slots[0].cpus, (std::vector<CpuRange>{{0, 6}}));
  EXPECT_EQ(rf.entries[0].line, 1);
  EXPECT_EQ(rf.entries[1], entry(1, "node01", {socket_cores(1, {{0, 6}})}));
  EXPECT_EQ(rf.entries[1].line, 2);
}

TEST(RankfileParse, ReadsEverySlotForm) {
  const Rankfile rf = parse_rankfile(
      "rank 0=a slot=1:0-2,4\n"
      "rank 1=a slot=1:*\n"
      "rank 2=b slot=0-3,8\n"
      "rank 3=b slot=0-3;1:0\n"
      "rank 4=c slot=7\n"
      "rank 5=c slot=0:1;1:*;5-5\n",
      "ranks.txt");
  const Rankfile expected{{
      entry(0, "a", {socket_cores(1, {{0, 2}, {4, 4}})}),
      entry(1, "a", {all_cores(1)}),
      entry(2, "b", {logical({{0, 3}, {8, 8}})}),
      entry(3, "b", {logical({{0, 3}}), socket_cores(1, {{0, 0}})}),
      entry(4, "c", {logical({{7, 7}})}),
      entry(5, "c", {socket_cores(0, {{1, 1}}), all_cores(1), logical({{5, 5}})}),
  }};
  EXPECT_EQ(rf, expected);
  EXPECT_EQ(rf.entries[1].slots[0].cpus, std::vector<CpuRange>{});
}

TEST(RankfileParse, ReadsRelativeNodesAndAddresses) {
  const Rankfile rf = parse_rankfile(
      "rank 0=+n0 slot=0:0\n"
      "rank 1=+n12\n"
      "rank 2=10.0.0.7 slot=1:*\n"
      "rank 3=gpu-node_3.cluster.example.org\n",
      "ranks.txt");
  const Rankfile expected{{
      relative(0, 0, {socket_cores(0, {{0, 0}})}),
      relative(1, 12),
      entry(2, "10.0.0.7", {all_cores(1)}),
      entry(3, "gpu-node_3.cluster.example.org"),
  }};
  EXPECT_EQ(rf, expected);
  EXPECT_EQ(rf.entries[0].host, "");
  EXPECT_TRUE(rf.entries[1].slots.empty());
}

TEST(RankfileParse, SkipsCommentsAndBlankLinesAndToleratesSpacing) {
  const Rankfile rf = parse_rankfile(
      "# ranks for the two-node test\n"
      "\n"
      "   \t\n"
      "rank 0 = node01   slot = 0:0-6   # first socket\n"
      "\trank\t1=node01\tslot=\t1:0-6\r\n"
      "rank  2=  node02 slot  =0:* \n"
      "#rank 3=node09\n"
      "rank 3=node02#no slot\n",
      "ranks.txt");
  const Rankfile expected{{
      entry(0, "node01", {socket_cores(0, {{0, 6}})}),
      entry(1, "node01", {socket_cores(1, {{0, 6}})}),
      entry(2, "node02", {all_cores(0)}),
      entry(3, "node02"),
  }};
  EXPECT_EQ(rf, expected);
  EXPECT_EQ(rf.entries[0].line, 4);
  EXPECT_EQ(rf.entries[1].line, 5);
  EXPECT_EQ(rf.entries[2].line, 6);
  EXPECT_EQ(rf.entries[3].line, 8);
}

TEST(RankfileParse, SortsEntriesByRankAndKeepsTheirLines) {
  const Rankfile rf = parse_rankfile("rank 2=c\nrank 0=a\nrank 1=b", "ranks.txt");
  ASSERT_EQ(rf.entries.size(), 3u);
  EXPECT_EQ(rf.entries[0], entry(0, "a"));
  EXPECT_EQ(rf.entries[0].line, 2);
  EXPECT_EQ(rf.entries[1], entry(1, "b"));
  EXPECT_EQ(rf.entries[1].line, 3);
  EXPECT_EQ(rf.entries[2], entry(2, "c"));
  EXPECT_EQ(rf.entries[2].line, 1);
}

TEST(RankfileParse, AcceptsTheLargestNumbers) {
  const Rankfile rf =
      parse_rankfile("rank 0=a slot=65535:0-65535\nrank 1=+n1048575 slot=00007\n", "r");
  EXPECT_EQ(rf.entries[0], entry(0, "a", {socket_cores(65535, {{0, 65535}})}));
  EXPECT_EQ(rf.entries[1], relative(1, 1048575, {logical({{7, 7}})}));
}

// --- errors: each pins the whole what() ------------------------------------------------------

TEST(RankfileErrors, UnknownKeySuggestsSlot) {
  EXPECT_EQ(parse_error("rank 0=node01 slots=0:1\n"),
            "ranks.txt:1:15: unknown key 'slots' (did you mean 'slot'?)\n"
            "  rank 0=node01 slots=0:1\n"
            "                ^~~~~");
}

TEST(RankfileErrors, UnknownKeyWithoutSuggestion) {
  EXPECT_EQ(parse_error("rank 0=node01 slot=0:1\nrank 1=node01 cpuset=3\n"),
            "ranks.txt:2:15: unknown key 'cpuset': the only key a rankfile line takes is 'slot'\n"
            "  rank 1=node01 cpuset=3\n"
            "                ^~~~~~");
}

TEST(RankfileErrors, LineMustStartWithRank) {
  EXPECT_EQ(parse_error("rank 0=node01\nnode01 slots=4\n"),
            "ranks.txt:2:1: a rankfile line must start with 'rank', not 'node01': write 'rank "
            "N=HOST slot=SPEC'\n"
            "  node01 slots=4\n"
            "  ^~~~~~");
  EXPECT_EQ(parse_error("  ranks 0=a"),
            "ranks.txt:1:3: a rankfile line must start with 'rank', not 'ranks': write 'rank "
            "N=HOST slot=SPEC'\n"
            "    ranks 0=a\n"
            "    ^~~~~");
  EXPECT_EQ(parse_error("=a"),
            "ranks.txt:1:1: a rankfile line must start with 'rank', not '=': write 'rank "
            "N=HOST slot=SPEC'\n"
            "  =a\n"
            "  ^");
}

TEST(RankfileErrors, RankIsNotANumber) {
  EXPECT_EQ(parse_error("rank x1=node01"),
            "ranks.txt:1:6: rank must be a number from 0 to 1048575, not 'x1'\n"
            "  rank x1=node01\n"
            "       ^~");
}

TEST(RankfileErrors, RankIsNegative) {
  EXPECT_EQ(parse_error("rank -1=node01 slot=0:0"),
            "ranks.txt:1:6: rank must be a number from 0 to 1048575, not '-1'\n"
            "  rank -1=node01 slot=0:0\n"
            "       ^~");
}

TEST(RankfileErrors, RankOverflows) {
  EXPECT_EQ(parse_error("rank 1048576=node01"),
            "ranks.txt:1:6: rank must be a number from 0 to 1048575, not '1048576'\n"
            "  rank 1048576=node01\n"
            "       ^~~~~~~");
  EXPECT_EQ(parse_error("rank 99999999999999999999999=node01"),
            "ranks.txt:1:6: rank must be a number from 0 to 1048575, not "
            "'99999999999999999999999'\n"
            "  rank 99999999999999999999999=node01\n"
            "       ^~~~~~~~~~~~~~~~~~~~~~~");
}

TEST(RankfileErrors, CpuNumbersAreChecked) {
  EXPECT_EQ(parse_error("rank 0=a slot=0:65536"),
            "ranks.txt:1:17: core number must be a number from 0 to 65535, not '65536'\n"
            "  rank 0=a slot=0:65536\n"
            "                  ^~~~~");
  EXPECT_EQ(parse_error("rank 0=a slot=1,2x"),
            "ranks.txt:1:17: CPU number must be a number from 0 to 65535, not '2x'\n"
            "  rank 0=a slot=1,2x\n"
            "                  ^~");
  EXPECT_EQ(parse_error("rank 0=a slot=-1"),
            "ranks.txt:1:15: CPU number must be a number from 0 to 65535, not '-1'\n"
            "  rank 0=a slot=-1\n"
            "                ^~");
  EXPECT_EQ(parse_error("rank 0=a slot=0:1--2"),
            "ranks.txt:1:19: core number must be a number from 0 to 65535, not '-2'\n"
            "  rank 0=a slot=0:1--2\n"
            "                    ^~");
  EXPECT_EQ(parse_error("rank 0=a slot=s0:1"),
            "ranks.txt:1:15: socket must be a number from 0 to 65535, not 's0'\n"
            "  rank 0=a slot=s0:1\n"
            "                ^~");
}

TEST(RankfileErrors, ReversedRange) {
  EXPECT_EQ(parse_error("rank 0=node01 slot=0:5-2"),
            "ranks.txt:1:22: reversed range '5-2': write the lower number first ('2-5')\n"
            "  rank 0=node01 slot=0:5-2\n"
            "                       ^~~");
}

TEST(RankfileErrors, RangeWithoutEnd) {
  EXPECT_EQ(parse_error("rank 0=a slot=0-"),
            "ranks.txt:1:16: missing number after '-' in '0-': write a range as 'N-M'\n"
            "  rank 0=a slot=0-\n"
            "                 ^");
}

TEST(RankfileErrors, EmptySlotSpec) {
  const std::string expected =
      "ranks.txt:1:20: empty slot list after 'slot=': give CPUs such as 'slot=0:0-6', or leave "
      "out 'slot='\n"
      "  rank 0=node01 slot=\n"
      "                     ^";
  EXPECT_EQ(parse_error("rank 0=node01 slot="), expected);
  EXPECT_EQ(parse_error("rank 0=node01 slot=   # none"),
            "ranks.txt:1:23: empty slot list after 'slot=': give CPUs such as 'slot=0:0-6', or "
            "leave out 'slot='\n"
            "  rank 0=node01 slot=   # none\n"
            "                        ^");
}

TEST(RankfileErrors, EmptyPiecesOfASlotList) {
  EXPECT_EQ(parse_error("rank 0=a slot=0:0;;1:0"),
            "ranks.txt:1:19: empty group in the slot list '0:0;;1:0': remove the extra ';'\n"
            "  rank 0=a slot=0:0;;1:0\n"
            "                    ^");
  EXPECT_EQ(parse_error("rank 0=a slot=0:0;"),
            "ranks.txt:1:19: empty group in the slot list '0:0;': remove the extra ';'\n"
            "  rank 0=a slot=0:0;\n"
            "                    ^");
  EXPECT_EQ(parse_error("rank 0=a slot=0:1,,2"),
            "ranks.txt:1:19: empty item in the core list '1,,2': remove the extra ','\n"
            "  rank 0=a slot=0:1,,2\n"
            "                    ^");
  EXPECT_EQ(parse_error("rank 0=a slot=0:"),
            "ranks.txt:1:16: missing cores after '0:': write '0:*' for every core of socket 0\n"
            "  rank 0=a slot=0:\n"
            "                 ^");
  EXPECT_EQ(parse_error("rank 0=a slot=:3"),
            "ranks.txt:1:15: missing socket number before ':': write 'S:CORES'\n"
            "  rank 0=a slot=:3\n"
            "                ^");
}

TEST(RankfileErrors, MalformedSlotGroups) {
  EXPECT_EQ(parse_error("rank 0=a slot=*"),
            "ranks.txt:1:15: '*' needs a socket: write 'S:*' for every core of socket S\n"
            "  rank 0=a slot=*\n"
            "                ^");
  EXPECT_EQ(parse_error("rank 0=a slot=0:1:2"),
            "ranks.txt:1:18: too many ':' in '0:1:2': write 'S:CORES' and separate sockets with "
            "';'\n"
            "  rank 0=a slot=0:1:2\n"
            "                   ^");
  EXPECT_EQ(parse_error("rank 0=a slot=0:0 slot=1:0"),
            "ranks.txt:1:19: slot= is given twice: join the lists with ';'\n"
            "  rank 0=a slot=0:0 slot=1:0\n"
            "                    ^~~~");
  EXPECT_EQ(parse_error("rank 0=a slot=0:0 1:0"),
            "ranks.txt:1:19: unexpected '1:0' after the host: only 'slot=SPEC' may follow\n"
            "  rank 0=a slot=0:0 1:0\n"
            "                    ^~~");
  EXPECT_EQ(parse_error("rank 0=a slot"),
            "ranks.txt:1:10: expected '=' after 'slot': write 'slot=SPEC'\n"
            "  rank 0=a slot\n"
            "           ^~~~");
  EXPECT_EQ(parse_error("rank 0=a =0:0"),
            "ranks.txt:1:10: unexpected '=' after the host: write 'slot=SPEC'\n"
            "  rank 0=a =0:0\n"
            "           ^");
}

TEST(RankfileErrors, MalformedRankAndHost) {
  EXPECT_EQ(parse_error("rank"),
            "ranks.txt:1:5: missing rank number after 'rank': write 'rank N=HOST slot=SPEC'\n"
            "  rank\n"
            "      ^");
  EXPECT_EQ(parse_error("rank 0 node01"),
            "ranks.txt:1:8: expected '=' after 'rank 0': write 'rank N=HOST slot=SPEC'\n"
            "  rank 0 node01\n"
            "         ^");
  EXPECT_EQ(parse_error("rank 0=  # later"),
            "ranks.txt:1:10: missing host after 'rank 0=': write 'rank N=HOST slot=SPEC'\n"
            "  rank 0=  # later\n"
            "           ^");
  EXPECT_EQ(parse_error("rank 0=+n"),
            "ranks.txt:1:8: relative node must be '+n' and a number from 0 to 1048575, not '+n'\n"
            "  rank 0=+n\n"
            "         ^~");
  EXPECT_EQ(parse_error("rank 0=+e1 slot=0"),
            "ranks.txt:1:8: relative node must be '+n' and a number from 0 to 1048575, not "
            "'+e1'\n"
            "  rank 0=+e1 slot=0\n"
            "         ^~~");
}

TEST(RankfileErrors, InvalidHostNameCharacters) {
  EXPECT_EQ(parse_error("rank 0=node01\nrank 1=node!02 slot=0:0\n"),
            "ranks.txt:2:12: invalid character '!' in host name 'node!02': use letters, digits, "
            "'-', '.' and '_'\n"
            "  rank 1=node!02 slot=0:0\n"
            "             ^");
  EXPECT_EQ(parse_error("rank 0=node=01"),
            "ranks.txt:1:12: invalid character '=' in host name 'node=01': use letters, digits, "
            "'-', '.' and '_'\n"
            "  rank 0=node=01\n"
            "             ^");
  EXPECT_EQ(parse_error(std::string_view("rank 0=a\x01", 9)),
            "ranks.txt:1:9: invalid character '\\x01' in host name 'a\\x01': use letters, "
            "digits, '-', '.' and '_'\n"
            "  rank 0=a\\x01\n"
            "          ^~~~");
  EXPECT_EQ(parse_error("rank 0=admin@node01"),
            "ranks.txt:1:13: invalid character '@' in host name 'admin@node01': give the user "
            "name in ~/.ssh/config instead\n"
            "  rank 0=admin@node01\n"
            "              ^");
  EXPECT_EQ(parse_error("rank 0=-np slot=0:0"),
            "ranks.txt:1:8: host name '-np' starts with '-': check for an option given where a "
            "host was expected\n"
            "  rank 0=-np slot=0:0\n"
            "         ^~~");
  EXPECT_EQ(parse_error("rank 0=" + std::string(256, 'h')),
            "ranks.txt:1:8: host name is longer than 255 characters: use a shorter name or the "
            "address\n"
            "  rank 0=" +
                std::string(256, 'h') + "\n         ^" + std::string(255, '~'));
  EXPECT_EQ(parse_error("rank 0=" + std::string(255, 'h')), "");
}

TEST(RankfileErrors, CaretFollowsTabs) {
  EXPECT_EQ(parse_error("rank\t0=a\tslot=9-1"),
            "ranks.txt:1:15: reversed range '9-1': write the lower number first ('1-9')\n"
            "  rank\t0=a\tslot=9-1\n"
            "      \t   \t     ^~~");
}

TEST(RankfileErrors, DuplicateRankNamesTheFirstLine) {
  EXPECT_EQ(parse_error("rank 0=a\nrank 3=b\nrank 1=c\nrank 2=d\nrank  3=e slot=0:0\n"),
            "ranks.txt:5:7: rank 3 is already given at ranks.txt:2\n"
            "  rank  3=e slot=0:0\n"
            "        ^");
}

TEST(RankfileErrors, MissingRanks) {
  EXPECT_EQ(parse_error("rank 0=a\nrank 1=a\nrank 3=b\n"),
            "ranks.txt: rank 2 is missing: a rankfile must list ranks 0 to N-1 exactly once");
  EXPECT_EQ(parse_error("rank 1=a\n"),
            "ranks.txt: rank 0 is missing: a rankfile must list ranks 0 to N-1 exactly once");
}

TEST(RankfileErrors, EmptyFile) {
  const std::string expected =
      "ranks.txt: no ranks in the rankfile: add lines such as 'rank 0=node01 slot=0:0-6'";
  EXPECT_EQ(parse_error(""), expected);
  EXPECT_EQ(parse_error("# nothing yet\n\n  \t\n"), expected);
}

TEST(RankfileErrors, ErrorCarriesItsPosition) {
  try {
    parse_rankfile("rank 0=a\nrank 1=a slot=0:4-3\n", "job/ranks");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().source, "job/ranks");
    EXPECT_EQ(e.where().line, 2);
    EXPECT_EQ(e.where().column, 17);
    EXPECT_EQ(e.where().line_text, "rank 1=a slot=0:4-3");
    EXPECT_EQ(e.message(), "reversed range '4-3': write the lower number first ('3-4')");
  }
}

// --- files -----------------------------------------------------------------------------------

std::string temp_path(const std::string& name) {
  return testing::TempDir() + name;
}

TEST(RankfileRead, ReadsAFile) {
  const std::string path = temp_path("ddl_rankfile_test_read.txt");
  {
    std::ofstream out(path, std::ios::binary);
    out << "rank 1=node02 slot=0:0\nrank 0=node01 slot=0:0\n";
  }
  const Rankfile rf = read_rankfile(path);
  EXPECT_EQ(rf, (Rankfile{{entry(0, "node01", {socket_cores(0, {{0, 0}})}),
                           entry(1, "node02", {socket_cores(0, {{0, 0}})})}}));
  EXPECT_EQ(rf.entries[0].line, 2);
  std::remove(path.c_str());
}

TEST(RankfileRead, ErrorsNameTheFile) {
  const std::string path = temp_path("ddl_rankfile_test_bad.txt");
  {
    std::ofstream out(path, std::ios::binary);
    out << "rank 0=node01 slot=0:0\nrank 0=node02\n";
  }
  const std::string expected = path + ":2:6: rank 0 is already given at " + path +
                               ":1\n"
                               "  rank 0=node02\n"
                               "       ^";
  EXPECT_EQ(error_of([&] { read_rankfile(path); }), expected);
  std::remove(path.c_str());
}

TEST(RankfileRead, MissingFile) {
  const std::string path = temp_path("ddl_rankfile_test_does_not_exist.txt");
  try {
    read_rankfile(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.what(), path + ": cannot read rankfile: No such file or directory");
    EXPECT_EQ(e.where().source, path);
    EXPECT_EQ(e.where().line, 0);
  }
}

TEST(RankfileRead, Directory) {
  const std::string path = temp_path("ddl_rankfile_test_dir");
  ::mkdir(path.c_str(), 0700);
  EXPECT_EQ(error_of([&] { read_rankfile(path); }),
            path + ": cannot read rankfile: Is a directory");
  ::rmdir(path.c_str());
}

// --- writing ---------------------------------------------------------------------------------

TEST(RankfileWrite, FormatsSlots) {
  EXPECT_EQ(format_slots({socket_cores(1, {{0, 2}, {4, 4}})}), "1:0-2,4");
  EXPECT_EQ(format_slots({all_cores(1)}), "1:*");
  EXPECT_EQ(format_slots({logical({{0, 3}}), socket_cores(1, {{0, 0}})}), "0-3;1:0");
  EXPECT_EQ(format_slots({logical({{0, 3}, {8, 8}})}), "0-3,8");
  EXPECT_EQ(format_slots({}), "");
}

TEST(RankfileWrite, WritesCanonicalLines) {
  const Rankfile rf{{
      entry(0, "node01", {socket_cores(0, {{0, 6}})}),
      relative(1, 2, {all_cores(1)}),
      entry(2, "node03"),
      entry(3, "10.1.2.3", {logical({{0, 3}, {8, 8}}), socket_cores(1, {{2, 2}})}),
  }};
  EXPECT_EQ(write_rankfile(rf),
            "rank 0=node01 slot=0:0-6\n"
            "rank 1=+n2 slot=1:*\n"
            "rank 2=node03\n"
            "rank 3=10.1.2.3 slot=0-3,8;1:2\n");
  EXPECT_EQ(parse_rankfile(write_rankfile(rf), "written"), rf);
}

TEST(RankfileWrite, RoundTripsAParsedFile) {
  const std::string text =
      "# comment\n"
      "rank 1 = node01 slot = 0:0-0,3-4  # note\n"
      "rank 0=+n0 slot=0:*;1:*\n"
      "rank 2=node02\r\n";
  const Rankfile rf = parse_rankfile(text, "ranks.txt");
  EXPECT_EQ(write_rankfile(rf),
            "rank 0=+n0 slot=0:*;1:*\n"
            "rank 1=node01 slot=0:0,3-4\n"
            "rank 2=node02\n");
  EXPECT_EQ(parse_rankfile(write_rankfile(rf), "again"), rf);
}

/// A random valid rankfile with `ranks` entries.
Rankfile random_rankfile(std::mt19937& rng, int ranks) {
  static const std::vector<std::string> kHosts = {"node01", "node02",      "a",   "gpu-3.example",
                                                  "x_y",    "192.168.0.1", "N05", "h"};
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto cpu = [&] {
    // Mostly small numbers, now and then the extremes.
    const int kind = pick(0, 9);
    return kind == 0 ? 65535 : kind == 1 ? 0 : pick(0, 127);
  };
  Rankfile rf;
  for (int rank = 0; rank < ranks; ++rank) {
    RankfileEntry e;
    e.rank = rank;
    if (pick(0, 4) == 0) {
      e.relative_node = pick(0, 3) == 0 ? 1048575 : pick(0, 15);
    } else {
      e.host = kHosts[static_cast<size_t>(pick(0, static_cast<int>(kHosts.size()) - 1))];
    }
    const int groups = pick(0, 3);
    for (int g = 0; g < groups; ++g) {
      SlotSpec spec;
      if (pick(0, 2) != 0) spec.socket = pick(0, 3);
      if (spec.socket && pick(0, 3) == 0) {
        spec.all_cores = true;
      } else {
        const int n = pick(1, 4);
        for (int i = 0; i < n; ++i) {
          int a = cpu();
          int b = pick(0, 1) == 0 ? a : cpu();
          if (a > b) std::swap(a, b);
          spec.cpus.push_back({a, b});
        }
      }
      e.slots.push_back(std::move(spec));
    }
    rf.entries.push_back(std::move(e));
  }
  return rf;
}

/// `rf` as a user might write it: lines shuffled, random blanks, comments, blank lines, CRLF.
std::string noisy_text(std::mt19937& rng, const Rankfile& rf) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto blanks = [&](int min) {
    std::string s;
    const int n = pick(min, 2);
    for (int i = 0; i < n; ++i)
      s += pick(0, 1) ? ' ' : '\t';
    return s;
  };
  std::vector<std::string> lines;
  for (const RankfileEntry& e : rf.entries) {
    std::string line =
        blanks(0) + "rank" + blanks(1) + std::to_string(e.rank) + blanks(0) + "=" + blanks(0);
    line += e.relative_node ? "+n" + std::to_string(*e.relative_node) : e.host;
    if (!e.slots.empty()) {
      line += blanks(1) + "slot" + blanks(0) + "=" + blanks(0) + format_slots(e.slots);
    }
    line += blanks(0);
    if (pick(0, 3) == 0) line += "# rank " + std::to_string(e.rank) + " = x slot=";
    lines.push_back(std::move(line));
  }
  std::shuffle(lines.begin(), lines.end(), rng);
  std::string text;
  for (const std::string& line : lines) {
    if (pick(0, 5) == 0) text += "# comment\n";
    if (pick(0, 5) == 0) text += blanks(0) + "\n";
    text += line + (pick(0, 4) == 0 ? "\r\n" : "\n");
  }
  return text;
}

TEST(RankfileWrite, RoundTripsGeneratedRankfiles) {
  std::mt19937 rng(20240607);
  for (int iteration = 0; iteration < 500; ++iteration) {
    const int ranks = std::uniform_int_distribution<int>(1, 24)(rng);
    const Rankfile rf = random_rankfile(rng, ranks);
    const std::string canonical = write_rankfile(rf);
    SCOPED_TRACE(canonical);
    const Rankfile parsed = parse_rankfile(canonical, "generated");
    ASSERT_EQ(parsed, rf);
    ASSERT_EQ(write_rankfile(parsed), canonical);

    const std::string noisy = noisy_text(rng, rf);
    SCOPED_TRACE(noisy);
    const Rankfile from_noisy = parse_rankfile(noisy, "noisy");
    ASSERT_EQ(from_noisy, rf);
    ASSERT_EQ(write_rankfile(from_noisy), canonical);
  }
}

// --- hosts_of --------------------------------------------------------------------------------

TEST(RankfileHosts, CountsRanksPerHostInRankOrder) {
  const Rankfile rf = parse_rankfile(
      "rank 3=node02 slot=1:0\n"
      "rank 0=node01 slot=0:0\n"
      "rank 1=node02 slot=0:0\n"
      "rank 2=node01 slot=1:0\n"
      "rank 4=node03\n",
      "ranks.txt");
  const HostList hosts = hosts_of(rf);
  ASSERT_EQ(hosts.size(), 3u);
  const std::vector<Host> expected = {
      {"node01", 2, std::nullopt, true, SourceKind::kRankfile, "rankfile:2"},
      {"node02", 2, std::nullopt, true, SourceKind::kRankfile, "rankfile:3"},
      {"node03", 1, std::nullopt, true, SourceKind::kRankfile, "rankfile:5"},
  };
  EXPECT_EQ(hosts.hosts(), expected);
  EXPECT_EQ(hosts.total_slots(), 5);
}

TEST(RankfileHosts, NamesTheSourceWhenGiven) {
  const Rankfile rf = parse_rankfile("rank 0=node01\nrank 1=node01\n", "job/ranks.txt");
  const HostList hosts = hosts_of(rf, nullptr, "job/ranks.txt");
  const std::vector<Host> expected = {
      {"node01", 2, std::nullopt, true, SourceKind::kRankfile, "job/ranks.txt:1"},
  };
  EXPECT_EQ(hosts.hosts(), expected);
}

TEST(RankfileHosts, ResolvesRelativeNodes) {
  const Rankfile rf = parse_rankfile(
      "rank 0=+n1 slot=0:0\n"
      "rank 1=+n0 slot=0:0\n"
      "rank 2=b07n01 slot=0:1\n"
      "rank 3=A26N15 slot=0:1\n",
      "ranks.txt");
  const HostList allocation = allocation_of({"a26n15", "b07n01", "c01n01"});
  const HostList hosts = hosts_of(rf, &allocation);
  // "A26N15" is "+n0" spelled in another case: one host, named as first seen.
  const std::vector<Host> expected = {
      {"b07n01", 2, std::nullopt, true, SourceKind::kRankfile, "rankfile:1"},
      {"a26n15", 2, std::nullopt, true, SourceKind::kRankfile, "rankfile:2"},
  };
  EXPECT_EQ(hosts.hosts(), expected);
}

TEST(RankfileHosts, RelativeNodeBeyondTheAllocation) {
  const Rankfile rf = parse_rankfile("rank 0=+n0\n\nrank 1=+n5 slot=0:0\n", "ranks.txt");
  const HostList allocation = allocation_of({"a26n15", "b07n01"});
  EXPECT_EQ(error_of([&] { hosts_of(rf, &allocation); }),
            "rankfile:3: relative node '+n5' needs at least 6 hosts in the allocation, but it "
            "has 2: use '+n0' to '+n1' or name the host");
  EXPECT_EQ(error_of([&] { hosts_of(rf, &allocation, "ranks.txt"); }),
            "ranks.txt:3: relative node '+n5' needs at least 6 hosts in the allocation, but it "
            "has 2: use '+n0' to '+n1' or name the host");
}

TEST(RankfileHosts, RelativeNodeWithoutAnAllocation) {
  const Rankfile rf = parse_rankfile("rank 0=node01\nrank 1=+n0\n", "ranks.txt");
  EXPECT_EQ(error_of([&] { hosts_of(rf); }),
            "rankfile:2: relative node '+n0' needs a batch allocation, but there is none: name "
            "the host instead, or run inside an LSF or Slurm job");
  const HostList empty;
  EXPECT_EQ(error_of([&] { hosts_of(rf, &empty, "ranks.txt"); }),
            "ranks.txt:2: relative node '+n0' needs at least 1 host in the allocation, but it "
            "has 0: name the host");
}

}  // namespace
}  // namespace ddl::hostfiles
