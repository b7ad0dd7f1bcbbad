#include "launcher/srun/srun.h"

#include <gtest/gtest.h>

#include "tests/launcher/test_util.h"

namespace ddl::launcher::srun {
namespace {

/// `hosts` hosts of `per_host` ranks each, host-major; CPU sets by rank ("" for none).
Job job_of(int hosts, int per_host, const std::vector<std::string>& cpus) {
  Job job;
  comm::Topology& t = job.topology;
  t.job_id = "ddlrun-9";
  for (int h = 0; h < hosts; ++h)
    t.hosts.push_back({h, "node0" + std::to_string(h + 1), "", {}});
  for (int r = 0; r < hosts * per_host; ++r) {
    comm::RankPlacement p;
    p.rank = r;
    p.local_rank = r % per_host;
    p.host = r / per_host;
    p.cpus = comm::CpuSet::parse(cpus[static_cast<size_t>(r)]);
    t.ranks.push_back(p);
  }
  t.mode = comm::parse_mode("r");
  job.argv = {"./train", "a b"};
  job.topology_path = "/shared/topology";
  job.token = "beef";
  return job;
}

LaunchOptions options() {
  LaunchOptions o;
  o.ddlrun_path = "/usr/bin/ddlrun";
  o.environ = {"SLURM_JOB_ID=77", "SLURM_JOB_NODELIST=node[01-02]"};
  return o;
}

/// No rendezvous server: the ranks bootstrap through PMIx.
const Rendezvous kRendezvous{"node01", 1000, 0};
const std::vector<std::string> kPlugins = {"pmix", "none", "cray_shasta", "pmi2"};

std::vector<std::string> tail_after(const std::vector<std::string>& argv, size_t from) {
  return {argv.begin() + static_cast<ptrdiff_t>(from), argv.end()};
}

TEST(SrunTest, SameCpuSetsOnEveryHostBindByLocalId) {
  const Job job = job_of(2, 2, {"0-3", "4-7", "0-3", "4-7"});
  const LaunchOptions o = options();
  const ExternalCommand c =
      srun_command(job, o, job_environment(job, kRendezvous, o.environ), "/w/hosts", kPlugins);
  const std::vector<std::string> want = {"srun",
                                         "--mpi=pmix",
                                         "-N",
                                         "2",
                                         "-n",
                                         "4",
                                         "--ntasks-per-node=2",
                                         "--distribution=arbitrary",
                                         "--cpu-bind=mask_cpu:0xF,0xF0",
                                         "--kill-on-bad-exit=1",
                                         "--export=ALL,DDL_TOPOLOGY_FILE,DDL_JOB_TOKEN,"
                                         "MASTER_ADDR,MASTER_PORT,DDL_OPTIONS,DDL_TOPOLOGY_TEXT",
                                         "/usr/bin/ddlrun",
                                         "--rank-exec",
                                         "--",
                                         "./train",
                                         "a b"};
  EXPECT_EQ(c.argv, want);
  EXPECT_EQ(c.work_file.text, "node01\nnode01\nnode02\nnode02\n");
  ASSERT_FALSE(c.env.empty());
  EXPECT_EQ(c.env.back(), (EnvVar{"SLURM_HOSTFILE", "/w/hosts"}));
  EXPECT_EQ(c.env[1], (EnvVar{"DDL_JOB_TOKEN", "beef"}));
  EXPECT_EQ(c.note, "");
}

TEST(SrunTest, SinglePusMapCpusAndLocalIdsFollowRankOrder) {
  Job job = job_of(1, 3, {"5", "3", "1"});
  std::swap(job.topology.ranks[0], job.topology.ranks[2]);
  const LaunchOptions o = options();
  const ExternalCommand c =
      srun_command(job, o, job_environment(job, kRendezvous, o.environ), "/w/hosts", kPlugins);
  EXPECT_EQ(c.argv[8], "--cpu-bind=map_cpu:5,3,1");
}

TEST(SrunTest, DifferentListsPerHostOrUnboundRanksLeaveBindingToRankExec) {
  const Job differ = job_of(2, 1, {"0", "1"});
  const LaunchOptions o = options();
  ExternalCommand c =
      srun_command(differ, o, job_environment(differ, kRendezvous, o.environ), "/w/h", kPlugins);
  EXPECT_EQ(tail_after(c.argv, 6)[2], "--cpu-bind=none");
  EXPECT_EQ(tail_after(c.argv, 6)[3], "--kill-on-bad-exit=1");

  const Job unbound = job_of(1, 4, {"", "", "", ""});
  c = srun_command(unbound, o, job_environment(unbound, kRendezvous, o.environ), "/w/h", kPlugins);
  const std::vector<std::string> want = {"--ntasks-per-node=4", "--distribution=arbitrary",
                                         "--cpu-bind=none", "--overcommit", "--kill-on-bad-exit=1"};
  EXPECT_EQ(std::vector<std::string>(c.argv.begin() + 6, c.argv.begin() + 11), want);
}

TEST(SrunTest, PlansBeyondTheAllocatedCpusAreBoundByRankExec) {
  const Job job = job_of(2, 2, {"0", "1", "0", "1"});
  LaunchOptions o = options();
  o.environ.push_back("SLURM_JOB_CPUS_PER_NODE=2,1");
  ExternalCommand c =
      srun_command(job, o, job_environment(job, kRendezvous, o.environ), "/w/h", kPlugins);
  EXPECT_EQ(c.argv[8], "--cpu-bind=none");
  EXPECT_EQ(c.note,
            "the plan binds 2 ranks to 2 CPUs of node02, but Slurm job gave 1 there; Slurm will "
            "not bind them and ddlrun --rank-exec binds each rank itself (ask salloc/sbatch for "
            "--exclusive or enough -c to let Slurm bind)");
  o.environ.back() = "SLURM_JOB_CPUS_PER_NODE=2(x2)";
  c = srun_command(job, o, job_environment(job, kRendezvous, o.environ), "/w/h", kPlugins);
  EXPECT_EQ(c.argv[8], "--cpu-bind=map_cpu:0,1");
  EXPECT_EQ(c.note, "");
}

TEST(SrunTest, UnevenHostsGetNoTasksPerNode) {
  Job job = job_of(2, 2, {"0", "1", "0", "1"});
  job.topology.ranks.pop_back();
  const LaunchOptions o = options();
  const ExternalCommand c =
      srun_command(job, o, job_environment(job, kRendezvous, o.environ), "/w/h", kPlugins);
  EXPECT_EQ(c.argv[6], "--distribution=arbitrary");
  EXPECT_EQ(c.argv[7], "--cpu-bind=none");
  EXPECT_EQ(c.work_file.text, "node01\nnode01\nnode02\n");
}

TEST(SrunTest, GpusOnlyWhenTheAllocationHasThem) {
  Job job = job_of(1, 2, {"0", "1"});
  job.topology.ranks[0].gpu = 0;
  job.topology.ranks[1].gpu = 1;
  LaunchOptions o = options();
  ExternalCommand c =
      srun_command(job, o, job_environment(job, kRendezvous, o.environ), "/w/h", kPlugins);
  EXPECT_EQ(c.argv[9], "--kill-on-bad-exit=1");
  o.environ.push_back("SLURM_JOB_GPUS=0,1");
  c = srun_command(job, o, job_environment(job, kRendezvous, o.environ), "/w/h", kPlugins);
  EXPECT_EQ(c.argv[9], "--gpus-per-node=2");
  EXPECT_EQ(c.argv[10], "--gpu-bind=none");
}

TEST(SrunTest, FallsBackWithoutPmixAndSaysSo) {
  const Job job = job_of(1, 1, {"0"});
  const LaunchOptions o = options();
  const JobEnvironment env = job_environment(job, kRendezvous, o.environ);
  ExternalCommand c = srun_command(job, o, env, "/w/h", {"none", "pmi2"});
  EXPECT_EQ(c.argv[1], "--mpi=pmi2");
  EXPECT_EQ(c.note,
            "this Slurm has no PMIx plugin (srun --mpi=list: none pmi2); starting ranks with "
            "--mpi=pmi2 (libddl bootstraps through PMIx: its ranks will not find each other; use a "
            "Slurm built with PMIx, or --launcher mpirun or --launcher ssh)");
  Rendezvous served = kRendezvous;
  served.ddl_address = "launch";
  served.ddl_port = 1001;
  c = srun_command(job, o, job_environment(job, served, o.environ), "/w/h", {});
  EXPECT_EQ(c.argv[1], "--mpi=none");
  EXPECT_EQ(c.note,
            "this Slurm has no PMIx plugin (srun --mpi=list: nothing); starting ranks with "
            "--mpi=none (libddl bootstraps through ddlrun's rendezvous server instead)");
}

TEST(SrunTest, ParsesMpiListOfSlurm22AndOlder) {
  EXPECT_EQ(parse_mpi_list("MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\n"
                           "specific pmix plugin versions available: pmix_v4\n"),
            (std::vector<std::string>{"pmix", "none", "cray_shasta", "pmi2"}));
  EXPECT_EQ(parse_mpi_list("srun: MPI types are...\nsrun: none\nsrun: pmi2\n"),
            (std::vector<std::string>{"none", "pmi2"}));
}

TEST(SrunTest, AllocationMustHoldEveryHost) {
  const Job job = job_of(2, 1, {"0", "0"});
  EXPECT_NO_THROW(check_allocation(job, options().environ));
  EXPECT_EQ(test::launch_error_of([&] {
              check_allocation(job, {"SLURM_JOB_ID=77", "SLURM_JOB_NODELIST=node01,node03"});
            }),
            "srun launcher: host node02 is not in Slurm job 77 (its nodes are "
            "node01,node03); leave out -H/--hostfile to use the allocation's nodes, or ask "
            "salloc/sbatch for that host");
  EXPECT_EQ(test::launch_error_of([&] { check_allocation(job, {"PATH=/bin"}); }),
            "srun launcher: not inside a Slurm allocation ($SLURM_JOB_ID and "
            "$SLURM_JOB_NODELIST are not set); run ddlrun inside salloc or an sbatch "
            "script, or use --launcher mpirun or --launcher ssh");
}

}  // namespace
}  // namespace ddl::launcher::srun
