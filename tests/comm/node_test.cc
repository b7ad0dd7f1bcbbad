// The node group's shared-memory collectives (comm/collectives/node.h): threads of this
// process as the ranks of one host, and a forked process for a member that dies.

#include "comm/collectives/node.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/collectives/node_copy.h"
#include "comm/collectives/node_segment.h"
#include "comm/collectives/shared_buffer.h"
#include "comm/transport/link.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt32,   DataType::kInt64,
                               DataType::kUint8,    DataType::kInt8,    DataType::kInt16,
                               DataType::kUint16,   DataType::kBool};
constexpr ReduceOp kOps[] = {ReduceOp::kSum,  ReduceOp::kAvg,  ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProd, ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor};

/// Whether the runtime reduces `t` with `op` (the refused pairs are ReduceTest's).
bool reduces(DataType t, ReduceOp op) {
  return reduction_error(t, op).empty();
}

int job_counter = 0;

std::vector<NodeMember> members(int n) {
  std::vector<NodeMember> m;
  for (int r = 0; r < n; ++r)
    m.push_back({10 + r, static_cast<int>(getpid()), "rank " + std::to_string(10 + r) + " (h)"});
  return m;
}

/// Runs body(group) on n threads, each with its own NodeGroup; returns each one's error text.
std::vector<std::string> run_group(int n, NodeOptions o,
                                   const std::function<void(NodeGroup&)>& body) {
  o.job = "node-test-" + std::to_string(getpid()) + "-" + std::to_string(job_counter++);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        NodeGroup g(members(n), r, o);
        body(g);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return errors;
}

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r)
    EXPECT_EQ(errors[r], "") << "member " << r;
}

/// Member r's input: small integers as floats (sums and products exact enough to be
/// finite), arbitrary bits for integers.
std::vector<std::byte> input(int r, size_t count, DataType type, uint64_t salt) {
  const size_t ts = type_size(type);
  std::vector<std::byte> out(count * ts);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ (r + 7) * 0xbf58476d1ce4e5b9ull ^ salt;
    const int small = static_cast<int>(h % 7) - 3;
    switch (type) {
      case DataType::kFloat32: {
        const float v = static_cast<float>(small) * 0.75f;
        std::memcpy(&out[i * ts], &v, ts);
        break;
      }
      case DataType::kFloat64: {
        const double v = small * 0.375;
        std::memcpy(&out[i * ts], &v, ts);
        break;
      }
      case DataType::kFloat16: {  // small integers: sign, exponent 15 + k, no mantissa
        const uint16_t bits = small == 0 ? 0
                                         : static_cast<uint16_t>(((small < 0) << 15) | (15 << 10) |
                                                                 ((std::abs(small) - 1) << 8));
        std::memcpy(&out[i * ts], &bits, ts);
        break;
      }
      case DataType::kBFloat16: {
        const float v = static_cast<float>(small);
        uint32_t w;
        std::memcpy(&w, &v, 4);
        const auto bits = static_cast<uint16_t>(w >> 16);
        std::memcpy(&out[i * ts], &bits, ts);
        break;
      }
      default:
        std::memcpy(&out[i * ts], &h, ts);
    }
  }
  return out;
}

/// What the node group must give, bit for bit: inputs reduced in member order with the
/// runtime's own reduce_into, kAvg divided once.
std::vector<std::byte> reference(int n, size_t count, DataType type, ReduceOp op, uint64_t salt) {
  std::vector<std::byte> acc = input(0, count, type, salt);
  const ReduceOp fold = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  for (int r = 1; r < n; ++r) {
    const auto in = input(r, count, type, salt);
    reduce_into(acc.data(), in.data(), count, type, fold);
  }
  if (op == ReduceOp::kAvg) divide(acc.data(), count, type, n);
  return acc;
}

NodeOptions tiny_chunks() {
  NodeOptions o;
  o.chunk_bytes = 256;  // many steps even for short buffers
  o.small_bytes = 64;
  o.timeout = 20s;
  return o;
}

