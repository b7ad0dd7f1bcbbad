// The jsrun backend's pure parts: the ERF and the jsrun command built from a plan, and the
// errors for plans and environments they cannot serve (text compared exactly).

#include "lsf/jsrun.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mapper/probe_hwloc.h"

namespace ddl::lsf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kData = DDL_TEST_DATA_DIR;

/// A job of `hosts` hosts with `per_host` ranks each, consecutive by host, rank i on GPU
/// i % per_host with `cpus[i % per_host]`.
launcher::Job make_job(const std::vector<std::string>& hosts, int per_host,
                       const std::vector<std::string>& cpus) {
  launcher::Job job;
  for (size_t h = 0; h < hosts.size(); ++h)
    job.topology.hosts.push_back(comm::Host{static_cast<int>(h), hosts[h], hosts[h], {}});
  int rank = 0;
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (int l = 0; l < per_host; ++l) {
      comm::RankPlacement r;
      r.rank = rank++;
      r.local_rank = l;
      r.host = static_cast<int>(h);
      r.gpu = l;
      r.cpus = comm::CpuSet::parse(cpus[static_cast<size_t>(l)]);
      job.topology.ranks.push_back(r);
    }
  }
  job.argv = {"python", "train.py", "--batch", "64"};
  return job;
}

/// Summit's six ranks per node (the mapper's plan for tests/topologies/summit-ac922.xml).
const std::vector<std::string> kSummitCpus = {"0-27",   "28-55",   "56-83",
                                              "88-115", "116-143", "144-171"};

/// Summit's usable threads: 0-83 and 88-171 (84-87 and 172-175 are the isolated cores').
std::vector<int> summit_pus() {
  std::vector<int> pus;
  for (int i = 0; i < 176; ++i) {
    if ((i < 84 || i > 87) && i < 172) pus.push_back(i);
  }
  return pus;
}

JsrunOptions summit_options(const std::vector<std::string>& hosts) {
  JsrunOptions o;
  for (const std::string& h : hosts)
    o.usable_pus[h] = summit_pus();
  return o;
}

launcher::LaunchOptions launch_options(std::vector<std::string> environ) {
  launcher::LaunchOptions lo;
  lo.ddlrun_path = "/opt/ddl/bin/ddlrun";
  lo.environ = std::move(environ);
  return lo;
}

launcher::JobEnvironment job_env() {
  launcher::JobEnvironment env;
  env.set = {{"DDL_TOPOLOGY_FILE", "/tmp/w/topology.yaml"}, {"DDL_JOB_TOKEN", "abc"}};
  env.names = {"DDL_TOPOLOGY_FILE", "DDL_JOB_TOKEN", "PATH", "PYTHONPATH", "LD_LIBRARY_PATH"};
  return env;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const launcher::LaunchError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsrunMode, Parses) {
  EXPECT_EQ(parse_jsrun_mode("erf"), JsrunMode::kErf);
  EXPECT_EQ(parse_jsrun_mode("rs"), JsrunMode::kResourceSets);
  EXPECT_EQ(error_of([] { parse_jsrun_mode("ERF"); }),
            "unknown jsrun mode 'ERF'; use --jsrun-mode erf (an explicit resource file) or "
            "--jsrun-mode rs (resource sets)");
}

TEST(UsablePus, SummitRecordingLeavesOutTheIsolatedCores) {
  mapper::ProbeOptions po;
  po.xml_path = kData + "/topologies/summit-ac922.xml";
  const std::map<std::string, mapper::Inventory> inventories = {
      {"a01n01", mapper::probe_hwloc(po)}};
  const auto pus = usable_pus(inventories);
  ASSERT_EQ(pus.size(), 1u);
  EXPECT_EQ(pus.at("a01n01"), summit_pus());
}

TEST(ErfText, SummitNodeInLogicalIndexing) {
  const launcher::Job job = make_job({"a01n01"}, 6, kSummitCpus);
  EXPECT_EQ(erf_text(job, summit_options({"a01n01"})),
            "cpu_index_using: logical\n"
            "rank: 0: { hostname: a01n01; cpu: {0-27}; gpu: {0} } : app 0\n"
            "rank: 1: { hostname: a01n01; cpu: {28-55}; gpu: {1} } : app 0\n"
            "rank: 2: { hostname: a01n01; cpu: {56-83}; gpu: {2} } : app 0\n"
            "rank: 3: { hostname: a01n01; cpu: {84-111}; gpu: {3} } : app 0\n"
            "rank: 4: { hostname: a01n01; cpu: {112-139}; gpu: {4} } : app 0\n"
            "rank: 5: { hostname: a01n01; cpu: {140-167}; gpu: {5} } : app 0\n");
}

