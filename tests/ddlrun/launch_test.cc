// Jobs started for real through the ddlrun binary and its local launcher: what ranks see, what
// ddlrun prints and returns, and that nothing is left running.

#include "ddlrun/run/launch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ddlrun/backends.h"

namespace {

using namespace std::chrono_literals;

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

std::string quote(const std::string& w) {
  std::string q = "'";
  for (char c : w)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ddlrun-launch-test." + std::to_string(getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Runs ddlrun with `args` (stdin from `input`), waits, returns status and output.
  Result run(const std::vector<std::string>& args, const std::string& input = "") {
    std::string cmd = quote(DDLRUN_BINARY);
    for (const std::string& a : args)
      cmd += " " + quote(a);
    const std::string in = (dir_ / "stdin").string(), out = (dir_ / "stdout").string(),
                      err = (dir_ / "stderr").string();
    std::ofstream(in) << input;
    cmd += " <" + quote(in) + " >" + quote(out) + " 2>" + quote(err);
    const int rc = std::system(cmd.c_str());
    Result r;
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  std::filesystem::path dir_;
};

TEST_F(LaunchTest, EveryRankSeesItsVariables) {
  const Result r = run({"-H", "localhost:4", "--no-probe", "-x", "EXTRA=yes", "sh", "-c",
                        "echo $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK "
                        "$DDL_RANK $DDL_SIZE $DDL_LOCAL_SIZE $EXTRA ${#DDL_JOB_TOKEN} $MASTER_ADDR "
                        "$DDL_OPTIONS; test -r \"$DDL_TOPOLOGY_FILE\" && echo topology-ok"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (int i = 0; i < 4; ++i) {
    const std::string k = std::to_string(i);
    EXPECT_NE(r.out.find("[1," + k + "]<stdout>:" + k + " " + k + " 4 4 0 " + k +
                         " 4 4 yes 64 localhost -mode p:4x1x1x1\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("[1," + k + "]<stdout>:topology-ok\n"), std::string::npos) << r.out;
  }
}

TEST_F(LaunchTest, PythonPackageOfTheBuildTree) {
  const std::filesystem::path ddlrun = dir_ / "build" / "ddlrun" / "ddlrun";
  std::filesystem::create_directories(ddlrun.parent_path());
  std::ofstream(ddlrun.string()) << "";
  EXPECT_EQ(ddl::ddlrun::python_package_dir(ddlrun.string()), "");
  std::filesystem::create_directories(dir_ / "build" / "python" / "ddl");
  std::ofstream((dir_ / "build" / "python" / "ddl" / "__init__.py").string()) << "";
  EXPECT_EQ(ddl::ddlrun::python_package_dir(ddlrun.string()),
            std::filesystem::canonical(dir_ / "build" / "python").string());
}

TEST_F(LaunchTest, RanksGetTheirDdlrunsPythonPackageFirst) {
  const std::filesystem::path python =
      std::filesystem::path(DDLRUN_BINARY).parent_path().parent_path() / "python";
  if (!std::filesystem::exists(python / "ddl" / "__init__.py")) GTEST_SKIP() << "no package ddl";
  const std::string dir = std::filesystem::canonical(python).string();
  setenv("PYTHONPATH", "/inherited", 1);
  const Result r = run({"-v", "-H", "localhost:2", "--no-probe", "--tag-output", "none", "sh", "-c",
                        "echo \"$PYTHONPATH\""});
  unsetenv("PYTHONPATH");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string line = dir + "/ddl/_site:" + dir + ":/inherited\n";
  EXPECT_EQ(r.out, line + line);
  EXPECT_NE(r.err.find("ddlrun: info: python package ddl for the ranks: " + dir +
                       "/ddl (first on their PYTHONPATH)\n"),
            std::string::npos)
      << r.err;
}

TEST_F(LaunchTest, ArgumentsArriveByteForByte) {
  const std::vector<std::string> tricky = {
      "two words", "it's \"quoted\"", "$(touch /tmp/x)", "a;b", "new\nline", "*", ""};
  std::vector<std::string> args = {
      "-H",   "localhost:2", "--no-probe", "--tag-output",
      "none", "sh",          "-c",         "printf '<%s>' \"$@\"; echo",
      "sh"};
  args.insert(args.end(), tricky.begin(), tricky.end());
  const Result r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string expected;
  for (const std::string& t : tricky)
    expected += "<" + t + ">";
  expected += "\n";
  // Each rank prints two lines (one argument holds a newline); lines stay whole but the two
  // ranks' lines may interleave, so compare the lines in sorted order.
  auto sorted_lines = [](const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      lines.push_back(line);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(sorted_lines(r.out), sorted_lines(expected + expected)) << r.out;
}

TEST_F(LaunchTest, FailingRankStopsTheJobWithItsStatus) {
  const auto start = std::chrono::steady_clock::now();
  const Result r = run({"-H", "localhost:3", "--no-probe", "sh", "-c",
                        "if [ $RANK = 1 ]; then echo about to fail; exit 7; fi; exec sleep 30"});
  EXPECT_EQ(r.status, 7);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(r.err.find("ddlrun: rank 1 (localhost) exited with status 7; stopping the other 2 "
                       "processes\nddlrun: last lines of rank 1 (localhost):\n  about to fail\n"),
            std::string::npos)
      << r.err;
}

TEST_F(LaunchTest, RankKilledBySignal) {
  const Result r =
      run({"-H", "localhost:2", "--no-probe", "sh", "-c", "[ $RANK = 0 ] && kill -9 $$; sleep 30"});
  EXPECT_EQ(r.status, 137);
  EXPECT_NE(r.err.find("ddlrun: rank 0 (localhost) was killed by SIGKILL"), std::string::npos)
      << r.err;
}

TEST_F(LaunchTest, RanksThatIgnoreSigtermAreKilledAfterTheGrace) {
  const auto start = std::chrono::steady_clock::now();
  const Result r = run({"-H", "localhost:2", "--no-probe", "--kill-grace", "0.5", "sh", "-c",
                        "trap '' TERM; [ $RANK = 0 ] && sleep 0.3 && exit 3; sleep 30"});
  EXPECT_EQ(r.status, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_NE(r.err.find("ddlrun: 1 of 2 processes still running 0.5 s after SIGTERM; sending "
                       "SIGKILL"),
            std::string::npos)
      << r.err;
}

TEST_F(LaunchTest, TimeoutGivesOneTwentyFour) {
  const Result r = run({"--timeout", "0.5", "-H", "localhost:2", "--no-probe", "sleep", "30"});
  EXPECT_EQ(r.status, 124);
  EXPECT_NE(r.err.find("ddlrun: the job timed out after 0.5 s (--timeout); stopping 2 processes"),
            std::string::npos)
      << r.err;
}

TEST_F(LaunchTest, MissingProgramIsOneTwentySeven) {
  const Result r = run({"-H", "localhost:2", "--no-probe", "no-such-program-for-ddlrun"});
  EXPECT_EQ(r.status, 127);
  EXPECT_EQ(r.err.rfind("ddlrun: error: localhost: cannot run 'no-such-program-for-ddlrun': not "
                        "found on PATH (",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(LaunchTest, StdinGoesToRankZeroOnly) {
  const Result r = run({"-H", "localhost:3", "--no-probe", "--tag-output", "rank", "sh", "-c",
                        "read line; echo \"got [$line]\""},
                       "hello\n");
  EXPECT_NE(r.out.find("[0] got [hello]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] got []\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[2] got []\n"), std::string::npos) << r.out;
}

TEST_F(LaunchTest, OutputDirHoldsEachRanksStreams) {
  const std::string out_dir = (dir_ / "out").string();
  const Result r = run({"-H", "localhost:2", "--no-probe", "--output-dir", out_dir, "sh", "-c",
                        "echo out $RANK; echo err $RANK >&2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(slurp(out_dir + "/rank.0/stdout"), "out 0\n");
  EXPECT_EQ(slurp(out_dir + "/rank.1/stderr"), "err 1\n");
}

TEST_F(LaunchTest, InterruptLeavesNothingRunning) {
  const std::string pids = (dir_ / "pids").string();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(DDLRUN_BINARY, "ddlrun", "-H", "localhost:3", "--no-probe", "sh", "-c",
          ("echo $$ >> " + pids + "; exec sleep 30").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the three ranks have written their pids.
  for (int i = 0; i < 100; ++i) {
    std::string text = slurp(pids);
    if (std::count(text.begin(), text.end(), '\n') == 3) break;
    std::this_thread::sleep_for(50ms);
  }
  kill(child, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  std::istringstream in(slurp(pids));
  int n = 0;
  for (pid_t p; in >> p; ++n)
    EXPECT_NE(kill(p, 0), 0) << "rank process " << p << " survived";
  EXPECT_EQ(n, 3);
}

TEST_F(LaunchTest, TopologyFileIsRemovedAfterTheJob) {
  const Result r = run({"-H", "localhost:1", "--no-probe", "--tag-output", "none", "sh", "-c",
                        "echo $DDL_TOPOLOGY_FILE"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string path = r.out.substr(0, r.out.find('\n'));
  EXPECT_FALSE(path.empty());
  EXPECT_FALSE(std::filesystem::exists(path)) << path;
}

}  // namespace

// ddlrun's rendezvous for the ranks listens where the ranks are told to come when ddlrun knows
// it beforehand (the local launcher: loopback only), else on every address.
TEST(RankRendezvousBindTest, LoopbackForTheLocalLauncherOnly) {
  EXPECT_EQ(ddl::ddlrun::rank_rendezvous_bind(ddl::ddlrun::backend_named("local"), false),
            "127.0.0.1");
  EXPECT_EQ(ddl::ddlrun::rank_rendezvous_bind(ddl::ddlrun::backend_named("local"), true), "");
  EXPECT_EQ(ddl::ddlrun::rank_rendezvous_bind(ddl::ddlrun::backend_named("ssh"), false), "");
}