TEST(NodeGroup, AllreduceMatchesRankOrderReferenceBitForBit) {
  for (int in_place_parity : {1, 0})
    for (int n : {2, 3, 4}) {
      for (DataType t : kTypes) {
        for (ReduceOp op : kOps) {
          if (!reduces(t, op)) continue;
          for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{13}, size_t{1000}}) {
            const auto want = reference(n, count, t, op, count);
            std::vector<std::vector<std::byte>> got(n);
            expect_no_errors(run_group(n, tiny_chunks(), [&](NodeGroup& g) {
              auto mine = input(g.rank(), count, t, count);
              std::vector<std::byte> out(mine.size());
              // In place on the members of one parity, out of place on the others (a member
              // reduces its slice straight into its output, which is then its input or not).
              if (g.rank() % 2 != in_place_parity) {
                g.allreduce(mine.data(), out.data(), count, t, op, nullptr);
              } else {
                g.allreduce(mine.data(), mine.data(), count, t, op, nullptr);
                out = mine;
              }
              got[g.rank()] = out;
            }));
            for (int r = 0; r < n; ++r)
              ASSERT_EQ(got[r], want)
                  << "in place on parity " << in_place_parity << ", n=" << n << " " << to_string(t)
                  << " " << to_string(op) << " count=" << count << " member " << r;
          }
        }
      }
    }
}

TEST(NodeSegment, OneAnotherUserOwnsIsNotJoined) {
  const std::string name = "/ddl-node-test-" + std::to_string(getpid()) + "-foreign";
  node::create_segment(name, 2, 4096, 64, 0);  // mapped for the test's life
  if (chown(("/dev/shm" + name).c_str(), 65534, 65534) != 0) {
    shm_unlink(name.c_str());
    GTEST_SKIP() << "cannot give " << name << " to uid 65534 (not root)";
  }
  std::string what = "(joined)";
  try {
    node::attach_segment(name, "rank 0 (h)", 1000ms);
  } catch (const transport::TransportError& e) {
    what = e.what();
  }
  shm_unlink(name.c_str());
  EXPECT_EQ(what, "the shared-memory segment " + name +
                      " belongs to uid 65534, not to this rank's uid " + std::to_string(geteuid()) +
                      ": another user of this host made a file of that name first; remove "
                      "/dev/shm" +
                      name +
                      " (as that user or root), or give the job another "
                      "DDL_JOB_ID");
}

TEST(NodeGroup, LargeBuffersTakeManyStepsAndStayExact) {
  for (size_t cma : {size_t{0}, size_t{64 * 1024}}) {  // through the slots, and in place
    SCOPED_TRACE("cma_bytes " + std::to_string(cma));
    NodeOptions o;
    o.cma_bytes = cma;
    o.chunk_bytes = 64 * 1024;
    o.timeout = 20s;
    const size_t count = (3u << 20) / 4 + 3;  // 3 MiB of float32, not divisible
    const auto want = reference(4, count, DataType::kFloat32, ReduceOp::kSum, 1);
    std::vector<std::vector<std::byte>> got(4);
    expect_no_errors(run_group(4, o, [&](NodeGroup& g) {
      auto mine = input(g.rank(), count, DataType::kFloat32, 1);
      for (int k = 0; k < 3; ++k) {  // again and again: the slots are reused
        auto buf = mine;
        g.allreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum, nullptr);
        got[g.rank()] = buf;
      }
    }));
    for (int r = 0; r < 4; ++r)
      EXPECT_TRUE(got[r] == want) << "member " << r;
  }
}

TEST(NodeGroup, PiecesOfManyBlocksAreExactInAndOutOfPlace) {
  // Slots of 1 MiB: each member's piece spans many of the reduction's blocks (up to 32 KiB,
  // straight into the output, through the accumulator with 3 members or more) and ends in a
  // partial one, for every type, in place on some members and not on others.
  NodeOptions o;
  o.chunk_bytes = 1 << 20;
  o.timeout = 20s;
  for (int n : {2, 3, 4}) {
    for (DataType t : kTypes) {
      // int8's and int16's sums are uint8's and uint16's kernels: no other path.
      if (t == DataType::kInt8 || t == DataType::kInt16) continue;
      const size_t count = (3u << 20) / type_size(t) + 5;
      const auto want = reference(n, count, t, ReduceOp::kSum, 3);
      std::vector<std::vector<std::byte>> got(n);
      expect_no_errors(run_group(n, o, [&](NodeGroup& g) {
        auto mine = input(g.rank(), count, t, 3);
        std::vector<std::byte> out(mine.size());
        if (g.rank() == 1) {
          g.allreduce(mine.data(), mine.data(), count, t, ReduceOp::kSum, nullptr);
          out = mine;
        } else {
          g.allreduce(mine.data(), out.data(), count, t, ReduceOp::kSum, nullptr);
        }
        got[g.rank()] = out;
      }));
      for (int r = 0; r < n; ++r)
        EXPECT_TRUE(got[r] == want) << "n=" << n << " " << to_string(t) << " member " << r;
    }
  }
}

