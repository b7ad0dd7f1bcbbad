#include "launcher/rank_exec.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "comm/topology.h"
#include "launcher/external.h"

namespace ddl::launcher {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status = -1;  ///< exit status of the child
  std::string err;  ///< what it printed on stderr
};

/// Runs rank_exec_main(args) in a child process whose environment is exactly `env`, and
/// returns how it ended and its stderr.
Outcome run_rank_exec(const std::map<std::string, std::string>& env,
                      const std::vector<std::string>& args) {
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    dup2(pipe_fds[1], 2);
    clearenv();
    for (const auto& [name, value] : env)
      setenv(name.c_str(), value.c_str(), 1);
    _exit(rank_exec_main(args));
  }
  close(pipe_fds[1]);
  Outcome out;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0)
    out.err.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The PUs this process may run on.
comm::CpuSet my_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> pus;
  for (int pu = 0; pu < CPU_SETSIZE; ++pu) {
    if (CPU_ISSET(pu, &set)) pus.push_back(pu);
  }
  return comm::CpuSet::of(pus);
}

class RankExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ddl_rank_exec_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Writes a 2-rank, 1-host topology; rank 1 gets `rank1_cpus`.
  std::string write_topology(const comm::CpuSet& rank1_cpus) {
    comm::Topology t;
    t.job_id = "ddlrun-7";
    t.hosts = {{0, "localhost", "127.0.0.1", {}}};
    t.ranks.resize(2);
    for (int r = 0; r < 2; ++r) {
      t.ranks[r].rank = r;
      t.ranks[r].local_rank = r;
    }
    t.ranks[1].cpus = rank1_cpus;
    t.mode = comm::parse_mode("r:2");
    t.rings = comm::default_rings({2});
    const std::string path = (dir_ / "topology").string();
    comm::write_topology_file(t, path);
    return path;
  }

  /// The environment an external launcher gives rank 1.
  std::map<std::string, std::string> launcher_env(const std::string& topology) {
    return {{"PATH", "/usr/bin:/bin"},
            {"OMPI_COMM_WORLD_RANK", "1"},
            {"DDL_TOPOLOGY_FILE", topology},
            {"DDL_JOB_TOKEN", "c0ffee"},
            {"DDL_RENDEZVOUS", "127.0.0.1:29501"},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", "29500"}};
  }

  fs::path dir_;
};

TEST(LauncherRankTest, FirstSetVariableWins) {
  static std::map<std::string, std::string> vars;
  const hostfiles::GetEnv from_map = [](const char* name, void*) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  vars = {};
  EXPECT_EQ(launcher_rank(from_map), std::nullopt);
  vars = {{"SLURM_PROCID", "5"}, {"JSM_NAMESPACE_RANK", "6"}};
  EXPECT_EQ(launcher_rank(from_map), 5);
  vars = {{"PMIX_RANK", "3"}, {"SLURM_PROCID", "5"}};
  EXPECT_EQ(launcher_rank(from_map), 3);
  vars = {{"OMPI_COMM_WORLD_RANK", "2"}, {"PMIX_RANK", "3"}};
  EXPECT_EQ(launcher_rank(from_map), 2);
  vars = {{"DDL_RANK", "1"}, {"OMPI_COMM_WORLD_RANK", "2"}};
  EXPECT_EQ(launcher_rank(from_map), 1);
  vars = {{"DDL_RANK", ""}, {"OMPI_COMM_WORLD_RANK", "x"}, {"JSM_NAMESPACE_RANK", "4"}};
  EXPECT_EQ(launcher_rank(from_map), 4);
}

