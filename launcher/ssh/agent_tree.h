#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "launcher/ssh/protocol.h"
#include "launcher/ssh/tree.h"
#include "ssh/session.h"

namespace ddl::launcher::ssh {

// ddlrun's agents: the one way it talks to other hosts. Before planning, ddlrun logs in to each
// first-level host of the launch tree (tree.h), runs its agent and asks it for the inventory
// (ask_agents), keeps each session with its agent running in an AgentTree, and sends it its
// subtree frame (W) at once, each host below with a command (TreeHost::command: the agent, asked
// for its inventory too). Their answers come back up (V, Hw) and ddlrun reads its inventories
// from them; --probe-links measures through the same agents (tree_links.h); the other frames
// (the agents' hellos) wait in the kept channels, and the launch (ssh.cc) takes the whole tree
// over as it is: the job goes down the same channels, and a host of the tree without ranks
// gets none. A dry run closes them (every agent exits).

/// The agents ddlrun started: the launch tree they were started along, and each first-level
/// host's session with its agent running, by host name. Thread-safe. Destroying it closes what
/// was not taken: every agent exits.
class AgentTree {
 public:
  /// One first-level host's session.
  struct Kept {
    std::unique_ptr<ddl::ssh::Session> session;
    /// The channel its agent runs in (null where none runs), and what its agent sent that no
    /// one read yet (its hello, the start of its next frame).
    std::unique_ptr<ddl::ssh::Channel> channel;
    std::string pending;
    std::string command;  ///< what runs on `channel`, for messages
    /// The payload of the subtree frame sent down `channel` (the hosts below were started
    /// through it); empty: none went.
    std::string subtree{};
    /// Why its agent, and every agent started below it, is gone (the channel and session are
    /// then null): the launch fails the host with it, logging in to none of them again.
    std::string lost{};
  };
  /// Keeps `kept` for `host`, replacing (and closing) one kept before; beats it at once when
  /// keep_alive was called.
  void put(const std::string& host, Kept kept);
  /// The session kept for `host`, removed from here; an empty Kept when there is none.
  Kept take(const std::string& host);
  /// Whether a session is kept for `host` (looked at, not taken).
  bool has(const std::string& host) const;
  /// How many are kept.
  std::size_t size() const;
  /// The launch tree the agents were started along (flat or deeper), each host's index the id
  /// its frames travel under; a host whose agent failed stays, and the launch gives it no job.
  std::vector<TreeHost> tree() const;
  void set_tree(std::vector<TreeHost> tree);
  /// From now on, every `interval` on a thread of its own, calls `beat` on each session kept
  /// at the time (ddlrun's heartbeat to the agents waiting for their job while it plans: see
  /// keep_agents_alive), until this is destroyed. Each call holds the lock, so a take() waits
  /// for one beat at most; `beat` must not block. A second call replaces `beat`. The thread
  /// blocks every signal.
  void keep_alive(std::function<void(Kept&)> beat, std::chrono::milliseconds interval);

  AgentTree() = default;
  AgentTree(const AgentTree&) = delete;
  AgentTree& operator=(const AgentTree&) = delete;
  ~AgentTree();

 private:
  void beat_all();

