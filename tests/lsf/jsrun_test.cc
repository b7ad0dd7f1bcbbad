// The jsrun backend's pure parts: the ERF and the jsrun command built from a plan, and the
// errors for plans and environments they cannot serve (text compared exactly).

#include "lsf/jsrun.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "launcher/external.h"
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

/// The value of `name` in `env`, or "(unset)".
std::string value_of(const launcher::JobEnvironment& env, const std::string& name) {
  for (const launcher::EnvVar& e : env.set) {
    if (e.first == name) return e.second;
  }
  return "(unset)";
}

bool names(const launcher::JobEnvironment& env, const std::string& name) {
  return std::find(env.names.begin(), env.names.end(), name) != env.names.end();
}

launcher::Job with_topology(launcher::Job job, const std::string& path) {
  job.topology_path = path;
  job.token = "abc";
  return job;
}

TEST(JsrunEnvironment, OneHostStillGetsTheTopologyInline) {
  const launcher::Job job =
      with_topology(make_job({"a01n01"}, 6, kSummitCpus), "/tmp/w/topology.yaml");
  launcher::LaunchOptions lo = launch_options({"PATH=/usr/bin"});
  lo.work_dir = "/tmp/w";
  const launcher::JobEnvironment env =
      jsrun_environment(job, launcher::Rendezvous{"a01n01", 1234, 0}, lo);
  EXPECT_EQ(value_of(env, "DDL_TOPOLOGY_FILE"), "/tmp/w/topology.yaml");
  const std::string text = value_of(env, "DDL_TOPOLOGY_TEXT");
  ASSERT_NE(text, "(unset)") << "one host, but not this one: the ranks need the text";
  EXPECT_EQ(text, comm::format_topology(job.topology));
  EXPECT_THAT(env.names, ElementsAre("DDL_TOPOLOGY_FILE", "DDL_JOB_TOKEN", "MASTER_ADDR",
                                     "MASTER_PORT", "DDL_OPTIONS", "DDL_TOPOLOGY_TEXT", "PATH"));
}

TEST(JsrunEnvironment, SeveralHostsOnce) {
  const launcher::Job job =
      with_topology(make_job({"a01n01", "a01n02"}, 6, kSummitCpus), "/tmp/w/topology.yaml");
  launcher::LaunchOptions lo = launch_options({});
  lo.work_dir = "/tmp/w";
  const launcher::JobEnvironment env =
      jsrun_environment(job, launcher::Rendezvous{"a01n01", 1234, 0}, lo);
  EXPECT_EQ(std::count(env.names.begin(), env.names.end(), "DDL_TOPOLOGY_TEXT"), 1);
  EXPECT_EQ(value_of(env, "DDL_TOPOLOGY_TEXT"), comm::format_topology(job.topology));
}

TEST(JsrunEnvironment, ASharedTopologyFileIsNotInlined) {
  const launcher::Job job =
      with_topology(make_job({"a01n01"}, 6, kSummitCpus), "/gpfs/me/plan.topology");
  launcher::LaunchOptions lo = launch_options({});
  lo.work_dir = "/tmp/w";
  const launcher::JobEnvironment env =
      jsrun_environment(job, launcher::Rendezvous{"a01n01", 1234, 0}, lo);
  EXPECT_EQ(value_of(env, "DDL_TOPOLOGY_FILE"), "/gpfs/me/plan.topology");
  EXPECT_FALSE(names(env, "DDL_TOPOLOGY_TEXT"));
}

TEST(JsrunEnvironment, TooLargeForTheEnvironment) {
  std::vector<std::string> hosts;
  for (int i = 0; i < 200; ++i)
    hosts.push_back("a" + std::to_string(1000 + i));
  const launcher::Job job = with_topology(make_job(hosts, 6, kSummitCpus), "/tmp/w/t.yaml");
  launcher::LaunchOptions lo = launch_options({});
  lo.work_dir = "/tmp/w";
  const std::string error = error_of([&] { jsrun_environment(job, {"a1000", 1, 0}, lo); });
  EXPECT_THAT(error, ::testing::MatchesRegex(
                         "jsrun launcher: the plan's topology \\([0-9]+ bytes\\) is too large to "
                         "hand to the ranks in their environment, and only this node has "
                         "ddlrun's copy; put it on a shared file system with --topology-file "
                         "FILE \\(Summit: under \\$MEMBERWORK\\)"));
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
  const std::map<std::string, std::shared_ptr<const mapper::Inventory>> inventories = {
      {"a01n01", std::make_shared<const mapper::Inventory>(mapper::probe_hwloc(po))}};
  const auto pus = usable_pus(inventories);
  ASSERT_EQ(pus.size(), 1u);
  EXPECT_EQ(pus.at("a01n01"), summit_pus());
}

TEST(ErfText, SummitNodeInLogicalIndexing) {
  const launcher::Job job = make_job({"a01n01"}, 6, kSummitCpus);
  EXPECT_EQ(erf_text(job, summit_options({"a01n01"})),
            "cpu_index_using: logical\n"
            "overlapping_rs: allow\n"
            "rank: 0: { hostname: a01n01; cpu: {0-27}; gpu: {0-5} } : app 0\n"
            "rank: 1: { hostname: a01n01; cpu: {28-55}; gpu: {0-5} } : app 0\n"
            "rank: 2: { hostname: a01n01; cpu: {56-83}; gpu: {0-5} } : app 0\n"
            "rank: 3: { hostname: a01n01; cpu: {84-111}; gpu: {0-5} } : app 0\n"
            "rank: 4: { hostname: a01n01; cpu: {112-139}; gpu: {0-5} } : app 0\n"
            "rank: 5: { hostname: a01n01; cpu: {140-167}; gpu: {0-5} } : app 0\n");
}