TEST(NodeGroup, TheAutomaticSlotIsOneCoresL2WithinItsBounds) {
  // What sysfs says of cpu0's level-2 cache, read here independently (the first index whose
  // level is 2 and whose type is not Instruction).
  size_t l2 = 0;
  for (int i = 0; i < 8 && l2 == 0; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    auto read = [&](const char* f) {
      std::string v;
      if (FILE* fp = std::fopen((dir + f).c_str(), "r")) {
        char buf[64] = "";
        if (std::fgets(buf, sizeof buf, fp) != nullptr) v = buf;
        std::fclose(fp);
      }
      while (!v.empty() && v.back() == '\n')
        v.pop_back();
      return v;
    };
    if (read("level") != "2" || read("type") == "Instruction") continue;
    const std::string size = read("size");
    char* end = nullptr;
    l2 = std::strtoull(size.c_str(), &end, 10) * (*end == 'K' ? 1024 : *end == 'M' ? 1 << 20 : 1);
  }
  const size_t want = l2 == 0 ? 256 * 1024 : std::clamp<size_t>(l2, 256 * 1024, 4 << 20);
  EXPECT_EQ(auto_chunk_bytes(), want) << "sysfs L2: " << l2;
  // A group with the default (automatic) slot runs a sweep of several steps exactly.
  NodeOptions o;
  o.timeout = 20s;
  const size_t count = 3 * want / 4 + 5;  // 3 slots' worth of float32 over 2 members
  const auto expect = reference(2, count, DataType::kFloat32, ReduceOp::kSum, 3);
  std::vector<std::vector<std::byte>> got(2);
  expect_no_errors(run_group(2, o, [&](NodeGroup& g) {
    auto mine = input(g.rank(), count, DataType::kFloat32, 3);
    std::vector<std::byte> out(mine.size());
    g.allreduce(mine.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum, nullptr);
    got[g.rank()] = out;
  }));
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(got[r] == expect) << "member " << r;
}

TEST(NodeGroup, ReduceScatterGivesEachMemberItsBlock) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    const int n = 3;
    const size_t rc = 77;
    const auto want = reference(n, rc * n, DataType::kFloat32, op, 5);
    std::vector<std::vector<std::byte>> got(n);
    expect_no_errors(run_group(n, tiny_chunks(), [&](NodeGroup& g) {
      const auto mine = input(g.rank(), rc * n, DataType::kFloat32, 5);
      std::vector<std::byte> out(rc * 4);
      g.reduce_scatter(mine.data(), out.data(), rc, DataType::kFloat32, op, nullptr);
      got[g.rank()] = out;
    }));
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(std::equal(got[r].begin(), got[r].end(), want.begin() + r * rc * 4))
          << to_string(op) << " member " << r;
  }
}

TEST(NodeGroup, AllgatherAndBroadcastCopyExactly) {
  const int n = 4;
  const size_t count = 301;
  std::vector<std::vector<std::byte>> gathered(n), cast(n);
  expect_no_errors(run_group(n, tiny_chunks(), [&](NodeGroup& g) {
    const auto mine = input(g.rank(), count, DataType::kInt64, 9);
    std::vector<std::byte> all(count * 8 * n);
    g.allgather(mine.data(), all.data(), count, DataType::kInt64, nullptr);
    gathered[g.rank()] = all;
    for (int root = 0; root < n; ++root) {
      auto buf = input(g.rank(), 1001, DataType::kUint8, 3);
      g.broadcast(buf.data(), buf.size(), root, nullptr);
      if (buf != input(root, 1001, DataType::kUint8, 3)) cast[g.rank()].push_back(std::byte{1});
    }
    g.barrier(nullptr);
  }));
  for (int r = 0; r < n; ++r) {
    for (int q = 0; q < n; ++q)
      EXPECT_TRUE(std::equal(gathered[r].begin() + q * count * 8,
                             gathered[r].begin() + (q + 1) * count * 8,
                             input(q, count, DataType::kInt64, 9).begin()))
          << "member " << r << " block " << q;
    EXPECT_TRUE(cast[r].empty()) << "member " << r << " got a wrong broadcast";
  }
}

