#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/job.h"

namespace ddl::launcher {

// What the backends that start ranks through another program (mpirun, srun, prterun, jsrun)
// share: each rank runs `ddlrun --rank-exec -- program args...` (rank_exec.h), which rebuilds
// the rank's whole environment from the topology file and a few job-wide variables that the
// launcher passes to every rank by name. Producer (these functions) and consumer
// (rank_exec_main) live in rank_exec.cc, so the protocol is written down in one place.

/// The job-wide variables of a job started by an external launcher.
struct JobEnvironment {
  /// Variables to set in the launcher's own environment (values never go on a command line):
  /// DDL_TOPOLOGY_FILE, DDL_JOB_TOKEN, DDL_RENDEZVOUS (only when ddlrun serves the
  /// rendezvous: rendezvous.ddl_port != 0), MASTER_ADDR, MASTER_PORT, DDL_OPTIONS,
  /// DDL_CORES (when known), DDL_TOPOLOGY_TEXT (see below), DDL_EXPORTS (when there are
  /// exports), then job.exports. Each
  /// name once; the last value given for a name wins.
  std::vector<EnvVar> set;
  /// Every name the launcher must forward to the ranks (`-x NAME`, `--export=ALL,NAME`): the
  /// names of `set`, then PATH, LD_LIBRARY_PATH, PYTHONPATH and OMP_NUM_THREADS when the
  /// environment ddlrun runs in has them.
  std::vector<std::string> names;
};

/// Lists the names of the user's exports (job.exports) so that `ddlrun --rank-exec` lets
/// them win over the variables it computes, as job.h promises: "A B C".
inline constexpr std::string_view kExportsVariable = "DDL_EXPORTS";
/// The cores of each rank's CPU set (Job::cores), run-length encoded as "count*cores" runs
/// joined by ',' ("6*7,6*7" or "12*7"), so OMP_NUM_THREADS counts cores, not threads.
inline constexpr std::string_view kCoresVariable = "DDL_CORES";
/// The topology file's text, for jobs on more than one host whose file is at most
/// kInlineTopologyMax bytes: a rank on a host without the file at $DDL_TOPOLOGY_FILE writes
/// it there (the copy stays after the job). Larger plans need the path on a shared file
/// system.
inline constexpr std::string_view kTopologyTextVariable = "DDL_TOPOLOGY_TEXT";
/// Below the kernel's limit on one environment string (128 KiB).
inline constexpr size_t kInlineTopologyMax = 96 * 1024;

/// The job-wide variables for `job` with `rendezvous`; `environ` ("NAME=value" each) is the
/// environment ddlrun runs in.
JobEnvironment job_environment(const Job& job, const Rendezvous& rendezvous,
                               const std::vector<std::string>& environ);

/// Where the ranks meet: MASTER_ADDR is rank 0's host (its address, else its name) and
/// MASTER_PORT a port free on this host (when rank 0 runs elsewhere, only likely to be free
/// there). libddl's bootstrap: ddlrun's rendezvous server on this host when
/// `rendezvous_port` (LaunchOptions::rendezvous_port) is not 0, else none (ddl_port 0: the
/// ranks bootstrap through the launcher's PMIx).
Rendezvous external_rendezvous(const Job& job, int rendezvous_port);

/// What each rank runs: {ddlrun_path, "--rank-exec", "--", program, args...}.
std::vector<std::string> rank_exec_command(const std::string& ddlrun_path,
                                           const std::vector<std::string>& argv);

/// Run-length encoding of Job::cores for kCoresVariable; "" when no count is known.
std::string encode_cores(const std::vector<int>& cores);
/// The inverse of encode_cores; an empty vector for "" or for text it did not write.
std::vector<int> decode_cores(std::string_view text);

/// Writes `text` to `path` (mode 0600, replacing it). Throws LaunchError naming `launcher`
/// ("mpirun launcher"), the file and the system's reason.
void write_work_file(const std::string& path, const std::string& text, std::string_view launcher);

/// `argv` as one POSIX shell command line (words quoted only when needed), for -v.
std::string shell_join(const std::vector<std::string>& argv);

/// The value of `name` in `environ` ("NAME=value" each; the last one wins), or nullptr.
std::optional<std::string> environ_value(const std::vector<std::string>& environ,
                                         std::string_view name);

/// The first executable file called `program` in the ':'-separated `path` (a name with a '/'
/// is taken as it is); "" when there is none.
std::string find_in_path(const std::string& program, std::string_view path);

}  // namespace ddl::launcher
