// The srun backend: the job as one Slurm job step, started from inside an allocation.
//
// How it works. check_allocation() makes sure ddlrun runs inside a Slurm job whose node list
// ($SLURM_JOB_NODELIST) holds every planned host. srun_command() writes one host name per rank,
// in rank order, for --distribution=arbitrary ($SLURM_HOSTFILE), so each rank lands on the host
// the plan chose; Slurm numbers a host's tasks (SLURM_LOCALID) in rank order, so CPU binding is
// given per local id (`map_cpu:`/`mask_cpu:`), which works when every host gets the same list
// (the usual case on identical nodes). Otherwise Slurm does not bind and `ddlrun --rank-exec`
// binds each rank itself. The job-wide variables go into srun's environment and are named in
// `--export=ALL,...` (no value on the command line). srun::Launcher, run by
// make_external_backend (external.h), asks the installed Slurm which MPI plugins it has
// (`srun --mpi=list`) and falls back from pmix to pmi2 or none with a warning. With
// --kill-on-bad-exit the first failing rank ends the step; srun then exits with the highest
// status of its tasks (128+15 for those it terminated), which becomes the job's.

#include "launcher/srun/srun.h"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>

#include "base/subprocess.h"
#include "base/text.h"
#include "hostfiles/hostfiles.h"

namespace ddl::launcher {

namespace srun {

namespace {

/// The CPU set as a Slurm hexadecimal mask: {0-3} -> "0xF", {4} -> "0x10".
std::string hex_mask(const comm::CpuSet& cpus) {
  const int last = cpus.ranges().back().last;
  std::string out;
  for (int nibble = last / 4; nibble >= 0; --nibble) {
    int v = 0;
    for (int bit = 0; bit < 4; ++bit) {
      if (cpus.contains(nibble * 4 + bit)) v |= 1 << bit;
    }
    out += "0123456789ABCDEF"[v];
  }
  return "0x" + out;
}

/// The CPUs Slurm gave the job on each node: $SLURM_JOB_CPUS_PER_NODE ("72(x2),36") against
/// $SLURM_JOB_NODELIST. Empty when either is missing or malformed.
std::map<std::string, int> allocated_cpus(const std::vector<std::string>& environ) {
  const std::optional<std::string> list = environ_value(environ, "SLURM_JOB_NODELIST");
  const std::optional<std::string> cpus = environ_value(environ, "SLURM_JOB_CPUS_PER_NODE");
  if (!list || !cpus) return {};
  std::vector<std::string> nodes;
  std::vector<int> counts;  // the format of $SLURM_TASKS_PER_NODE
  try {
    nodes = hostfiles::expand_hostlist(*list, {});
    counts = hostfiles::parse_slurm_tasks_per_node(*cpus);
  } catch (const std::exception&) {
    return {};
  }
  if (counts.size() != nodes.size()) return {};
  std::map<std::string, int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    out[nodes[i]] = counts[i];
  return out;
}

/// The plan as Slurm sees it: each host's ranks in rank order, which is how Slurm numbers a
/// host's tasks (SLURM_LOCALID).
struct Tasks {
  std::map<int, std::vector<const comm::RankPlacement*>> by_host;  ///< by host index
  size_t count = 0;
  bool any_unbound = false;  ///< some rank has no CPU set: the hosts are oversubscribed
};

Tasks tasks_of(const comm::Topology& t) {
  Tasks tasks;
  for (const comm::RankPlacement* r : ranks_in_order(t)) {
    tasks.by_host[r->host].push_back(r);
    ++tasks.count;
    tasks.any_unbound = tasks.any_unbound || r->cpus.empty();
  }
  return tasks;
}

/// One host name per rank, in rank order: --distribution=arbitrary's $SLURM_HOSTFILE.
std::string hostfile_text(const comm::Topology& t) {
  std::string out;
  for (const comm::RankPlacement* r : ranks_in_order(t))
    out += host_name_of(t, r->host) + "\n";
  return out;
}

/// The MPI plugin (pmix, else pmi2, else none) and, when it is not pmix, why, for a warning.
std::pair<std::string, std::string> choose_mpi(const std::vector<std::string>& plugins,
                                               const JobEnvironment& env) {
  auto has = [&](std::string_view p) {
    return std::find(plugins.begin(), plugins.end(), p) != plugins.end();
  };
  if (has("pmix")) return {"pmix", ""};
  const std::string mpi = has("pmi2") ? "pmi2" : "none";
  const bool served = std::any_of(env.set.begin(), env.set.end(),
                                  [](const EnvVar& e) { return e.first == "DDL_RENDEZVOUS"; });
  return {mpi, "this Slurm has no PMIx plugin (srun --mpi=list: " +
                   (plugins.empty() ? std::string("nothing") : base::join(plugins, " ")) +
                   "); starting ranks with --mpi=" + mpi +
                   (served ? " (libddl bootstraps through ddlrun's rendezvous server instead)"
                           : " (libddl bootstraps through PMIx: its ranks will not find each "
                             "other; use a Slurm built with PMIx, or --launcher mpirun or "
                             "--launcher ssh)")};
}

/// The number of tasks of every host when they all have the same; 0 otherwise.
size_t tasks_per_node(const Tasks& tasks) {
  size_t per_host = tasks.by_host.empty() ? 0 : tasks.by_host.begin()->second.size();
  for (const auto& [host, list] : tasks.by_host)
    per_host = list.size() == per_host ? per_host : 0;
  return per_host;
}

/// Slurm binds only inside the CPUs it gave the job: why it cannot bind a plan that uses more
/// of a host (made from the whole host's hardware), naming the first such host; "" when the
/// plan fits.
std::string beyond_allocation(const comm::Topology& t, const Tasks& tasks,
                              const std::vector<std::string>& environ) {
  const std::map<std::string, int> allocated = allocated_cpus(environ);
  for (const auto& [host, list] : tasks.by_host) {
    const comm::Host* h = t.find_host(host);
    comm::CpuSet used;
    for (const comm::RankPlacement* r : list) {
      for (const comm::CpuSet::Range& range : r->cpus.ranges())
        used.add(range.first, range.last);
    }
    auto it = h == nullptr ? allocated.end() : allocated.find(h->name);
    if (it != allocated.end() && used.size() > it->second) {
      return "the plan binds " + std::to_string(list.size()) + " ranks to " +
             std::to_string(used.size()) + " CPUs of " + h->name + ", but Slurm job gave " +
             std::to_string(it->second) +
             " there; Slurm will not bind them and ddlrun --rank-exec binds each rank itself "
             "(ask salloc/sbatch for --exclusive or enough -c to let Slurm bind)";
    }
  }
  return "";
}

/// One binding list for every host, by local id: `map_cpu:` when every rank has one PU,
/// else `mask_cpu:`; `none` when the hosts' lists differ or a rank has no CPU set.
std::string cpu_bind(const Tasks& tasks) {
  if (tasks.any_unbound || tasks.by_host.empty()) return "none";
  const std::vector<const comm::RankPlacement*>& first = tasks.by_host.begin()->second;
  for (const auto& [host, list] : tasks.by_host) {
    if (list.size() != first.size()) return "none";
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i]->cpus != first[i]->cpus) return "none";
    }
  }
  const bool single = std::all_of(first.begin(), first.end(),
                                  [](const comm::RankPlacement* r) { return r->cpus.size() == 1; });
  std::vector<std::string> items;
  for (const comm::RankPlacement* r : first)
    items.push_back(single ? r->cpus.str() : hex_mask(r->cpus));
  return (single ? "map_cpu:" : "mask_cpu:") + base::join(items, ",");
}