TEST_F(RankExecTest, SetsTheRanksEnvironmentAndExecsTheProgramWithItsArguments) {
  auto env = launcher_env(write_topology({}));
  env["DDL_EXPORTS"] = "MASTER_PORT MY_VAR";
  env["MY_VAR"] = "mine";
  env["MASTER_PORT"] = "4242";  // exported by the user: wins over ddlrun's
  const std::string out = (dir_ / "out").string();
  const Outcome o = run_rank_exec(
      env, {"--", "sh", "-c", "env > \"$0\"; printf '%s\\n' \"$@\" > \"$0.args\"; exit 3", out,
            "a b", "'q\"", "$(x);y"});
  EXPECT_EQ(o.status, 3) << o.err;
  EXPECT_EQ(o.err, "");
  const std::string vars = read_file(out);
  for (const char* want :
       {"\nDDL_RANK=1\n", "\nRANK=1\n", "\nLOCAL_RANK=1\n", "\nWORLD_SIZE=2\n",
        "\nDDL_JOB_ID=ddlrun-7\n", "\nDDL_JOB_TOKEN=c0ffee\n", "\nMASTER_PORT=4242\n",
        "\nMY_VAR=mine\n", "\nDDL_RENDEZVOUS=127.0.0.1:29501\n", "\nDDL_OPTIONS=-mode r:2\n",
        "\nDDL_CPUS=\n"}) {
    EXPECT_NE(("\n" + vars).find(want), std::string::npos) << want << " in\n" << vars;
  }
  EXPECT_EQ(("\n" + vars).find("\nOMP_NUM_THREADS="), std::string::npos);
  EXPECT_EQ(read_file(out + ".args"), "a b\n'q\"\n$(x);y\n");
}

TEST_F(RankExecTest, RendezvousStaysUnsetUnderPmixAndKeepsAnIpv6Address) {
  auto env = launcher_env(write_topology({}));
  env.erase("DDL_RENDEZVOUS");
  const std::string out = (dir_ / "out").string();
  const std::vector<std::string> args = {
      "sh", "-c", "echo \"${DDL_RENDEZVOUS-unset} $MASTER_ADDR:$MASTER_PORT\" > \"$0\"", out};
  Outcome o = run_rank_exec(env, args);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(read_file(out), "unset 127.0.0.1:29500\n");
  env["DDL_RENDEZVOUS"] = "[fe80::1]:7000";
  o = run_rank_exec(env, args);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(read_file(out), "[fe80::1]:7000 127.0.0.1:29500\n");
}

TEST_F(RankExecTest, PutsDdlrunsPythonPackageFirstOnPythonPath) {
  auto env = launcher_env(write_topology({}));
  const std::string out = (dir_ / "out").string();
  const std::vector<std::string> args = {"sh", "-c", "echo \"${PYTHONPATH-unset}\" > \"$0\"", out};
  Outcome o = run_rank_exec(env, args);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(read_file(out), "unset\n");
  env["DDL_PYTHON_DIR"] = "/opt/ddl/python";
  env["PYTHONPATH"] = "/mine";
  o = run_rank_exec(env, args);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(read_file(out), "/opt/ddl/python/ddl/_site:/opt/ddl/python:/mine\n");
}

TEST_F(RankExecTest, AHostWithoutTheTopologyFileWritesItFromTheEnvironment) {
  const std::string text = read_file(write_topology({}));
  auto env = launcher_env((dir_ / "elsewhere" / "topology.yaml").string());
  env["DDL_TOPOLOGY_TEXT"] = text;
  const std::string out = (dir_ / "out").string();
  const std::vector<std::string> args = {
      "sh", "-c", "echo \"$DDL_TOPOLOGY_FILE ${DDL_TOPOLOGY_TEXT-unset}\" > \"$0\"", out};
  Outcome o = run_rank_exec(env, args);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(read_file(out), (dir_ / "elsewhere" / "topology.yaml").string() + " unset\n");
  EXPECT_EQ(read_file(dir_ / "elsewhere" / "topology.yaml"), text);
  EXPECT_EQ(fs::status(dir_ / "elsewhere").permissions() & fs::perms::all, fs::perms::owner_all);
}

TEST_F(RankExecTest, BindsToItsCpuSetAndCountsCoresForOpenMp) {
  const comm::CpuSet mine = my_cpus();
  ASSERT_FALSE(mine.empty());
  const comm::CpuSet one = comm::CpuSet::of({mine.pus().back()});
  auto env = launcher_env(write_topology(one));
  env["DDL_CORES"] = "2*1";
  const std::string out = (dir_ / "out").string();
  const Outcome o = run_rank_exec(
      env,
      {"sh", "-c",
       "grep Cpus_allowed_list /proc/self/status > \"$0\"; echo $OMP_NUM_THREADS >> \"$0\"", out});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(read_file(out), "Cpus_allowed_list:\t" + one.str() + "\n1\n");
}

