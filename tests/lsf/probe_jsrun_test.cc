// Probing through jsrun: the step it runs, how the tasks' prefixed output becomes one
// inventory per host, and the errors (text compared exactly). probe_hosts_jsrun runs with a
// fake RunCommand that records what it was asked to run.

#include "lsf/probe_jsrun.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "mapper/inventory.h"

namespace ddl::lsf {
namespace {

using ::testing::ElementsAre;

mapper::Inventory inventory_named(const std::string& hostname) {
  mapper::Inventory inv;
  inv.hostname = hostname;
  mapper::Package p;
  p.cores.push_back(mapper::Core{0, 0, {0, 1}});
  inv.packages.push_back(p);
  return inv;
}

/// `text` with "RANK: " before each line, as jsrun --stdio_mode prepended prints it.
std::string prepended(int rank, const std::string& text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    out += std::to_string(rank) + ": " + text.substr(pos, end - pos) + "\n";
    pos = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

const std::string kCommand = "jsrun -n 2 ... ddlrun --probe";

TEST(JsrunProbe, Command) {
  EXPECT_THAT(jsrun_probe_command("/sw/ddlrun", 18, {"PATH=/bin"}),
              ElementsAre("jsrun", "-n", "18", "-r", "1", "-a", "1", "-c", "ALL_CPUS", "-g",
                          "ALL_GPUS", "-b", "none", "--stdio_mode", "prepended", "-E", "PATH",
                          "/sw/ddlrun", "--probe"));
  EXPECT_THAT(jsrun_probe_command("/sw/ddlrun", 2, {"LD_LIBRARY_PATH=/sw/lib"}),
              ElementsAre("jsrun", "-n", "2", "-r", "1", "-a", "1", "-c", "ALL_CPUS", "-g",
                          "ALL_GPUS", "-b", "none", "--stdio_mode", "prepended", "-E", "PATH", "-E",
                          "LD_LIBRARY_PATH", "/sw/ddlrun", "--probe"));
}

TEST(JsrunProbe, MatchesTasksToHostsByName) {
  mapper::RemoteOutput out;
  // Interleaved lines of two tasks, in no particular order, and a line from jsrun itself.
  const std::string a = prepended(1, mapper::to_yaml(inventory_named("a01n02.summit.olcf.gov")));
  const std::string b = prepended(0, mapper::to_yaml(inventory_named("a01n01")));
  out.out = "jsrun: starting\n";
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    for (size_t* k : {&i, &j}) {
      const std::string& s = k == &i ? a : b;
      if (*k >= s.size()) continue;
      const size_t end = s.find('\n', *k) + 1;
      out.out += s.substr(*k, end - *k);
      *k = end;
    }
  }
  const auto results = parse_jsrun_probe({"a01n01", "a01n02"}, kCommand, out);
  ASSERT_EQ(results.size(), 2u);
  ASSERT_TRUE(results[0].ok()) << results[0].error;
  ASSERT_TRUE(results[1].ok()) << results[1].error;
  EXPECT_EQ(results[0].inventory->hostname, "a01n01");
  EXPECT_EQ(results[1].inventory->hostname, "a01n02.summit.olcf.gov");
}

TEST(JsrunProbe, HostWithoutATask) {
  mapper::RemoteOutput out;
  out.out = prepended(0, mapper::to_yaml(inventory_named("a01n01"))) + "1: not: [yaml\n";
  const auto results = parse_jsrun_probe({"a01n01", "a01n02"}, kCommand, out);
  EXPECT_TRUE(results[0].ok());
  EXPECT_THAT(results[1].error,
              ::testing::StartsWith("no probe task of 'jsrun -n 2 ... ddlrun --probe' reported "
                                    "this host (tasks reported: a01n01); task 1: probe task 1"));
}

TEST(JsrunProbe, JsrunFails) {
  mapper::RemoteOutput out;
  out.exit_status = 255;
  out.err = "Error: Remote JSM server is not responding on host a01n02\nmore\n";
  const auto results = parse_jsrun_probe({"a01n01"}, kCommand, out);
  EXPECT_EQ(results[0].error,
            "jsrun probe 'jsrun -n 2 ... ddlrun --probe' exited with status 255\n"
            "  Error: Remote JSM server is not responding on host a01n02\n"
            "  more");
}

TEST(JsrunProbe, RunsOneStepForTheWholeJob) {
  std::vector<std::vector<std::string>> asked;
  JsrunProbeOptions o;
  o.ddlrun_path = "/sw/ddlrun";
  o.environ = {"LSB_JOBID=7", "LSB_MCPU_HOSTS=batch1 1 a01n01 42 a01n02 42 a01n03 42",
               "PATH=/bin:/usr/bin"};
  o.run = [&](const std::vector<std::string>& argv, const std::vector<std::string>&) {
    asked.push_back(argv);
    mapper::RemoteOutput out;
    for (int r = 0; r < 3; ++r)
      out.out += prepended(r, mapper::to_yaml(inventory_named("a01n0" + std::to_string(r + 1))));
    return out;
  };
  const auto results = probe_hosts_jsrun({"a01n03", "b01n01"}, o);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0][2], "3") << "one probe task per compute host of the job";
  EXPECT_EQ(asked[0].back(), "--probe");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].ok()) << results[0].error;
  EXPECT_EQ(results[1].error, "not a compute host of this LSF job, so jsrun cannot reach it");
}

TEST(JsrunProbe, LaterCommandsOfTheJobReadTheCache) {
  char dir[] = "/tmp/probe_jsrun_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  JsrunProbeOptions o;
  o.environ = {"LSB_JOBID=7", "LSB_MCPU_HOSTS=batch1 1 a01n01 42 a01n02 42"};
  o.job_id = "7";
  o.cache_dir = std::string(dir) + "/cache";
  int runs = 0;
  o.run = [&](const std::vector<std::string>&, const std::vector<std::string>&) {
    ++runs;
    mapper::RemoteOutput out;
    out.out = prepended(0, mapper::to_yaml(inventory_named("a01n01"))) +
              prepended(1, mapper::to_yaml(inventory_named("a01n02")));
    return out;
  };
  auto first = probe_hosts_jsrun({"a01n01", "a01n02"}, o);
  ASSERT_TRUE(first[0].ok() && first[1].ok()) << first[0].error << first[1].error;
  EXPECT_FALSE(first[0].cached);
  EXPECT_EQ(runs, 1) << "one jsrun step for both hosts";
  auto again = probe_hosts_jsrun({"a01n02"}, o);
  ASSERT_TRUE(again[0].ok()) << again[0].error;
  EXPECT_TRUE(again[0].cached);
  EXPECT_EQ(again[0].inventory->hostname, "a01n02");
  EXPECT_EQ(runs, 1) << "a cached host is not probed again";
  std::filesystem::remove_all(dir);
}

TEST(JsrunProbe, OutsideAnLsfJob) {
  JsrunProbeOptions o;
  o.environ = {"PATH=/bin"};
  o.run = [](const std::vector<std::string>&, const std::vector<std::string>&) {
    ADD_FAILURE() << "nothing should run";
    return mapper::RemoteOutput{};
  };
  const auto results = probe_hosts_jsrun({"a01n01"}, o);
  EXPECT_EQ(results[0].error, "not inside an LSF job, so jsrun cannot probe it");
}

}  // namespace
}  // namespace ddl::lsf
