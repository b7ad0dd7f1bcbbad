#pragma once

#include <memory>

#include "launcher/backend.h"
#include "launcher/choose.h"
#include "launcher/external.h"
#include "launcher/job.h"
#include "launcher/launch_options.h"
#include "launcher/local/local.h"
#include "launcher/mpirun/mpirun.h"
#include "launcher/prterun/prterun.h"
#include "launcher/srun/srun.h"
#include "launcher/ssh/ssh.h"

namespace ddl::launcher {

// The backends of launcher/ and the row of ddlrun's table of backends (ddlrun/backends.cc),
// the header ddlrun includes to start a job. Each backend's folder holds `<name>.h/.cc`,
// whose header declares its one factory: a Backend for ddlrun's own launchers (local/, ssh/,
// which serve PMIx through pmix_server/), an ExternalLauncher for those that start the ranks
// through another program (mpirun/, srun/, prterun/; jsrun lives in lsf/), run by
// make_external_backend (external.h). Every factory takes the LaunchOptions
// (launch_options.h).

/// A backend's row in ddlrun's table, one per --launcher name that starts ranks (every Kind
/// but auto and pmix, which choose() resolves).
struct BackendEntry {
  Kind kind;
  /// ddlrun's own launchers: the backend for a job (make_local_backend); nullptr for the
  /// others.
  std::unique_ptr<Backend> (*make_backend)(const Job& job, const LaunchOptions& options);
  /// The external launchers: what make_external_backend runs (make_mpirun_launcher); nullptr
  /// for ddlrun's own. May throw LaunchError (an option it cannot use).
  std::unique_ptr<ExternalLauncher> (*make_launcher)(const LaunchOptions& options);

  /// The backend for `job`; throws LaunchError when it cannot start it here.
  std::unique_ptr<Backend> make(const Job& job, const LaunchOptions& options) const;
  /// What the backend would run, for the dry run (preview_external); LaunchError for
  /// ddlrun's own launchers, which run no other program.
  ExternalCommand preview(const Job& job, const LaunchOptions& options) const;
};

}  // namespace ddl::launcher
