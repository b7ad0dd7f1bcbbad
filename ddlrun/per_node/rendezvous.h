#pragma once
// The rendezvous of per-node mode: N ddlruns, one per node, meet at node 0 and become one job.
//
// How it works: node 0's ddlrun serves the rendezvous (NodeServer) on HOST:PORT, and every
// node's ddlrun, node 0's included, joins it as a client (NodeClient) over TCP:
//   0. challenge node 0 speaks first on every connection: the magic and a random nonce. Until a
//               node's hello is accepted its messages are small (wire::kMaxHello, a length
//               prefix past it refused at once), it has 10 s, and at most 32 such connections
//               wait at once (the oldest is closed once it has had 200 ms, so that strangers
//               that come after a node do not crowd it out): strangers cannot exhaust node 0 (out
//               of descriptors, its listening socket rests rather than spin: base::AcceptRest);
//   1. hello    each node sends its own nonce and the proof that it knows the job's secret
//               (HMAC-SHA256 over both nonces: the secret never crosses the network), its node
//               rank, the node count, the job's rendezvous id, its host name, its hardware
//               (mapper::to_yaml) and the round (0, then 1 for the first restart, ...: an old
//               round's node cannot join). The server checks the proof in constant time and
//               refuses, with a reason sent to the node (at once or not at all: a refused node
//               that does not read cannot hold node 0 up) and printed on node 0 (the first ten),
//               quoting at most a short printable prefix of what the node sent, a wrong proof,
//               a node rank out of range or already taken, another node count, another job or
//               round, or a node lost in an earlier round;
//   2. welcome  once all N came (in a restart's round: every node of the round before that was
//               not lost, or, once `min_nodes` are in, those that came within the last call),
//               the server renumbers them in node-rank order and sends every node the same list
//               (host name, the address it came from, hardware; in node-rank order), node 0's job
//               id, node 0's own proof of the secret (for that node's nonce) and a random salt:
//               each node derives the ranks' token from the secret and the salt
//               (wire::ranks_token), so that token never crosses the network either;
//   3. plan     every node makes the same plan from that list (make_plan) and sends a digest of
//               it, node 0 with the ports of its servers for the ranks (libddl's rendezvous,
//               torch's MASTER_PORT); when every digest equals node 0's, the server answers
//               "go" with those ports; else every node gets an error naming the node that
//               disagrees;
//   4. run      the connections stay open as the job's control channel: both sides send a
//               heartbeat every second. A node whose ranks fail (fail), or whose ranks ended
//               with a status other than 0 (done), or whose connection closes or falls silent
//               past the heartbeat timeout, makes the server send "stop" to every other node,
//               naming that node, its host and the first failure's status; once every node is
//               done, the server sends "end" with the job's status (the first failure's, else 0),
//               whether a node ended for a reason no restart gets past (a signal to its ddlrun,
//               --timeout), and the node ranks of the nodes lost. A restart is a new round with
//               a new NodeServer on the same port.
// A message is a type byte, a field count and length-prefixed fields (wire format below, in
// rendezvous.cc). The gather has a deadline: the server then tells every node which nodes did
// not come, and a client that cannot reach the server retries until the same deadline.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ddl::base {
class Deadline;
namespace net {
struct Fields;
class FieldsReader;
}  // namespace net
}  // namespace ddl::base

