// How `ddlrun --rank-exec` works, and what the external launchers hand it.
//
// mpirun, srun, prterun and jsrun start each rank as `ddlrun --rank-exec -- program args...`.
// The launcher gives every rank the same few job-wide variables (job_environment(): the
// topology file's path, the token, the rendezvous, the names of the user's exports, the cores
// per rank) plus its own rank variable (OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID, ...).
// rank_exec_main() then
//   1. finds its global rank (launcher_rank),
//   2. reads the topology file named by $DDL_TOPOLOGY_FILE and finds its placement,
//   3. rebuilds the Job (topology, token, the exports named by $DDL_EXPORTS with the values it
//      inherited, the cores from $DDL_CORES) and sets every variable rank_environment() gives
//      that rank, so a rank started by mpirun sees exactly what a rank started by the local
//      backend sees,
//   4. binds itself to its CPU set unless the launcher already bound it inside that set (an
//      empty set means "not bound": the affinity it inherited is left alone),
//   5. execs the program with execvp, arguments untouched.
// Every failure is one line on stderr naming the rank, the variable or file, and what to do.

#include "launcher/rank_exec.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>

#include "base/fd.h"
#include "base/net/listener.h"
#include "base/text.h"
#include "comm/comm.h"
#include "launcher/backend.h"
#include "launcher/external.h"
#include "launcher/job.h"
#include "launcher/process.h"

