#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/mode.h"
#include "ddlrun/options.h"
#include "hostfiles/host_list.h"
#include "launcher/choose.h"
#include "mapper/nic_filter.h"
#include "mapper/placement.h"

namespace ddl::cli {

/// Everything a run needs, resolved from the options and the environment: the hosts and where
/// they came from, how many ranks go where, the mode, the launcher and why, and what every rank
/// runs with. The dry run prints this.
struct JobPlan {
  hostfiles::HostList hosts;
  std::string hosts_from;  ///< "-H", "--hostfile hosts.txt", "$LSB_MCPU_HOSTS", ...
  mapper::SlotPlacement placement;
  comm::Mode mode;  ///< resolved: dims always present
  bool mode_given = false;
  std::string mode_reason;  ///< why these dimensions, for the report
  mapper::NicFilter nic;
  launcher::Choice launcher;
  std::vector<std::pair<std::string, std::string>> exports;  ///< -x, in order, values resolved
  std::vector<std::string> mpiargs;                          ///< --mpiarg, split into words
  std::vector<std::string> program;
  std::vector<std::string> warnings;  ///< things the user should hear about, not fatal
};

/// Reads the process environment (or a test's). Returns nullopt for unset variables.
using GetEnv = hostfiles::GetEnv;

/// Resolves `options` into a plan, reading hostfiles, rankfiles and batch-system variables.
/// Host precedence: -H, --hostfile, the rankfile's hosts, the batch allocation, this host.
/// Throws hostfiles::InputError, mapper::PlacementError, comm::ModeError or UsageError.
JobPlan make_plan(const Options& options, GetEnv getenv_fn, void* env_context);

}  // namespace ddl::cli