TEST(NodeGroup, InPlaceStepsComposeToTheAllreduce) {
  const int n = 3;
  const size_t count = 1234;
  const auto want = reference(n, count, DataType::kFloat64, ReduceOp::kAvg, 2);
  std::vector<std::vector<std::byte>> got(n);
  expect_no_errors(run_group(n, tiny_chunks(), [&](NodeGroup& g) {
    auto buf = input(g.rank(), count, DataType::kFloat64, 2);
    NodeDimension d(g);
    d.reduce_scatter(buf.data(), count, DataType::kFloat64, ReduceOp::kAvg);
    d.allgather(buf.data(), count, DataType::kFloat64);
    got[g.rank()] = buf;
  }));
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(got[r] == want) << "member " << r;
}

Signature sig_of(uint64_t seq, size_t count) {
  Signature s;
  s.seq = seq;
  s.kind = CollectiveKind::kAllreduce;
  s.count = count;
  return s;
}

TEST(NodeGroup, MismatchedCallsFailOnEveryMemberWithTheSameText) {
  const auto errors = run_group(3, tiny_chunks(), [&](NodeGroup& g) {
    const size_t count = g.rank() == 2 ? 11 : 10;
    std::vector<float> buf(count, 1.0f);
    const Signature s = sig_of(1, count);
    g.allreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum, &s);
  });
  for (const std::string& e : errors)
    EXPECT_EQ(e,
              "collective mismatch: rank 10 called allreduce(count=10, float32, sum) #1 but "
              "rank 12 called allreduce(count=11, float32, sum) #1 (every rank must make the same "
              "calls in the same order; this communicator now fails every call)");
}

TEST(NodeGroup, AMemberThatLeavesIsNamed) {
  NodeOptions o = tiny_chunks();
  const auto errors = run_group(3, o, [&](NodeGroup& g) {
    if (g.rank() == 1) return;  // leaves without calling: its destructor marks it closed
    std::vector<float> buf(100, 1.0f);
    g.allreduce(buf.data(), buf.data(), 100, DataType::kFloat32, ReduceOp::kSum, nullptr);
  });
  EXPECT_EQ(errors[0], "rank 11 (h): it left the collective (its communicator was closed)");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(errors[2], errors[0]);
}

TEST(NodeGroup, AMemberThatNeverCallsTimesOutNamingIt) {
  NodeOptions o = tiny_chunks();
  o.timeout = 300ms;
  std::atomic<int> finished{0};
  const auto errors = run_group(2, o, [&](NodeGroup& g) {
    if (g.rank() == 1) {
      while (finished.load() == 0)
        std::this_thread::sleep_for(5ms);
      return;
    }
    try {
      g.barrier(nullptr);
    } catch (...) {
      finished = 1;
      throw;
    }
  });
  EXPECT_EQ(errors[0], "rank 11 (h): no progress for 0.3 s");
}

/// Names of this job's segments still in /dev/shm.
std::vector<std::string> leftovers(const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

TEST(NodeGroup, ADeadProcessIsNamedAndNothingIsLeftInDevShm) {
  NodeOptions o = tiny_chunks();
  o.job = "node-test-fork-" + std::to_string(getpid());
  std::vector<NodeMember> m = members(2);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    m[1].pid = getpid();
    try {
      new NodeGroup(m, 1, o);  // never destroyed: the process dies inside the group
      const char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(3);
    } catch (...) {
      _exit(2);
    }
    _exit(0);
  }
  m[1].pid = child;
  std::string error;
  try {
    NodeGroup g(m, 0, o);
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    EXPECT_TRUE(leftovers("ddl-" + o.job).empty());
    std::vector<float> buf(1000, 1.0f);
    int status = 0;
    waitpid(child, &status, 0);
    g.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum, nullptr);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_EQ(error, "rank 11 (h): the process has exited");
  close(ready[0]);
  close(ready[1]);
}

