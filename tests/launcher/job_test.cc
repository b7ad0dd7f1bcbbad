#include "launcher/job.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>

#include "launcher/ssh/protocol.h"

namespace ddl::launcher {
namespace {

/// Two hosts, three ranks: 0 and 1 on host 0 (bound), 2 on host 1 (unbound).
Job sample_job() {
  Job job;
  comm::Topology& t = job.topology;
  t.job_id = "job-7";
  t.hosts = {{0, "n1", "10.200.0.2", {}}, {1, "n2", "10.200.0.3", {}}};
  t.ranks = {
      {0, 0, 0, 0, "", "", comm::CpuSet::parse("0-3"), "", ""},
      {1, 1, 0, 1, "", "", comm::CpuSet::parse("4-7"), "", ""},
      {2, 0, 1, -1, "", "", comm::CpuSet(), "", ""},
  };
  t.mode = comm::parse_mode("p:1x3");
  t.rings = comm::default_rings({1, 3});
  job.argv = {"python3", "train.py", "--lr", "0.1 0.2", "$(rm -rf /); echo 'x'\n"};
  job.exports = {{"FOO", "bar"}, {"RANK", "overridden"}};
  job.topology_path = "/tmp/topo.yaml";
  job.token = "abc123";
  job.cwd = "/home/u/run 1";
  job.cores = {2, 4, 0};
  return job;
}

std::map<std::string, std::string> as_map(const std::vector<EnvVar>& env) {
  return {env.begin(), env.end()};
}

TEST(RankEnvironmentTest, GivesDdlAndTorchrunVariables) {
  Job job = sample_job();
  job.exports.clear();
  const Rendezvous rv{"10.200.0.2", 29500, 29501, ""};
  auto env = as_map(rank_environment(job, 1, rv, "/p/topo.yaml", {}));
  EXPECT_EQ(env["DDL_RANK"], "1");
  EXPECT_EQ(env["DDL_SIZE"], "3");
  EXPECT_EQ(env["DDL_LOCAL_RANK"], "1");
  EXPECT_EQ(env["DDL_LOCAL_SIZE"], "2");
  EXPECT_EQ(env["DDL_HOST_INDEX"], "0");
  EXPECT_EQ(env["DDL_NUM_HOSTS"], "2");
  EXPECT_EQ(env["DDL_GPU"], "1");
  EXPECT_EQ(env["DDL_CPUS"], "4-7");
  EXPECT_EQ(env["DDL_JOB_ID"], "job-7");
  EXPECT_EQ(env["DDL_TOPOLOGY_FILE"], "/p/topo.yaml");
  EXPECT_EQ(env["DDL_RENDEZVOUS"], "10.200.0.2:29501");
  EXPECT_EQ(env["DDL_JOB_TOKEN"], "abc123");
  EXPECT_EQ(env["DDL_OPTIONS"], "-mode p:1x3");
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "3");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["GROUP_RANK"], "0");
  EXPECT_EQ(env["MASTER_ADDR"], "10.200.0.2");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "4");  // cores, not PUs
}

TEST(RankEnvironmentTest, RendezvousServerAddressWhenGiven) {
  const Rendezvous rv{"10.200.0.2", 29500, 41000, "fe80::1"};
  EXPECT_EQ(as_map(rank_environment(sample_job(), 0, rv, "t", {}))["DDL_RENDEZVOUS"],
            "[fe80::1]:41000");
}

TEST(RankEnvironmentTest, OmpThreadsOnlyWhenBoundAndNotSetByTheUser) {
  Job job = sample_job();
  const Rendezvous rv{"a", 1, 2, ""};
  EXPECT_EQ(as_map(rank_environment(job, 2, rv, "t", {})).count("OMP_NUM_THREADS"), 0u);
  EXPECT_EQ(
      as_map(rank_environment(job, 0, rv, "t", {.omp_num_threads = true})).count("OMP_NUM_THREADS"),
      0u);
  job.cores.clear();  // unknown cores: the PUs count
  EXPECT_EQ(as_map(rank_environment(job, 0, rv, "t", {}))["OMP_NUM_THREADS"], "4");
}

TEST(RankEnvironmentTest, ExportsWinAndKeepTheirOrder) {
  const std::vector<EnvVar> env = rank_environment(sample_job(), 2, {"a", 1, 2, ""}, "t", {});
  auto m = as_map(env);
  EXPECT_EQ(m["RANK"], "overridden");
  EXPECT_EQ(m["FOO"], "bar");
  EXPECT_EQ(env.back(), (EnvVar{"FOO", "bar"}));
}

