// Per-node mode's job (per_node.h): this node's rendezvous, the plan every node makes, and the
// backend that stops this node's ranks when another node fails.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <mutex>
#include <ostream>

#include "ddlrun/backends.h"
#include "ddlrun/per_node/per_node.h"
#include "ddlrun/plan/plan_digest.h"
#include "ddlrun/run/launch.h"
#include "ddlrun/show/report.h"
#include "hostfiles/hostfiles.h"
#include "mapper/mapper.h"

namespace ddl::ddlrun {

namespace {

/// This host's name, as the plan calls it.
std::string this_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

/// Node 0's rendezvous of round `round` for `members` (node ranks; empty: all), at least
/// `min_nodes` of them; what it has to say about other nodes goes to `log` as errors.
std::unique_ptr<NodeServer> serve(const Options& o, const PerNode& node, GetEnv getenv_fn,
                                  void* env_context, spdlog::logger& log, int round,
                                  const std::vector<int>& members, int min_nodes) {
  NodeServer::Settings s;
  s.round = round;
  s.members = members;
  s.min_nodes = min_nodes;
  s.port = node.port;
  s.token = node.token;
  s.nnodes = node.nnodes;
  s.job = node.job;
  s.timeout = millis(o.rdzv_timeout);
  s.heartbeat_timeout = millis(o.heartbeat_timeout);
  s.job_id =
      o.job_id.empty() && !node.job.empty() ? node.job : job_id_of(o, getenv_fn, env_context);
  return std::make_unique<NodeServer>(
      s, [&log](const std::string& line) { log.error("{}", hostfiles::printable(line)); });
}

NodeHello hello_of(const Options& o, const PerNode& node, int round) {
  NodeHello h;
  h.round = round;
  h.node_rank = node.node_rank;
  h.nnodes = node.nnodes;
  h.job = node.job;
  h.host = this_host_name();
  if (!o.no_probe) h.inventory = mapper::to_yaml(mapper::probe_hwloc(mapper::this_host_cached()));
  return h;
}

/// The options a single ddlrun for every node would have had: -H with the nodes' hosts in
/// node-rank order, node 0's job id, the local launcher, -a from $PET_NPROC_PER_NODE.
Options whole_job_options(const Options& o, const PerNode& node, const Welcome& w) {
  Options whole = o;
  if (node.nproc_per_node) whole.accelerators = node.nproc_per_node;
  std::string hosts;
  for (const NodeEntry& n : w.nodes)
    hosts += (hosts.empty() ? "" : ",") + n.host;
  whole.hosts = {hosts};
  whole.hosts_from = "the nodes' host names";
  whole.job_id = w.job_id;
  whole.launcher = "local";
  whole.nnodes.reset();
  whole.min_hosts.reset();
  return whole;
}

KnownHardware known_hardware(const Welcome& w) {
  KnownHardware known;
  for (size_t k = 0; k < w.nodes.size(); ++k) {
    const NodeEntry& n = w.nodes[k];
    if (n.inventory.empty()) continue;
    known[n.host] = mapper::inventory_from_yaml(
        n.inventory, "the hardware node " + std::to_string(k) + " (" + n.host + ") sent");
  }
  return known;
}

/// Each node's Host::index in the plan, by node rank; -1 for a node that runs no rank.
std::vector<int> hosts_of_nodes(const JobPlan& plan, const Welcome& w) {
  std::vector<int> hosts;
  for (const NodeEntry& n : w.nodes) {
    const auto it = std::find_if(plan.topology.hosts.begin(), plan.topology.hosts.end(),
                                 [&](const comm::Host& h) { return h.name == n.host; });
    hosts.push_back(it == plan.topology.hosts.end() ? -1 : it->index);
  }
  return hosts;
}

/// "ranks 2-3 of 6" for the dry run's first line.
std::string ranks_of_host(const JobPlan& plan, int host) {
  std::vector<int> mine;
  for (const comm::RankPlacement& r : plan.topology.ranks) {
    if (r.host == host) mine.push_back(r.rank);
  }
  std::sort(mine.begin(), mine.end());
  if (mine.empty()) return "no ranks of " + std::to_string(plan.topology.ranks.size());
  return comm::rank_list(mine) + " of " + std::to_string(plan.topology.ranks.size());
}

/// The dry run: the plan, after the nodes agreed on it, headed (in text) by this node's part.
int dry_run(const JobPlan& plan, const Options& whole, const PerNode& node, NodePart& part,
            std::ostream& out) {
  part.client->agree(part.digest, {});
  if (whole.output == OutputFormat::kText) {
    out << "This node: node " << node.node_rank << " of " << node.nnodes << " ("
        << hostfiles::printable(part.client->welcome().nodes[node.node_rank].host) << "), "
        << ranks_of_host(plan, part.host_of_node[static_cast<size_t>(node.node_rank)])
        << "; rendezvous at " << hostfiles::printable(node.endpoint()) << " (" << node.from
        << ")\n";
  }
  out << hostfiles::printable(render_plan(plan, whole)) << std::flush;
  part.client->watch([](const NodeStop&) {}, std::chrono::milliseconds(10000));
  return part.client->finish(0);
}

/// "node rank 2: its ranks ended with status 143": another node's stop as the supervisor says
/// it (after the node's host name), with the status when `what` does not give it.
std::string describe_stop(const NodeStop& stop) {
  std::string text = "node rank " + std::to_string(stop.node) + ": " + stop.what;
  if (stop.what.find("status") == std::string::npos) {
    text += " (exit status " + std::to_string(stop.status) + ")";
  }
  return text;
}

/// When this node's own rank is blamed but node 0 says another node failed first (its ranks'
/// end reached this node's ranks as a closed connection before node 0's word did), the line
/// that names that node, as the supervisor would have printed it; "" otherwise.
std::string earlier_failure(const NodeClient& client, const launcher::JobEnd& end) {
  const std::optional<NodeStop> stop = client.first_stop();
  if (!stop || end.rank < 0 || stop->node == client.node_rank()) return "";
  return "ddlrun: " + stop->host + ": " + describe_stop(*stop) +
         "; it failed first, and this node's ranks failed after it";
}

/// The local backend of this node's ranks, which another node's failure stops.
class NodeBackend : public launcher::Backend {
 public:
  NodeBackend(std::unique_ptr<launcher::Backend> inner, const NodePart& node,
              std::chrono::milliseconds heartbeat_timeout)
      : inner_(std::move(inner)),
        client_(*node.client),
        host_of_node_(node.host_of_node),
        heartbeat_timeout_(heartbeat_timeout) {}