// Three processes (this one and two forked): the large allreduce reads the others' buffers
// through process_vm_readv when the kernel allows it, and gives the same bits as the slots.
TEST(NodeGroup, ProcessesReadEachOthersBuffersAndAgreeWithTheSlots) {
  const size_t count = (1u << 20) / 4 + 5;  // 1 MiB of float32 and a bit
  const auto want = reference(3, count, DataType::kFloat32, ReduceOp::kAvg, 9);
  for (size_t cma : {size_t{0}, size_t{64 * 1024}}) {
    SCOPED_TRACE("cma_bytes " + std::to_string(cma));
    NodeOptions o;
    o.cma_bytes = cma;
    o.timeout = 20s;
    o.job = "node-test-cma-" + std::to_string(getpid()) + "-" + std::to_string(cma);
    std::vector<NodeMember> m = members(3);
    // Each child learns every member's pid through its pipe before it joins.
    int pipes[3][2];
    std::vector<pid_t> children;
    for (int r = 1; r < 3; ++r) {
      ASSERT_EQ(pipe(pipes[r]), 0);
      const pid_t child = fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        int pids[3];
        if (read(pipes[r][0], pids, sizeof pids) != sizeof pids) _exit(4);
        for (int k = 0; k < 3; ++k)
          m[k].pid = pids[k];
        try {
          NodeGroup g(m, r, o);
          auto buf = input(r, count, DataType::kFloat32, 9);
          g.allreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kAvg, nullptr);
          _exit(buf == want ? 0 : 3);
        } catch (...) {
          _exit(2);
        }
      }
      children.push_back(child);
      m[r].pid = child;
    }
    const int pids[3] = {m[0].pid, m[1].pid, m[2].pid};
    for (int r = 1; r < 3; ++r) {
      ASSERT_EQ(write(pipes[r][1], pids, sizeof pids), static_cast<ssize_t>(sizeof pids));
      close(pipes[r][0]);
      close(pipes[r][1]);
    }
    auto mine = input(0, count, DataType::kFloat32, 9);
    std::vector<std::byte> out(mine.size());
    std::string error;
    try {
      NodeGroup g(m, 0, o);
      EXPECT_EQ(g.reads_peers(), cma > 0) << "process_vm_readv between the ranks refused?";
      g.allreduce(mine.data(), out.data(), count, DataType::kFloat32, ReduceOp::kAvg, nullptr);
    } catch (const std::exception& e) {
      error = e.what();
    }
    EXPECT_EQ(error, "");
    EXPECT_TRUE(out == want);
    for (pid_t c : children) {
      int status = 0;
      waitpid(c, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    }
  }
}

TEST(NodeCopy, StreamCopyEqualsMemcpyAtEveryAlignmentAndLength) {
  std::vector<std::byte> src(4096 + 64), dst(4096 + 64);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<std::byte>(i * 131 + 7);
  for (size_t d_off = 0; d_off < 17; ++d_off) {
    for (size_t s_off : {size_t{0}, size_t{3}, size_t{16}}) {
      for (size_t len : {0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 1000, 4000}) {
        std::fill(dst.begin(), dst.end(), std::byte{0xee});
        node::stream_copy(dst.data() + d_off, src.data() + s_off, len);
        node::stream_fence();
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= d_off && i < d_off + len;
          ASSERT_EQ(dst[i], inside ? src[i - d_off + s_off] : std::byte{0xee})
              << "dst+" << d_off << " src+" << s_off << " len " << len << " byte " << i;
        }
      }
    }
  }
}

/// One call of the stress test: its size, type, op, place and the buffers' misalignment.
struct StressCall {
  size_t count;
  DataType type;
  ReduceOp op;
  bool in_place;
  size_t shift;  ///< elements the buffers start past an aligned address
};

/// The same pseudo-random calls for every member: sizes from 0 to 40,000 elements (the
/// one-step path, sweeps of one to many steps, streamed output), every type and op.
std::vector<StressCall> stress_calls(int how_many) {
  std::mt19937_64 rng(20261126);
  std::vector<StressCall> calls;
  for (int k = 0; k < how_many; ++k) {
    const size_t pick = rng() % 4;
    const size_t count = pick == 0 ? rng() % 16 : pick == 1 ? rng() % 600 : rng() % 40'000;
    const DataType t = kTypes[rng() % std::size(kTypes)];
    ReduceOp op = kOps[rng() % std::size(kOps)];
    while (!reduces(t, op))
      op = kOps[rng() % std::size(kOps)];
    calls.push_back({count, t, op, rng() % 2 == 0, rng() % 5});
  }
  return calls;
}

