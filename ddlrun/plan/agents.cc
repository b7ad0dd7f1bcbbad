// ddlrun's probe down the launch tree (agents.h; launcher/ssh/agent_tree.h).
//
// How it works: the launch tree of the job's hosts is the one the ssh launcher will build
// (launcher::ssh::launch_tree over the hosts in the job's order, their indices the topology's
// when every host gets ranks). Each host below the first level whose inventory is neither
// known here (this host, --host-xml) nor in the job's disk cache gets the agent's command
// (ddlrun --probe-agent). The first-level hosts that have something to probe are logged in to
// (at most max_parallel at once), their agents asked for their inventories and read together
// on one thread (ask_agents: a slow login shell holds no thread), and then a pool of at most
// max_parallel threads keeps each session with its agent and starts each one's subtree
// through it (start_subtree), which brings every answer back. The outputs are read as inventories
// by the mapper (inventory_from_probe_output, the same texts as a probe from here, with the tree
// parent named), and the launch later takes the first level's sessions over with their subtrees
// already running: one login per host. A restart's probe (past the disk cache: every host gets the
// command) goes the same way. The tree stays in the AgentTree whole, hosts whose probe failed
// included: the launch takes it over as it is, giving them no job. A dry run, or a plan another
// launcher runs, closes the sessions once the outputs came (and --probe-links measured): every
// agent exits.
// --probe-links then measures through the same agents (link_channels: launcher/ssh/
// tree_links.h under mapper::probe_links), before the launch takes the tree over; a host with
// ranks that no kept agent reaches (its hardware known without a probe: --host-xml, the job's
// cache, --no-probe, jsrun) is logged in to first, flat, its agent asked as the probe asks
// (reach_hosts).

#include "ddlrun/plan/agents.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include "ddlrun/plan/plan.h"
#include "launcher/launcher.h"

namespace ddl::ddlrun {

namespace {

namespace tree = launcher::ssh;

/// What the probe learnt of each host.
struct TreeProbe {
  std::mutex mutex;
  std::map<std::string, mapper::HostProbe> results;
  std::function<void(const std::string&)> on_settled;  ///< HostProbeOptions::on_settled
  launcher::ssh::AgentTree* agents = nullptr;          ///< where each first-level agent is kept

