// The shape of the launch tree and its frames (tree.h).
//
// How it works: launch_tree() puts the first `width` hosts on the first level (ddlrun's own
// sessions) and deals the rest out in contiguous runs of nearly equal length, one run per
// first-level host, each run becoming that host's subtree by the same rule. A K-ary heap would
// hang every further host under the first one or two (128 hosts, K 64: one agent with 64
// children, 63 with none); equal runs keep every interior agent's share, and so the time to
// start its subtree, alike, and the depth at ceil(log_K(N)). The job's order is kept within a
// level, so host 0 (rank 0's, usually) is on the first level.

#include "launcher/ssh/tree.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "base/net/codec.h"
#include "base/text.h"
#include "launcher/ssh/protocol.h"

namespace ddl::launcher::ssh {

namespace {

using Hosts = std::vector<std::pair<int, std::string>>;

/// hosts[begin, end) under one parent: the first `width` are its children, the rest dealt out.
std::vector<TreeHost> build(const Hosts& hosts, size_t begin, size_t end, size_t width) {
  std::vector<TreeHost> level;
  const size_t n = end - begin;
  const size_t first = std::min(n, width);
  for (size_t i = 0; i < first; ++i)
    level.push_back(TreeHost{hosts[begin + i].first, hosts[begin + i].second, {}, {}});
  const size_t rest = n - first;
  size_t at = begin + first;
  for (size_t i = 0; i < first && rest > 0; ++i) {
    const size_t share = rest / first + (i < rest % first ? 1 : 0);
    level[i].children = build(hosts, at, at + share, width);
    at += share;
  }
  return level;
}

void put_host(std::string& out, const TreeHost& h) {
  base::net::put_u32(out, static_cast<uint32_t>(h.index));
  base::net::put_str(out, h.name);
  base::net::put_str(out, h.command);
  base::net::put_u32(out, static_cast<uint32_t>(h.children.size()));
  for (const TreeHost& c : h.children)
    put_host(out, c);
}

std::vector<TreeHost> get_hosts(base::net::Decoder& in, int depth) {
  if (depth > kMaxTreeDepth) {
    throw std::runtime_error("malformed subtree frame: deeper than " +
                             std::to_string(kMaxTreeDepth) + " levels");
  }
  const uint32_t n = in.count(16);
  std::vector<TreeHost> hosts(n);
  for (TreeHost& h : hosts) {
    h.index = in.i32();
    if (h.index < 0) throw std::runtime_error("malformed subtree frame: a negative host index");
    h.name = in.str();
    h.command = in.str();
    h.children = get_hosts(in, depth + 1);
  }
  return hosts;
}

/// A path as the hosts below see it: absolute (they do not start in ddlrun's directory).
std::string absolute(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.front() == '~') return path;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.string();
}

uint32_t clamp_ms(std::chrono::milliseconds ms) {
  return static_cast<uint32_t>(std::clamp<int64_t>(ms.count(), 0, UINT32_MAX));
}

}  // namespace

std::vector<TreeHost> launch_tree(const Hosts& hosts, int width) {
  const size_t w = width <= 0 ? hosts.size() : static_cast<size_t>(width);
  std::vector<TreeHost> tree = build(hosts, 0, hosts.size(), std::max<size_t>(w, 1));
  if (const int depth = tree_depth(tree); depth > kMaxTreeDepth) {
    throw TreeTooDeep(std::to_string(hosts.size()) + " hosts at --tree-width " +
                      std::to_string(width) + " make a launch tree " + std::to_string(depth) +
                      " levels deep, and it may be at most " + std::to_string(kMaxTreeDepth) +
                      ": give --tree-width 2 or more");
  }
  return tree;
}

bool in_tree(const std::vector<TreeHost>& level, const std::string& host) {
  return std::any_of(level.begin(), level.end(), [&](const TreeHost& t) {
    return t.name == host || in_tree(t.children, host);
  });
}

std::vector<std::string> tree_names(const std::vector<TreeHost>& tree) {
  std::vector<std::string> names;
  for (const TreeHost& h : tree) {
    names.push_back(h.name);
    const std::vector<std::string> below = tree_names(h.children);
    names.insert(names.end(), below.begin(), below.end());
  }
  return names;
}

int hosts_below(const TreeHost& h) {
  int n = 0;
  for (const TreeHost& c : h.children)
    n += 1 + hosts_below(c);
  return n;
}

int tree_depth(const std::vector<TreeHost>& level) {
  int deepest = 0;
  for (const TreeHost& h : level)
    deepest = std::max(deepest, tree_depth(h.children));
  return level.empty() ? 0 : deepest + 1;
}

