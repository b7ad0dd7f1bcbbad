// Per-node mode's settings: what turns it on (options, Kubernetes operators' and Slurm's
// variables, never a RANK inherited alone), where each value comes from, and the exact errors.

#include "ddlrun/per_node/per_node.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "ddlrun/app.h"

namespace ddl::ddlrun {
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

TEST(PerNode, ARangeOfNodesWithRestarts) {
  std::optional<PerNode> n = settings(
      {"--node-rank", "1", "--nnodes", "2:3", "--rdzv", "node1:1234", "--max-restarts", "1"});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->nnodes, 3);
  EXPECT_EQ(n->min_nodes, 2);
  n = settings({"--node-rank", "1", "--nnodes", "3", "--rdzv", "node1", "--max-restarts", "1"});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->nnodes, 3);
  EXPECT_EQ(n->min_nodes, 3);
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
            "--nnodes 2:4: per-node mode needs a fixed node count unless --max-restarts lets "
            "the job restart with fewer nodes; give --nnodes N, or --max-restarts");
  EXPECT_EQ(error_of({"--node-rank", "0", "--rdzv", "h", "--max-restarts", "1", "--min-hosts", "1"},
                     {{"PET_NNODES", "2"}}),
            "--min-hosts: per-node mode (--node-rank) counts nodes, not hosts: give --nnodes "
            "MIN:MAX with --max-restarts");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "2", "--rdzv", "h:99999"}),
            "--rdzv 'h:99999': the port must be a whole number from 1 to 65535");
  try {
    parse_command_line({"--master-port", "0", "true"});
    ADD_FAILURE() << "--master-port 0 accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--master-port: '0' is not a port: a whole number, 1 to 65535");
  }
  EXPECT_EQ(error_of({}, {{"PET_NODE_RANK", "x"}}),
            "$PET_NODE_RANK is 'x', not a whole number of at least 0");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "2", "--rdzv", "h", "-H", "a,b"}),
            "per-node mode (--node-rank) learns the hosts at the rendezvous, each node bringing "
            "its own: drop -H, --hostfile and --rankfile");
  EXPECT_EQ(error_of({"--node-rank", "0", "--nnodes", "2", "--rdzv", "h", "--launcher", "ssh"}),
            "--launcher ssh: per-node mode (--node-rank) starts this node's ranks itself; drop "
            "--launcher");
}

/// A loopback port free a moment ago.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct Outcome {
  int status;
  std::string out;
  std::string err;
};

/// ddlrun as the one node of a per-node job, through the whole program.
Outcome run_one_node(std::vector<std::string> args, Vars vars) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::string> all = {"--node-rank", "0",      "--nnodes",  "1",
                                  "--rdzv",      endpoint, "--no-probe"};
  all.insert(all.end(), args.begin(), args.end());
  std::ostringstream out, err;
  const int status = run(all, out, err, fake_getenv, &vars);
  return {status, out.str(), err.str()};
}

TEST(PerNode, WithoutATokenTheJobRunsAndWarnsOnce) {
  const Outcome r = run_one_node({"--tag-output", "none", "true"}, {});
  EXPECT_EQ(r.status, 0) << r.err;
  const std::string warning = "is unauthenticated: anyone who reaches it can join this job";
  const size_t first = r.err.find(warning);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(warning, first + 1), std::string::npos) << r.err;
  EXPECT_EQ(run_one_node({"true"}, {{"DDL_JOB_TOKEN", "t"}}).err, "");
}

TEST(PerNode, TheDryRunSaysWhatThisNodeRuns) {
  const Outcome r = run_one_node({"--dry-run", "-n", "1", "true"}, {{"DDL_JOB_TOKEN", "t"}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')).find("This node: node 0 of 1 ("), 0u) << r.out;
  EXPECT_NE(r.out.find("), rank 0 of 1; rendezvous at 127.0.0.1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per-node mode: each node starts its own ranks"), std::string::npos);
}

TEST(PerNode, ARankFailureIsTheJobsStatus) {
  const Outcome r =
      run_one_node({"--tag-output", "none", "sh", "-c", "exit 7"}, {{"DDL_JOB_TOKEN", "t"}});
  EXPECT_EQ(r.status, 7) << r.err;
}

TEST(PerNode, WithMaxRestartsAFailedRoundMeetsAgainOnTheSamePort) {
  const std::string script = "test \"$DDL_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS\" = '1 2'";
  Outcome r = run_one_node({"--tag-output", "none", "--max-restarts", "2", "sh", "-c", script},
                           {{"DDL_JOB_TOKEN", "t"}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(") exited with status 1; 1 node meets again at 127.0.0.1:"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("ddlrun: restart 1 of 2 after rank 0 ("), 0u) << r.err;
  EXPECT_EQ(r.err.find("restart 2"), std::string::npos) << r.err;
  r = run_one_node({"--tag-output", "none", "--max-restarts", "1", "sh", "-c", "exit 5"},
                   {{"DDL_JOB_TOKEN", "t"}});
  EXPECT_EQ(r.status, 5) << r.err;
  EXPECT_NE(r.err.find("\nddlrun: not restarting the job: no restart left (--max-restarts 1); it "
                       "ends with status 5\n"),
            std::string::npos)
      << r.err;
}

TEST(PerNode, TimeoutCountsForAllRoundsTogether) {
  const auto start = std::chrono::steady_clock::now();
  const Outcome r = run_one_node({"--tag-output", "none", "--max-restarts", "5", "--timeout", "2",
                                  "sh", "-c", "sleep 0.8; exit 3"},
                                 {{"DDL_JOB_TOKEN", "t"}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(4500));
  EXPECT_NE(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("ddlrun: not restarting the job: it was stopped (a signal to a node's "
                       "ddlrun, --timeout), not failed by itself; it ends with status "),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace ddl::ddlrun
