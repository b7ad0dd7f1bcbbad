#pragma once

#include "ddlrun/options.h"
#include "ddlrun/plan/plan.h"
#include "launcher/launcher.h"

namespace ddl::cli {

/// The backend that `kind` names in ddlrun's one table of backends (backends.cc): its factory
/// and its dry-run preview. `kind` is what choose() resolved (not auto or pmix); throws
/// launcher::LaunchError, an internal error, otherwise.
const launcher::BackendEntry& backend_entry(launcher::Kind kind);

/// Sets what `options` tells particular backends about `plan`: the jsrun backend's
/// --jsrun-mode, --smpiargs and each host's hardware threads from the plan's inventories.
void set_backend_options(launcher::LaunchOptions& lo, const JobPlan& plan, const Options& o);

/// How the launcher `kind` reaches the hosts to probe them, where it can (jsrun, inside LSF:
/// `ddlrun --probe` as one jsrun step; ssh may be refused on the compute hosts), keeping the
/// probe cache of `job_id`. Internal error for a launcher that cannot.
RemoteProbe launcher_probe(launcher::Kind kind, const std::string& job_id);

}  // namespace ddl::cli
