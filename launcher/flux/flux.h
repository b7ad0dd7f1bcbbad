#pragma once

#include <memory>
#include <string>

#include "launcher/descriptor.h"
#include "launcher/external.h"

namespace ddl::launcher {

/// `flux run` with a host file written from the plan (see flux::flux_command), for
/// make_external_backend: LaunchError when flux is not on $PATH.
std::unique_ptr<ExternalLauncher> make_flux_launcher(const LaunchOptions& options);

/// flux's row of the table of backends (launcher/backends.cc).
extern const BackendDescriptor kFluxBackend;

}  // namespace ddl::launcher

namespace ddl::launcher::flux {

/// The message of the LaunchError thrown when flux is not on $PATH.
inline constexpr const char* kFluxMissing =
    "flux launcher: flux is not on $PATH; run ddlrun inside a Flux instance (flux alloc), or use "
    "--launcher ssh";

/// Builds the flux command for `job`:
///   flux run -N <hosts> -n <ranks> --taskmap=hostfile:<hostfile_path> -o pmi=pmix
///            -o cpu-affinity=off ddlrun --rank-exec -- program args...
/// The host file (the work file: one host name per rank, in rank order) puts each task on its
/// planned host; Flux's PMIx plugin sets $PMIX_RANK, which `ddlrun --rank-exec` reads, and
/// `ddlrun --rank-exec` binds each rank to its planned CPU set. The variables to set in flux's
/// environment are env.set (flux run passes its environment to the tasks). Pure.
ExternalCommand flux_command(const Job& job, const LaunchOptions& options,
                             const JobEnvironment& env, const std::string& hostfile_path);

}  // namespace ddl::launcher::flux
