// Per-node mode's rendezvous over real loopback sockets: the gather, the plan's agreement,
// refusals and timeouts with their exact texts, and the control channel's stops.

#include "ddlrun/per_node/rendezvous.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <future>
#include <mutex>

#include "base/net/listener.h"
#include "ddlrun/plan/plan_digest.h"

namespace ddl::ddlrun {
namespace {

using namespace std::chrono_literals;

/// A server on a free loopback port, recording what node 0 reports.
struct Cluster {
  explicit Cluster(int nnodes, std::string token = "secret",
                   std::chrono::milliseconds timeout = 5000ms) {
    NodeServer::Settings s;
    s.token = std::move(token);
    s.nnodes = nnodes;
    s.timeout = timeout;
    s.heartbeat_timeout = 3000ms;
    s.job_id = "job7";
    server = std::make_unique<NodeServer>(s, [this](const std::string& line) {
      std::lock_guard lock(mutex);
      reports.push_back(line);
    });
    endpoint = "127.0.0.1:" + std::to_string(server->port());
  }
  std::unique_ptr<NodeClient> join(int node, int nnodes, const std::string& token = "secret",
                                   std::chrono::milliseconds timeout = 5000ms) {
    NodeHello h{node, nnodes, "", "host" + std::to_string(node),
                "inventory " + std::to_string(node)};
    return NodeClient::join(endpoint, token, h, timeout);
  }
  std::vector<std::string> reported() {
    std::lock_guard lock(mutex);
    return reports;
  }

  std::unique_ptr<NodeServer> server;
  std::string endpoint;
  std::mutex mutex;
  std::vector<std::string> reports;
};

/// The message of the RendezvousError that `f` throws.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const RendezvousError& e) {
    return e.what();
  }
  return "(no error)";
}

/// All three nodes joined, from three threads, in node order.
std::vector<std::unique_ptr<NodeClient>> join_all(Cluster& c, int n) {
  std::vector<std::future<std::unique_ptr<NodeClient>>> joining;
  for (int k = n - 1; k >= 0; --k)
    joining.push_back(std::async(std::launch::async, [&c, k, n] { return c.join(k, n); }));
  std::vector<std::unique_ptr<NodeClient>> nodes(static_cast<size_t>(n));
  for (auto& f : joining) {
    std::unique_ptr<NodeClient> node = f.get();
    nodes[static_cast<size_t>(node->node_rank())] = std::move(node);
  }
  return nodes;
}

/// Every node agrees on `digest`; node 0 brings ports 11 and 12.
std::vector<Ports> agree_all(std::vector<std::unique_ptr<NodeClient>>& nodes,
                             const std::vector<std::string>& digests) {
  std::vector<std::future<Ports>> agreeing;
  for (size_t k = 0; k < nodes.size(); ++k) {
    agreeing.push_back(std::async(std::launch::async, [&, k] {
      return nodes[k]->agree(digests[k], k == 0 ? Ports{11, 12} : Ports{});
    }));
  }
  std::vector<Ports> ports;
  for (auto& f : agreeing)
    ports.push_back(f.get());
  return ports;
}

TEST(Rendezvous, EveryNodeGetsTheSameListInNodeOrderAndNode0sPorts) {
  Cluster c(3);
  auto nodes = join_all(c, 3);
  for (const auto& n : nodes) {
    const Welcome& w = n->welcome();
    ASSERT_EQ(w.nodes.size(), 3u);
    EXPECT_EQ(w.job_id, "job7");
    EXPECT_EQ(w.job_token, nodes[0]->welcome().job_token);  // derived on each node, the same
    EXPECT_EQ(w.job_token.size(), 64u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(w.nodes[k].host, "host" + std::to_string(k));
      EXPECT_EQ(w.nodes[k].inventory, "inventory " + std::to_string(k));
      EXPECT_EQ(w.nodes[k].address, "127.0.0.1");
    }
  }
  for (const Ports& p : agree_all(nodes, {"d", "d", "d"})) {
    EXPECT_EQ(p.ddl, 11);
    EXPECT_EQ(p.master, 12);
  }
  std::vector<std::future<int>> finishing;
  for (auto& n : nodes) {
    n->watch([](const NodeStop&) { ADD_FAILURE() << "no node failed"; }, 3000ms);
    finishing.push_back(std::async(std::launch::async, [&n] { return n->finish(0); }));
  }
  for (auto& f : finishing)
    EXPECT_EQ(f.get(), 0);
  EXPECT_TRUE(c.reported().empty());
}

