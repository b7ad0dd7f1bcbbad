// The flux backend: its command and host file (pure), its row, and what a missing flux says.
#include "launcher/flux/flux.h"

#include <gtest/gtest.h>

#include "tests/launcher/test_util.h"

namespace ddl::launcher::flux {
namespace {

TEST(FluxTest, FluxPlacesByHostFileAndPassesItsEnvironment) {
  Job job;
  job.topology.job_id = "ddlrun-3";
  job.topology.hosts = {{0, "a", "", {}}, {1, "b", "", {}}};
  job.topology.ranks.resize(3);
  job.topology.ranks[0].rank = 2;
  job.topology.ranks[0].host = 1;
  job.topology.ranks[1].rank = 0;
  job.topology.ranks[2].rank = 1;
  job.topology.mode = comm::parse_mode("r");
  job.argv = {"prog", "x;y"};
  job.topology_path = "/t";
  job.token = "secret";
  LaunchOptions o;
  o.ddlrun_path = "/bin/ddlrun";
  const JobEnvironment env = job_environment(job, {"a", 1, 2}, o.environ);
  const ExternalCommand c = flux_command(job, o, env, "/w/hosts");
  EXPECT_EQ(c.work_file.path, "/w/hosts");
  EXPECT_EQ(c.work_file.text, "a\na\nb\n");
  const std::vector<std::string> want = {"flux",
                                         "run",
                                         "-N",
                                         "2",
                                         "-n",
                                         "3",
                                         "--taskmap=hostfile:/w/hosts",
                                         "-o",
                                         "pmi=pmix",
                                         "-o",
                                         "cpu-affinity=off",
                                         "/bin/ddlrun",
                                         "--rank-exec",
                                         "--",
                                         "prog",
                                         "x;y"};
  EXPECT_EQ(c.argv, want);
  EXPECT_EQ(c.env, env.set);
  for (const std::string& w : c.argv)
    EXPECT_EQ(w.find("secret"), std::string::npos);
}

TEST(FluxTest, ItsRowIsAnExternalLauncherThatAutoNeverPicks) {
  EXPECT_EQ(find_backend(builtin_backends(), "flux"), &kFluxBackend);
  EXPECT_FALSE(kFluxBackend.own());
  EXPECT_EQ(kFluxBackend.automatic, nullptr);
  EXPECT_FALSE(kFluxBackend.takes_mpiarg);
  EXPECT_FALSE(kFluxBackend.serves_pmix);
}

TEST(FluxTest, MissingFluxSaysWhatToDo) {
  Job job;
  LaunchOptions o;
  o.environ = {"PATH=/nonexistent-ddl"};
  EXPECT_EQ(test::launch_error_of([&] { kFluxBackend.make(job, o); }),
            "flux launcher: flux is not on $PATH; run ddlrun inside a Flux instance (flux "
            "alloc), or use --launcher ssh");
}

}  // namespace
}  // namespace ddl::launcher::flux
