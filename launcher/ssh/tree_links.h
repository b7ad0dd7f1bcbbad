#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/check.h"
#include "launcher/ssh/agent_tree.h"
#include "launcher/ssh/protocol.h"
#include "launcher/ssh/tree.h"
#include "ssh/session.h"

namespace ddl::launcher::ssh {

// --probe-links along the launch tree (tree.h): ddlrun measures the links between the hosts
// without logging in to any of them again. Each host's agent, started by the probe and waiting
// for its job, runs the host's link agent (mapper::run_link_agent, which ddlrun passes in:
// launcher/ never sees mapper/) in a thread of its own (LinkAgentThread) when the first N frame
// comes (protocol.h), and passes its lines both ways in N frames, routed (T) like every other
// frame of that host. On ddlrun's side TreeLinks drives the first level's kept sessions and
// speaks to each host's link agent in lines; ddlrun wraps it as mapper::LinkChannel
// (ddlrun/plan/agents.h). The token travels only in those lines, never on a command line.

/// What runs a host's link agent in the agent's process: speaks its lines on `in_fd` and
/// `out_fd`, listens on TCP port `port` (0: any free one), greets with `seen_from` as the
/// address ddlrun's host logged in from ("": $SSH_CONNECTION's); returns its exit status.
using LinkAgentRunner =
    std::function<int(int in_fd, int out_fd, int port, const std::string& seen_from)>;

/// A host's link agent that TreeLinks cannot reach (any more); what() in the words of the
/// ssh path's: "the link agent ended: WHY", "the link agent did not answer in time".
using TreeLinkError = base::Error<struct TreeLinkErrorTag>;

/// An agent's link agent: run_link_agent over a socket pair, in a thread, its lines sent up.
class LinkAgentThread {
 public:
  /// Sends whole frames up the agent's channel; false once it is gone.
  using Up = std::function<bool(std::string_view frames)>;
  /// `seen_from`: where ddlrun's host logged in from as the first level saw it (its greeting's
  /// CLIENT; "": this host's $SSH_CONNECTION); `run`: the link agent (null: none here, and
  /// the first N frame is answered that it ended, saying so).
  LinkAgentThread(Up up, std::string seen_from, LinkAgentRunner run);
  /// stop().
  ~LinkAgentThread();
  /// An N frame from ddlrun (`port`: its id; `line`: its payload): the first starts the link
  /// agent on `port`; a line is passed on to it.
  void take(int port, const std::string& line);
  /// Ends the link agent's conversation (it returns) and waits for its threads.
  void stop();

 private:
  /// Reads the link agent's lines and sends each up; then that it ended.
  void read_lines();

  Up up_;
  std::string seen_from_;
  LinkAgentRunner run_;
  int fds_[2] = {-1, -1};  ///< [0]: ours; [1]: the link agent's
  std::thread agent_;
  std::thread reader_;
  std::atomic<int> status_{0};  ///< run_link_agent's, written before its end of the pair shuts
  std::atomic<bool> stopped_{false};  ///< stop() was called: no N starts it again
};

/// ddlrun's side: the lines of the link agents of the hosts of the agents' tree, through the
/// first level's sessions that `sessions` keeps with their agents. While it lives it holds those
/// sessions (taken from `sessions`), drives them on one thread of its own (a heartbeat a second
/// down each, the frames up sorted: N lines to their hosts, the rest kept in Kept::pending for the
/// launch), and gives each back when destroyed, once every link agent it started has ended (or a
/// second passed). A host is lost (TreeLinkError "the link agent ended: WHY") when an L names it or
/// a host above it, its F comes, its first-level session closes, fails, falls silent for the
/// heartbeat deadline or takes none of the bytes waiting for it for that deadline (ssh::Outbox, in
/// the launch's words: "took no data for ..."), or its frames cannot be read; the hosts below a
/// lost one are "lost with its tree parent P". A first-level session so lost goes back closed, with
/// why in Kept::lost.
class TreeLinks {
 public:
  TreeLinks(AgentTree& sessions, std::chrono::milliseconds heartbeat_timeout);
  ~TreeLinks();
  TreeLinks(const TreeLinks&) = delete;
  TreeLinks& operator=(const TreeLinks&) = delete;

  /// Starts `host`'s link agent on `port` (the first N frame); its id for send() and line(),
  /// or -1 when `host` is not in the tree or its first-level session was not kept. Throws
  /// TreeLinkError when it is lost.
  int open(const std::string& host, int port);
  /// Sends one line to host `id`'s link agent. Throws TreeLinkError when it is lost.
  void send(int id, const std::string& line);
  /// The next line host `id`'s link agent printed, waiting at most `timeout`. Throws
  /// TreeLinkError when it is lost, has ended, or said nothing in time.
  std::string line(int id, std::chrono::milliseconds timeout);
  /// Why host `id` is lost ("the link agent ended: WHY"), without waiting; "" while it is not.
  std::string gone(int id);

 private:
  struct Conn;
  struct Node;

  void pump();
  void turn(Conn& c);
  bool write(Conn& c);
  bool read(Conn& c);
  void sort(Conn& c);
  /// `host` when it is below `c`'s first-level host; else throws (a protocol error).
  int below(const Conn& c, int host) const;
  void routed(Conn& c, int host, std::string_view frames);
  void link_frame(int host, const Frame& f);
  void lose(int host, const std::string& why);
  void lose_conn(Conn& c, const std::string& why);
  void send_frame(int host, const std::string& frame);
  void await_ends();

  AgentTree& sessions_;
  std::chrono::milliseconds heartbeat_timeout_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::map<int, Node> nodes_;           ///< by the tree's index
  std::map<std::string, int> by_name_;  ///< the hosts it reaches
  std::mutex mutex_;                    ///< guards each Node's state and each Conn's out
  std::condition_variable changed_;
  bool stopping_ = false;
  std::thread pump_;
};

}  // namespace ddl::launcher::ssh
