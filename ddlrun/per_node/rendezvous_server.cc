// Node 0's side of per-node mode's rendezvous (how it works in rendezvous.h): one thread that
// polls the listening socket and every node's connection, and moves through the phases
// gather -> plan -> run -> over.

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <list>

#include "base/check.h"
#include "base/digest.h"
#include "base/fd.h"
#include "base/net/handshake.h"
#include "base/net/listener.h"
#include "base/text.h"
#include "comm/comm.h"
#include "ddlrun/per_node/node_wire.h"
#include "ddlrun/per_node/rendezvous.h"
#include "ddlrun/plan/plan_digest.h"

namespace ddl::ddlrun {

namespace {

using Clock = std::chrono::steady_clock;

/// How long a new connection has to say hello.
constexpr auto kHelloWait = std::chrono::seconds(10);

/// A socket listening on `port` of every address (IPv6 with IPv4 mapped, else IPv4).
base::net::Listening listen_on(int port) {
  const base::net::Listening l = base::net::listen_tcp("", port, 128);
  if (l.fd < 0) {
    throw RendezvousError("node 0 cannot serve the rendezvous on port " + std::to_string(port) +
                          ": " + base::errno_text(errno) +
                          "; choose another port (--rdzv HOST:PORT, MASTER_PORT) on every node");
  }
  return l;
}

/// A node's connection, and what node 0 knows of the node.
struct Conn {
  int fd = -1;
  uint64_t id = 0;                                          ///< its name for the listener's guard
  wire::Reader in{wire::kMaxHello, wire::kMaxHelloFields};  ///< the larger limits once admitted
  std::string nonce;                                        ///< node 0's challenge to it
  std::string client_nonce;                                 ///< the node's, from its hello
  std::string address;
  int node = -1;  ///< its index in the round; -1 until its hello was admitted
  int rank = -1;  ///< its --node-rank
  std::string host;
  std::string inventory;
  bool proven = false;  ///< its inventory came, after node 0's proof: it counts as come
  Clock::time_point heard = Clock::now();
  std::optional<std::string> digest;
  bool done = false;
  bool closed = false;
};

/// The machine identity (mapper/machine.h) an inventory's text holds; "" when none, or when
/// the text is no YAML (the nodes read the whole inventory and say what is wrong with it).
std::string identity_of(const std::string& inventory) {
  try {
    const YAML::Node root = YAML::Load(inventory);
    const YAML::Node identity = root.IsMap() ? root["identity"] : YAML::Node();
    return identity.IsScalar() ? identity.as<std::string>() : "";
  } catch (const YAML::Exception&) {
    return "";
  }
}

}  // namespace

struct NodeServer::State {
  enum class Phase { kGather, kPlan, kRun, kOver };

  Settings s;
  std::function<void(const std::string&)> report;
  int listen_fd = -1;
  base::AcceptRest rest;  ///< rests the listening socket while no descriptor is left
  int wake[2] = {-1, -1};
  int port = 0;
  std::list<Conn> conns;
  std::vector<Conn*> nodes;  ///< by node rank, null until it came; from the welcome on by index
  std::optional<Clock::time_point> last_call;  ///< when the gather ends with fewer nodes
  bool final = false;                          ///< a node ended for a reason no restart passes
  std::vector<int> lost_ranks;
  Phase phase = Phase::kGather;
  Clock::time_point gather_deadline;
  Clock::time_point last_beat = Clock::now();
  Ports ports;
  std::optional<int> first_status;
  base::net::ListenerGuard guard;  ///< strangers' cap, hello deadline, refusals reported
  uint64_t accepted = 0;           ///< connections accepted so far: the next one's id

