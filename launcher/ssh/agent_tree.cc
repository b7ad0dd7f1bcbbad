// ddlrun's side of a subtree started before the launch (agent_tree.h).
//
// How it works: the hosts of the subtree frame are indexed (each one's tree parent, the hosts
// below it, whether its command's output is awaited). The subtree frame goes down the kept
// channel, after the bytes the agent already sent (its hello) have been read, and an inventory
// request (Hw) routed to each awaited host after it. Then, turn by turn until no output is
// awaited: a heartbeat a second goes down as far as the remote window takes, and each frame
// that comes up is sorted: a Hw routed from an awaited host is its output (the inventory, or
// why it has none), and so is a V (its command ended before its agent began: when in failure,
// every awaited host below it is "not reached", no agent started them); an F routed from one
// (it could not be logged in to or started) or an L naming one is its error, and every awaited
// host below it is "not reached"; all the rest (hellos, notes, failures of hosts not awaited,
// and a copy of every L) is kept, re-encoded, in
// kept.pending for the launch. A deadline, or the end of the channel, fails what is left.
// Once its agent said hello, the first-level host is held to the launch's rules and words: no
// byte from it for the heartbeat deadline ("no heartbeat for ..."), or none of the bytes
// waiting for it taken while none moves below (ssh::Outbox: "took no data for ..."; a write
// never waits for the socket), and it is lost: its channel and session close without waiting,
// kept.lost says why (the launch names it, with the hosts below, and logs in to none of them
// again) and what is left fails as not reached.
//
// The agents' keep-alive: one thread, made with every signal blocked, wakes each interval (or at
// once when the tree is destroyed), lists the hosts kept at that moment, and beats each in turn,
// taking the lock anew for each one so that a take() waits for one beat at most; a host taken
// meanwhile is skipped.

#include "launcher/ssh/agent_tree.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "base/fd.h"
#include "base/text.h"
#include "launcher/ssh/agent_link.h"
#include "launcher/ssh/protocol.h"

namespace ddl::launcher::ssh {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 20;

class SubtreeStart {
 public:
  SubtreeStart(AgentTree::Kept& kept, const std::string& host, const SubtreeFrame& w)
      : kept_(kept), host_(host), deadline_(w.heartbeat_timeout) {
    for (const TreeHost& c : w.children)
      index(c, host);
    frames_ = encode_frame(FrameType::kSubtree, 0, encode(w));
    for (int i : order_)
      frames_ += route(i, encode_frame(FrameType::kInventory, 0, {}));
    kept_.subtree = encode(w);
  }

  std::vector<StartedHost> run(std::chrono::milliseconds limit) {
    if (!kept_.channel) return ended();
    link_ = std::make_unique<AgentLink>(std::move(kept_));
    link_->send(frames_);  // the subtree frame goes, in any case
    const Clock::time_point deadline = Clock::now() + limit;
    bool open = true;
    while (open && (awaited_ > 0 || link_->waiting() > 0)) {
      sort_frames();
      if (Clock::now() >= deadline) {
        fail_awaited([&](const Node& n) {
          return "no answer within " + base::seconds_text(limit) + from_parent_text(n.parent);
        });
        break;
      }
      open = link_->turn(std::chrono::milliseconds(kPollMs)) && !link_->write_failed();
      if (const std::string why = link_->lost_why(deadline_); open && !why.empty())
        return lost(why);
    }
    sort_frames();
    kept_ = link_->release(keep_);
    return open ? finish() : ended();
  }

 private:
  struct Node {
    std::string parent;
    std::vector<int> below;  ///< every host below it
    bool awaited = false;    ///< its command's output has not come yet
    StartedHost result;
  };

