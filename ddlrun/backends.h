#pragma once

#include "launcher/choose.h"
#include "launcher/factory.h"

namespace ddl::cli {

/// The backend that `kind` names in ddlrun's one table of backends (backends.cc): its factory
/// and its dry-run preview. `kind` is what choose() resolved (not auto or pmix); throws
/// launcher::LaunchError, an internal error, otherwise.
const launcher::BackendEntry& backend_entry(launcher::Kind kind);

}  // namespace ddl::cli
