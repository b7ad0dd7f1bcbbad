// The mpirun backend: the job as one Open MPI mpirun process.
//
// How it works. mpirun_command() turns the plan into a rankfile (one `rank R=HOST slot=CPUS`
// line per rank, in rank order, CPU sets as physical PU numbers) and an argv; the job-wide
// variables (topology path, token, rendezvous, exports) go into mpirun's environment and are
// forwarded by name with `-x NAME`, so the token never appears on a command line. Each rank
// runs `ddlrun --rank-exec -- program args...`, which finds its rank in
// $OMPI_COMM_WORLD_RANK, reads the topology file and sets the same variables the local
// backend sets. make_external_backend (external.h) runs it with mpirun::Launcher's own
// steps (the root check, the rankfile printed at -v): it writes the rankfile into the job's
// private work_dir and runs mpirun, passing its output through and making its exit status
// (the failed rank's) the job's.
//
// Checked against Open MPI 4.1.4: a rankfile line always binds (`slot=*` binds to PU 0, an
// empty slot list is an error), lines out of rank order are refused, and `--bind-to none`
// does not undo a rankfile's binding; `--mca rtc ^hwloc` does.

#include "launcher/mpirun/mpirun.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

namespace ddl::launcher {

namespace mpirun {

namespace {

std::string ssh_args(const ddl::ssh::Options& ssh) {
  std::vector<std::string> words;
  if (!ssh.ssh_config.empty()) words.insert(words.end(), {"-F", ssh.ssh_config});
  if (ssh.port != 0) words.insert(words.end(), {"-p", std::to_string(ssh.port)});
  if (!ssh.user.empty()) words.insert(words.end(), {"-l", ssh.user});
  if (!ssh.known_hosts.empty()) {
    words.insert(words.end(), {"-o", "UserKnownHostsFile=" + ssh.known_hosts});
  }
  if (ssh.host_key_policy == ddl::ssh::HostKeyPolicy::kAcceptNew) {
    words.insert(words.end(), {"-o", "StrictHostKeyChecking=accept-new"});
  }
  return words.empty() ? "" : shell_join(words);
}

/// The MCA parameters that `words` (--mpiarg) set: Open MPI refuses one given twice, so the
/// user's setting replaces ddlrun's.
std::vector<std::string> mca_names(const std::vector<std::string>& words) {
  std::vector<std::string> names;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    if (words[i] == "--mca" || words[i] == "-mca" || words[i] == "--gmca" || words[i] == "-gmca") {
      names.push_back(words[i + 1]);
    }
  }
  return names;
}

/// Open MPI runs as root only when both variables are 1.
bool root_allowed(const std::vector<std::string>& environ) {
  return environ_value(environ, "OMPI_ALLOW_RUN_AS_ROOT") == "1" &&
         environ_value(environ, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1";
}

}  // namespace

ExternalCommand mpirun_command(const Job& job, const LaunchOptions& options,
                               const JobEnvironment& env, const std::string& rankfile_path,
                               bool as_root) {
  const comm::Topology& t = job.topology;
  const std::vector<const comm::RankPlacement*> ranks = ranks_in_order(t);
  const bool any_unbound = std::any_of(
      ranks.begin(), ranks.end(), [](const comm::RankPlacement* r) { return r->cpus.empty(); });

  ExternalCommand c;
  c.env = env.set;
  c.work_file.path = rankfile_path;
  c.work_file.text = "# ddlrun job " + t.job_id + ": " + std::to_string(ranks.size()) +
                     " ranks on " + std::to_string(t.hosts.size()) +
                     (t.hosts.size() == 1 ? " host" : " hosts") +
                     "; slot= lists OS (physical) PU numbers (--mca rmaps_rank_file_physical 1)\n";
  if (any_unbound) {
    c.work_file.text +=
        "# some ranks have no CPU set: Open MPI binds nothing (--mca rtc ^hwloc), slot=0 only "
        "places them, and ddlrun --rank-exec binds the ranks that have a CPU set\n";
  }
  c.work_file.text += rankfile_lines(t, ranks);

  const std::vector<std::string> user_mca = mca_names(options.mpiargs);
  auto mca = [&](std::vector<std::string>& argv, const std::string& name,
                 const std::string& value) {
    if (std::find(user_mca.begin(), user_mca.end(), name) == user_mca.end()) {
      argv.insert(argv.end(), {"--mca", name, value});
    }
  };
  std::vector<std::string>& a = c.argv;
  a.push_back("mpirun");
  if (as_root && root_allowed(options.environ)) a.push_back("--allow-run-as-root");
  a.insert(a.end(), {"-n", std::to_string(ranks.size()), "--rankfile", rankfile_path});
  mca(a, "rmaps_rank_file_physical", "1");
  a.push_back("--use-hwthread-cpus");
  if (any_unbound) {
    mca(a, "rtc", "^hwloc");
    a.push_back("--oversubscribe");
  }
  if (std::string rsh = ssh_args(options.ssh); !rsh.empty()) mca(a, "plm_rsh_args", rsh);
  append_open_mpi_tail(a, env, options, job);
  return c;
}

namespace {

constexpr ExternalLauncher::Names kNames = {
    "mpirun",
    "mpirun launcher: mpirun is not on $PATH; install Open MPI (Debian: apt-get install "
    "openmpi-bin), or use --launcher ssh",
    "rankfile", "rankfile"};

class Launcher : public ExternalLauncher {
 public:
  Launcher() : ExternalLauncher(kNames), as_root_(geteuid() == 0) {}

  void check_program(const std::string&, const LaunchOptions& options) override {
    if (as_root_ && !root_allowed(options.environ)) {
      throw LaunchError(
          "mpirun launcher: Open MPI refuses to run as root; set OMPI_ALLOW_RUN_AS_ROOT=1 and "
          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 to allow it, or run ddlrun as another user");
    }
  }
  ExternalCommand command(const Job& job, const LaunchOptions& options, const JobEnvironment& env,
                          const std::string& work_file_path) const override {
    return mpirun_command(job, options, env, work_file_path, as_root_);
  }
  void describe(std::ostream& out, const ExternalCommand& command) const override {
    out << "ddlrun: rankfile " << command.work_file.path << ":\n" << command.work_file.text;
    ExternalLauncher::describe(out, command);
  }

 private:
  bool as_root_;
};

}  // namespace

}  // namespace mpirun

std::unique_ptr<ExternalLauncher> make_mpirun_launcher(const LaunchOptions&) {
  return std::make_unique<mpirun::Launcher>();
}

const BackendDescriptor kMpirunBackend{
    .name = "mpirun", .make_launcher = make_mpirun_launcher, .takes_mpiarg = true};

}  // namespace ddl::launcher
