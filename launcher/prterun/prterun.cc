// The prterun backend: the job as one PRRTE prterun process (the PMIx reference runtime).
//
// How it works. prterun_command() writes a rankfile (one `rank R=HOST slot=...` line per
// rank, in rank order) that places every rank on its planned host, turns PRRTE's own binding
// off, and forwards the job-wide variables by name with `-x`; each rank runs
// `ddlrun --rank-exec`, which finds its rank in $PMIX_RANK, sets the rank's variables and
// binds itself to its CPU set. make_prterun_backend() looks for prterun on $PATH first: Debian 12
// does not package PRRTE, so there it fails with a LaunchError that says what to install and
// which launchers work instead. Untested against a real prterun for that reason; the command
// follows PRRTE 3's documented options.

#include "launcher/prterun/prterun.h"

#include <algorithm>
#include <iostream>

namespace ddl::launcher {

namespace prterun {

Command prterun_command(const Job& job, const LaunchOptions& options, const JobEnvironment& env,
                        const std::string& rankfile_path) {
  const comm::Topology& t = job.topology;
  std::vector<const comm::RankPlacement*> ranks;
  for (const comm::RankPlacement& r : t.ranks)
    ranks.push_back(&r);
  std::sort(
      ranks.begin(), ranks.end(),
      [](const comm::RankPlacement* a, const comm::RankPlacement* b) { return a->rank < b->rank; });
  Command c;
  c.env = env.set;
  c.rankfile = "# ddlrun job " + t.job_id +
               ": placement only (--bind-to none); ddlrun --rank-exec binds each rank\n";
  for (const comm::RankPlacement* r : ranks) {
    const comm::Host* host = t.find_host(r->host);
    c.rankfile += "rank " + std::to_string(r->rank) + "=" + (host ? host->name : "?") +
                  " slot=" + (r->cpus.empty() ? "0" : r->cpus.str()) + "\n";
  }
  std::vector<std::string>& a = c.argv;
  a = {"prterun",
       "--np",
       std::to_string(ranks.size()),
       "--map-by",
       "rankfile:file=" + rankfile_path,
       "--bind-to",
       "none"};
  for (const std::string& name : env.names)
    a.insert(a.end(), {"-x", name});
  a.insert(a.end(), options.mpiargs.begin(), options.mpiargs.end());
  for (const std::string& w : rank_exec_command(options.ddlrun_path, job.argv))
    a.push_back(w);
  return c;
}

}  // namespace prterun

std::unique_ptr<Backend> make_prterun_backend(const Job& job, const LaunchOptions& options) {
  const std::string prterun =
      find_in_path("prterun", environ_value(options.environ, "PATH").value_or("/usr/bin:/bin"));
  if (prterun.empty()) throw LaunchError(prterun::kPrterunMissing);
  if (options.work_dir.empty()) {
    throw LaunchError("prterun launcher: no work directory for the rankfile (internal error)");
  }
  const std::string rankfile_path = options.work_dir + "/rankfile";
  const JobEnvironment env =
      job_environment(job, external_rendezvous(job, options.rendezvous_port), options.environ);
  prterun::Command command = prterun::prterun_command(job, options, env, rankfile_path);
  command.argv[0] = prterun;
  write_work_file(rankfile_path, command.rankfile, "prterun launcher");
  if (options.verbosity > 0) {
    std::cerr << "ddlrun: prterun command: " << shell_join(command.argv) << std::endl;
  }
  return make_command_backend("prterun", std::move(command.argv), std::move(command.env), options);
}

}  // namespace ddl::launcher
