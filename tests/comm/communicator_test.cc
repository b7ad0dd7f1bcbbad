// The communicator with threads as ranks: memory bootstrap, real shared-memory and TCP links,
// with and without a topology (and so with the flat ring and the multi-dimensional rings).

#include "comm/core/communicator.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

#include "ranks.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;
using test_ranks::fast;
using test_ranks::grid;
using test_ranks::run_ranks;

void check_allreduce_sum(Communicator& c, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = static_cast<float>((c.rank() + 1) * static_cast<int>(i % 13));
  std::vector<float> out(count);
  c.allreduce(v.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum);
  const float tri = static_cast<float>(c.size() * (c.size() + 1) / 2);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(out[i], tri * static_cast<float>(i % 13)) << "element " << i << " rank " << c.rank();
  }
}

/// kAvg of 0.1 (rank + 1) + i % 3: the mean over the ranks, and the same bits on every rank.
void check_avg_same_bits(Communicator& c, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 0.1f * static_cast<float>(c.rank() + 1) + static_cast<float>(i % 3);
  c.allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kAvg);
  std::vector<float> all(v.size() * c.size());
  c.allgather(v.data(), all.data(), v.size(), DataType::kFloat32);
  for (int r = 1; r < c.size(); ++r)
    ASSERT_EQ(std::memcmp(all.data(), all.data() + r * v.size(), v.size() * 4), 0)
        << "rank " << r << " differs from rank 0";
  EXPECT_NEAR(v[0], 0.05f * static_cast<float>(c.size() + 1), 1e-5);
  EXPECT_NEAR(v[1], 0.05f * static_cast<float>(c.size() + 1) + 1, 1e-5);
}

TEST(CommunicatorTest, FlatRingOverSharedMemory) {
  run_ranks(4, std::nullopt, fast(), [](Communicator& c) {
    EXPECT_EQ(c.size(), 4);
    EXPECT_EQ(c.local_size(), 4);  // one host name
    EXPECT_EQ(c.local_rank(), c.rank());
    for (size_t n : {0ul, 1ul, 5ul, 1000ul, 300001ul})
      check_allreduce_sum(c, n);
  });
}

TEST(CommunicatorTest, MultiRingAcrossTcpHostsAndSharedMemory) {
  const Topology t = grid(2, 3, "job-multi-" + std::to_string(getpid()));
  for (std::string_view algo : {"multiring", "ring", "rd", "auto"}) {
    run_ranks(6, t, fast(algo), [](Communicator& c) {
      EXPECT_EQ(c.local_size(), 2);
      EXPECT_EQ(c.local_rank(), c.rank() % 2);
      for (size_t n : {0ul, 1ul, 7ul, 100003ul})
        check_allreduce_sum(c, n);
    });
  }
}