TEST(ErfText, PhysicalWhenAHostsThreadsAreUnknown) {
  const launcher::Job job = make_job({"a01n01", "a01n02"}, 6, kSummitCpus);
  const std::string erf = erf_text(job, summit_options({"a01n01"}));
  EXPECT_THAT(erf, ::testing::StartsWith("cpu_index_using: physical\n"));
  EXPECT_THAT(erf, HasSubstr("rank: 9: { hostname: a01n02; cpu: {88-115}; gpu: {3} } : app 0\n"));
}

TEST(ErfText, RanksInRankOrderWhateverTheTopologysOrder) {
  launcher::Job job = make_job({"a01n01", "a01n02"}, 1, {"0-3"});
  std::swap(job.topology.ranks[0], job.topology.ranks[1]);
  EXPECT_EQ(erf_text(job, {}),
            "cpu_index_using: physical\n"
            "rank: 0: { hostname: a01n01; cpu: {0-3}; gpu: {0} } : app 0\n"
            "rank: 1: { hostname: a01n02; cpu: {0-3}; gpu: {0} } : app 0\n");
}

TEST(ErfText, SplitCpuSetsAndNoGpu) {
  launcher::Job job = make_job({"n1"}, 1, {"0-3,8-11"});
  job.topology.ranks[0].gpu = -1;
  EXPECT_EQ(erf_text(job, {}),
            "cpu_index_using: physical\n"
            "rank: 0: { hostname: n1; cpu: {0-3,8-11} } : app 0\n");
}

TEST(ErfText, UnboundRanksShareTheirHostsThreads) {
  launcher::Job job = make_job({"a01n01"}, 2, {"", ""});
  job.topology.ranks[1].gpu = 0;
  EXPECT_EQ(erf_text(job, summit_options({"a01n01"})),
            "cpu_index_using: logical\n"
            "overlapping_rs: allow\n"
            "oversubscribe_cpu: allow\n"
            "oversubscribe_gpu: allow\n"
            "rank: 0: { hostname: a01n01; cpu: {0-167}; gpu: {0} } : app 0\n"
            "rank: 1: { hostname: a01n01; cpu: {0-167}; gpu: {0} } : app 0\n");
}

TEST(ErfText, UnboundRankOnUnknownHardwareIsAnError) {
  const launcher::Job job = make_job({"a01n01"}, 1, {""});
  EXPECT_EQ(error_of([&] { erf_text(job, {}); }),
            "jsrun launcher: rank 0 on a01n01 has no CPU set and the host's hardware is unknown "
            "(--no-probe), but every line of an ERF needs CPUs; let ddlrun probe the hosts, "
            "give --host-xml, or use --jsrun-mode rs");
}

TEST(ErfText, CpuOutsideTheUsableThreadsIsAnError) {
  const launcher::Job job = make_job({"a01n01"}, 1, {"80-87"});
  EXPECT_EQ(error_of([&] { erf_text(job, summit_options({"a01n01"})); }),
            "jsrun launcher: rank 0 is planned on CPU 84 of a01n01, which is not among the "
            "host's usable hardware threads; check the host's hardware (--host-xml) or use "
            "--jsrun-mode rs");
}

TEST(JsrunCommand, ErfFormForwardsTheRuntimesAndLsfsVariables) {
  const launcher::Job job = make_job({"a01n01", "a01n02"}, 6, kSummitCpus);
  JsrunOptions o = summit_options({"a01n01", "a01n02"});
  o.smpiargs = "-gpu";
  const Command c =
      jsrun_command(job, launch_options({"PATH=/usr/bin", "LSB_JOBID=4242", "HOME=/root"}),
                    job_env(), "/tmp/w/ddlrun.erf", o);
  EXPECT_THAT(c.argv, ElementsAre("jsrun", "--erf_input", "/tmp/w/ddlrun.erf", "--smpiargs", "-gpu",
                                  "-E", "DDL_TOPOLOGY_FILE", "-E", "DDL_JOB_TOKEN", "-E", "PATH",
                                  "-E", "PYTHONPATH", "-E", "LD_LIBRARY_PATH", "-E", "LSB_JOBID",
                                  "/opt/ddl/bin/ddlrun", "--rank-exec", "--", "python", "train.py",
                                  "--batch", "64"));
  EXPECT_EQ(c.erf, erf_text(job, o));
  EXPECT_EQ(c.env, job_env().set);
  for (const std::string& w : c.argv)
    EXPECT_EQ(w.find("abc"), std::string::npos) << "the job token is on the command line";
}