  /// Indexes `h`, below `parent`, and its subtree (in the tree's order); returns the hosts of
  /// that subtree.
  std::vector<int> index(const TreeHost& h, const std::string& parent) {
    Node& n = nodes_[h.index];  // a map's nodes stay put
    n.parent = parent;
    n.result = StartedHost{h.index, h.name, parent, std::nullopt, {}};
    if (!h.command.empty()) {
      n.awaited = true;
      ++awaited_;
      order_.push_back(h.index);
    }
    for (const TreeHost& c : h.children) {
      n.below.push_back(c.index);
      const std::vector<int> under = index(c, h.name);
      n.below.insert(n.below.end(), under.begin(), under.end());
    }
    return n.below;
  }

  /// One StartedHost per awaited host, in the tree's order.
  std::vector<StartedHost> finish() {
    std::vector<StartedHost> out;
    for (int i : order_)
      out.push_back(std::move(nodes_.at(i).result));
    return out;
  }

  /// The first-level host is lost by the launch's rules (silence, or no data taken): its
  /// channel and session are closed without waiting, and kept.lost says why.
  std::vector<StartedHost> lost(const std::string& why) {
    link_->close_now();
    kept_ = link_->release();
    kept_.subtree.clear();
    kept_.pending.clear();
    kept_.lost = why;
    return ended();
  }

  /// Its channel ended (or was gone): what is still awaited was not reached, and the launch
  /// runs its agent again.
  std::vector<StartedHost> ended() {
    fail_awaited([&](const Node&) { return unreached_text(host_); });
    kept_.channel.reset();
    kept_.subtree.clear();
    return finish();
  }

  /// Each awaited host fails with why(node).
  template <typename Why>
  void fail_awaited(Why why) {
    for (auto& [i, n] : nodes_) {
      if (!n.awaited) continue;
      n.result.error = why(n);
      n.awaited = false;
      --awaited_;
    }
  }

  /// Host `i` failed (`why`): so does every awaited host below it.
  void fail(int i, const std::string& why) {
    Node& n = nodes_.at(i);
    if (n.awaited) {
      n.result.error = why;
      n.awaited = false;
      --awaited_;
    }
    for (int d : n.below) {
      Node& m = nodes_.at(d);
      if (!m.awaited) continue;
      m.result.error = unreached_text(n.result.name);
      m.awaited = false;
      --awaited_;
    }
  }

  /// Every whole frame read so far: answers taken, the rest kept for the launch.
  void sort_frames() {
    while (std::optional<Frame> f = link_->next()) {
      if (f->type == FrameType::kHello) link_->said_hello();  // its agent reads its channel now
      if (f->type == FrameType::kHeartbeat) continue;         // the launch hears its own
      const auto it = nodes_.find(f->id);
      if (f->type == FrameType::kLost && it != nodes_.end()) {
        fail(f->id, f->payload);
      } else if (f->type == FrameType::kRouted && it != nodes_.end()) {
        routed(it->first, it->second, f->payload);
        continue;
      }
      keep_ += encode_frame(f->type, f->id, f->payload);
    }
  }

  /// The frames routed from host `i`: its output and, while it is awaited, its failure are
  /// taken, the rest kept. Throws when they are not whole frames (routed_frames).
  void routed(int i, Node& n, std::string_view frames) {
    std::string keep;
    for (const Frame& g : routed_frames(frames)) {
      if (g.type == FrameType::kInventory && n.awaited) {
        n.result.output = inventory_answer_output(g.id, g.payload);
        n.awaited = false;
        --awaited_;
      } else if (g.type == FrameType::kOutput && n.awaited) {
        n.result.output = decode_command_output(g.payload);
        n.awaited = false;
        --awaited_;
        // Its command ended (it failed) before its agent began: no host below it will start.
        if (n.result.output->exit_status != 0 || !n.result.output->signal.empty()) fail(i, "");
      } else if (g.type == FrameType::kFailure && n.awaited) {
        fail(i, g.payload);
      } else if (g.type != FrameType::kOutput && g.type != FrameType::kInventory) {
        keep += encode_frame(g.type, g.id, g.payload);
      }
    }
    if (!keep.empty()) keep_ += route(i, keep);
  }

