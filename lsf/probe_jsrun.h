#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mapper/mapper.h"

namespace ddl::lsf {

// Learning the hardware of an LSF job's compute nodes through jsrun, for sites that do not
// allow ssh to them (Summit): one jsrun step runs `ddlrun --probe` once on every compute host
// of the job (one resource set per host holding the whole host, output prefixed with the task's
// rank) and each task's inventory is matched to its host by the host name it reports (the short
// name, so a26n15.summit.olcf.ornl.gov is a26n15). The same mapper::HostProbe results as the
// ssh probe, so ddlrun reports failures the same way.

/// Runs `argv` with `environ` ("NAME=value" each), stdin /dev/null; what it printed and its
/// exit status. The default spawns it; tests pass fakes.
using RunCommand = std::function<mapper::RemoteOutput(const std::vector<std::string>& argv,
                                                      const std::vector<std::string>& environ)>;

/// What probe_hosts_jsrun needs.
struct JsrunProbeOptions {
  std::string ddlrun_path;                     ///< ddlrun itself, the same path on every host
  std::vector<std::string> environ;            ///< ddlrun's environment (LSB_*, PATH)
  std::chrono::milliseconds timeout{120'000};  ///< for the whole jsrun step
  RunCommand run;                              ///< empty: spawn it
  /// The LSF job's id for the disk cache the ssh probe uses too
  /// (mapper::probe_cache_path): hosts found there are not probed again, and later ddlrun
  /// commands of the job reuse what this one found. Empty: no disk cache.
  std::string job_id;
  std::string cache_dir;  ///< empty: mapper::default_probe_cache_dir()
};

/// The jsrun step that probes `hosts` compute hosts:
///   jsrun -n <hosts> -r 1 -a 1 -c ALL_CPUS -g ALL_GPUS -b none --stdio_mode prepended
///         -E PATH [-E LD_LIBRARY_PATH] <ddlrun> --probe
/// LD_LIBRARY_PATH is forwarded when `environ` (ddlrun's) has it.
std::vector<std::string> jsrun_probe_command(const std::string& ddlrun_path, size_t hosts,
                                             const std::vector<std::string>& environ);

/// One result per entry of `hosts`, from the output of the step (`output.out`: lines
/// "RANK: text"): a host gets the inventory whose hostname (short) is its name (short), else
/// an error saying why (jsrun failed, with its status and first lines of stderr; a task's
/// output is not an inventory; no task ran there).
std::vector<mapper::HostProbe> parse_jsrun_probe(const std::vector<std::string>& hosts,
                                                 std::string_view command,
                                                 const mapper::RemoteOutput& output);

/// Probes `hosts` through jsrun inside the LSF job of options.environ: each must be a compute
/// host of the job ($LSB_DJOB_HOSTFILE, $LSB_MCPU_HOSTS or $LSB_HOSTS); those not in the job's
/// disk cache are probed by one run of jsrun_probe_command over all the job's compute hosts
/// (through mapper::RemoteProber, which keeps the cache). Never throws for a host that fails;
/// its HostProbe says why.
std::vector<mapper::HostProbe> probe_hosts_jsrun(const std::vector<std::string>& hosts,
                                                 const JsrunProbeOptions& options);

}  // namespace ddl::lsf