TEST(JsrunCommand, ResourceSetForm) {
  const launcher::Job job = make_job({"a01n01", "a01n02"}, 6, kSummitCpus);
  JsrunOptions o;
  o.mode = JsrunMode::kResourceSets;
  const Command c = jsrun_command(
      job,
      launch_options({"LSB_JOBID=4242", "LSB_MCPU_HOSTS=batch2 1 a01n01 42 a01n02 42 a01n03 42"}),
      job_env(), "/unused", o);
  EXPECT_THAT(c.argv, ElementsAre("jsrun", "-n", "2", "-r", "1", "-a", "6", "-c", "ALL_CPUS", "-g",
                                  "ALL_GPUS", "-b", "none", "-d", "packed", "-E",
                                  "DDL_TOPOLOGY_FILE", "-E", "DDL_JOB_TOKEN", "-E", "PATH", "-E",
                                  "PYTHONPATH", "-E", "LD_LIBRARY_PATH", "-E", "LSB_JOBID", "-E",
                                  "LSB_MCPU_HOSTS", "/opt/ddl/bin/ddlrun", "--rank-exec", "--",
                                  "python", "train.py", "--batch", "64"));
  EXPECT_EQ(c.erf, "");
}

TEST(JsrunCommand, ResourceSetsNeedTheLsfHostOrder) {
  const launcher::Job job = make_job({"a01n02", "a01n01"}, 6, kSummitCpus);
  JsrunOptions o;
  o.mode = JsrunMode::kResourceSets;
  EXPECT_EQ(error_of([&] {
              jsrun_command(job, launch_options({"LSB_MCPU_HOSTS=batch2 1 a01n01 42 a01n02 42"}),
                            job_env(), "", o);
            }),
            "jsrun launcher: resource sets fill the LSF job's hosts in its order (a01n01 "
            "a01n02), but the plan's hosts are a01n02 a01n01; use --jsrun-mode erf, or drop "
            "-H/--hostfile");
}

TEST(JsrunCommand, ResourceSetsNeedEvenBlocks) {
  launcher::Job job = make_job({"a01n01", "a01n02"}, 2, {"0-3", "4-7"});
  JsrunOptions o;
  o.mode = JsrunMode::kResourceSets;
  job.topology.ranks.pop_back();
  EXPECT_EQ(error_of([&] { jsrun_command(job, launch_options({}), job_env(), "", o); }),
            "jsrun launcher: resource sets need the same number of ranks on every host, but "
            "a01n01 has 2 and a01n02 has 1; use --jsrun-mode erf, or -np/--accelerators for an "
            "even plan");
  job = make_job({"a01n01", "a01n02"}, 2, {"0-3", "4-7"});
  std::swap(job.topology.ranks[1].host, job.topology.ranks[2].host);
  EXPECT_EQ(error_of([&] { jsrun_command(job, launch_options({}), job_env(), "", o); }),
            "jsrun launcher: the plan puts non-consecutive ranks on a01n01 (rank 2), which "
            "resource sets cannot express; use --jsrun-mode erf");
}

TEST(JsrunBackend, OutsideAnLsfJob) {
  EXPECT_EQ(error_of([] { check_allocation({"PATH=/usr/bin"}); }),
            "jsrun launcher: not inside an LSF job ($LSB_JOBID is not set); run ddlrun inside a "
            "bsub script or `bsub -Is`, or use --launcher ssh or --launcher mpirun");
  EXPECT_EQ(error_of([] { check_allocation({"LSB_JOBID=1"}); }), "(no error)");
}

TEST(JsrunBackend, JsrunNotOnPath) {
  const launcher::Job job = make_job({"a01n01"}, 1, {"0-3"});
  launcher::LaunchOptions lo = launch_options({"LSB_JOBID=7", "PATH=/nonexistent"});
  lo.work_dir = "/tmp";
  EXPECT_EQ(error_of([&] { make_jsrun_backend(job, lo); }),
            "jsrun launcher: jsrun is not on $PATH; load the site's jsrun (Summit: it is in "
            "/opt/ibm/jsm/bin), or use --launcher ssh or --launcher mpirun");
}

}  // namespace
}  // namespace ddl::lsf
