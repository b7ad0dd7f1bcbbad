// Per-node mode's rendezvous: the wire format and the node's side (how it works in
// rendezvous.h; node 0's side in rendezvous_server.cc).

#include "ddlrun/per_node/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/check.h"
#include "base/digest.h"
#include "base/fd.h"
#include "base/net/handshake.h"
#include "base/net/listener.h"
#include "base/text.h"
#include "ddlrun/per_node/node_wire.h"

namespace ddl::ddlrun {

namespace wire {

std::string proof(const std::string& secret, std::string_view role, std::string_view nonce_a,
                  std::string_view nonce_b) {
  std::string context(role);
  context.append(1, '\0').append(nonce_a).append(nonce_b);
  return base::net::proof(secret, "ddlrun per-node rendezvous: ", context);
}

std::string ranks_token(const std::string& secret, std::string_view salt) {
  std::string message = "ddlrun per-node ranks token: ";
  message.append(salt);
  return base::hex(base::hmac_sha256(secret, message));
}

std::optional<int> to_int(const std::string& text) {
  if (text.size() > 9 || text.rfind('-', 0) == 0) return std::nullopt;
  return base::parse_int(text);
}

}  // namespace wire

namespace {

using base::seconds_text;
using Clock = std::chrono::steady_clock;

/// "HOST:PORT" ("[v6]:PORT") split; throws RendezvousError when it is not one.
std::pair<std::string, std::string> split_endpoint(const std::string& endpoint) {
  auto split = base::net::split_host_port(endpoint);
  if (!split || !wire::to_int(split->second)) {
    throw RendezvousError("rendezvous endpoint '" + endpoint + "' is not HOST:PORT");
  }
  return *split;
}

/// Connects (each connect within `deadline` too: node 0's host may drop the packets), retrying
/// every 200 ms until `deadline`. The socket is blocking.
int connect_until(const std::string& endpoint, const base::Deadline& deadline, int node_rank) {
  const auto [host, port] = split_endpoint(endpoint);
  std::string why;
  while (true) {
    const base::net::Dialed d = base::net::dial(host, port, deadline.at(), {}, true);
    if (d.fd >= 0) return d.fd;
    why = d.gai != 0 ? "cannot resolve " + host + ": " + gai_strerror(d.gai)
                     : base::errno_text(d.err);
    if (deadline.passed()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw RendezvousError("node " + std::to_string(node_rank) + " cannot reach the rendezvous at " +
                        endpoint + " (" + why + "); start node 0 (ddlrun --node-rank 0) on " +
                        host + ", or check --rdzv (MASTER_ADDR, MASTER_PORT) and that port " +
                        port + " is open there");
}

/// Node 0 closed the connection before it answered.
class ClosedEarly : public RendezvousError {
 public:
  using RendezvousError::RendezvousError;
};

/// The next message before `deadline`; nullopt on timeout. Throws RendezvousError (`where`
/// names the endpoint) when the connection closes or the server sends an error.
std::optional<wire::Message> receive(int fd, wire::Reader& pending, const base::Deadline& deadline,
                                     const std::string& where) {
  while (true) {
    std::optional<wire::Message> m;
    try {
      m = pending.take();
    } catch (const std::runtime_error& e) {
      throw RendezvousError(where + "node 0 sent something this ddlrun cannot read (" + e.what() +
                            "); run the same ddlrun on every node");
    }
    if (m) {
      if (m->type == wire::kError && !m->fields.empty())
        throw RendezvousError(where + m->fields[0]);
      return m;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, deadline.poll_ms());
    if (ready == 0 && deadline.passed()) return std::nullopt;
    if (ready > 0 && !wire::fill(fd, pending)) {
      throw ClosedEarly(
          where + "node 0 closed the connection (its ddlrun ended or failed; see its output)");
    }
  }
}

}  // namespace

namespace wire {

Welcome decode_welcome(const Message& m, const std::string& secret, std::string_view nonce,
                       std::string_view challenge) {
  Welcome w;
  const std::optional<int> n = m.fields.size() >= 4 ? to_int(m.fields[3]) : std::nullopt;
  if (m.type != kWelcome || !n || m.fields.size() != 4 + 4 * static_cast<size_t>(*n)) {
    throw RendezvousError("node 0 sent something other than the job (another ddlrun version?)");
  }
  if (!base::same_secret(m.fields[0], proof(secret, "node 0", nonce, challenge))) {
    throw RendezvousError(
        "node 0 does not know this job's secret: it did not prove it in its welcome; give every "
        "node the same secret (DDL_JOB_TOKEN or --rdzv-token-file), and check --rdzv");
  }
  w.job_token = ranks_token(secret, m.fields[1]);
  w.job_id = m.fields[2];
  for (int i = 0; i < *n; ++i) {
    const size_t at = 4 + 4 * static_cast<size_t>(i);
    w.nodes.push_back(
        {m.fields[at + 1], m.fields[at + 2], m.fields[at + 3], to_int(m.fields[at]).value_or(-1)});
  }
  return w;
}

bool node0_proved(const Message& m, const std::string& secret, std::string_view nonce,
                  std::string_view challenge) {
  return m.type == kProven && m.fields.size() == 1 &&
         base::same_secret(m.fields[0], proof(secret, "node 0", nonce, challenge));
}

std::optional<std::string> decode_challenge(const Message& m) {
  if (m.type != kChallenge || m.fields.size() != 2 || m.fields[0] != kMagic ||
      m.fields[1].size() != kNonceSize) {
    return std::nullopt;
  }
  return m.fields[1];
}

}  // namespace wire

NodeClient::NodeClient(int fd, std::string endpoint, int node_rank)
    : fd_(fd),
      endpoint_(std::move(endpoint)),
      node_rank_(node_rank),
      pending_(std::make_unique<wire::Reader>()) {}

NodeClient::~NodeClient() {
  if (thread_.joinable()) {
    if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
    thread_.join();
  }
  for (int fd : {wake_[0], wake_[1], fd_})
    if (fd >= 0) ::close(fd);
}

std::unique_ptr<NodeClient> NodeClient::join(const std::string& endpoint, const std::string& token,
                                             const NodeHello& hello,
                                             std::chrono::milliseconds timeout) {
  const base::Deadline deadline(timeout);
  // The server's own deadline comes first, and with it the names of the missing nodes.
  const base::Deadline wait(deadline.at() + std::chrono::seconds(5));
  while (true) {
    std::unique_ptr<NodeClient> c(new NodeClient(connect_until(endpoint, deadline, hello.node_rank),
                                                 endpoint, hello.node_rank));
    bool challenged = false;
    try {
      c->greet(token, hello, wait, timeout, challenged);
      return c;
    } catch (const ClosedEarly&) {
      // Before its challenge node 0 was busy (it closes the oldest connections that have not
      // said hello); after it, in a restart's round, it may still be closing the round before.
      if ((challenged && hello.round == 0) || deadline.passed()) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

// node 0's challenge, this node's hello with its proof of the secret, node 0's proof, this
// node's inventory (its hardware goes to node 0 only once node 0 proved that it knows the
// secret: a stranger listening at node 0's address learns nothing of it), node 0's welcome.
// `challenged` is set once the challenge came.
void NodeClient::greet(const std::string& token, const NodeHello& hello, const base::Deadline& wait,
                       std::chrono::milliseconds timeout, bool& challenged) {
  const std::string where = "the rendezvous at " + endpoint_ + ": ";
  const auto timed_out = [&] {
    return RendezvousError("node " + std::to_string(hello.node_rank) + " waited " +
                           std::to_string(timeout.count() / 1000) + " s at the rendezvous at " +
                           endpoint_ + " and node 0 never sent the job; see node 0's output");
  };
  const std::optional<wire::Message> first = receive(fd_, *pending_, wait, where);
  if (!first) throw timed_out();
  const std::optional<std::string> challenge = wire::decode_challenge(*first);
  if (!challenge) {
    throw RendezvousError(where + "it does not speak this rendezvous (" +
                          std::string(wire::kMagic) + "): run the same ddlrun on every node");
  }
  challenged = true;
  const std::string nonce = base::net::nonce();
  send(wire::kHello, {wire::kMagic, nonce, wire::proof(token, "node", *challenge, nonce),
                      std::to_string(hello.node_rank), std::to_string(hello.nnodes), hello.job,
                      hello.host, "", std::to_string(hello.round)});
  const std::optional<wire::Message> proven = receive(fd_, *pending_, wait, where);
  if (!proven) throw timed_out();
  if (!wire::node0_proved(*proven, token, nonce, *challenge)) {
    throw RendezvousError(where +
                          "node 0 did not prove that it knows this job's secret, so this node "
                          "sent it nothing of its own; give every node the same secret "
                          "(DDL_JOB_TOKEN or --rdzv-token-file) and the same ddlrun, and check "
                          "--rdzv");
  }
  send(wire::kInventory, {hello.inventory});
  const std::optional<wire::Message> m = receive(fd_, *pending_, wait, where);
  if (!m) throw timed_out();
  try {
    welcome_ = wire::decode_welcome(*m, token, nonce, *challenge);
  } catch (const RendezvousError& e) {
    throw RendezvousError(where + e.what());
  }
}

int NodeClient::index() const {
  for (size_t k = 0; k < welcome_.nodes.size(); ++k) {
    if (welcome_.nodes[k].rank == node_rank_) return static_cast<int>(k);
  }
  return node_rank_;
}

bool NodeClient::send(int type, const std::vector<std::string>& fields) {
  std::lock_guard lock(mutex_);
  return wire::send(fd_, type, fields);
}

Ports NodeClient::agree(const std::string& digest, const Ports& ports) {
  send(wire::kPlan, {digest, std::to_string(ports.ddl), std::to_string(ports.master)});
  const std::string where = "the rendezvous at " + endpoint_ + ": ";
  while (true) {
    std::optional<wire::Message> m =
        receive(fd_, *pending_, base::Deadline(std::chrono::minutes(5)), where);
    if (!m) throw RendezvousError(where + "node 0 did not confirm the plan within 5 minutes");
    if (m->type == wire::kHeartbeat) continue;
    if (m->type != wire::kGo || m->fields.size() != 2) {
      throw RendezvousError(where + "node 0 sent something other than the go-ahead");
    }
    return {wire::to_int(m->fields[0]).value_or(0), wire::to_int(m->fields[1]).value_or(0)};
  }
}

void NodeClient::watch(std::function<void(const NodeStop&)> on_stop,
                       std::chrono::milliseconds heartbeat_timeout) {
  on_stop_ = std::move(on_stop);
  heartbeat_timeout_ = heartbeat_timeout;
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw RendezvousError("pipe: " + base::errno_text(errno));
  thread_ = std::thread([this] { control_loop(); });
}

void NodeClient::report_failure(const std::string& what, int status) {
  send(wire::kFail, {what, std::to_string(status)});
}

// The control channel's thread: heartbeats out, stop and end in (what agree() read past the
// go-ahead first); silence or a closed connection counts as node 0 gone.
void NodeClient::control_loop() {
  auto heard = Clock::now();
  auto beat = Clock::now();
  while (true) {
    try {
      while (std::optional<wire::Message> m = pending_->take()) {
        if (!on_control(*m)) return;
      }
    } catch (const std::exception& e) {
      lost(std::string("it sent garbage: ") + e.what());
      return;
    }
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    ::poll(p, 2, 200);
    if (p[1].revents != 0) return;
    const auto now = Clock::now();
    if (now - beat >= std::chrono::seconds(1)) {
      send(wire::kHeartbeat, {});
      beat = now;
    }
    if (p[0].revents != 0) {
      if (!wire::fill(fd_, *pending_)) {
        lost("its ddlrun is gone: the rendezvous connection closed");
        return;
      }
      heard = now;
    }
    if (now - heard > heartbeat_timeout_) {
      lost("its ddlrun is silent: no heartbeat for " + seconds_text(heartbeat_timeout_));
      return;
    }
  }
}

// One message of the control channel; false once the job has ended.
bool NodeClient::on_control(const wire::Message& m) {
  if (m.type == wire::kStop && m.fields.size() == 4) {
    stopped({wire::to_int(m.fields[0]).value_or(-1), m.fields[1], m.fields[2],
             wire::to_int(m.fields[3]).value_or(1)});
  } else if (m.type == wire::kEnd && m.fields.size() >= 2) {
    std::lock_guard lock(mutex_);
    end_status_ = wire::to_int(m.fields[0]).value_or(1);
    end_final_ = m.fields[1] == "1";
    for (size_t i = 2; i < m.fields.size(); ++i)
      end_lost_.push_back(wire::to_int(m.fields[i]).value_or(-1));
    changed_.notify_all();
    return false;
  }
  return true;
}

void NodeClient::lost(const std::string& what) {
  {
    std::lock_guard lock(mutex_);
    node0_gone_ = true;
  }
  stopped({0, welcome_.nodes.empty() ? "" : welcome_.nodes[0].host, what, 1});
}

void NodeClient::stopped(const NodeStop& stop) {
  {
    std::lock_guard lock(mutex_);
    changed_.notify_all();
    if (stop_) return;
    stop_ = stop;
  }
  if (on_stop_) on_stop_(stop);
}

int NodeClient::finish(int status, bool restartable) {
  send(wire::kDone, {std::to_string(status), restartable ? "1" : "0"});
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return end_status_.has_value() || node0_gone_; });
  if (end_status_) return *end_status_;
  return status != 0 ? status : stop_->status;
}

std::optional<NodeStop> NodeClient::first_stop() const {
  std::lock_guard lock(mutex_);
  return stop_;
}

RoundEnd NodeClient::round_end() const {
  std::lock_guard lock(mutex_);
  return {end_final_, end_lost_, node0_gone_ && !end_status_, welcome_.nodes};
}

}  // namespace ddl::ddlrun
