// ddlrun's side of --probe-links down the launch tree (tree_links.h).
//
// How it works: the hosts of the probe's tree are indexed under the first-level host whose
// kept session reaches them (its parent, the hosts below it). A first-level session is taken
// from the kept ones with its agent's channel and what it already sent (Kept::pending); a host
// below one whose subtree the probe did not start (Kept::subtree empty) is not reached this
// way. One thread drives every taken channel: each turn it writes what is due (the channels'
// N frames, routed to hosts below the first level, and a heartbeat a second) as far as the
// remote window takes, reads what came and sorts the frames: heartbeats dropped, N frames
// (the first level's own, or routed from a host below) queued as that host's lines, an L (a
// host lost, found by its tree parent) or a routed F kept and the host and those below it
// lost, everything else kept, re-encoded, for the launch. A channel that ends, fails, falls
// silent for the heartbeat deadline, takes none of the bytes waiting for it for that deadline
// while none moves below it (the launch's rule and words, ssh::Outbox: "took no data for ..."; a
// write never waits for its socket, so the other channels go on meanwhile) or sends what is not
// a frame loses its whole subtree, and goes back closed, saying why (Kept::lost): the launch fails
// that host and the hosts below it without logging in to any of them again, as it does for a host
// lost further down. A caller waits on a host's lines with a condition variable. At the end the
// link agents, told "end" by the caller, are awaited a second at most, and each session goes back
// with the kept frames in front of the bytes not yet read.

#include "launcher/ssh/tree_links.h"

#include <poll.h>
#include <signal.h>

#include <deque>

#include "launcher/ssh/agent_link.h"

namespace ddl::launcher::ssh {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {
constexpr milliseconds kPollSlice{5};
constexpr milliseconds kEndWait{1000};  // for the link agents to say they ended
}  // namespace

struct TreeLinks::Conn {
  Conn(std::string name, int index, AgentTree::Kept kept)
      : name(std::move(name)), index(index), link(std::move(kept)) {
    link.said_hello();  // it answered the probe
  }
  std::string name;        ///< the first-level host
  int index = 0;           ///< its index in the tree
  AgentLink link;          ///< the pump's
  std::string out;         ///< frames due down, guarded by TreeLinks::mutex_
  std::string keep;        ///< frames for the launch, in the order they came (the pump's)
  AgentTree::Kept closed;  ///< what goes back once it is gone: no session, Kept::lost why
  bool gone = false;
};

struct TreeLinks::Node {
  std::string name;
  std::string parent;  ///< its tree parent; "" on the first level
  Conn* conn = nullptr;
  std::vector<int> below;  ///< every host below it
  std::deque<std::string> lines;
  bool started = false;  ///< an N went to it
  bool ended = false;    ///< its link agent said it ended (N 1)
  std::string end_why;
  std::string lost;  ///< why it cannot be reached; "": it can
};

namespace {

/// Indexes `h` (below `parent`, reached through `conn`) and its subtree into `nodes`; returns
/// the hosts of that subtree.
template <typename Nodes, typename Conn>
std::vector<int> index_tree(const TreeHost& h, const std::string& parent, Conn* conn,
                            Nodes& nodes) {
  auto& n = nodes[h.index];
  n.name = h.name;
  n.parent = parent;
  n.conn = conn;
  for (const TreeHost& c : h.children) {
    n.below.push_back(c.index);
    const std::vector<int> under = index_tree(c, h.name, conn, nodes);
    n.below.insert(n.below.end(), under.begin(), under.end());
  }
  return n.below;
}

}  // namespace

TreeLinks::TreeLinks(AgentTree& sessions, milliseconds heartbeat_timeout)
    : sessions_(sessions), heartbeat_timeout_(heartbeat_timeout) {
  for (const TreeHost& t : sessions_.tree()) {
    AgentTree::Kept kept = sessions_.take(t.name);
    if (!kept.session || !kept.channel) {  // back as it was: one lost (Kept::lost) stays lost
      if (kept.session || !kept.lost.empty()) sessions_.put(t.name, std::move(kept));
      continue;
    }
    TreeHost reached = t;
    if (kept.subtree.empty()) reached.children.clear();  // the probe started none below
    auto c = std::make_unique<Conn>(t.name, t.index, std::move(kept));
    index_tree(reached, "", c.get(), nodes_);
    conns_.push_back(std::move(c));
  }
  for (const auto& [i, n] : nodes_)
    by_name_[n.name] = i;
  // The pump takes no signal (as AgentTree's heartbeat thread): they stay ddlrun's.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pump_ = std::thread([this] { pump(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TreeLinks::~TreeLinks() {
  await_ends();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  pump_.join();
  for (auto& c : conns_)
    sessions_.put(c->name, c->gone ? std::move(c->closed) : c->link.release(c->keep));
}

int TreeLinks::open(const std::string& host, int port) {
  const auto it = by_name_.find(host);
  if (it == by_name_.end()) return -1;
  send_frame(it->second, encode_frame(FrameType::kLinkLine, port, {}));
  return it->second;
}

void TreeLinks::send(int id, const std::string& line) {
  send_frame(id, encode_frame(FrameType::kLinkLine, 0, line));
}

void TreeLinks::send_frame(int host, const std::string& frame) {
  std::lock_guard lock(mutex_);
  Node& n = nodes_.at(host);
  if (!n.lost.empty()) throw TreeLinkError("the link agent ended: " + n.lost);
  n.started = true;
  n.conn->out += n.parent.empty() ? frame : route(host, frame);
}

std::string TreeLinks::line(int id, milliseconds timeout) {
  std::unique_lock lock(mutex_);
  Node& n = nodes_.at(id);
  changed_.wait_for(lock, timeout, [&] { return !n.lines.empty() || !n.lost.empty() || n.ended; });
  if (!n.lines.empty()) {
    std::string line = std::move(n.lines.front());
    n.lines.pop_front();
    return line;
  }
  if (!n.lost.empty()) throw TreeLinkError("the link agent ended: " + n.lost);
  if (n.ended) {
    throw TreeLinkError("the link agent ended" + (n.end_why.empty() ? "" : ": " + n.end_why));
  }
  throw TreeLinkError("the link agent did not answer in time");
}

std::string TreeLinks::gone(int id) {
  std::lock_guard lock(mutex_);
  const Node& n = nodes_.at(id);
  return n.lost.empty() ? "" : "the link agent ended: " + n.lost;
}

void TreeLinks::await_ends() {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, kEndWait, [&] {
    for (const auto& [i, n] : nodes_) {
      if (n.started && !n.ended && n.lost.empty()) return false;
    }
    return true;
  });
}