  AgentTree::Kept& kept_;
  std::string host_;
  std::map<int, Node> nodes_;
  std::vector<int> order_;  ///< the awaited hosts, in the tree's order
  int awaited_ = 0;
  std::chrono::milliseconds deadline_;  ///< the heartbeat deadline (the subtree frame's)
  std::string frames_;                  ///< the subtree frame and the inventory requests
  std::unique_ptr<AgentLink> link_;     ///< kept_'s channel while it runs
  std::string keep_;                    ///< the frames that are not answers, for the launch
};

/// Empties `kept`, closing its channel before its session.
void drop(AgentTree::Kept& kept) {
  kept.channel.reset();
  kept = {};
}

// Asking a first-level agent for its inventory (ask_agent): the request goes down as the
// channel opens; then, until the deadline, stdout is read as the agent's frames (the answer
// taken, the rest kept for the launch) and stderr kept for the answer's text. Bytes that are
// not frames, or a command that ends first, are the command's output, judged as a probe's.
class InventoryAsk {
 public:
  static constexpr size_t kMaxStderr = size_t{64} << 10;  ///< kept of what it says on stderr

  /// Asks the agent running on kept.channel (Ask::kHello: waits for its hello).
  InventoryAsk(AgentTree::Kept& kept, std::chrono::milliseconds timeout, Ask ask)
      : kept_(kept), timeout_(timeout), deadline_(timeout), awaited_(FrameType::kInventory) {
    if (ask == Ask::kHello) {
      awaited_ = FrameType::kHello;
      return;
    }
    // A request the channel does not take (the command ended at once) is no error of its own.
    kept_.channel->write(encode_frame(FrameType::kInventory, 0, {}));
  }

  /// One look, never waiting: the answer once it came, nullopt while it is to come. Throws
  /// ddl::ssh::Error on a read error.
  std::optional<AgentAnswer> step() {
    const bool ended = read(ddl::ssh::Stream::kStdout, out_);  // no frame can follow
    read(ddl::ssh::Stream::kStderr, err_);
    if (std::optional<AgentAnswer> a = answer()) return a;
    if (ended || kept_.channel->eof()) return ended_first();
    if (deadline_.passed()) {
      if (awaited_ == FrameType::kHello)
        return AgentAnswer{std::nullopt,
                           "no answer from its agent after " + base::seconds_text(timeout_)};
      return AgentAnswer{std::nullopt, "timed out after " + base::seconds_text(timeout_) +
                                           " waiting for '" + kept_.command +
                                           "' to print the inventory"};
    }
    return std::nullopt;
  }
  /// The socket to wait on (-1: none) and for how long at most.
  int fd() { return kept_.channel->fd(); }
  int wait_ms() const { return deadline_.poll_ms(kPollMs); }

 private:
  /// Reads what waits on `stream` into `into` (stdout into the frame reader too); true at its
  /// end. Throws ddl::ssh::Error on a read error.
  bool read(ddl::ssh::Stream stream, std::string& into) {
    char buf[16384];
    for (;;) {
      const int n = kept_.channel->read(buf, sizeof buf, stream);
      if (n == ddl::ssh::Channel::kEof) return true;
      if (n == ddl::ssh::Channel::kError) {
        throw ddl::ssh::Error("reading from the remote command failed: " + kept_.session->error());
      }
      if (n == 0) return false;
      if (stream == ddl::ssh::Stream::kStdout) reader_.feed(std::string_view(buf, n));
      if (stream == ddl::ssh::Stream::kStdout || into.size() < kMaxStderr)
        into.append(buf, static_cast<size_t>(n));
    }
  }

  /// The answer once it came (the other frames kept), or what the command printed when it is
  /// not the agent's frames; nullopt while it is to come.
  std::optional<AgentAnswer> answer() {
    try {
      while (std::optional<Frame> f = reader_.next()) {
        if (f->type != FrameType::kInventory) {
          kept_.pending += encode_frame(f->type, f->id, f->payload);
          if (f->type != awaited_) continue;
        }
        CommandOutput o = awaited_ == FrameType::kHello
                              ? CommandOutput{}
                              : inventory_answer_output(f->id, f->payload);
        o.err = err_ + o.err;
        kept_.pending += reader_.take_rest();
        return AgentAnswer{o, {}};
      }
    } catch (const std::runtime_error&) {  // not the agent's frames: a login script's words
      drop(kept_);
      return AgentAnswer{CommandOutput{0, {}, out_, err_}, {}};
    }
    return std::nullopt;
  }