namespace ddl::ddlrun {

namespace wire {
using Message = base::net::Fields;
using Reader = base::net::FieldsReader;
}  // namespace wire

/// The rendezvous failed: refused, timed out, unreachable or broken; what() names the endpoint,
/// the node and the next step.
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a node tells the rendezvous about itself.
struct NodeHello {
  int node_rank = 0;
  int nnodes = 1;
  std::string job;        ///< the rendezvous id (--rdzv-id); "" when none: any job
  std::string host;       ///< its host name, as the plan will call it
  std::string inventory;  ///< its hardware (mapper::to_yaml); "" when not probed
  int round = 0;          ///< 0, then the restart's number
};

/// One node of the job, as every node learns it.
struct NodeEntry {
  std::string host;
  std::string address;  ///< where node 0 saw it come from
  std::string inventory;
  int rank = -1;  ///< its --node-rank (its index in the list differs after a lost node)
  bool operator==(const NodeEntry&) const = default;
};

/// What node 0 sends every node once all came.
struct Welcome {
  std::vector<NodeEntry> nodes;  ///< by node rank
  std::string job_id;            ///< node 0's job id: every node plans with it
  std::string job_token;         ///< the ranks' $DDL_JOB_TOKEN, derived the same on every node
};

/// Node 0's ports for the job's ranks, as every node learns them.
struct Ports {
  int ddl = 0;     ///< libddl's rendezvous ($DDL_RENDEZVOUS's port)
  int master = 0;  ///< $MASTER_PORT
};

/// How a round ended, as node 0 told every node ("end"), or that node 0 is gone.
struct RoundEnd {
  bool final = false;            ///< a node ended for a reason no restart gets past
  std::vector<int> lost;         ///< node ranks of the nodes lost, in order
  bool node0_gone = false;       ///< node 0's ddlrun is gone, and with it the rendezvous
  std::vector<NodeEntry> nodes;  ///< the round's nodes (the welcome's)
};

/// Another node failed or vanished: this node's ranks must stop.
struct NodeStop {
  int node = -1;     ///< the node that failed, -1: unknown
  std::string host;  ///< its host name
  std::string what;  ///< "rank 4 exited with status 7", "its ddlrun is gone (...)"
  int status = 1;    ///< the first failure's status
};

/// Node 0's side: listens on `port` (every address; 0: any free port) from construction on, and
/// runs the rendezvous (how it works above) on its own thread until every node is done or the
/// gather failed. `report` gets node 0's own messages (refused nodes, lost nodes), one line
/// each without "ddlrun: ".
class NodeServer {
 public:
  struct Settings {
    int port = 0;
    std::string token;  ///< "" admits any node
    int nnodes = 1;
    std::string job;  ///< the rendezvous id; "" admits any
    std::chrono::milliseconds timeout{300000};
    std::chrono::milliseconds heartbeat_timeout{10000};
    std::string job_id;  ///< sent in the welcome
    int round = 0;       ///< a hello of another round is refused
    /// The node ranks that may come (none: 0 to nnodes-1), and how many must: once
    /// `min_nodes` are in, the others have `last_call` more (within `timeout`).
    std::vector<int> members;
    int min_nodes = 0;  ///< 0: all members
    std::chrono::milliseconds last_call{5000};
  };
  NodeServer(Settings settings, std::function<void(const std::string&)> report);
  ~NodeServer();  // not copyable: it owns its thread and state
  int port() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

/// A node's side. join() connects, says hello and waits for the welcome; agree() exchanges plan
/// digests and ports; watch() starts the control channel; finish() ends it.
class NodeClient {
 public:
  /// Connects to `endpoint` ("HOST:PORT"), retrying until `timeout`, presents `token` and
  /// `hello`, and waits for the welcome (the server's own deadline first). Throws
  /// RendezvousError naming the endpoint and the next step.
  static std::unique_ptr<NodeClient> join(const std::string& endpoint, const std::string& token,
                                          const NodeHello& hello,
                                          std::chrono::milliseconds timeout);
  ~NodeClient();
  NodeClient(const NodeClient&) = delete;
  NodeClient& operator=(const NodeClient&) = delete;

  const Welcome& welcome() const { return welcome_; }
  int node_rank() const { return node_rank_; }
  /// This node's index in the welcome's list (its node rank, unless a lower one was lost).
  int index() const;
  const std::string& endpoint() const { return endpoint_; }

  /// Sends this node's plan digest (node 0: with its ports) and returns node 0's ports once
  /// every node agreed. Throws RendezvousError naming a node whose plan differs.
  Ports agree(const std::string& digest, const Ports& ports);

  /// From now on sends a heartbeat every second and calls `on_stop` (on its own thread, once)
  /// when another node failed, node 0 is gone, or nothing came for `heartbeat_timeout`.
  void watch(std::function<void(const NodeStop&)> on_stop,
             std::chrono::milliseconds heartbeat_timeout);
  /// Tells node 0 that this node's ranks failed first: `what` ("rank 4 exited with status 7")
  /// and the status. Any thread.
  void report_failure(const std::string& what, int status);
  /// Tells node 0 that this node's ranks ended with `status` (`restartable`: failed by
  /// themselves, or 0), waits for the end of the job on every node, and returns the job's
  /// status: the first failure's, else 0.
  int finish(int status, bool restartable = true);
  /// How the round ended; valid once finish() returned.
  RoundEnd round_end() const;
  /// The first stop node 0 sent this node (or node 0's loss); none when this node's failure
  /// came first or nothing failed. Valid once finish() returned.
  std::optional<NodeStop> first_stop() const;

 private:
  NodeClient(int fd, std::string endpoint, int node_rank);
  void greet(const std::string& token, const NodeHello& hello, const base::Deadline& wait,
             std::chrono::milliseconds timeout, bool& challenged);
  bool send(int type, const std::vector<std::string>& fields);
  void control_loop();
  bool on_control(const wire::Message& m);
  void stopped(const NodeStop& stop);
  void lost(const std::string& what);

  int fd_;
  std::string endpoint_;
  int node_rank_;
  Welcome welcome_;
  std::unique_ptr<wire::Reader> pending_;  ///< bytes read but not yet a whole message
  mutable std::mutex mutex_;               ///< guards writes, and what follows
  std::condition_variable changed_;
  std::optional<int> end_status_;
  bool end_final_ = false;
  std::vector<int> end_lost_;
  std::optional<NodeStop> stop_;
  bool node0_gone_ = false;
  std::function<void(const NodeStop&)> on_stop_;
  std::chrono::milliseconds heartbeat_timeout_{10000};
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace ddl::ddlrun