void TreeLinks::pump() {
  std::vector<pollfd> fds;
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    fds.clear();
    bool pollable = true;
    for (auto& c : conns_) {
      if (c->gone) continue;
      turn(*c);
      if (c->gone) continue;
      const int fd = c->link.fd();
      pollable = pollable && fd >= 0;
      fds.push_back({fd, POLLIN, 0});
    }
    if (pollable && !fds.empty()) {
      ::poll(fds.data(), fds.size(), static_cast<int>(kPollSlice.count()));
    } else {
      std::this_thread::sleep_for(kPollSlice);
    }
  }
}

void TreeLinks::turn(Conn& c) {
  {
    std::lock_guard lock(mutex_);
    c.link.send(c.out);
    c.out.clear();
  }
  const bool open = c.link.turn(milliseconds(0));
  if (c.link.write_failed())
    return lose_conn(c, "lost the connection to " + c.link.session().endpoint());
  try {
    sort(c);
  } catch (const std::exception& e) {
    return lose_conn(c, std::string("protocol error: ") + e.what());
  }
  if (!open) return lose_conn(c, "the connection to its agent closed");
  if (const std::string why = c.link.lost_why(heartbeat_timeout_); !why.empty()) lose_conn(c, why);
}

void TreeLinks::sort(Conn& c) {
  while (std::optional<Frame> f = c.link.next()) {
    switch (f->type) {
      case FrameType::kHeartbeat:
        continue;
      case FrameType::kLinkLine:
        link_frame(c.index, *f);
        continue;
      case FrameType::kRouted:
        routed(c, below(c, f->id), f->payload);
        continue;
      case FrameType::kLost:
        lose(below(c, f->id), f->payload);
        break;
      case FrameType::kFailure:  // the first-level agent gave up
        lose(c.index, f->payload);
        break;
      default:
        break;
    }
    c.keep += encode_frame(f->type, f->id, f->payload);
  }
}

int TreeLinks::below(const Conn& c, int host) const {
  const auto it = nodes_.find(host);
  if (it == nodes_.end() || it->second.conn != &c) {
    throw std::runtime_error("a frame for host " + std::to_string(host) + ", which is not below " +
                             c.name + " in the launch tree");
  }
  return host;
}

void TreeLinks::routed(Conn& c, int host, std::string_view frames) {
  std::string keep;
  try {
    for (const Frame& g : routed_frames(frames)) {
      if (g.type == FrameType::kLinkLine) {
        link_frame(host, g);
        continue;
      }
      if (g.type == FrameType::kFailure) lose(host, g.payload);
      keep += encode_frame(g.type, g.id, g.payload);
    }
  } catch (const std::exception& e) {
    lose(host, std::string("protocol error: ") + e.what());
  }
  if (!keep.empty()) c.keep += route(host, keep);
}

void TreeLinks::link_frame(int host, const Frame& f) {
  {
    std::lock_guard lock(mutex_);
    Node& n = nodes_.at(host);
    if (f.id == 0) {
      n.lines.push_back(f.payload);
    } else {
      n.ended = true;
      n.end_why = f.payload;
    }
  }
  changed_.notify_all();
}

void TreeLinks::lose(int host, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    Node& n = nodes_.at(host);
    if (n.lost.empty()) n.lost = why;
    for (int d : n.below) {
      Node& m = nodes_.at(d);
      if (m.lost.empty()) m.lost = lost_with_parent_text(m.parent);
    }
  }
  changed_.notify_all();
}

void TreeLinks::lose_conn(Conn& c, const std::string& why) {
  c.gone = true;
  lose(c.index, why);
  // The session goes back closed, with why (Kept::lost): the launch names the host with the
  // hosts below it and logs in to none of them again, as for a host lost further down (whose
  // L the launch reads in the kept frames). Closing never waits for a host that cannot answer.
  c.link.close_now();
  c.closed.lost = why;
}

}  // namespace ddl::launcher::ssh