  void put(mapper::HostProbe r) {
    const std::string host = r.host;
    {
      std::lock_guard lock(mutex);
      results[host] = std::move(r);
    }
    if (on_settled) on_settled(host);
  }
};

/// Gives every host below the first level that is to be probed the probe's command; true when
/// `h` or a host below it got one.
bool mark(std::vector<tree::TreeHost>& level, const std::set<std::string>& to_probe,
          const std::string& command) {
  bool any = false;
  for (tree::TreeHost& h : level) {
    if (to_probe.contains(h.name)) h.command = command;
    const bool below = mark(h.children, to_probe, command);
    any = any || below || !h.command.empty();
  }
  return any;
}

/// A host's answer from below as a probe result: its inventory, or why not, naming its parent.
mapper::HostProbe result_of(const tree::StartedHost& s, const std::string& command) {
  mapper::HostProbe r{s.name, std::nullopt, s.error, false};
  if (!s.output) return r;
  try {
    r.inventory = mapper::inventory_from_probe_output(
        s.name, command,
        mapper::RemoteOutput{s.output->exit_status, s.output->signal, s.output->out,
                             s.output->err});
    r.error.clear();
  } catch (const mapper::ProbeError& e) {
    // Its tree parent goes on the reason's first line, before the lines of stderr it quotes.
    r.error = e.what();
    size_t at = r.error.find("; its stderr:");
    if (at == std::string::npos) at = std::min(r.error.find('\n'), r.error.size());
    r.error.insert(at, tree::from_parent_text(s.parent));
  }
  return r;
}

/// First-level host `t`, whose agent running `command` gave answer `a` (its session kept in
/// out.agents): its inventory, and its subtree started through it; its result and those of the
/// hosts below go into `out`, and its session back into out.agents unless it failed.
void probe_first(const tree::TreeHost& t, const tree::AgentAnswer& a, const Options& o,
                 const SshProbeOptions& so, const std::string& command, int levels_below,
                 TreeProbe& out) {
  std::vector<tree::StartedHost> below;
  launcher::ssh::AgentTree::Kept kept = out.agents->take(t.name);
  try {
    if (!a.output) throw mapper::ProbeError(a.error);
    const tree::CommandOutput& own = *a.output;
    out.put(
        {t.name,
         mapper::inventory_from_probe_output(
             t.name, command, mapper::RemoteOutput{own.exit_status, own.signal, own.out, own.err}),
         "", false});
    if (!t.children.empty()) {
      const tree::SubtreeFrame w = tree::subtree_frame(
          so, self_path(),
          std::chrono::milliseconds(static_cast<int64_t>(o.heartbeat_timeout * 1000)), t.children);
      below = tree::start_subtree(kept, t.name, w, tree::subtree_start_limit(so, levels_below));
      // Lost meanwhile (silent, or took no data): its probe fails with why, in the launch's words.
      if (!kept.lost.empty()) out.put({t.name, std::nullopt, kept.lost, false});
    }
    out.agents->put(t.name, std::move(kept));
  } catch (const std::exception& e) {
    kept.channel.reset();  // before its session
    kept.session.reset();
    const bool probe = dynamic_cast<const mapper::ProbeError*>(&e) != nullptr;
    out.put(
        {t.name, std::nullopt, (probe ? "" : "protocol error: ") + std::string(e.what()), false});
    std::vector<tree::TreeHost> level = t.children;
    while (!level.empty()) {  // every host below: not reached
      std::vector<tree::TreeHost> next;
      for (tree::TreeHost& h : level) {
        if (!h.command.empty())
          below.push_back({h.index, h.name, {}, {}, tree::unreached_text(t.name)});
        next.insert(next.end(), h.children.begin(), h.children.end());
      }
      level = std::move(next);
    }
  }
  for (const tree::StartedHost& s : below)
    out.put(result_of(s, command));
}

/// Adds the names of `t` and every host below it to `names`.
void add_names(const tree::TreeHost& t, std::set<std::string>& names) {
  names.insert(t.name);
  for (const tree::TreeHost& c : t.children)
    add_names(c, names);
}

/// The largest index of `t` and the hosts below it.
int max_index(const tree::TreeHost& t) {
  int most = t.index;
  for (const tree::TreeHost& c : t.children)
    most = std::max(most, max_index(c));
  return most;
}

/// A host's link agent along the launch tree, as mapper::probe_links speaks to it.
class TreeLinkChannel : public mapper::LinkChannel {
 public:
  TreeLinkChannel(tree::TreeLinks& links, int id) : links_(links), id_(id) {}
  ~TreeLinkChannel() override {
    try {
      links_.send(id_, "end");
    } catch (const tree::TreeLinkError&) {  // gone already
    }
  }
  void send(const std::string& line) override {
    try {
      links_.send(id_, line);
    } catch (const tree::TreeLinkError& e) {
      throw mapper::LinkError(e.what());
    }
  }
  std::string line(std::chrono::milliseconds timeout) override {
    try {
      return links_.line(id_, timeout);
    } catch (const tree::TreeLinkError& e) {
      throw mapper::LinkError(e.what());
    }
  }
  std::string gone() override { return links_.gone(id_); }

