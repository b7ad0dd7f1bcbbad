// The external launchers' base (external.h): the steps make_external_backend takes, in order,
// through a recording fake launcher; the preview; the rankfile lines mpirun and prterun share;
// and a BackendDescriptor of either kind.

#include "launcher/external.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/check.h"
#include "launcher/descriptor.h"
#include "launcher/local/local.h"
#include "launcher/mpirun/mpirun.h"
#include "tests/launcher/test_util.h"

namespace ddl::launcher {
namespace {

/// Records the steps it is asked for; runs `program` (found on the test's $PATH).
class RecordingLauncher : public ExternalLauncher {
 public:
  explicit RecordingLauncher(std::string_view program)
      : ExternalLauncher({program, "fake launcher: not found", "fake.txt", "fake file"}) {}

  void check_site(const Job&, const LaunchOptions&) override { steps.push_back("check_site"); }
  void check_program(const std::string& path, const LaunchOptions&) override {
    steps.push_back("check_program " + path);
  }
  JobEnvironment environment(const Job& job, const Rendezvous& rendezvous,
                             const LaunchOptions& options) const override {
    steps.push_back("environment " + std::to_string(rendezvous.ddl_port));
    return ExternalLauncher::environment(job, rendezvous, options);
  }
  ExternalCommand command(const Job&, const LaunchOptions&, const JobEnvironment& env,
                          const std::string& work_file_path) const override {
    steps.push_back("command " + work_file_path);
    ExternalCommand c;
    c.argv = {std::string(names().program), "--go"};
    c.work_file = {work_file_path, "the file\n"};
    c.env = env.set;
    return c;
  }

  mutable std::vector<std::string> steps;
};

Job one_rank_job() {
  Job job;
  job.topology.job_id = "ddlrun-7";
  job.topology.hosts = {{0, "node01", "", {}}};
  job.topology.ranks.resize(1);
  job.topology.mode = comm::parse_mode("r");
  job.argv = {"prog"};
  job.topology_path = "/t";
  job.token = "secret";
  return job;
}

/// A private work directory, removed afterwards.
class ExternalBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "ddl-external.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    options_.work_dir = dir_;
    options_.environ = {"PATH=/nonexistent-ddl:/bin:/usr/bin"};
    options_.rendezvous_port = 4000;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  LaunchOptions options_;
};

TEST_F(ExternalBackendTest, StepsRunInOrderAndTheWorkFileIsPrivate) {
  RecordingLauncher launcher("sh");
  const std::unique_ptr<Backend> backend =
      make_external_backend(launcher, one_rank_job(), options_);
  const std::string file = options_.work_dir + "/fake.txt";
  const std::vector<std::string> want = {"check_site", "check_program /bin/sh", "environment 4000",
                                         "command " + file};
  EXPECT_EQ(launcher.steps, want);
  EXPECT_EQ(backend->name(), "sh");
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "the file\n");
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(ExternalBackendTest, AMissingProgramStopsBeforeItIsAsked) {
  RecordingLauncher launcher("no-such-program-ddl");
  EXPECT_EQ(
      test::launch_error_of([&] { make_external_backend(launcher, one_rank_job(), options_); }),
      "fake launcher: not found");
  EXPECT_EQ(launcher.steps, std::vector<std::string>{"check_site"});
}

TEST_F(ExternalBackendTest, NoWorkDirectoryIsAnInternalError) {
  RecordingLauncher launcher("sh");
  options_.work_dir.clear();
  EXPECT_THROW(
      {
        try {
          make_external_backend(launcher, one_rank_job(), options_);
        } catch (const base::InternalError& e) {
          EXPECT_THAT(e.what(), ::testing::StartsWith("internal error: sh launcher: no work "
                                                      "directory for the fake file ("));
          throw;
        }
      },
      base::InternalError);
}

TEST_F(ExternalBackendTest, APreviewChecksNothingAndKeepsTheProgramsName) {
  RecordingLauncher launcher("no-such-program-ddl");
  const ExternalCommand c = preview_external(launcher, one_rank_job(), options_);
  const std::vector<std::string> want = {"environment 4000",
                                         "command " + options_.work_dir + "/fake.txt"};
  EXPECT_EQ(launcher.steps, want);
  EXPECT_EQ(c.argv, (std::vector<std::string>{"no-such-program-ddl", "--go"}));
  EXPECT_FALSE(std::filesystem::exists(c.work_file.path));
}

TEST(ExternalRankfile, LinesInRankOrderWithUnknownHostsAndUnboundRanks) {
  comm::Topology t;
  t.hosts = {{0, "a", "", {}}};
  t.ranks.resize(3);
  t.ranks[0].rank = 2;
  t.ranks[0].host = 5;
  t.ranks[1].rank = 0;
  t.ranks[1].cpus = comm::CpuSet::parse("0-3,8");
  t.ranks[2].rank = 1;
  EXPECT_EQ(rankfile_lines(t, ranks_in_order(t)),
            "rank 0=a slot=0-3,8\nrank 1=a slot=0\nrank 2=? slot=0\n");
  EXPECT_EQ(host_name_of(t, 0), "a");
  EXPECT_EQ(host_name_of(t, 5), "?");
}

TEST(BackendEntryTest, OwnLaunchersHaveNothingToPreview) {
  const BackendDescriptor local{.name = "local", .make_backend = make_local_backend};
  EXPECT_THROW(local.preview(one_rank_job(), {}), base::InternalError);
  const BackendDescriptor mpirun{.name = "mpirun", .make_launcher = make_mpirun_launcher};
  LaunchOptions o;
  o.ddlrun_path = "ddlrun";
  o.work_dir = "<work-dir>";
  const ExternalCommand c = mpirun.preview(one_rank_job(), o);
  EXPECT_EQ(c.argv.front(), "mpirun");
  EXPECT_EQ(c.work_file.path, "<work-dir>/rankfile");
}

}  // namespace
}  // namespace ddl::launcher
