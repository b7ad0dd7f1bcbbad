#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/check.h"

namespace ddl::ddlrun {

enum class OutputFormat { kText, kYaml, kJson, kSvg };

/// A number of hosts: torchrun's --nnodes N (min = max = N) or MIN:MAX.
struct NodeRange {
  int min = 0;
  int max = 0;
};

/// Everything the command line says, as given; nothing here is resolved or validated against
/// hosts. Passed by value to the parts that need it (no globals set from flags).
struct Options {
  std::vector<std::string> hosts;  ///< each -H/--hosts value, in order
  /// What `hosts` are called in messages: "-H"; per-node mode plans with the nodes' host names.
  std::string hosts_from = "-H";
  std::string hostfile;
  std::optional<int> np;
  std::optional<int> accelerators;
  std::optional<std::string> mode;    ///< -m as given; "auto" picks the fastest predicted
  std::vector<std::string> links;     ///< each --link value: "LEVEL=BW[,LAT]"
  std::string predict_bytes = "64M";  ///< --predict-bytes: the size --mode auto picks for
  std::string rankfile;
  std::string launcher = "auto";
  std::vector<std::string> mpiargs;  ///< each --mpiarg value, unsplit
  std::string horovod = "auto";      ///< --horovod: auto (an installed Horovod first) or ddl
  /// The backends' own options (launcher::BackendOption: --jsrun-mode, --smpiargs) by name,
  /// each as given or its default; what LaunchOptions::settings gets.
  std::map<std::string, std::string, std::less<>> backend_settings;
  std::vector<std::string> exports;  ///< each -x value: "VAR" or "VAR=VAL"
  std::string wdir;                  ///< --wdir: where ranks start on every host; empty: here
  bool tcp = false;
  std::string nic;            ///< --nic, NCCL_SOCKET_IFNAME syntax
  std::optional<int> nodes;   ///< --nodes: hosts per rack
  std::optional<int> racks;   ///< --racks: racks per aisle
  std::optional<int> aisles;  ///< --aisles: checked against the layout
  std::string topology_conf;  ///< --topology-conf: Slurm topology.conf for racks
  bool dry_run = false;
  OutputFormat output = OutputFormat::kText;
  std::string topology_file;
  std::string job_id;                     ///< --job-id; empty: from the batch system, else made up
  std::vector<std::string> host_xml;      ///< each --host-xml value: "HOST=FILE", "*=FILE"
  bool probe = false;                     ///< --probe: print this host's inventory and exit
  bool no_probe = false;                  ///< --no-probe: place by slots, hardware unknown
  bool probe_links = false;               ///< --probe-links: measure links, find racks
  int probe_links_port = 0;               ///< --probe-links-port: the agents' port (0: any)
  std::string ssh_config;                 ///< --ssh-config: instead of ~/.ssh/config
  std::optional<double> connect_timeout;  ///< --connect-timeout seconds, for probing over ssh
  int verbosity = 0;                      ///< number of -v
  bool quiet = false;
  std::optional<double> timeout;  ///< seconds
  /// --timeout as given, once `timeout` is what is left of it (ddlrun's runner, elastic.cc).
  std::optional<double> timeout_given;
  int max_restarts = 0;              ///< --max-restarts: restarts after a failure; 0: none
  std::optional<int> min_hosts;      ///< --min-hosts: fewest hosts to restart on; none: all
  std::optional<NodeRange> nnodes;   ///< --nnodes N or MIN:MAX (torchrun)
  std::optional<int> node_rank;      ///< --node-rank: per-node mode, this node's rank
  std::string rdzv;                  ///< --rdzv HOST[:PORT]: node 0's rendezvous
  std::string master_addr;           ///< --master-addr: node 0's host (torchrun)
  std::optional<int> master_port;    ///< --master-port: the rendezvous port (torchrun)
  std::string rdzv_id;               ///< --rdzv-id: the job's rendezvous id
  std::string rdzv_token_file;       ///< --rdzv-token-file: the job's secret
  double rdzv_timeout = 300;         ///< --rdzv-timeout seconds
  double kill_grace = 3;             ///< --kill-grace: seconds between SIGTERM and SIGKILL
  double heartbeat_timeout = 10;     ///< --heartbeat-timeout: seconds of silence = host lost
  int tree_width = 50;               ///< --tree-width/--fanout: launch tree fan-out, 0: flat
  std::string output_dir;            ///< --output-dir: rank.N/stdout|stderr instead of ours
  std::string tag_output = "auto";   ///< --tag-output auto|rank|mpi|none
  std::vector<std::string> program;  ///< the program and its arguments, untouched
};

/// A command-line mistake; what() is the message without the "ddlrun: error: " prefix.
using UsageError = base::Error<struct UsageErrorTag>;

/// The result of parsing: either options to run with, or text to print and an exit code
/// (--help, --version).
struct ParsedCommandLine {
  Options options;
  std::optional<int> exit_code;  ///< set when ddlrun should print `text` and exit
  std::string text;
};

/// Parses ddlrun's arguments (without argv[0]). The program is the first argument that is
/// neither an option nor an option's value; it and everything after it are kept untouched, as is
/// everything after "--". IBM ddlrun's spellings are accepted before the program: -mode,
/// -accelerators, -mpiarg, -rankfile, -rf, -np, -hostfile, --H. Throws UsageError for unknown
/// options (with a suggestion), bad values, and a missing program.
ParsedCommandLine parse_command_line(const std::vector<std::string>& args);

/// The --help text.
std::string help_text();

/// Parses an --nnodes value: "N" or "MIN:MAX", whole numbers with 1 <= MIN <= MAX. Throws
/// UsageError saying what is wrong with `value` (without the "--nnodes: " prefix).
NodeRange parse_node_range(const std::string& value);

}  // namespace ddl::ddlrun
