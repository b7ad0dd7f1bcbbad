// Per-node mode's settings: what turns it on (options, Kubernetes operators' and Slurm's
// variables, never a RANK inherited alone), where each value comes from, and the exact errors.

#include "ddlrun/per_node.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

namespace ddl::cli {
namespace {

using Vars = std::map<std::string, std::string>;

std::optional<std::string> fake_getenv(const char* name, void* context) {
  const Vars& vars = *static_cast<const Vars*>(context);
  auto it = vars.find(name);
  if (it == vars.end()) return std::nullopt;
  return it->second;
}

std::optional<PerNode> settings(const std::vector<std::string>& args, Vars vars = {}) {
  std::vector<std::string> all = args;
  all.push_back("train");
  return per_node_settings(parse_command_line(all).options, fake_getenv, &vars);
}

std::string error_of(const std::vector<std::string>& args, Vars vars = {}) {
  try {
    settings(args, std::move(vars));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PerNode, OffWithoutAFlagEvenWhenRankAndMasterAddrAreInherited) {
  EXPECT_FALSE(settings({}, {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"MASTER_ADDR", "h"}}));
  EXPECT_FALSE(settings({"--nnodes", "3"}));
}

TEST(PerNode, FromTheOptions) {
  std::optional<PerNode> n =
      settings({"--node-rank", "2", "--nnodes", "3", "--rdzv", "node1:1234", "--rdzv-id", "j"});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->node_rank, 2);
  EXPECT_EQ(n->nnodes, 3);
  EXPECT_EQ(n->endpoint(), "node1:1234");
  EXPECT_EQ(n->job, "j");
  EXPECT_EQ(n->from, "--node-rank");
  EXPECT_EQ(n->token, "");
}

TEST(PerNode, TorchrunSpellings) {
  std::optional<PerNode> n =
      settings({"--node_rank", "1", "--nnodes", "2", "--master_addr", "m", "--master_port", "29501",
                "--nproc_per_node", "4", "--rdzv_id", "x"});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->node_rank, 1);
  EXPECT_EQ(n->endpoint(), "m:29501");
  EXPECT_EQ(n->job, "x");
  EXPECT_EQ(
      settings({"--node-rank", "0", "--nnodes", "1", "--rdzv_endpoint", "[fe80::1]"})->endpoint(),
      "[fe80::1]:29400");
}

TEST(PerNode, KubeflowPyTorchJobVariables) {
  Vars pet = {{"PET_NODE_RANK", "1"},         {"PET_NNODES", "4"},
              {"PET_MASTER_ADDR", "job-m-0"}, {"PET_MASTER_PORT", "23456"},
              {"PET_NPROC_PER_NODE", "2"},    {"DDL_JOB_TOKEN", "s3"}};
  std::optional<PerNode> n = settings({}, pet);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->from, "$PET_NODE_RANK");
  EXPECT_EQ(n->node_rank, 1);
  EXPECT_EQ(n->nnodes, 4);
  EXPECT_EQ(n->endpoint(), "job-m-0:23456");
  EXPECT_EQ(n->nproc_per_node, 2);
  EXPECT_EQ(n->token, "s3");
  EXPECT_EQ(n->token_from, "$DDL_JOB_TOKEN");
  // The plain variables, once a flag turned per-node mode on: RANK is the node's index.
  n = settings({"--master-addr", "m"}, {{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_PORT", "9"}});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->node_rank, 2);
  EXPECT_EQ(n->nnodes, 3);
  EXPECT_EQ(n->endpoint(), "m:9");
}

Vars slurm_step() {
  return {{"SLURM_JOB_ID", "77"},
          {"SLURM_STEP_ID", "2"},
          {"SLURM_STEP_NUM_NODES", "3"},
          {"SLURM_STEP_NUM_TASKS", "3"},
          {"SLURM_NODEID", "1"},
          {"SLURM_PROCID", "1"},
          {"SLURM_STEP_NODELIST", "n[07-09]"}};
}

TEST(PerNode, ASlurmStepOfOneTaskPerNode) {
  std::optional<PerNode> n = settings({}, slurm_step());
  ASSERT_TRUE(n);
  EXPECT_EQ(n->from, "a Slurm step of one task per node");
  EXPECT_EQ(n->node_rank, 1);
  EXPECT_EQ(n->nnodes, 3);
  EXPECT_EQ(n->endpoint(), "n07:20079");
  EXPECT_EQ(n->job, "77");
  Vars many = slurm_step();
  many["SLURM_STEP_NUM_TASKS"] = "6";  // srun -n 6: ddlrun as every rank, not once per node
  EXPECT_FALSE(settings({}, many));
  EXPECT_FALSE(settings({"-H", "a,b"}, slurm_step()));
  EXPECT_FALSE(settings({"--launcher", "ssh"}, slurm_step()));
}

TEST(PerNode, TheTokenFile) {
  const std::string path = testing::TempDir() + "/per_node_token";
  std::ofstream(path) << "  hush\n";
  std::optional<PerNode> n =
      settings({"--node-rank", "0", "--nnodes", "1", "--rdzv", "h", "--rdzv-token-file", path},
               {{"DDL_JOB_TOKEN", "other"}});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->token, "hush");
  EXPECT_EQ(n->token_from, "--rdzv-token-file " + path);
  std::ofstream(path) << "\n";
  EXPECT_EQ(
      error_of({"--node-rank", "0", "--nnodes", "1", "--rdzv", "h", "--rdzv-token-file", path}),
      "--rdzv-token-file " + path + " is empty; put the job's secret in it");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "1", "--rdzv", "h", "--rdzv-token-file",
                      "/nonexistent/token"}),
            "--rdzv-token-file /nonexistent/token: No such file or directory; name a readable "
            "file holding the job's secret");
}

TEST(PerNode, ErrorsNameWhatIsMissingOrWrong) {
  EXPECT_EQ(error_of({"--node-rank", "0", "--rdzv", "h:1"}),
            "per-node mode (--node-rank) needs the number of nodes: give --nnodes N (or set "
            "$PET_NNODES)");
  EXPECT_EQ(error_of({"--rdzv", "h:1", "--nnodes", "2"}),
            "per-node mode (--rdzv) needs this node's rank: give --node-rank K (or set "
            "$PET_NODE_RANK)");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "2"}),
            "per-node mode (--node-rank) needs node 0's address: give --rdzv HOST:PORT (or "
            "--master-addr, or set $MASTER_ADDR)");
  EXPECT_EQ(error_of({"--node-rank", "3", "--nnodes", "3", "--rdzv", "h"}),
            "node rank 3 is not below the node count 3; node ranks run from 0 to 2");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "2:4", "--rdzv", "h"}),
            "--nnodes 2:4: per-node mode needs a fixed node count; give --nnodes N");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "2", "--rdzv", "h:99999"}),
            "--rdzv 'h:99999': the port must be a whole number from 1 to 65535");
  EXPECT_EQ(error_of({}, {{"PET_NODE_RANK", "x"}}),
            "$PET_NODE_RANK is 'x', not a whole number of at least 0");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "2", "--rdzv", "h", "-H", "a,b"}),
            "per-node mode (--node-rank) learns the hosts at the rendezvous, each node bringing "
            "its own: drop -H, --hostfile and --rankfile");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "2", "--rdzv", "h", "--launcher", "ssh"}),
            "--launcher ssh: per-node mode (--node-rank) starts this node's ranks itself; drop "
            "--launcher");
}

}  // namespace
}  // namespace ddl::cli