TEST_F(RankExecTest, KeepsABindingInsideItsSetAndAnInheritedOmpNumThreads) {
  const comm::CpuSet mine = my_cpus();
  if (mine.size() < 2) GTEST_SKIP() << "needs 2 CPUs";
  auto env = launcher_env(write_topology(mine));
  env["OMP_NUM_THREADS"] = "9";
  const std::string out = (dir_ / "out").string();
  const std::string first = std::to_string(mine.pus().front());
  // taskset-like: narrow the affinity to one PU of the set first; rank-exec must keep it.
  const pid_t pid = fork();
  if (pid == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(mine.pus().front(), &set);
    sched_setaffinity(0, sizeof set, &set);
    clearenv();
    for (const auto& [k, v] : env)
      setenv(k.c_str(), v.c_str(), 1);
    _exit(rank_exec_main(
        {"sh", "-c",
         "grep Cpus_allowed_list /proc/self/status > \"$0\"; echo $OMP_NUM_THREADS >> \"$0\"",
         out}));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(read_file(out), "Cpus_allowed_list:\t" + first + "\n9\n");
}

TEST_F(RankExecTest, MissingProgramIs127AndNamesTheRankAndHost) {
  const Outcome o =
      run_rank_exec(launcher_env(write_topology({})), {"--", "no-such-program-ddl", "x"});
  EXPECT_EQ(o.status, 127);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(o.err, std::string("ddlrun --rank-exec: error: rank 1: cannot run "
                               "'no-such-program-ddl' on ") +
                       host +
                       ": No such file or directory (check the program's name and $PATH on "
                       "that host)\n");
}

TEST_F(RankExecTest, ErrorsNameTheVariableOrFileAndTheNextStep) {
  const std::string topology = write_topology({});
  auto env = launcher_env(topology);

  auto no_rank = env;
  no_rank.erase("OMPI_COMM_WORLD_RANK");
  Outcome o = run_rank_exec(no_rank, {"--", "true"});
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err,
            "ddlrun --rank-exec: error: cannot tell which rank this is: none of $DDL_RANK, "
            "$OMPI_COMM_WORLD_RANK, $PMIX_RANK, $SLURM_PROCID, $JSM_NAMESPACE_RANK is set "
            "(ddlrun --rank-exec runs under mpirun, srun, prterun or jsrun started by ddlrun)\n");

  auto no_file = env;
  no_file.erase("DDL_TOPOLOGY_FILE");
  o = run_rank_exec(no_file, {"--", "true"});
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err,
            "ddlrun --rank-exec: error: rank 1: $DDL_TOPOLOGY_FILE is not set; it is set by "
            "ddlrun for the ranks it starts (run the program through ddlrun, not through the "
            "launcher directly)\n");

  auto bad_port = env;
  bad_port["DDL_RENDEZVOUS"] = "127.0.0.1";
  o = run_rank_exec(bad_port, {"--", "true"});
  EXPECT_EQ(o.err,
            "ddlrun --rank-exec: error: rank 1: malformed $DDL_RENDEZVOUS '127.0.0.1' (expected "
            "host:port); unset it and let ddlrun set it\n");

  auto too_big = env;
  too_big["OMPI_COMM_WORLD_RANK"] = "2";
  o = run_rank_exec(too_big, {"--", "true"});
  EXPECT_EQ(o.err, "ddlrun --rank-exec: error: rank 2: not in the topology file " + topology +
                       " (it has 2 ranks); the launcher started more ranks than ddlrun "
                       "planned: do not pass -n/-np through --mpiarg\n");

  auto missing = env;
  missing["DDL_TOPOLOGY_FILE"] = (dir_ / "gone").string();
  o = run_rank_exec(missing, {"--", "true"});
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.err.rfind("ddlrun --rank-exec: error: rank 1: ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find((dir_ / "gone").string()), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("(every host needs the topology file at this path: use a shared file "
                       "system, or --launcher ssh, which copies it)\n"),
            std::string::npos)
      << o.err;

  o = run_rank_exec(env, {"--"});
  EXPECT_EQ(o.status, 2);
  EXPECT_EQ(o.err,
            "ddlrun --rank-exec: error: no program given (usage: ddlrun --rank-exec -- program "
            "[args...])\n");
}

}  // namespace
}  // namespace ddl::launcher
