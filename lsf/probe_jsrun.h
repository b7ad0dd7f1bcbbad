#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mapper/probe_ssh.h"

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
};

/// The jsrun step that probes `hosts` compute hosts:
///   jsrun -n <hosts> -r 1 -a 1 -c ALL_CPUS -g ALL_GPUS -b none --stdio_mode prepended
///         -E PATH <ddlrun> --probe
std::vector<std::string> jsrun_probe_command(const std::string& ddlrun_path, size_t hosts);

/// One result per entry of `hosts`, from the output of the step (`output.out`: lines
/// "RANK: text"): a host gets the inventory whose hostname (short) is its name (short), else
/// an error saying why (jsrun failed, with its status and first lines of stderr; a task's
/// output is not an inventory; no task ran there).
std::vector<mapper::HostProbe> parse_jsrun_probe(const std::vector<std::string>& hosts,
                                                 std::string_view command,
                                                 const mapper::RemoteOutput& output);

/// Probes `hosts` through jsrun inside the LSF job of options.environ: checks that each is a
/// compute host of the job ($LSB_MCPU_HOSTS or $LSB_HOSTS, else $LSB_DJOB_HOSTFILE), runs
/// jsrun_probe_command for all the job's compute hosts, and parses it. Never throws for a host
/// that fails; its HostProbe says why.
std::vector<mapper::HostProbe> probe_hosts_jsrun(const std::vector<std::string>& hosts,
                                                 const JsrunProbeOptions& options);

}  // namespace ddl::lsf
