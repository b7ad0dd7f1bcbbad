#pragma once

#include <functional>
#include <string>

#include "launcher/ssh/tree_links.h"
#include "ssh/session.h"

namespace ddl::launcher {

/// What an agent does for ddlrun before the job with code of ddlrun's other folders, which
/// ddlrun passes in (launcher/ never reaches mapper/).
struct AgentServices {
  /// Runs this host's --probe-links agent on N frames (tree_links.h); null: the first N frame
  /// is answered that this agent cannot.
  ssh::LinkAgentRunner links;
  /// This host's inventory (the hwloc/NVML probe) as YAML, for an inventory request (Hw,
  /// protocol.h); throws std::exception saying why it cannot. Null: the request is answered
  /// that this agent cannot probe its host.
  std::function<std::string()> inventory;
};

/// The agent's conversation with ddlrun on `in_fd` and `out_fd` (protocol.h), from its hello to
/// its end; returns its exit status (0 when its ranks ran). run_agent (factory.h) runs it with
/// `liveness` (the heartbeat and watchdog threads, which exit the process when ddlrun goes
/// silent or a stop signal comes) and then exits. Tests run it without: the agent and the
/// thread reading `in_fd` outlive the call, so they keep both descriptors open until they exit.
/// `connector` logs in to its children when it is an interior agent of a launch tree (tree.h);
/// `services` answers ddlrun's requests before the job (--probe-links, the inventory).
int converse_as_agent(int in_fd, int out_fd, bool liveness, ddl::ssh::Connector& connector,
                      AgentServices services = {});

}  // namespace ddl::launcher
