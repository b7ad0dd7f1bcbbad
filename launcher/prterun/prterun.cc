// The prterun backend: the job as one PRRTE prterun process (the PMIx reference runtime).
//
// How it works. prterun_command() writes a rankfile (one `rank R=HOST slot=...` line per
// rank, in rank order) that places every rank on its planned host, turns PRRTE's own binding
// off, and forwards the job-wide variables by name with `-x`; each rank runs
// `ddlrun --rank-exec`, which finds its rank in $PMIX_RANK, sets the rank's variables and
// binds itself to its CPU set. make_external_backend (external.h) looks for prterun on $PATH
// first: Debian 12 does not package PRRTE, so there it fails with a LaunchError that says
// what to install and which launchers work instead (kPrterunMissing). Untested against a real
// prterun for that reason; the command follows PRRTE 3's documented options.

#include "launcher/prterun/prterun.h"

namespace ddl::launcher {

namespace prterun {

ExternalCommand prterun_command(const Job& job, const LaunchOptions& options,
                                const JobEnvironment& env, const std::string& rankfile_path) {
  const comm::Topology& t = job.topology;
  const std::vector<const comm::RankPlacement*> ranks = ranks_in_order(t);
  ExternalCommand c;
  c.env = env.set;
  c.work_file.path = rankfile_path;
  c.work_file.text = "# ddlrun job " + t.job_id +
                     ": placement only (--bind-to none); ddlrun --rank-exec binds each rank\n" +
                     rankfile_lines(t, ranks);
  c.argv = {"prterun",
            "--np",
            std::to_string(ranks.size()),
            "--map-by",
            "rankfile:file=" + rankfile_path,
            "--bind-to",
            "none"};
  append_open_mpi_tail(c.argv, env, options, job);
  return c;
}

namespace {

class Launcher : public ExternalLauncher {
 public:
  Launcher() : ExternalLauncher({"prterun", kPrterunMissing, "rankfile", "rankfile"}) {}

  ExternalCommand command(const Job& job, const LaunchOptions& options, const JobEnvironment& env,
                          const std::string& work_file_path) const override {
    return prterun_command(job, options, env, work_file_path);
  }
};

}  // namespace

}  // namespace prterun

std::unique_ptr<ExternalLauncher> make_prterun_launcher(const LaunchOptions&) {
  return std::make_unique<prterun::Launcher>();
}

const BackendDescriptor kPrterunBackend{.name = "prterun", .make_launcher = make_prterun_launcher};

}  // namespace ddl::launcher
