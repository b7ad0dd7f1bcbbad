#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "ddlrun/options.h"
#include "ddlrun/plan/plan.h"
#include "launcher/launcher.h"
#include "mapper/mapper.h"

namespace ddl::ddlrun {

/// Probes `remote` (the hosts of `all`, the job's hosts in order, whose hardware must come from
/// a probe) through ddlrun's agents along the launch tree of `all` at `width` (flat within it;
/// 0: flat), so that each host pays for one login: ddlrun logs in to the first level only, runs
/// `command` there (the agent, `ddlrun --probe-agent`) and asks it for its inventory
/// (launcher/ssh/agent_tree.h: ask_agent), keeps the session with its agent in `agents` for
/// --probe-links and the launch, and sends each its subtree; every host below that the job's disk
/// cache does not know runs the agent too and is asked the same way, its answer coming back up the
/// tree. A first-level host is logged in to now only when it or a host below it is to be probed,
/// or with --probe-links (which measures through every remote host's agent). One result per host
/// of `remote`, in order; a failure below the first level names the host's tree parent. New
/// inventories go to the job's disk cache. `agents` gets the launch tree the probe went down,
/// every host in it (the launch gives those whose probe failed no job).
std::vector<mapper::HostProbe> probe_through_tree(const Options& o,
                                                  const std::vector<std::string>& all,
                                                  const std::vector<std::string>& remote,
                                                  const SshProbeOptions& so,
                                                  const std::string& command, int width,
                                                  launcher::ssh::AgentTree& agents);

/// Logs in to each remote host of `hosts` (the hosts --probe-links measures) that no agent
/// kept in `agents` reaches along its tree, flat, its agent `command` asked as the probe asks it
/// (launcher/ssh/agent_tree.h: ask_agents), so that --probe-links measures through an agent on
/// every host; its session is kept in `agents`, and a host not yet in the tree joins its first
/// level. Returns the reason for each host that could not be reached (ddl::ssh::Error's words).
std::map<std::string, std::string> reach_hosts(const std::vector<mapper::LinkHost>& hosts,
                                               const SshProbeOptions& so,
                                               const std::string& command,
                                               launcher::ssh::AgentTree& agents);

/// --probe-links' channels to the link agents of the hosts `links` reaches along the launch
/// tree (launcher/ssh/tree_links.h), as mapper::probe_links speaks to them; a host it does not
/// reach fails with its reason in `unreached` (reach_hosts). TreeLinkError becomes LinkError,
/// its words unchanged. `links` and `unreached` outlive the channels.
mapper::OpenLinkChannel link_channels(launcher::ssh::TreeLinks& links,
                                      const std::map<std::string, std::string>& unreached);

}  // namespace ddl::ddlrun
