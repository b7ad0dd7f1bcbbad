#pragma once

#include <string_view>

#include "ddlrun/options.h"
#include "ddlrun/plan/plan.h"
#include "launcher/launcher.h"

namespace ddl::ddlrun {

/// ddlrun's table of backends: launcher's rows, then lsf's jsrun (backends.cc), in
/// --launcher's order.
launcher::BackendTable backends();

/// The row --launcher `name` names, when it starts ranks itself (choose() made auto and pmix
/// one of those); throws launcher::LaunchError, an internal error, otherwise.
const launcher::BackendDescriptor& backend_named(std::string_view name);

/// The backend `plan` starts its ranks with (local when none was chosen).
const launcher::BackendDescriptor& chosen_backend(const JobPlan& plan);

/// launcher::choose() over ddlrun's table.
launcher::Choice choose_backend(std::string_view requested, const launcher::Situation& situation);

/// Sets what `options` tells particular backends about `plan`: their own options (--jsrun-mode,
/// --smpiargs) and each host's hardware threads from the plan's inventories.
void set_backend_options(launcher::LaunchOptions& lo, const JobPlan& plan, const Options& o);

/// How the launcher `backend` reaches the hosts to probe them, where it can (jsrun, inside LSF:
/// `ddlrun --probe` as one jsrun step; ssh may be refused on the compute hosts), keeping the
/// probe cache of `job_id`. Internal error for a launcher that cannot.
RemoteProbe launcher_probe(const launcher::BackendDescriptor& backend, const std::string& job_id);

}  // namespace ddl::ddlrun
