// The restart decisions of a per-node job (run_node_rounds), driven by a recording fake of its
// rounds: a rank failure restarts every node, a lost node with and without --nnodes MIN:MAX,
// node 0 lost, restarts spent, a restart whose nodes do not meet; the exact notes.

#include <gtest/gtest.h>

#include <deque>

#include "ddlrun/per_node/per_node.h"

namespace ddl::ddlrun {
namespace {

/// Plays the rounds it is given, in order, recording each call.
class FakeRounds : public NodeRounds {
 public:
  struct Call {
    int round;
    std::vector<int> members;
    int min_nodes;
  };
  NodeRound run(int round, const std::vector<int>& members, int min_nodes) override {
    calls.push_back({round, members, min_nodes});
    if (plays.empty()) throw RendezvousError("no round left to play");
    NodeRound r = plays.front();
    plays.pop_front();
    return r;
  }
  void note(const std::string& text) override { notes.push_back(text); }

  std::deque<NodeRound> plays;
  std::vector<Call> calls;
  std::vector<std::string> notes;
};

/// Node 1 of `nnodes` at n1:29500, `min_nodes` of them needed.
PerNode node_of(int nnodes, int min_nodes) {
  PerNode n;
  n.node_rank = 1;
  n.nnodes = nnodes;
  n.min_nodes = min_nodes;
  n.host = "n1";
  n.port = 29500;
  return n;
}

std::vector<NodeEntry> nodes(const std::vector<int>& ranks) {
  std::vector<NodeEntry> list;
  for (int r : ranks)
    list.push_back({"n" + std::to_string(r + 1), "10.200.0." + std::to_string(r + 1), "", r});
  return list;
}

NodeRound failed(int status, const std::vector<int>& ranks, std::vector<int> lost = {},
                 std::string reason = "") {
  NodeRound r;
  r.status = status;
  r.failed = true;
  r.reason = std::move(reason);
  r.end.nodes = nodes(ranks);
  r.end.lost = std::move(lost);
  return r;
}

NodeRound succeeded() {
  return NodeRound{};
}

RestartLimits restarts(int n) {
  RestartLimits limits;
  limits.max_restarts = n;
  return limits;
}

TEST(NodeRestart, ARankFailureRestartsEveryNode) {
  FakeRounds f;
  f.plays = {failed(7, {0, 1, 2}, {}, "rank 3 (n2) exited with status 7"), succeeded()};
  EXPECT_EQ(run_node_rounds(node_of(3, 3), restarts(1), f), 0);
  ASSERT_EQ(f.calls.size(), 2u);
  EXPECT_EQ(f.calls[0].round, 0);
  EXPECT_EQ(f.calls[0].members, std::vector<int>{});
  EXPECT_EQ(f.calls[1].round, 1);
  EXPECT_EQ(f.calls[1].members, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(f.calls[1].min_nodes, 3);
  EXPECT_EQ(f.notes, (std::vector<std::string>{
                         "ddlrun: restart 1 of 1 after rank 3 (n2) exited with status 7; 3 nodes "
                         "meet again at n1:29500",
                         "ddlrun: the job was restarted 1 time and ended with status 0:",
                         "  1. after rank 3 (n2) exited with status 7; 3 nodes meet again at "
                         "n1:29500"}));
}

TEST(NodeRestart, ALostNodeWithARangeRestartsTheOthersRenumbered) {
  FakeRounds f;
  f.plays = {failed(1, {0, 1, 2}, {2}), succeeded()};
  EXPECT_EQ(run_node_rounds(node_of(3, 2), restarts(1), f), 0);
  ASSERT_EQ(f.calls.size(), 2u);
  EXPECT_EQ(f.calls[1].members, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.calls[1].min_nodes, 2);
  ASSERT_EQ(f.notes.size(), 3u);
  EXPECT_EQ(f.notes[0],
            "ddlrun: restart 1 of 1 after node 2 (n3) lost; 2 nodes meet again at n1:29500");
}

TEST(NodeRestart, ALostNodeWithoutARangeEndsTheJob) {
  FakeRounds f;
  f.plays = {failed(1, {0, 1, 2}, {2})};
  EXPECT_EQ(run_node_rounds(node_of(3, 3), restarts(2), f), 1);
  EXPECT_EQ(f.calls.size(), 1u);
  EXPECT_EQ(f.notes, std::vector<std::string>{
                         "ddlrun: not restarting the job: node 2 (n3) lost and the job needs all "
                         "its 3 nodes; --nnodes MIN:MAX lets it go on with at least MIN of them; "
                         "it ends with status 1"});
}

TEST(NodeRestart, FewerThanMinNodesLeftEndsTheJob) {
  FakeRounds f;
  f.plays = {failed(1, {0, 1, 2}, {1, 2})};
  EXPECT_EQ(run_node_rounds(node_of(3, 2), restarts(2), f), 1);
  EXPECT_EQ(f.notes, std::vector<std::string>{
                         "ddlrun: not restarting the job: only 1 of its 3 nodes remain, fewer "
                         "than the 2 it needs (--nnodes MIN:MAX); it ends with status 1"});
}

TEST(NodeRestart, NodeZeroLostEndsTheJobNamingIt) {
  FakeRounds f;
  NodeRound r = failed(1, {0, 1, 2});
  r.end.node0_gone = true;
  f.plays = {r};
  EXPECT_EQ(run_node_rounds(node_of(3, 2), restarts(2), f), 1);
  EXPECT_EQ(f.notes, std::vector<std::string>{
                         "ddlrun: not restarting the job: node 0 (n1) is lost, and with it the "
                         "rendezvous at n1:29500 that every restart meets at; it ends with "
                         "status 1"});
}

TEST(NodeRestart, RestartsSpentEndWithTheLastStatus) {
  FakeRounds f;
  f.plays = {failed(3, {0, 1}, {}, "rank 0 (n1) exited with status 3"),
             failed(4, {0, 1}, {}, "rank 1 (n1) was killed by SIGKILL"),
             failed(9, {0, 1}, {}, "rank 2 (n2) exited with status 9")};
  EXPECT_EQ(run_node_rounds(node_of(2, 2), restarts(2), f), 9);
  EXPECT_EQ(f.calls.size(), 3u);
  EXPECT_EQ(f.notes,
            (std::vector<std::string>{
                "ddlrun: restart 1 of 2 after rank 0 (n1) exited with status 3; 2 nodes meet "
                "again at n1:29500",
                "ddlrun: restart 2 of 2 after rank 1 (n1) was killed by SIGKILL (status 4); 2 "
                "nodes meet again at n1:29500",
                "ddlrun: not restarting the job: no restart left (--max-restarts 2); it ends "
                "with status 9",
                "ddlrun: the job was restarted 2 times and ended with status 9:",
                "  1. after rank 0 (n1) exited with status 3; 2 nodes meet again at n1:29500",
                "  2. after rank 1 (n1) was killed by SIGKILL (status 4); 2 nodes meet again at "
                "n1:29500"}));
}

TEST(NodeRestart, ARestartWhoseNodesDoNotMeetEndsWithTheLastFailure) {
  FakeRounds f;
  f.plays = {failed(6, {0, 1, 2}, {2})};  // the second round throws
  EXPECT_EQ(run_node_rounds(node_of(3, 2), restarts(1), f), 6);
  ASSERT_EQ(f.notes.size(), 4u);
  EXPECT_EQ(f.notes[1],
            "ddlrun: error: restart 1 cannot start: no round left to play; it ends with status 6");
}

TEST(NodeRestart, AStoppedJobOrNoRestartsAskedForIsNotRestarted) {
  FakeRounds f;
  NodeRound stopped = failed(143, {0, 1});
  stopped.end.final = true;
  f.plays = {stopped};
  EXPECT_EQ(run_node_rounds(node_of(2, 2), restarts(1), f), 143);
  EXPECT_EQ(f.notes, std::vector<std::string>{
                         "ddlrun: not restarting the job: it was stopped (a signal to a node's "
                         "ddlrun, --timeout), not failed by itself; it ends with status 143"});
  FakeRounds none;
  none.plays = {failed(7, {0, 1})};
  EXPECT_EQ(run_node_rounds(node_of(2, 2), restarts(0), none), 7);
  EXPECT_TRUE(none.notes.empty());
}

}  // namespace
}  // namespace ddl::ddlrun
