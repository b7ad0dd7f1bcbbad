// ddlrun's table of backends: a row for every launcher choose() can resolve to, each with one
// factory, and none for auto and pmix.

#include "ddlrun/backends.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/check.h"

namespace ddl::ddlrun {
namespace {

TEST(BackendsTest, EveryResolvedKindHasOneFactory) {
  for (std::string_view kind : {"local", "ssh", "mpirun", "prterun", "srun", "jsrun"}) {
    const launcher::BackendDescriptor& e = backend_named(kind);
    EXPECT_EQ(e.name, kind);
    EXPECT_NE(e.make_backend == nullptr, e.make_launcher == nullptr) << kind;
  }
  EXPECT_NE(backend_named("local").make_backend, nullptr);
  EXPECT_NE(backend_named("jsrun").make_launcher, nullptr);
}

TEST(BackendsTest, AutoAndPmixAreNoBackend) {
  for (std::string_view kind : {"auto", "pmix"}) {
    try {
      backend_named(kind);
      FAIL() << kind;
    } catch (const base::InternalError& e) {
      EXPECT_THAT(e.what(), ::testing::StartsWith("internal error: no launcher was chosen ("));
      EXPECT_THAT(e.what(), ::testing::EndsWith("please report this)"));
    }
  }
}

TEST(BackendsTest, TheJsrunPreviewComesFromTheTable) {
  JobPlan plan;
  plan.topology.job_id = "ddlrun-1";
  plan.topology.hosts = {{0, "a01n01", "", {}}};
  plan.topology.ranks.resize(1);
  plan.topology.ranks[0].cpus = comm::CpuSet::parse("0-3");
  plan.topology.mode = comm::parse_mode("r");
  plan.program = {"prog"};
  Options o;
  o.backend_settings["--jsrun-mode"] = "rs";
  launcher::LaunchOptions lo;
  set_backend_options(lo, plan, o);
  EXPECT_EQ(lo.settings.at("--jsrun-mode"), "rs");
  EXPECT_EQ(backend_named("jsrun").setting(lo.settings, "--smpiargs"), "");  // its default
  launcher::Job job;
  job.topology = plan.topology;
  job.argv = plan.program;
  lo.ddlrun_path = "ddlrun";
  lo.work_dir = "<work-dir>";
  const launcher::ExternalCommand c = backend_named("jsrun").preview(job, lo);
  EXPECT_EQ(c.argv.front(), "jsrun");
  EXPECT_EQ(c.argv[1], "-n");
  EXPECT_TRUE(c.work_file.path.empty());
}

TEST(BackendsTest, OnlyJsrunProbesHostsItself) {
  EXPECT_TRUE(static_cast<bool>(launcher_probe(backend_named("jsrun"), "job-1")));
  EXPECT_THROW(launcher_probe(backend_named("ssh"), "job-1"), base::InternalError);
}

}  // namespace
}  // namespace ddl::ddlrun