TEST(NodeGroup, ManyBackToBackCallsOfVariedSizesAreAllExact) {
  const auto calls = stress_calls(300);
  for (int n : {2, 3, 4}) {
    NodeOptions o;
    o.chunk_bytes = 4096;  // 40,000 elements: up to ~160 steps
    o.small_bytes = 512;
    o.stream_bytes = 8192;  // most sweeps stream their output
    o.timeout = 20s;
    std::vector<std::string> bad(n);
    expect_no_errors(run_group(n, o, [&](NodeGroup& g) {
      for (size_t k = 0; k < calls.size() && bad[g.rank()].empty(); ++k) {
        const StressCall& c = calls[k];
        const size_t ts = type_size(c.type), bytes = c.count * ts;
        const auto mine = input(g.rank(), c.count, c.type, k);
        // Misaligned by `shift` elements from a 64-byte boundary, in and out.
        std::vector<std::byte> space(2 * bytes + 256);
        std::byte* in = reinterpret_cast<std::byte*>(
            (reinterpret_cast<uintptr_t>(space.data()) + 63) / 64 * 64 + c.shift * ts);
        std::byte* out = c.in_place ? in : in + bytes + 64;
        if (bytes > 0) std::memcpy(in, mine.data(), bytes);  // no null source (UBSan)
        g.allreduce(in, out, c.count, c.type, c.op, nullptr);
        if (!std::equal(out, out + bytes, reference(n, c.count, c.type, c.op, k).begin())) {
          bad[g.rank()] = "call " + std::to_string(k) + ": " + std::to_string(c.count) + " " +
                          std::string(to_string(c.type)) + " " + std::string(to_string(c.op));
        }
      }
    }));
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(bad[r], "") << "n=" << n << " member " << r;
  }
}

TEST(NodeGroup, StreamedAllgatherAndBroadcastCopyExactly) {
  NodeOptions o = tiny_chunks();
  o.stream_bytes = 1;  // everything streams
  const int n = 3;
  const size_t count = 1001;
  std::vector<std::string> bad(n);
  expect_no_errors(run_group(n, o, [&](NodeGroup& g) {
    const auto mine = input(g.rank(), count, DataType::kFloat64, 4);
    std::vector<std::byte> all(count * 8 * n + 8);
    g.allgather(mine.data(), all.data() + 8, count, DataType::kFloat64, nullptr);
    for (int q = 0; q < n; ++q) {
      const auto want = input(q, count, DataType::kFloat64, 4);
      if (!std::equal(want.begin(), want.end(), all.begin() + 8 + q * count * 8))
        bad[g.rank()] += "allgather block " + std::to_string(q) + "; ";
    }
    auto buf = input(g.rank(), 3333, DataType::kUint8, 6);
    g.broadcast(buf.data(), buf.size(), 1, nullptr);
    if (buf != input(1, 3333, DataType::kUint8, 6)) bad[g.rank()] += "broadcast";
  }));
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(bad[r], "") << "member " << r;
}

// A member killed while the others run large allreduces back to back: the survivor's call
// (mid-sweep or the next one) names it.
TEST(NodeGroup, AProcessKilledMidCallIsNamed) {
  NodeOptions o;
  o.chunk_bytes = 64 * 1024;
  o.timeout = 20s;
  o.job = "node-test-kill-" + std::to_string(getpid());
  std::vector<NodeMember> m = members(2);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const size_t count = 4u << 20;  // 16 MiB of float32: hundreds of steps a call
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    m[1].pid = getpid();
    try {
      NodeGroup g(m, 1, o);
      std::vector<float> buf(count, 1.0f);
      const char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(3);
      for (;;)
        g.allreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum, nullptr);
    } catch (...) {
      _exit(2);
    }
  }
  m[1].pid = child;
  std::string error;
  std::thread killer;
  try {
    NodeGroup g(m, 0, o);
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    killer = std::thread([child] {
      std::this_thread::sleep_for(150ms);
      kill(child, SIGKILL);
    });
    std::vector<float> buf(count, 1.0f);
    for (int k = 0; k < 100'000; ++k)
      g.allreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum, nullptr);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (killer.joinable()) killer.join();
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(error, "rank 11 (h): the process has exited");
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  close(ready[0]);
  close(ready[1]);
}

// ---- Shared buffers (ddl_alloc; node_shared.cc) ----

/// A shared_alloc buffer holding `bytes`, freed when it ends.
struct Shared {
  explicit Shared(size_t bytes) : p(static_cast<std::byte*>(shared_alloc(bytes))), n(bytes) {}
  ~Shared() { shared_free(p); }
  std::byte* p;
  size_t n;
};