  /// The command ended before it answered: its output and how it ended.
  AgentAnswer ended_first() {
    const CommandOutput o{kept_.channel->exit_status(), kept_.channel->exit_signal(), out_, err_};
    drop(kept_);
    return {o, {}, true};
  }

  AgentTree::Kept& kept_;
  std::chrono::milliseconds timeout_;
  base::Deadline deadline_;
  FrameType awaited_;  ///< the answer's frame: Hw, or the hello
  FrameReader reader_;
  std::string out_;  ///< all of stdout, for a command that is not the agent
  std::string err_;
};

/// One host's login and ask, from a login thread to the reading one.
struct Asking {
  size_t index = 0;  ///< in ask_agents' hosts
  AgentTree::Kept kept;
  std::unique_ptr<InventoryAsk> ask;  ///< null: the login failed (its answer says why)
};

/// The logins handed to the reading thread.
struct Started {
  std::mutex mutex;
  std::vector<std::unique_ptr<Asking>> items;  ///< guarded by mutex
};

/// Reads every agent handed over in `started` on this thread, waiting on all their channels at
/// once, until each of `hosts` settled: an answer goes to `answers` and its session into
/// `agents` at once (their heartbeat comes from there), one that gave none is closed.
void read_answers(Started& started, const std::vector<std::string>& hosts,
                  std::vector<AgentAnswer>& answers, AgentTree& agents) {
  std::vector<std::unique_ptr<Asking>> mine;
  for (size_t settled = 0; settled < hosts.size();) {
    {
      std::lock_guard lock(started.mutex);
      for (auto& a : started.items)
        mine.push_back(std::move(a));
      started.items.clear();
    }
    std::vector<pollfd> fds;
    int ms = kPollMs;
    for (auto it = mine.begin(); it != mine.end();) {
      Asking& a = **it;
      std::optional<AgentAnswer> got;
      try {
        if (a.ask) got = a.ask->step();
      } catch (const ddl::ssh::Error& e) {
        got = AgentAnswer{std::nullopt, e.what()};
      }
      if (a.ask && !got) {
        if (a.ask->fd() >= 0) fds.push_back({a.ask->fd(), POLLIN, 0});
        ms = std::min(a.ask->fd() >= 0 ? a.ask->wait_ms() : 2, ms);
        ++it;
        continue;
      }
      a.ask.reset();
      if (got) answers[a.index] = std::move(*got);
      if (answers[a.index].output && a.kept.session) agents.put(hosts[a.index], std::move(a.kept));
      drop(a.kept);
      it = mine.erase(it);
      ++settled;
    }
    if (settled < hosts.size()) ::poll(fds.data(), fds.size(), ms);
  }
}

}  // namespace

void AgentTree::put(const std::string& host, Kept kept) {
  Kept old;  // closed outside the lock
  const std::lock_guard lock(mutex_);
  if (auto it = kept_.find(host); it != kept_.end()) old = std::move(it->second);
  Kept& now = kept_[host] = std::move(kept);
  if (beat_) beat_(now);  // at once: the agent may have waited through other hosts' logins
}

AgentTree::Kept AgentTree::take(const std::string& host) {
  const std::lock_guard lock(mutex_);
  auto it = kept_.find(host);
  if (it == kept_.end()) return {};
  Kept kept = std::move(it->second);
  kept_.erase(it);
  return kept;
}

bool AgentTree::has(const std::string& host) const {
  const std::lock_guard lock(mutex_);
  const auto it = kept_.find(host);
  return it != kept_.end() && it->second.session != nullptr;
}

