// Subgroups and alltoall with threads as ranks over the real shared-memory and TCP links:
// every collective on groups of odd sizes, members listed out of rank order, a group of one,
// two overlapping groups used in alternation with the job's calls, count 0, and the
// mismatches (another group's call, another member list, alltoallv counts that disagree)
// failing on every member with the exact text.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "comm/core/communicator.h"
#include "comm/core/subgroup.h"
#include "ranks.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;
using test_ranks::fast;
using test_ranks::grid;
using test_ranks::run_ranks;

const char* const kTail =
    " (every rank must make the same calls in the same order; this communicator now fails "
    "every call)";

std::string hex(uint32_t id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08" PRIx32, id);
  return buf;
}

/// Every member of `g` holds the same bytes in `buf`.
void expect_same_everywhere(Subgroup& g, const void* buf, size_t bytes) {
  std::vector<uint8_t> all(bytes * g.size());
  g.allgather(buf, all.data(), bytes, DataType::kUint8);
  for (int m = 1; m < g.size(); ++m)
    ASSERT_EQ(std::memcmp(all.data(), all.data() + m * bytes, bytes), 0) << "member " << m;
}

/// allreduce (small and large, inexact float sums), allreduce_n, broadcast from every root,
/// allgather, reduce_scatter and barrier on `g`, checked.
void check_reductions(Subgroup& g) {
  const int n = g.size(), me = g.rank();
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{100'003}}) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i)
      v[i] = 0.1f * static_cast<float>(me + 1) + static_cast<float>(i % 5);
    g.allreduce(v.data(), v.data(), count, DataType::kFloat32, ReduceOp::kSum);
    if (count > 0) {
      EXPECT_NEAR(v[count - 1], 0.05f * n * (n + 1) + n * ((count - 1) % 5), 1e-3);
    }
    expect_same_everywhere(g, v.data(), v.size() * 4);
  }
  std::vector<int64_t> a(5, me), b(70'000, 1);
  void* bufs[] = {a.data(), b.data()};
  size_t counts[] = {a.size(), b.size()};
  g.allreduce_n(bufs, counts, 2, DataType::kInt64, ReduceOp::kSum);
  EXPECT_EQ(a[4], n * (n - 1) / 2);
  EXPECT_EQ(b[69'999], n);
  for (int root = 0; root < n; ++root) {
    for (size_t count : {size_t{0}, size_t{3}, size_t{50'000}}) {
      std::vector<int32_t> x(count, me == root ? 42 + root : -1);
      g.broadcast(x.data(), count, DataType::kInt32, root);
      for (int32_t e : x)
        ASSERT_EQ(e, 42 + root);
    }
  }
  int32_t mine[2] = {me, 10 * me}, all[16] = {};
  g.allgather(mine, all, 2, DataType::kInt32);
  for (int m = 0; m < n; ++m)
    EXPECT_EQ(all[2 * m + 1], 10 * m);
  std::vector<int32_t> in(3 * n), out(3);
  std::iota(in.begin(), in.end(), 0);
  g.reduce_scatter(in.data(), out.data(), 3, DataType::kInt32, ReduceOp::kMax);
  EXPECT_EQ(out[2], 3 * me + 2);
  g.barrier();
}

/// alltoall (counts 0, 1, 1000) and alltoallv (member i sends i+j elements to member j).
template <typename Target>
void check_alltoall(Target& g) {
  const int n = g.size(), me = g.rank();
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}}) {
    std::vector<int32_t> send(count * n), recv(count * n, -1);
    for (int j = 0; j < n; ++j)
      for (size_t k = 0; k < count; ++k)
        send[j * count + k] = static_cast<int32_t>(me * 1'000'000 + j * 10'000 + k);
    g.alltoall(send.data(), recv.data(), count, DataType::kInt32);
    for (int j = 0; j < n; ++j)
      for (size_t k = 0; k < count; ++k)
        ASSERT_EQ(recv[j * count + k], static_cast<int32_t>(j * 1'000'000 + me * 10'000 + k));
  }
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t st = 0, rt = 0;
  for (int j = 0; j < n; ++j) {
    sc[j] = static_cast<size_t>(me + j);
    rc[j] = static_cast<size_t>(j + me);
    sd[j] = st;
    rd[j] = rt + 1;  // a gap before each block
    st += sc[j];
    rt += rc[j] + 1;
  }
  std::vector<double> send(st), recv(rt, -1);
  for (int j = 0; j < n; ++j)
    for (size_t k = 0; k < sc[j]; ++k)
      send[sd[j] + k] = me * 100 + j + k / 1000.0;
  g.alltoallv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
              DataType::kFloat64);
  for (int j = 0; j < n; ++j) {
    EXPECT_EQ(recv[rd[j] - 1], -1) << "the gap before block " << j;
    for (size_t k = 0; k < rc[j]; ++k)
      ASSERT_EQ(recv[rd[j] + k], j * 100 + me + k / 1000.0);
  }
}

TEST(GroupTest, EveryCollectiveOnAnOddGroupListedOutOfOrder) {
  run_ranks(5, std::nullopt, fast(), [](Communicator& c) {
    const int list[] = {4, 1, 3};
    std::unique_ptr<Subgroup> g = c.create_group(list);
    if (c.rank() == 0 || c.rank() == 2) {
      EXPECT_EQ(g, nullptr);
      return;
    }
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->size(), 3);
    EXPECT_EQ(g->global(g->rank()), c.rank());
    EXPECT_EQ(g->rank(), c.rank() == 4 ? 0 : c.rank() == 1 ? 1 : 2);
    check_reductions(*g);
    check_alltoall(*g);
  });
}

TEST(GroupTest, EveryCollectiveOnAGroupAcrossTcpHosts) {
  // 2 hosts x 2 ranks; the group takes one rank of each host and one more.
  const Topology t = grid(2, 2, "groups-tcp-" + std::to_string(getpid()));
  run_ranks(4, t, fast(), [](Communicator& c) {
    const int list[] = {0, 3, 2};
    std::unique_ptr<Subgroup> g = c.create_group(list);
    if (!g) return;
    check_reductions(*g);
    check_alltoall(*g);
  });
}

TEST(GroupTest, AGroupOfOneCopiesWithoutCommunicating) {
  run_ranks(3, std::nullopt, fast(), [](Communicator& c) {
    const int list[] = {c.rank()};
    std::unique_ptr<Subgroup> g = c.create_group(list);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->size(), 1);
    EXPECT_EQ(g->rank(), 0);
    check_reductions(*g);
    check_alltoall(*g);
  });
}

TEST(GroupTest, TwoOverlappingGroupsInAlternationWithTheJob) {
  run_ranks(4, std::nullopt, fast(), [](Communicator& c) {
    const int a_list[] = {0, 1, 2}, b_list[] = {1, 2, 3};
    std::unique_ptr<Subgroup> a = c.create_group(a_list);
    std::unique_ptr<Subgroup> b = c.create_group(b_list);
    for (int round = 0; round < 20; ++round) {
      for (size_t count : {size_t{3}, size_t{20'000}}) {
        std::vector<int32_t> x(count, c.rank() + round), y(count, 10 * c.rank());
        if (a) a->allreduce(x.data(), x.data(), count, DataType::kInt32, ReduceOp::kSum);
        if (b) b->allreduce(y.data(), y.data(), count, DataType::kInt32, ReduceOp::kSum);
        int32_t w = 1;
        c.allreduce(&w, &w, 1, DataType::kInt32, ReduceOp::kSum);
        ASSERT_EQ(w, 4);
        if (a) {
          ASSERT_EQ(x[count - 1], 3 + 3 * round);
        }
        if (b) {
          ASSERT_EQ(y[0], 60);
        }
      }
    }
  });
}

TEST(GroupTest, GroupsOfTheSameListAreToldApart) {
  // Two groups of ranks {0, 1}: rank 0 calls the first's barrier, rank 1 the second's.
  std::vector<std::string> errors(2), later(2);
  std::vector<uint32_t> ids(2);
  run_ranks(2, std::nullopt, fast(), [&](Communicator& c) {
    const int list[] = {0, 1};
    std::unique_ptr<Subgroup> first = c.create_group(list);
    std::unique_ptr<Subgroup> second = c.create_group(list);
    ids = {first->id(), second->id()};
    try {
      (c.rank() == 0 ? first : second)->barrier();
    } catch (const MismatchError& e) {
      errors[c.rank()] = e.what();
    }
    try {
      c.barrier();
    } catch (const MismatchError& e) {
      later[c.rank()] = e.what();
    }
  });
  EXPECT_NE(ids[0], ids[1]);
  const std::string want = "collective mismatch: rank 0 called barrier() #1 in group " +
                           hex(ids[0]) + " but rank 1 called barrier() #1 in group " + hex(ids[1]) +
                           kTail;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(errors[r], want) << "rank " << r;
    EXPECT_EQ(later[r], want) << "rank " << r;
  }
}

TEST(GroupTest, ALargeCallWithAnotherCountFailsOnEveryMember) {
  // The ring path (checked before the data moves) on a group of 3 of 4 ranks.
  std::vector<std::string> errors(4);
  uint32_t id = 0;
  run_ranks(4, std::nullopt, fast(), [&](Communicator& c) {
    const int list[] = {3, 0, 2};
    std::unique_ptr<Subgroup> g = c.create_group(list);
    if (!g) return;
    if (c.rank() == 0) id = g->id();
    std::vector<float> v(100'001);
    try {
      g->allreduce(v.data(), v.data(), c.rank() == 2 ? 100'000 : 100'001, DataType::kFloat32,
                   ReduceOp::kSum);
    } catch (const MismatchError& e) {
      errors[c.rank()] = e.what();
    }
  });
  const std::string want =
      "collective mismatch: rank 0 called allreduce(count=100001, float32, sum) #1 in group " +
      hex(id) + " but rank 2 called allreduce(count=100000, float32, sum) #1 in group " + hex(id) +
      kTail;
  for (int r : {0, 2, 3})
    EXPECT_EQ(errors[r], want) << "rank " << r;
  EXPECT_EQ(errors[1], "");
}

TEST(GroupTest, MembersThatListDifferentRanksFailTheFirstCall) {
  // Creation sends nothing; the lists' ids differ, and so do the first calls.
  std::vector<std::string> errors(2);
  std::vector<uint32_t> ids(2);
  run_ranks(2, std::nullopt, fast(), [&](Communicator& c) {
    const int list0[] = {0, 1}, list1[] = {1, 0};
    std::unique_ptr<Subgroup> g = c.create_group(c.rank() == 0 ? list0 : list1);
    ids[c.rank()] = g->id();
    try {
      g->barrier();
    } catch (const MismatchError& e) {
      errors[c.rank()] = e.what();
    }
  });
  const std::string want = "collective mismatch: rank 0 called barrier() #1 in group " +
                           hex(ids[0]) + " but rank 1 called barrier() #1 in group " + hex(ids[1]) +
                           kTail;
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(errors[r], want) << "rank " << r;
}

TEST(GroupTest, CreationWaitsForNoCollective) {
  // Rank 1 makes a group while its other thread is inside a barrier that waits for rank 0,
  // which makes the group before it enters the barrier.
  run_ranks(2, std::nullopt, fast(), [](Communicator& c) {
    const int list[] = {0, 1};
    std::unique_ptr<Subgroup> g;
    if (c.rank() == 0) {
      std::this_thread::sleep_for(100ms);
      g = c.create_group(list);
      c.barrier();
    } else {
      std::thread other([&] { c.barrier(); });
      std::this_thread::sleep_for(20ms);
      g = c.create_group(list);
      other.join();
    }
    g->barrier();
  });
}

TEST(GroupTest, BadListsAreRefused) {
  run_ranks(2, std::nullopt, fast(), [](Communicator& c) {
    const int twice[] = {1, 1}, outside[] = {0, 2};
    EXPECT_THROW(
        {
          try {
            c.create_group(twice);
          } catch (const ArgumentError& e) {
            EXPECT_STREQ(e.what(), "group_create: rank 1 is listed twice");
            throw;
          }
        },
        ArgumentError);
    try {
      c.create_group(outside);
      ADD_FAILURE() << "no error";
    } catch (const ArgumentError& e) {
      EXPECT_STREQ(e.what(), "group_create: 2 is not a rank (0..1)");
    }
  });
}

TEST(GroupTest, AGroupsOwnTimeoutEndsACallAPeerNeverMakes) {
  // Rank 0 alone calls the barrier of a group whose timeout is 0.3 s (the job's is 20 s): it
  // fails after the group's timeout, naming the peer, while rank 1 waits (its links open).
  std::atomic<bool> failed{false};
  run_ranks(2, std::nullopt, fast(), [&failed](Communicator& c) {
    const int list[] = {0, 1};
    std::unique_ptr<Subgroup> g = c.create_group(list);
    g->set_timeout(300ms);
    if (c.rank() == 1) {
      for (int i = 0; i < 1000 && !failed; ++i)
        std::this_thread::sleep_for(10ms);
    } else {
      const auto start = std::chrono::steady_clock::now();
      try {
        g->barrier();
        ADD_FAILURE() << "no error";
      } catch (const transport::TransportError& e) {
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        EXPECT_EQ(e.what(), "rank 1 (" + std::string(host) + "): no progress for 0.3 s");
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      EXPECT_GE(waited, 300ms);
      EXPECT_LT(waited, 10s);
      failed = true;
    }
  });
}

TEST(AlltoallTest, EveryRankCountOnTheJob) {
  for (int n : {1, 2, 3, 5}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    run_ranks(n, std::nullopt, fast(), [](Communicator& c) { check_alltoall(c); });
  }
  const Topology t = grid(2, 3, "alltoall-tcp-" + std::to_string(getpid()));
  run_ranks(6, t, fast(), [](Communicator& c) { check_alltoall(c); });
}

TEST(AlltoallTest, CountsThatDisagreeFailOnEveryRank) {
  // Rank 2 expects 3 elements from rank 1, which sends 2.
  std::vector<std::string> errors(3);
  run_ranks(3, std::nullopt, fast(), [&](Communicator& c) {
    std::vector<size_t> sc(3, 2), rc(3, 2), displs = {0, 2, 4};
    if (c.rank() == 2) rc[1] = 3;
    std::vector<float> send(6), recv(7);
    try {
      c.alltoallv(send.data(), sc.data(), displs.data(), recv.data(), rc.data(), displs.data(),
                  DataType::kFloat32);
    } catch (const MismatchError& e) {
      errors[c.rank()] = e.what();
    }
  });
  const std::string want =
      std::string(
          "collective mismatch: rank 0 called alltoallv(float32) #1 but rank 2 called "
          "alltoallv(float32, expecting 3 elements from rank 1, which sends 2) #1") +
      kTail;
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(errors[r], want) << "rank " << r;
}

TEST(AlltoallTest, AnotherCountFailsOnEveryRank) {
  std::vector<std::string> errors(3);
  run_ranks(3, std::nullopt, fast(), [&](Communicator& c) {
    const size_t count = c.rank() == 1 ? 5 : 4;
    std::vector<int32_t> send(15), recv(15);
    try {
      c.alltoall(send.data(), recv.data(), count, DataType::kInt32);
    } catch (const MismatchError& e) {
      errors[c.rank()] = e.what();
    }
  });
  const std::string want =
      std::string(
          "collective mismatch: rank 0 called alltoall(count=4, int32) #1 but rank 1 "
          "called alltoall(count=5, int32) #1") +
      kTail;
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(errors[r], want) << "rank " << r;
}

}  // namespace
}  // namespace ddl::comm
