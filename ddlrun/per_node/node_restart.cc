// Restarting a per-node job (--max-restarts in per-node mode): every surviving node meets again.
//
// How it works: run_node_rounds() runs round 0 (the rendezvous of every node, the plan, this
// node's ranks) through NodeRounds. A round ends on every node together: node 0 sends each
// node the job's status, whether a node was stopped rather than failed (a signal to its ddlrun,
// --timeout: final), and which nodes were lost (their ddlrun gone or silent). Every node then
// makes the same decision from the same facts (why_no_node_restart): it restarts while
// restarts remain, node 0 is still there (it serves every round: without it there is no
// rendezvous), and either no node was lost or --nnodes MIN:MAX lets the job go on with the
// nodes that remain, at least MIN of them. The survivors then meet at the same endpoint for
// round k+1 (the round is part of the hello: a node of an older round is refused), node 0
// renumbers them in their node-rank order, and they plan and start the job again, the ranks
// seeing DDL_RESTART_COUNT and a job id of their own (mark_attempt, as for a whole job).

#include <algorithm>

#include "ddlrun/per_node/per_node.h"
#include "hostfiles/hostfiles.h"
#include "launcher/launcher.h"

namespace ddl::ddlrun {

namespace {

/// "node 2 (n3)", by node rank, from the round's nodes.
std::string node_name(int rank, const std::vector<NodeEntry>& nodes) {
  for (const NodeEntry& n : nodes) {
    if (n.rank == rank) return "node " + std::to_string(rank) + " (" + n.host + ")";
  }
  return "node " + std::to_string(rank);
}

/// "node 2 (n3)", "nodes 1 (n2) and 2 (n3)".
std::string lost_names(const RoundEnd& end) {
  std::string s;
  for (size_t i = 0; i < end.lost.size(); ++i) {
    std::string name = node_name(end.lost[i], end.nodes);
    if (i > 0) name = name.substr(5);
    s += (i == 0 ? "" : i + 1 == end.lost.size() ? " and " : ", ") + name;
  }
  return end.lost.size() > 1 ? "nodes" + s.substr(4) : s;
}

/// The node ranks of `last`'s nodes that were not lost, in order.
std::vector<int> survivors(const NodeRound& last) {
  std::vector<int> left;
  for (const NodeEntry& n : last.end.nodes) {
    const bool lost =
        std::find(last.end.lost.begin(), last.end.lost.end(), n.rank) != last.end.lost.end();
    if (!lost) left.push_back(n.rank);
  }
  return left;
}

/// Why the round failed, for the restart's note.
std::string reason_of(const NodeRound& last) {
  if (!last.end.lost.empty()) return lost_names(last.end) + " lost";
  const std::string status = "status " + std::to_string(last.status);
  if (last.reason.empty()) return "a failure (" + status + ")";
  return last.reason + (last.reason.find("status") == std::string::npos ? " (" + status + ")" : "");
}

}  // namespace

std::string why_no_node_restart(const NodeRound& last, int spent, const PerNode& node,
                                const RestartLimits& limits) {
  if (!last.failed || last.end.final) {
    return "it was stopped (a signal to a node's ddlrun, --timeout), not failed by itself";
  }
  if (spent >= limits.max_restarts) {
    return "no restart left (--max-restarts " + std::to_string(limits.max_restarts) + ")";
  }
  if (last.end.node0_gone) {
    return node_name(0, last.end.nodes) + " is lost, and with it the rendezvous at " +
           node.endpoint() + " that every restart meets at";
  }
  if (!last.end.lost.empty() && node.min_nodes == node.nnodes) {
    return lost_names(last.end) + " lost and the job needs all its " + std::to_string(node.nnodes) +
           " nodes; --nnodes MIN:MAX lets it go on with at least MIN of them";
  }
  const int left = static_cast<int>(survivors(last).size());
  if (left < node.min_nodes) {
    return "only " + std::to_string(left) + " of its " + std::to_string(node.nnodes) +
           " nodes remain, fewer than the " + std::to_string(node.min_nodes) +
           " it needs (--nnodes MIN:MAX)";
  }
  return "";
}

int run_node_rounds(const PerNode& node, const RestartLimits& limits, NodeRounds& rounds) {
  NodeRound last = rounds.run(0, {}, node.nnodes);
  std::vector<std::string> restarts;
  const auto end = [&](int status) {
    for (const std::string& line : restart_summary(restarts, status))
      rounds.note(line);
    return status;
  };
  for (int round = 1;; ++round) {
    if (last.signal != 0 && limits.max_restarts > 0) return end(128 + last.signal);
    if (last.status == 0 || limits.max_restarts == 0) return end(last.status);
    const std::string why = why_no_node_restart(last, round - 1, node, limits);
    if (!why.empty()) {
      rounds.note("ddlrun: not restarting the job: " + why + "; it ends with status " +
                  std::to_string(last.status));
      return end(last.status);
    }
    const std::vector<int> members = survivors(last);
    restarts.push_back(reason_of(last) + "; " + std::to_string(members.size()) +
                       (members.size() == 1 ? " node meets" : " nodes meet") + " again at " +
                       node.endpoint());
    rounds.note("ddlrun: restart " + std::to_string(round) + " of " +
                std::to_string(limits.max_restarts) + " after " + restarts.back());
    try {
      last = rounds.run(round, members, node.min_nodes);
    } catch (const std::exception& e) {
      rounds.note("ddlrun: error: restart " + std::to_string(round) +
                  " cannot start: " + hostfiles::printable(e.what()) + "; it ends with status " +
                  std::to_string(last.status));
      return end(last.status);
    }
  }
}

}  // namespace ddl::ddlrun
