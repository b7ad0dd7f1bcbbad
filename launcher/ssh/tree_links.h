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

#include "launcher/ssh/protocol.h"
#include "launcher/ssh/tree.h"
#include "mapper/link_probe.h"
#include "ssh/session.h"

namespace ddl::launcher::ssh {

// --probe-links along the launch tree (tree.h): ddlrun measures the links between the hosts
// without logging in to any of them again. Each host's agent, started by the probe and waiting
// for its job, runs the host's link agent (mapper::run_link_agent) in a thread of its own
// (LinkAgentThread) when the first N frame comes (protocol.h), and passes its lines both ways
// in N frames, routed (T) like every other frame of that host. On ddlrun's side TreeLinks
// drives the first level's kept sessions and gives mapper::probe_links a LinkChannel per
// host. The token travels only in those lines, never on a command line.

/// An agent's link agent: run_link_agent over a socket pair, in a thread, its lines sent up.
class LinkAgentThread {
 public:
  /// Sends whole frames up the agent's channel; false once it is gone.
  using Up = std::function<bool(std::string_view frames)>;
  /// `seen_from`: where ddlrun's host logged in from as the first level saw it (its greeting's
  /// CLIENT; "": this host's $SSH_CONNECTION).
  LinkAgentThread(Up up, std::string seen_from);
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
  int fds_[2] = {-1, -1};  ///< [0]: ours; [1]: the link agent's
  std::thread agent_;
  std::thread reader_;
  std::atomic<int> status_{0};  ///< run_link_agent's, written before its end of the pair shuts
  std::atomic<bool> stopped_{false};  ///< stop() was called: no N starts it again
};

/// ddlrun's side: channels to the link agents of the hosts of `tree` (the probe's launch
/// tree, LaunchOptions::probe_tree), through the first level's sessions that `sessions` keeps
/// with their agents. While it lives it holds those sessions (taken from `sessions`), drives
/// them on one thread of its own (a heartbeat a second down each, the frames up sorted: N
/// lines to their hosts' channels, the rest kept in Kept::pending for the launch), and gives
/// each back when destroyed, once every link agent it started has ended (or a second
/// passed). A host is lost (its channel says "the link agent ended: WHY") when an L names it
/// or a host above it, its F comes, its first-level session closes or falls silent for the
/// heartbeat deadline, or its frames cannot be read.
class TreeLinks {
 public:
  TreeLinks(ddl::ssh::KeptSessions& sessions, const std::vector<TreeHost>& tree,
            std::chrono::milliseconds heartbeat_timeout);
  ~TreeLinks();
  TreeLinks(const TreeLinks&) = delete;
  TreeLinks& operator=(const TreeLinks&) = delete;

  /// The channel to `host`'s link agent, which the first N frame starts on `port`; null when
  /// `host` is not in the tree or its first-level session was not kept.
  std::unique_ptr<mapper::LinkChannel> open(const std::string& host, int port);

 private:
  struct Conn;
  struct Node;
  class Channel;
  friend class Channel;

  void pump();
  bool turn(Conn& c);
  void sort(Conn& c);
  void routed(Conn& c, int host, std::string_view frames);
  void link_frame(int host, const Frame& f);
  void lose(int host, const std::string& why);
  void lose_conn(Conn& c, const std::string& why);
  void send(int host, const std::string& frame);
  std::string line(int host, std::chrono::milliseconds timeout);
  void close_agents();

  ddl::ssh::KeptSessions& sessions_;
  std::chrono::milliseconds heartbeat_timeout_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::map<int, Node> nodes_;              ///< by the tree's index
  std::map<std::string, int> by_name_;     ///< the hosts the channels reach
  std::mutex mutex_;                       ///< guards nodes_ and each Conn's out
  std::condition_variable changed_;
  bool stopping_ = false;
  std::thread pump_;
};

}  // namespace ddl::launcher::ssh
