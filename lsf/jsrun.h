#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/launcher.h"
#include "mapper/mapper.h"

namespace ddl::lsf {

/// How the job is described to jsrun.
enum class JsrunMode {
  kErf,           ///< an explicit resource file, one line per rank (`--erf_input FILE`)
  kResourceSets,  ///< one resource set per host (`-n -a -c -g -r -b`), for sites where ERF breaks
};

/// Parses "erf" or "rs"; throws launcher::LaunchError naming the choices otherwise.
JsrunMode parse_jsrun_mode(const std::string& text);

/// What the jsrun backend needs besides the job and launcher::LaunchOptions.
struct JsrunOptions {
  JsrunMode mode = JsrunMode::kErf;
  /// --smpiargs: passed to jsrun as `--smpiargs ARGS`; empty: not passed.
  std::string smpiargs;
  /// Each host's usable hardware threads (OS numbers, from its inventory), by host name. When
  /// every host of the job has them the ERF counts CPUs the way jsrun's `cpu_index_using:
  /// logical` does (the position among the usable threads: on Summit, OS thread 88 is logical
  /// 84, the isolated core's 4 threads left out); otherwise it writes OS numbers
  /// (`cpu_index_using: physical`).
  std::map<std::string, std::vector<int>> usable_pus;
};

/// JsrunOptions::usable_pus from the plan's inventories (by host name): every hardware thread
/// of each inventory, ascending.
std::map<std::string, std::vector<int>> usable_pus(
    const std::map<std::string, std::shared_ptr<const mapper::Inventory>>& inventories);

/// What the ranks are told under jsrun: launcher::job_environment, and the topology's text in
/// $DDL_TOPOLOGY_TEXT whenever ddlrun's copy is in its private work directory
/// (options.work_dir), even for one host: ddlrun runs on the launch node, where no rank runs, so
/// each rank writes the text at $DDL_TOPOLOGY_FILE on its host. Throws launcher::LaunchError
/// when the text is too large for the environment (launcher::kInlineTopologyMax) and only
/// ddlrun's host has the file. Pure.
launcher::JobEnvironment jsrun_environment(const launcher::Job& job,
                                           const launcher::Rendezvous& rendezvous,
                                           const launcher::LaunchOptions& options);

/// The ERF for `job`:
///   cpu_index_using: logical|physical
///   rank: 0: { hostname: a26n15; cpu: {0-27}; gpu: {0-5} } : app 0
/// one line per rank in rank order; no `mem` (ddlrun does not divide memory; jsrun gives each
/// rank its host's). `gpu` is not the rank's GPU alone but GPUs 0 to the highest its host's
/// ranks use: jsrun shows a rank the GPUs of its resource set renumbered from 0, while the
/// ranks (libddl, $DDL_GPU) number GPUs as the host does, as under every other launcher; the
/// sets then share GPUs, so the preamble says `overlapping_rs: allow`. It is left out on hosts
/// whose ranks use no GPU. An unbound rank (an oversubscribed plan) gets all of its host's
/// usable threads, with `overlapping_rs: allow` and `oversubscribe_cpu: allow`. Throws
/// launcher::LaunchError for a CPU that is not among its host's usable threads, and for an
/// unbound rank on a host whose threads are unknown (--no-probe). Pure.
std::string erf_text(const launcher::Job& job, const JsrunOptions& options);

/// Builds the jsrun command for `job`, its work file the ERF (kErf: erf_text at `erf_path`;
/// kResourceSets: none), its env JobEnvironment::set (jsrun's own environment, forwarded to
/// the ranks by name):
///   kErf:          jsrun --erf_input <erf_path> [--smpiargs ARGS] -E NAME... ddlrun
///                  --rank-exec -- program args...
///   kResourceSets: jsrun -n <hosts> -r 1 -a <ranks per host> -c ALL_CPUS -g ALL_GPUS
///                  -b none -d packed [--smpiargs ARGS] -E NAME... ddlrun --rank-exec --
///                  program args...
/// -E names every variable of env.names (the job's own, PATH, LD_LIBRARY_PATH, PYTHONPATH)
/// plus LSB_JOBID and LSB_MCPU_HOSTS when ddlrun's environment has them (what IBM's ddlrun
/// forwarded); values stay in jsrun's environment, so the job token is on no command line. In
/// the resource-set form each host is one set holding the whole host, filled with consecutive
/// ranks in the LSF job's host order: every host must hold the same number of ranks as one
/// block, and the plan's hosts must be the first of $LSB_MCPU_HOSTS in its order; each rank
/// (`ddlrun --rank-exec`) binds itself to its planned CPUs and picks its planned GPU. Throws
/// launcher::LaunchError when the plan does not fit that form (naming --jsrun-mode erf). Pure.
launcher::ExternalCommand jsrun_command(const launcher::Job& job,
                                        const launcher::LaunchOptions& options,
                                        const launcher::JobEnvironment& env,
                                        const std::string& erf_path, const JsrunOptions& jsrun);

/// Throws launcher::LaunchError unless ddlrun runs inside an LSF job ($LSB_JOBID in
/// `environ`).
void check_allocation(const std::vector<std::string>& environ);

/// jsrun inside an LSF job (see jsrun_command), for launcher::make_external_backend: its
/// JsrunOptions from its settings --jsrun-mode (LaunchError for an unknown mode), --smpiargs
/// and options.host_pus; the allocation checked, jsrun found on $PATH, the ERF written into
/// options.work_dir; jsrun's exit status is the job's. A preview's argv[0] is "jsrun".
std::unique_ptr<launcher::ExternalLauncher> make_jsrun_launcher(
    const launcher::LaunchOptions& options);

/// jsrun's row of the table of backends (launcher/descriptor.h): auto picks it inside an LSF
/// job, before every other.
extern const launcher::BackendDescriptor kJsrunBackend;

}  // namespace ddl::lsf
