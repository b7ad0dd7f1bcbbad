#pragma once

#include "launcher/ssh/tree_links.h"
#include "ssh/session.h"

namespace ddl::launcher {

/// The agent's conversation with ddlrun on `in_fd` and `out_fd` (protocol.h), from its hello to
/// its end; returns its exit status (0 when its ranks ran). run_agent (factory.h) runs it with
/// `liveness` (the heartbeat and watchdog threads, which exit the process when ddlrun goes
/// silent or a stop signal comes) and then exits. Tests run it without: the agent and the
/// thread reading `in_fd` outlive the call, so they keep both descriptors open until they exit.
/// `connector` logs in to its children when it is an interior agent of a launch tree (tree.h);
/// `links` runs this host's --probe-links agent before the job (tree_links.h; null: none).
int converse_as_agent(int in_fd, int out_fd, bool liveness, ddl::ssh::Connector& connector,
                      ssh::LinkAgentRunner links = {});

}  // namespace ddl::launcher