  mutable std::mutex mutex_;
  std::map<std::string, Kept, std::less<>> kept_;
  std::vector<TreeHost> tree_;
  std::function<void(Kept&)> beat_;
  std::chrono::milliseconds interval_{1000};
  bool stopping_ = false;
  std::condition_variable stop_;
  std::thread beater_;
};

/// What became of one host below a first-level host while its subtree started.
struct StartedHost {
  int index = 0;  ///< Host::index
  std::string name;
  std::string parent;                   ///< its tree parent's name
  std::optional<CommandOutput> output;  ///< what its command printed (V), when it came
  /// Why it did not come: the failure its tree parent saw (naming the parent), no answer in
  /// time, or a host above it that failed (unreached_text).
  std::string error;
  bool operator==(const StartedHost&) const = default;
};

/// A first-level host's agent, asked for its host's inventory before the launch (ask_agents).
struct AgentAnswer {
  /// Its answer (Hw) as the output of the probe command it replaces, or, when its command ended
  /// first or printed what is not the agent's frames (a login script's words), that command's
  /// output and exit status; either judged as a probe's. Nullopt when neither came.
  std::optional<CommandOutput> output;
  /// Why not: the login or the command's start failed (ddl::ssh::Error's reason), or no answer
  /// within the command timeout ("timed out after T waiting for 'COMMAND' to print the
  /// inventory").
  std::string error;
  /// Its command ended before it answered (`output` holds how).
  bool ended = false;
};

/// What ask_agents waits for from each agent.
enum class Ask {
  kInventory,  ///< its answer to an inventory request (Hw): the probe
  kHello,      ///< its hello alone, which stays with the frames kept for the launch
};

/// Logs in to each of `hosts` through `connector` (`options`: the config, keys, timeouts; at
/// most options.max_parallel logins at once, on threads of their own), runs `command` (ddlrun's
/// agent, `ddlrun --probe-agent`) in an exec channel and asks it for its host's inventory (Hw);
/// meanwhile the calling thread reads every started agent's stdout and stderr, waiting on all
/// their channels at once (a host slow to answer, such as a login shell that sleeps, holds no
/// thread), until each answer comes, its command ends, or options.command_timeout passes; the
/// stderr read goes before the answer's own. One answer per host, in order. The session of one
/// that answered goes into `agents` at once, with the agent's channel and the frames it sent
/// besides the answer (its hello), for the subtree's start and the launch (and ddlrun's
/// heartbeat, AgentTree::keep_alive); the others are closed. With Ask::kHello nothing is asked:
/// the answer is the agent's hello (its output empty), for the launch.
std::vector<AgentAnswer> ask_agents(ddl::ssh::Connector& connector,
                                    const std::vector<std::string>& hosts,
                                    const ddl::ssh::Options& options, const std::string& command,
                                    AgentTree& agents, Ask ask = Ask::kInventory);

/// Runs `job(i)` for i in [0, n) on at most `threads` threads (here when none can be had).
template <typename Job>
void on_pool(std::size_t n, int threads, const Job& job) {
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < n; i = next++)
      job(i);
  };
  std::vector<std::jthread> running;
  try {
    while (running.size() < std::min<std::size_t>(std::max(threads, 1), n))
      running.emplace_back(worker);
  } catch (const std::system_error&) {
    if (running.empty()) worker();
  }
}

/// Sends `w`, the subtree frame of first-level host `host`, down the agent channel kept for
/// it with an inventory request (Hw) routed to every host of `w` with a command, and reads
/// until each has answered (Hw, or V from a command that ended first) or failed (F, L; a
/// failed host's subtree with it), sending a heartbeat a second, for at most `limit` (the
/// rest then fail, "no answer within T"). The frames that are not answers stay in
/// kept.pending, and kept.subtree records `w`; when the channel ends, kept.channel is gone.
/// Once its agent said hello, `host` falling silent for w.heartbeat_timeout, or taking none of
/// the bytes waiting for it for that long (ssh::Outbox), is lost in the launch's words ("no
/// heartbeat for ...", "took no data for ..."): kept.lost says why, its channel and session
/// are closed without waiting, and the hosts still awaited fail as not reached. One
/// StartedHost per host with a command, in the tree's order.
std::vector<StartedHost> start_subtree(AgentTree::Kept& kept, const std::string& host,
                                       const SubtreeFrame& w, std::chrono::milliseconds limit);

/// ddlrun's heartbeat to the agent waiting in `kept`'s channel for its job (a beat for
/// AgentTree::keep_alive): a heartbeat frame when the remote window takes it whole,
/// and what the agent sent meanwhile read into kept.pending, without blocking. So an agent
/// neither times out while ddlrun plans the job after the probe, nor lingers once ddlrun is
/// gone: its channel then ends, or the heartbeats stop.
void beat_kept(AgentTree::Kept& kept);
/// Beats every session `sessions` keeps a heartbeat interval apart (beat_kept), from now until
/// it is destroyed; the launch takes each session out of it before its own heartbeats start.
void keep_agents_alive(AgentTree& sessions);

/// An agent's answer to an inventory request (Hw, protocol.h: `id`, `payload`) as the output of
/// the probe command it replaces: the inventory, or a failure (exit status 1) whose stderr says
/// why, as ddlrun's own probe words it.
CommandOutput inventory_answer_output(int id, const std::string& payload);

/// How long start_subtree waits for `levels` levels of hosts below the first: for each, a
/// login (connect_timeout 4 times over, plus 5 s) and the command (command_timeout).
std::chrono::milliseconds subtree_start_limit(const ddl::ssh::Options& ssh, int levels);

}  // namespace ddl::launcher::ssh
