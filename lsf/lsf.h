#pragma once
// lsf: the one header other folders include. The jsrun backend (an ExternalLauncher: ERF or
// resource-set flags from the plan) and probing an LSF allocation's hosts through jsrun.

#include "lsf/jsrun.h"        // make_jsrun_launcher, jsrun_command
#include "lsf/probe_jsrun.h"  // probe_hosts_jsrun