  void run();
  void accept_one();
  /// Closes connection `id` (one the guard gave up on).
  void close_conn(uint64_t id);
  void read_from(Conn& c);
  void on_message(Conn& c, const wire::Message& m);
  void hello(Conn& c, const std::vector<std::string>& f);
  void inventory(Conn& c, const std::string& text);
  void late(Conn& c, const std::vector<std::string>& f);
  bool speaks(const Conn& c, const std::vector<std::string>& f) const;
  bool proves(const Conn& c, const std::vector<std::string>& f) const;
  std::string hello_problem(const Conn& c, const std::vector<std::string>& f) const;
  std::string host_problem(const Conn& c, const std::string& inventory, std::string& host) const;
  void refuse_hello(Conn& c, const std::vector<std::string>& f, const std::string& problem);
  void welcome();
  void gathered();
  bool member(int rank) const;
  void plan(Conn& c, const std::vector<std::string>& f);
  void failure(Conn& c, const std::string& what, int status);
  void done(Conn& c, int status, bool restartable = true);
  void lost(Conn& c, const std::string& what);
  void tick();
  void fail_all(const std::string& text);
  std::string who(const Conn& c) const;
  std::string missing() const;
};

std::string NodeServer::State::who(const Conn& c) const {
  const std::string node = c.node >= 0 ? "node " + std::to_string(c.node) : "a node";
  return node + " (" + (c.host.empty() ? "" : c.host + ", ") + "from " + c.address + ")";
}

void NodeServer::State::run() {
  gather_deadline = Clock::now() + s.timeout;
  while (phase != Phase::kOver) {
    const Clock::time_point room = guard.room_at();  // the strangers' places all held: no accept
    const bool roomy = Clock::now() >= room;
    std::vector<pollfd> fds = {{wake[0], POLLIN, 0},
                               {listen_fd, roomy ? rest.events() : short{0}, 0}};
    for (const Conn& c : conns)
      fds.push_back({c.fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), roomy ? rest.poll_ms(200) : base::Deadline(room).poll_ms(200));
    if (fds[0].revents != 0) break;
    if (fds[1].revents != 0) accept_one();
    size_t i = 2;
    for (Conn& c : conns) {
      if (i < fds.size() && fds[i++].revents != 0 && !c.closed) read_from(c);
    }
    tick();
    for (auto it = conns.begin(); it != conns.end();) {
      if (!it->closed) {
        ++it;
        continue;
      }
      ::close(it->fd);
      guard.settled(it->id);
      std::replace(nodes.begin(), nodes.end(), &*it, static_cast<Conn*>(nullptr));
      it = conns.erase(it);
    }
  }
  for (Conn& c : conns)
    ::close(c.fd);
  conns.clear();
}

// A new connection gets node 0's challenge at once (sent without waiting: a socket's buffer
// holds it); the oldest of too many connections without hello is closed.
void NodeServer::State::accept_one() {
  const int fd = rest.accept(listen_fd, SOCK_CLOEXEC);
  if (fd < 0) return;  // out of descriptors, `rest` rests the listening socket
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval limit{5, 0};  // an admitted node that does not read cannot hold node 0 up for long
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  Conn& c = conns.emplace_back();
  c.fd = fd;
  c.id = ++accepted;
  c.address = base::net::peer_address(fd, false);
  c.nonce = base::net::nonce();
  if (!wire::send_now(fd, wire::kChallenge, {wire::kMagic, c.nonce})) c.closed = true;
  for (const uint64_t old : guard.arrive(c.id))
    close_conn(old);
}

void NodeServer::State::close_conn(uint64_t id) {
  for (Conn& c : conns)
    if (c.id == id) c.closed = true;
}

void NodeServer::State::read_from(Conn& c) {
  if (!wire::fill(c.fd, c.in)) {
    if (c.node >= 0 && phase == Phase::kRun && !c.done) {
      lost(c, "its ddlrun is gone: the rendezvous connection closed");
    } else if (c.node >= 0 && phase == Phase::kPlan) {
      fail_all(who(c) + " left while the nodes agreed on the plan; see its output");
    }
    c.closed = true;
    return;
  }
  c.heard = Clock::now();
  try {
    while (!c.closed && phase != Phase::kOver) {
      std::optional<wire::Message> m = c.in.take();
      if (!m) break;
      on_message(c, *m);
    }
  } catch (const std::exception& e) {
    const std::string line =
        "rendezvous: " + who(c) + " sent garbage (" + e.what() + "); closed its connection";
    if (c.node >= 0) {
      report(line);
    } else {
      guard.refused(line);
    }
    c.closed = true;
  }
}

void NodeServer::State::on_message(Conn& c, const wire::Message& m) {
  const std::vector<std::string>& f = m.fields;
  if (c.node < 0) {
    if (m.type == wire::kHello && phase == Phase::kGather) {
      hello(c, f);
    } else if (m.type == wire::kHello && proves(c, f)) {
      late(c, f);
    } else if (m.type == wire::kHello) {
      refuse_hello(c, f, hello_problem(c, f));  // a stranger's hello read once the nodes met
    } else {
      c.closed = true;  // only a hello opens a connection
    }
    return;
  }
  if (m.type == wire::kInventory && phase == Phase::kGather && !c.proven && f.size() == 1) {
    inventory(c, f[0]);
  }
  if (m.type == wire::kPlan && phase == Phase::kPlan && f.size() == 3) plan(c, f);
  if (m.type == wire::kFail && phase == Phase::kRun && f.size() == 2) {
    const int status = wire::to_int(f[1]).value_or(1);
    failure(c, f[0], status);
    // A node stopped by Ctrl-Z (launch.cc) sends nothing more until it resumes: the round ends
    // without waiting for it (it was waited for until its heartbeat was missed).
    if (status == 128 + SIGTSTP) done(c, status, false);
  }
  if (m.type == wire::kDone && phase == Phase::kRun && f.size() == 2) {
    done(c, wire::to_int(f[0]).value_or(1), f[1] == "1");
  }
}

// A node of this job (it proves the secret) that comes once the nodes have met: told why it
// cannot join, and node 0 says so too (it was told only that node 0 closed the connection).
void NodeServer::State::late(Conn& c, const std::vector<std::string>& f) {
  const std::string problem = "the job has started without it (round " + std::to_string(s.round) +
                              " runs with " + std::to_string(nodes.size()) +
                              " nodes); a node can join only before the start, or at a restart "
                              "that --nnodes MIN:MAX leaves room for";
  const std::string node = base::excerpt(f[3], 16);
  c.host = f[6];
  guard.refused("rendezvous: refused node " + node + " (" + base::excerpt(c.host) + ", from " +
                c.address + "): " + problem);
  wire::send_now(c.fd, wire::kError, {"refused node " + node + ": " + problem});
  c.closed = true;
}

// Whether `f` is a hello of this rendezvous (magic, nonce, proof, node rank, node count, job,
// host, inventory, round), and whether it proves the job's secret for `c`'s challenge.
bool NodeServer::State::speaks(const Conn&, const std::vector<std::string>& f) const {
  return f.size() == 9 && f[0] == wire::kMagic && f[1].size() == wire::kNonceSize;
}
bool NodeServer::State::proves(const Conn& c, const std::vector<std::string>& f) const {
  return speaks(c, f) &&
         (s.token.empty() || base::same_secret(f[2], wire::proof(s.token, "node", c.nonce, f[1])));
}

// Why `f` (a hello) is refused, "" when it is not. What the node sent is quoted short and
// printable.
std::string NodeServer::State::hello_problem(const Conn& c,
                                             const std::vector<std::string>& f) const {
  if (!speaks(c, f)) {
    return "it does not speak this rendezvous (" + std::string(wire::kMagic) +
           "): run the same ddlrun on every node";
  }
  if (!proves(c, f)) {
    return "wrong token; give every node the same secret (DDL_JOB_TOKEN or --rdzv-token-file)";
  }
  const std::optional<int> rank = wire::to_int(f[3]);
  const int n = s.nnodes;
  const std::string node = base::excerpt(f[3], 16), host = base::excerpt(f[6]);
  if (!rank || *rank >= n) {
    return "node rank " + node + " is not below the node count " + std::to_string(n) +
           "; node ranks run from 0 to " + std::to_string(n - 1);
  }
  if (f[4] != std::to_string(n)) {
    return "it was given " + base::excerpt(f[4], 16) + " nodes, node 0 " + std::to_string(n) +
           "; give every node the same --nnodes";
  }
  if (!s.job.empty() && f[5] != s.job) {
    return "it belongs to job '" + base::excerpt(f[5]) + "', this rendezvous to job '" +
           base::excerpt(s.job) + "'; give every node the same --rdzv-id";
  }
  if (f[8] != std::to_string(s.round)) {
    const bool later = wire::to_int(f[8]).value_or(-1) > s.round;
    return "it is at round " + base::excerpt(f[8], 16) + " of the job, this rendezvous at round " +
           std::to_string(s.round) + " (restart " + std::to_string(s.round) + "); a node of " +
           (later ? "a later round cannot join an earlier one"
                  : "an earlier round cannot join a later one");
  }
  if (!member(*rank)) {
    return "node " + node + " was lost before restart " + std::to_string(s.round) +
           " and cannot rejoin the job";
  }
  if (const Conn* other = nodes[static_cast<size_t>(*rank)]) {
    return "node " + node + " came already (" + base::excerpt(other->host) + ", from " +
           other->address + "); give each node its own --node-rank";
  }
  return "";
}

// A node whose host name another node has too (cloned VMs, some containers) is taken under
// the address node 0 saw it come from, when the machine identities their probes found differ
// (mapper/machine.h); refused when they are the same or unknown (--no-probe).
std::string NodeServer::State::host_problem(const Conn& c, const std::string& inventory,
                                            std::string& host) const {
  const auto named = [&](const std::string& name) -> const Conn* {
    for (const Conn* other : nodes)
      if (other != nullptr && other != &c && other->proven && other->host == name) return other;
    return nullptr;
  };
  const Conn* other = named(host);
  if (other == nullptr) return "";
  const std::string same =
      "its host name " + base::excerpt(host) + " is node " + std::to_string(other->node) + "'s too";
  const std::string mine = identity_of(inventory), theirs = identity_of(other->inventory);
  if (mine.empty() || theirs.empty() || mine == theirs) {
    return same +
           (mine.empty() || theirs.empty()
                ? " and, without a probe (--no-probe), ddlrun cannot tell the two apart"
                : ", and so is its machine identity (one machine, started twice?)") +
           "; every node needs a host name of its own";
  }
  if (c.address.find(':') != std::string::npos || named(c.address) != nullptr) {
    return same + ", and its address " + c.address +
           " cannot name it instead; every node needs a host name of its own";
  }
  host = c.address;
  return "";
}

// A hello that proves the secret is admitted and answered with node 0's own proof; the node
// then sends its inventory (inventory()), and only then counts as come.
void NodeServer::State::hello(Conn& c, const std::vector<std::string>& f) {
  const std::string problem = hello_problem(c, f);
  if (!problem.empty()) {
    refuse_hello(c, f, problem);
    return;
  }
  c.node = *wire::to_int(f[3]);
  c.rank = c.node;
  guard.settled(c.id);
  c.client_nonce = f[1];
  c.host = f[6];
  c.in.set_limits(wire::kMaxMessage, base::net::kMaxFields);
  nodes[static_cast<size_t>(c.node)] = &c;
  if (!wire::send_now(c.fd, wire::kProven,
                      {wire::proof(s.token, "node 0", c.client_nonce, c.nonce)})) {
    c.closed = true;
  }
}

// The inventory of an admitted node: its host name checked against the others' (host_problem),
// then the node has come.
void NodeServer::State::inventory(Conn& c, const std::string& text) {
  std::string host = c.host;
  const std::string problem = host_problem(c, text, host);
  if (!problem.empty()) {
    const std::string node = std::to_string(c.rank);
    guard.refused("rendezvous: refused node " + node + " (" + base::excerpt(c.host) + ", from " +
                  c.address + "): " + problem);
    wire::send_now(c.fd, wire::kError, {"refused node " + node + ": " + problem});
    nodes[static_cast<size_t>(c.node)] = nullptr;
    c.node = -1;
    c.closed = true;
    return;
  }
  c.host = host;
  c.inventory = text;
  c.proven = true;
  gathered();
}

// Refuses the hello `f` for `problem`: reported by node 0 first (before the node can read
// why), then sent to the node, whose connection is closed.
void NodeServer::State::refuse_hello(Conn& c, const std::vector<std::string>& f,
                                     const std::string& problem) {
  const std::string node = f.size() > 3 ? base::excerpt(f[3], 16) : "?";
  const std::string shown = f.size() > 6 ? base::excerpt(f[6]) : "";
  guard.refused("rendezvous: refused node " + node + " (" + (shown.empty() ? "" : shown + ", ") +
                "from " + c.address + "): " + problem);
  wire::send_now(c.fd, wire::kError, {"refused node " + node + ": " + problem});
  c.closed = true;
}

bool NodeServer::State::member(int rank) const {
  return s.members.empty() ||
         std::find(s.members.begin(), s.members.end(), rank) != s.members.end();
}

// Every member came: the welcome now; at least min_nodes: the welcome after the last call.
void NodeServer::State::gathered() {
  const auto came =
      std::count_if(nodes.begin(), nodes.end(), [](const Conn* n) { return n && n->proven; });
  const size_t members = s.members.empty() ? nodes.size() : s.members.size();
  if (static_cast<size_t>(came) == members) {
    welcome();
  } else if (!last_call && s.min_nodes > 0 && came >= s.min_nodes) {
    last_call = Clock::now() + s.last_call;
  }
}

void NodeServer::State::welcome() {
  for (Conn*& n : nodes) {  // admitted, but its inventory has not come: it is too late
    if (n != nullptr && !n->proven) {
      n->closed = true;
      n = nullptr;
    }
  }
  std::erase(nodes, nullptr);  // the nodes that came, renumbered in node-rank order
  for (size_t k = 0; k < nodes.size(); ++k)
    nodes[k]->node = static_cast<int>(k);
  // Every node derives the ranks' token from the secret and this salt (wire::ranks_token).
  std::vector<std::string> f = {"", base::random_bytes(wire::kNonceSize), s.job_id,
                                std::to_string(nodes.size())};
  for (const Conn* n : nodes) {
    f.push_back(std::to_string(n->rank));
    f.push_back(n->host);
    f.push_back(n->address);
    f.push_back(n->inventory);
  }
  phase = Phase::kPlan;
  for (Conn* n : nodes) {
    f[0] = wire::proof(s.token, "node 0", n->client_nonce, n->nonce);
    if (!wire::send(n->fd, wire::kWelcome, f)) {
      fail_all(who(*n) + " left before the plan; see its output");
      return;
    }
  }
}

void NodeServer::State::plan(Conn& c, const std::vector<std::string>& f) {
  c.digest = f[0];
  if (c.node == 0) ports = {wire::to_int(f[1]).value_or(0), wire::to_int(f[2]).value_or(0)};
  if (!std::all_of(nodes.begin(), nodes.end(), [](const Conn* n) { return n && n->digest; })) {
    return;
  }
  for (const Conn* n : nodes) {
    if (*n->digest != *nodes[0]->digest) {
      fail_all("the plan of " + who(*n) + " differs from node 0's (in " +
               digest_difference(*n->digest, *nodes[0]->digest) +
               "); give every node the same options and the same ddlrun");
      return;
    }
  }
  const auto now = Clock::now();
  for (Conn* n : nodes) {
    n->heard = now;
    if (!wire::send(n->fd, wire::kGo, {std::to_string(ports.ddl), std::to_string(ports.master)})) {
      lost(*n, "its ddlrun is gone: the rendezvous connection closed");
    }
  }
  phase = Phase::kRun;
}

// The first failure stops every other node; later ones only count as done.
void NodeServer::State::failure(Conn& c, const std::string& what, int status) {
  if (first_status) return;
  first_status = status != 0 ? status : 1;
  for (Conn* n : nodes) {
    if (n != nullptr && n != &c && !n->closed) {
      wire::send(n->fd, wire::kStop,
                 {std::to_string(c.node), c.host, what, std::to_string(*first_status)});
    }
  }
}

void NodeServer::State::done(Conn& c, int status, bool restartable) {
  if (status != 0) failure(c, "its ranks ended with status " + std::to_string(status), status);
  if (status != 0 && !restartable) final = true;
  c.done = true;
  if (!std::all_of(nodes.begin(), nodes.end(), [](const Conn* n) { return !n || n->done; })) return;
  std::vector<std::string> end = {std::to_string(first_status.value_or(0)), final ? "1" : "0"};
  for (int rank : lost_ranks)
    end.push_back(std::to_string(rank));
  for (Conn* n : nodes) {
    if (n != nullptr && !n->closed) wire::send(n->fd, wire::kEnd, end);
  }
  phase = Phase::kOver;
}

void NodeServer::State::lost(Conn& c, const std::string& what) {
  c.closed = true;
  lost_ranks.push_back(c.rank);
  failure(c, what, 1);
  done(c, 0);
}

void NodeServer::State::tick() {
  const auto now = Clock::now();
  if (phase == Phase::kGather && last_call && now >= std::min(*last_call, gather_deadline)) {
    welcome();
  } else if (phase == Phase::kGather && now >= gather_deadline) {
    fail_all("the rendezvous timed out after " + base::seconds_text(s.timeout) + ": " + missing());
    return;
  }
  for (const uint64_t id : guard.overdue())
    close_conn(id);
  for (Conn& c : conns) {
    if (phase == Phase::kRun && c.node >= 0 && !c.done && !c.closed &&
        now - c.heard > s.heartbeat_timeout) {
      lost(c, "its ddlrun is silent: no heartbeat for " + base::seconds_text(s.heartbeat_timeout));
    }
  }
  if (phase == Phase::kRun && now - last_beat >= std::chrono::seconds(1)) {
    last_beat = now;
    for (Conn* n : nodes) {
      if (n != nullptr && !n->closed) wire::send(n->fd, wire::kHeartbeat, {});
    }
  }
}

// "nodes 1 and 2 did not come (came: node 0 (node1)); start ..."
std::string NodeServer::State::missing() const {
  std::vector<int> absent;
  std::string came;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const bool here = nodes[k] != nullptr && nodes[k]->proven;  // its hardware came too
    if (!here && !member(static_cast<int>(k))) continue;
    if (!here) {
      absent.push_back(static_cast<int>(k));
    } else {
      came += (came.empty() ? "" : ", ") + std::string("node ") + std::to_string(k) + " (" +
              nodes[k]->host + ")";
    }
  }
  std::string list = comm::rank_list(absent);
  list.replace(0, 4, "node");
  const bool one = absent.size() == 1;
  return list + " did not come (came: " + (came.empty() ? "none" : came) +
         "); start ddlrun --node-rank K --nnodes " + std::to_string(nodes.size()) + " on " +
         (one ? "it" : "each") + ", or check that " + (one ? "it reaches" : "they reach") +
         " port " + std::to_string(port) + " here";
}

