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
    if (!log_in() || !start_agent()) return;
    try {
      while (turn()) {
      }
    } catch (const std::exception& e) {
      return report(std::string("protocol error: ") + e.what());
    }
    if (prefix_) return end_of_command();
    if (silent_) {
      session_->stop_blocking();
      return report(no_heartbeat_text(r_.spec_.heartbeat_timeout));
    }
    if (stalled_) {
      session_->stop_blocking();
      return report(took_no_data_text(r_.spec_.heartbeat_timeout, outbox_.size()) + from());
    }
    // Done, and then the end of its agent: but an agent leaves after its subtree, so one
    // that did not exit 0 left hosts below it behind.
    if (!r_.gone() && (!done_ || channel_->exit_status() != 0)) report(closed_reason());
  }

 private:
  std::string from() const { return from_parent_text(r_.self_); }

  bool log_in() {
    r_.logins_.acquire();
    try {
      session_ = r_.connector_.connect(c_.host.name, r_.spec_.ssh);
    } catch (const std::exception& e) {
      r_.logins_.release();
      report(e.what() + from());
      return false;
    }
    r_.logins_.release();
    return true;
  }

  bool start_agent() {
    command_ = c_.host.command.empty()
                   ? ::ddl::launcher::shell_join({r_.spec_.ddlrun_path}) + " --agent"
                   : c_.host.command;
    prefix_ = !c_.host.command.empty();
    prefix_deadline_ = Clock::now() + r_.spec_.ssh.command_timeout;
    try {
      channel_ = session_->exec(command_);
    } catch (const ddl::ssh::Error&) {
      report("cannot run '" + command_ + "' on " + session_->endpoint() + ": " + session_->error() +
             from());
      return false;
    }
    SubtreeFrame mine;
    mine.ssh = r_.spec_.ssh;
    mine.ddlrun_path = r_.spec_.ddlrun_path;
    mine.ddlrun_address = r_.spec_.ddlrun_address;
    mine.heartbeat_timeout = r_.spec_.heartbeat_timeout;
    mine.children = c_.host.children;
    outbox_.add(encode_frame(FrameType::kSubtree, 0, encode(mine)));
    outbox_.excuse();
    last_heard_ = Clock::now();
    next_beat_ = Clock::now();
    return true;
  }

  /// One turn: false once the conversation is over.
  bool turn() {
    if (r_.gone()) return false;
    {
      std::lock_guard lock(r_.mutex_);
      outbox_.add(c_.down);
      c_.down.clear();
    }
    if (Clock::now() >= next_beat_) {
      outbox_.add(encode_frame(FrameType::kHeartbeat, 0, {}));
      next_beat_ = Clock::now() + kHeartbeatInterval;
    }
    if (!write_failed_ && !outbox_.write(*channel_)) write_failed_ = true;
    const bool open = pump();
    forward();
    if (prefix_ && (!open || Clock::now() >= prefix_deadline_)) return false;
    if (hello_ && Clock::now() - last_heard_ > r_.spec_.heartbeat_timeout) {
      silent_ = true;
      return false;
    }
    if (hello_ && !write_failed_ && outbox_.stalled(r_.spec_.heartbeat_timeout)) {
      stalled_ = true;
      return false;
    }
    return open;
  }

  /// Reads what the child sent (stdout: frames; stderr: lines, passed up as notes); false once
  /// its channel has ended.
  bool pump() {
    int avail = channel_->poll(std::chrono::milliseconds(kPollMs));
    if (avail == ddl::ssh::Channel::kError) return false;
    bool eof = avail == ddl::ssh::Channel::kEof;
    char buf[65536];
    read_stderr(buf, sizeof buf);  // first: what a command said goes with its output
    while (avail > 0) {
      const int n = channel_->read(buf, sizeof buf, ddl::ssh::Stream::kStdout);
      if (n <= 0) {
        eof = eof || n == ddl::ssh::Channel::kEof || n == ddl::ssh::Channel::kError;
        break;
      }
      last_heard_ = Clock::now();
      take(std::string_view(buf, static_cast<size_t>(n)));
    }
    read_stderr(buf, sizeof buf);
    return !(eof || channel_->eof());
  }

  /// The child's stderr: its command's, kept with its output, then its agent's, passed up.
  void read_stderr(char* buf, size_t size) {
    for (int n; (n = channel_->read(buf, size, ddl::ssh::Stream::kStderr)) > 0;) {
      last_heard_ = Clock::now();
      if (!prefix_) {
        err_line_.append(buf, static_cast<size_t>(n));
      } else if (printed_.err.size() < kMaxCommandErr) {
        printed_.err.append(buf, std::min<size_t>(n, kMaxCommandErr - printed_.err.size()));
      }
    }
    pass_stderr_lines();
  }

  /// Bytes of the child's stdout: its agent's frames, kept too until its hello while it runs
  /// a command (its output, should it end first).
  void take(std::string_view bytes) {
    if (prefix_ && printed_.out.size() < kMaxCommandOut) {
      printed_.out.append(bytes.substr(0, kMaxCommandOut - printed_.out.size()));
    }
    reader_.feed(bytes);
  }

  /// The command ended, or said no hello in time, before its agent began: all it printed
  /// and how it ended go up (V), or that it timed out (F).
  void end_of_command() {
    if (r_.gone()) return;
    if (Clock::now() >= prefix_deadline_ && !channel_->eof()) {
      session_->stop_blocking();
      return report("timed out after " + base::seconds_text(r_.spec_.ssh.command_timeout) +
                    " waiting for '" + command_ + "' to print its output" + from());
    }
    printed_.exit_status = channel_->exit_status();
    printed_.signal = channel_->exit_signal();
    send_up(route(c_.host.index, encode_frame(FrameType::kOutput, 0, encode(printed_))));
  }

  /// The child agent's own stderr, a line at a time, as its notes (R frames of rank -1).
  void pass_stderr_lines() {
    std::string up;
    for (size_t nl; (nl = err_line_.find('\n')) != std::string::npos;) {
      up += encode_frame(FrameType::kStderr, -1, c_.host.name + ": " + err_line_.substr(0, nl + 1));
      err_line_.erase(0, nl + 1);
    }
    if (!up.empty()) send_up(route(c_.host.index, up));
  }

  /// The child's frames, up: its own wrapped as from it, routed ones and L as they are.
  void forward() {
    std::string up;
    std::string own;
    while (std::optional<Frame> f = reader_.next()) {
      if (f->type == FrameType::kHeartbeat) continue;
      if (f->type == FrameType::kHello) {
        hello_ = true;
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
    last_heard_ = Clock::now();
    if (last_heard_ - start > std::chrono::milliseconds(kPollMs)) outbox_.excuse();
  }

  std::string closed_reason() {
    std::string why = "the connection to its agent closed";
    if (write_failed_) why = "lost the connection to " + session_->endpoint();
    if (!err_line_.empty()) why += " (" + err_line_ + ")";
    if (!hello_) {
      why = "'" + command_ + "' exited before it said hello";
      const int status = channel_->exit_status();
      if (status == 127) {
        why += " (exit status 127: ddlrun is not installed at " + r_.spec_.ddlrun_path + " there)";
      } else if (status >= 0) {
        why += " (exit status " + std::to_string(status) + ")";
      }
    }
    return why + from();
  }

  /// What became of the child: before its hello a failure to start it (F, as from it); after,
  /// lost (L).
  void report(const std::string& why) {
    if (hello_) {
      send_up(encode_frame(FrameType::kLost, c_.host.index, why));
    } else {
      send_up(route(c_.host.index, encode_frame(FrameType::kFailure, 1, why)));
    }
  }

  Relay& r_;
  Child& c_;
  std::unique_ptr<ddl::ssh::Session> session_;
  std::unique_ptr<ddl::ssh::Channel> channel_;  ///< destroyed before session_
  std::string command_;
  FrameReader reader_;
  /// Frames the remote window or the socket could not take yet, and when they last moved.
  ddl::ssh::Outbox outbox_;
  std::string err_line_;  ///< the child agent's stderr, up to its next newline
  Clock::time_point last_heard_;
  Clock::time_point next_beat_;
  bool hello_ = false;
  bool done_ = false;
  bool silent_ = false;
  bool stalled_ = false;  ///< took none of outbox_ for the heartbeat deadline
  bool write_failed_ = false;
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