/// The most GPUs the ranks of one host use.
size_t gpus_per_node(const Tasks& tasks) {
  size_t gpus = 0;
  for (const auto& [host, list] : tasks.by_host) {
    gpus = std::max(gpus, static_cast<size_t>(std::count_if(
                              list.begin(), list.end(),
                              [](const comm::RankPlacement* r) { return r->gpu >= 0; })));
  }
  return gpus;
}

}  // namespace

std::vector<std::string> parse_mpi_list(std::string_view output) {
  std::vector<std::string> plugins;
  std::istringstream lines{std::string(output)};
  for (std::string text; std::getline(lines, text);) {
    std::string_view line = text;
    // Plugin names stand alone on their lines ("\tpmix", or "srun: pmix" in older releases).
    if (line.starts_with("srun: ")) line.remove_prefix(6);
    line = base::trim(line.substr(0, line.find_last_not_of(" \t\r") + 1), " \t");
    if (!line.empty() && line.find_first_of(" :") == std::string_view::npos) {
      plugins.emplace_back(line);
    }
  }
  return plugins;
}

void check_allocation(const Job& job, const std::vector<std::string>& environ) {
  const std::optional<std::string> id = environ_value(environ, "SLURM_JOB_ID");
  const std::optional<std::string> list = environ_value(environ, "SLURM_JOB_NODELIST");
  if (!id || id->empty() || !list || list->empty()) {
    throw LaunchError(
        "srun launcher: not inside a Slurm allocation ($SLURM_JOB_ID and $SLURM_JOB_NODELIST "
        "are not set); run ddlrun inside salloc or an sbatch script, or use --launcher mpirun "
        "or --launcher ssh");
  }
  std::vector<std::string> nodes;
  try {
    nodes = hostfiles::expand_hostlist(*list, {});
  } catch (const std::exception& e) {
    throw LaunchError("srun launcher: cannot read $SLURM_JOB_NODELIST '" + *list +
                      "': " + e.what());
  }
  for (const comm::Host& h : job.topology.hosts) {
    if (std::find(nodes.begin(), nodes.end(), h.name) == nodes.end()) {
      throw LaunchError("srun launcher: host " + h.name + " is not in Slurm job " + *id +
                        " (its nodes are " + *list +
                        "); leave out -H/--hostfile to use the allocation's nodes, or ask "
                        "salloc/sbatch for that host");
    }
  }
}

