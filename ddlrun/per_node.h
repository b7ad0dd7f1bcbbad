#pragma once
// Per-node mode: ddlrun started once on each node (a Kubernetes pod, `srun --ntasks-per-node=1`)
// starts only that node's ranks; the nodes' ddlruns meet at node 0's rendezvous
// (rendezvous.h), plan the same job and end it together.

#include <chrono>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddlrun/options.h"
#include "ddlrun/plan.h"
#include "ddlrun/rendezvous.h"
#include "launcher/launcher.h"

namespace spdlog {
class logger;
}

namespace ddl::cli {

/// Where this node stands in a per-node job, from the options and the environment.
struct PerNode {
  int node_rank = 0;
  int nnodes = 1;
  std::string host;  ///< node 0's host, where the rendezvous is served
  int port = 0;
  std::string job;         ///< the rendezvous id; "" when none
  std::string token;       ///< the job's secret; "" when none (unauthenticated)
  std::string token_from;  ///< "--rdzv-token-file FILE", "$DDL_JOB_TOKEN"
  std::string from;        ///< what turned per-node mode on: "--node-rank", "$PET_NODE_RANK", ...
  /// Ranks per node from $PET_NPROC_PER_NODE when -a is not given; nullopt: ddlrun's default.
  std::optional<int> nproc_per_node;
  std::string endpoint() const;
};

/// Per-node mode's settings, or nullopt when it is off. It is on with --node-rank, --rdzv,
/// --master-addr or $PET_NODE_RANK, and, when none of -H, --hostfile, --rankfile or a
/// --launcher other than auto is given, in a Slurm step task of one task per node
/// ($SLURM_STEP_NUM_TASKS = $SLURM_STEP_NUM_NODES). The node rank, node count and node 0's
/// address then come from the options, else the environment (man ddlrun(1), PER-NODE MODE).
/// Throws UsageError for what is missing, malformed or contradictory.
std::optional<PerNode> per_node_settings(const Options& options, GetEnv getenv_fn,
                                         void* env_context);

/// Runs this node's part of the job: the rendezvous, the plan every node makes, then the dry
/// run's text or this node's ranks. Returns the job's exit status (the first failure's on
/// every node). Throws RendezvousError, UsageError and what make_plan() and launch() throw.
int run_per_node(const Options& options, const PerNode& node, GetEnv getenv_fn, void* env_context,
                 std::ostream& out, spdlog::logger& log);

/// What launch() needs of a per-node job: the connection to node 0, each node's Host::index
/// (-1: it runs no rank), the plan's digest, and node 0's host (where the ranks meet).
struct NodePart {
  NodeClient* client = nullptr;
  std::vector<int> host_of_node;
  std::string digest;
  std::string rendezvous_host;
};

/// `inner` (the local backend of this node's ranks), stopped when another node fails: a stop
/// from node 0 becomes a host failure of the failed node's host for the supervisor.
std::unique_ptr<launcher::Backend> node_backend(std::unique_ptr<launcher::Backend> inner,
                                                const NodePart& node,
                                                std::chrono::milliseconds heartbeat_timeout);

/// "rank 4 exited with status 7", "rank 2 was killed by SIGKILL".
std::string describe_failure(int rank, const launcher::ExitStatus& status);

}  // namespace ddl::cli
