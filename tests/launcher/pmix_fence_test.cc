#include <gtest/gtest.h>

#include "launcher/pmix_server/fence.h"

namespace ddl::launcher::pmix_server {
namespace {

using namespace std::chrono_literals;
using Clock = FenceCombiner::Clock;

/// Hosts listed out of order; ranks 0,1 on host 0 "a", 2 on host 2 "c", 3,4 on host 1 "b".
comm::Topology three_hosts() {
  comm::Topology t;
  t.job_id = "j";
  t.hosts = {{2, "c", "", {}}, {0, "a", "", {}}, {1, "b", "", {}}, {3, "empty", "", {}}};
  const int host_of[] = {0, 0, 2, 1, 1};
  for (int r = 4; r >= 0; --r) {
    comm::RankPlacement p;
    p.rank = r;
    p.host = host_of[r];
    t.ranks.push_back(p);
  }
  return t;
}

TEST(PmixLayoutTest, NodesInHostOrderWithLocalRanks) {
  const JobLayout l = make_layout(three_hosts());
  ASSERT_EQ(l.nodes.size(), 3u);  // "empty" has no ranks
  EXPECT_EQ(l.node_list(), "a,b,c");
  EXPECT_EQ(l.proc_list(), "0,1;3,4;2");
  EXPECT_EQ(l.node_of, (std::vector<int>{0, 0, 2, 1, 1}));
  EXPECT_EQ(l.local_rank, (std::vector<int>{0, 1, 0, 0, 1}));
  EXPECT_EQ(l.node(2)->name, "c");
  EXPECT_EQ(l.node(3), nullptr);
}

TEST(PmixLayoutTest, RepeatedRankIsAnError) {
  comm::Topology t = three_hosts();
  t.ranks[0].rank = 3;
  try {
    make_layout(t);
    FAIL();
  } catch (const comm::TopologyError& e) {
    EXPECT_STREQ(e.what(), "job j: rank 3 is out of range or repeated (ranks must be 0..4)");
  }
}

TEST(PmixLayoutTest, RankRanges) {
  EXPECT_EQ(rank_ranges({}), "");
  EXPECT_EQ(rank_ranges({3}), "3");
  EXPECT_EQ(rank_ranges({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
}

TEST(FenceCombinerTest, CompletesWhenEveryHostContributedWithDataInHostOrder) {
  FenceCombiner f(make_layout(three_hosts()));
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(f.add(2, {"*#0", {}, 0, "C"}, t0));
  EXPECT_FALSE(f.add(0, {"*#0", {}, 0, "A"}, t0));
  EXPECT_FALSE(f.add(0, {"*#0", {}, 0, "again"}, t0));  // a second one from a host: ignored
  EXPECT_EQ(f.pending(), 1u);
  const auto done = f.add(1, {"*#0", {}, 0, "B"}, t0);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->key, "*#0");
  EXPECT_EQ(done->status, 0);
  EXPECT_EQ(done->data, "ABC");
  EXPECT_EQ(done->hosts, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(f.pending(), 0u);
}

TEST(FenceCombinerTest, SubsetFenceWaitsOnlyForItsHosts) {
  FenceCombiner f(make_layout(three_hosts()));
  const auto t0 = Clock::now();
  EXPECT_FALSE(f.add(0, {"0,3#0", {0, 3}, 0, "x"}, t0));
  EXPECT_FALSE(f.add(2, {"0,3#0", {0, 3}, 0, "not a participant"}, t0));
  const auto done = f.add(1, {"0,3#0", {0, 3}, 0, "y"}, t0);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->data, "xy");
  EXPECT_EQ(done->hosts, (std::vector<int>{0, 1}));
}

TEST(FenceCombinerTest, ConcurrentFencesAreKeptApart) {
  FenceCombiner f(make_layout(three_hosts()));
  const auto t0 = Clock::now();
  EXPECT_FALSE(f.add(0, {"*#0", {}, 0, "0"}, t0));
  EXPECT_FALSE(f.add(0, {"*#1", {}, 0, "1"}, t0));
  EXPECT_FALSE(f.add(1, {"*#1", {}, 0, "1"}, t0));
  EXPECT_EQ(f.pending(), 2u);
  const auto second = f.add(2, {"*#1", {}, 0, "1"}, t0);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->data, "111");
  EXPECT_EQ(f.pending(), 1u);
}

TEST(FenceCombinerTest, TimeoutNamesTheRanksOfHostsThatNeverContributed) {
  FenceCombiner f(make_layout(three_hosts()));
  const auto t0 = Clock::now();
  EXPECT_FALSE(f.add(1, {"*#0", {}, 3, "B"}, t0));
  EXPECT_TRUE(f.expire(t0 + 2999ms).empty());
  const std::vector<FenceResult> out = f.expire(t0 + 3s);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].status, kStatusTimeout);
  EXPECT_EQ(out[0].hosts, (std::vector<int>{1}));  // only those that wait are told
  EXPECT_EQ(out[0].error,
            "a PMIx fence of all 5 ranks timed out after 3 s waiting for ranks 0-1 (a), rank 2 "
            "(c): it never entered the fence (is it stuck, or does it skip the call?)");
  EXPECT_EQ(f.pending(), 0u);
}

TEST(FenceCombinerTest, SubsetTimeoutNamesOnlyParticipants) {
  FenceCombiner f(make_layout(three_hosts()), 10s);
  const auto t0 = Clock::now();
  EXPECT_FALSE(f.add(1, {"1,3#0", {1, 3}, 0, "B"}, t0));
  EXPECT_TRUE(f.expire(t0 + 9s).empty());
  const std::vector<FenceResult> out = f.expire(t0 + 10s);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error,
            "a PMIx fence of ranks 1,3 timed out after 10 s waiting for rank 1 (a): it never "
            "entered the fence (is it stuck, or does it skip the call?)");
}

TEST(FenceCombinerTest, WithoutATimeoutAFenceWaits) {
  FenceCombiner f(make_layout(three_hosts()));
  const auto t0 = Clock::now();
  EXPECT_FALSE(f.add(1, {"*#0", {}, 0, "B"}, t0));
  EXPECT_TRUE(f.expire(t0 + std::chrono::hours(24)).empty());
}

}  // namespace
}  // namespace ddl::launcher::pmix_server
