#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ssh/session.h"

namespace ddl::launcher {

namespace ssh {
class AgentTree;
}

/// The address the local backend tells its ranks for ddlrun's rendezvous ($DDL_RENDEZVOUS),
/// unless LaunchOptions::rendezvous_host names another (per-node mode).
inline constexpr char kLocalRendezvousAddress[] = "127.0.0.1";

/// What the backends that start ranks through another program (mpirun, srun, prterun, jsrun)
/// and the ssh backend need besides the job.
struct LaunchOptions {
  /// Absolute path of ddlrun, the same on every host: the ssh backend runs `ddlrun --agent`
  /// there, and the external launchers run `ddlrun --rank-exec -- program...` as each rank.
  std::string ddlrun_path;
  /// How to reach other hosts over ssh (ssh config, user, port, known hosts, connect timeout).
  ddl::ssh::Options ssh;
  std::vector<std::string> mpiargs;  ///< --mpiarg words, passed to mpirun and prterun as they are
  /// The backends' own options (BackendDescriptor::options) by name, each as given or its
  /// default: {"--jsrun-mode", "erf"}.
  std::map<std::string, std::string, std::less<>> settings;
  /// Each host's hardware threads (OS numbers, ascending, from its inventory) by host name;
  /// hosts not probed are absent. The jsrun backend counts CPUs the way jsrun does from them.
  std::map<std::string, std::vector<int>> host_pus;
  /// A private directory (0700) for files the launch needs (rankfile, topology copy); the
  /// backend may write there and ddlrun removes it after the job.
  std::string work_dir;
  /// The environment ddlrun runs in, "NAME=value" each (what external launchers inherit).
  std::vector<std::string> environ;
  int verbosity = 0;
  /// The port of ddlrun's rendezvous server (comm::RendezvousServer) for the local and ssh
  /// backends; 0: none (the ranks bootstrap through PMIx or are alone).
  int rendezvous_port = 0;
  /// Per-node mode (one ddlrun per node): the local backend starts only the ranks of this
  /// host (Host::index); the others are other ddlruns'. nullopt: every rank.
  std::optional<int> only_host;
  /// The host of $DDL_RENDEZVOUS and $MASTER_ADDR when the ranks meet on another host (per-node
  /// mode: node 0's); empty: this host (kLocalRendezvousAddress) and rank 0's host.
  std::string rendezvous_host;
  /// $MASTER_PORT agreed among the nodes (per-node mode); 0: a free port of this host.
  int master_port = 0;
  /// The local and ssh backends serve PMIx to their ranks (pmix_server/): ddlrun or each
  /// agent runs a PMIx server, and every rank is its client.
  bool pmix_server = true;
  /// The ssh backend: how long ddlrun and each agent wait without hearing from the other
  /// (heartbeats every second) before the host, or ddlrun, counts as lost
  /// (--heartbeat-timeout).
  std::chrono::milliseconds heartbeat_timeout{10000};
  /// The ssh backend: the fan-out of the launch tree (--tree-width; launcher/ssh/tree.h):
  /// beyond this many hosts ddlrun logs in to this many and their agents start the rest.
  /// 0: flat (ddlrun logs in to every host). The default is Slurm's TreeWidth.
  int tree_width = 50;
  /// The ssh backend: the agents ddlrun started (ddlrun/plan/agents.h) and the launch tree
  /// they were started along, which the launch takes over as it is (one login per host; the
  /// hosts without ranks get no job), starting the agents it lacks. Null: the launch starts its
  /// own along launch_tree of --tree-width.
  std::shared_ptr<ssh::AgentTree> agents;
};

}  // namespace ddl::launcher
