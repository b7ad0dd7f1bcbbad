// An interior agent's relay along the launch tree (relay.h, tree.h).
//
// How it works: one thread per child (an agent has at most --tree-width of them). Each logs in from
// this host with ddlrun's ssh settings (the subtree frame's; at most ssh.max_parallel logins at
// once), runs `ddlrun --agent` there and sends it its own subtree frame, then talks: each turn it
// writes what is due down (frames routed to that child or below it, and a heartbeat a second) as
// far as the remote window and the socket take (the rest waits for the next turn), reads what the
// child sent and passes it up: the child's own frames wrapped as routed from the child (T), frames
// already routed (from further down) and lost-host notes (L) unchanged. The child's heartbeats stop
// here: this agent's own heartbeat speaks for its subtree, and a silent child is this agent's to
// name. Upward writes block while the channel up is full, and a thread that blocks reads no more
// from its child, so ssh's window holds the child back in turn (bounded buffers, output
// back-pressure down the tree); the time spent blocked does not count as the child's silence. A
// child that fails before its hello is reported as that host's failure (F, routed); after its
// hello, a child silent for the heartbeat deadline, one that takes none of what waits for it for as
// long (ssh::Outbox: no byte moves towards it, however slowly; the head's own rule for the first
// level, "took no data for ..."), or whose channel ends before it said done, is reported lost (L).
// Either way its channel closes, so its agent, and below it every agent of its subtree, loses its
// parent and stops its ranks (protocol.h).
// A child with a command of its own (TreeHost::command: ddlrun's agent named as its probe,
// whose inventory request comes routed from ddlrun) runs that instead: its stdout is frames
// from the start, and until its agent's hello what it prints is kept too, so that a command
// that ends first sends up all it printed and how it ended (V), and one that says no hello
// within the command timeout is the child's failure (F).

#include "launcher/ssh/relay.h"

#include <algorithm>
#include <chrono>

#include "base/text.h"
#include "launcher/external.h"
#include "launcher/ssh/agent_link.h"
#include "launcher/ssh/protocol.h"

namespace ddl::launcher::ssh {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 20;
constexpr size_t kMaxCommandOut = size_t{64} << 10;  // before its hello: a login script's words
constexpr size_t kMaxCommandErr = size_t{64} << 10;

void collect(const TreeHost& h, std::vector<int>& out) {
  out.push_back(h.index);
  for (const TreeHost& c : h.children)
    collect(c, out);
}
}  // namespace

struct Relay::Child {
  TreeHost host;
  std::vector<int> below;  ///< sorted indices of its subtree, itself included
  std::string down;        ///< frames for it, guarded by Relay::mutex_
};

Relay::Relay(SubtreeFrame spec, std::string self, Up up, ddl::ssh::Connector& connector)
    : spec_(std::move(spec)),
      self_(std::move(self)),
      up_(std::move(up)),
      connector_(connector),
      logins_(std::max(spec_.ssh.max_parallel, 1)) {
  for (TreeHost& h : spec_.children) {
    auto c = std::make_unique<Child>();
    collect(h, c->below);
    std::sort(c->below.begin(), c->below.end());
    c->host = std::move(h);
    children_.push_back(std::move(c));
  }
  spec_.children.clear();
}

Relay::~Relay() {
  upstream_gone();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

Relay::Child* Relay::child_for(int host) {
  for (auto& c : children_) {
    if (std::binary_search(c->below.begin(), c->below.end(), host)) return c.get();
  }
  return nullptr;
}

bool Relay::down(int host, std::string_view frames) {
  Child* c = child_for(host);
  if (c == nullptr) return false;
  std::lock_guard lock(mutex_);
  if (c->host.index == host) {
    c->down.append(frames);
  } else {
    c->down += route(host, frames);
  }
  return true;
}

void Relay::broadcast(std::string_view frames) {
  std::lock_guard lock(mutex_);
  for (auto& c : children_)
    c->down.append(frames);
}

void Relay::upstream_gone() {
  {
    std::lock_guard lock(mutex_);
    gone_ = true;
  }
  changed_.notify_all();
}

void Relay::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return running_ == 0 || gone_; });
}

