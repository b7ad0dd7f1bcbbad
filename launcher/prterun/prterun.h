#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launcher/descriptor.h"
#include "launcher/external.h"

namespace ddl::launcher {

/// PRRTE's prterun with a rankfile written from the plan (see prterun::prterun_command), for
/// make_external_backend: LaunchError naming the package to install when prterun is not on
/// $PATH.
std::unique_ptr<ExternalLauncher> make_prterun_launcher(const LaunchOptions& options);

/// prterun's row of the table of backends (launcher/backends.cc).
extern const BackendDescriptor kPrterunBackend;

}  // namespace ddl::launcher

namespace ddl::launcher::prterun {

/// The message of the LaunchError thrown when prterun is not on $PATH.
inline constexpr const char* kPrterunMissing =
    "prterun launcher: prterun is not on $PATH; install PRRTE (https://github.com/openpmix/prrte; "
    "Debian 12 does not package it) and put its bin directory on $PATH, or use --launcher "
    "pmix (ddlrun's own PMIx server) or --launcher mpirun";

/// Builds the prterun command for `job` (PRRTE 3):
///   prterun --np <ranks> --map-by rankfile:file=<rankfile_path> --bind-to none
///           -x NAME... <mpiargs> ddlrun --rank-exec -- program args...
/// The rankfile (the work file: `rank R=HOST slot=...` per rank, in rank order) places each
/// rank on its host; PRRTE binds nothing and `ddlrun --rank-exec`
/// binds each rank to its planned CPU set (slot= repeats it as physical PU numbers for the
/// reader; PRRTE only needs it to be valid). The variables to set in prterun's environment
/// are env.set. --mpiarg words are passed through. Pure.
ExternalCommand prterun_command(const Job& job, const LaunchOptions& options,
                                const JobEnvironment& env, const std::string& rankfile_path);

}  // namespace ddl::launcher::prterun