TEST(SharedBuffer, AllocationsAndFreesThatCannotBeDoneSayWhy) {
  auto error = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error([] { shared_alloc(0); }), "ddl_alloc: 0 bytes (ask for at least 1)");
  const std::string absurd = error([] { shared_alloc(size_t{1} << 62); });
  EXPECT_EQ(absurd.rfind("ddl_alloc: 4611686018427387904 bytes (4398046511104.0 MiB) is more "
                         "than this host's memory, ",
                         0),
            0u)
      << absurd;
  int local = 0;
  char text[32];
  std::snprintf(text, sizeof text, "%p", static_cast<void*>(&local));
  EXPECT_EQ(error([&] { shared_free(&local); }),
            std::string("ddl_free: ") + text +
                " is not a buffer from ddl_alloc (or it was freed already)");
  void* p = shared_alloc(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(static_cast<unsigned char*>(p)[99], 0);  // zeroed
  std::snprintf(text, sizeof text, "%p", p);
  {
    const SharedPin pin(p, 100);  // what an allreduce on it holds
    EXPECT_TRUE(pin.ok());
    EXPECT_EQ(error([&] { shared_free(p); }),
              std::string("ddl_free: ") + text +
                  " is in use by a collective running now (free it after the call returns)");
    EXPECT_FALSE(SharedPin(p, 101).ok());  // runs past its end: not shared
  }
  EXPECT_EQ(error([&] { shared_free(static_cast<std::byte*>(p) + 8); }).find("ddl_free: "), 0u);
  EXPECT_EQ(error([&] { shared_free(p); }), "");
  EXPECT_EQ(error([&] { shared_free(p); }),
            std::string("ddl_free: ") + text +
                " is not a buffer from ddl_alloc (or it was freed already)");
  EXPECT_EQ(error([] { shared_free(nullptr); }), "");
  EXPECT_FALSE(SharedPin(p, 1).ok());
}

/// Runs an in-place allreduce of `count` elements on n threads, member r's buffer shared when
/// bit r of `shared_mask` is set; checks every member's result and returns how many single
/// passes the members took.
int shared_allreduce(int n, unsigned shared_mask, size_t count, DataType t, ReduceOp op,
                     const NodeOptions& o) {
  const auto want = reference(n, count, t, op, count + shared_mask);
  std::atomic<int> passes{0};
  expect_no_errors(run_group(n, o, [&](NodeGroup& g) {
    EXPECT_TRUE(g.maps_peers());
    const auto in = input(g.rank(), count, t, count + shared_mask);
    Shared shared(std::max<size_t>(1, in.size()));
    std::vector<std::byte> plain(in.size());
    std::byte* buf = (shared_mask >> g.rank()) & 1 ? shared.p : plain.data();
    std::memcpy(buf, in.data(), in.size());
    g.allreduce(buf, buf, count, t, op, nullptr);
    EXPECT_EQ(std::memcmp(buf, want.data(), want.size()), 0)
        << "n=" << n << " mask=" << shared_mask << " " << to_string(t) << " " << to_string(op)
        << " count=" << count << " member " << g.rank();
    passes += static_cast<int>(g.single_passes());
  }));
  return passes;
}

TEST(NodeGroup, SharedBuffersTakeTheSinglePassOnlyWhenEveryMemberHasOne) {
  for (int n : {2, 3, 4}) {
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      const bool all = mask == (1u << n) - 1;
      // Many steps through the slots when not all share; 1000 elements above small_bytes.
      EXPECT_EQ(shared_allreduce(n, mask, 1000, DataType::kFloat32, ReduceOp::kSum, tiny_chunks()),
                all ? n : 0)
          << "n=" << n << " mask=" << mask;
    }
  }
}

TEST(NodeGroup, SharedBuffersGiveTheSameBitsForEveryTypeAndOp) {
  for (DataType t : kTypes) {
    for (ReduceOp op : kOps) {
      if (!reduces(t, op)) continue;
      for (size_t count : {size_t{13}, size_t{1000}, size_t{4099}}) {
        shared_allreduce(3, 0b111, count, t, op, tiny_chunks());
        shared_allreduce(3, 0b010, count, t, op, tiny_chunks());
      }
    }
  }
  NodeOptions streamed;  // large, the output written with streaming stores
  streamed.stream_bytes = 1;
  streamed.timeout = 20s;
  EXPECT_EQ(
      shared_allreduce(4, 0b1111, (1u << 20) + 3, DataType::kFloat32, ReduceOp::kAvg, streamed), 4);
  EXPECT_EQ(
      shared_allreduce(4, 0b0110, (1u << 20) + 3, DataType::kFloat32, ReduceOp::kAvg, streamed), 0);
}

