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

std::string tasks_error(const std::string& value) {
  return error_of([&] { parse_slurm_tasks_per_node(value); });
}

Host slurm_host(std::string name, int slots) {
  return Host{std::move(name),      slots, std::nullopt, true, SourceKind::kSlurm,
              "$SLURM_JOB_NODELIST"};
}

// $SLURM_TASKS_PER_NODE

TEST(SlurmTasksPerNodeTest, CountsAndRepeats) {
  EXPECT_THAT(parse_slurm_tasks_per_node("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(parse_slurm_tasks_per_node("4"), ElementsAre(4));
  EXPECT_THAT(parse_slurm_tasks_per_node("1,3(x1),2(x2)"), ElementsAre(1, 3, 2, 2));
  EXPECT_EQ(parse_slurm_tasks_per_node("6(x1000)").size(), 1000u);
}

TEST(SlurmTasksPerNodeTest, Empty) {
  EXPECT_EQ(tasks_error(""),
            "$SLURM_TASKS_PER_NODE:1:1: empty value: expected task counts such as '2(x3),1'");
  EXPECT_EQ(tasks_error("2,,1"),
            "$SLURM_TASKS_PER_NODE:1:3: empty task count: remove the extra ','\n"
            "  2,,1\n"
            "    ^");
  EXPECT_EQ(tasks_error("2,"),
            "$SLURM_TASKS_PER_NODE:1:3: empty task count: remove the extra ','\n"
            "  2,\n"
            "    ^");
}

TEST(SlurmTasksPerNodeTest, BadCounts) {
  EXPECT_EQ(tasks_error("2(x3),two"),
            "$SLURM_TASKS_PER_NODE:1:7: invalid task count 'two': write a whole number such as "
            "4\n"
            "  2(x3),two\n"
            "        ^~~");
  EXPECT_EQ(tasks_error("0"),
            "$SLURM_TASKS_PER_NODE:1:1: task count must be at least 1: check the job's task "
            "layout\n"
            "  0\n"
            "  ^");
  EXPECT_EQ(tasks_error("(x3)"),
            "$SLURM_TASKS_PER_NODE:1:1: missing task count: write a whole number such as 4\n"
            "  (x3)\n"
            "  ^");
  EXPECT_EQ(tasks_error("99999999999(x2)"),
            "$SLURM_TASKS_PER_NODE:1:1: task count '99999999999' is too large: use at most "
            "1048576\n"
            "  99999999999(x2)\n"
            "  ^~~~~~~~~~~");
}

TEST(SlurmTasksPerNodeTest, BadRepeats) {
  EXPECT_EQ(tasks_error("2(x3"),
            "$SLURM_TASKS_PER_NODE:1:2: unclosed '(' in '2(x3': write counts such as '2(x3)'\n"
            "  2(x3\n"
            "   ^~~");
  EXPECT_EQ(tasks_error("2(3)"),
            "$SLURM_TASKS_PER_NODE:1:3: expected 'x' after '(' in '2(3)': write counts such as "
            "'2(x3)'\n"
            "  2(3)\n"
            "    ^");
  EXPECT_EQ(tasks_error("2(x)"),
            "$SLURM_TASKS_PER_NODE:1:4: missing repeat count: write a whole number such as 4\n"
            "  2(x)\n"
            "     ^");
  EXPECT_EQ(tasks_error("2(x0)"),
            "$SLURM_TASKS_PER_NODE:1:4: repeat count must be at least 1: write counts such as "
            "'2(x3)'\n"
            "  2(x0)\n"
            "     ^");
  EXPECT_EQ(tasks_error("2(x-1)"),
            "$SLURM_TASKS_PER_NODE:1:4: repeat count '-1' is negative: write a whole number of "
            "at least 1\n"
            "  2(x-1)\n"
            "     ^~");
}

TEST(SlurmTasksPerNodeTest, AtMostAMillionNodes) {
  EXPECT_EQ(parse_slurm_tasks_per_node("1(x1000000)").size(), 1000000u);
  EXPECT_EQ(tasks_error("1(x1000000),1"),
            "$SLURM_TASKS_PER_NODE:1:13: more than 1000000 task counts: check the value\n"
            "  1(x1000000),1\n"
            "              ^");
}

// $SLURM_JOB_NODELIST with $SLURM_TASKS_PER_NODE

TEST(SlurmTest, NodesGetTheirTaskCounts) {
  const HostList list = parse_slurm("node[01-03],gpu7", "2(x3),1");
  EXPECT_EQ(list.hosts(), (std::vector<Host>{slurm_host("node01", 2), slurm_host("node02", 2),
                                             slurm_host("node03", 2), slurm_host("gpu7", 1)}));
  EXPECT_EQ(list.total_slots(), 7);
}

TEST(SlurmTest, CountMismatchNamesBothNumbers) {
  EXPECT_EQ(error_of([] { parse_slurm("n[1-4]", "2(x3)"); }),
            "$SLURM_TASKS_PER_NODE:1:1: 3 task counts but 4 nodes in $SLURM_JOB_NODELIST: both "
            "variables must come from the same job\n"
            "  2(x3)\n"
            "  ^~~~~");
  EXPECT_EQ(error_of([] { parse_slurm("n1", "1,1"); }),
            "$SLURM_TASKS_PER_NODE:1:1: 2 task counts but 1 node in $SLURM_JOB_NODELIST: both "
            "variables must come from the same job\n"
            "  1,1\n"
            "  ^~~");
}

TEST(SlurmTest, NodelistErrorsPointIntoTheVariable) {
  EXPECT_EQ(error_of([] { parse_slurm("a,node[7-3]", "1(x6)"); }),
            "$SLURM_JOB_NODELIST:1:8: range '7-3' counts down from 7 to 3: write 'node[3-7]'\n"
            "  a,node[7-3]\n"
            "         ^~~");
  EXPECT_EQ(error_of([] { parse_slurm("", "1"); }),
            "$SLURM_JOB_NODELIST:1:1: empty host list: name at least one host");
}

TEST(SlurmTest, NodeListedTwice) {
  EXPECT_EQ(error_of([] { parse_slurm("n[1-2],n1", "1(x3)"); }),
            "$SLURM_JOB_NODELIST:1: host 'n1' is already listed at $SLURM_JOB_NODELIST: list "
            "each host once, with all its slots");
}

}  // namespace
}  // namespace ddl::hostfiles