TEST(Rendezvous, AWrongTokenIsRefusedOnBothSides) {
  Cluster c(2);
  EXPECT_EQ(error_of([&] { c.join(1, 2, "guess"); }),
            "the rendezvous at " + c.endpoint +
                ": refused node 1: wrong token; give every node the same secret (DDL_JOB_TOKEN "
                "or --rdzv-token-file)");
  EXPECT_EQ(c.reported(), std::vector<std::string>{
                              "rendezvous: refused node 1 (host1, from 127.0.0.1): wrong token; "
                              "give every node the same secret (DDL_JOB_TOKEN or "
                              "--rdzv-token-file)"});
}

TEST(Rendezvous, WithoutATokenAnyNodeIsAdmitted) {
  // Nodes without a secret (a node with one refuses a node 0 that cannot prove it: its ranks'
  // token would differ; RendezvousWire.Node0MustProveTheSecretToo).
  Cluster c(2, "");
  auto one = std::async(std::launch::async, [&] { return c.join(1, 2, ""); });
  EXPECT_EQ(c.join(0, 2, "")->welcome().nodes.size(), 2u);
  EXPECT_EQ(one.get()->welcome().nodes.size(), 2u);
}

TEST(Rendezvous, ANodeRankTakenOrOutOfRangeIsRefused) {
  Cluster c(3);
  auto first = std::async(std::launch::async, [&] { return c.join(1, 3); });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(error_of([&] { c.join(1, 3); }),
            "the rendezvous at " + c.endpoint +
                ": refused node 1: node 1 came already (host1, from 127.0.0.1); give each node "
                "its own --node-rank");
  EXPECT_EQ(error_of([&] { c.join(3, 3); }),
            "the rendezvous at " + c.endpoint +
                ": refused node 3: node rank 3 is not below the node count 3; node ranks run "
                "from 0 to 2");
  EXPECT_EQ(error_of([&] { c.join(2, 4); }),
            "the rendezvous at " + c.endpoint +
                ": refused node 2: it was given 4 nodes, node 0 3; give every node the same "
                "--nnodes");
  c.server.reset();  // the first node's wait ends
  EXPECT_THROW(first.get(), RendezvousError);
}