TEST(NodeGroup, SharedAndPlainCallsAlternateBackToBack) {
  // The same groups through varied calls: a stale `share` word must never be taken for the
  // current call's.
  const int n = 3;
  NodeOptions o = tiny_chunks();
  o.job = "node-test-alternate-" + std::to_string(getpid());
  expect_no_errors(run_group(n, o, [&](NodeGroup& g) {
    Shared shared(4 * 5000);
    std::vector<std::byte> plain(4 * 5000);
    uint64_t all_shared = 0;
    for (int k = 0; k < 60; ++k) {
      const size_t count = 100 + 37 * static_cast<size_t>(k);
      const unsigned mask = (k * 5 + 3) % 8;
      all_shared += mask == 7;
      std::byte* buf = (mask >> g.rank()) & 1 ? shared.p : plain.data();
      const auto in = input(g.rank(), count, DataType::kInt32, k);
      std::memcpy(buf, in.data(), in.size());
      if (k % 7 == 3) g.barrier(nullptr);
      g.allreduce(buf, buf, count, DataType::kInt32, ReduceOp::kSum, nullptr);
      const auto want = reference(n, count, DataType::kInt32, ReduceOp::kSum, k);
      ASSERT_EQ(std::memcmp(buf, want.data(), want.size()), 0) << "call " << k;
    }
    EXPECT_EQ(g.single_passes(), all_shared);
    EXPECT_GT(all_shared, 0u);
  }));
}

/// Runs member(r, m) for every member of `m`: 0 on this thread, the others in forked children
/// that learn every member's pid through a pipe before they join. Returns each one's result
/// (a child's exit status; 2 for an exception, 1 for a child killed).
std::vector<int> run_processes(
    std::vector<NodeMember> m,
    const std::function<int(int, const std::vector<NodeMember>&)>& member) {
  const int n = static_cast<int>(m.size());
  std::vector<std::array<int, 2>> pipes(n);
  std::vector<pid_t> children;
  for (int r = 1; r < n; ++r) {
    if (pipe(pipes[r].data()) != 0) return {};
    const pid_t child = fork();
    if (child == 0) {
      std::vector<int> pids(n);
      if (read(pipes[r][0], pids.data(), n * sizeof(int)) != static_cast<ssize_t>(n * sizeof(int)))
        _exit(4);
      for (int k = 0; k < n; ++k)
        m[k].pid = pids[k];
      try {
        _exit(member(r, m));
      } catch (...) {
        _exit(2);
      }
    }
    children.push_back(child);
    m[r].pid = child;
  }
  std::vector<int> pids;
  for (const NodeMember& x : m)
    pids.push_back(x.pid);
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(write(pipes[r][1], pids.data(), n * sizeof(int)),
              static_cast<ssize_t>(n * sizeof(int)));
    close(pipes[r][0]);
    close(pipes[r][1]);
  }
  std::vector<int> results(n, 2);
  try {
    results[0] = member(0, m);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  for (int r = 1; r < n; ++r) {
    int status = 0;
    waitpid(children[r - 1], &status, 0);
    results[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  return results;
}

TEST(NodeGroup, ProcessesMapEachOthersSharedBuffers) {
  // Three processes; member r shares when bit r of the mask is set. Each reports 0 when its
  // results were right and it took as many single passes as expected.
  const size_t count = (1u << 20) / 4 + 5;
  for (unsigned mask : {0b111u, 0b101u, 0b000u}) {
    SCOPED_TRACE("mask " + std::to_string(mask));
    const auto want = reference(3, count, DataType::kFloat32, ReduceOp::kSum, mask);
    const uint64_t passes = mask == 0b111u ? 3 : 0;
    NodeOptions o;
    o.timeout = 20s;
    o.job = "node-test-shared-" + std::to_string(getpid()) + "-" + std::to_string(mask);
    const auto results =
        run_processes(members(3), [&](int r, const std::vector<NodeMember>& m) -> int {
          NodeGroup g(m, r, o);
          if (!g.maps_peers()) return 5;
          Shared shared(count * 4 + 64);
          std::vector<std::byte> plain(count * 4);
          // Member 1's buffer starts 64 bytes into its allocation: the peers find it there.
          std::byte* buf = (mask >> r) & 1 ? shared.p + (r == 1 ? 64 : 0) : plain.data();
          for (int k = 0; k < 3; ++k) {  // again: the peers' mappings are kept and reused
            const auto in = input(r, count, DataType::kFloat32, mask);
            std::memcpy(buf, in.data(), in.size());
            g.allreduce(buf, buf, count, DataType::kFloat32, ReduceOp::kSum, nullptr);
            if (std::memcmp(buf, want.data(), want.size()) != 0) return 3;
          }
          return g.single_passes() == passes ? 0 : 6;
        });
    EXPECT_EQ(results, std::vector<int>({0, 0, 0}));
  }
}

}  // namespace
}  // namespace ddl::comm
