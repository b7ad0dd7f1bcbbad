#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hostfiles/hostfiles.h"

namespace ddl::launcher {

/// The global rank that the launcher which started this process gave it, from the first of
/// DDL_RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID, JSM_NAMESPACE_RANK that is set (the
/// rows of comm's table of rank variables that `ddlrun --rank-exec` reads, in its order);
/// nullopt when none is.
std::optional<int> launcher_rank(hostfiles::GetEnv getenv_fn, void* env_context = nullptr);

/// `ddlrun --rank-exec [--] program args...`: what each rank runs under mpirun, srun, prterun
/// and jsrun. It finds its rank (launcher_rank), reads the topology file named by
/// $DDL_TOPOLOGY_FILE, adds rank_environment() for that rank (rendezvous from $MASTER_ADDR,
/// $MASTER_PORT and $DDL_RENDEZVOUS, token from $DDL_JOB_TOKEN, both set by ddlrun), binds
/// itself to the rank's CPU set when the launcher did not, and execs the program. Returns only
/// on failure: prints "ddlrun --rank-exec: error: ..." to stderr and returns 127 (program not
/// found) or 1.
int rank_exec_main(const std::vector<std::string>& args);

}  // namespace ddl::launcher
