#include "launcher/prterun/prterun.h"

#include <gtest/gtest.h>

#include "tests/launcher/test_util.h"

namespace ddl::launcher::prterun {
namespace {

using test::each;
using test::words;

TEST(PrterunTest, PrterunPlacesByRankfileAndForwardsVariablesByName) {
  Job job;
  job.topology.job_id = "ddlrun-3";
  job.topology.hosts = {{0, "a", "", {}}, {1, "b", "", {}}};
  job.topology.ranks.resize(2);
  job.topology.ranks[0].rank = 1;
  job.topology.ranks[0].host = 1;
  job.topology.ranks[0].cpus = comm::CpuSet::parse("2-3");
  job.topology.ranks[1].rank = 0;
  job.topology.mode = comm::parse_mode("r");
  job.argv = {"prog", "x;y"};
  job.topology_path = "/t";
  job.token = "secret";
  LaunchOptions o;
  o.ddlrun_path = "/bin/ddlrun";
  o.mpiargs = {"--display", "map"};
  const ExternalCommand c =
      prterun_command(job, o, job_environment(job, {"a", 1, 2}, o.environ), "/w/rf");
  EXPECT_EQ(c.work_file.text,
            "# ddlrun job ddlrun-3: placement only (--bind-to none); ddlrun --rank-exec binds "
            "each rank\nrank 0=a slot=0\nrank 1=b slot=2-3\n");
  const std::vector<std::string> want =
      words({{"prterun", "--np", "2", "--map-by", "rankfile:file=/w/rf", "--bind-to", "none"},
             each("-x", {"DDL_TOPOLOGY_FILE", "DDL_JOB_TOKEN", "DDL_RENDEZVOUS", "MASTER_ADDR",
                         "MASTER_PORT", "DDL_OPTIONS", "DDL_TOPOLOGY_TEXT"}),
             {"--display", "map", "/bin/ddlrun", "--rank-exec", "--", "prog", "x;y"}});
  EXPECT_EQ(c.argv, want);
  for (const std::string& w : c.argv)
    EXPECT_EQ(w.find("secret"), std::string::npos);
}

TEST(PrterunTest, MissingPrterunNamesWhatToInstall) {
  Job job;
  LaunchOptions o;
  o.environ = {"PATH=/nonexistent-ddl"};
  EXPECT_EQ(
      test::launch_error_of([&] { make_external_backend(*make_prterun_launcher(o), job, o); }),
      "prterun launcher: prterun is not on $PATH; install PRRTE "
      "(https://github.com/openpmix/prrte; Debian 12 does not package it) and put its "
      "bin directory on $PATH, or use --launcher pmix (ddlrun's own PMIx server) or "
      "--launcher mpirun");
}

}  // namespace
}  // namespace ddl::launcher::prterun