namespace ddl::launcher {

namespace {

/// Variables an external launcher forwards when ddlrun has them, besides the job's own.
constexpr std::string_view kPassThrough[] = {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH",
                                             "OMP_NUM_THREADS"};

using base::parse_int;

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

/// A failure of rank_exec_main: the message and the exit status.
struct Failure {
  std::string message;
  int status = 1;
};

std::string required(const char* name, const std::string& who) {
  std::optional<std::string> v = get(name);
  if (!v || v->empty()) {
    throw Failure{who + ": $" + name +
                  " is not set; it is set by ddlrun for the ranks it starts (run the program "
                  "through ddlrun, not through the launcher directly)"};
  }
  return *v;
}

/// The process's current CPU affinity, or an empty set when it cannot be read.
comm::CpuSet current_affinity() {
  for (int n = 1024; n <= (1 << 20); n *= 4) {
    cpu_set_t* set = CPU_ALLOC(n);
    const size_t bytes = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) {
      std::vector<int> pus;
      for (int pu = 0; pu < n; ++pu) {
        if (CPU_ISSET_S(pu, bytes, set)) pus.push_back(pu);
      }
      CPU_FREE(set);
      return comm::CpuSet::of(pus);
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;
  }
  return {};
}

bool is_subset(const comm::CpuSet& inner, const comm::CpuSet& outer) {
  for (const comm::CpuSet::Range& r : inner.ranges()) {
    for (int pu = r.first; pu <= r.last; ++pu) {
      if (!outer.contains(pu)) return false;
    }
  }
  return true;
}

void bind_to(const comm::CpuSet& cpus, const std::string& who) {
  if (cpus.empty()) return;
  const comm::CpuSet now = current_affinity();
  if (!now.empty() && is_subset(now, cpus)) return;
  const int n = cpus.ranges().back().last + 1;
  cpu_set_t* set = CPU_ALLOC(n);
  const size_t bytes = CPU_ALLOC_SIZE(n);
  CPU_ZERO_S(bytes, set);
  for (int pu : cpus.pus())
    CPU_SET_S(pu, bytes, set);
  const int rc = sched_setaffinity(0, bytes, set);
  const int err = errno;
  CPU_FREE(set);
  if (rc != 0) {
    throw Failure{who + ": cannot bind to CPUs " + cpus.str() + ": " + std::strerror(err) +
                  " (the launcher or a cgroup allows only CPUs " + now.str() +
                  "; give the job those CPUs, or plan it on this host's real hardware)"};
  }
}

/// Writes the topology text that came in $DDL_TOPOLOGY_TEXT on a host that lacks the file, at
/// `path` (its directory created 0700; concurrent ranks each write a complete file and rename
/// it into place). Not Open MPI's session directory: the first rank to exit removes it.
/// Returns where it is.
std::string copy_topology(const std::string& text, const std::string& path,
                          const std::string& who) {
  const comm::Topology t = comm::parse_topology(text, "$" + std::string(kTopologyTextVariable));
  std::string where = path;
  if (const size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
    const std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw Failure{who + ": cannot create " + dir +
                    " for the topology file: " + std::strerror(errno) +
                    " (put the topology file on a shared file system with --topology-file)"};
    }
  }
  comm::write_topology_file(t, where);
  return where;
}

/// The program and its arguments: what follows `--rank-exec --`.
std::vector<std::string> program_argv(const std::vector<std::string>& args) {
  size_t first = 0;
  if (first < args.size() && args[first] == "--rank-exec") ++first;
  if (first < args.size() && args[first] == "--") ++first;
  if (first == args.size()) {
    throw Failure{"no program given (usage: ddlrun --rank-exec -- program [args...])", 2};
  }
  return std::vector<std::string>(args.begin() + static_cast<ptrdiff_t>(first), args.end());
}

/// This process's global rank, from the variable its launcher set.
int this_rank() {
  const std::optional<int> rank = launcher_rank(
      [](const char* name, void*) -> std::optional<std::string> { return get(name); });
  if (!rank) {
    std::string names;
    for (const comm::RankVariable* v : comm::rank_variables_of(&comm::RankVariable::rank_exec))
      names += (names.empty() ? "$" : ", $") + std::string(v->rank);
    throw Failure{"cannot tell which rank this is: none of " + names +
                  " is set (ddlrun --rank-exec runs under mpirun, srun, prterun or jsrun "
                  "started by ddlrun)"};
  }
  return *rank;
}

/// Reads the topology file named by $DDL_TOPOLOGY_FILE into `job`, written first from
/// $DDL_TOPOLOGY_TEXT (which the program does not inherit) on a host that lacks it.
void read_topology(Job& job, const std::string& who) {
  job.topology_path = required("DDL_TOPOLOGY_FILE", who);
  const std::optional<std::string> text = get(std::string(kTopologyTextVariable).c_str());
  unsetenv(std::string(kTopologyTextVariable).c_str());
  try {
    if (text && access(job.topology_path.c_str(), F_OK) != 0) {
      job.topology_path = copy_topology(*text, job.topology_path, who);
    }
    job.topology = comm::read_topology_file(job.topology_path);
  } catch (const comm::TopologyError& e) {
    throw Failure{who + ": " + e.what() +
                  " (every host needs the topology file at this path: use a shared file "
                  "system, or --launcher ssh, which copies it)"};
  }
}

/// $MASTER_ADDR and $MASTER_PORT.
Rendezvous master_rendezvous(const std::string& who) {
  Rendezvous rendezvous;
  rendezvous.address = required("MASTER_ADDR", who);
  const std::string master_port = required("MASTER_PORT", who);
  const std::optional<int> mport = parse_int(master_port);
  if (!mport) {
    throw Failure{who + ": malformed $MASTER_PORT '" + master_port +
                  "' (expected a port); unset it and let ddlrun set it"};
  }
  rendezvous.master_port = *mport;
  return rendezvous;
}

/// $DDL_RENDEZVOUS (`meet`, "host:port" or "[v6 address]:port") into `rendezvous`.
void read_ddl_rendezvous(const std::string& meet, const std::string& who, Rendezvous& rendezvous) {
  const auto split = base::net::split_host_port(meet);
  const std::optional<int> dport = split ? parse_int(split->second) : std::nullopt;
  if (!dport) {
    throw Failure{who + ": malformed $DDL_RENDEZVOUS '" + meet +
                  "' (expected host:port); unset it and let ddlrun set it"};
  }
  rendezvous.ddl_address = split->first;
  rendezvous.ddl_port = *dport;
}

/// The user's exports (-x): the variables $DDL_EXPORTS names, with the values inherited.
void read_exports(Job& job) {
  std::optional<std::string> names = get(std::string(kExportsVariable).c_str());
  if (!names) return;
  size_t pos = 0;
  while (pos < names->size()) {
    size_t end = names->find(' ', pos);
    if (end == std::string::npos) end = names->size();
    const std::string name = names->substr(pos, end - pos);
    if (std::optional<std::string> value = get(name.c_str()); !name.empty() && value) {
      job.exports.emplace_back(name, *value);
    }
    pos = end + 1;
  }
}

const comm::RankPlacement& placement_of(const Job& job, int rank, const std::string& who) {
  const comm::RankPlacement* placement = job.topology.find_rank(rank);
  if (placement == nullptr) {
    throw Failure{who + ": not in the topology file " + job.topology_path + " (it has " +
                  std::to_string(job.topology.ranks.size()) +
                  " ranks); the launcher started more ranks than ddlrun planned: do not pass "
                  "-n/-np through --mpiarg"};
  }
  return *placement;
}

/// Sets every variable rank_environment() gives this rank ($DDL_RENDEZVOUS only when ddlrun
/// serves the rendezvous: `served`).
void set_rank_environment(const Job& job, int rank, const Rendezvous& rendezvous, bool served,
                          const std::string& who) {
  const Inherited inherited = inherited_from(current_environment());
  for (const EnvVar& e : rank_environment(job, rank, rendezvous, job.topology_path, inherited)) {
    if (e.first == "DDL_RENDEZVOUS" && !served) continue;
    if (setenv(e.first.c_str(), e.second.c_str(), 1) != 0) {
      throw Failure{who + ": cannot set $" + e.first + ": " + std::strerror(errno)};
    }
  }
}

/// Execs `argv`; throws the Failure that names why it could not.
[[noreturn]] void exec_program(const std::vector<std::string>& argv, const std::string& who) {
  std::vector<char*> cargv;
  for (const std::string& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  execvp(cargv[0], cargv.data());
  const int err = errno;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  throw Failure{who + ": cannot run '" + argv[0] + "' on " + host + ": " + std::strerror(err) +
                    (err == ENOENT ? " (check the program's name and $PATH on that host)"
                                   : " (check that it is an executable file)"),
                err == ENOENT ? 127 : 1};
}

/// The steps of the "how it works" block above; returns only by throwing a Failure.
[[noreturn]] void run(const std::vector<std::string>& args) {
  const std::vector<std::string> argv = program_argv(args);
  const int rank = this_rank();
  const std::string who = "rank " + std::to_string(rank);

  Job job;
  job.argv = argv;
  read_topology(job, who);
  job.token = required("DDL_JOB_TOKEN", who);
  Rendezvous rendezvous = master_rendezvous(who);
  // $DDL_RENDEZVOUS is there only when ddlrun serves the rendezvous; otherwise the ranks
  // bootstrap through PMIx and it stays unset.
  const std::optional<std::string> meet = get("DDL_RENDEZVOUS");
  if (meet) read_ddl_rendezvous(*meet, who, rendezvous);
  read_exports(job);
  if (std::optional<std::string> cores = get(std::string(kCoresVariable).c_str())) {
    job.cores = decode_cores(*cores);
  }
  job.python_dir = get(std::string(kPythonDirVariable).c_str()).value_or("");

  const comm::RankPlacement& placement = placement_of(job, rank, who);
  set_rank_environment(job, rank, rendezvous, meet.has_value(), who);
  bind_to(placement.cpus, who);
  exec_program(argv, who);
}

}  // namespace

std::optional<int> launcher_rank(hostfiles::GetEnv getenv_fn, void* env_context) {
  for (const comm::RankVariable* row : comm::rank_variables_of(&comm::RankVariable::rank_exec)) {
    std::optional<std::string> v = getenv_fn(std::string(row->rank).c_str(), env_context);
    if (!v || v->empty()) continue;
    std::optional<int> rank = parse_int(*v);
    if (rank && *rank >= 0) return rank;
  }
  return std::nullopt;
}

int rank_exec_main(const std::vector<std::string>& args) {
  try {
    run(args);
  } catch (const Failure& f) {
    std::cerr << "ddlrun --rank-exec: error: " << f.message << std::endl;
    return f.status;
  } catch (const std::exception& e) {
    std::cerr << "ddlrun --rank-exec: error: " << e.what() << std::endl;
    return 1;
  }
}

// --- the launcher's side -----------------------------------------------------------------

std::optional<std::string> environ_value(const std::vector<std::string>& environ,
                                         std::string_view name) {
  std::optional<std::string> value;
  for (const std::string& e : environ) {
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
      value = e.substr(name.size() + 1);
  }
  return value;
}

std::string encode_cores(const std::vector<int>& cores) {
  bool known = false;
  for (int c : cores)
    known = known || c > 0;
  if (!known) return "";
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j < cores.size() && cores[j] == cores[i])
      ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(j - i) + "*" + std::to_string(std::max(cores[i], 0));
    i = j;
  }
  return out;
}

