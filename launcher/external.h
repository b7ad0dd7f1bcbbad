#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/backend.h"
#include "launcher/job.h"
#include "launcher/launch_options.h"

namespace ddl::launcher {

// What the backends that start ranks through another program (mpirun, srun, prterun, jsrun)
// share: each rank runs `ddlrun --rank-exec -- program args...` (rank_exec.h), which rebuilds
// the rank's whole environment from the topology file and a few job-wide variables that the
// launcher passes to every rank by name. Producer (the functions down to find_in_path) and
// consumer (rank_exec_main) live in rank_exec.cc, so the protocol is written down in one
// place. The backends' common base follows them (external.cc).

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
/// Job::python_dir, for `ddlrun --rank-exec` to put on the rank's PYTHONPATH.
inline constexpr std::string_view kPythonDirVariable = "DDL_PYTHON_DIR";
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

// The base of the backends that start the ranks through another program: mpirun/, srun/,
// prterun/ and lsf's jsrun. Each is an ExternalLauncher that says what differs (the program,
// its work file, checks, the command); make_external_backend() runs the steps they share.
//
// How it works. make_external_backend():
//   1. check_site(): is ddlrun inside the batch system's allocation (srun, jsrun)?
//   2. the program on $PATH (options.environ's), else LaunchError(Names::missing);
//   3. check_program(): what the program found says or refuses (srun --mpi=list, mpirun as
//      root);
//   4. the work file's path in options.work_dir, environment() and command() (pure);
//   5. the work file written, the command's note printed as a warning, describe() at -v;
//   6. make_command_backend(): the program as the job's single process, its output passed
//      through, its exit status the job's.
// preview_external() runs step 4 alone, for the dry run.

/// What an external launcher runs.
struct ExternalCommand {
  /// {"mpirun", ..., ddlrun, "--rank-exec", "--", program args...}; argv[0] the program's name
  /// until make_external_backend puts the path it found there.
  std::vector<std::string> argv;
  /// The file the launcher reads (rankfile, Slurm host file, ERF): its path in
  /// LaunchOptions::work_dir, and its text. No path: the command needs no file.
  struct WorkFile {
    std::string path;
    std::string text;
  } work_file;
  /// Variables added to the launcher's environment: JobEnvironment::set, then its own.
  std::vector<EnvVar> env;
  /// A warning for the user (ddlrun prints "ddlrun: warning: NOTE"); empty: none.
  std::string note;
};

/// One external launcher: the parts of its backend that are its own. Subclasses live in the
/// backend's folder (mpirun::Launcher in mpirun/mpirun.cc).
class ExternalLauncher {
 public:
  /// What names the launcher and its file.
  struct Names {
    std::string_view program;    ///< looked for on $PATH; messages say "<program> launcher: ..."
    std::string_view missing;    ///< the LaunchError's text when the program is not on $PATH
    std::string_view work_file;  ///< the work file's name in LaunchOptions::work_dir
    std::string_view work_file_what;  ///< "no work directory for the <what> (internal error)"
  };

  explicit ExternalLauncher(const Names& names) : names_(names) {}
  virtual ~ExternalLauncher() = default;
  const Names& names() const { return names_; }

  /// Throws LaunchError when ddlrun cannot use the launcher here (outside the batch system's
  /// allocation); runs before the program is looked for. Nothing by default.
  virtual void check_site(const Job& job, const LaunchOptions& options);
  /// Asks the program found at `path` what the command needs, or throws LaunchError when it
  /// would refuse the job. Nothing by default.
  virtual void check_program(const std::string& path, const LaunchOptions& options);
  /// The job-wide variables the ranks get (JobEnvironment); job_environment() by default.
  virtual JobEnvironment environment(const Job& job, const Rendezvous& rendezvous,
                                     const LaunchOptions& options) const;
  /// The command for `job`, its work file at `work_file_path`. Pure.
  virtual ExternalCommand command(const Job& job, const LaunchOptions& options,
                                  const JobEnvironment& env,
                                  const std::string& work_file_path) const = 0;
  /// What -v prints before the job starts: "ddlrun: <program> command: <argv>" by default.
  virtual void describe(std::ostream& out, const ExternalCommand& command) const;

 private:
  Names names_;
};

/// The backend that runs `launcher` for `job` (the steps above). Throws LaunchError when a
/// step fails; nothing has started then.
std::unique_ptr<Backend> make_external_backend(ExternalLauncher& launcher, const Job& job,
                                               const LaunchOptions& options);

/// What make_external_backend would run, without checking the site, looking for the program
/// or writing anything: argv[0] stays the program's name. Throws LaunchError for a plan the
/// launcher cannot express, and when options.work_dir is empty (an internal error).
ExternalCommand preview_external(ExternalLauncher& launcher, const Job& job,
                                 const LaunchOptions& options);

/// Runs one launcher program (`argv`, with `env` added to options.environ) as the job's single
/// process (rank -1, called `name` in messages). Its output is passed through as it comes; its
/// exit status is the job's.
std::unique_ptr<Backend> make_command_backend(std::string name, std::vector<std::string> argv,
                                              std::vector<EnvVar> env,
                                              const LaunchOptions& options);

/// The ranks of `topology` in rank order (the plan may list them in any order).
std::vector<const comm::RankPlacement*> ranks_in_order(const comm::Topology& topology);

/// The name of host `index` of `topology`; "?" when there is none.
std::string host_name_of(const comm::Topology& topology, int index);

/// The rankfile lines of Open MPI and PRRTE, one per rank of `ranks`:
/// `rank R=HOST slot=CPUS`, CPUS the rank's CPU set (OS numbers), or 0 when it has none.
std::string rankfile_lines(const comm::Topology& topology,
                           const std::vector<const comm::RankPlacement*>& ranks);

/// The end of an Open MPI or PRRTE command line: `-x NAME` for each of env.names,
/// options.mpiargs as they are, then the rank command (rank_exec_command).
void append_open_mpi_tail(std::vector<std::string>& argv, const JobEnvironment& env,
                          const LaunchOptions& options, const Job& job);

}  // namespace ddl::launcher