ExternalCommand srun_command(const Job& job, const LaunchOptions& options,
                             const JobEnvironment& env, const std::string& hostfile_path,
                             const std::vector<std::string>& mpi_plugins) {
  const comm::Topology& t = job.topology;
  const Tasks tasks = tasks_of(t);
  ExternalCommand c;
  c.work_file = {hostfile_path, hostfile_text(t)};
  const auto [mpi, mpi_note] = choose_mpi(mpi_plugins, env);
  const std::string beyond = tasks.any_unbound ? "" : beyond_allocation(t, tasks, options.environ);
  c.note = mpi_note + (!mpi_note.empty() && !beyond.empty() ? "; " : "") + beyond;

  std::vector<std::string>& a = c.argv;
  a = {"srun", "--mpi=" + mpi,
       "-N",   std::to_string(tasks.by_host.size()),
       "-n",   std::to_string(tasks.count)};
  if (const size_t n = tasks_per_node(tasks); n != 0) {
    a.push_back("--ntasks-per-node=" + std::to_string(n));
  }
  a.push_back("--distribution=arbitrary");
  a.push_back("--cpu-bind=" + (beyond.empty() ? cpu_bind(tasks) : std::string("none")));
  if (tasks.any_unbound) a.push_back("--overcommit");
  const bool slurm_gpus = environ_value(options.environ, "SLURM_JOB_GPUS").has_value() ||
                          environ_value(options.environ, "SLURM_GPUS_ON_NODE").has_value();
  if (const size_t gpus = gpus_per_node(tasks); slurm_gpus && gpus > 0) {
    a.insert(a.end(), {"--gpus-per-node=" + std::to_string(gpus), "--gpu-bind=none"});
  }
  a.push_back("--kill-on-bad-exit=1");
  a.push_back("--export=ALL" + (env.names.empty() ? "" : "," + base::join(env.names, ",")));
  for (const std::string& w : rank_exec_command(options.ddlrun_path, job.argv))
    a.push_back(w);

  c.env = env.set;
  c.env.emplace_back("SLURM_HOSTFILE", hostfile_path);
  return c;
}

namespace {

/// Runs argv (argv[0] a path) with `environ`; its stdout and stderr together, and its exit
/// status (128 + the signal that ended it; -1 when it could not start).
std::pair<std::string, int> capture(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& environ) {
  base::CaptureOptions options;
  options.environ = environ;
  options.merge_stderr = true;
  const base::Captured c = base::run_capture(argv, options);
  if (c.spawn_error != 0) return {std::strerror(c.spawn_error), -1};
  return {c.out, c.signal != 0 ? 128 + c.signal : c.exit_status};
}

constexpr ExternalLauncher::Names kNames = {
    "srun",
    "srun launcher: srun is not on $PATH; add Slurm's bin directory to $PATH (Debian: apt-get "
    "install slurm-client), or use --launcher mpirun or --launcher ssh",
    "slurm_hostfile", "host file"};

class Launcher : public ExternalLauncher {
 public:
  Launcher() : ExternalLauncher(kNames) {}

  void check_site(const Job& job, const LaunchOptions& options) override {
    check_allocation(job, options.environ);
  }
  /// Asks the installed Slurm which MPI plugins it has (`srun --mpi=list`).
  void check_program(const std::string& path, const LaunchOptions& options) override {
    const auto [list, status] = capture({path, "--mpi=list"}, options.environ);
    if (status != 0) {
      const std::string why = list.substr(0, list.find_last_not_of('\n') + 1);
      throw LaunchError("srun launcher: '" + path + " --mpi=list' failed (status " +
                        std::to_string(status) + "): " + why +
                        " (check $SLURM_CONF and that slurmctld is reachable)");
    }
    plugins_ = parse_mpi_list(list);
  }
  ExternalCommand command(const Job& job, const LaunchOptions& options, const JobEnvironment& env,
                          const std::string& work_file_path) const override {
    return srun_command(job, options, env, work_file_path, plugins_);
  }
  void describe(std::ostream& out, const ExternalCommand& command) const override {
    out << "ddlrun: srun command: SLURM_HOSTFILE=" << command.work_file.path << " "
        << shell_join(command.argv) << std::endl;
  }

 private:
  /// What `srun --mpi=list` said; a preview, which asks nothing, assumes pmix.
  std::vector<std::string> plugins_ = {"pmix"};
};

}  // namespace

}  // namespace srun

std::unique_ptr<ExternalLauncher> make_srun_launcher(const LaunchOptions&) {
  return std::make_unique<srun::Launcher>();
}

const BackendDescriptor kSrunBackend{.name = "srun",
                                     .auto_rank = 1,
                                     .automatic = [](const Situation& s) { return s.in_slurm_job; },
                                     .why = "inside a Slurm job ($SLURM_JOB_ID is set)",
                                     .make_launcher = make_srun_launcher};

}  // namespace ddl::launcher
