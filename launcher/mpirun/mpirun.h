#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launcher/descriptor.h"
#include "launcher/external.h"

namespace ddl::launcher {

/// Open MPI's mpirun with a rankfile written from the plan (see mpirun::mpirun_command), for
/// make_external_backend: LaunchError when mpirun is not on $PATH, or when ddlrun runs as
/// root without Open MPI's OMPI_ALLOW_RUN_AS_ROOT pair.
std::unique_ptr<ExternalLauncher> make_mpirun_launcher(const LaunchOptions& options);

/// mpirun's row of the table of backends (launcher/backends.cc): it takes --mpiarg.
extern const BackendDescriptor kMpirunBackend;

}  // namespace ddl::launcher

namespace ddl::launcher::mpirun {

/// Builds the mpirun command for `job` (Open MPI 4.1): the variables to set in mpirun's
/// environment are env.set, forwarded by name with -x, so no value is on the command line.
/// The rankfile (the work file, at `rankfile_path`) has one line per rank, in
/// rank order (4.1 refuses any other order): `rank R=HOST slot=CPUS`, HOST the plan's host
/// name and CPUS the rank's CPU set as OS (physical) PU numbers, which
/// `--mca rmaps_rank_file_physical 1 --use-hwthread-cpus` makes mpirun read as exactly those
/// hardware threads. A rankfile always binds, so when any rank has no CPU set its line says
/// `slot=0`, Open MPI's binding is turned off (`--mca rtc ^hwloc`, `--oversubscribe`) and
/// `ddlrun --rank-exec` binds the ranks that have one. Then `-x NAME` for every name of
/// `env`, `--allow-run-as-root` when `as_root` and options.environ sets both
/// OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, ssh settings as
/// `--mca plm_rsh_args`, options.mpiargs as they are (an MCA parameter they set replaces
/// ddlrun's, which mpirun would refuse twice), and the rank command. Pure.
ExternalCommand mpirun_command(const Job& job, const LaunchOptions& options,
                               const JobEnvironment& env, const std::string& rankfile_path,
                               bool as_root);

}  // namespace ddl::launcher::mpirun