TEST(CommunicatorTest, MultiDimensionalPipelineOverTheNodeGroupAndTcp) {
  // 2 ranks per host x 2 hosts per rack x 2 racks: the host's ranks through the node group
  // (or, with DDL_SHM=0, their shared-memory ring), two TCP dimensions outside, in chunks of
  // 4 KiB so that every call above a few thousand elements runs the pipeline's threads.
  Topology t = grid(2, 4, "job-pipe-" + std::to_string(getpid()));
  t.mode = parse_mode("p:2x2x2");
  t.rings = default_rings({2, 2, 2});
  for (bool shm : {true, false}) {
    for (size_t chunk : {size_t{0}, size_t{4096}}) {
      CommOptions o = fast("multiring");
      o.shm = shm;
      o.pipeline_bytes = chunk;
      run_ranks(8, t, o, [](Communicator& c) {
        for (size_t n : {0ul, 1ul, 7ul, 4097ul, 100003ul})
          check_allreduce_sum(c, n);
        check_avg_same_bits(c, 50'001);  // kAvg divides once by all 8
      });
    }
  }
}

TEST(CommunicatorTest, LongRingsRunAsSubRings) {
  // 12 hosts of one rank in one dimension: with DDL_MAX_RING 4 the ring runs as 4 x 3, with 2 as
  // 2 x 2 x 3 (the TCP links of sub-rings whose neighbours are not the ring's), with 0 whole
  // (the flat ring, one dimension). Sums are exact; kAvg gives every rank the same bits.
  const Topology t = grid(1, 12, "job-split-" + std::to_string(getpid()));
  const std::vector<std::pair<int, std::vector<int>>> cases = {
      {4, {4, 3}}, {2, {3, 2, 2}}, {0, {12}}, {16, {12}}};
  for (const auto& [max_ring, dims] : cases) {
    CommOptions o = fast();
    o.max_ring = max_ring;
    o.pipeline_bytes = 4096;  // several chunks: the pipeline's threads, one per sub-ring
    run_ranks(12, t, o, [&dims](Communicator& c) {
      EXPECT_EQ(c.allreduce_dimensions(), dims) << "rank " << c.rank();
      for (size_t n : {0ul, 1ul, 11ul, 4097ul, 100003ul})
        check_allreduce_sum(c, n);
      check_avg_same_bits(c, 30'001);
    });
  }
}

TEST(CommunicatorTest, EveryCollectiveWithoutTheNodeGroup) {
  // DDL_SHM=0: the byte rings and recursive doubling over shared-memory links.
  CommOptions o = fast();
  o.shm = false;
  run_ranks(3, std::nullopt, o, [](Communicator& c) {
    std::vector<int32_t> v(100'000, c.rank());
    c.allreduce(v.data(), v.data(), v.size(), DataType::kInt32, ReduceOp::kSum);
    EXPECT_EQ(v[99'999], 3);
    c.broadcast(v.data(), v.size(), DataType::kInt32, 1);
    int32_t mine = c.rank(), all[3];
    c.allgather(&mine, all, 1, DataType::kInt32);
    EXPECT_EQ(all[2], 2);
    c.barrier();
  });
}

TEST(CommunicatorTest, EveryCollective) {
  run_ranks(3, std::nullopt, fast(), [](Communicator& c) {
    const int n = c.size(), r = c.rank();
    // avg of doubles, min/max of int64
    double d = r;
    c.allreduce(&d, &d, 1, DataType::kFloat64, ReduceOp::kAvg);
    EXPECT_EQ(d, 1.0);
    int64_t m[2] = {r, -r};
    c.allreduce(m, m, 2, DataType::kInt64, ReduceOp::kMax);
    EXPECT_EQ(m[0], n - 1);
    EXPECT_EQ(m[1], 0);
    // allreduce_n with a bucket smaller than some buffers
    std::vector<int32_t> a(10, r), b(3, 1), big(5000, r);
    void* bufs[] = {a.data(), b.data(), big.data()};
    size_t counts[] = {a.size(), b.size(), big.size()};
    c.allreduce_n(bufs, counts, 3, DataType::kInt32, ReduceOp::kSum);
    EXPECT_EQ(a[9], 3);
    EXPECT_EQ(b[0], 3);
    EXPECT_EQ(big[4999], 3);
    // broadcast
    std::vector<uint8_t> msg(777, static_cast<uint8_t>(r == 2 ? 9 : 0));
    c.broadcast(msg.data(), msg.size(), DataType::kUint8, 2);
    EXPECT_EQ(msg[776], 9);
    // allgather
    int32_t mine[2] = {r, 10 * r};
    std::vector<int32_t> all(2 * n);
    c.allgather(mine, all.data(), 2, DataType::kInt32);
    EXPECT_EQ(all, (std::vector<int32_t>{0, 0, 1, 10, 2, 20}));
    // reduce_scatter
    std::vector<float> in(2 * n);
    for (int i = 0; i < 2 * n; ++i)
      in[i] = static_cast<float>(i);
    float out[2];
    c.reduce_scatter(in.data(), out, 2, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(out[0], static_cast<float>(n * 2 * r));
    EXPECT_EQ(out[1], static_cast<float>(n * (2 * r + 1)));
    c.barrier();
    EXPECT_THROW(c.broadcast(msg.data(), 1, DataType::kUint8, 3), ArgumentError);
  });
}

TEST(CommunicatorTest, SmallBroadcastsReachEveryRankFromEveryRoot) {
  // Below DDL_SMALL_BYTES the data rides on recursive doubling's messages: every rank count
  // (powers of two and not, so every place of the root in the fold), every root.
  for (int n = 2; n <= 7; ++n) {
    run_ranks(n, std::nullopt, fast(), [n](Communicator& c) {
      for (int root = 0; root < n; ++root) {
        for (size_t count : {size_t{1}, size_t{1000}}) {
          std::vector<int32_t> v(count, c.rank() == root ? 100 + root : -1);
          v[count - 1] = c.rank() == root ? 7 * root : -2;
          c.broadcast(v.data(), count, DataType::kInt32, root);
          ASSERT_EQ(v[count - 1], 7 * root) << "root " << root << " count " << count;
          ASSERT_EQ(v[0], count > 1 ? 100 + root : 7 * root) << "root " << root;
        }
      }
    });
  }
}

TEST(CommunicatorTest, CheckCatchesNothingWhenResultsAreRight) {
  CommOptions o = fast();
  o.check = 0.0;
  run_ranks(2, std::nullopt, o, [](Communicator& c) {
    check_allreduce_sum(c, 4099);
    // The narrow types against the reference too (DDL_CHECK reads their elements).
    std::vector<int8_t> s(100, static_cast<int8_t>(-c.rank() - 1));
    c.allreduce(s.data(), s.data(), s.size(), DataType::kInt8, ReduceOp::kSum);
    EXPECT_EQ(s[99], -3);
    std::vector<uint16_t> u(100, 40000);
    c.allreduce(u.data(), u.data(), u.size(), DataType::kUint16, ReduceOp::kSum);
    EXPECT_EQ(u[0], 80000 - 65536);
    std::vector<uint8_t> b(100, static_cast<uint8_t>(c.rank()));
    c.allreduce(b.data(), b.data(), b.size(), DataType::kBool, ReduceOp::kBxor);
    EXPECT_EQ(b[50], 1);
  });
}

TEST(CommunicatorTest, TopologyOfAnotherJobIsRefused) {
  const Topology t = grid(2, 2, "j");
  auto boots = make_memory_bootstraps(3);
  try {
    Communicator c(std::move(boots[0]), t, fast(), "x");
    FAIL();
  } catch (const TopologyError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 0: the topology file describes 4 ranks, but the launcher started 3 (was "
                 "it written for another job?)");
  }
}

// Ranks as processes over the real rendezvous: one dies after wiring up, and the others, inside
// an allreduce, fail with an error that names it instead of hanging.
TEST(CommunicatorProcessTest, PeerDeathIsNamed) {
  const int n = 3;
  RendezvousServer server("tok", n);
  const Topology t = grid(1, 3, "job-death-" + std::to_string(getpid()));  // 3 hosts: TCP
  std::vector<pid_t> kids;
  std::vector<int> pipes;
  for (int r = 0; r < n; ++r) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      std::string result = "ok";
      try {
        CommOptions o = fast("ring");
        o.timeout = 5s;
        Communicator c(make_rendezvous_bootstrap("127.0.0.1:" + std::to_string(server.port()),
                                                 "tok", r, n, 5s),
                       t, o, "tok");
        c.barrier();
        if (r == 2) _exit(3);
        std::vector<float> v(1 << 20, 1.0f);
        c.allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
      } catch (const std::exception& e) {
        result = e.what();
      }
      [[maybe_unused]] ssize_t w = write(fds[1], result.data(), result.size());
      _exit(0);
    }
    close(fds[1]);
    kids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < n; ++r) {
    int status;
    waitpid(kids[r], &status, 0);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  // Rank 0 receives from rank 2 and rank 1 sends to it: whichever notices first names rank 2
  // and gives up, and the other may then see that rank's connection close instead (the
  // launcher reports the first failure). Each names a peer; at least one names rank 2.
  std::string texts;
  for (int r : {0, 1}) {
    std::string text;
    char buf[512];
    ssize_t k;
    while ((k = read(pipes[r], buf, sizeof buf)) > 0)
      text.append(buf, static_cast<size_t>(k));
    EXPECT_NE(text.find("rank "), std::string::npos) << "rank " << r << ": " << text;
    EXPECT_NE(text, "ok") << "rank " << r;
    texts += text + "\n";
  }
  EXPECT_NE(texts.find("rank 2 ("), std::string::npos) << texts;
  for (int fd : pipes)
    close(fd);
}

TEST(IdentityTest, NotLaunchedSaysHowToRun) {
  for (const char* v : {"DDL_RANK", "OMPI_COMM_WORLD_RANK", "JSM_NAMESPACE_RANK", "SLURM_PROCID",
                        "PMI_RANK", "PMIX_NAMESPACE", "DDL_ALLOW_SINGLE"}) {
    if (std::getenv(v) != nullptr) GTEST_SKIP() << v << " is set";
  }
  try {
    init_from_environment();
    FAIL();
  } catch (const BootstrapError& e) {
    EXPECT_STREQ(e.what(),
                 "this process was not started by a launcher (no PMIx server, and none of "
                 "DDL_RANK, OMPI_COMM_WORLD_RANK, JSM_NAMESPACE_RANK, SLURM_PROCID, PMI_RANK is "
                 "set); run it with ddlrun, or set DDL_ALLOW_SINGLE=1 to run it as a job of one "
                 "rank");
  }
  setenv("DDL_ALLOW_SINGLE", "1", 1);
  auto c = init_from_environment();
  unsetenv("DDL_ALLOW_SINGLE");
  EXPECT_EQ(c->size(), 1);
  float x = 3;
  c->allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(x, 3);
}

TEST(OptionsTest, BadValuesNameTheVariable) {
  setenv("DDL_ALGO", "fast", 1);
  try {
    options_from_environment();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "$DDL_ALGO is 'fast'; expected auto, shm, ring, multiring or rd");
  }
  unsetenv("DDL_ALGO");
  setenv("DDL_OPTIONS", "-mode r:2x2", 1);
  EXPECT_EQ(options_from_environment().algo, find_allreduce("ring"));
  unsetenv("DDL_OPTIONS");
}

}  // namespace
}  // namespace ddl::comm
