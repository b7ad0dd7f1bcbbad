#include "launcher/mpirun/mpirun.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "launcher/external.h"
#include "tests/launcher/test_util.h"

namespace ddl::launcher::mpirun {
namespace {

using test::each;
using test::words;

/// Two hosts of two ranks each; CPU sets as given, by rank.
Job two_by_two(const std::vector<std::string>& cpus) {
  Job job;
  comm::Topology& t = job.topology;
  t.job_id = "ddlrun-42";
  t.hosts = {{0, "node01", "10.200.0.1", {}}, {1, "node02", "10.200.0.2", {}}};
  for (int r = 0; r < 4; ++r) {
    comm::RankPlacement p;
    p.rank = r;
    p.local_rank = r % 2;
    p.host = r / 2;
    p.gpu = r % 2;
    p.cpus = comm::CpuSet::parse(cpus[static_cast<size_t>(r)]);
    t.ranks.push_back(p);
  }
  t.mode = comm::parse_mode("r:2x2");
  t.rings = comm::default_rings({2, 2});
  job.argv = {"python", "train.py", "--lr", "0.1"};
  job.topology_path = "/tmp/ddl/topology";
  job.token = "feedc0de";
  return job;
}

LaunchOptions options() {
  LaunchOptions o;
  o.ddlrun_path = "/opt/ddl/bin/ddlrun";
  o.work_dir = "/tmp/ddl";
  o.environ = {"PATH=/usr/bin:/bin", "HOME=/root"};
  return o;
}

Rendezvous rendezvous() {
  return {"10.200.0.1", 29500, 29501};
}

TEST(MpirunTest, BoundRanksGetAPhysicalRankfileAndEveryVariableByName) {
  const Job job = two_by_two({"0-3", "4-7", "0-3", "4-7"});
  const LaunchOptions o = options();
  const JobEnvironment env = job_environment(job, rendezvous(), o.environ);
  const ExternalCommand c = mpirun_command(job, o, env, "/tmp/ddl/rankfile", false);
  EXPECT_EQ(c.work_file.text,
            "# ddlrun job ddlrun-42: 4 ranks on 2 hosts; slot= lists OS (physical) PU numbers "
            "(--mca rmaps_rank_file_physical 1)\n"
            "rank 0=node01 slot=0-3\n"
            "rank 1=node01 slot=4-7\n"
            "rank 2=node02 slot=0-3\n"
            "rank 3=node02 slot=4-7\n");
  const std::vector<std::string> want =
      words({{"mpirun", "-n", "4", "--rankfile", "/tmp/ddl/rankfile", "--mca",
              "rmaps_rank_file_physical", "1", "--use-hwthread-cpus"},
             each("-x", {"DDL_TOPOLOGY_FILE", "DDL_JOB_TOKEN", "DDL_RENDEZVOUS", "MASTER_ADDR",
                         "MASTER_PORT", "DDL_OPTIONS", "DDL_TOPOLOGY_TEXT", "PATH"}),
             {"/opt/ddl/bin/ddlrun", "--rank-exec", "--", "python", "train.py", "--lr", "0.1"}});
  EXPECT_EQ(c.argv, want);
  const std::vector<EnvVar> want_env = {{"DDL_TOPOLOGY_FILE", "/tmp/ddl/topology"},
                                        {"DDL_JOB_TOKEN", "feedc0de"},
                                        {"DDL_RENDEZVOUS", "10.200.0.1:29501"},
                                        {"MASTER_ADDR", "10.200.0.1"},
                                        {"MASTER_PORT", "29500"},
                                        {"DDL_OPTIONS", "-mode r:2x2"},
                                        {"DDL_TOPOLOGY_TEXT", comm::format_topology(job.topology)}};
  EXPECT_EQ(c.env, want_env);
}

TEST(MpirunTest, AnMcaParameterInMpiargsReplacesDdlruns) {
  const Job job = two_by_two({"", "", "", ""});
  LaunchOptions o = options();
  o.ssh.port = 2222;
  o.mpiargs = {"--mca", "plm_rsh_args", "-F cfg", "-mca", "rtc", "hwloc"};
  const ExternalCommand c =
      mpirun_command(job, o, job_environment(job, rendezvous(), {}), "/w/rankfile", false);
  const std::vector<std::string> want =
      words({{"mpirun", "-n", "4", "--rankfile", "/w/rankfile", "--mca", "rmaps_rank_file_physical",
              "1", "--use-hwthread-cpus"},
             {"--oversubscribe", "-x"}});
  EXPECT_EQ(std::vector<std::string>(c.argv.begin(), c.argv.begin() + 11), want);
  EXPECT_EQ(std::count(c.argv.begin(), c.argv.end(), "plm_rsh_args"), 1);
  EXPECT_EQ(std::count(c.argv.begin(), c.argv.end(), "rtc"), 1);
}

TEST(MpirunTest, RendezvousOnlyWhenDdlrunServesOne) {
  const Job job = two_by_two({"0", "1", "0", "1"});
  Rendezvous r = rendezvous();
  r.ddl_port = 0;
  JobEnvironment env = job_environment(job, r, {});
  for (const EnvVar& e : env.set)
    EXPECT_NE(e.first, "DDL_RENDEZVOUS");
  r.ddl_address = "fe80::1";
  r.ddl_port = 7000;
  env = job_environment(job, r, {});
  EXPECT_EQ(env.set[2], (EnvVar{"DDL_RENDEZVOUS", "[fe80::1]:7000"}));
}

TEST(MpirunTest, PythonDirOnlyWhenDdlrunHasAPackage) {
  Job job = two_by_two({"0", "1", "0", "1"});
  auto python_dir = [](const JobEnvironment& env) {
    for (const EnvVar& e : env.set) {
      if (e.first == "DDL_PYTHON_DIR") return e.second;
    }
    return std::string("unset");
  };
  EXPECT_EQ(python_dir(job_environment(job, rendezvous(), {})), "unset");
  job.python_dir = "/opt/ddl/python";
  EXPECT_EQ(python_dir(job_environment(job, rendezvous(), {})), "/opt/ddl/python");
}

TEST(MpirunTest, TheTokenIsNeverOnTheCommandLine) {
  Job job = two_by_two({"0", "1", "0", "1"});
  job.token = "0123456789abcdef0123456789abcdef";
  job.exports = {{"SECRET", job.token}};
  const LaunchOptions o = options();
  const ExternalCommand c = mpirun_command(job, o, job_environment(job, rendezvous(), o.environ),
                                           "/tmp/ddl/rankfile", false);
  for (const std::string& word : c.argv)
    EXPECT_EQ(word.find(job.token), std::string::npos) << word;
  EXPECT_EQ(c.work_file.text.find(job.token), std::string::npos);
}

TEST(MpirunTest, UnboundRanksTurnOpenMpiBindingOffAndOversubscribe) {
  const Job job = two_by_two({"", "", "2", ""});
  const LaunchOptions o = options();
  const ExternalCommand c =
      mpirun_command(job, o, job_environment(job, rendezvous(), o.environ), "/w/rankfile", false);
  EXPECT_EQ(c.work_file.text,
            "# ddlrun job ddlrun-42: 4 ranks on 2 hosts; slot= lists OS (physical) PU numbers "
            "(--mca rmaps_rank_file_physical 1)\n"
            "# some ranks have no CPU set: Open MPI binds nothing (--mca rtc ^hwloc), slot=0 only "
            "places them, and ddlrun --rank-exec binds the ranks that have a CPU set\n"
            "rank 0=node01 slot=0\n"
            "rank 1=node01 slot=0\n"
            "rank 2=node02 slot=2\n"
            "rank 3=node02 slot=0\n");
  const std::vector<std::string> head(c.argv.begin(), c.argv.begin() + 14);
  const std::vector<std::string> want =
      words({{"mpirun", "-n", "4", "--rankfile", "/w/rankfile", "--mca", "rmaps_rank_file_physical",
              "1", "--use-hwthread-cpus"},
             {"--mca", "rtc", "^hwloc", "--oversubscribe", "-x"}});
  EXPECT_EQ(head, want);
}

TEST(MpirunTest, RankfileLinesFollowRankOrderWhateverThePlanOrder) {
  Job job = two_by_two({"0", "1", "0", "1"});
  std::reverse(job.topology.ranks.begin(), job.topology.ranks.end());
  const LaunchOptions o = options();
  const ExternalCommand c =
      mpirun_command(job, o, job_environment(job, rendezvous(), o.environ), "/w/rankfile", false);
  EXPECT_NE(
      c.work_file.text.find("rank 0=node01 slot=0\nrank 1=node01 slot=1\nrank 2=node02 slot=0\n"
                            "rank 3=node02 slot=1\n"),
      std::string::npos)
      << c.work_file.text;
}

TEST(MpirunTest, RunAsRootOnlyWhenRootAndBothVariablesAreOne) {
  const Job job = two_by_two({"0", "1", "0", "1"});
  LaunchOptions o = options();
  auto has_flag = [&](bool as_root) {
    const ExternalCommand c = mpirun_command(job, o, job_environment(job, rendezvous(), o.environ),
                                             "/w/rankfile", as_root);
    return std::find(c.argv.begin(), c.argv.end(), "--allow-run-as-root") != c.argv.end();
  };
  EXPECT_FALSE(has_flag(true));
  o.environ.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
  EXPECT_FALSE(has_flag(true));
  o.environ.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  EXPECT_TRUE(has_flag(true));
  EXPECT_FALSE(has_flag(false));
  o.environ.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=0");  // the last one wins
  EXPECT_FALSE(has_flag(true));
}

TEST(MpirunTest, MpiargsSshSettingsAndExportsPassThrough) {
  Job job = two_by_two({"0", "1", "0", "1"});
  job.exports = {{"NCCL_DEBUG", "INFO"}, {"MASTER_PORT", "1234"}};
  job.cores = {2, 2, 2, 2};
  LaunchOptions o = options();
  o.mpiargs = {"--mca", "btl_tcp_if_include", "eth0", "-gpu"};
  o.ssh.port = 2222;
  o.ssh.user = "alice";
  o.ssh.ssh_config = "/etc/ddl ssh config";
  o.environ.push_back("LD_LIBRARY_PATH=/opt/lib");
  const JobEnvironment env = job_environment(job, rendezvous(), o.environ);
  const ExternalCommand c = mpirun_command(job, o, env, "/w/rankfile", false);
  const std::vector<std::string> tail(c.argv.begin() + 9, c.argv.end());
  const std::vector<std::string> want =
      words({{"--mca", "plm_rsh_args", "-F '/etc/ddl ssh config' -p 2222 -l alice"},
             each("-x", {"DDL_TOPOLOGY_FILE", "DDL_JOB_TOKEN", "DDL_RENDEZVOUS", "MASTER_ADDR",
                         "MASTER_PORT", "DDL_OPTIONS", "DDL_CORES", "DDL_TOPOLOGY_TEXT",
                         "DDL_EXPORTS", "NCCL_DEBUG", "PATH", "LD_LIBRARY_PATH"}),
             {"--mca", "btl_tcp_if_include", "eth0", "-gpu", "/opt/ddl/bin/ddlrun", "--rank-exec",
              "--", "python", "train.py", "--lr", "0.1"}});
  EXPECT_EQ(tail, want);
  // The user's MASTER_PORT wins, in place; the exports are listed for --rank-exec.
  const std::vector<EnvVar> want_env = {{"DDL_TOPOLOGY_FILE", "/tmp/ddl/topology"},
                                        {"DDL_JOB_TOKEN", "feedc0de"},
                                        {"DDL_RENDEZVOUS", "10.200.0.1:29501"},
                                        {"MASTER_ADDR", "10.200.0.1"},
                                        {"MASTER_PORT", "1234"},
                                        {"DDL_OPTIONS", "-mode r:2x2"},
                                        {"DDL_CORES", "4*2"},
                                        {"DDL_TOPOLOGY_TEXT", comm::format_topology(job.topology)},
                                        {"DDL_EXPORTS", "NCCL_DEBUG MASTER_PORT"},
                                        {"NCCL_DEBUG", "INFO"}};
  EXPECT_EQ(env.set, want_env);
}

TEST(ExternalTest, CoresRoundTripRunLengthEncoded) {
  EXPECT_EQ(encode_cores({}), "");
  EXPECT_EQ(encode_cores({0, 0}), "");
  EXPECT_EQ(encode_cores({7, 7, 7, 6, 7}), "3*7,1*6,1*7");
  EXPECT_EQ(decode_cores("3*7,1*6,1*7"), (std::vector<int>{7, 7, 7, 6, 7}));
  EXPECT_EQ(decode_cores(std::string(encode_cores(std::vector<int>(27648, 7)))).size(), 27648u);
  EXPECT_TRUE(decode_cores("7").empty());
  EXPECT_TRUE(decode_cores("3*x").empty());
  EXPECT_TRUE(decode_cores("0*1").empty());
}

TEST(ExternalTest, ShellJoinQuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(shell_join({"mpirun", "-x", "A", "a b", "it's", "", "$(x);y", "/p/q-1.2,3"}),
            "mpirun -x A 'a b' 'it'\\''s' '' '$(x);y' /p/q-1.2,3");
}

TEST(ExternalTest, FindInPathAndEnvironValue) {
  EXPECT_EQ(find_in_path("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(find_in_path("no-such-program-ddl", "/bin:/usr/bin"), "");
  EXPECT_EQ(find_in_path("/bin/sh", ""), "/bin/sh");
  EXPECT_EQ(environ_value({"A=1", "AB=2", "A=3"}, "A"), "3");
  EXPECT_EQ(environ_value({"A=1"}, "B"), std::nullopt);
  EXPECT_EQ(environ_value({"A="}, "A"), "");
}

}  // namespace
}  // namespace ddl::launcher::mpirun
