// Whom a failed rank's libddl error blames (launcher/blame.h), and the supervisor's notes.

#include "launcher/blame.h"

#include <gtest/gtest.h>

namespace ddl::launcher {
namespace {

// A ring of 4 with rank 2 stopped: rank 3 and rank 0 wait for 2, rank 1 for 3 (which waits
// for 2). Whichever fails first, the culprit is rank 2.
TEST(BlameTest, FollowsAStallToTheRankThatStopped) {
  Blame b;
  b.line(1,
         "rank 1: allreduce failed: a peer failed or timed out: rank 3 (vm): no progress "
         "for 5 s");
  EXPECT_TRUE(b.stalled(1));
  Culprit c = b.culprit(1);
  EXPECT_EQ(c.kind, Culprit::Kind::kStalled);
  EXPECT_EQ(c.rank, 3);  // all it knows so far
  b.line(3, "RuntimeError: ddl: rank 2 (node2): no progress for 5 s (DDL_TIMEOUT)");
  c = b.culprit(1);
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.detail, "no progress for 5 s");
  EXPECT_EQ(b.culprit(3).rank, 2);
  EXPECT_EQ(b.culprit(2).kind, Culprit::Kind::kNone);
}

TEST(BlameTest, ACycleBlamesNoOne) {
  Blame b;
  b.line(0, "rank 1 (a): no progress for 5 s");
  b.line(1, "rank 0 (a): no progress for 5 s");
  EXPECT_EQ(b.culprit(0).kind, Culprit::Kind::kNone);
}

TEST(BlameTest, AClosedLinkLeadsToTheRankThatLeft) {
  Blame b;
  b.line(3,
         "rank 3: allreduce failed: a peer failed or timed out: rank 2 (vm): the peer "
         "closed the link");
  EXPECT_FALSE(b.stalled(3));
  EXPECT_EQ(b.culprit(3).kind, Culprit::Kind::kNone);  // rank 2 did not leave (it crashed)
  b.left_early(2);
  EXPECT_EQ(b.culprit(3).kind, Culprit::Kind::kLeft);
  EXPECT_EQ(b.culprit(3).rank, 2);
  b.line(0, "rank 3 (vm): the process has exited");
  EXPECT_EQ(b.culprit(0).rank, 2);  // through rank 3
}

// libddl's shared-memory collectives on one host: every rank names the one that left.
TEST(BlameTest, ARankThatLeftTheSharedMemoryGroupIsBlamed) {
  Blame b;
  b.line(0,
         "rank 0: allreduce failed: a peer failed or timed out: rank 2 (vm): it left the "
         "collective (its communicator was closed)");
  EXPECT_EQ(b.culprit(0).kind, Culprit::Kind::kNone);
  b.left_early(2);
  EXPECT_EQ(b.culprit(0).kind, Culprit::Kind::kLeft);
  EXPECT_EQ(b.culprit(0).rank, 2);
}

// 3 hosts, node3 cut off: rank 1 times out waiting for rank 5 and exits, which closes its TCP
// link to rank 3 so that rank 3 fails first. The chain goes through rank 1's stall to rank 5.
TEST(BlameTest, AClosedLinkLeadsThroughAStallToTheRankThatStopped) {
  Blame b;
  b.line(1, "chaos_loop: rank 1: rank 5 (node3): no progress for 5 s");
  b.line(3, "chaos_loop: rank 3: rank 1 (node1): the connection was closed by the peer");
  EXPECT_TRUE(b.names_peer(3));
  EXPECT_FALSE(b.stalled(3));
  const Culprit c = b.culprit(3);
  EXPECT_EQ(c.kind, Culprit::Kind::kStalled);
  EXPECT_EQ(c.rank, 5);
  EXPECT_EQ(c.detail, "no progress for 5 s");
}

TEST(BlameTest, IgnoresWhatIsNotAPeer) {
  Blame b;
  b.line(1, "no progress for 5 s");
  b.line(1, "rank x (vm): no progress for 5 s");
  b.line(1, "rank 1 (vm): no progress for 5 s");   // itself
  b.line(-1, "rank 2 (vm): no progress for 5 s");  // the launcher process
  EXPECT_FALSE(b.stalled(1));
  EXPECT_FALSE(b.stalled(-1));
}

}  // namespace
}  // namespace ddl::launcher
