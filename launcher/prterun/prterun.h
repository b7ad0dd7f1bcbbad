#pragma once

#include <string>
#include <vector>

#include "launcher/external.h"
#include "launcher/factory.h"
#include "launcher/job.h"

namespace ddl::launcher::prterun {

/// What make_prterun_backend runs: PRRTE's prterun, the rankfile it reads, and its environment.
struct Command {
  std::vector<std::string> argv;  ///< {"prterun", ..., ddlrun, "--rank-exec", "--", program...}
  std::string rankfile;           ///< `rank R=HOST slot=...` per rank, in rank order
  std::vector<EnvVar> env;        ///< JobEnvironment::set
};

/// The message of the LaunchError thrown when prterun is not on $PATH.
inline constexpr const char* kPrterunMissing =
    "prterun launcher: prterun is not on $PATH; install PRRTE (https://github.com/openpmix/prrte; "
    "Debian 12 does not package it) and put its bin directory on $PATH, or use --launcher "
    "pmix (ddlrun's own PMIx server) or --launcher mpirun";

/// Builds the prterun command for `job` (PRRTE 3):
///   prterun --np <ranks> --map-by rankfile:file=<rankfile_path> --bind-to none
///           -x NAME... <mpiargs> ddlrun --rank-exec -- program args...
/// The rankfile places each rank on its host; PRRTE binds nothing and `ddlrun --rank-exec`
/// binds each rank to its planned CPU set (slot= repeats it as physical PU numbers for the
/// reader; PRRTE only needs it to be valid). --mpiarg words are passed through. Pure.
Command prterun_command(const Job& job, const LaunchOptions& options, const JobEnvironment& env,
                        const std::string& rankfile_path);

}  // namespace ddl::launcher::prterun
