// The srun backend: the job as one Slurm job step, started from inside an allocation.
//
// How it works. check_allocation() makes sure ddlrun runs inside a Slurm job whose node list
// ($SLURM_JOB_NODELIST) holds every planned host. srun_command() writes one host name per rank,
// in rank order, for --distribution=arbitrary ($SLURM_HOSTFILE), so each rank lands on the host
// the plan chose; Slurm numbers a host's tasks (SLURM_LOCALID) in rank order, so CPU binding is
// given per local id (`map_cpu:`/`mask_cpu:`), which works when every host gets the same list
// (the usual case on identical nodes). Otherwise Slurm does not bind and `ddlrun --rank-exec`
// binds each rank itself. The job-wide variables go into srun's environment and are named in
// `--export=ALL,...` (no value on the command line). make_srun_backend() asks the installed
// Slurm which MPI plugins it has (`srun --mpi=list`) and falls back from pmix to pmi2 or none
// with a warning, then hands the command to make_command_backend. With --kill-on-bad-exit the
// first failing rank ends the step; srun then exits with the highest status of its tasks
// (128+15 for those it terminated), which becomes the job's.

#include "launcher/srun/srun.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>

#include "hostfiles/host_list.h"

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

std::string join(const std::vector<std::string>& words, char sep) {
  std::string out;
  for (const std::string& w : words)
    out += (out.empty() ? "" : std::string(1, sep)) + w;
  return out;
}

/// The CPUs Slurm gave the job on each node: $SLURM_JOB_CPUS_PER_NODE ("72(x2),36") against
/// $SLURM_JOB_NODELIST. Empty when either is missing or malformed.
std::map<std::string, int> allocated_cpus(const std::vector<std::string>& environ) {
  const std::optional<std::string> list = environ_value(environ, "SLURM_JOB_NODELIST");
  const std::optional<std::string> cpus = environ_value(environ, "SLURM_JOB_CPUS_PER_NODE");
  if (!list || !cpus) return {};
  std::vector<std::string> nodes;
  try {
    nodes = hostfiles::expand_hostlist(*list, {});
  } catch (const std::exception&) {
    return {};
  }
  std::vector<int> counts;
  size_t pos = 0;
  while (pos < cpus->size()) {
    size_t end = cpus->find(',', pos);
    if (end == std::string::npos) end = cpus->size();
    const std::string item = cpus->substr(pos, end - pos);
    pos = end + 1;
    int n = 0, times = 1;
    if (std::sscanf(item.c_str(), "%d(x%d)", &n, &times) < 1 || n <= 0 || times <= 0 ||
        counts.size() + static_cast<size_t>(times) > nodes.size()) {
      return {};
    }
    counts.insert(counts.end(), static_cast<size_t>(times), n);
  }
  if (counts.size() != nodes.size()) return {};
  std::map<std::string, int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    out[nodes[i]] = counts[i];
  return out;
}

}  // namespace