// One child's conversation, on its own thread:
//   log in -> run its agent and send it its subtree frame -> turns until its channel ends,
//   it falls silent, or the channel up is gone -> say what became of it (F before its hello,
//   L after, unless it said done).
class Relay::Talk {
 public:
  Talk(Relay& r, Child& c) : r_(r), c_(c) {}

  void run() {
    if (!start_agent(log_in())) return;
    try {
      while (turn()) {
      }
    } catch (const std::exception& e) {
      return report(std::string("protocol error: ") + e.what());
    }
    if (prefix_) return end_of_command();
    if (r_.gone()) return;
    const std::chrono::milliseconds deadline = r_.spec_.heartbeat_timeout;
    if (const std::string why = link_->silence(deadline); !why.empty()) {
      link_->close_now();
      return report(why);
    }
    if (const std::string why = link_->stall(deadline); !why.empty()) {
      link_->close_now();
      return report(why + from());
    }
    // Done, and then the end of its agent: but an agent leaves after its subtree, so one
    // that did not exit 0 left hosts below it behind.
    if (!done_ || link_->channel().exit_status() != 0)
      report(link_->closed_reason(r_.spec_.ddlrun_path) + from());
  }

 private:
  std::string from() const { return from_parent_text(r_.self_); }

  std::unique_ptr<ddl::ssh::Session> log_in() {
    r_.logins_.acquire();
    std::unique_ptr<ddl::ssh::Session> session;
    try {
      session = r_.connector_.connect(c_.host.name, r_.spec_.ssh);
    } catch (const std::exception& e) {
      report(e.what() + from());
    }
    r_.logins_.release();
    return session;
  }

  /// Runs the child's agent (or its command) on `session` and sends it its subtree frame.
  bool start_agent(std::unique_ptr<ddl::ssh::Session> session) {
    if (!session) return false;
    AgentTree::Kept kept;
    kept.command = c_.host.command.empty()
                       ? ::ddl::launcher::shell_join({r_.spec_.ddlrun_path}) + " --agent"
                       : c_.host.command;
    prefix_ = !c_.host.command.empty();
    prefix_deadline_ = Clock::now() + r_.spec_.ssh.command_timeout;
    try {
      kept.channel = session->exec(kept.command);
    } catch (const ddl::ssh::Error&) {
      report("cannot run '" + kept.command + "' on " + session->endpoint() + ": " +
             session->error() + from());
      return false;
    }
    kept.session = std::move(session);
    link_ = std::make_unique<AgentLink>(std::move(kept));
    if (prefix_) link_->copy_stdout(&printed_.out, kMaxCommandOut);
    SubtreeFrame mine;
    mine.ssh = r_.spec_.ssh;
    mine.ddlrun_path = r_.spec_.ddlrun_path;
    mine.ddlrun_address = r_.spec_.ddlrun_address;
    mine.heartbeat_timeout = r_.spec_.heartbeat_timeout;
    mine.children = c_.host.children;
    link_->send(encode_frame(FrameType::kSubtree, 0, encode(mine)));
    link_->excuse();
    return true;
  }

  /// One turn: false once the conversation is over.
  bool turn() {
    if (r_.gone()) return false;
    {
      std::lock_guard lock(r_.mutex_);
      link_->send(c_.down);
      c_.down.clear();
    }
    read_stderr();  // first: what a command said goes with its output
    const bool open = link_->turn(std::chrono::milliseconds(kPollMs));
    read_stderr();
    forward();
    if (prefix_ && (!open || Clock::now() >= prefix_deadline_)) return false;
    return open && link_->lost_why(r_.spec_.heartbeat_timeout).empty();
  }

