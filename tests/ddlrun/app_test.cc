// End-to-end tests of ddlrun's command line through ddl::ddlrun::run(), with a test environment.
#include "ddlrun/app.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>

#include "comm/topology.h"
#include "mapper/probe_hwloc.h"

namespace ddl::ddlrun {
namespace {

using Env = std::map<std::string, std::string>;

std::optional<std::string> test_getenv(const char* name, void* context) {
  const Env& env = *static_cast<const Env*>(context);
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

struct Result {
  int status;
  std::string out;
  std::string err;
};

/// A stand-in for probing over ssh (a test double: no sshd here; tests/netns has the real one):
/// hosts named in `hardware` answer with that recording, the others fail with `why`.
struct FakeRemote {
  std::map<std::string, std::string> hardware;  ///< host -> topologies/<file>
  std::string why = "connection refused (fake)";
  std::vector<std::string> asked;
  std::function<void(mapper::Inventory&)> adjust;  ///< applied to each recording read, if set

  std::vector<mapper::HostProbe> operator()(const std::vector<std::string>& hosts) {
    std::vector<mapper::HostProbe> out;
    for (const std::string& h : hosts) {
      asked.push_back(h);
      mapper::HostProbe p;
      p.host = h;
      if (auto it = hardware.find(h); it != hardware.end()) {
        mapper::ProbeOptions o;
        o.xml_path = std::string(DDL_TEST_DATA_DIR) + "/topologies/" + it->second;
        p.inventory = mapper::probe_hwloc(o);
        if (adjust) adjust(*p.inventory);
      } else {
        p.error = why;
      }
      out.push_back(std::move(p));
    }
    return out;
  }
};

/// Runs ddlrun in-process. Tests about host lists, modes and options plan by slots
/// (--no-probe) unless they look at hardware (--host-xml, or `remote` given).
Result ddlrun(std::vector<std::string> args, Env env = {}, FakeRemote* remote = nullptr) {
  std::ostringstream out, err;
  if (!remote && std::find(args.begin(), args.end(), "--host-xml") == args.end() &&
      std::find(args.begin(), args.end(), "--probe") == args.end()) {
    args.insert(args.begin(), "--no-probe");
  }
  RemoteProbe probe;
  if (remote) probe = [remote](const std::vector<std::string>& h) { return (*remote)(h); };
  const int status = run(args, out, err, test_getenv, &env, probe);
  return {status, out.str(), err.str()};
}

std::string topology(const std::string& name) {
  return std::string(DDL_TEST_DATA_DIR) + "/topologies/" + name;
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(AppTest, DryRunPrintsHostTableAndArgv) {
  const Result r = ddlrun(
      {"--dry-run", "--job-id", "j1", "-H", "node[01-03]:2", "python", "train.py", "a b", "$X;y"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "ddlrun 0.1.0 dry run: nothing is started\n"
            "\n"
            "hosts (3, 6 slots, from -H):\n"
            "  HOST    SLOTS  RANKS  GPUS  CORES  HARDWARE FROM  SOURCE\n"
            "  node01  2      0-1    -     -      not probed     -H\n"
            "  node02  2      2-3    -     -      not probed     -H\n"
            "  node03  2      4-5    -     -      not probed     -H\n"
            "\n"
            "ranks:     6 (3 hosts x 2)\n"
            "  RANK  HOST    LOCAL  GPU  BUS ID  CPUS  NIC  ADDRESS\n"
            "  0     node01  0      -    -       -     -    -\n"
            "  1     node01  1      -    -       -     -    -\n"
            "  2     node02  0      -    -       -     -    -\n"
            "  3     node02  1      -    -       -     -    -\n"
            "  4     node03  0      -    -       -     -    -\n"
            "  5     node03  1      -    -       -     -    -\n"
            "\n"
            "mode:      p:2x3x1x1 (ranks per host x hosts per rack x racks per aisle x aisles)\n"
            "rings:\n"
            "  dim 0: 3 rings of 2: [0 1] [2 3] [4 5]\n"
            "  dim 1: 2 rings of 3: [0 2 4] [1 3 5]\n"
            "  dim 2: size 1, nothing to reduce\n"
            "  dim 3: size 1, nothing to reduce\n"
            "prediction: allreduce time and busbw by the cost model (ddlrun(1), COST MODEL)\n"
            "  LEVEL  BANDWIDTH  LATENCY  FROM\n"
            "  local  8 GB/s     1 us     default\n"
            "  host   1.25 GB/s  30 us    default\n"
            "  rack   3.75 GB/s  30 us    default\n"
            "  aisle  3.75 GB/s  30 us    default\n"
            "    MODE       1 MiB                16 MiB               256 MiB\n"
            "  * p:2x3x1x1  1.323 ms 1.321 GB/s  19.17 ms 1.459 GB/s  304.7 ms 1.468 GB/s\n"
            "    r:2x3x1x1  1.787 ms 977.8 MB/s  24.1 ms 1.16 GB/s    381.1 ms 1.174 GB/s  flat "
            "ring\n"
            "picked:    p:2x3x1x1, the fastest predicted for 64 MiB (--predict-bytes): 76.28 ms\n"
            "job id:    j1\n"
            "launcher:  ssh (some hosts are remote and no batch system was found)\n"
            "transport: default (InfiniBand when present, else TCP)\n"
            "topology:  not written (--topology-file FILE keeps it)\n"
            "env:       DDL_OPTIONS=\"-mode p:2x3x1x1\"\n"
            "command:   python train.py 'a b' '$X;y'\n"
            "argv:      [\"python\", \"train.py\", \"a b\", \"$X;y\"]\n");
}

TEST(AppTest, DryRunOnLocalhostChoosesLocalLauncher) {
  const Result r = ddlrun({"--dry-run", "-H", "localhost:4", "-m", "r:2x2", "-x", "A=1", "sh"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  localhost  4      0-3    -     -      not probed     -H\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("mode:      r:2x2 (given with -m)\n"), std::string::npos);
  EXPECT_NE(r.out.find("launcher:  local (every host is this host)\n"), std::string::npos);
  EXPECT_NE(r.out.find("env:       DDL_OPTIONS=\"-mode r:2x2\" A=1\n"), std::string::npos);
}

TEST(AppTest, HostfileSourcesAreShown) {
  const std::string path =
      write_file("app_hosts.txt", "# cluster\nn1 slots=4 max_slots=8\nn2 slots=4\n");
  const Result r = ddlrun({"--dry-run", "--hostfile", path, "-n", "6", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("n1    4 (max 8)  0-3    -     -      not probed     " + path +
                       ":2 (openmpi-hostfile)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("n2    4          4-5    -     -      not probed     " + path +
                       ":3 (openmpi-hostfile)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ranks:     6 (2 hosts: 4+2)"), std::string::npos);
}

TEST(AppTest, YamlAndJsonCarryTheSamePlan) {
  const std::vector<std::string> base = {"--dry-run", "-H",   "a:2,b:2", "-m",  "p:2x2",
                                         "--tcp",     "prog", "--flag",  "007", "true"};
  std::vector<std::string> yaml_args = base, json_args = base;
  yaml_args.insert(yaml_args.begin(), {"--output", "yaml"});
  json_args.insert(json_args.begin(), {"--output=json"});
  const Result y = ddlrun(yaml_args);
  const Result j = ddlrun(json_args);
  ASSERT_EQ(y.status, 0) << y.err;
  ASSERT_EQ(j.status, 0) << j.err;
  // JSON is YAML, so one reader checks both documents field by field.
  for (const std::string& text : {y.out, j.out}) {
    const YAML::Node doc = YAML::Load(text);
    EXPECT_EQ(doc["ranks"].as<int>(), 4);
    EXPECT_EQ(doc["hosts"].size(), 2u);
    EXPECT_EQ(doc["hosts"][1]["name"].as<std::string>(), "b");
    EXPECT_EQ(doc["hosts"][1]["ranks"][1].as<int>(), 3);
    EXPECT_TRUE(doc["hosts"][1]["max_slots"].IsNull());
    EXPECT_EQ(doc["hosts"][0]["source"].as<std::string>(), "-H");
    EXPECT_EQ(doc["mode"]["string"].as<std::string>(), "p:2x2");
    EXPECT_EQ(doc["mode"]["dims"][0].as<int>(), 2);
    EXPECT_EQ(doc["launcher"]["name"].as<std::string>(), "ssh");
    EXPECT_TRUE(doc["tcp"].as<bool>());
    EXPECT_EQ(doc["environment"]["DDL_OPTIONS"].as<std::string>(), "-mode p:2x2");
    // Strings that look like numbers or booleans stay strings.
    EXPECT_EQ(doc["program"][2].as<std::string>(), "007");
    EXPECT_EQ(doc["program"][3].as<std::string>(), "true");
  }
  EXPECT_NE(y.out.find("\"007\""), std::string::npos) << y.out;
  EXPECT_NE(
      j.out.find("\"program\": [\n    \"prog\",\n    \"--flag\",\n    \"007\",\n    \"true\"\n  ]"),
      std::string::npos)
      << j.out;
}

TEST(AppTest, SvgDrawsThePlanEvenWithoutHardware) {
  const Result r = ddlrun({"--dry-run", "--output", "svg", "-H", "a:2,b:2", "-m", "p:2x2", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0), 0u) << r.out;
  EXPECT_EQ(r.out.substr(r.out.size() - 7), "</svg>\n");
  EXPECT_NE(r.out.find("<title>rank 3 on b, local rank 1, not bound</title>"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(">no package</text>"), std::string::npos);  // hardware not probed
  EXPECT_NE(r.out.find("<title>dim 1 ring 1: rank 3 -&gt; rank 1</title>"), std::string::npos);
}

TEST(AppTest, ModeMustMatchRankCount) {
  const Result r = ddlrun({"--dry-run", "-H", "a:4,b:4", "-mode", "p:6x2x1x1", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "ddlrun: error: mode 'p:6x2x1x1' describes 12 ranks (6 x 2 x 1 x 1), but the job has 8 "
            "(2 hosts x 4); make the dimensions multiply to 8 or change the number of ranks\n");
}

// A fixed --mode that a restart on fewer hosts cannot keep is refused at the start.
TEST(AppTest, AModeThatARestartCannotKeepIsRefusedAtTheStart) {
  const Result r = ddlrun({"--dry-run", "-H", "a:2,b:2", "--mode", "r:2x2", "--max-restarts", "1",
                           "--min-hosts", "1", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "ddlrun: error: --mode r:2x2 fits 4 ranks only, but with --max-restarts the job may "
            "start again on fewer hosts (--min-hosts 1 of its 2); leave --mode out, so that "
            "ddlrun picks a mode for each attempt\n");
  EXPECT_EQ(ddlrun({"--dry-run", "-H", "a:2,b:2", "--mode", "r:2x2", "--max-restarts", "1", "prog"})
                .status,
            0);
}

// -x DDL_SIZE=3 must not reach the ranks (libddl would blame $DDL_RANK).
TEST(AppTest, RankVariablesCannotBeExported) {
  const Result r = ddlrun({"--dry-run", "-H", "a:2", "-x", "DDL_SIZE=3", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "ddlrun: error: -x DDL_SIZE=3: ddlrun sets DDL_SIZE itself, for each rank (where it "
            "is in the job); leave it out, and change the job's shape with -n, -H or -a "
            "instead\n");
}

TEST(AppTest, IbmSummitStyleCommandLine) {
  const Result r =
      ddlrun({"--dry-run", "--H", "g28n14,g28n15", "-accelerators", "6", "-mode", "p:6x2x1x1",
              "-mpiarg", "-x NCCL_DEBUG", "python", "tf_cnn_benchmarks.py"},
             {});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("ranks:     12 (2 hosts x 6)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mpiargs:   -x NCCL_DEBUG"), std::string::npos);
  EXPECT_EQ(r.err,
            "ddlrun: warning: --mpiarg is used only by the mpirun launcher; this job uses ssh\n");
}

TEST(AppTest, HostListErrorsShowTheCaret) {
  const Result r = ddlrun({"--dry-run", "-H", "node[5-2]", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind("ddlrun: error: -H:1:", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("\n  node[5-2]\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("^"), std::string::npos);
}

TEST(AppTest, ControlBytesFromAHostfileNeverReachTheTerminalRaw) {
  const std::string path = write_file("ctl_hosts.txt", "node1\nno\x1b[2Jde slots=2\n");
  const Result r = ddlrun({"--dry-run", "--hostfile", path, "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "ddlrun: error: " + path +
                       ":2:3: invalid character '\\x1b' in host name 'no\\x1b[2Jde': use letters, "
                       "digits, '-', '.' and '_'\n"
                       "  no\\x1b[2Jde slots=2\n"
                       "    ^~~~\n");
  // A path given on the command line is escaped the same way.
  const Result p = ddlrun({"--dry-run", "--hostfile", "/nonexistent/\x1b]0;t\x07", "prog"});
  EXPECT_EQ(p.err,
            "ddlrun: error: /nonexistent/\\x1b]0;t\\x07: cannot read hostfile: No such file or "
            "directory\n");
}

TEST(AppTest, WdirIsMadeAbsoluteShownAndWarnedAboutUnderExternalLaunchers) {
  const std::string here = std::filesystem::current_path().string();
  for (const char* spelling : {"--wdir", "-wdir", "--wd"}) {
    const Result r = ddlrun({"--dry-run", "-H", "a,b", spelling, "run/../data/", "prog"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("\nwdir:      " + here + "/data\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.err, "");
  }
  const Result none = ddlrun({"--dry-run", "-H", "a,b", "prog"});
  EXPECT_EQ(none.out.find("wdir:"), std::string::npos) << none.out;
  const Result mpirun =
      ddlrun({"--dry-run", "-H", "a,b", "--launcher", "mpirun", "--wdir", "/data", "prog"});
  EXPECT_EQ(mpirun.err,
            "ddlrun: warning: --wdir is used by the local and ssh launchers only; this job uses "
            "mpirun, whose ranks start where it puts them\n");
}

TEST(AppTest, EveryExternalLaunchersDryRunShowsItsCommand) {
  // What each would run and the file it would read; ddlrun's own launchers run no other program.
  for (const char* name : {"mpirun", "prterun", "srun"}) {
    const Result r = ddlrun({"--dry-run", "-H", "a,b", "--launcher", name, "prog"});
    const std::string label =
        std::string(name) + ":" + std::string(10 - std::string(name).size(), ' ');
    EXPECT_NE(r.out.find("\n" + label + name + " "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" ddlrun --rank-exec -- prog\n"), std::string::npos) << r.out;
  }
  const Result mpirun = ddlrun({"--dry-run", "-H", "a,b", "--launcher", "mpirun", "prog"});
  EXPECT_NE(mpirun.out.find("\nrankfile:  <work-dir>/rankfile\n"), std::string::npos) << mpirun.out;
  const Result ssh = ddlrun({"--dry-run", "-H", "a,b", "--launcher", "ssh", "prog"});
  EXPECT_EQ(ssh.out.find("--rank-exec"), std::string::npos) << ssh.out;
}

TEST(AppTest, ThePlanDocumentGivesEveryExternalLaunchersCommandAndOwnOptions) {
  for (const char* name : {"mpirun", "prterun", "srun", "flux"}) {
    const Result r =
        ddlrun({"--dry-run", "-H", "a,b", "--launcher", name, "--output", "json", "prog"});
    ASSERT_EQ(r.status, 0) << name << ": " << r.err;
    const YAML::Node launcher = YAML::Load(r.out)["launcher"];
    EXPECT_EQ(launcher["name"].as<std::string>(), name);
    const YAML::Node command = launcher["command"];
    ASSERT_TRUE(command.IsSequence()) << name << ": " << r.out;
    EXPECT_EQ(command[0].as<std::string>(), name);
    EXPECT_EQ(command[command.size() - 1].as<std::string>(), "prog");
    EXPECT_FALSE(launcher["settings"]) << name;  // none of these has options of its own
  }
  const Env lsf = {{"LSB_JOBID", "1234"}, {"LSB_MCPU_HOSTS", "batch1 1 a26n15 42"}};
  const Result js = ddlrun({"--dry-run", "--jsrun-mode", "rs", "--output", "yaml", "--host-xml",
                            "*=" + topology("summit-ac922.xml"), "prog"},
                           lsf);
  ASSERT_EQ(js.status, 0) << js.err;
  const YAML::Node launcher = YAML::Load(js.out)["launcher"];
  EXPECT_EQ(launcher["command"][0].as<std::string>(), "jsrun");
  EXPECT_EQ(launcher["settings"]["--jsrun-mode"].as<std::string>(), "rs");
  EXPECT_EQ(launcher["settings"]["--smpiargs"].as<std::string>(), "");  // its default
  // ddlrun's own launchers run no other program.
  const Result ssh =
      ddlrun({"--dry-run", "-H", "a,b", "--launcher", "ssh", "--output", "json", "prog"});
  EXPECT_FALSE(YAML::Load(ssh.out)["launcher"]["command"]) << ssh.out;
}

TEST(AppTest, ABackendsOwnOptionsAreInASectionOfTheirOwnAndCheckedAsItSays) {
  const Result help = ddlrun({"--help"});
  const std::size_t section = help.out.find("\nLauncher jsrun:\n");
  ASSERT_NE(section, std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--jsrun-mode erf|rs", section), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--smpiargs ARGS", section), std::string::npos) << help.out;
  const Result bad = ddlrun({"--dry-run", "--jsrun-mode", "rss", "prog"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err,
            "ddlrun: error: --jsrun-mode: unknown jsrun mode 'rss' (did you mean 'rs'?); use one "
            "of erf, rs\n");
}

TEST(AppTest, OneMachineUnderTwoNamesIsRefusedNamingBoth) {
  // Without probing: both names are this host.
  const Result r = ddlrun({"--dry-run", "-H", "localhost:2,127.0.0.1:2", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "ddlrun: error: '127.0.0.1' (-H) and 'localhost' (-H) are the same machine: both are "
            "this host; list each machine once, under one name, with all its slots\n");
  // Probed: the identity hwloc's probe of this host found, named by its host name.
  FakeRemote remote;
  const std::string path = write_file("same_machine.txt", "localhost slots=1\n127.0.0.2\n");
  const Result p = ddlrun({"--dry-run", "--hostfile", path, "prog"}, {}, &remote);
  EXPECT_EQ(p.status, 2);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(p.err, "ddlrun: error: '127.0.0.2' (" + path + ":2) and 'localhost' (" + path +
                       ":1) are the same machine: their probes found one machine (the same "
                       "machine id, boot id and network namespace, host name '" +
                       host + "'); list each machine once, under one name, with all its slots\n");
  EXPECT_TRUE(remote.asked.empty());
}

TEST(AppTest, MissingHostfileIsAClearError) {
  const Result r = ddlrun({"--dry-run", "--hostfile", "/nonexistent/hosts", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("/nonexistent/hosts"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
}

TEST(AppTest, HostsAndHostfileTogetherIsAnError) {
  const Result r = ddlrun({"--dry-run", "-H", "a", "--hostfile", "h", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "ddlrun: error: both -H and --hostfile name hosts; give one of them\n");
}

TEST(AppTest, RepeatedHostsOptionsMerge) {
  const Result r = ddlrun({"--dry-run", "-H", "a,a", "-H", "b,a", "--output", "json", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  const YAML::Node doc = YAML::Load(r.out);
  EXPECT_EQ(doc["hosts"][0]["slots"].as<int>(), 3);
  EXPECT_EQ(doc["hosts"][1]["slots"].as<int>(), 1);
}

TEST(AppTest, DefaultIsThisHostWithOneSlot) {
  const Result r = ddlrun({"--dry-run", "--output", "yaml", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  const YAML::Node doc = YAML::Load(r.out);
  EXPECT_EQ(doc["hosts"].size(), 1u);
  EXPECT_EQ(doc["hosts"][0]["name"].as<std::string>(), "localhost");
  EXPECT_EQ(doc["hosts"][0]["source"].as<std::string>(), "default");
  EXPECT_EQ(doc["launcher"]["name"].as<std::string>(), "local");
  EXPECT_EQ(doc["ranks"].as<int>(), 1);
}

TEST(AppTest, LsfAllocationDropsTheBatchNodeAndPicksJsrun) {
  const Env env = {{"LSB_JOBID", "1234"}, {"LSB_MCPU_HOSTS", "batch1 1 a26n15 42 b07n01 42"}};
  const Result r = ddlrun({"--dry-run", "-a", "6", "--output", "yaml", "python", "t.py"}, env);
  ASSERT_EQ(r.status, 0) << r.err;
  const YAML::Node doc = YAML::Load(r.out);
  ASSERT_EQ(doc["hosts"].size(), 2u);
  EXPECT_EQ(doc["hosts"][0]["name"].as<std::string>(), "a26n15");
  EXPECT_EQ(doc["hosts"][0]["slots"].as<int>(), 42);
  EXPECT_EQ(doc["hosts_from"].as<std::string>(), "$LSB_MCPU_HOSTS");
  EXPECT_EQ(doc["ranks"].as<int>(), 12);
  EXPECT_EQ(doc["launcher"]["name"].as<std::string>(), "jsrun");
}

TEST(AppTest, SlurmAllocationPicksSrun) {
  const Env env = {{"SLURM_JOB_ID", "77"},
                   {"SLURM_JOB_NODELIST", "gpu[1-3]"},
                   {"SLURM_TASKS_PER_NODE", "2(x2),1"}};
  const Result r = ddlrun({"--dry-run", "--output", "json", "prog"}, env);
  ASSERT_EQ(r.status, 0) << r.err;
  const YAML::Node doc = YAML::Load(r.out);
  EXPECT_EQ(doc["ranks"].as<int>(), 5);
  EXPECT_EQ(doc["hosts"][2]["name"].as<std::string>(), "gpu3");
  EXPECT_EQ(doc["launcher"]["name"].as<std::string>(), "srun");
}

TEST(AppTest, RankfileNamesTheHosts) {
  const std::string path = write_file(
      "app_ranks.txt", "rank 0=n1 slot=0:0-6\nrank 1=n1 slot=1:0-6\nrank 2=n2 slot=0:*\n");
  const Result r = ddlrun({"--dry-run", "--rankfile", path, "--output", "json", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  const YAML::Node doc = YAML::Load(r.out);
  EXPECT_EQ(doc["ranks"].as<int>(), 3);
  EXPECT_EQ(doc["hosts"][0]["slots"].as<int>(), 2);
  EXPECT_EQ(doc["hosts"][1]["name"].as<std::string>(), "n2");
  const Result bad = ddlrun({"--dry-run", "--rankfile", path, "-H", "n1:2", "prog"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err,
            "ddlrun: error: " + path +
                ": host 'n2' is not among the hosts of -H; add it there or change the rankfile\n");
  const Result np = ddlrun({"--dry-run", "--rankfile", path, "-n", "2", "prog"});
  EXPECT_EQ(np.err, "ddlrun: error: -n 2 disagrees with the 3 ranks of " + path +
                        "; drop -n or change the rankfile\n");
}

TEST(AppTest, ExportsReadTheEnvironmentAndWarnWhenUnset) {
  const Result r =
      ddlrun({"--dry-run", "-x", "HOME", "-x", "NOPE", "-x", "V=a b", "prog"}, {{"HOME", "/root"}});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(" HOME=/root V='a b'\n"), std::string::npos) << r.out;
  EXPECT_EQ(
      r.err,
      "ddlrun: warning: -x NOPE: NOPE is not set in ddlrun's environment, so it is not exported\n");
  const Result bad = ddlrun({"--dry-run", "-x", "1X=2", "prog"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err,
            "ddlrun: error: -x 1X=2: '1X' is not a variable name (letters, digits and '_', not "
            "starting with a digit)\n");
}

TEST(AppTest, VerboseExplainsTheLauncherOnStderr) {
  const Result r = ddlrun({"-v", "--dry-run", "-H", "localhost:2", "prog"});
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.err.find("ddlrun: info: launcher local: every host is this host\n"),
            std::string::npos)
      << r.err;
  const Result q = ddlrun({"-q", "--dry-run", "-x", "NOPE", "prog"});
  EXPECT_EQ(q.err, "");
}

TEST(AppTest, DefaultModeFollowsIbmFourFields) {
  auto mode_of = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"--dry-run", "--output", "json"});
    args.push_back("prog");
    const Result r = ddlrun(args);
    EXPECT_EQ(r.status, 0) << r.err;
    return YAML::Load(r.out)["mode"]["string"].as<std::string>();
  };
  EXPECT_EQ(mode_of({"-H", "n[01-18]", "-a", "6"}), "p:6x18x1x1");
  EXPECT_EQ(mode_of({"-H", "n[01-36]", "-a", "6", "--nodes", "18"}), "p:6x18x2x1");
  EXPECT_EQ(mode_of({"-H", "n[01-36]", "-a", "6", "-nodes", "9", "-racks", "2", "-aisles", "2"}),
            "p:6x9x2x2");
  EXPECT_EQ(mode_of({"-H", "a:4,b:2"}), "p:6");  // uneven hosts: one ring
  EXPECT_EQ(mode_of({"-H", "a:4,b:4", "-n", "6"}), "p:6");
  EXPECT_EQ(mode_of({"-H", "a:4,b:4", "-m", "r"}), "r:4x2x1x1");
}

TEST(AppTest, ModeAutoPicksTheFastestPredicted) {
  // Racks of two hosts joined by a slow uplink: the hierarchy across racks wins.
  const Result racks = ddlrun({"--dry-run", "-H", "n[01-04]:2", "--mode", "auto", "--nodes", "2",
                               "--link", "host=1Gbit,50us", "--link", "rack=250Mbit", "prog"});
  ASSERT_EQ(racks.status, 0) << racks.err;
  EXPECT_NE(racks.out.find("mode:      p:2x2x2x1 (ranks per host x hosts per rack x racks per "
                           "aisle x aisles)\n"),
            std::string::npos)
      << racks.out;
  EXPECT_NE(racks.out.find("  rack   31.25 MB/s  50 us    --link\n"), std::string::npos);
  EXPECT_NE(racks.out.find("\n    p:4x2x1x1  "), std::string::npos);
  EXPECT_NE(racks.out.find("\n    p:2x4x1x1  "), std::string::npos);
  EXPECT_NE(racks.out.find("picked:    p:2x2x2x1, the fastest predicted for 64 MiB "
                           "(--predict-bytes): 2.294 s\n"),
            std::string::npos);
  // One rank per host and 10 ms between hosts: every pipelined chunk pays the latency, so the
  // flat ring wins.
  const std::vector<std::string> slow = {"--dry-run", "-H",     "n[01-04]",        "--nodes",
                                         "2",         "--link", "host=10Gbit,10ms"};
  std::vector<std::string> args = slow;
  args.insert(args.end(), {"--mode", "auto", "--predict-bytes", "16M", "prog"});
  const Result flat = ddlrun(args);
  ASSERT_EQ(flat.status, 0) << flat.err;
  EXPECT_NE(flat.out.find("mode:      r:1x2x2x1 (--mode auto: the fastest predicted, see "
                          "prediction)\n"),
            std::string::npos)
      << flat.out;
  EXPECT_NE(flat.out.find("picked:    r:1x2x2x1, the fastest predicted for 16 MiB "
                          "(--predict-bytes): 81.42 ms, against 354.7 ms for p:1x2x2x1\n"),
            std::string::npos)
      << flat.out;
  // Named (--nodes without --mode auto): IBM's mode as before, and the model's opinion.
  args = slow;
  args.push_back("prog");
  const Result named = ddlrun(args);
  EXPECT_NE(named.out.find("mode:      p:1x2x2x1 (ranks per host"), std::string::npos);
  EXPECT_NE(named.out.find("named:     p:1x2x2x1 (--mode auto would pick by prediction); the "
                           "fastest predicted for 64 MiB (--predict-bytes) is r:1x2x2x1: "),
            std::string::npos)
      << named.out;
}

TEST(AppTest, VerboseRunsSayWhichModeWasPicked) {
  const Result r = ddlrun({"-v", "--dry-run", "-H", "a:2,b:2", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("ddlrun: info: mode picked p:2x2x1x1, the fastest predicted for 64 MiB "
                       "(--predict-bytes): "),
            std::string::npos)
      << r.err;
  const Result named = ddlrun({"-v", "--dry-run", "-H", "a:2,b:2", "-m", "r", "prog"});
  EXPECT_NE(named.err.find("ddlrun: info: mode named r:2x2x1x1 (--mode auto would pick by "
                           "prediction); the fastest predicted for 64 MiB (--predict-bytes) is "
                           "p:2x2x1x1: "),
            std::string::npos)
      << named.err;
}

TEST(AppTest, PredictionInJson) {
  const Result r = ddlrun(
      {"--dry-run", "--output", "json", "-H", "n[01-03]:2", "--link", "host=1Gbit,50us", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  const YAML::Node p = YAML::Load(r.out)["prediction"];
  EXPECT_EQ(p["fabric"][1]["level"].as<std::string>(), "host");
  EXPECT_EQ(p["fabric"][1]["bytes_per_s"].as<double>(), 125e6);
  EXPECT_EQ(p["fabric"][1]["from"].as<std::string>(), "--link");
  EXPECT_EQ(p["sizes"][1].as<int64_t>(), 16 << 20);
  EXPECT_EQ(p["predict_bytes"].as<int64_t>(), 64 << 20);
  EXPECT_EQ(p["modes"][0]["mode"].as<std::string>(), "p:2x3x1x1");
  EXPECT_TRUE(p["modes"][0]["chosen"].as<bool>());
  EXPECT_EQ(p["modes"][1]["mode"].as<std::string>(), "r:2x3x1x1");
  EXPECT_TRUE(p["modes"][1]["flat_ring"].as<bool>());
  EXPECT_EQ(p["modes"][1]["seconds"].size(), 3u);
  // The flat ring's bound: one rank per NIC sends 2(n-1)/n x 64 MiB = 5/3 x 64 MiB.
  EXPECT_NEAR(p["modes"][1]["bound_seconds_at_predict_bytes"].as<double>(),
              5.0 / 3 * (64 << 20) / (125e6 * 0.94), 1e-9);
  EXPECT_LT(p["modes"][0]["bound_seconds_at_predict_bytes"].as<double>(),
            p["modes"][0]["seconds_at_predict_bytes"].as<double>());
  EXPECT_EQ(p["fastest"].as<std::string>(), "p:2x3x1x1");
  EXPECT_TRUE(p["picked"].as<bool>());
  EXPECT_TRUE(YAML::Load(r.out)["mode"]["auto"].as<bool>());
  const Result one = ddlrun({"--dry-run", "--output", "json", "prog"});
  EXPECT_TRUE(YAML::Load(one.out)["prediction"].IsNull());
}

TEST(AppTest, CostModelOptionErrors) {
  Result r = ddlrun({"--dry-run", "-H", "a:2", "--link", "hots=1Gbit", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "ddlrun: error: --link 'hots=1Gbit': unknown level 'hots' (did you mean 'host'?); the "
            "levels are local, host, rack and aisle\n");
  r = ddlrun({"--dry-run", "-H", "a:2", "--predict-bytes", "64MB", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err,
            "ddlrun: error: --predict-bytes '64MB': not a size of at least 1 byte; write bytes or "
            "a number and K, M or G (powers of 1024): 64M, 1G\n");
  r = ddlrun({"--dry-run", "-H", "a:2", "-m", "auto", "prog"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("mode:      p:2x1x1x1 ("), std::string::npos);
}

TEST(AppTest, RacksFromSlurmTopologyConf) {
  const std::string conf = write_file(
      "app_topology.conf", "SwitchName=s1 Nodes=n[01-02]\nSwitchName=s2 Nodes=n[03-04]\n");
  const Result r = ddlrun({"--dry-run", "-H", "n[01-04]:2", "--topology-conf", conf, "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("mode:      p:2x2x2x1 (ranks per host x hosts per rack x racks per aisle x "
                       "aisles, racks from " +
                       conf + ")\n"),
            std::string::npos)
      << r.out;
  const Result uneven = ddlrun({"--dry-run", "-H", "n[01-03]", "--topology-conf", conf, "prog"});
  EXPECT_EQ(uneven.status, 2);
  EXPECT_EQ(uneven.err,
            "ddlrun: error: switches hold different numbers of this job's hosts ('s1': 2, 's2': "
            "1); the ring layout needs equal racks: use whole racks, or give --nodes or -m\n");
}

TEST(AppTest, SocketsWithoutNvlinkGetADimensionOfTheirOwn) {
  // The 8-GPU node as NVML would see a PCIe-only variant of it: GPUs known, no NVLink at all.
  FakeRemote remote;
  remote.hardware = {{"a", "gpu8-nic-per-pair.xml"}, {"b", "gpu8-nic-per-pair.xml"}};
  remote.adjust = [](mapper::Inventory& inventory) {
    for (mapper::Gpu& g : inventory.gpus)
      g.os_devices = {"nvml" + std::to_string(g.index)};
  };
  const Result r = ddlrun({"--dry-run", "--job-id", "j", "-H", "a,b", "prog"}, {}, &remote);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("mode:      p:4x2x2x1x1 (GPUs per socket x sockets x hosts per rack x racks "
                       "per aisle x aisles: no NVLink between sockets)\n"),
            std::string::npos)
      << r.out;
  const Result aisles =
      ddlrun({"--dry-run", "-H", "a,b", "--nodes", "1", "--aisles", "2", "prog"}, {}, &remote);
  EXPECT_EQ(aisles.err,
            "ddlrun: error: --aisles 2 disagrees with the layout, which has 1 (2 hosts in racks of "
            "1, 2 racks per aisle)\n");
}

TEST(AppTest, RackOptionErrors) {
  EXPECT_EQ(ddlrun({"--dry-run", "-H", "n[1-18]", "--nodes", "4", "p"}).err,
            "ddlrun: error: 18 hosts do not split into racks of 4 (--nodes 4); give a --nodes "
            "that divides 18\n");
  EXPECT_EQ(ddlrun({"--dry-run", "-H", "n[1-4]", "--nodes", "2", "--aisles", "3", "p"}).err,
            "ddlrun: error: --aisles 3 disagrees with the layout, which has 1 (4 hosts in racks of "
            "2, 2 racks per aisle)\n");
  EXPECT_EQ(ddlrun({"--dry-run", "-H", "n[1-4]", "-m", "p:4", "--nodes", "2", "p"}).err,
            "ddlrun: error: -m p:4 gives the dimensions itself; drop --nodes, --racks, --aisles "
            "and --topology-conf, or the dimensions from -m\n");
  EXPECT_EQ(ddlrun({"--dry-run", "-H", "a:2,b:1", "--nodes", "1", "p"}).err,
            "ddlrun: error: racks need the same number of ranks on every host, but this job has 2 "
            "hosts: 2+1; change -n or the slots\n");
}

TEST(AppTest, NicFilterIsCheckedAndShown) {
  const Result r = ddlrun({"--dry-run", "--nic", "^=docker0,lo", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("nic:       ^=docker0,lo\n"), std::string::npos) << r.out;
  EXPECT_EQ(ddlrun({"--dry-run", "--nic", "ib,,eth", "prog"}).err,
            "ddlrun: error: --nic 'ib,,eth': name 2 is empty; remove the extra ','\n");
}

TEST(AppTest, WithoutDryRunStartsTheJob) {
  // The ranks' own output goes to ddlrun's stdout (tests/ddlrun/launch_test.cc reads it); here
  // only the statuses: the job's, and a missing program's.
  EXPECT_EQ(ddlrun({"-H", "localhost:2", "--no-probe", "true"}).status, 0);
  EXPECT_EQ(ddlrun({"-H", "localhost:2", "--no-probe", "false"}).status, 1);
  const Result r = ddlrun({"-H", "localhost:2", "--no-probe", "/nonexistent/prog"});
  EXPECT_EQ(r.status, 127);
  EXPECT_EQ(r.err, "ddlrun: error: localhost: cannot run '/nonexistent/prog': no such file\n");
}

TEST(AppTest, UsageErrorsExitTwo) {
  const Result r = ddlrun({"--dryrun", "prog"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind("ddlrun: error: unknown option '--dryrun' (did you mean '--dry-run'?)", 0),
            0u);
}

TEST(AppTest, HostXmlPlansSummitOffline) {
  const Result r = ddlrun({"--dry-run", "--job-id", "j2", "--host-xml",
                           "*=" + topology("summit-ac922.xml"), "-H", "a01n[01-02]", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string xml = topology("summit-ac922.xml");
  EXPECT_NE(r.out.find("  a01n01  1      0-5    6     42     " + xml + "  -H\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("ranks:     12 (2 hosts x 6)\n"
                       "  RANK  HOST    LOCAL  GPU  BUS ID        CPUS     NIC     ADDRESS\n"
                       "  0     a01n01  0      0    0004:04:00.0  0-27     mlx5_0  -\n"
                       "  1     a01n01  1      1    0004:05:00.0  28-55    mlx5_1  -\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  11    a01n02  5      5    0035:05:00.0  144-171  mlx5_2  -\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("mode:      p:6x2x1x1 "), std::string::npos);
  EXPECT_NE(r.out.find("  dim 0: 2 rings of 6: [0 1 2 3 4 5] [6 7 8 9 10 11]\n"
                       "  dim 1: 6 rings of 2: [0 6] [1 7] [2 8] [3 9] [4 10] [5 11]\n"),
            std::string::npos)
      << r.out;
}

TEST(AppTest, HostXmlExactNameBeatsPatternAndDocumentHasPlacement) {
  const Result r = ddlrun({"--dry-run", "--output", "yaml", "--host-xml",
                           "b=" + topology("gpu8-nic-per-pair.xml"), "--host-xml",
                           "*=" + topology("summit-ac922.xml"), "-H", "a,b", "-a", "6", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  const YAML::Node doc = YAML::Load(r.out);
  EXPECT_EQ(doc["hosts"][0]["hardware"]["gpus"].as<int>(), 6);
  EXPECT_EQ(doc["hosts"][1]["hardware"]["gpus"].as<int>(), 8);
  EXPECT_EQ(doc["hosts"][1]["hardware"]["from"].as<std::string>(),
            topology("gpu8-nic-per-pair.xml"));
  EXPECT_EQ(doc["hosts"][1]["capacity"].as<std::string>(), "-a 6");
  ASSERT_EQ(doc["placement"].size(), 12u);
  EXPECT_EQ(doc["placement"][6]["host"].as<std::string>(), "b");
  EXPECT_EQ(doc["placement"][6]["gpu_bus_id"].as<std::string>(), "0000:04:00.0");
  EXPECT_EQ(doc["placement"][6]["nic"].as<std::string>(), "mlx5_0");
  EXPECT_EQ(doc["rings"][1][0][1].as<int>(), 6);
  EXPECT_EQ(doc["notes"][0].as<std::string>(), "hosts differ in GPUs: a has 6 GPUs, b has 8 GPUs");
  // Without -a the differing GPU counts are refused.
  const Result refused =
      ddlrun({"--dry-run", "--host-xml", "b=" + topology("gpu8-nic-per-pair.xml"), "--host-xml",
              "*=" + topology("summit-ac922.xml"), "-H", "a,b", "prog"});
  EXPECT_EQ(refused.status, 2);
  EXPECT_EQ(refused.err,
            "ddlrun: error: the hosts have different numbers of GPUs: a has 6 GPUs, b has 8 GPUs; "
            "give -a 6 to run that many ranks on every host, or leave out the hosts that differ\n");
}

TEST(AppTest, HostXmlErrors) {
  EXPECT_EQ(ddlrun({"--dry-run", "--host-xml", "summit.xml", "prog"}).err,
            "ddlrun: error: --host-xml summit.xml: expected HOST=FILE (or '*=FILE' for every "
            "host)\n");
  const Result missing = ddlrun({"--dry-run", "--host-xml", "*=/nonexistent/n.xml", "prog"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_EQ(missing.err.rfind("ddlrun: error: --host-xml /nonexistent/n.xml: ", 0), 0u)
      << missing.err;
  EXPECT_EQ(ddlrun({"--dry-run", "--no-probe", "--host-xml", "*=x.xml", "prog"}).err,
            "ddlrun: error: --no-probe ignores hardware, but --host-xml describes it; give one of "
            "them\n");
}

TEST(AppTest, RemoteHostsAreProbedAndFailuresReportedTogether) {
  FakeRemote remote;
  remote.hardware = {{"n1", "summit-ac922.xml"}};
  const Result bad = ddlrun({"--dry-run", "-H", "n1,n2,n3,n2", "prog"}, {}, &remote);
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(bad.err.rfind("ddlrun: error: cannot probe 2 of 3 hosts:\n", 0), 0u) << bad.err;
  EXPECT_NE(bad.err.find("  n2: connection refused (fake)\n"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("  n3: connection refused (fake)\n"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("--host-xml"), std::string::npos) << bad.err;

  remote.hardware = {{"n1", "summit-ac922.xml"}, {"n2", "summit-ac922.xml"}};
  remote.asked.clear();
  const Result ok = ddlrun(
      {"--dry-run", "-H", "n1,n2,localhost", "-a", "1", "--output", "yaml", "prog"}, {}, &remote);
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(remote.asked, (std::vector<std::string>{"n1", "n2"}));  // this host is not asked
  const YAML::Node doc = YAML::Load(ok.out);
  EXPECT_EQ(doc["hosts"][0]["hardware"]["from"].as<std::string>(), "ssh");
  EXPECT_EQ(doc["hosts"][2]["hardware"]["from"].as<std::string>(), "this host");
}

TEST(AppTest, TopologyFileIsWrittenOwnerOnlyAndReadsBack) {
  const std::string path = ::testing::TempDir() + "/app_topology.yaml";
  std::filesystem::remove(path);
  const Result r =
      ddlrun({"--dry-run", "--job-id", "77", "--host-xml", "*=" + topology("gpu8-nic-per-pair.xml"),
              "-H", "d[1-2]", "--topology-file", path, "--output", "json", "prog"});
  ASSERT_EQ(r.status, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const comm::Topology t = comm::read_topology_file(path);
  EXPECT_EQ(t.job_id, "77");
  EXPECT_EQ(t.ranks.size(), 16u);
  EXPECT_EQ(t.mode.str(), "p:8x2x1x1");
  EXPECT_EQ(t.hosts[1].name, "d2");
  EXPECT_EQ(t.find_rank(9)->gpu_bus_id, "0000:05:00.0");
  EXPECT_EQ(t.find_rank(9)->nic, "mlx5_0");
  EXPECT_EQ(YAML::Load(r.out)["topology_file"].as<std::string>(), path);
  // An unwritable place is a clear error, exit 1.
  const Result bad = ddlrun({"--dry-run", "--topology-file", "/nonexistent/dir/t.yaml", "prog"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("/nonexistent/dir/t.yaml"), std::string::npos) << bad.err;
}

TEST(AppTest, ProbePrintsThisHostAndRunsNothing) {
  const Result r = ddlrun({"--probe"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("version: 1\nhostname: ", 0), 0u) << r.out;
  EXPECT_EQ(ddlrun({"--probe", "prog"}).err,
            "ddlrun: error: --probe prints this host's hardware and runs nothing; drop prog or "
            "--probe\n");
}

TEST(AppTest, ThisHostIsProbedWithHwloc) {
  FakeRemote remote;
  const Result r =
      ddlrun({"--dry-run", "-H", "localhost:2", "--output", "yaml", "prog"}, {}, &remote);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(remote.asked.empty());
  const YAML::Node doc = YAML::Load(r.out);
  EXPECT_EQ(doc["hosts"][0]["hardware"]["from"].as<std::string>(), "this host");
  EXPECT_GE(doc["hosts"][0]["hardware"]["cores"].as<int>(), 1);
}

}  // namespace
}  // namespace ddl::ddlrun