TEST(RankEnvironmentTest, PythonDirFirstOnPythonPath) {
  Job job = sample_job();
  const Rendezvous rv{"a", 1, 2, ""};
  EXPECT_EQ(as_map(rank_environment(job, 0, rv, "t", {})).count("PYTHONPATH"), 0u);
  job.python_dir = "/b/python";
  const std::string ours = "/b/python/ddl/_site:/b/python";
  EXPECT_EQ(as_map(rank_environment(job, 0, rv, "t", {}))["PYTHONPATH"], ours);
  EXPECT_EQ(as_map(rank_environment(job, 0, rv, "t", {.python_path = "/u:/v"}))["PYTHONPATH"],
            ours + ":/u:/v");
  // Already first (a ddlrun inside a job): not twice.
  EXPECT_EQ(as_map(rank_environment(job, 0, rv, "t", {.python_path = ours + ":/u"}))["PYTHONPATH"],
            ours + ":/u");
  // -x PYTHONPATH=... replaces the inherited one, after ours.
  job.exports.emplace_back("PYTHONPATH", "/x");
  const std::vector<EnvVar> env = rank_environment(job, 0, rv, "t", {.python_path = "/u"});
  EXPECT_EQ(std::count_if(env.begin(), env.end(),
                          [](const EnvVar& e) { return e.first == "PYTHONPATH"; }),
            1);
  EXPECT_EQ(as_map(env)["PYTHONPATH"], ours + ":/x");
}

// A pip-installed ddlrun's package lies in its environment's site-packages: on the path of
// /usr/bin/python3 ranks, that environment's torch would silently replace Debian's.
TEST(RankEnvironmentTest, ASitePackagesIsNeverOnThePythonPath) {
  Job job = sample_job();
  const Rendezvous rv{"a", 1, 2, ""};
  for (const std::string dir :
       {"/v/lib/python3.11/site-packages", "/usr/lib/python3/dist-packages/"}) {
    job.python_dir = dir;
    EXPECT_EQ(as_map(rank_environment(job, 0, rv, "t", {.python_path = "/u"}))["PYTHONPATH"],
              dir + "/ddl/_site:/u");
  }
}

TEST(RankEnvironmentTest, InheritedFromTheEnvironment) {
  const Inherited in = inherited_from({"A=1", "PYTHONPATH=/p:/q", "OMP_NUM_THREADS=3"});
  EXPECT_TRUE(in.omp_num_threads);
  EXPECT_EQ(in.python_path, "/p:/q");
  EXPECT_FALSE(inherited_from({"OMP_NUM_THREADS="}).omp_num_threads);
  EXPECT_EQ(inherited_from({"PYTHONPATHX=/p"}).python_path, "");
}

TEST(RankEnvironmentTest, UnknownRankNamesTheJob) {
  try {
    rank_environment(sample_job(), 9, {"a", 1, 2, ""}, "t", {});
    FAIL();
  } catch (const comm::TopologyError& e) {
    EXPECT_STREQ(e.what(), "rank 9 is not in the topology of job job-7 (it has 3 ranks)");
  }
}

TEST(EncodeJobTest, RoundTripsEveryByte) {
  Job job = sample_job();
  job.argv.push_back(std::string("nul\0inside", 10));
  job.python_dir = "/opt/ddl run/python";
  const Job back = decode_job(encode_job(job));
  EXPECT_EQ(back.topology, job.topology);
  EXPECT_EQ(back.argv, job.argv);
  EXPECT_EQ(back.exports, job.exports);
  EXPECT_EQ(back.topology_path, job.topology_path);
  EXPECT_EQ(back.token, job.token);
  EXPECT_EQ(back.cwd, job.cwd);
  EXPECT_EQ(back.cores, job.cores);
  EXPECT_EQ(back.python_dir, job.python_dir);
}

TEST(EncodeJobTest, RefusesDamagedBytes) {
  const std::string bytes = encode_job(sample_job());
  EXPECT_THROW(decode_job("nonsense"), std::runtime_error);
  try {
    decode_job(bytes.substr(0, 40));  // inside the topology text
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "malformed job: truncated");
  }
  try {
    decode_job(bytes.substr(0, bytes.size() - 7));  // inside the list of cores
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "malformed job: a count of 3 exceeds the data");
  }
  try {
    decode_job(bytes + "x");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "malformed job: trailing bytes");
  }
}

TEST(TokenTest, SixtyFourHexDigitsAndFresh) {
  const std::string a = make_token(), b = make_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

TEST(FreePortTest, IsAFreePortBelowTheEphemeralRange) {
  int low = 0, high = 0;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    ASSERT_EQ(std::fscanf(f, "%d %d", &low, &high), 2);
    std::fclose(f);
  }
  for (int i = 0; i < 20; ++i) {
    const int p = free_tcp_port();
    EXPECT_GT(p, 0);
    EXPECT_LT(p, 65536);
    if (low > 21000) {
      EXPECT_GE(p, 20000);
      EXPECT_LT(p, low) << "the kernel could hand port " << p << " to another socket";
    }
    // Free: it can be bound and listened on at once.
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(p));
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << p;
    close(fd);
  }
}

