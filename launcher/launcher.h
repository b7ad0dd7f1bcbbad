#pragma once
// launcher: the one header other folders include. A Job (the plan's topology, the program,
// exports) -> running ranks through a backend (local, ssh, mpirun, srun, prterun; lsf/ adds
// jsrun), supervised until they end; and the helper roles ddlrun plays (--keeper,
// --rank-exec, --agent).

#include "launcher/backend.h"          // Backend, Event, LaunchError
#include "launcher/choose.h"           // Situation, Choice: what auto looks at, what it chose
#include "launcher/descriptor.h"       // BackendDescriptor: a row of the table of backends
#include "launcher/external.h"         // ExternalLauncher: the base of mpirun, srun, prterun, jsrun
#include "launcher/job.h"              // Job, rank_environment
#include "launcher/keeper.h"           // ddlrun --keeper
#include "launcher/pmix_topo.h"        // the PMIx server's hwloc topology
#include "launcher/process.h"          // ProcessSet
#include "launcher/rank_exec.h"        // ddlrun --rank-exec
#include "launcher/ssh/agent.h"        // run_agent: ddlrun --agent
#include "launcher/ssh/agent_tree.h"   // start_subtree: ddlrun's probe down the launch tree
#include "launcher/ssh/ssh.h"          // make_ssh_backend: the ssh launcher
#include "launcher/ssh/tree.h"         // TreeTooDeep: --tree-width too narrow for the hosts
#include "launcher/ssh/tree_links.h"   // TreeLinks: --probe-links down the launch tree
#include "launcher/startup_signals.h"  // SIGINT and such before the job starts
#include "launcher/supervise.h"        // supervise(): the event loop
