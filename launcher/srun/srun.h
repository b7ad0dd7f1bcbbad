#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/descriptor.h"
#include "launcher/external.h"

namespace ddl::launcher {

/// `srun --mpi=pmix` (see srun::srun_command) inside a Slurm allocation
/// (srun::check_allocation), for make_external_backend: the MPI plugin is one the installed
/// Slurm has (`srun --mpi=list`); a preview, which asks Slurm nothing, assumes pmix.
std::unique_ptr<ExternalLauncher> make_srun_launcher(const LaunchOptions& options);

/// srun's row of the table of backends (launcher/backends.cc): auto picks it inside a Slurm job.
extern const BackendDescriptor kSrunBackend;

}  // namespace ddl::launcher

namespace ddl::launcher::srun {

/// The MPI plugins that `srun --mpi=list` printed ("pmix", "pmi2", "none", ...).
std::vector<std::string> parse_mpi_list(std::string_view output);

/// Throws LaunchError unless ddlrun runs inside a Slurm allocation ($SLURM_JOB_ID and
/// $SLURM_JOB_NODELIST in `environ`) that holds every host of the plan, by name.
void check_allocation(const Job& job, const std::vector<std::string>& environ);

/// Builds the srun command for `job`, its work file the host file (one host per rank, in rank
/// order: --distribution=arbitrary reads it from $SLURM_HOSTFILE), its env JobEnvironment::set
/// then SLURM_HOSTFILE=<hostfile_path>, its note why the MPI plugin is not pmix, or why Slurm
/// does not bind (empty when neither):
///   srun --mpi=pmix -N <hosts> -n <ranks> [--ntasks-per-node=<n> when every host has n]
///        --distribution=arbitrary --cpu-bind=... [--overcommit] [--gpus-per-node=<g>
///        --gpu-bind=none] --kill-on-bad-exit=1 --export=ALL,<names> ddlrun --rank-exec --
///        program args...
/// Ranks go to hosts exactly as planned through the hostfile. CPU binding: `map_cpu:` (one PU
/// each) or `mask_cpu:` per Slurm local id (the rank's position among its host's ranks in
/// rank order) when every host gets the same list; otherwise `none`, and `ddlrun --rank-exec`
/// binds each rank itself; the same when the plan uses more CPUs of a host than
/// $SLURM_JOB_CPUS_PER_NODE gives the job there (Slurm refuses to bind outside them; `note`
/// says so). Ranks without a CPU set mean the hosts are oversubscribed:
/// `--cpu-bind=none --overcommit`. When the allocation has GPUs ($SLURM_JOB_GPUS or
/// $SLURM_GPUS_ON_NODE) and ranks use GPUs, the step asks for the most GPUs a host uses and
/// every rank sees all of them (as under the local backend; $DDL_GPU names its own). The MPI
/// plugin is pmix when `mpi_plugins` has it, else pmi2, else none (with `note` saying so).
/// Pure.
ExternalCommand srun_command(const Job& job, const LaunchOptions& options,
                             const JobEnvironment& env, const std::string& hostfile_path,
                             const std::vector<std::string>& mpi_plugins);

}  // namespace ddl::launcher::srun
