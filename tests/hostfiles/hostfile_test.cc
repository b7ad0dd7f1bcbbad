#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "hostfiles/host_list.h"
#include "tests/hostfiles/test_util.h"

namespace ddl::hostfiles {
namespace {

using test::describe;
using test::error_of;

using ::testing::ElementsAre;

std::vector<std::string> parse(const std::string& text) {
  return describe(parse_hostfile(text, "hosts.txt"));
}

std::string hostfile_error(const std::string& text) {
  return error_of([&] { parse_hostfile(text, "hosts.txt"); });
}

/// Writes `text` to a fresh file under the test temp dir and returns its path.
std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Formats.

TEST(HostfileTest, OpenMpi) {
  EXPECT_THAT(parse("node1 slots=4 max_slots=8\nnode2 slots=2\nnode3\n"),
              ElementsAre("node1 slots=4 max=8 given openmpi-hostfile hosts.txt:1",
                          "node2 slots=2 given openmpi-hostfile hosts.txt:2",
                          "node3 slots=1 counted openmpi-hostfile hosts.txt:3"));
}

TEST(HostfileTest, OpenMpiMaxSlotsSpellings) {
  EXPECT_THAT(parse("a slots=2 max-slots=6\nb max_slots=3 slots=3\n"),
              ElementsAre("a slots=2 max=6 given openmpi-hostfile hosts.txt:1",
                          "b slots=3 max=3 given openmpi-hostfile hosts.txt:2"));
}

TEST(HostfileTest, OpenMpiMaxSlotsAloneSetsTheSlots) {
  EXPECT_THAT(parse("a max_slots=6\n"),
              ElementsAre("a slots=6 max=6 given openmpi-hostfile hosts.txt:1"));
}

TEST(HostfileTest, Mpich) {
  EXPECT_THAT(parse("node1:4\nnode2:2\nnode3\n"),
              ElementsAre("node1 slots=4 given mpich-hostfile hosts.txt:1",
                          "node2 slots=2 given mpich-hostfile hosts.txt:2",
                          "node3 slots=1 counted mpich-hostfile hosts.txt:3"));
}

TEST(HostfileTest, PlainRepeatsAddSlots) {
  EXPECT_THAT(parse("node1\nnode2\nnode1\nNODE1\n"),
              ElementsAre("node1 slots=3 counted plain-hostfile hosts.txt:1",
                          "node2 slots=1 counted plain-hostfile hosts.txt:2"));
}

TEST(HostfileTest, KindIsOpenMpiWhenAnyLineUsesKeys) {
  EXPECT_THAT(parse("a:2\nb\nc slots=3\n"),
              ElementsAre("a slots=2 given openmpi-hostfile hosts.txt:1",
                          "b slots=1 counted openmpi-hostfile hosts.txt:2",
                          "c slots=3 given openmpi-hostfile hosts.txt:3"));
}

TEST(HostfileTest, KindIsMpichWhenAnyLineHasACount) {
  EXPECT_THAT(parse("a\nb:2\n"), ElementsAre("a slots=1 counted mpich-hostfile hosts.txt:1",
                                             "b slots=2 given mpich-hostfile hosts.txt:2"));
}

TEST(HostfileTest, CommentsBlankLinesAndWhitespace) {
  const std::string text =
      "# cluster A\n"
      "\n"
      "   \t \n"
      "  node1 slots=2   # the fast one\n"
      "\tnode2\tslots=4\t\n"
      "node3#no space before the comment\n"
      "#node4 slots=9\n";
  EXPECT_THAT(parse(text), ElementsAre("node1 slots=2 given openmpi-hostfile hosts.txt:4",
                                       "node2 slots=4 given openmpi-hostfile hosts.txt:5",
                                       "node3 slots=1 counted openmpi-hostfile hosts.txt:6"));
}

TEST(HostfileTest, WindowsLineEndingsAndNoFinalNewline) {
  EXPECT_THAT(parse("a slots=2\r\nb:3\r\nc"),
              ElementsAre("a slots=2 given openmpi-hostfile hosts.txt:1",
                          "b slots=3 given openmpi-hostfile hosts.txt:2",
                          "c slots=1 counted openmpi-hostfile hosts.txt:3"));
}

TEST(HostfileTest, RangesAndAddresses) {
  EXPECT_THAT(parse("gpu[01-02] slots=6\n[fe80::1]:2\n10.1.2.3\n"),
              ElementsAre("gpu01 slots=6 given openmpi-hostfile hosts.txt:1",
                          "gpu02 slots=6 given openmpi-hostfile hosts.txt:1",
                          "fe80::1 slots=2 given openmpi-hostfile hosts.txt:2",
                          "10.1.2.3 slots=1 counted openmpi-hostfile hosts.txt:3"));
  EXPECT_THAT(parse("[fe80::2] slots=3\n"),
              ElementsAre("fe80::2 slots=3 given openmpi-hostfile hosts.txt:1"));
}

// Errors.

TEST(HostfileTest, UnknownKeyWithSuggestion) {
  EXPECT_EQ(hostfile_error("node0\nnode1\nnode1 slot=4\n"),
            "hosts.txt:3:7: unknown key 'slot' (did you mean 'slots'?)\n"
            "  node1 slot=4\n"
            "        ^~~~");
  EXPECT_EQ(hostfile_error("n max_slot=4\n"),
            "hosts.txt:1:3: unknown key 'max_slot' (did you mean 'max_slots'?)\n"
            "  n max_slot=4\n"
            "    ^~~~~~~~");
}

TEST(HostfileTest, UnknownKeyWithoutSuggestion) {
  EXPECT_EQ(hostfile_error("n user=bob\n"),
            "hosts.txt:1:3: unknown key 'user': use slots=N or max_slots=N\n"
            "  n user=bob\n"
            "    ^~~~");
}

TEST(HostfileTest, MissingKey) {
  EXPECT_EQ(hostfile_error("n =4\n"),
            "hosts.txt:1:3: missing key before '=4': write slots=N or max_slots=N\n"
            "  n =4\n"
            "    ^~");
}

TEST(HostfileTest, WordsThatAreNotKeys) {
  EXPECT_EQ(hostfile_error("n 4\n"),
            "hosts.txt:1:3: unexpected '4' after the host name (did you mean 'slots=4'?)\n"
            "  n 4\n"
            "    ^");
  EXPECT_EQ(hostfile_error("n slots = 4\n"),
            "hosts.txt:1:3: 'slots' needs a value: write 'slots=4' with no spaces\n"
            "  n slots = 4\n"
            "    ^~~~~");
  EXPECT_EQ(hostfile_error("n1 n2\n"),
            "hosts.txt:1:4: unexpected 'n2' after the host name: give one host per line, then "
            "slots=N or max_slots=N\n"
            "  n1 n2\n"
            "     ^~");
}

TEST(HostfileTest, LineWithoutHost) {
  EXPECT_EQ(hostfile_error("  slots=4\n"),
            "hosts.txt:1:3: missing host name before 'slots=4': start the line with the host\n"
            "    slots=4\n"
            "    ^~~~~~~");
}

TEST(HostfileTest, BadNumbers) {
  EXPECT_EQ(hostfile_error("n slots=four\n"),
            "hosts.txt:1:9: invalid slot count 'four': write a whole number such as 4\n"
            "  n slots=four\n"
            "          ^~~~");
  EXPECT_EQ(hostfile_error("n slots=4x\n"),
            "hosts.txt:1:9: invalid slot count '4x': write a whole number such as 4\n"
            "  n slots=4x\n"
            "          ^~");
  EXPECT_EQ(hostfile_error("n slots=-4\n"),
            "hosts.txt:1:9: slot count '-4' is negative: write a whole number of at least 1\n"
            "  n slots=-4\n"
            "          ^~");
  EXPECT_EQ(hostfile_error("n slots=\n"),
            "hosts.txt:1:9: missing slot count: write a whole number such as 4\n"
            "  n slots=\n"
            "          ^");
  EXPECT_EQ(hostfile_error("n:x\n"),
            "hosts.txt:1:3: invalid slot count 'x': write a whole number such as 4\n"
            "  n:x\n"
            "    ^");
  EXPECT_EQ(hostfile_error("n slots=4 max_slots=lots\n"),
            "hosts.txt:1:21: invalid max_slots 'lots': write a whole number such as 4\n"
            "  n slots=4 max_slots=lots\n"
            "                      ^~~~");
}

TEST(HostfileTest, NumbersTooLarge) {
  EXPECT_EQ(hostfile_error("n slots=18446744073709551617\n"),
            "hosts.txt:1:9: slot count '18446744073709551617' is too large: use at most 1048576\n"
            "  n slots=18446744073709551617\n"
            "          ^~~~~~~~~~~~~~~~~~~~");
  EXPECT_EQ(hostfile_error("n slots=2000000\n"),
            "hosts.txt:1:9: slot count '2000000' is too large: use at most 1048576\n"
            "  n slots=2000000\n"
            "          ^~~~~~~");
  EXPECT_EQ(hostfile_error("n:1048577\n"),
            "hosts.txt:1:3: slot count '1048577' is too large: use at most 1048576\n"
            "  n:1048577\n"
            "    ^~~~~~~");
}

TEST(HostfileTest, ZeroSlots) {
  EXPECT_EQ(hostfile_error("n slots=0\n"),
            "hosts.txt:1:9: slot count must be at least 1: leave the host out to give it no "
            "ranks\n"
            "  n slots=0\n"
            "          ^");
  EXPECT_EQ(hostfile_error("n max_slots=0\n"),
            "hosts.txt:1:13: max_slots must be at least 1: leave the host out to give it no "
            "ranks\n"
            "  n max_slots=0\n"
            "              ^");
}

TEST(HostfileTest, MaxSlotsBelowSlots) {
  EXPECT_EQ(hostfile_error("n slots=4 max_slots=2\n"),
            "hosts.txt:1:21: max_slots 2 is less than slots 4: raise max_slots or lower slots\n"
            "  n slots=4 max_slots=2\n"
            "                      ^");
  EXPECT_EQ(hostfile_error("n:8 max-slots=2\n"),
            "hosts.txt:1:15: max_slots 2 is less than slots 8: raise max_slots or lower slots\n"
            "  n:8 max-slots=2\n"
            "                ^");
}

TEST(HostfileTest, CountTwiceOnOneLine) {
  EXPECT_EQ(hostfile_error("n:4 slots=4\n"),
            "hosts.txt:1:5: both ':4' and 'slots=' give a slot count: keep one\n"
            "  n:4 slots=4\n"
            "      ^~~~~~~");
  EXPECT_EQ(hostfile_error("n slots=4 slots=2\n"),
            "hosts.txt:1:11: 'slots' is given twice: keep one\n"
            "  n slots=4 slots=2\n"
            "            ^~~~~~~");
  EXPECT_EQ(hostfile_error("n max_slots=4 max-slots=5\n"),
            "hosts.txt:1:15: 'max_slots' is given twice: keep one\n"
            "  n max_slots=4 max-slots=5\n"
            "                ^~~~~~~~~~~");
}

TEST(HostfileTest, DuplicateWithCountsNamesTheFirstLine) {
  EXPECT_EQ(hostfile_error("n1 slots=4\nn2\nn1 slots=4\n"),
            "hosts.txt:3:1: host 'n1' is already listed at hosts.txt:1: list each host once, "
            "with all its slots\n"
            "  n1 slots=4\n"
            "  ^");
  EXPECT_EQ(hostfile_error("n1\n  N1:2\n"),
            "hosts.txt:2:3: host 'N1' is already listed at hosts.txt:1 (as 'n1'): list each "
            "host once, with all its slots\n"
            "    N1:2\n"
            "    ^");
}

TEST(HostfileTest, ControlBytesInHostNamesAreRefusedAndNeverEchoedRaw) {
  // An escape sequence that would clear the screen, and one that would set the window title.
  EXPECT_EQ(hostfile_error("a\n\x1b[2Jnode1 slots=2\n"),
            "hosts.txt:2:1: invalid character '\\x1b' in host name '\\x1b[2Jnode1': use "
            "letters, digits, '-', '.' and '_'\n"
            "  \\x1b[2Jnode1 slots=2\n"
            "  ^~~~");
  EXPECT_EQ(hostfile_error("node\x1b]0;x\x07 slots=1\n"),
            "hosts.txt:1:5: invalid character '\\x1b' in host name 'node\\x1b]0;x\\x07': use "
            "letters, digits, '-', '.' and '_'\n"
            "  node\\x1b]0;x\\x07 slots=1\n"
            "      ^~~~");
  // UTF-8 C1 control (U+009B, a one-character CSI): both bytes escaped.
  EXPECT_EQ(hostfile_error("n\xc2\x9b"
                           "2J\n"),
            "hosts.txt:1:2: invalid character '\\xc2' in host name 'n\\xc2\\x9b2J': use "
            "letters, digits, '-', '.' and '_'\n"
            "  n\\xc2\\x9b2J\n"
            "   ^~~~");
}

TEST(HostfileTest, BytesOutsideUtf8InHostNamesAreEscaped) {
  EXPECT_EQ(hostfile_error("node\xff\n"),
            "hosts.txt:1:5: invalid character '\\xff' in host name 'node\\xff': use letters, "
            "digits, '-', '.' and '_'\n"
            "  node\\xff\n"
            "      ^~~~");
}

TEST(HostfileTest, AtMostAMillionHosts) {
  std::string text;
  text.reserve(12'000'012);
  char line[16];
  for (int i = 0; i <= 1'000'000; ++i) {
    std::snprintf(line, sizeof line, "n%07d\n", i);
    text += line;
  }
  EXPECT_EQ(hostfile_error(text),
            "hosts.txt:1000001:1: more than 1000000 hosts, the most a host list may hold (as its "
            "ranges do): list fewer hosts\n"
            "  n1000000\n"
            "  ^");
}

TEST(HostfileTest, InvalidHostNames) {
  EXPECT_EQ(hostfile_error("a/b slots=2\n"),
            "hosts.txt:1:2: invalid character '/' in host name 'a/b': use letters, digits, "
            "'-', '.' and '_'\n"
            "  a/b slots=2\n"
            "   ^");
  EXPECT_EQ(hostfile_error("user@node1\n"),
            "hosts.txt:1:5: invalid character '@' in host name 'user@node1': give the user "
            "name in ~/.ssh/config instead\n"
            "  user@node1\n"
            "      ^");
  EXPECT_EQ(hostfile_error("fe80::1 slots=2\n"),
            "hosts.txt:1:1: IPv6 address 'fe80::1' needs brackets: write '[fe80::1]'\n"
            "  fe80::1 slots=2\n"
            "  ^~~~~~~");
}

TEST(HostfileTest, TabsAreKeptUnderTheCaret) {
  EXPECT_EQ(hostfile_error("\tn\tslot=2\n"),
            "hosts.txt:1:4: unknown key 'slot' (did you mean 'slots'?)\n"
            "  \tn\tslot=2\n"
            "  \t \t^~~~");
}

TEST(HostfileTest, RangeErrorsPointIntoTheLine) {
  EXPECT_EQ(hostfile_error("ok\n  node[5-2] slots=2\n"),
            "hosts.txt:2:8: range '5-2' counts down from 5 to 2: write 'node[2-5]'\n"
            "    node[5-2] slots=2\n"
            "         ^~~");
}

TEST(HostfileTest, NoHosts) {
  EXPECT_EQ(hostfile_error(""),
            "hosts.txt: no hosts in hostfile: list one host per line, such as 'node1 slots=4'");
  EXPECT_EQ(hostfile_error("# nothing yet\n\n   \n"),
            "hosts.txt: no hosts in hostfile: list one host per line, such as 'node1 slots=4'");
}

TEST(HostfileTest, RoundTripAsOpenMpi) {
  const HostList first = parse_hostfile("a:2\nb slots=3 max_slots=5\nc\nc\n", "one.txt");
  std::string text;
  for (const Host& h : first.hosts()) {
    text += h.name + " slots=" + std::to_string(h.slots);
    if (h.max_slots) text += " max_slots=" + std::to_string(*h.max_slots);
    text += "\n";
  }
  EXPECT_EQ(text, "a slots=2\nb slots=3 max_slots=5\nc slots=2\n");
  const HostList second = parse_hostfile(text, "two.txt");
  ASSERT_EQ(second.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(second.hosts()[i].name, first.hosts()[i].name);
    EXPECT_EQ(second.hosts()[i].slots, first.hosts()[i].slots);
    EXPECT_EQ(second.hosts()[i].max_slots, first.hosts()[i].max_slots);
  }
}

// Reading files.

TEST(ReadHostfileTest, ReadsAndNamesOriginsByPath) {
  const std::string path =
      temp_file("read_hostfile_ok.txt", "# two nodes\nn1 slots=6\nn2 slots=6\n");
  const HostList list = read_hostfile(path);
  EXPECT_EQ(list.hosts(),
            (std::vector<Host>{
                {"n1", 6, std::nullopt, true, SourceKind::kOpenMpiHostfile, path + ":2"},
                {"n2", 6, std::nullopt, true, SourceKind::kOpenMpiHostfile, path + ":3"}}));
  std::remove(path.c_str());
}

TEST(ReadHostfileTest, ErrorsNameThePath) {
  const std::string path = temp_file("read_hostfile_bad.txt", "n1 slots=4\nn2 slot=4\n");
  try {
    read_hostfile(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().source, path);
    EXPECT_EQ(std::string(e.what()), path +
                                         ":2:4: unknown key 'slot' (did you mean 'slots'?)\n"
                                         "  n2 slot=4\n"
                                         "     ^~~~");
  }
  std::remove(path.c_str());
}

TEST(ReadHostfileTest, MissingFile) {
  const std::string path = testing::TempDir() + "no_such_hostfile.txt";
  try {
    read_hostfile(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot read hostfile: No such file or directory");
    EXPECT_EQ(e.where().source, path);
    EXPECT_EQ(e.where().line, 0);
  }
}

TEST(ReadHostfileTest, DirectoryIsNotAHostfile) {
  const std::string path = testing::TempDir();
  EXPECT_EQ(error_of([&] { read_hostfile(path); }),
            path + ": cannot read hostfile: Is a directory");
}

TEST(ReadHostfileTest, EndlessFileIsTooLarge) {
  EXPECT_EQ(error_of([&] { read_hostfile("/dev/zero"); }),
            "/dev/zero: cannot read hostfile: File too large");
}

}  // namespace
}  // namespace ddl::hostfiles