void NodeServer::State::fail_all(const std::string& text) {
  for (Conn& c : conns) {
    if (!c.closed && c.node >= 0) wire::send(c.fd, wire::kError, {text});
    c.closed = true;  // a connection without hello learns nothing of the job
  }
  phase = Phase::kOver;
}

NodeServer::NodeServer(Settings settings, std::function<void(const std::string&)> report)
    : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.s = std::move(settings);
  st.report = std::move(report);
  st.nodes.assign(static_cast<size_t>(st.s.nnodes), nullptr);
  const base::net::Listening listening = listen_on(st.s.port);
  st.listen_fd = listening.fd;
  st.port = listening.port;
  st.guard = base::net::ListenerGuard({.hello_time = kHelloWait}, st.report);
  st.guard.name("rendezvous", st.port, "ddlrun", "this job's ddlrun");
  if (::pipe2(st.wake, O_CLOEXEC) != 0) {
    ::close(st.listen_fd);
    throw RendezvousError("pipe: " + base::errno_text(errno));
  }
  thread_ = std::thread([&st] { st.run(); });
}

NodeServer::~NodeServer() {
  (void)!::write(state_->wake[1], "x", 1);
  thread_.join();
  for (int fd : {state_->listen_fd, state_->wake[0], state_->wake[1]})
    ::close(fd);
}

int NodeServer::port() const {
  return state_->port;
}

}  // namespace ddl::ddlrun