std::size_t AgentTree::size() const {
  const std::lock_guard lock(mutex_);
  return kept_.size();
}

std::vector<TreeHost> AgentTree::tree() const {
  const std::lock_guard lock(mutex_);
  return tree_;
}

void AgentTree::set_tree(std::vector<TreeHost> tree) {
  const std::lock_guard lock(mutex_);
  tree_ = std::move(tree);
}

void AgentTree::keep_alive(std::function<void(Kept&)> beat, std::chrono::milliseconds interval) {
  std::lock_guard lock(mutex_);
  beat_ = std::move(beat);
  interval_ = interval;
  if (beater_.joinable()) return;
  // Made with every signal blocked, which it keeps: ddlrun takes SIGINT and the like with
  // sigtimedwait() on threads that block them, and a thread that did not would get them.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  beater_ = std::thread([this] { beat_all(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void AgentTree::beat_all() {
  std::unique_lock lock(mutex_);
  while (!stop_.wait_for(lock, interval_, [this] { return stopping_; })) {
    std::vector<std::string> names;
    for (const auto& [name, kept] : kept_)
      names.push_back(name);
    for (const std::string& name : names) {  // the lock taken again for each: take() waits less
      lock.unlock();
      lock.lock();
      if (stopping_) return;
      if (auto it = kept_.find(name); it != kept_.end()) beat_(it->second);
    }
  }
}

AgentTree::~AgentTree() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (beater_.joinable()) beater_.join();
}

std::vector<AgentAnswer> ask_agents(ddl::ssh::Connector& connector,
                                    const std::vector<std::string>& hosts,
                                    const ddl::ssh::Options& options, const std::string& command,
                                    AgentTree& agents, Ask ask) {
  std::vector<AgentAnswer> answers(hosts.size());
  Started started;
  std::jthread logins([&] {
    on_pool(hosts.size(), options.max_parallel, [&](size_t i) {
      auto a = std::make_unique<Asking>();
      a->index = i;
      try {
        a->kept.session = connector.connect(hosts[i], options);
        a->kept.channel = a->kept.session->exec(command);
        a->kept.command = command;
        a->ask = std::make_unique<InventoryAsk>(a->kept, options.command_timeout, ask);
      } catch (const ddl::ssh::Error& e) {
        drop(a->kept);
        answers[i].error = e.what();
      }
      std::lock_guard lock(started.mutex);
      started.items.push_back(std::move(a));
    });
  });
  read_answers(started, hosts, answers, agents);
  return answers;
}

std::vector<StartedHost> start_subtree(AgentTree::Kept& kept, const std::string& host,
                                       const SubtreeFrame& w, std::chrono::milliseconds limit) {
  SubtreeStart start(kept, host, w);
  return start.run(limit);
}

void beat_kept(AgentTree::Kept& kept) {
  if (!kept.channel || !kept.channel->open()) return;
  const std::string beat = encode_frame(FrameType::kHeartbeat, 0, {});
  if (kept.channel->window() >= beat.size() && kept.channel->write(beat) < 0) return;
  char buf[4096];
  for (int avail = kept.channel->poll(std::chrono::milliseconds(0)); avail > 0;) {
    const int n = kept.channel->read(buf, sizeof buf, ddl::ssh::Stream::kStdout);
    if (n <= 0) break;
    kept.pending.append(buf, static_cast<size_t>(n));
    avail -= n;
  }
}

void keep_agents_alive(AgentTree& sessions) {
  sessions.keep_alive(beat_kept, kHeartbeatInterval);
}

CommandOutput inventory_answer_output(int id, const std::string& payload) {
  if (id == 0) return {0, {}, payload, {}};
  return {1, {}, {}, "ddlrun: error: " + payload + "\n"};
}

std::chrono::milliseconds subtree_start_limit(const ddl::ssh::Options& ssh, int levels) {
  return (ssh.connect_timeout * 4 + std::chrono::seconds(5) + ssh.command_timeout) *
         std::max(levels, 1);
}

}  // namespace ddl::launcher::ssh
