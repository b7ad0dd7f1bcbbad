// The flux backend: the job as one `flux run` of a Flux instance (the resource manager of
// LLNL's clusters).
//
// How it works. flux_command() writes a host file (one host name per rank, in rank order) that
// `--taskmap=hostfile:` reads to place every task on its planned host, turns Flux's CPU
// affinity off and asks for Flux's PMIx plugin (`-o pmi=pmix`), which gives each task its
// $PMIX_RANK; each rank runs `ddlrun --rank-exec`, which finds its rank there, sets the rank's
// variables and binds itself to its CPU set. flux run passes its whole environment to the
// tasks, so the job-wide variables go into flux's environment and need no flag.
// make_external_backend (external.h) looks for flux on $PATH first. Tested against a test
// double of flux (tests/launcher/bin/flux), not a real Flux instance.

#include "launcher/flux/flux.h"

#include <set>

namespace ddl::launcher {

namespace flux {

ExternalCommand flux_command(const Job& job, const LaunchOptions& options,
                             const JobEnvironment& env, const std::string& hostfile_path) {
  const comm::Topology& t = job.topology;
  const std::vector<const comm::RankPlacement*> ranks = ranks_in_order(t);
  ExternalCommand c;
  c.env = env.set;
  c.work_file.path = hostfile_path;
  std::set<int> hosts;
  for (const comm::RankPlacement* r : ranks) {
    c.work_file.text += host_name_of(t, r->host) + "\n";
    hosts.insert(r->host);
  }
  c.argv = {"flux",
            "run",
            "-N",
            std::to_string(hosts.size()),
            "-n",
            std::to_string(ranks.size()),
            "--taskmap=hostfile:" + hostfile_path,
            "-o",
            "pmi=pmix",
            "-o",
            "cpu-affinity=off"};
  for (std::string& word : rank_exec_command(options.ddlrun_path, job.argv))
    c.argv.push_back(std::move(word));
  return c;
}

namespace {

class Launcher : public ExternalLauncher {
 public:
  Launcher() : ExternalLauncher({"flux", kFluxMissing, "hosts", "host file"}) {}

  ExternalCommand command(const Job& job, const LaunchOptions& options, const JobEnvironment& env,
                          const std::string& work_file_path) const override {
    return flux_command(job, options, env, work_file_path);
  }
};

}  // namespace

}  // namespace flux

std::unique_ptr<ExternalLauncher> make_flux_launcher(const LaunchOptions&) {
  return std::make_unique<flux::Launcher>();
}

const BackendDescriptor kFluxBackend{.name = "flux", .make_launcher = make_flux_launcher};

}  // namespace ddl::launcher