std::vector<int> decode_cores(std::string_view text) {
  std::vector<int> cores;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view run = text.substr(pos, end - pos);
    const size_t star = run.find('*');
    if (star == std::string_view::npos) return {};
    std::optional<int> count = parse_int(run.substr(0, star));
    std::optional<int> value = parse_int(run.substr(star + 1));
    if (!count || !value || *count <= 0 || *value < 0 ||
        cores.size() + static_cast<size_t>(*count) > (1u << 24)) {
      return {};
    }
    cores.insert(cores.end(), static_cast<size_t>(*count), *value);
    pos = end + 1;
  }
  return cores;
}

JobEnvironment job_environment(const Job& job, const Rendezvous& rendezvous,
                               const std::vector<std::string>& environ) {
  JobEnvironment out;
  auto set = [&out](const std::string& name, const std::string& value) {
    set_variable(out.set, name, value);
  };
  set("DDL_TOPOLOGY_FILE", job.topology_path);
  set("DDL_JOB_TOKEN", job.token);
  if (rendezvous.ddl_port != 0) {
    set("DDL_RENDEZVOUS",
        base::net::join_host_port(
            rendezvous.ddl_address.empty() ? rendezvous.address : rendezvous.ddl_address,
            rendezvous.ddl_port));
  }
  set("MASTER_ADDR", rendezvous.address);
  set("MASTER_PORT", std::to_string(rendezvous.master_port));
  set("DDL_OPTIONS", "-mode " + job.topology.mode.str());
  if (std::string cores = encode_cores(job.cores); !cores.empty()) {
    set(std::string(kCoresVariable), cores);
  }
  if (!job.python_dir.empty()) set(std::string(kPythonDirVariable), job.python_dir);
  if (job.topology.hosts.size() > 1) {
    std::string text = comm::format_topology(job.topology);
    if (text.size() <= kInlineTopologyMax) set(std::string(kTopologyTextVariable), text);
  }
  if (!job.exports.empty()) {
    std::string names;
    std::set<std::string> seen;
    for (const EnvVar& e : job.exports) {
      if (!seen.insert(e.first).second) continue;
      names += (names.empty() ? "" : " ") + e.first;
    }
    set(std::string(kExportsVariable), names);
  }
  for (const EnvVar& e : job.exports)
    set(e.first, e.second);

  for (const EnvVar& e : out.set)
    out.names.push_back(e.first);
  for (std::string_view name : kPassThrough) {
    const bool have = std::find(out.names.begin(), out.names.end(), name) != out.names.end();
    if (!have && environ_value(environ, name)) out.names.emplace_back(name);
  }
  return out;
}

