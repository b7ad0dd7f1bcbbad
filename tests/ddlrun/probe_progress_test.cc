#include "ddlrun/plan/probe_progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace ddl::ddlrun {
namespace {

using namespace std::chrono_literals;

TEST(ProbeProgressTest, TheLineNamesTheHostsWaitedFor) {
  EXPECT_EQ(ProbeProgress::line({"node3", "node17"}, 40, 10),
            "ddlrun: still probing after 10 s: 2 of 40 hosts have not answered: node3, node17");
  EXPECT_EQ(ProbeProgress::line({"frozen"}, 1, 5),
            "ddlrun: still probing after 5 s: 1 of 1 host has not answered: frozen");
  std::vector<std::string> many;
  for (int i = 0; i < 11; ++i)
    many.push_back("n" + std::to_string(i));
  EXPECT_EQ(ProbeProgress::line(many, 100, 15),
            "ddlrun: still probing after 15 s: 11 of 100 hosts have not answered: n0, n1, n2, n3, "
            "n4, n5, n6, n7, and 3 more");
  EXPECT_EQ(ProbeProgress::line({"a\x1b[2Jb"}, 1, 5),
            "ddlrun: still probing after 5 s: 1 of 1 host has not answered: a\\x1b[2Jb");
}

// Every period a line names the hosts that have not answered, in the order given; none once
// every host answered.
TEST(ProbeProgressTest, SaysWhatItWaitsForUntilEveryHostAnswered) {
  std::mutex mutex;
  std::vector<std::string> lines;
  {
    ProbeProgress progress({"a", "b", "c", "b"}, 1s, [&](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    });
    progress.settled("b");
    std::this_thread::sleep_for(1500ms);
    progress.settled("a");
    std::this_thread::sleep_for(1000ms);
    progress.settled("c");
    std::this_thread::sleep_for(1500ms);
  }
  std::lock_guard lock(mutex);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "ddlrun: still probing after 1 s: 2 of 3 hosts have not answered: a, c");
  EXPECT_EQ(lines[1], "ddlrun: still probing after 2 s: 1 of 3 hosts have not answered: c");
}

TEST(ProbeProgressTest, QuietWhenEveryHostAnswersInTime) {
  int said = 0;
  {
    ProbeProgress progress({"a"}, 100ms, [&](const std::string&) { ++said; });
    progress.settled("a");
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(said, 0);
}

}  // namespace
}  // namespace ddl::ddlrun