TEST(FrameTest, SplitsAStreamIntoFrames) {
  const std::string a = ssh::encode_frame(ssh::FrameType::kStdout, 3, "hello\n'world'");
  const std::string b = ssh::encode_frame(ssh::FrameType::kSignal, -1, "");
  const std::string stream = a + b;
  ssh::FrameReader r;
  for (size_t i = 0; i < stream.size(); ++i) {  // a byte at a time, as a slow channel would
    r.feed(stream.substr(i, 1));
    if (i + 1 < a.size()) {
      EXPECT_FALSE(r.next().has_value());
    }
  }
  auto f1 = r.next();
  ASSERT_TRUE(f1);
  EXPECT_EQ(f1->type, ssh::FrameType::kStdout);
  EXPECT_EQ(f1->id, 3);
  EXPECT_EQ(f1->payload, "hello\n'world'");
  auto f2 = r.next();
  ASSERT_TRUE(f2);
  EXPECT_EQ(f2->type, ssh::FrameType::kSignal);
  EXPECT_EQ(f2->id, -1);
  EXPECT_FALSE(r.next());
}

TEST(FrameTest, ARoutedPayloadIsWholeFramesOrAnError) {
  const std::string a = ssh::encode_frame(ssh::FrameType::kHeartbeat, 0, "");
  const std::string b = ssh::encode_frame(ssh::FrameType::kFailure, 3, "why");
  const std::vector<ssh::Frame> got = ssh::routed_frames(a + b);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].type, ssh::FrameType::kFailure);
  EXPECT_EQ(got[1].id, 3);
  EXPECT_EQ(got[1].payload, "why");
  EXPECT_TRUE(ssh::routed_frames("").empty());
  try {
    ssh::routed_frames(a + b.substr(0, b.size() - 1));
    ADD_FAILURE() << "a partial frame taken";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "a routed frame ends inside a frame");
  }
}

TEST(FrameTest, ForeignBytesSayWhatToCheck) {
  ssh::FrameReader r;
  r.feed("Welcome to node1!\n");
  try {
    r.next();
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(),
                 "unexpected byte 87 from the agent (is something printing on its stdout, such "
                 "as a login script?)");
  }
}

// A channel's read of 4 MiB of small frames (a rank that writes a byte at a time, or a hostile
// host) is taken in time linear in its size: each frame taken used to move every byte after it
// (466,000 frames, ~1 TB moved), which held ddlrun or the relay for minutes.
TEST(FrameTest, ManySmallFramesTakeLinearTime) {
  const std::string one = ssh::encode_frame(ssh::FrameType::kHeartbeat, 0, "");
  std::string stream;
  for (size_t i = 0; i < (size_t{4} << 20) / one.size(); ++i)
    stream += one;
  ssh::FrameReader r;
  r.feed(stream + one.substr(0, 5));
  const auto start = std::chrono::steady_clock::now();
  size_t frames = 0;
  while (r.next())
    ++frames;
  EXPECT_EQ(frames, stream.size() / one.size());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.take_rest(), one.substr(0, 5));  // the start of the next frame, as fed
  EXPECT_FALSE(r.next());
}

TEST(FrameTest, TheRestIsWhatFollowsTheFramesTaken) {
  const std::string a = ssh::encode_frame(ssh::FrameType::kStdout, 1, "a");
  const std::string b = ssh::encode_frame(ssh::FrameType::kStderr, 2, "bb");
  ssh::FrameReader r;
  r.feed(a + b + b.substr(0, 4));
  ASSERT_TRUE(r.next());
  r.feed(b.substr(4));  // the rest of the second b, fed after a was taken
  ASSERT_TRUE(r.next());
  const std::optional<ssh::Frame> f = r.next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->payload, "bb");
  r.feed(a.substr(0, 3));
  EXPECT_EQ(r.take_rest(), a.substr(0, 3));
  EXPECT_EQ(r.take_rest(), "");
}

TEST(FrameTest, ALengthOver256MiBIsRefusedBeforeItsBytes) {
  ssh::FrameReader r;
  r.feed(std::string("O\0\0\0\0\x10\0\0\x01", 9));  // 256 MiB + 1, and nothing of it
  try {
    r.next();
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "a frame from the agent is too large");
  }
}

}  // namespace
}  // namespace ddl::launcher
