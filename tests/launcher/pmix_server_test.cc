#include <gtest/gtest.h>
#include <hwloc.h>
#include <pmix.h>

#include <algorithm>

#include "launcher/pmix_server/server.h"
#include "launcher/pmix_topo.h"
#include "mapper/probe_hwloc.h"

namespace ddl::launcher::pmix_server {
namespace {

/// Test double of the launcher's side: records what the (real) PMIx server hands up.
class RecordingHost : public Host {
 public:
  void fence(Contribution c, DataDone done) override {
    fences.push_back(c.key);
    done(0, c.data);
  }
  void abort(int rank, int status, const std::string& message) override {
    aborts.push_back(std::to_string(rank) + ":" + std::to_string(status) + ":" + message);
  }
  void direct_modex(int, DataDone done) override { done(-46, {}); }
  std::vector<std::string> fences;
  std::vector<std::string> aborts;
};

Job two_hosts() {
  Job job;
  job.topology.job_id = "j7";
  job.topology.hosts = {{0, "a", "", {}}, {1, "b", "", {}}};
  for (int r = 0; r < 4; ++r) {
    comm::RankPlacement p;
    p.rank = r;
    p.host = r / 2;
    p.local_rank = r % 2;
    job.topology.ranks.push_back(p);
  }
  return job;
}

std::string value(const std::vector<EnvVar>& env, const std::string& name) {
  auto it = std::find_if(env.begin(), env.end(), [&](const EnvVar& v) { return v.first == name; });
  return it == env.end() ? "(unset)" : it->second;
}

TEST(PmixServerTest, EachRankGetsItsNamespaceRankServerAndOpenMpiSetting) {
  RecordingHost host;
  std::unique_ptr<Server> server = Server::start("", host);
  server->register_job(two_hosts(), {1});
  const std::vector<EnvVar> env = server->fork_environment(3);
  EXPECT_EQ(value(env, "PMIX_NAMESPACE"), "ddlrun.j7");
  EXPECT_EQ(value(env, "PMIX_RANK"), "3");
  EXPECT_NE(value(env, "PMIX_SERVER_URI4"), "(unset)");
  EXPECT_EQ(value(env, "PMIX_GDS_MODULE"), "hash");
  EXPECT_EQ(value(env, "OMPI_MCA_schizo"), "^orte");
  server.reset();
  // The same process serves a second job (PMIx stays initialized).
  server = Server::start("", host);
  server->register_job(two_hosts(), {0, 1});
  EXPECT_EQ(value(server->fork_environment(0), "PMIX_RANK"), "0");
}

// PMIx takes the topology provided (provide_host_topology: ddlrun's main gives the probe
// cache's, mapper::local_topology) instead of discovering it once more. CTest runs each test in
// a process of its own; run by hand after another test started PMIx, it cannot be checked.
TEST(PmixServerTest, PmixTakesTheTopologyProvided) {
  if (PMIx_Initialized()) GTEST_SKIP() << "PMIx was started by an earlier test of this process";
  hwloc_topology_t provided = mapper::local_topology(/*use_cache=*/false);
  int calls = 0;
  provide_host_topology([&] {
    ++calls;
    return HostTopology{provided, mapper::hwloc_source()};
  });
  RecordingHost host;
  std::unique_ptr<Server> server = Server::start("", host);
  pmix_topology_t held{};
  ASSERT_EQ(PMIx_Load_topology(&held), PMIX_SUCCESS);
  EXPECT_EQ(held.topology, provided) << "PMIx discovered the topology itself";
  EXPECT_EQ(calls, 1);
  server.reset();
  server = Server::start("", host);  // PMIx stays initialized: not asked again
  EXPECT_EQ(calls, 1);
  provide_host_topology(nullptr);
  // What was provided is this host's.
  hwloc_topology_t live = nullptr;
  ASSERT_EQ(hwloc_topology_init(&live), 0);
  ASSERT_EQ(hwloc_topology_load(live), 0);
  EXPECT_TRUE(hwloc_bitmap_isequal(hwloc_topology_get_topology_cpuset(provided),
                                   hwloc_topology_get_topology_cpuset(live)));
  EXPECT_EQ(hwloc_get_nbobjs_by_type(provided, HWLOC_OBJ_PU),
            hwloc_get_nbobjs_by_type(live, HWLOC_OBJ_PU));
  hwloc_topology_destroy(live);
}

TEST(PmixServerTest, UserSettingsWinOverThePmixEnvironment) {
  std::vector<EnvVar> env = {{"DDL_RANK", "1"}};
  add_environment(env, {{"PMIX_RANK", "1"}, {"OMPI_MCA_schizo", "^orte"}, {"PMIX_NAMESPACE", "n"}},
                  {{"PMIX_NAMESPACE", "mine"}}, {"OMPI_MCA_schizo=slurm", "PATH=/bin"});
  EXPECT_EQ(env, (std::vector<EnvVar>{{"DDL_RANK", "1"}, {"PMIX_RANK", "1"}}));
}

TEST(PmixServerTest, AbortIsALineAndAnExitWithItsStatus) {
  const std::vector<Event> e = abort_events(3, 7, "rank 3 gives up");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].type, Event::Type::kOutput);
  EXPECT_EQ(e[0].rank, 3);
  EXPECT_EQ(e[0].stream, Stream::kStderr);
  EXPECT_EQ(e[0].data, "PMIx_Abort(status 7): rank 3 gives up\n");
  EXPECT_EQ(e[1].type, Event::Type::kExit);
  EXPECT_EQ(e[1].status, (ExitStatus{7, 0}));
  EXPECT_EQ(abort_events(0, 0, "")[0].data, "PMIx_Abort(status 0)\n");
  EXPECT_EQ(abort_events(0, 0, "")[1].status.code, 1);  // a failure even with status 0
}

}  // namespace
}  // namespace ddl::launcher::pmix_server
