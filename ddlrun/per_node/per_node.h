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
#include "ddlrun/per_node/rendezvous.h"
#include "ddlrun/plan/plan.h"
#include "ddlrun/run/elastic.h"
#include "launcher/launcher.h"

namespace spdlog {
class logger;
}

namespace ddl::ddlrun {

/// Where this node stands in a per-node job, from the options and the environment.
struct PerNode {
  int node_rank = 0;
  int nnodes = 1;     ///< the nodes of the first round (--nnodes N, or MAX of MIN:MAX)
  int min_nodes = 1;  ///< the fewest a restart may go on with (MIN of --nnodes MIN:MAX)
  std::string host;   ///< node 0's host, where the rendezvous is served
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
/// run's text or this node's ranks, and with --max-restarts the rounds after a failure
/// (run_node_rounds; their notes go to `err`). Returns the job's exit status (the first
/// failure's on every node). Throws RendezvousError, UsageError and what make_plan() and
/// launch() throw in the first round.
int run_per_node(const Options& options, const PerNode& node, GetEnv getenv_fn, void* env_context,
                 std::ostream& out, std::ostream& err, spdlog::logger& log);

/// How one round (attempt) of a per-node job ended on this node.
struct NodeRound {
  int status = 0;       ///< the job's status, as every node got it
  bool failed = false;  ///< it failed by itself (a rank, a lost node): a restart may help
  std::string reason;   ///< "rank 3 (n2) exited with status 7"; "" when unknown
  RoundEnd end;         ///< what node 0 said of the round
  int signal = 0;       ///< the stop signal this node's ddlrun got (then: 128+N), 0: none
};

/// The side effects of a per-node job's rounds: the rendezvous, the plan, this node's ranks.
/// The real one (run_per_node) runs them; tests pass a fake that records what it was asked.
class NodeRounds {
 public:
  virtual ~NodeRounds() = default;
  /// Runs round `round` (0: the first, else the restart's number) with the nodes `members`
  /// (node ranks; empty: every node), of which node 0 waits for at least `min_nodes`. Throws
  /// RendezvousError when the nodes do not meet, launcher::LaunchError when the ranks cannot
  /// start.
  virtual NodeRound run(int round, const std::vector<int>& members, int min_nodes) = 0;
  /// Tells the user `text` (a line of ddlrun's, on stderr).
  virtual void note(const std::string& text) = 0;
};

/// Why this node does not start round `spent + 1` after `last` ("" when it does): the job was
/// stopped rather than failed, no restart is left, node 0 (and with it the rendezvous) is
/// lost, a node is lost without --nnodes MIN:MAX, or fewer than MIN nodes remain.
std::string why_no_node_restart(const NodeRound& last, int spent, const PerNode& node,
                                const RestartLimits& limits);

/// Runs the rounds of a per-node job through `rounds`: while a round fails by itself and
/// why_no_node_restart() allows, the surviving nodes meet again for the next round (node 0
/// serving it) and start again; each restart's reason is noted, and a summary of them at the
/// end (restart_summary). Returns the last round's status; a restart whose nodes do not
/// meet or whose ranks cannot start ends the job with the last failure's status.
int run_node_rounds(const PerNode& node, const RestartLimits& limits, NodeRounds& rounds);

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

}  // namespace ddl::ddlrun