 private:
  tree::TreeLinks& links_;
  int id_;
};

}  // namespace

std::vector<mapper::HostProbe> probe_through_tree(const Options& o,
                                                  const std::vector<std::string>& all,
                                                  const std::vector<std::string>& remote,
                                                  const SshProbeOptions& so,
                                                  const std::string& command, int width,
                                                  launcher::ssh::AgentTree& agents) {
  TreeProbe probed;
  probed.on_settled = so.on_settled;
  probed.agents = &agents;
  std::set<std::string> to_probe;
  for (const std::string& h : remote) {
    if (std::optional<mapper::Inventory> inv = mapper::cached_inventory(so, h)) {
      probed.put({h, std::move(*inv), "", true});
    } else {
      to_probe.insert(h);
    }
  }
  std::vector<std::pair<int, std::string>> order;
  for (const std::string& h : all)
    order.emplace_back(static_cast<int>(order.size()), h);
  std::vector<tree::TreeHost> first = tree::launch_tree(order, width);
  const int levels_below = tree::tree_depth(first) - 1;
  std::vector<const tree::TreeHost*> log_in;
  const std::set<std::string> listed(remote.begin(), remote.end());
  for (tree::TreeHost& t : first) {
    // --probe-links measures through every host's agent: each first-level host is logged in
    // (flat, each remote one).
    if (mark(t.children, to_probe, command) || to_probe.contains(t.name) ||
        (o.probe_links && (levels_below > 0 || listed.contains(t.name))))
      log_in.push_back(&t);
  }
  std::vector<std::string> names;
  for (const tree::TreeHost* t : log_in)
    names.push_back(t->name);
  const std::vector<tree::AgentAnswer> answers =
      tree::ask_agents(ddl::ssh::libssh_connector(), names, so, command, agents);
  tree::on_pool(log_in.size(), so.max_parallel, [&](std::size_t i) {
    probe_first(*log_in[i], answers[i], o, so, command, levels_below, probed);
  });
  std::vector<mapper::HostProbe> results;
  for (const std::string& h : remote) {
    mapper::HostProbe& r = probed.results[h];
    if (r.host.empty()) r = {h, std::nullopt, "not probed (please report this)", false};
    if (r.ok() && !r.cached && to_probe.erase(h) > 0) mapper::cache_inventory(so, h, *r.inventory);
    results.push_back(r);
  }
  // A first-level host probed only for the hosts below it (this host, or one --host-xml
  // describes) whose login failed: its failure too, since theirs only point at it.
  for (const tree::TreeHost* t : log_in) {
    const mapper::HostProbe& r = probed.results[t->name];
    if (!listed.contains(t->name) && !r.ok()) results.push_back(r);
  }
  agents.set_tree(std::move(first));
  return results;
}

std::map<std::string, std::string> reach_hosts(const std::vector<mapper::LinkHost>& hosts,
                                               const SshProbeOptions& so,
                                               const std::string& command,
                                               launcher::ssh::AgentTree& agents) {
  std::vector<tree::TreeHost> tree = agents.tree();
  std::set<std::string> reached;
  int next_index = 0;
  for (const tree::TreeHost& t : tree) {
    if (agents.has(t.name)) add_names(t, reached);
    next_index = std::max(next_index, max_index(t) + 1);
  }
  std::vector<std::string> names;
  for (const mapper::LinkHost& h : hosts)
    if (!h.local && !reached.contains(h.name)) names.push_back(h.name);
  std::map<std::string, std::string> unreached;
  if (names.empty()) return unreached;
  const std::vector<tree::AgentAnswer> answers =
      tree::ask_agents(ddl::ssh::libssh_connector(), names, so, command, agents);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!agents.has(names[i])) {
      unreached[names[i]] = answers[i].error.empty() ? "'" + command + "' ended before it answered"
                                                     : answers[i].error;
    } else if (!tree::in_tree(tree, names[i])) {
      tree.push_back({next_index++, names[i], {}, {}});
    }
  }
  agents.set_tree(std::move(tree));
  return unreached;
}

mapper::OpenLinkChannel link_channels(tree::TreeLinks& links,
                                      const std::map<std::string, std::string>& unreached) {
  return [&links, &unreached](const mapper::LinkHost& h,
                              int port) -> std::unique_ptr<mapper::LinkChannel> {
    int id = -1;
    try {
      id = links.open(h.name, port);
    } catch (const tree::TreeLinkError& e) {
      throw mapper::LinkError(e.what());
    }
    if (id >= 0) return std::make_unique<TreeLinkChannel>(links, id);
    const auto why = unreached.find(h.name);
    throw mapper::LinkError(why != unreached.end() ? why->second
                                                   : "not reached by ddlrun's agents");
  };
}

}  // namespace ddl::ddlrun