  std::string_view name() const override { return inner_->name(); }
  std::vector<int> start(launcher::EventQueue& events) override {
    std::vector<int> started = inner_->start(events);
    client_.watch(
        [this, &events](const NodeStop& stop) {
          launcher::Event e;
          e.type = launcher::Event::Type::kHostFailure;
          e.host = stop.node >= 0 && static_cast<size_t>(stop.node) < host_of_node_.size()
                       ? host_of_node_[static_cast<size_t>(stop.node)]
                       : -1;
          e.data = describe_stop(stop);
          e.status.code = stop.status;
          events.push(std::move(e));
        },
        heartbeat_timeout_);
    return started;
  }
  void signal(int sig) override { inner_->signal(sig); }
  void write_stdin(std::string_view data) override { inner_->write_stdin(data); }
  void close_stdin() override { inner_->close_stdin(); }
  bool output_may_follow() override { return inner_->output_may_follow(); }
  void finish() override { inner_->finish(); }

 private:
  std::unique_ptr<launcher::Backend> inner_;
  NodeClient& client_;
  std::vector<int> host_of_node_;
  std::chrono::milliseconds heartbeat_timeout_;
};

}  // namespace

std::unique_ptr<launcher::Backend> node_backend(std::unique_ptr<launcher::Backend> inner,
                                                const NodePart& node,
                                                std::chrono::milliseconds heartbeat_timeout) {
  return std::make_unique<NodeBackend>(std::move(inner), node, heartbeat_timeout);
}

namespace {

/// The rounds of a real per-node job: node 0 serves each round's rendezvous on the same port,
/// every node joins it, plans the job and starts its ranks through launch().
class LiveRounds : public NodeRounds {
 public:
  LiveRounds(const Options& o, const PerNode& node, GetEnv getenv_fn, void* env_context,
             std::ostream& out, std::ostream& err, spdlog::logger& log)
      : o_(o),
        node_(node),
        getenv_(getenv_fn),
        env_context_(env_context),
        out_(out),
        err_(err),
        log_(log),
        start_(std::chrono::steady_clock::now()) {}