TEST(ErfText, PhysicalWhenAHostsThreadsAreUnknown) {
  const launcher::Job job = make_job({"a01n01", "a01n02"}, 6, kSummitCpus);
  const std::string erf = erf_text(job, summit_options({"a01n01"}));
  EXPECT_THAT(erf, ::testing::StartsWith("cpu_index_using: physical\n"));
  EXPECT_THAT(erf, HasSubstr("rank: 9: { hostname: a01n02; cpu: {88-115}; gpu: {0-5} } : app 0\n"));
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
  job.topology.ranks[1].gpu = -1;
  EXPECT_EQ(erf_text(job, summit_options({"a01n01"})),
            "cpu_index_using: logical\n"
            "overlapping_rs: allow\n"
            "oversubscribe_cpu: allow\n"
            "rank: 0: { hostname: a01n01; cpu: {0-167}; gpu: {0} } : app 0\n"
            "rank: 1: { hostname: a01n01; cpu: {0-167}; gpu: {0} } : app 0\n");
}

TEST(ErfText, EachHostsRanksSeeItsGpusAsTheHostNumbersThem) {
  // One rank on GPU 0 of n1 sees GPU 0 alone; the ranks of n2 (on GPUs 2 and 4) see 0-4, so
  // that GPU 4 is CUDA device 4 for them as for libddl; n3 uses no GPU.
  launcher::Job job = make_job({"n1", "n2", "n3"}, 2, {"0-3", "4-7"});
  job.topology.ranks[1].gpu = -1;
  job.topology.ranks[2].gpu = 2;
  job.topology.ranks[3].gpu = 4;
  job.topology.ranks[4].gpu = -1;
  job.topology.ranks[5].gpu = -1;
  EXPECT_EQ(erf_text(job, {}),
            "cpu_index_using: physical\n"
            "overlapping_rs: allow\n"
            "rank: 0: { hostname: n1; cpu: {0-3}; gpu: {0} } : app 0\n"
            "rank: 1: { hostname: n1; cpu: {4-7}; gpu: {0} } : app 0\n"
            "rank: 2: { hostname: n2; cpu: {0-3}; gpu: {0-4} } : app 0\n"
            "rank: 3: { hostname: n2; cpu: {4-7}; gpu: {0-4} } : app 0\n"
            "rank: 4: { hostname: n3; cpu: {0-3} } : app 0\n"
            "rank: 5: { hostname: n3; cpu: {4-7} } : app 0\n");
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
  const launcher::ExternalCommand c =
      jsrun_command(job, launch_options({"PATH=/usr/bin", "LSB_JOBID=4242", "HOME=/root"}),
                    job_env(), "/tmp/w/ddlrun.erf", o);
  EXPECT_THAT(c.argv, ElementsAre("jsrun", "--erf_input", "/tmp/w/ddlrun.erf", "--smpiargs", "-gpu",
                                  "-E", "DDL_TOPOLOGY_FILE", "-E", "DDL_JOB_TOKEN", "-E", "PATH",
                                  "-E", "PYTHONPATH", "-E", "LD_LIBRARY_PATH", "-E", "LSB_JOBID",
                                  "/opt/ddl/bin/ddlrun", "--rank-exec", "--", "python", "train.py",
                                  "--batch", "64"));
  EXPECT_EQ(c.work_file.text, erf_text(job, o));
  EXPECT_EQ(c.env, job_env().set);
  for (const std::string& w : c.argv)
    EXPECT_EQ(w.find("abc"), std::string::npos) << "the job token is on the command line";
}

TEST(JsrunCommand, ResourceSetForm) {
  const launcher::Job job = make_job({"a01n01", "a01n02"}, 6, kSummitCpus);
  JsrunOptions o;
  o.mode = JsrunMode::kResourceSets;
  const launcher::ExternalCommand c = jsrun_command(
      job,
      launch_options({"LSB_JOBID=4242", "LSB_MCPU_HOSTS=batch2 1 a01n01 42 a01n02 42 a01n03 42"}),
      job_env(), "/unused", o);
  EXPECT_THAT(c.argv, ElementsAre("jsrun", "-n", "2", "-r", "1", "-a", "6", "-c", "ALL_CPUS", "-g",
                                  "ALL_GPUS", "-b", "none", "-d", "packed", "-E",
                                  "DDL_TOPOLOGY_FILE", "-E", "DDL_JOB_TOKEN", "-E", "PATH", "-E",
                                  "PYTHONPATH", "-E", "LD_LIBRARY_PATH", "-E", "LSB_JOBID", "-E",
                                  "LSB_MCPU_HOSTS", "/opt/ddl/bin/ddlrun", "--rank-exec", "--",
                                  "python", "train.py", "--batch", "64"));
  EXPECT_EQ(c.work_file.text, "");
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
  EXPECT_EQ(error_of([&] { launcher::make_external_backend(*make_jsrun_launcher(lo), job, lo); }),
            "jsrun launcher: jsrun is not on $PATH; load the site's jsrun (Summit: it is in "
            "/opt/ibm/jsm/bin), or use --launcher ssh or --launcher mpirun");
}

}  // namespace
}  // namespace ddl::lsf