std::vector<std::string> parse_mpi_list(std::string_view output) {
  std::vector<std::string> plugins;
  size_t pos = 0;
  while (pos < output.size()) {
    size_t end = output.find('\n', pos);
    if (end == std::string_view::npos) end = output.size();
    std::string_view line = output.substr(pos, end - pos);
    pos = end + 1;
    // Plugin names stand alone on their lines ("\tpmix", or "srun: pmix" in older releases).
    if (line.rfind("srun: ", 0) == 0) line.remove_prefix(6);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
      line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r'))
      line.remove_suffix(1);
    if (line.empty() || line.find(' ') != std::string_view::npos ||
        line.find(':') != std::string_view::npos) {
      continue;
    }
    plugins.emplace_back(line);
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

Command srun_command(const Job& job, const LaunchOptions& options, const JobEnvironment& env,
                     const std::string& hostfile_path,
                     const std::vector<std::string>& mpi_plugins) {
  const comm::Topology& t = job.topology;
  std::vector<const comm::RankPlacement*> ranks;
  for (const comm::RankPlacement& r : t.ranks)
    ranks.push_back(&r);
  std::sort(
      ranks.begin(), ranks.end(),
      [](const comm::RankPlacement* a, const comm::RankPlacement* b) { return a->rank < b->rank; });

  Command c;
  // Each host's ranks in rank order: their Slurm local ids.
  std::map<int, std::vector<const comm::RankPlacement*>> by_host;
  bool any_unbound = false;
  for (const comm::RankPlacement* r : ranks) {
    const comm::Host* host = t.find_host(r->host);
    c.hostfile += (host ? host->name : "?") + "\n";
    by_host[r->host].push_back(r);
    any_unbound = any_unbound || r->cpus.empty();
  }

  std::string mpi = "pmix";
  auto has = [&](std::string_view p) {
    return std::find(mpi_plugins.begin(), mpi_plugins.end(), p) != mpi_plugins.end();
  };
  bool served = false;
  for (const EnvVar& e : env.set)
    served = served || e.first == "DDL_RENDEZVOUS";
  if (!has("pmix")) {
    mpi = has("pmi2") ? "pmi2" : "none";
    c.note = "this Slurm has no PMIx plugin (srun --mpi=list: " +
             (mpi_plugins.empty() ? std::string("nothing") : join(mpi_plugins, ' ')) +
             "); starting ranks with --mpi=" + mpi +
             (served ? " (libddl bootstraps through ddlrun's rendezvous server instead)"
                     : " (libddl bootstraps through PMIx: its ranks will not find each other; "
                       "use a Slurm built with PMIx, or --launcher mpirun or --launcher ssh)");
  }

  std::vector<std::string>& a = c.argv;
  a = {"srun", "--mpi=" + mpi,
       "-N",   std::to_string(by_host.size()),
       "-n",   std::to_string(ranks.size())};
  size_t per_host = by_host.empty() ? 0 : by_host.begin()->second.size();
  for (const auto& [host, list] : by_host)
    per_host = list.size() == per_host ? per_host : 0;
  if (per_host != 0) a.push_back("--ntasks-per-node=" + std::to_string(per_host));
  a.push_back("--distribution=arbitrary");

  // Slurm binds only inside the CPUs it gave the job: a plan that uses more of a host (made
  // from the whole host's hardware) is bound by ddlrun --rank-exec instead.
  const std::map<std::string, int> allocated = allocated_cpus(options.environ);
  bool fits = true;
  for (const auto& [host, list] : by_host) {
    const comm::Host* h = t.find_host(host);
    comm::CpuSet used;
    for (const comm::RankPlacement* r : list) {
      for (const comm::CpuSet::Range& range : r->cpus.ranges())
        used.add(range.first, range.last);
    }
    auto it = h == nullptr ? allocated.end() : allocated.find(h->name);
    if (it != allocated.end() && used.size() > it->second && fits && !any_unbound) {
      fits = false;
      c.note += std::string(c.note.empty() ? "" : "; ") + "the plan binds " +
                std::to_string(list.size()) + " ranks to " + std::to_string(used.size()) +
                " CPUs of " + h->name + ", but Slurm job gave " + std::to_string(it->second) +
                " there; Slurm will not bind them and ddlrun --rank-exec binds each rank itself "
                "(ask salloc/sbatch for --exclusive or enough -c to let Slurm bind)";
    }
  }

  // One binding list for every host, by local id, or none.
  std::string bind = "none";
  if (!any_unbound && fits && !by_host.empty()) {
    const std::vector<const comm::RankPlacement*>& first = by_host.begin()->second;
    bool same = true;
    for (const auto& [host, list] : by_host) {
      same = same && list.size() == first.size();
      for (size_t i = 0; same && i < list.size(); ++i)
        same = list[i]->cpus == first[i]->cpus;
    }
    if (same) {
      bool single = true;
      for (const comm::RankPlacement* r : first)
        single = single && r->cpus.size() == 1;
      std::vector<std::string> items;
      for (const comm::RankPlacement* r : first)
        items.push_back(single ? r->cpus.str() : hex_mask(r->cpus));
      bind = (single ? "map_cpu:" : "mask_cpu:") + join(items, ',');
    }
  }
  a.push_back("--cpu-bind=" + bind);
  if (any_unbound) a.push_back("--overcommit");

  const bool slurm_gpus = environ_value(options.environ, "SLURM_JOB_GPUS").has_value() ||
                          environ_value(options.environ, "SLURM_GPUS_ON_NODE").has_value();
  size_t gpus = 0;
  for (const auto& [host, list] : by_host) {
    size_t n = 0;
    for (const comm::RankPlacement* r : list)
      n += r->gpu >= 0 ? 1 : 0;
    gpus = std::max(gpus, n);
  }
  if (slurm_gpus && gpus > 0) {
    a.insert(a.end(), {"--gpus-per-node=" + std::to_string(gpus), "--gpu-bind=none"});
  }
  a.push_back("--kill-on-bad-exit=1");
  a.push_back("--export=ALL" + (env.names.empty() ? "" : "," + join(env.names, ',')));
  for (const std::string& w : rank_exec_command(options.ddlrun_path, job.argv))
    a.push_back(w);

  c.env = env.set;
  c.env.emplace_back("SLURM_HOSTFILE", hostfile_path);
  return c;
}

}  // namespace srun

namespace {

/// Runs argv (found on environ's $PATH) with `environ`; its stdout and stderr together, and
/// its exit status (-1 when it could not start).
std::pair<std::string, int> capture(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& environ) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {std::strerror(errno), -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> cargv;
  for (const std::string& s : argv)
    cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (const std::string& s : environ)
    cenv.push_back(const_cast<char*>(s.c_str()));
  cenv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return {std::strerror(rc), -1};
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
}

}  // namespace

std::unique_ptr<Backend> make_srun_backend(const Job& job, const LaunchOptions& options) {
  srun::check_allocation(job, options.environ);
  const std::string srun =
      find_in_path("srun", environ_value(options.environ, "PATH").value_or("/usr/bin:/bin"));
  if (srun.empty()) {
    throw LaunchError(
        "srun launcher: srun is not on $PATH; add Slurm's bin directory to $PATH (Debian: "
        "apt-get install slurm-client), or use --launcher mpirun or --launcher ssh");
  }
  const auto [list, status] = capture({srun, "--mpi=list"}, options.environ);
  if (status != 0) {
    std::string why = list;
    while (!why.empty() && why.back() == '\n')
      why.pop_back();
    throw LaunchError("srun launcher: '" + srun + " --mpi=list' failed (status " +
                      std::to_string(status) + "): " + why +
                      " (check $SLURM_CONF and that slurmctld is reachable)");
  }
  if (options.work_dir.empty()) {
    throw LaunchError("srun launcher: no work directory for the host file (internal error)");
  }
  const std::string hostfile_path = options.work_dir + "/slurm_hostfile";
  const JobEnvironment env =
      job_environment(job, external_rendezvous(job, options.rendezvous_port), options.environ);
  srun::Command command =
      srun::srun_command(job, options, env, hostfile_path, srun::parse_mpi_list(list));
  command.argv[0] = srun;

  write_work_file(hostfile_path, command.hostfile, "srun launcher");
  if (!command.note.empty()) std::cerr << "ddlrun: warning: " << command.note << std::endl;
  if (options.verbosity > 0) {
    std::cerr << "ddlrun: srun command: SLURM_HOSTFILE=" << hostfile_path << " "
              << shell_join(command.argv) << std::endl;
  }
  return make_command_backend("srun", std::move(command.argv), std::move(command.env), options);
}

}  // namespace ddl::launcher
