// The mpirun backend: the job as one Open MPI mpirun process.
//
// How it works. mpirun_command() turns the plan into a rankfile (one `rank R=HOST slot=CPUS`
// line per rank, in rank order, CPU sets as physical PU numbers) and an argv; the job-wide
// variables (topology path, token, rendezvous, exports) go into mpirun's environment and are
// forwarded by name with `-x NAME`, so the token never appears on a command line. Each rank
// runs `ddlrun --rank-exec -- program args...`, which finds its rank in
// $OMPI_COMM_WORLD_RANK, reads the topology file and sets the same variables the local
// backend sets. make_mpirun_backend() writes the rankfile into the job's private work_dir,
// prints the command at -v, and hands the argv to make_command_backend, which runs mpirun,
// passes its output through and makes its exit status (the failed rank's) the job's.
//
// Checked against Open MPI 4.1.4: a rankfile line always binds (`slot=*` binds to PU 0, an
// empty slot list is an error), lines out of rank order are refused, and `--bind-to none`
// does not undo a rankfile's binding; `--mca rtc ^hwloc` does.

#include "launcher/mpirun/mpirun.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

}  // namespace

Command mpirun_command(const Job& job, const LaunchOptions& options, const JobEnvironment& env,
                       const std::string& rankfile_path, bool as_root) {
  const comm::Topology& t = job.topology;
  std::vector<const comm::RankPlacement*> ranks;
  bool any_unbound = false;
  for (const comm::RankPlacement& r : t.ranks) {
    ranks.push_back(&r);
    any_unbound = any_unbound || r.cpus.empty();
  }
  std::sort(
      ranks.begin(), ranks.end(),
      [](const comm::RankPlacement* a, const comm::RankPlacement* b) { return a->rank < b->rank; });

  Command c;
  c.env = env.set;
  c.rankfile = "# ddlrun job " + t.job_id + ": " + std::to_string(ranks.size()) + " ranks on " +
               std::to_string(t.hosts.size()) + (t.hosts.size() == 1 ? " host" : " hosts") +
               "; slot= lists OS (physical) PU numbers (--mca rmaps_rank_file_physical 1)\n";
  if (any_unbound) {
    c.rankfile +=
        "# some ranks have no CPU set: Open MPI binds nothing (--mca rtc ^hwloc), slot=0 only "
        "places them, and ddlrun --rank-exec binds the ranks that have a CPU set\n";
  }
  for (const comm::RankPlacement* r : ranks) {
    const comm::Host* host = t.find_host(r->host);
    c.rankfile += "rank " + std::to_string(r->rank) + "=" + (host ? host->name : "?") +
                  " slot=" + (r->cpus.empty() ? "0" : r->cpus.str()) + "\n";
  }

  const std::vector<std::string> user_mca = mca_names(options.mpiargs);
  auto mca = [&](std::vector<std::string>& argv, const std::string& name,
                 const std::string& value) {
    if (std::find(user_mca.begin(), user_mca.end(), name) == user_mca.end()) {
      argv.insert(argv.end(), {"--mca", name, value});
    }
  };
  std::vector<std::string>& a = c.argv;
  a.push_back("mpirun");
  const bool root_allowed = environ_value(options.environ, "OMPI_ALLOW_RUN_AS_ROOT") == "1" &&
                            environ_value(options.environ, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1";
  if (as_root && root_allowed) a.push_back("--allow-run-as-root");
  a.insert(a.end(), {"-n", std::to_string(ranks.size()), "--rankfile", rankfile_path});
  mca(a, "rmaps_rank_file_physical", "1");
  a.push_back("--use-hwthread-cpus");
  if (any_unbound) {
    mca(a, "rtc", "^hwloc");
    a.push_back("--oversubscribe");
  }
  if (std::string rsh = ssh_args(options.ssh); !rsh.empty()) mca(a, "plm_rsh_args", rsh);
  for (const std::string& name : env.names)
    a.insert(a.end(), {"-x", name});
  a.insert(a.end(), options.mpiargs.begin(), options.mpiargs.end());
  for (const std::string& w : rank_exec_command(options.ddlrun_path, job.argv))
    a.push_back(w);
  return c;
}

}  // namespace mpirun

std::unique_ptr<Backend> make_mpirun_backend(const Job& job, const LaunchOptions& options) {
  const std::optional<std::string> path = environ_value(options.environ, "PATH");
  const std::string mpirun = find_in_path("mpirun", path.value_or("/usr/bin:/bin"));
  if (mpirun.empty()) {
    throw LaunchError(
        "mpirun launcher: mpirun is not on $PATH; install Open MPI (Debian: apt-get install "
        "openmpi-bin), or use --launcher ssh");
  }
  const bool as_root = geteuid() == 0;
  if (as_root && !(environ_value(options.environ, "OMPI_ALLOW_RUN_AS_ROOT") == "1" &&
                   environ_value(options.environ, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1")) {
    throw LaunchError(
        "mpirun launcher: Open MPI refuses to run as root; set OMPI_ALLOW_RUN_AS_ROOT=1 and "
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 to allow it, or run ddlrun as another user");
  }
  if (options.work_dir.empty()) {
    throw LaunchError("mpirun launcher: no work directory for the rankfile (internal error)");
  }
  const std::string rankfile_path = options.work_dir + "/rankfile";
  const JobEnvironment env =
      job_environment(job, external_rendezvous(job, options.rendezvous_port), options.environ);
  mpirun::Command command = mpirun::mpirun_command(job, options, env, rankfile_path, as_root);
  command.argv[0] = mpirun;

  write_work_file(rankfile_path, command.rankfile, "mpirun launcher");
  if (options.verbosity > 0) {
    std::cerr << "ddlrun: rankfile " << rankfile_path << ":\n" << command.rankfile;
    std::cerr << "ddlrun: mpirun command: " << shell_join(command.argv) << std::endl;
  }
  return make_command_backend("mpirun", std::move(command.argv), std::move(command.env), options);
}

}  // namespace ddl::launcher
