// Per-node mode (per_node.h): which node this is, from the options and the environment, and
// this node's part of the job.
//
// How it works: per_node_settings() reads this node's rank, the node count and node 0's
// address from ddlrun's options, else the variables Kubernetes operators and Slurm set. Then
// run_per_node(): node 0 serves the rendezvous; every node joins it with its host name and
// hardware, and gets all nodes' in node-rank order; every node makes the plan a single
// ddlrun would make with -H for those hosts (their hardware as the nodes probed it), and the
// nodes check that their plans agree. Each node then starts only its own ranks (the local
// backend, without PMIx: ranks of all nodes meet at node 0's libddl rendezvous and
// MASTER_PORT), and the rendezvous connection carries failures both ways until every node is
// done.

#include "ddlrun/per_node/per_node.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>

#include "base/net/listener.h"
#include "base/text.h"
#include "hostfiles/hostfiles.h"
#include "mapper/mapper.h"

namespace ddl::ddlrun {

namespace {

/// torchrun's default port of its c10d rendezvous.
constexpr int kDefaultPort = 29400;

/// The environment, with empty variables counting as unset.
struct Env {
  GetEnv get;
  void* context;
  std::optional<std::string> operator()(const char* name) const {
    std::optional<std::string> v = get(name, context);
    if (v && v->empty()) return std::nullopt;
    return v;
  }
};

/// $NAME as a whole number of at least `least`; nullopt when unset.
std::optional<int> env_number(const Env& env, const char* name, int least) {
  const std::optional<std::string> v = env(name);
  if (!v) return std::nullopt;
  const std::optional<int> n = base::parse_int(*v);
  if (!n || *n < least) {
    throw UsageError(std::string("$") + name + " is '" + *v + "', not a whole number of at least " +
                     std::to_string(least));
  }
  return n;
}

/// A Slurm step task of one task per node, with nothing on the command line that says
/// otherwise: `srun --ntasks-per-node=1 ddlrun ...`.
bool in_slurm_step(const Options& o, const Env& env) {
  if (!o.hosts.empty() || !o.hostfile.empty() || !o.rankfile.empty() || o.launcher != "auto") {
    return false;
  }
  const std::optional<std::string> nodes = env("SLURM_STEP_NUM_NODES");
  const std::optional<std::string> tasks = env("SLURM_STEP_NUM_TASKS");
  return nodes && tasks && *nodes == *tasks && env("SLURM_NODEID") && env("SLURM_PROCID");
}

/// What turns per-node mode on; "" when nothing does.
std::string turned_on_by(const Options& o, const Env& env, bool slurm) {
  if (o.node_rank) return "--node-rank";
  if (!o.rdzv.empty()) return "--rdzv";
  if (!o.master_addr.empty()) return "--master-addr";
  if (env("PET_NODE_RANK")) return "$PET_NODE_RANK";
  if (slurm) return "a Slurm step of one task per node";
  return "";
}

int node_rank_of(const Options& o, const Env& env, bool slurm, const std::string& from) {
  if (o.node_rank) return *o.node_rank;
  for (const char* name : {"PET_NODE_RANK", slurm ? "SLURM_NODEID" : "RANK"}) {
    if (std::optional<int> k = env_number(env, name, 0)) return *k;
  }
  throw UsageError("per-node mode (" + from +
                   ") needs this node's rank: give --node-rank K (or set $PET_NODE_RANK)");
}

/// The node count, MIN:MAX (MIN = MAX when fixed); a range only with --max-restarts.
NodeRange nnodes_of(const Options& o, const Env& env, bool slurm, const std::string& from) {
  std::optional<NodeRange> range = o.nnodes;
  std::string given = "--nnodes";
  if (!range) {
    if (const std::optional<std::string> pet = env("PET_NNODES")) {
      range = parse_node_range(*pet);
      given = "$PET_NNODES";
    }
  }
  if (range && range->min != range->max && o.max_restarts == 0) {
    throw UsageError(given + " " + std::to_string(range->min) + ":" + std::to_string(range->max) +
                     ": per-node mode needs a fixed node count unless --max-restarts lets the "
                     "job restart with fewer nodes; give --nnodes N, or --max-restarts");
  }
  if (range) return *range;
  for (const char* name : {slurm ? "SLURM_STEP_NUM_NODES" : "WORLD_SIZE"}) {
    if (std::optional<int> n = env_number(env, name, 1)) return {*n, *n};
  }
  throw UsageError("per-node mode (" + from +
                   ") needs the number of nodes: give --nnodes N (or set $PET_NNODES)");
}

/// "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT" (a bare IPv6 address: no port) split, with
/// `port` when none is given.
std::pair<std::string, int> split_endpoint(const std::string& text, int port,
                                           const std::string& what) {
  std::string host = text;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    host = text.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    if (close != std::string::npos && close + 1 < text.size()) {
      port_text = text[close + 1] == ':' ? text.substr(close + 2) : "?";
    }
  } else if (const size_t colon = text.find(':');
             colon != std::string::npos && colon == text.rfind(':')) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (!port_text.empty()) {
    const std::optional<int> p = base::parse_int(port_text);
    if (!p || *p < 1 || *p > 65535) {
      throw UsageError(what + " '" + text + "': the port must be a whole number from 1 to 65535");
    }
    port = *p;
  }
  if (host.empty()) throw UsageError(what + " '" + text + "' names no host; give HOST:PORT");
  return {host, port};
}

/// The first node of the step (Slurm), and a port every node derives from the job.
std::pair<std::string, int> slurm_endpoint(const Options& o, const Env& env) {
  const std::string nodes = env("SLURM_STEP_NUM_NODES").value_or("1");
  const std::optional<std::string> list =
      env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST");
  if (!list) throw UsageError("a Slurm step without $SLURM_STEP_NODELIST: give --rdzv HOST:PORT");
  const hostfiles::HostList hosts = hostfiles::parse_slurm(*list, "1(x" + nodes + ")");
  const int job = env_number(env, "SLURM_JOB_ID", 0).value_or(0);
  const int step = env_number(env, "SLURM_STEP_ID", 0).value_or(0);
  const int port = o.master_port ? *o.master_port : 20000 + (job % 10000 + step) % 10000;
  return {hosts.hosts().front().name, port};
}

/// Node 0's host and the rendezvous port.
std::pair<std::string, int> endpoint_of(const Options& o, const Env& env, bool slurm,
                                        const std::string& from) {
  const int port = o.master_port.value_or(kDefaultPort);
  if (!o.rdzv.empty()) return split_endpoint(o.rdzv, port, "--rdzv");
  if (!o.master_addr.empty()) {
    return {o.master_addr,
            o.master_port ? *o.master_port : env_number(env, "MASTER_PORT", 1).value_or(port)};
  }
  if (auto e = env("PET_RDZV_ENDPOINT")) return split_endpoint(*e, port, "$PET_RDZV_ENDPOINT");
  for (const auto& [addr, port_name] :
       {std::pair{"PET_MASTER_ADDR", "PET_MASTER_PORT"}, std::pair{"MASTER_ADDR", "MASTER_PORT"}}) {
    if (auto a = env(addr)) return {*a, env_number(env, port_name, 1).value_or(port)};
  }
  if (slurm) return slurm_endpoint(o, env);
  throw UsageError("per-node mode (" + from +
                   ") needs node 0's address: give --rdzv HOST:PORT (or --master-addr, or set "
                   "$MASTER_ADDR)");
}

/// The job's secret and where it came from: --rdzv-token-file, else $DDL_JOB_TOKEN.
std::pair<std::string, std::string> token_of(const Options& o, const Env& env) {
  if (o.rdzv_token_file.empty()) {
    if (std::optional<std::string> t = env("DDL_JOB_TOKEN")) return {*t, "$DDL_JOB_TOKEN"};
    return {"", ""};
  }
  std::ifstream in(o.rdzv_token_file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    throw UsageError("--rdzv-token-file " + o.rdzv_token_file + ": " + std::strerror(errno) +
                     "; name a readable file holding the job's secret");
  }
  const std::string token(base::trim(text.str()));
  if (token.empty()) {
    throw UsageError("--rdzv-token-file " + o.rdzv_token_file +
                     " is empty; put the job's secret in it");
  }
  return {token, "--rdzv-token-file " + o.rdzv_token_file};
}

/// $PET_NPROC_PER_NODE (torchrun's --nproc_per_node as Kubeflow sets it) when -a is not given:
/// a number, or "auto"/"gpu" for ddlrun's default.
std::optional<int> nproc_per_node_of(const Options& o, const Env& env) {
  const std::optional<std::string> v = env("PET_NPROC_PER_NODE");
  if (o.accelerators || !v || *v == "auto" || *v == "gpu") return std::nullopt;
  return env_number(env, "PET_NPROC_PER_NODE", 1);
}

/// Refuses what per-node mode cannot do.
void check_per_node(const Options& o, const PerNode& node) {
  if (!o.hosts.empty() || !o.hostfile.empty() || !o.rankfile.empty()) {
    throw UsageError("per-node mode (" + node.from +
                     ") learns the hosts at the rendezvous, each node bringing its own: drop -H, "
                     "--hostfile and --rankfile");
  }
  if (o.launcher != "auto" && o.launcher != "local") {
    throw UsageError("--launcher " + o.launcher + ": per-node mode (" + node.from +
                     ") starts this node's ranks itself; drop --launcher");
  }
  if (o.min_hosts) {
    throw UsageError("--min-hosts: per-node mode (" + node.from +
                     ") counts nodes, not hosts: give --nnodes MIN:MAX with --max-restarts");
  }
  if (node.node_rank >= node.nnodes) {
    throw UsageError("node rank " + std::to_string(node.node_rank) +
                     " is not below the node count " + std::to_string(node.nnodes) +
                     "; node ranks run from 0 to " + std::to_string(node.nnodes - 1));
  }
}

}  // namespace

