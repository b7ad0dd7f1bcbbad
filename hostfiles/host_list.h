#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hostfiles/input_error.h"

namespace ddl::hostfiles {

/// Which kind of input named a host.
enum class SourceKind {
  kDefault,          ///< nothing named hosts: this host alone
  kHostsOption,      ///< -H / --hosts
  kOpenMpiHostfile,  ///< "host slots=4 max_slots=8"
  kMpichHostfile,    ///< "host:4"
  kPlainHostfile,    ///< one host per line, repeats add slots
  kLsfHostfile,      ///< $LSB_DJOB_HOSTFILE: one line per slot
  kLsfMcpuHosts,     ///< $LSB_MCPU_HOSTS: "host n host n ..."
  kSlurm,            ///< $SLURM_JOB_NODELIST with $SLURM_TASKS_PER_NODE
  kRankfile,         ///< hosts named by an Open MPI rankfile
};

/// Short lowercase name for tables and YAML: "default", "-H", "openmpi-hostfile",
/// "mpich-hostfile", "plain-hostfile", "lsf-hostfile", "lsf-mcpu-hosts", "slurm", "rankfile".
std::string_view to_string(SourceKind kind);

/// One host of a job, with the number of slots (rank places) the input gave it.
struct Host {
  std::string name;  ///< host name or address; IPv6 without brackets ("fe80::1")
  int slots = 1;
  std::optional<int> max_slots;  ///< Open MPI's max_slots=, when given
  bool slots_given = false;  ///< a count was written (slots=, :N, LSF/Slurm); false when counted
  SourceKind kind = SourceKind::kDefault;
  std::string origin;  ///< where it was first named: "hosts.txt:3", "-H", "$LSB_MCPU_HOSTS"

  bool operator==(const Host&) const = default;
};

/// Hosts in the order they were first named, each once.
class HostList {
 public:
  /// Adds one entry read at `where`. A host already listed is merged:
  /// - both entries without a count (bare names): the slots add up ("-H a,a,b" gives a 2 slots);
  /// - otherwise, if either entry gave a count (slots=, :N) the repeat is a conflict and throws
  ///   InputError at `where`, naming the earlier origin and the fix ("list each host once").
  /// Host names compare without regard to ASCII case. Merged slots above 1,048,576 throw.
  void add(Host host, const Position& where);

  const std::vector<Host>& hosts() const { return hosts_; }
  size_t size() const { return hosts_.size(); }
  bool empty() const { return hosts_.empty(); }
  /// The sum of all hosts' slots (INT_MAX when it would be larger).
  int total_slots() const;
  /// The host of that name, ignoring ASCII case; nullptr when not listed.
  const Host* find(std::string_view name) const;

 private:
  std::vector<Host> hosts_;
  std::unordered_map<std::string, size_t> index_;  ///< lowercased name -> index in hosts_
};

/// Expands a Slurm-style host list: "node[01-04,07],gpu[1-2]" -> node01 node02 node03 node04
/// node07 gpu1 gpu2. Commas inside brackets separate ranges; commas outside separate names. A
/// name may hold several bracket groups ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). Zero padding
/// follows the width of the range's first number when it starts with 0. Errors (bad ranges
/// such as "node[5-2]", unclosed brackets, empty names, more than 1,000,000 names) throw
/// InputError with `where` (source/line/line_text) and a column offset into `text` added to
/// `where.column` (the column where `text` starts, 1 when it is the whole line).
std::vector<std::string> expand_hostlist(std::string_view text, const Position& where);

/// Parses a -H / --hosts argument: comma-separated "host", "host:slots", "[ipv6]",
/// "[ipv6]:slots", Slurm bracket ranges ("node[01-04]:2" gives each node 2 slots).
/// `source` names the option in errors ("-H"). Empty lists and empty names are errors.
HostList parse_hosts_option(std::string_view text, std::string_view source = "-H");

/// Parses a hostfile; the format is recognised per line:
///   Open MPI: "host slots=4 max_slots=8" ("max-slots=" too; unknown keys are errors with a
///             suggestion, slots=0 and max_slots < slots are errors; max_slots alone also
///             sets the slots, as Open MPI does);
///   MPICH:    "host:4";
///   plain:    "host" (repeats add slots).
/// '#' starts a comment; blank lines are skipped. Host names may use Slurm bracket ranges.
/// The kind recorded on each host is the file's: Open MPI if any line used key=value, else
/// MPICH if any used host:N, else plain. A file with no hosts is an error.
HostList parse_hostfile(std::string_view text, std::string_view source);

/// Reads and parses a hostfile; an unreadable file throws InputError naming it and strerror.
HostList read_hostfile(const std::string& path);

/// True for the names of LSF launch/batch nodes that run no ranks ("batch1", "login2").
bool is_launch_node_name(std::string_view name);

/// $LSB_MCPU_HOSTS: "batch1 1 a26n15 42 b07n01 42"; pairs of host and slot count. The first
/// host is dropped when it is a launch node (is_launch_node_name).
HostList parse_lsf_mcpu_hosts(std::string_view value);

/// The text of $LSB_DJOB_HOSTFILE: one host per line per slot; the first host is dropped when
/// it is a launch node. `source` is the file's path.
HostList parse_lsf_djob_hostfile(std::string_view text, std::string_view source);

/// $LSB_HOSTS: "batch1 a26n15 a26n15 ..."; one word per slot. The first host is dropped when it
/// is a launch node. Hosts get SourceKind::kLsfHostfile (the same one-entry-per-slot list).
HostList parse_lsf_hosts(std::string_view value);

/// $SLURM_TASKS_PER_NODE: "2(x3),1" -> {2, 2, 2, 1}.
std::vector<int> parse_slurm_tasks_per_node(std::string_view value);

/// $SLURM_JOB_NODELIST + $SLURM_TASKS_PER_NODE; the counts must match the number of nodes.
HostList parse_slurm(std::string_view nodelist, std::string_view tasks_per_node);

/// Reads the environment through a function so tests can pass their own.
using GetEnv = std::optional<std::string> (*)(const char* name, void* context);

/// The variables naming the hostfile mpirun reads by default (Open MPI 4 and 5, MPICH's and
/// Intel MPI's Hydra), in the order allocation_from_environment() tries them. Kubeflow's MPIJob
/// sets the first for its launcher pod (/etc/mpi/hostfile: "worker-0 slots=2").
inline constexpr const char* kMpiHostfileVariables[] = {"OMPI_MCA_orte_default_hostfile",
                                                        "OMPI_MCA_prte_default_hostfile",
                                                        "HYDRA_HOST_FILE", "I_MPI_HYDRA_HOST_FILE"};

/// The allocation of the batch job this process runs in: LSF when $LSB_JOBID is set
/// ($LSB_DJOB_HOSTFILE first, else $LSB_MCPU_HOSTS, else $LSB_HOSTS), else Slurm when
/// $SLURM_JOB_ID and $SLURM_JOB_NODELIST are set, else the hostfile one of
/// kMpiHostfileVariables names (any format parse_hostfile reads); nullopt outside a batch job.
/// An empty variable counts as unset; an LSF job without any of the three host variables is
/// treated as no LSF job; without $SLURM_TASKS_PER_NODE each Slurm node gets 1 slot
/// (slots_given false).
std::optional<HostList> allocation_from_environment(GetEnv getenv_fn, void* context = nullptr);

/// The real process environment, for allocation_from_environment.
std::optional<std::string> process_getenv(const char* name, void* context);

}  // namespace ddl::hostfiles
