#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ddlrun/options.h"
#include "launcher/launcher.h"
#include "mapper/mapper.h"

namespace ddl::ddlrun {

/// Whether ddlrun's probe goes down the launch tree (probe_through_tree): the ssh launcher
/// follows (or would, for --dry-run) and there are more than --tree-width hosts. A restart's
/// probe goes down the tree too (past the disk cache: every host is probed), and so does
/// --probe-links' measurement after it (launcher/ssh/tree_links.h).
bool probe_goes_down_the_tree(const Options& o, std::size_t hosts, bool ssh_follows);

/// Probes `remote` (the hosts of `all`, the job's hosts in order, whose hardware must come from
/// a probe) through ddlrun's agents along the launch tree of `all` at --tree-width (flat within
/// it), so that each host pays for one login: ddlrun logs in to the first level only, runs
/// `ddlrun --probe-agent` there and asks it for its inventory (launcher/ssh/tree_start.h:
/// ask_agent), keeps the session with its agent in `agents` for --probe-links and the launch,
/// and sends each its subtree; every host below that the job's disk cache does not know runs
/// the agent too and is asked the same way, its answer coming back up the tree. A first-level
/// host is logged in to now only when it or a host below it is to be probed, or with
/// --probe-links (which measures through every remote host's agent). One result per host of
/// `remote`, in order; a failure below the first level names the host's tree parent. New
/// inventories go to the job's disk cache. `tree` gets the launch tree the probe went down,
/// without the hosts whose probe failed and those below them (LaunchOptions::probe_tree).
std::vector<mapper::HostProbe> probe_through_tree(const Options& o,
                                                  const std::vector<std::string>& all,
                                                  const std::vector<std::string>& remote,
                                                  const mapper::SshProbeOptions& so,
                                                  ddl::ssh::KeptSessions& agents,
                                                  std::vector<launcher::ssh::TreeHost>& tree);

/// --probe-links' channels to the link agents of the hosts `links` reaches along the launch
/// tree (launcher/ssh/tree_links.h), as mapper::probe_links speaks to them: null for a host
/// it does not reach (logged in to over ssh instead); TreeLinkError becomes LinkError, its
/// words unchanged. `links` outlives the channels.
mapper::OpenLinkChannel link_channels(launcher::ssh::TreeLinks& links);

}  // namespace ddl::ddlrun