std::string PerNode::endpoint() const {
  return base::net::join_host_port(host, port);
}

std::optional<PerNode> per_node_settings(const Options& o, GetEnv getenv_fn, void* env_context) {
  const Env env{getenv_fn, env_context};
  const bool slurm = in_slurm_step(o, env);
  PerNode node;
  node.from = turned_on_by(o, env, slurm);
  if (node.from.empty()) return std::nullopt;
  node.node_rank = node_rank_of(o, env, slurm, node.from);
  const NodeRange range = nnodes_of(o, env, slurm, node.from);
  node.nnodes = range.max;
  node.min_nodes = range.min;
  std::tie(node.host, node.port) = endpoint_of(o, env, slurm, node.from);
  node.job = !o.rdzv_id.empty() ? o.rdzv_id : env("PET_RDZV_ID").value_or("");
  if (node.job.empty() && slurm) node.job = env("SLURM_JOB_ID").value_or("");
  std::tie(node.token, node.token_from) = token_of(o, env);
  node.nproc_per_node = nproc_per_node_of(o, env);
  check_per_node(o, node);
  return node;
}

std::string describe_failure(int rank, const launcher::ExitStatus& status) {
  return "rank " + std::to_string(rank) +
         (status.signal != 0 ? " was killed by " + launcher::signal_name(status.signal)
                             : " exited with status " + std::to_string(status.code));
}

}  // namespace ddl::ddlrun
