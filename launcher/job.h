#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.h"

namespace ddl::launcher {

/// One environment variable.
using EnvVar = std::pair<std::string, std::string>;

/// Sets `name` to `value` in `env`: its entry's value replaced, or a new entry at the end.
void set_variable(std::vector<EnvVar>& env, const std::string& name, const std::string& value);

/// What every backend needs to start a job: where each rank runs, what it runs, and what it
/// is told. ddlrun builds it from its plan (make_job); the ssh backend sends it to each host's
/// agent (encode_job/decode_job), which starts that host's ranks from it.
struct Job {
  comm::Topology topology;        ///< hosts, ranks (placement, CPU sets, GPUs), mode, rings
  std::vector<std::string> argv;  ///< the program and its arguments, byte for byte
  /// Variables for every rank, in order (-x, the caller's additions). Later ones win.
  std::vector<EnvVar> exports;
  /// Where ranks on this host read the topology file; agents on other hosts write their own
  /// copy (from topology) and use that path instead.
  std::string topology_path;
  /// The job's secret: ranks get it in $DDL_JOB_TOKEN (never on a command line). Hex.
  std::string token;
  /// The directory ranks start in on every host: --wdir, else ddlrun's own. A host where it
  /// does not exist fails the start of the whole job (nothing runs anywhere). Empty: wherever
  /// they start.
  std::string cwd;
  /// Cores (not hardware threads) in each rank's CPU set, by rank; 0 or missing: unknown,
  /// the number of PUs is used. ddlrun fills it from the hosts' inventories.
  std::vector<int> cores;
  /// The directory holding the Python package `ddl` of the ddlrun that starts the job (its build
  /// tree's or its installed one): ranks get it, and its hook directory ddl/_site, first on
  /// $PYTHONPATH, so `import ddl` and init_process_group("ddl") find that package. Empty: none.
  std::string python_dir;
};

/// What a rank inherits from the environment its launcher gives it, as far as
/// rank_environment() builds on it.
struct Inherited {
  bool omp_num_threads = false;  ///< OMP_NUM_THREADS is set and not empty
  std::string python_path = {};  ///< $PYTHONPATH ("" when unset)
};

/// Inherited from an environment of "NAME=value" strings.
Inherited inherited_from(const std::vector<std::string>& environ);

/// The TCP ports the job's ranks meet on, free on rank 0's host when the job starts.
struct Rendezvous {
  std::string address;  ///< rank 0's host, as other hosts reach it
  int master_port = 0;  ///< $MASTER_PORT (torch.distributed's store)
  int ddl_port = 0;     ///< $DDL_RENDEZVOUS's port (libddl's bootstrap)
  /// $DDL_RENDEZVOUS's host: where ddlrun's rendezvous server is reached from the rank's
  /// host; empty: `address`.
  std::string ddl_address = {};
};

/// The variables rank `rank` of `job` starts with, added to (and overriding) the environment
/// it inherits:
///   DDL_RANK, DDL_SIZE, DDL_LOCAL_RANK, DDL_LOCAL_SIZE, DDL_HOST_INDEX, DDL_NUM_HOSTS,
///   DDL_GPU (-1: none), DDL_CPUS (its CPU set, "" when unbound), DDL_JOB_ID,
///   DDL_TOPOLOGY_FILE (topology_path), DDL_RENDEZVOUS (ddl_address or address, ":",
///   ddl_port), DDL_JOB_TOKEN,
///   DDL_OPTIONS="-mode <mode>" (IBM's spelling);
///   RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE,
///   MASTER_ADDR, MASTER_PORT (torchrun's contract);
///   OMP_NUM_THREADS = the cores of its CPU set, unless the rank inherits one or is not bound;
/// then job.exports, which win over all of the above; then, when job.python_dir is set,
/// PYTHONPATH = "<python_dir>/ddl/_site:<python_dir>" before the exported or inherited
/// PYTHONPATH (unless that already starts with them); "<python_dir>/ddl/_site" alone when
/// python_dir is a site-packages or dist-packages (a pip-installed ddlrun's: its torch must not
/// replace that of another interpreter the ranks run; the hook there serves ddl). Throws
/// comm::TopologyError when the rank is not in the topology.
std::vector<EnvVar> rank_environment(const Job& job, int rank, const Rendezvous& rendezvous,
                                     const std::string& topology_path, const Inherited& inherited);

/// The job as bytes and back, for the agent protocol. decode_job throws std::runtime_error on
/// truncated or malformed input.
std::string encode_job(const Job& job);
Job decode_job(const std::string& bytes);

/// A free TCP port on this host (checked by binding the wildcard address, then released),
/// chosen at random below the kernel's ephemeral port range so that nothing on the host is
/// handed it by the kernel before its user binds it; an ephemeral port when that range leaves
/// no room; 0 when the system gives none.
int free_tcp_port();

/// 32 random bytes as 64 hex digits (from /dev/urandom).
std::string make_token();

}  // namespace ddl::launcher