std::string encode(const SubtreeFrame& f) {
  std::string out;
  base::net::put_str(out, f.ssh.ssh_config);
  base::net::put_str(out, f.ssh.user);
  base::net::put_u32(out, static_cast<uint32_t>(f.ssh.port));
  base::net::put_str(out, f.ssh.known_hosts);
  base::net::put_u32(out, f.ssh.host_key_policy == ddl::ssh::HostKeyPolicy::kAcceptNew ? 1 : 0);
  base::net::put_u32(out, clamp_ms(f.ssh.connect_timeout));
  base::net::put_u32(out, clamp_ms(f.ssh.command_timeout));
  base::net::put_u32(out, static_cast<uint32_t>(f.ssh.max_parallel));
  base::net::put_str(out, f.ddlrun_path);
  base::net::put_str(out, f.ddlrun_address);
  base::net::put_u32(out, clamp_ms(f.heartbeat_timeout));
  base::net::put_u32(out, static_cast<uint32_t>(f.children.size()));
  for (const TreeHost& c : f.children)
    put_host(out, c);
  return out;
}

SubtreeFrame decode_subtree(std::string_view payload) {
  base::net::Decoder in(payload, "subtree frame");
  SubtreeFrame f;
  f.ssh.ssh_config = in.str();
  f.ssh.user = in.str();
  f.ssh.port = in.i32();
  f.ssh.known_hosts = in.str();
  const uint32_t policy = in.u32();
  if (policy > 1)
    throw std::runtime_error("malformed subtree frame: host key policy " + std::to_string(policy));
  f.ssh.host_key_policy =
      policy == 1 ? ddl::ssh::HostKeyPolicy::kAcceptNew : ddl::ssh::HostKeyPolicy::kStrict;
  f.ssh.connect_timeout = std::chrono::milliseconds(in.u32());
  f.ssh.command_timeout = std::chrono::milliseconds(in.u32());
  f.ssh.max_parallel = std::max(in.i32(), 1);
  f.ddlrun_path = in.str();
  f.ddlrun_address = in.str();
  f.heartbeat_timeout = std::chrono::milliseconds(in.u32());
  f.children = get_hosts(in, 1);
  in.expect_done();
  return f;
}

SubtreeFrame subtree_frame(const ddl::ssh::Options& ssh, const std::string& ddlrun_path,
                           std::chrono::milliseconds heartbeat_timeout,
                           std::vector<TreeHost> children) {
  SubtreeFrame w;
  w.ssh = ssh;
  w.ssh.ssh_config = absolute(w.ssh.ssh_config);
  w.ssh.known_hosts = absolute(w.ssh.known_hosts);
  w.ddlrun_path = ddlrun_path;
  w.heartbeat_timeout = heartbeat_timeout;
  w.children = std::move(children);
  return w;
}

std::string encode(const CommandOutput& o) {
  std::string out;
  base::net::put_u32(out, static_cast<uint32_t>(o.exit_status));
  base::net::put_str(out, o.signal);
  base::net::put_str(out, o.out);
  base::net::put_str(out, o.err);
  return out;
}

CommandOutput decode_command_output(std::string_view payload) {
  base::net::Decoder in(payload, "command output frame");
  CommandOutput o;
  o.exit_status = in.i32();
  if (o.exit_status < -1) {
    throw std::runtime_error("malformed command output frame: exit status " +
                             std::to_string(o.exit_status));
  }
  o.signal = in.str();
  o.out = in.str();
  o.err = in.str();
  in.expect_done();
  return o;
}

std::string route(int host, std::string_view frames) {
  return encode_frame(FrameType::kRouted, host, frames);
}

std::string tree_lost_text(const std::string& why, int below) {
  if (below <= 0) return why;
  return why + "; the " + std::to_string(below) + (below == 1 ? " host" : " hosts") +
         " below it in the launch tree " + (below == 1 ? "is" : "are") + " lost with it";
}

std::string no_heartbeat_text(std::chrono::milliseconds deadline) {
  return "no heartbeat for " + base::seconds_text(deadline) +
         " (the host is unreachable, or its agent is stopped or hung)";
}

std::string took_no_data_text(std::chrono::milliseconds deadline, std::size_t waiting) {
  return "took no data for " + base::seconds_text(deadline) + " (" + std::to_string(waiting) +
         " bytes wait for it: the host is unreachable, or its agent is stopped or hung)";
}

std::string lost_with_parent_text(const std::string& parent) {
  return "lost with its tree parent " + parent;
}

std::string from_parent_text(const std::string& parent) {
  return " (from " + parent + ", its parent in the launch tree)";
}

std::string unreached_text(const std::string& above) {
  return "not reached: " + above + ", above it in the launch tree, failed";
}

}  // namespace ddl::launcher::ssh
