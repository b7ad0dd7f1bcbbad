#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ssh/session.h"

namespace ddl::launcher::ssh {

// The launch tree (--tree-width K): beyond K hosts ddlrun logs in to the first level only, and
// each agent there logs in to its children and runs their agents, and so on down. Frames of
// the agent protocol (protocol.h) travel along it routed (T) and the interior agents watch
// their children's heartbeats (L when one is lost). The shape is decided here; the relay in
// each agent is relay.h, ddlrun's side ssh.cc.

/// A host of the launch tree and the hosts below it.
struct TreeHost {
  int index = 0;  ///< Host::index
  std::string name;
  std::vector<TreeHost> children;
  /// What its tree parent runs there instead of `ddlrun --agent`: the agent under another name
  /// (ddlrun's probe: `ddlrun --probe-agent`, asked for the inventory by a routed Hw), whose
  /// output before its hello goes up (V) should it end first. Empty: the agent alone.
  std::string command{};
  bool operator==(const TreeHost&) const = default;
};

/// ddlrun's threads for the launch's conversations, whatever the number of hosts (ssh.cc): at
/// most kTalkThreads talkers, one for each kHostsPerTalker first-level hosts, which drive
/// several each (the agents' logins before them run on at most ssh.max_parallel threads).
constexpr int kTalkThreads = 8;
constexpr int kHostsPerTalker = 8;
/// How deep a subtree frame may nest (a fan-out of 2 reaches 2^32 hosts well before).
constexpr int kMaxTreeDepth = 32;

/// A launch tree deeper than kMaxTreeDepth (--tree-width 1 over more than 32 hosts): what()
/// says how deep, and the width that fits.
class TreeTooDeep : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The launch tree of `hosts` (index and name, in the job's order) with at most `width`
/// children under ddlrun and under each host: the first level, each with its subtree. Flat
/// (every host on the first level, none below) when `width` is 0 or there are at most `width`
/// hosts. Throws TreeTooDeep when it would be deeper than kMaxTreeDepth levels.
std::vector<TreeHost> launch_tree(const std::vector<std::pair<int, std::string>>& hosts, int width);
/// Whether `host` is anywhere in `level` or below.
bool in_tree(const std::vector<TreeHost>& level, const std::string& host);
/// The names of every host of `tree`, at every level, in the tree's order.
std::vector<std::string> tree_names(const std::vector<TreeHost>& tree);
/// How many hosts lie below `h`, at every level.
int hosts_below(const TreeHost& h);
/// Levels of hosts: 1 when flat, 0 when there are none.
int tree_depth(const std::vector<TreeHost>& level);

/// What an interior agent needs to start its children's agents (W): how to log in (the ssh
/// settings of ddlrun), ddlrun's path, the address of ddlrun's host as
/// the first level saw it ("" for the first level: its own $SSH_CONNECTION), the heartbeat
/// deadline, and its children with their subtrees. Never the job's token: that comes in the
/// job frame (J), down the channels.
struct SubtreeFrame {
  ddl::ssh::Options ssh;
  std::string ddlrun_path;
  std::string ddlrun_address;
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::vector<TreeHost> children;
};
std::string encode(const SubtreeFrame& f);
/// Throws std::runtime_error("malformed subtree frame: ...") on short, long or too deep input.
SubtreeFrame decode_subtree(std::string_view payload);

/// The subtree frame a first-level host's agent gets: ddlrun's ssh settings without the kept
/// sessions, the config and known_hosts paths made absolute (the hosts below do not start in
/// ddlrun's directory), ddlrun's path, the heartbeat deadline and `children`.
SubtreeFrame subtree_frame(const ddl::ssh::Options& ssh, const std::string& ddlrun_path,
                           std::chrono::milliseconds heartbeat_timeout,
                           std::vector<TreeHost> children);

/// What a host's command (TreeHost::command) printed when it ended before its agent began (V):
/// all it printed and how it ended (exit_status -1: without a status; signal: "KILL"); or, as
/// ddlrun reads an agent's answer to an inventory request (inventory_answer_output), the
/// inventory with exit_status 0.
struct CommandOutput {
  int exit_status = 0;
  std::string signal;
  std::string out;
  std::string err;
  bool operator==(const CommandOutput&) const = default;
};
std::string encode(const CommandOutput& o);
/// Throws std::runtime_error("malformed command output frame: ...").
CommandOutput decode_command_output(std::string_view payload);

/// A routed frame (T) carrying `frames` (whole frames) for or from host `host`.
std::string route(int host, std::string_view frames);

/// Why a host with `below` hosts under it in the tree was lost: `why`, and, when it has any,
/// "; the N hosts below it in the launch tree are lost with it".
std::string tree_lost_text(const std::string& why, int below);
/// Why a host silent for the heartbeat deadline `deadline` is lost, as ddlrun and a tree parent
/// say it: "no heartbeat for 10 s (the host is unreachable, or its agent is stopped or hung)".
std::string no_heartbeat_text(std::chrono::milliseconds deadline);
/// Why a host whose channel took none of the `waiting` bytes for it for the heartbeat deadline
/// `deadline` (ssh::Outbox::stalled) is lost, as ddlrun and a tree parent say it: "took no data
/// for 10 s (N bytes wait for it: the host is unreachable, or its agent is stopped or hung)".
std::string took_no_data_text(std::chrono::milliseconds deadline, std::size_t waiting);
/// What a host below a lost one is lost with: "lost with its tree parent PARENT".
std::string lost_with_parent_text(const std::string& parent);
/// What follows a failure seen by a host's tree parent: " (from PARENT, its parent in the
/// launch tree)".
std::string from_parent_text(const std::string& parent);
/// Why a host was not reached while its subtree started, because a host above it failed: "not
/// reached: ABOVE, above it in the launch tree, failed".
std::string unreached_text(const std::string& above);

}  // namespace ddl::launcher::ssh
