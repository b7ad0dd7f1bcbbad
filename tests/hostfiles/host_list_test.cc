#include "hostfiles/host_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tests/hostfiles/test_util.h"

namespace ddl::hostfiles {
namespace {

using test::describe;
using test::error_of;

using ::testing::ElementsAre;

Host bare(std::string name, std::string origin = "-H") {
  return Host{std::move(name), 1, std::nullopt, false, SourceKind::kHostsOption, std::move(origin)};
}

Host counted(std::string name, int slots, std::string origin) {
  return Host{std::move(name),  slots, std::nullopt, true, SourceKind::kOpenMpiHostfile,
              std::move(origin)};
}

const Position kSecond{"hosts.txt", 2, 1, "n1 slots=2"};

TEST(SourceKindTest, Names) {
  EXPECT_EQ(to_string(SourceKind::kDefault), "default");
  EXPECT_EQ(to_string(SourceKind::kHostsOption), "-H");
  EXPECT_EQ(to_string(SourceKind::kOpenMpiHostfile), "openmpi-hostfile");
  EXPECT_EQ(to_string(SourceKind::kMpichHostfile), "mpich-hostfile");
  EXPECT_EQ(to_string(SourceKind::kPlainHostfile), "plain-hostfile");
  EXPECT_EQ(to_string(SourceKind::kLsfHostfile), "lsf-hostfile");
  EXPECT_EQ(to_string(SourceKind::kLsfMcpuHosts), "lsf-mcpu-hosts");
  EXPECT_EQ(to_string(SourceKind::kSlurm), "slurm");
  EXPECT_EQ(to_string(SourceKind::kRankfile), "rankfile");
}

TEST(HostListTest, KeepsFirstNamedOrder) {
  HostList list;
  list.add(bare("b"), kSecond);
  list.add(bare("a"), kSecond);
  list.add(bare("c"), kSecond);
  EXPECT_THAT(describe(list), ElementsAre("b slots=1 counted -H -H", "a slots=1 counted -H -H",
                                          "c slots=1 counted -H -H"));
  EXPECT_EQ(list.size(), 3u);
  EXPECT_FALSE(list.empty());
  EXPECT_TRUE(HostList().empty());
}

TEST(HostListTest, BareRepeatsAddUpIgnoringCase) {
  HostList list;
  list.add(bare("Node1"), kSecond);
  list.add(bare("b"), kSecond);
  list.add(bare("node1"), kSecond);
  list.add(bare("NODE1"), kSecond);
  EXPECT_THAT(describe(list),
              ElementsAre("Node1 slots=3 counted -H -H", "b slots=1 counted -H -H"));
  EXPECT_EQ(list.total_slots(), 4);
}

TEST(HostListTest, RepeatWithACountIsAConflictNamingTheFirstOrigin) {
  HostList list;
  list.add(counted("n1", 4, "hosts.txt:1"), kSecond);
  EXPECT_EQ(error_of([&] { list.add(counted("n1", 2, "hosts.txt:2"), kSecond); }),
            "hosts.txt:2:1: host 'n1' is already listed at hosts.txt:1: list each host once, "
            "with all its slots\n"
            "  n1 slots=2\n"
            "  ^");
  EXPECT_EQ(error_of([&] { list.add(bare("n1"), kSecond); }),
            "hosts.txt:2:1: host 'n1' is already listed at hosts.txt:1: list each host once, "
            "with all its slots\n"
            "  n1 slots=2\n"
            "  ^");
  EXPECT_THAT(describe(list), ElementsAre("n1 slots=4 given openmpi-hostfile hosts.txt:1"));
}

TEST(HostListTest, CountAfterABareNameIsAConflictShowingBothSpellings) {
  HostList list;
  list.add(bare("node1"), kSecond);
  EXPECT_EQ(error_of([&] {
              list.add(counted("NODE1", 2, "-H"), Position{"-H", 1, 7, "node1,NODE1:2"});
            }),
            "-H:1:7: host 'NODE1' is already listed at -H (as 'node1'): list each host once, "
            "with all its slots\n"
            "  node1,NODE1:2\n"
            "        ^");
}

TEST(HostListTest, ConflictWithoutOriginOrLine) {
  HostList list;
  list.add(Host{"a", 2, std::nullopt, true, SourceKind::kDefault, ""}, kSecond);
  EXPECT_EQ(error_of([&] {
              list.add(Host{"a", 2, std::nullopt, true, SourceKind::kDefault, ""},
                       Position{"-H", 0, 0, {}});
            }),
            "-H: host 'a' is already listed: list each host once, with all its slots");
}

TEST(HostListTest, MaxSlotsCountsAsAGivenCount) {
  HostList list;
  list.add(Host{"a", 1, 4, false, SourceKind::kOpenMpiHostfile, "h:1"}, kSecond);
  EXPECT_EQ(error_of([&] {
              list.add(bare("a"), Position{"h", 2, 0, {}});
            }),
            "h:2: host 'a' is already listed at h:1: list each host once, with all its slots");
}

TEST(HostListTest, MergedSlotsHaveALimit) {
  HostList list;
  list.add(Host{"a", 1048575, std::nullopt, false, SourceKind::kHostsOption, "-H"}, kSecond);
  list.add(bare("a"), kSecond);
  EXPECT_EQ(list.find("a")->slots, 1048576);
  EXPECT_EQ(error_of([&] {
              list.add(bare("a"), Position{"-H", 1, 0, {}});
            }),
            "-H:1: host 'a' has more than 1048576 slots: list it fewer times");
}

TEST(HostListTest, TotalSlotsSaturates) {
  HostList list;
  for (int i = 0; i < 3000; ++i) {
    list.add(Host{"n" + std::to_string(i), 1048576, std::nullopt, true, SourceKind::kSlurm, "s"},
             kSecond);
  }
  EXPECT_EQ(list.total_slots(), INT_MAX);
  EXPECT_EQ(HostList().total_slots(), 0);
}

TEST(HostListTest, FindIgnoresCase) {
  HostList list;
  list.add(counted("Node7", 6, "hosts.txt:4"), kSecond);
  ASSERT_NE(list.find("node7"), nullptr);
  EXPECT_EQ(describe(*list.find("NODE7")), "Node7 slots=6 given openmpi-hostfile hosts.txt:4");
  EXPECT_EQ(list.find("node"), nullptr);
  EXPECT_EQ(list.find(""), nullptr);
}

TEST(HostListTest, CopiesKeepTheirOwnIndex) {
  HostList list;
  list.add(bare("a"), kSecond);
  HostList copy = list;
  copy.add(bare("a"), kSecond);
  copy.add(bare("b"), kSecond);
  EXPECT_EQ(list.total_slots(), 1);
  EXPECT_EQ(list.find("b"), nullptr);
  EXPECT_EQ(copy.find("a")->slots, 2);
  EXPECT_EQ(copy.find("b")->name, "b");
}

TEST(LaunchNodeTest, BatchAndLoginNodes) {
  EXPECT_TRUE(is_launch_node_name("batch1"));
  EXPECT_TRUE(is_launch_node_name("batch"));
  EXPECT_TRUE(is_launch_node_name("login2"));
  EXPECT_TRUE(is_launch_node_name("Batch3"));
  EXPECT_FALSE(is_launch_node_name("a26n15"));
  EXPECT_FALSE(is_launch_node_name("bat"));
  EXPECT_FALSE(is_launch_node_name("node-login1"));
  EXPECT_FALSE(is_launch_node_name(""));
}

// allocation_from_environment, with a fake environment.

using Env = std::map<std::string, std::string>;

std::optional<std::string> fake_getenv(const char* name, void* context) {
  const Env& env = *static_cast<const Env*>(context);
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

std::optional<HostList> allocation(const Env& env) {
  return allocation_from_environment(fake_getenv, const_cast<Env*>(&env));
}

/// "batch1 1 a01n01 42 ... a01nNN 42", as LSF sets it on Summit for `nodes` compute nodes.
std::string summit_mcpu_hosts(int nodes) {
  std::string value = "batch1 1";
  for (int i = 1; i <= nodes; ++i) {
    value += std::string(" a01n") + (i < 10 ? "0" : "") + std::to_string(i) + " 42";
  }
  return value;
}

TEST(AllocationTest, LsfOneComputeNode) {
  const auto list = allocation({{"LSB_JOBID", "42"}, {"LSB_MCPU_HOSTS", summit_mcpu_hosts(1)}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("a01n01 slots=42 given lsf-mcpu-hosts $LSB_MCPU_HOSTS"));
}

TEST(AllocationTest, LsfTwoComputeNodes) {
  const auto list =
      allocation({{"LSB_JOBID", "42"}, {"LSB_MCPU_HOSTS", "batch1 1 a26n15 42 b07n01 42"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("a26n15 slots=42 given lsf-mcpu-hosts $LSB_MCPU_HOSTS",
                                           "b07n01 slots=42 given lsf-mcpu-hosts $LSB_MCPU_HOSTS"));
}

TEST(AllocationTest, LsfEighteenComputeNodes) {
  const auto list = allocation({{"LSB_JOBID", "42"}, {"LSB_MCPU_HOSTS", summit_mcpu_hosts(18)}});
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 18u);
  EXPECT_EQ(list->find("batch1"), nullptr);
  EXPECT_EQ(describe(list->hosts().front()),
            "a01n01 slots=42 given lsf-mcpu-hosts $LSB_MCPU_HOSTS");
  EXPECT_EQ(describe(list->hosts().back()), "a01n18 slots=42 given lsf-mcpu-hosts $LSB_MCPU_HOSTS");
  EXPECT_EQ(list->total_slots(), 18 * 42);
}

TEST(AllocationTest, LsfReadsTheDjobHostfileFirst) {
  const std::string path = testing::TempDir() + "alloc_djob_hostfile";
  std::ofstream(path) << "batch1\na26n15\na26n15\na26n15\nb07n01\nb07n01\nb07n01\n";
  const auto list = allocation({{"LSB_JOBID", "42"},
                                {"LSB_DJOB_HOSTFILE", path},
                                {"LSB_MCPU_HOSTS", "batch1 1 x 1"},
                                {"LSB_HOSTS", "batch1 y"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("a26n15 slots=3 given lsf-hostfile " + path + ":2",
                                           "b07n01 slots=3 given lsf-hostfile " + path + ":5"));
  std::remove(path.c_str());
}

TEST(AllocationTest, LsfUnreadableDjobHostfileNamesVariablePathAndReason) {
  const std::string path = testing::TempDir() + "no_such_dir/hostfile";
  EXPECT_EQ(
      error_of([&] {
        allocation(
            {{"LSB_JOBID", "42"}, {"LSB_DJOB_HOSTFILE", path}, {"LSB_MCPU_HOSTS", "batch1 1 x 1"}});
      }),
      "$LSB_DJOB_HOSTFILE: cannot read '" + path + "': No such file or directory");
}

TEST(AllocationTest, LsfFallsBackToLsbHosts) {
  const auto list = allocation({{"LSB_JOBID", "42"}, {"LSB_HOSTS", "batch1 a a b"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("a slots=2 given lsf-hostfile $LSB_HOSTS",
                                           "b slots=1 given lsf-hostfile $LSB_HOSTS"));
}

TEST(AllocationTest, EmptyVariablesCountAsUnset) {
  const auto list = allocation({{"LSB_JOBID", "42"},
                                {"LSB_DJOB_HOSTFILE", ""},
                                {"LSB_MCPU_HOSTS", ""},
                                {"LSB_HOSTS", "batch1 a"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("a slots=1 given lsf-hostfile $LSB_HOSTS"));
  EXPECT_FALSE(allocation({{"LSB_JOBID", ""}, {"LSB_MCPU_HOSTS", "batch1 1 a 4"}}));
}

TEST(AllocationTest, LsfWithoutJobIdIsIgnored) {
  EXPECT_FALSE(allocation({{"LSB_MCPU_HOSTS", "batch1 1 a26n15 42"}}));
}

TEST(AllocationTest, Slurm) {
  const auto list = allocation({{"SLURM_JOB_ID", "7"},
                                {"SLURM_JOB_NODELIST", "gpu[01-03]"},
                                {"SLURM_TASKS_PER_NODE", "4(x2),2"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("gpu01 slots=4 given slurm $SLURM_JOB_NODELIST",
                                           "gpu02 slots=4 given slurm $SLURM_JOB_NODELIST",
                                           "gpu03 slots=2 given slurm $SLURM_JOB_NODELIST"));
}

TEST(AllocationTest, SlurmWithoutTasksPerNodeGivesOneSlotEach) {
  const auto list = allocation({{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "n[1-2]"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("n1 slots=1 counted slurm $SLURM_JOB_NODELIST",
                                           "n2 slots=1 counted slurm $SLURM_JOB_NODELIST"));
}

TEST(AllocationTest, SlurmNeedsJobIdAndNodelist) {
  EXPECT_FALSE(allocation({{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_TASKS_PER_NODE", "1"}}));
  EXPECT_FALSE(allocation({{"SLURM_JOB_ID", "7"}, {"SLURM_TASKS_PER_NODE", "1"}}));
}

TEST(AllocationTest, SlurmErrorsComeThrough) {
  EXPECT_EQ(error_of([] {
              allocation({{"SLURM_JOB_ID", "7"},
                          {"SLURM_JOB_NODELIST", "n[1-3]"},
                          {"SLURM_TASKS_PER_NODE", "2"}});
            }),
            "$SLURM_TASKS_PER_NODE:1:1: 1 task count but 3 nodes in $SLURM_JOB_NODELIST: both "
            "variables must come from the same job\n"
            "  2\n"
            "  ^");
}

TEST(AllocationTest, MpiJobHostfile) {
  const std::string path = testing::TempDir() + "alloc_mpijob_hostfile";
  std::ofstream(path)
      << "train-worker-0.train-worker slots=2\ntrain-worker-1.train-worker slots=2\n";
  const auto list = allocation({{"OMPI_MCA_orte_default_hostfile", path}});
  ASSERT_TRUE(list);
  EXPECT_THAT(
      describe(*list),
      ElementsAre("train-worker-0.train-worker slots=2 given openmpi-hostfile " + path + ":1",
                  "train-worker-1.train-worker slots=2 given openmpi-hostfile " + path + ":2"));
  std::remove(path.c_str());
}

TEST(AllocationTest, MpichHostfileVariable) {
  const std::string path = testing::TempDir() + "alloc_hydra_hostfile";
  std::ofstream(path) << "n1:4\nn2:4\n";
  const auto list = allocation({{"HYDRA_HOST_FILE", path}});
  ASSERT_TRUE(list);
  EXPECT_EQ(list->total_slots(), 8);
  std::remove(path.c_str());
}

TEST(AllocationTest, UnreadableMpiHostfileNamesVariablePathAndReason) {
  const std::string path = testing::TempDir() + "no_such_dir/hostfile";
  EXPECT_EQ(
      error_of([&] {
        allocation({{"OMPI_MCA_orte_default_hostfile", path}});
      }),
      "$OMPI_MCA_orte_default_hostfile: cannot read '" + path + "': No such file or directory");
}

TEST(AllocationTest, BatchSystemsTakePrecedenceOverMpiHostfiles) {
  const auto list = allocation({{"SLURM_JOB_ID", "7"},
                                {"SLURM_JOB_NODELIST", "n1"},
                                {"OMPI_MCA_orte_default_hostfile", "/nonexistent"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("n1 slots=1 counted slurm $SLURM_JOB_NODELIST"));
}

TEST(AllocationTest, LsfTakesPrecedenceOverSlurm) {
  const auto list = allocation({{"LSB_JOBID", "42"},
                                {"LSB_MCPU_HOSTS", "batch1 1 a26n15 42"},
                                {"SLURM_JOB_ID", "7"},
                                {"SLURM_JOB_NODELIST", "n[1-2]"},
                                {"SLURM_TASKS_PER_NODE", "1(x2)"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("a26n15 slots=42 given lsf-mcpu-hosts $LSB_MCPU_HOSTS"));
}

TEST(AllocationTest, LsfJobWithoutHostVariablesFallsThroughToSlurm) {
  const auto list = allocation({{"LSB_JOBID", "42"},
                                {"SLURM_JOB_ID", "7"},
                                {"SLURM_JOB_NODELIST", "n1"},
                                {"SLURM_TASKS_PER_NODE", "3"}});
  ASSERT_TRUE(list);
  EXPECT_THAT(describe(*list), ElementsAre("n1 slots=3 given slurm $SLURM_JOB_NODELIST"));
}

TEST(AllocationTest, NoBatchJob) {
  EXPECT_FALSE(allocation({}));
  EXPECT_FALSE(allocation({{"LSB_JOBID", "42"}}));
  EXPECT_FALSE(allocation({{"PATH", "/bin"}, {"HOME", "/root"}}));
}

TEST(ProcessGetenvTest, ReadsTheRealEnvironment) {
  ::setenv("DDL_HOSTFILES_TEST_VARIABLE", "batch1 1 x 2", 1);
  EXPECT_EQ(process_getenv("DDL_HOSTFILES_TEST_VARIABLE", nullptr), "batch1 1 x 2");
  ::unsetenv("DDL_HOSTFILES_TEST_VARIABLE");
  EXPECT_EQ(process_getenv("DDL_HOSTFILES_TEST_VARIABLE", nullptr), std::nullopt);
}

}  // namespace
}  // namespace ddl::hostfiles
