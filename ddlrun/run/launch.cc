// From a plan to a running job: the Job the backends share, the backend for the chosen
// launcher, the output sink, and the supervisor.

#include "ddlrun/run/launch.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <vector>

#include "comm/comm.h"
#include "ddlrun/backends.h"
#include "ddlrun/per_node/per_node.h"
#include "hostfiles/hostfiles.h"
#include "launcher/launcher.h"

namespace ddl::ddlrun {

namespace {

/// The number of cores whose hardware threads meet `cpus`, from the host's inventory; 0 when
/// the host was not probed.
int cores_in(const mapper::Inventory* inventory, const comm::CpuSet& cpus) {
  if (inventory == nullptr || cpus.empty()) return 0;
  int n = 0;
  for (const mapper::Package& p : inventory->packages) {
    for (const mapper::Core& c : p.cores) {
      for (int pu : c.pus) {
        if (cpus.contains(pu)) {
          ++n;
          break;
        }
      }
    }
  }
  return n;
}

/// A private (0700) temporary directory for the job's files, removed on destruction.
class WorkDir {
 public:
  explicit WorkDir(const std::string& job_id) {
    const char* tmp = std::getenv("TMPDIR");
    std::string safe;
    for (char c : job_id)
      safe.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_');
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddlrun." + safe + ".XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      throw launcher::LaunchError("cannot create a temporary directory like " + pattern + ": " +
                                  std::strerror(errno) + " (set TMPDIR to a writable directory)");
    }
    path_ = pattern;
    launcher::remove_at_signal(path_);
  }
  ~WorkDir() {
    launcher::forget_at_signal(path_);
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Puts this ddlrun's package ddl on the ranks' PYTHONPATH (Job::python_dir) and says which at -v.
void give_python_package(launcher::Job& job, spdlog::logger& log) {
  job.python_dir = python_package_dir(self_path());
  if (job.python_dir.empty()) {
    log.info(
        "python package ddl: none beside this ddlrun (built without pybind11?); the "
        "ranks' PYTHONPATH is left alone");
  } else {
    log.info("python package ddl for the ranks: {}/ddl (first on their PYTHONPATH)",
             hostfiles::printable(job.python_dir));
    const bool first = std::find(job.exports.begin(), job.exports.end(),
                                 launcher::EnvVar("DDL_HOROVOD", "ddl")) != job.exports.end();
    log.info("horovod for the ranks: libddl's horovod.torch ({}/ddl/_horovod), {}",
             hostfiles::printable(job.python_dir),
             first ? "ahead of any installed Horovod (--horovod ddl)"
                   : "where no Horovod is installed (--horovod auto)");
  }
}

/// ddlrun's rendezvous server for the ranks of `plan`, admitting `token`, on the address
/// rank_rendezvous_bind() chooses; its failures name each missing rank's host; the connections
/// it refuses are warnings in `log`.
std::unique_ptr<comm::RendezvousServer> serve_ranks(const JobPlan& plan, const std::string& token,
                                                    bool per_node, spdlog::logger& log) {
  std::vector<std::string> hosts(plan.topology.ranks.size());
  for (const comm::RankPlacement& r : plan.topology.ranks) {
    const comm::Host* h = plan.topology.find_host(r.host);
    if (h != nullptr && r.rank >= 0 && static_cast<size_t>(r.rank) < hosts.size())
      hosts[r.rank] = h->name;
  }
  return std::make_unique<comm::RendezvousServer>(
      token, static_cast<int>(plan.topology.ranks.size()), 0, std::move(hosts),
      [&log](const std::string& line) { log.warn("{}", line); },
      rank_rendezvous_bind(chosen_backend(plan), per_node));
}

/// Per-node mode: the nodes agree on the plan and take node 0's ports; this node starts its own
/// ranks only, without PMIx (whose server sees no other node's ranks).
void join_nodes(const NodePart& node, launcher::LaunchOptions& lo) {
  const bool node0 = node.client->node_rank() == 0;
  const Ports ports = node.client->agree(
      node.digest, node0 ? Ports{lo.rendezvous_port, launcher::free_tcp_port()} : Ports{});
  lo.rendezvous_port = ports.ddl;
  lo.master_port = ports.master;
  lo.rendezvous_host = node.rendezvous_host;
  lo.only_host = node.host_of_node[static_cast<size_t>(node.client->index())];
  lo.pmix_server = false;
}

/// Per-node mode: the first failure of this node's ranks goes to node 0 at once, which stops
/// the other nodes; only node 0 feeds its stdin to rank 0.
void tell_node0(const NodePart& node, launcher::SuperviseOptions& so) {
  NodeClient* client = node.client;
  so.on_first_failure = [client](int rank, const launcher::ExitStatus& status) {
    client->report_failure(describe_failure(rank, status), status.shell_code());
  };
  if (client->node_rank() != 0) so.stdin_fd = -1;
  // A node cannot pause alone: the others would wait for it until its heartbeat is missed,
  // then call it silent. They hear at once that it was stopped.
  so.on_stopped = [client] {
    client->report_failure("its ddlrun was stopped (SIGTSTP, Ctrl-Z); a node cannot pause alone",
                           128 + SIGTSTP);
  };
}

/// Per-node mode's supervise(): this node's ranks, whose first failure (or failure to start)
/// node 0 hears of at once; returns the job's status, once every node is done.
int supervise_node(const NodePart& node, launcher::Backend& backend, const JobPlan& plan,
                   launcher::SuperviseOptions so, launcher::OutputSink& sink,
                   launcher::JobEnd* end) {
  tell_node0(node, so);
  int status = 0;
  launcher::JobEnd mine;
  try {
    status = launcher::supervise(backend, &plan.topology, so, sink, &mine);
  } catch (const launcher::LaunchError& e) {
    node.client->report_failure(std::string("its ranks could not start: ") + e.what(), e.status());
    throw;
  }
  if (end != nullptr) *end = mine;
  return node.client->finish(status, mine.failed || status == 0);
}

}  // namespace

namespace {

/// Why the ranks have no working directory: ddlrun's own is gone (deleted since it was entered;
/// the PMIx server said so once per rank).
std::string no_working_directory() {
  std::error_code ec;
  (void)std::filesystem::current_path(ec);
  return "the current directory cannot be the ranks' working directory (" + ec.message() +
         "; was it deleted?): cd to a directory that exists, or give --wdir DIR";
}

}  // namespace

launcher::Job make_job(const JobPlan& plan, const std::string& topology_path) {
  launcher::Job job;
  job.topology = plan.topology;
  job.argv = plan.program;
  job.exports = plan.exports;
  job.topology_path = topology_path;
  job.token = launcher::make_token();
  std::error_code ec;
  job.cwd = plan.wdir.empty() ? std::filesystem::current_path(ec).string() : plan.wdir;
  job.cores.assign(plan.topology.ranks.size(), 0);
  for (const comm::RankPlacement& r : plan.topology.ranks) {
    const comm::Host* h = plan.topology.find_host(r.host);
    const mapper::Inventory* inv = nullptr;
    if (h != nullptr) {
      if (auto it = plan.inventories.find(h->name); it != plan.inventories.end())
        inv = it->second.get();
    }
    if (r.rank >= 0 && static_cast<size_t>(r.rank) < job.cores.size()) {
      job.cores[r.rank] = cores_in(inv, r.cpus);
    }
  }
  return job;
}

std::string python_package_dir(const std::string& ddlrun_path) {
  namespace fs = std::filesystem;
  const fs::path bin = fs::path(ddlrun_path).parent_path();
  std::vector<fs::path> candidates;
#ifdef DDL_PYTHON_FROM_BINDIR
  candidates.push_back(bin / DDL_PYTHON_FROM_BINDIR);
#endif
  candidates.push_back(bin.parent_path() / "python");
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "ddl" / "__init__.py", ec)) {
      return fs::weakly_canonical(dir, ec).string();
    }
  }
  return "";
}