  /// The child's stderr: its command's, kept with its output, then its agent's, passed up a
  /// line at a time as its notes (R frames of rank -1).
  void read_stderr() {
    link_->read_stderr();
    if (prefix_) {
      std::string& err = link_->err();
      printed_.err.append(err, 0, kMaxCommandErr - std::min(kMaxCommandErr, printed_.err.size()));
      err.clear();
      return;
    }
    std::string up;
    for (std::string line; !(line = link_->take_line()).empty();)
      up += encode_frame(FrameType::kStderr, -1, c_.host.name + ": " + line);
    if (!up.empty()) send_up(route(c_.host.index, up));
  }

  /// The command ended, or said no hello in time, before its agent began: all it printed
  /// and how it ended go up (V), or that it timed out (F).
  void end_of_command() {
    if (r_.gone()) return;
    if (Clock::now() >= prefix_deadline_ && !link_->channel().eof()) {
      link_->close_now();
      return report("timed out after " + base::seconds_text(r_.spec_.ssh.command_timeout) +
                    " waiting for '" + link_->command() + "' to print its output" + from());
    }
    printed_.exit_status = link_->channel().exit_status();
    printed_.signal = link_->channel().exit_signal();
    send_up(route(c_.host.index, encode_frame(FrameType::kOutput, 0, encode(printed_))));
  }

  /// The child's frames, up: its own wrapped as from it, routed ones and L as they are.
  void forward() {
    std::string up;
    std::string own;
    while (std::optional<Frame> f = link_->next()) {
      if (f->type == FrameType::kHeartbeat) continue;
      if (f->type == FrameType::kHello) {
        link_->said_hello();
        link_->copy_stdout(nullptr, 0);
        prefix_ = false;  // its agent began
        printed_ = {};
      }
      if (f->type == FrameType::kDone) done_ = true;
      std::string bytes = encode_frame(f->type, f->id, f->payload);
      if (f->type == FrameType::kRouted || f->type == FrameType::kLost) {
        check_below(f->id);
        if (!own.empty()) up += route(c_.host.index, own);
        own.clear();
        up += bytes;
      } else {
        own += bytes;
      }
    }
    if (!own.empty()) up += route(c_.host.index, own);
    if (!up.empty()) send_up(up);
  }

  /// A routed or lost frame from the child names a host below it, never itself or another
  /// (which a broken or hostile child could otherwise speak for).
  void check_below(int host) const {
    if (host == c_.host.index || !std::binary_search(c_.below.begin(), c_.below.end(), host)) {
      throw std::runtime_error("a frame for host " + std::to_string(host) +
                               ", which is not below " + c_.host.name + " in the launch tree");
    }
  }

  /// Up the agent's channel; the time it blocks there is neither the child's silence nor its
  /// taking no data (we read nothing of it meanwhile, so it may have stopped reading too).
  void send_up(const std::string& frames) {
    const Clock::time_point start = Clock::now();
    r_.up_(frames);
    if (link_ && Clock::now() - start > std::chrono::milliseconds(kPollMs)) link_->excuse();
  }

  /// What became of the child: before its hello a failure to start it (F, as from it); after,
  /// lost (L).
  void report(const std::string& why) {
    if (link_ && link_->hello()) {
      send_up(encode_frame(FrameType::kLost, c_.host.index, why));
    } else {
      send_up(route(c_.host.index, encode_frame(FrameType::kFailure, 1, why)));
    }
  }

  Relay& r_;
  Child& c_;
  std::unique_ptr<AgentLink> link_;  ///< null until its agent runs
  bool done_ = false;
  bool prefix_ = false;  ///< its command (TreeHost::command) has not said hello yet
  Clock::time_point prefix_deadline_;
  CommandOutput printed_;  ///< what the command printed so far
};

void Relay::start() {
  {
    std::lock_guard lock(mutex_);
    running_ = static_cast<int>(children_.size());
  }
  for (auto& c : children_) {
    threads_.emplace_back([this, child = c.get()] {
      {
        Talk talk(*this, *child);
        talk.run();
      }
      {
        std::lock_guard lock(mutex_);
        --running_;
      }
      changed_.notify_all();
    });
  }
}

}  // namespace ddl::launcher::ssh