Rendezvous external_rendezvous(const Job& job, int rendezvous_port) {
  Rendezvous r;
  const comm::RankPlacement* zero = job.topology.find_rank(0);
  const comm::Host* host = zero == nullptr ? nullptr : job.topology.find_host(zero->host);
  if (host != nullptr) r.address = host->address.empty() ? host->name : host->address;
  r.master_port = free_tcp_port();
  if (rendezvous_port != 0) {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    r.ddl_address = name;
    r.ddl_port = rendezvous_port;
  }
  return r;
}

std::vector<std::string> rank_exec_command(const std::string& ddlrun_path,
                                           const std::vector<std::string>& argv) {
  std::vector<std::string> out = {ddlrun_path, "--rank-exec", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

void write_work_file(const std::string& path, const std::string& text, std::string_view launcher) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err = fd < 0 ? errno : base::write_all(fd, text);
  if (fd >= 0 && close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    const size_t slash = path.rfind('/');
    throw LaunchError(std::string(launcher) + ": cannot write " + path + ": " + std::strerror(err) +
                      " (check the free space and permissions of " +
                      (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) +
                      ")");
  }
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty();
    for (char c : a) {
      plain = plain && (std::isalnum(static_cast<unsigned char>(c)) ||
                        std::strchr("@%_+=:,./-", c) != nullptr);
    }
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

std::string find_in_path(const std::string& program, std::string_view path) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) {
    return access(program.c_str(), X_OK) == 0 ? program : "";
  }
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find(':', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string dir(path.substr(pos, end - pos));
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    pos = end + 1;
  }
  return "";
}

}  // namespace ddl::launcher