std::string rank_rendezvous_bind(const launcher::BackendDescriptor& backend, bool per_node) {
  return backend.runs_here && !per_node ? launcher::kLocalRendezvousAddress : "";
}

launcher::TagStyle tag_style(const std::string& name) {
  if (name == "rank") return launcher::TagStyle::kTerminal;
  if (name == "mpi") return launcher::TagStyle::kOpenMpi;
  if (name == "none") return launcher::TagStyle::kNone;
  return launcher::TagStyle::kAuto;
}

int launch(const JobPlan& plan, const Options& o, spdlog::logger& log, launcher::JobEnd* end,
           const NodePart* node) {
  // Should ddlrun die without cleaning up (SIGKILL), its keeper (armed by main) kills what the
  // ranks started and removes the job's directories.
  launcher::remove_stale_dirs();  // what a ddlrun that died with its keeper left
  WorkDir work(plan.job_id);
  launcher::keeper_remove_dir(work.path());
  std::string topology_path = o.topology_file;
  if (topology_path.empty()) {
    topology_path = work.path() + "/topology.yaml";
    comm::write_topology_file(plan.topology, topology_path);
  } else if (topology_path.front() != '/') {
    topology_path = std::filesystem::absolute(topology_path).string();
  }
  launcher::Job job = make_job(plan, topology_path);
  if (job.cwd.empty()) throw launcher::LaunchError(no_working_directory());
  if (node != nullptr) job.token = node->client->welcome().job_token;
  give_python_package(job, log);

  launcher::LaunchOptions lo;
  lo.ddlrun_path = self_path();
  lo.ssh = ssh_probe_options(o, plan.job_id);
  lo.agents = plan.agents;
  lo.mpiargs = plan.mpiargs;
  lo.work_dir = work.path();
  lo.environ = launcher::current_environment();
  lo.verbosity = o.verbosity;
  lo.heartbeat_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(o.heartbeat_timeout * 1000));
  lo.tree_width = o.tree_width;
  // ddlrun serves the runtime's rendezvous: the bootstrap of its own launchers, and the
  // fallback under external ones whose ranks find no PMIx server (srun --mpi=pmi2). In
  // per-node mode node 0 serves it for every node's ranks.
  std::unique_ptr<comm::RendezvousServer> rendezvous;
  if (node == nullptr || node->client->node_rank() == 0) {
    rendezvous = serve_ranks(plan, job.token, node != nullptr, log);
    lo.rendezvous_port = rendezvous->port();
  }
  if (node != nullptr) join_nodes(*node, lo);
  set_backend_options(lo, plan, o);
  std::unique_ptr<launcher::Backend> backend = chosen_backend(plan).make(job, lo);
  if (node != nullptr) backend = node_backend(std::move(backend), *node, lo.heartbeat_timeout);

  std::unique_ptr<launcher::OutputSink> sink =
      o.output_dir.empty() ? launcher::make_terminal_sink(tag_style(o.tag_output))
                           : launcher::make_directory_sink(o.output_dir);
  launcher::SuperviseOptions so;
  so.kill_grace = std::chrono::milliseconds(static_cast<int64_t>(o.kill_grace * 1000));
  if (o.timeout) so.timeout = std::chrono::milliseconds(static_cast<int64_t>(*o.timeout * 1000));
  if (o.timeout_given) {
    so.timeout_given = std::chrono::milliseconds(static_cast<int64_t>(*o.timeout_given * 1000));
  }
  // Past SIGKILL, the ssh launcher declares a host that does not answer lost within the
  // heartbeat deadline; the supervisor's own limit comes after it.
  so.give_up = lo.heartbeat_timeout + std::chrono::seconds(5);
  log.info("starting {} ranks through {}", plan.topology.ranks.size(), backend->name());
  if (node == nullptr) return launcher::supervise(*backend, &plan.topology, so, *sink, end);
  return supervise_node(*node, *backend, plan, so, *sink, end);
}

}  // namespace ddl::ddlrun
