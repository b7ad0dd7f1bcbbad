#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "ddlrun/options.h"
#include "hostfiles/hostfiles.h"
#include "launcher/launcher.h"
#include "mapper/mapper.h"
#include "ssh/session.h"

namespace ddl::ddlrun {

/// Everything a run needs, resolved from the options and the environment: the hosts and where
/// they came from, how many ranks go where, the mode, the launcher and why, and what every rank
/// runs with. The dry run prints this.
struct JobPlan {
  hostfiles::HostList hosts;
  std::string hosts_from;           ///< "-H", "--hostfile hosts.txt", "$LSB_MCPU_HOSTS", ...
  mapper::SlotPlacement placement;  ///< ranks per host
  /// Each host's hardware, by host name; hosts not probed (--no-probe) are missing. Hosts
  /// described by one --host-xml file (or this host under several names) share one inventory.
  std::map<std::string, std::shared_ptr<const mapper::Inventory>> inventories;
  /// Where each host's hardware came from: "this host", "ssh", "ssh (cached)", "node.xml";
  /// hosts not probed are missing (the report says "not probed").
  std::map<std::string, std::string> hardware_from;
  /// Every host's use (counts, ring order); its ranks and used hosts, placed, move into
  /// `topology` once the mode is resolved (mapper::take_topology): read them there.
  mapper::Placement placed;
  comm::Topology topology;  ///< what the topology file holds: every rank's GPU, CPUs and NIC
  std::string job_id;
  comm::Mode mode;  ///< resolved: dims always present
  bool mode_given = false;
  bool mode_auto = false;   ///< --mode auto, or no mode named: the fastest predicted mode
  std::string mode_reason;  ///< why these dimensions, for the report
  /// The cost model's prediction (mapper/cost.h): the fabric, and the modes compared: the
  /// layout's own dimensions, its neighbours merged, the flat ring, and the named mode.
  mapper::Prediction prediction;
  mapper::NicFilter nic;
  launcher::Choice launcher;
  std::vector<std::pair<std::string, std::string>> exports;  ///< -x, in order, values resolved
  std::vector<std::string> mpiargs;                          ///< --mpiarg, split into words
  std::vector<std::string> program;
  /// --wdir made absolute (against ddlrun's directory): where ranks start on every host;
  /// empty: ddlrun's own directory.
  std::string wdir;
  std::vector<std::string> warnings;  ///< things the user should hear about, not fatal
  /// What --probe-links measured between the hosts with ranks (Host::index order); the racks
  /// it found set the mode's hosts per rack unless --nodes or --topology-conf do. Also in
  /// topology.links.
  std::optional<comm::LinkMeasurement> links;
  bool links_cached = false;  ///< links read from the batch job's probe cache
  /// ddlrun's agents, started for the ssh probe along the launch tree (agents.h) and kept
  /// for --probe-links and the ssh launcher, which takes the tree over (one login per host);
  /// null when none was started, for a dry run, or another launcher.
  std::shared_ptr<launcher::ssh::AgentTree> agents;
  /// Hosts left out because their probe failed (Replan::drop_unreachable): name, reason.
  std::vector<std::pair<std::string, std::string>> unreachable;
};

/// What a restart (elastic.h) changes in the plan of a job.
struct Replan {
  std::set<std::string> without;  ///< hosts left out of the job's host list
  /// Hosts whose probe fails are left out (JobPlan::unreachable) rather than failing the plan.
  bool drop_unreachable = false;
  /// The hosts of the job's first plan; set (above 0), -n scales with the hosts: a restart on
  /// 2 of 3 hosts runs 2/3 of -n ranks (at least 1).
  int first_hosts = 0;
};

/// Reads the process environment (or a test's). Returns nullopt for unset variables.
using GetEnv = hostfiles::GetEnv;

/// Finds out the hardware of hosts that are neither this host nor given by --host-xml: one
/// result per host, in order. The default asks ddlrun's agent on each over ssh, in parallel.
using RemoteProbe = std::function<std::vector<mapper::HostProbe>(const std::vector<std::string>&)>;

/// Hardware already known by host name (per-node mode: every node's probe, from the rendezvous).
using KnownHardware = std::map<std::string, mapper::Inventory>;

/// Resolves `options` into a plan, reading hostfiles, rankfiles and batch-system variables, and
/// each host's hardware (--host-xml, this host's hwloc, `remote` for the others, nothing with
/// --no-probe). Host precedence: -H, --hostfile, the rankfile's hosts, the batch allocation,
/// this host; `replan` leaves some out. Hosts in `known` are neither probed nor looked at here
/// (their hardware_from: "rendezvous"), unless --host-xml names them. Throws
/// hostfiles::InputError, mapper::PlacementError, mapper::ProbeError (hosts that could not be
/// probed, all in one message), comm::ModeError or UsageError.
JobPlan make_plan(const Options& options, GetEnv getenv_fn, void* env_context,
                  const RemoteProbe& remote = {}, const Replan& replan = {},
                  const KnownHardware* known = nullptr);

/// The job's id: --job-id, else the batch job's ($LSB_JOBID, $SLURM_JOB_ID), else
/// "ddlrun-<pid>".
std::string job_id_of(const Options& options, GetEnv getenv_fn, void* env_context);

/// This program's absolute path (/proc/self/exe): what other hosts run, as `ddlrun
/// --probe-agent` and `ddlrun --agent`, and what external launchers run as each rank
/// (`--rank-exec`).
std::string self_path();

/// How ddlrun's probe logs in to the hosts (the agents' ssh logins) and caches what they
/// answer (mapper::HostProbeOptions).
struct SshProbeOptions : ddl::ssh::Options, mapper::HostProbeOptions {};

/// The ssh probe options `options` ask for: --ssh-config, --connect-timeout, and the job id for
/// the probe cache.
SshProbeOptions ssh_probe_options(const Options& options, const std::string& job_id);

}  // namespace ddl::ddlrun