TEST(Rendezvous, TwoNodesOfOneHostNameAreRefused) {
  Cluster c(2);
  auto first = std::async(std::launch::async, [&] {
    return NodeClient::join(c.endpoint, "secret", NodeHello{0, 2, "", "same", ""}, 5000ms);
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(error_of([&] {
              NodeClient::join(c.endpoint, "secret", NodeHello{1, 2, "", "same", ""}, 5000ms);
            }),
            "the rendezvous at " + c.endpoint +
                ": refused node 1: its host name same is node 0's too and, without a probe "
                "(--no-probe), ddlrun cannot tell the two apart; every node needs a host name of "
                "its own");
  const std::string machine = "identity: \"machine=m1;boot=b1;netns=1;host=same\"\n";
  EXPECT_EQ(error_of([&] {
              NodeClient::join(c.endpoint, "secret", NodeHello{1, 2, "", "same", machine}, 5000ms);
            }),
            "the rendezvous at " + c.endpoint +
                ": refused node 1: its host name same is node 0's too and, without a probe "
                "(--no-probe), ddlrun cannot tell the two apart; every node needs a host name of "
                "its own");
  c.server.reset();
  EXPECT_THROW(first.get(), RendezvousError);
}

// Cloned VMs share a host name, not their machine identity: the later node is
// taken under its address; the same identity is one machine, started twice.
TEST(Rendezvous, NodesOfOneHostNameAndTwoMachinesAreTakenByAddress) {
  const auto machine = [](int n) {
    return "version: 1\nidentity: \"machine=m;boot=b" + std::to_string(n) + ";netns=1;host=vm\"\n";
  };
  Cluster c(2);
  auto first = std::async(std::launch::async, [&] {
    return NodeClient::join(c.endpoint, "secret", NodeHello{0, 2, "", "vm", machine(0)}, 5000ms);
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(error_of([&] {
              NodeClient::join(c.endpoint, "secret", NodeHello{1, 2, "", "vm", machine(0)}, 5000ms);
            }),
            "the rendezvous at " + c.endpoint +
                ": refused node 1: its host name vm is node 0's too, and so is its machine "
                "identity (one machine, started twice?); every node needs a host name of its own");
  std::unique_ptr<NodeClient> second =
      NodeClient::join(c.endpoint, "secret", NodeHello{1, 2, "", "vm", machine(1)}, 5000ms);
  const std::vector<std::string> names = {first.get()->welcome().nodes[0].host,
                                          second->welcome().nodes[1].host};
  EXPECT_EQ(names, (std::vector<std::string>{"vm", "127.0.0.1"}));
}

TEST(Rendezvous, TheTimeoutNamesTheNodesThatDidNotCome) {
  Cluster c(4, "secret", 500ms);
  const std::string port = c.endpoint.substr(c.endpoint.rfind(':') + 1);
  auto node2 = std::async(std::launch::async, [&] { return error_of([&] { c.join(2, 4); }); });
  EXPECT_EQ(error_of([&] { c.join(0, 4); }),
            "the rendezvous at " + c.endpoint +
                ": the rendezvous timed out after 0.5 s: nodes 1 and 3 did not come (came: node "
                "0 (host0), node 2 (host2)); start ddlrun --node-rank K --nnodes 4 on each, or "
                "check that they reach port " +
                port + " here");
  EXPECT_NE(node2.get().find(": nodes 1 and 3 did not come (came: node 0 (host0), node 2"),
            std::string::npos);
}

/// Node 0's server of restart `round` of `nnodes` nodes, for `members`, `min_nodes` of them.
std::unique_ptr<NodeServer> round_server(int nnodes, int round, std::vector<int> members,
                                         std::chrono::milliseconds timeout,
                                         std::chrono::milliseconds last_call = 5000ms) {
  NodeServer::Settings s;
  s.nnodes = nnodes;
  s.timeout = timeout;
  s.round = round;
  s.members = std::move(members);
  s.min_nodes = 2;
  s.last_call = last_call;
  return std::make_unique<NodeServer>(s, [](const std::string&) {});
}

TEST(Rendezvous, ARestartsRoundBelowMinNamesTheMissingSurvivorsOnly) {
  const std::unique_ptr<NodeServer> server = round_server(4, 1, {0, 2, 3}, 500ms);
  const std::string endpoint = "127.0.0.1:" + std::to_string(server->port());
  NodeHello h{0, 4, "", "host0", "", 1};
  EXPECT_EQ(error_of([&] { NodeClient::join(endpoint, "", h, 500ms); }),
            "the rendezvous at " + endpoint +
                ": the rendezvous timed out after 0.5 s: nodes 2 and 3 did not come (came: node "
                "0 (host0)); start ddlrun --node-rank K --nnodes 4 on each, or check that they "
                "reach port " +
                std::to_string(server->port()) + " here");
}

TEST(Rendezvous, NoServerNamesTheEndpointAndNode0) {
  Cluster c(1);
  const std::string endpoint = c.endpoint;
  c.server.reset();
  EXPECT_EQ(error_of([&] {
              NodeClient::join(endpoint, "", NodeHello{1, 2, "", "h", ""}, 300ms);
            }),
            "node 1 cannot reach the rendezvous at " + endpoint +
                " (Connection refused); start node 0 (ddlrun --node-rank 0) on 127.0.0.1, or "
                "check --rdzv (MASTER_ADDR, MASTER_PORT) and that port " +
                endpoint.substr(endpoint.rfind(':') + 1) + " is open there");
}

// Node 0's host drops the connection's packets (here a listener whose queue is full: the
// kernel drops the next SYN): the node gives up at its rendezvous timeout, not after the
// kernel's minutes of SYN retries.
TEST(Rendezvous, ANode0ThatNeverAnswersTheConnectIsNotWaitedPastTheTimeout) {
  const base::net::Listening full = base::net::listen_tcp("127.0.0.1", 0, 0);
  ASSERT_GE(full.fd, 0);
  const std::string endpoint = "127.0.0.1:" + std::to_string(full.port);
  std::vector<base::net::Dialed> queued;  // what fills the queue, connected or not
  for (int i = 0; i < 2; ++i)
    queued.push_back(base::net::dial("127.0.0.1", std::to_string(full.port),
                                     std::chrono::steady_clock::now() + 200ms));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of([&] {
              NodeClient::join(endpoint, "", NodeHello{1, 2, "", "h", ""}, 600ms);
            }),
            "node 1 cannot reach the rendezvous at " + endpoint +
                " (Connection timed out); start node 0 (ddlrun --node-rank 0) on 127.0.0.1, or "
                "check --rdzv (MASTER_ADDR, MASTER_PORT) and that port " +
                std::to_string(full.port) + " is open there");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  for (const base::net::Dialed& d : queued)
    if (d.fd >= 0) ::close(d.fd);
  ::close(full.fd);
}

TEST(Rendezvous, DifferentPlansAreRefusedNamingTheNode) {
  Cluster c(2);
  auto nodes = join_all(c, 2);
  std::vector<std::future<std::string>> agreeing;
  for (size_t k = 0; k < 2; ++k) {
    agreeing.push_back(std::async(std::launch::async, [&, k] {
      return error_of([&] {
        nodes[k]->agree(k == 0 ? "mode=1 ranks=2 program=3" : "mode=1 ranks=4 program=5", {});
      });
    }));
  }
  for (auto& f : agreeing) {
    EXPECT_EQ(f.get(), "the rendezvous at " + c.endpoint +
                           ": the plan of node 1 (host1, from 127.0.0.1) differs from node 0's "
                           "(in ranks and program); give every node the same options and the "
                           "same ddlrun");
  }
}

TEST(Rendezvous, DigestsSayWhichPartsDiffer) {
  EXPECT_EQ(digest_difference("a=1 b=2 c=3", "a=1 b=2 c=3"), "");
  EXPECT_EQ(digest_difference("a=1 b=2 c=3", "a=9 b=2 c=8"), "a and c");
  EXPECT_EQ(digest_difference("a=1 b=2", "a=2 b=3 d=4"), "a, b and d");
  EXPECT_EQ(digest_difference("a=1", "\x1b[2J=1"), "everything");
  EXPECT_EQ(digest_difference("a=1", "x"), "everything");
}

/// Three nodes past the plan, each recording the stop it gets.
struct Running {
  Running() : c(3), nodes(join_all(c, 3)) {
    agree_all(nodes, {"d", "d", "d"});
    for (size_t k = 0; k < 3; ++k) {
      nodes[k]->watch(
          [this, k](const NodeStop& s) {
            std::lock_guard lock(mutex);
            stops[k] = s;
          },
          3000ms);
    }
  }
  std::optional<NodeStop> stop_of(size_t k, std::chrono::milliseconds within = 3000ms) {
    for (auto end = std::chrono::steady_clock::now() + within;
         std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(10ms)) {
      std::lock_guard lock(mutex);
      if (stops[k]) return stops[k];
    }
    return std::nullopt;
  }
  Cluster c;
  std::vector<std::unique_ptr<NodeClient>> nodes;
  std::mutex mutex;
  std::optional<NodeStop> stops[3];
};

// A node that came late was told "node 0 closed the connection" and node 0 said
// nothing; both say why now, and the running job goes on.
TEST(Rendezvous, ANodeOfARunningJobIsToldItStartedWithoutIt) {
  Running r;
  const std::string why =
      "refused node 1: the job has started without it (round 0 runs with 3 nodes); a node can "
      "join only before the start, or at a restart that --nnodes MIN:MAX leaves room for";
  EXPECT_EQ(error_of([&] { r.c.join(1, 3); }), "the rendezvous at " + r.c.endpoint + ": " + why);
  EXPECT_EQ(r.c.reported(), (std::vector<std::string>{"rendezvous: refused node 1 (host1, from "
                                                      "127.0.0.1): " +
                                                      why.substr(16)}));
  EXPECT_FALSE(r.stop_of(0, 200ms));
}

TEST(Rendezvous, ANodesFailureStopsTheOthersAndEndsWithItsStatus) {
  Running r;
  r.nodes[1]->report_failure("rank 3 exited with status 7", 7);
  for (size_t k : {0, 2}) {
    std::optional<NodeStop> s = r.stop_of(k);
    ASSERT_TRUE(s) << "node " << k;
    EXPECT_EQ(s->node, 1);
    EXPECT_EQ(s->host, "host1");
    EXPECT_EQ(s->what, "rank 3 exited with status 7");
    EXPECT_EQ(s->status, 7);
  }
  std::vector<std::future<int>> finishing;
  for (size_t k = 0; k < 3; ++k) {
    const int status = k == 1 ? 7 : 143;
    finishing.push_back(
        std::async(std::launch::async, [&, k, status] { return r.nodes[k]->finish(status); }));
  }
  for (auto& f : finishing)
    EXPECT_EQ(f.get(), 7);
  EXPECT_TRUE(r.c.reported().empty());
}

TEST(Rendezvous, ANodeThatVanishesStopsTheOthers) {
  Running r;
  r.nodes[2].reset();
  for (size_t k : {0, 1}) {
    std::optional<NodeStop> s = r.stop_of(k);
    ASSERT_TRUE(s) << "node " << k;
    EXPECT_EQ(s->node, 2);
    EXPECT_EQ(s->what, "its ddlrun is gone: the rendezvous connection closed");
    EXPECT_EQ(s->status, 1);
  }
  std::vector<std::future<int>> finishing;
  for (size_t k : {0, 1})
    finishing.push_back(std::async(std::launch::async, [&, k] { return r.nodes[k]->finish(1); }));
  for (auto& f : finishing)
    EXPECT_EQ(f.get(), 1);
  for (size_t k : {0, 1}) {
    const RoundEnd end = r.nodes[k]->round_end();
    EXPECT_EQ(end.lost, std::vector<int>{2});
    EXPECT_FALSE(end.final);
    EXPECT_FALSE(end.node0_gone);
    EXPECT_EQ(end.nodes.size(), 3u);
  }
}

TEST(Rendezvous, ANodeStoppedRatherThanFailedEndsTheRoundFinal) {
  Running r;
  std::vector<std::future<int>> finishing;
  for (size_t k = 0; k < 3; ++k) {
    finishing.push_back(std::async(std::launch::async, [&, k] {
      return k == 1 ? r.nodes[k]->finish(143, false) : r.nodes[k]->finish(0);
    }));
  }
  for (auto& f : finishing)
    EXPECT_EQ(f.get(), 143);
  EXPECT_TRUE(r.nodes[0]->round_end().final);
  EXPECT_TRUE(r.nodes[0]->round_end().lost.empty());
}

TEST(Rendezvous, ARestartsRoundTakesItsSurvivorsRenumberedAndRefusesOthers) {
  const std::unique_ptr<NodeServer> server = round_server(3, 1, {0, 2}, 5000ms);
  const std::string endpoint = "127.0.0.1:" + std::to_string(server->port());
  const auto join = [&](int node, int round) {
    NodeHello h{node, 3, "", "host" + std::to_string(node), "", round};
    return NodeClient::join(endpoint, "", h, 5000ms);
  };
  EXPECT_EQ(error_of([&] { join(0, 0); }),
            "the rendezvous at " + endpoint +
                ": refused node 0: it is at round 0 of the job, this rendezvous at round 1 "
                "(restart 1); a node of an earlier round cannot join a later one");
  EXPECT_EQ(error_of([&] { join(0, 2); }),  // "earlier" was said of later rounds too
            "the rendezvous at " + endpoint +
                ": refused node 0: it is at round 2 of the job, this rendezvous at round 1 "
                "(restart 1); a node of a later round cannot join an earlier one");
  EXPECT_EQ(error_of([&] { join(1, 1); }),
            "the rendezvous at " + endpoint +
                ": refused node 1: node 1 was lost before restart 1 and cannot rejoin the job");
  auto node2 = std::async(std::launch::async, [&] { return join(2, 1); });
  std::unique_ptr<NodeClient> node0 = join(0, 1);
  std::unique_ptr<NodeClient> n2 = node2.get();
  const std::vector<NodeEntry> expected = {{"host0", "127.0.0.1", "", 0},
                                           {"host2", "127.0.0.1", "", 2}};
  EXPECT_EQ(node0->welcome().nodes, expected);
  EXPECT_EQ(n2->welcome().nodes, expected);
  EXPECT_EQ(n2->index(), 1);
  EXPECT_EQ(n2->node_rank(), 2);
}

TEST(Rendezvous, ARestartsRoundGoesOnWithMinNodesAfterTheLastCall) {
  const std::unique_ptr<NodeServer> server = round_server(3, 2, {0, 1, 2}, 5000ms, 300ms);
  const std::string endpoint = "127.0.0.1:" + std::to_string(server->port());
  const auto join = [&](int node) {
    NodeHello h{node, 3, "", "host" + std::to_string(node), "", 2};
    return NodeClient::join(endpoint, "", h, 5000ms);
  };
  const auto start = std::chrono::steady_clock::now();
  auto node1 = std::async(std::launch::async, [&] { return join(1); });
  std::unique_ptr<NodeClient> node0 = join(0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  EXPECT_EQ(node0->welcome().nodes.size(), 2u);
  EXPECT_EQ(node1.get()->index(), 1);
}

TEST(Rendezvous, Node0GoneStopsTheOthers) {
  Running r;
  r.c.server.reset();
  std::optional<NodeStop> s = r.stop_of(2);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->node, 0);
  EXPECT_EQ(s->host, "host0");
  EXPECT_EQ(s->what, "its ddlrun is gone: the rendezvous connection closed");
  EXPECT_EQ(r.nodes[2]->finish(0), 1);
  EXPECT_TRUE(r.nodes[2]->round_end().node0_gone);
}

}  // namespace
}  // namespace ddl::ddlrun