  NodeRound run(int round, const std::vector<int>& members, int min_nodes) override {
    client_.reset();  // the round before's
    server_.reset();
    if (node_.node_rank == 0) {
      server_ = serve(o_, node_, getenv_, env_context_, log_, round, members, min_nodes);
    }
    client_ = NodeClient::join(node_.endpoint(), node_.token, hello_of(o_, node_, round),
                               millis(o_.rdzv_timeout));
    const Welcome& w = client_->welcome();
    Options whole = whole_job_options(o_, node_, w);
    if (whole.timeout) {  // --timeout counts for all rounds together
      const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start_;
      whole.timeout = std::max(*whole.timeout - spent.count(), 0.001);
    }
    const KnownHardware known = known_hardware(w);
    JobPlan plan = make_plan(whole, getenv_, env_context_, {}, {}, &known);
    plan.launcher = {&backend_named("local"), "per-node mode: each node starts its own ranks"};
    plan.hosts_from = "the rendezvous at " + node_.endpoint() + ", in node-rank order";
    for (const std::string& warning : plan.warnings)
      log_.warn("{}", hostfiles::printable(warning));
    if (!o_.dry_run) mark_attempt(plan, round, o_.max_restarts);  // as a single ddlrun does
    if (!o_.topology_file.empty()) comm::write_topology_file(plan.topology, o_.topology_file);
    NodePart part{client_.get(), hosts_of_nodes(plan, w), plan_digest(plan), node_.host};
    NodeRound ended;
    if (o_.dry_run) {
      ended.status = dry_run(plan, whole, node_, part, out_);
      return ended;
    }
    launcher::JobEnd end;
    ended.status = launch(plan, whole, log_, &end, &part);
    ended.failed = end.failed;
    ended.signal = end.signal;
    ended.reason = end.reason;
    ended.end = client_->round_end();
    if (const std::string line = earlier_failure(*client_, end); !line.empty()) {
      err_ << hostfiles::printable(line) << "\n";
    }
    return ended;
  }

  void note(const std::string& text) override { err_ << hostfiles::printable(text) << "\n"; }

 private:
  const Options& o_;
  const PerNode& node_;
  GetEnv getenv_;
  void* env_context_;
  std::ostream& out_;
  std::ostream& err_;
  spdlog::logger& log_;
  std::unique_ptr<NodeServer> server_;
  std::unique_ptr<NodeClient> client_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace

int run_per_node(const Options& o, const PerNode& node, GetEnv getenv_fn, void* env_context,
                 std::ostream& out, std::ostream& err, spdlog::logger& log) {
  if (node.token.empty()) {
    log.warn(
        "the rendezvous at {} is unauthenticated: anyone who reaches it can join this job; give "
        "every node the same secret in $DDL_JOB_TOKEN or --rdzv-token-file",
        hostfiles::printable(node.endpoint()));
  }
  log.info("per-node mode ({}): node {} of {}, rendezvous at {}", node.from, node.node_rank,
           node.nnodes, hostfiles::printable(node.endpoint()));
  LiveRounds rounds(o, node, getenv_fn, env_context, out, err, log);
  return run_node_rounds(node, restart_limits(o), rounds);
}

}  // namespace ddl::ddlrun
