#include "ddlrun/options.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <span>

#include "base/text.h"
#include "ddl_config.h"
#include "ddlrun/backends.h"
#include "hostfiles/hostfiles.h"
#include "launcher/launcher.h"

namespace ddl::ddlrun {

namespace {

/// IBM ddlrun and mpirun spellings, rewritten to ours before CLI11 sees them.
const std::map<std::string, std::string, std::less<>> kAliases = {
    {"--H", "-H"},
    {"-mode", "--mode"},
    {"-accelerators", "--accelerators"},
    {"-mpiarg", "--mpiarg"},
    {"-rankfile", "--rankfile"},
    {"-rf", "--rankfile"},
    {"-np", "--np"},
    {"-hostfile", "--hostfile"},
    {"-nodes", "--nodes"},
    {"-racks", "--racks"},
    {"-aisles", "--aisles"},
    {"-wdir", "--wdir"},
    // torchrun's spellings of per-node mode and restarts
    {"--max_restarts", "--max-restarts"},
    {"--node_rank", "--node-rank"},
    {"--nproc_per_node", "--accelerators"},
    {"--nproc-per-node", "--accelerators"},
    {"--master_addr", "--master-addr"},
    {"--master_port", "--master-port"},
    {"--rdzv_endpoint", "--rdzv"},
    {"--rdzv-endpoint", "--rdzv"},
    {"--rdzv_id", "--rdzv-id"},
};

using base::parse_int;

/// Validators whose messages say what is wrong and what is allowed (CLI11 adds "--option: ").
CLI::Validator at_least(int least) {
  return CLI::Validator(
      [least](std::string& value) -> std::string {
        const std::optional<int> n = parse_int(value);
        if (!n && value.find_first_not_of("0123456789") == std::string::npos && !value.empty()) {
          return "'" + value + "' is too large: at most " +
                 std::to_string(std::numeric_limits<int>::max());
        }
        if (!n || *n < least) {
          return "'" + value + "' is not a whole number of at least " + std::to_string(least);
        }
        return {};
      },
      "");
}

std::string port_number(const std::string& value) {
  const std::optional<int> n = parse_int(value);
  if (!n || *n < 1 || *n > 65535)
    return "'" + value + "' is not a port: a whole number, 1 to 65535";
  return {};
}

std::string node_range(const std::string& value) {
  try {
    parse_node_range(value);
  } catch (const UsageError& e) {
    return e.what();
  }
  return {};
}

/// The longest duration any option takes: 10^9 s (about 31 years). Longer ones would overflow
/// the clock arithmetic (--timeout 1e10 once fired at once); they are refused, not clamped.
constexpr double kMaxSeconds = 1e9;
/// The shortest: 1 ms, the clock's step in ddlrun's deadlines (--timeout 1e-9 once "timed out
/// after 0 s").
constexpr double kMinSeconds = 1e-3;

std::string positive_seconds(const std::string& value) {
  char* end = nullptr;
  const double d = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(d > 0) || std::isnan(d)) {
    return "'" + value + "' is not a number of seconds above 0";
  }
  if (d < kMinSeconds) {
    return "'" + value + "' is less than 0.001 s (1 ms), the shortest duration ddlrun takes";
  }
  if (d > kMaxSeconds) {
    return "'" + value +
           "' is more than 1000000000 s (about 31 years), the longest duration ddlrun takes; give "
           "a smaller number";
  }
  return {};
}

CLI::Validator one_of(std::string what, std::vector<std::string_view> names) {
  return CLI::Validator(
      [what, names](std::string& value) -> std::string {
        if (std::find(names.begin(), names.end(), value) != names.end()) return {};
        return "unknown " + what + " '" + value + "'" + base::did_you_mean(value, names) +
               "; use one of " + base::join(names, ", ");
      },
      "");
}

/// CLI11's formatter, with ddlrun's usage line (the program and its arguments follow options).
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: ddlrun [options] [--] program [args...]\n";
  }
};

/// Declares the options of one section of --help: each gets the section's name as its group,
/// and its type name (the placeholder after the option) is given with it.
class Section {
 public:
  Section(CLI::App& app, std::string name) : app_(app), name_(std::move(name)) {}

  template <typename T>
  CLI::Option* option(std::string names, T& into, std::string description, std::string type) {
    return app_.add_option(std::move(names), into, std::move(description))
        ->type_name(std::move(type))
        ->group(name_);
  }

  /// An option that takes exactly the one argument after it each time it is given, never more
  /// (CLI11 lets a list option swallow the arguments that follow it).
  template <typename T>
  CLI::Option* one_value(std::string names, T& into, std::string description, std::string type) {
    return option(std::move(names), into, std::move(description), std::move(type))
        ->allow_extra_args(false);
  }

  /// A whole number of at least 1 ("N").
  CLI::Option* count(std::string names, std::optional<int>& into, std::string description) {
    return option(std::move(names), into, std::move(description), "N")->check(at_least(1));
  }

  /// A duration above 0 and at most kMaxSeconds ("SECONDS").
  template <typename T>
  CLI::Option* seconds(std::string names, T& into, std::string description) {
    return option(std::move(names), into, std::move(description), "SECONDS")
        ->check(positive_seconds);
  }

  template <typename T>
  CLI::Option* flag(std::string names, T& into, std::string description) {
    return app_.add_flag(std::move(names), into, std::move(description))->group(name_);
  }

  const std::string& name() const { return name_; }

 private:
  CLI::App& app_;
  std::string name_;
};

void add_host_options(CLI::App& app, Options& o) {
  Section s(app, "Hosts and ranks");
  s.one_value("-H,--hosts", o.hosts,
              "Hosts: host[:slots],... with [ipv6]:slots and node[01-04] ranges; "
              "repeats add slots (IBM: --H)",
              "LIST");
  s.option("--hostfile", o.hostfile, "Open MPI (host slots=N), MPICH (host:N) or plain hostfile",
           "FILE");
  s.count("-n,--np", o.np, "Total number of ranks (default: every slot or GPU)");
  s.count("-a,--accelerators", o.accelerators, "Ranks (GPUs) per host (IBM: -accelerators)");
  s.option("--rankfile", o.rankfile,
           "Open MPI rankfile that places every rank (IBM: -rankfile, -rf)", "FILE");
}

void add_communication_options(CLI::App& app, Options& o) {
  Section s(app, "Communication");
  s.option("-m,--mode", o.mode,
           "DDL mode <r|b|n|m|c|p>[:d1xd2x...], innermost first (IBM: -mode), or auto: the "
           "fastest the cost model predicts (the default unless --nodes, --racks, --aisles or "
           "--topology-conf name the layout)",
           "MODE");
  s.one_value("--link", o.links,
              "A fabric level for the cost model: local|host|rack|aisle=BW[,LAT], e.g. "
              "host=1Gbit,50us",
              "LEVEL=BW[,LAT]");
  s.option("--predict-bytes", o.predict_bytes,
           "Allreduce size --mode auto picks the fastest mode for (default 64M)", "SIZE");
  s.flag("--tcp", o.tcp, "Use TCP between hosts instead of InfiniBand verbs");
  s.option("--nic", o.nic,
           "Interfaces to use, as NCCL_SOCKET_IFNAME: prefixes, ^ excludes, = exact", "FILTER");
  s.count("--nodes", o.nodes, "Hosts per rack, the ring's second dimension (IBM: -nodes)");
  s.count("--racks", o.racks, "Racks per aisle, the third dimension (IBM: -racks)");
  s.count("--aisles", o.aisles, "Aisles, the fourth dimension; checked (IBM: -aisles)");
  s.option("--topology-conf", o.topology_conf,
           "Slurm topology.conf naming each host's switch (rack)", "FILE");
  s.option("--topology-file", o.topology_file, "Where to write the topology file the runtime reads",
           "FILE");
}

void add_hardware_options(CLI::App& app, Options& o) {
  Section s(app, "Hardware");
  s.one_value("--host-xml", o.host_xml,
              "Plan HOST from an hwloc XML file instead of probing it; HOST may be a "
              "pattern: '*=node.xml'",
              "HOST=FILE");
  s.flag("--no-probe", o.no_probe,
         "Do not look at the hosts' hardware: ranks by slots, no GPU, CPU or NIC binding");
  s.option("--ssh-config", o.ssh_config,
           "ssh client configuration to read instead of ~/.ssh/config (as ssh -F)", "FILE");
  s.seconds("--connect-timeout", o.connect_timeout,
            "Seconds to wait for each host's ssh connection (default 10)");
  s.flag("--probe", o.probe, "Print this host's hardware as YAML and exit");
  s.flag("--probe-links", o.probe_links,
         "Measure bandwidth and latency between the hosts (about a second) and find racks "
         "behind slower uplinks");
  s.option("--probe-links-port", o.probe_links_port,
           "The TCP port every host's --probe-links agent listens on, for a firewall to let in "
           "(default: any free port)",
           "PORT")
      ->check(port_number);
}

/// --job-id, listed under Communication but declared after the Hardware options: declaration
/// order is the order in which "did you mean" weighs equally close option names.
void add_job_id_option(CLI::App& app, Options& o) {
  Section(app, "Communication")
      .option("--job-id", o.job_id,
              "Job id for the topology file (default: $LSB_JOBID, $SLURM_JOB_ID, or made up)",
              "ID");
}

void add_launching_options(CLI::App& app, Options& o) {
  Section s(app, "Launching");
  std::string launchers;
  std::vector<std::string_view> names;
  for (const launcher::BackendDescriptor* b : backends()) {
    launchers += (launchers.empty() ? "" : "|") + std::string(b->name);
    names.push_back(b->name);
  }
  s.option("--launcher", o.launcher,
           "How to start ranks: " + launchers +
               " (default auto: jsrun in LSF, srun in Slurm, else pmix: ddlrun's own "
               "local or ssh launcher, serving PMIx to the ranks)",
           "NAME")
      ->check(one_of("launcher", names));
  s.one_value("--mpiarg", o.mpiargs,
              "Extra arguments for mpirun, split like a shell (IBM: -mpiarg)", "ARGS");
  s.one_value("-x", o.exports, "Export VAR (from this environment) or VAR=VAL to every rank",
              "VAR[=VAL]");
  s.option("--horovod", o.horovod,
           "Which horovod package Python ranks import: auto (an installed Horovod, else "
           "libddl's horovod.torch; default) or ddl (libddl's, ahead of any installed one)",
           "auto|ddl")
      ->check(one_of("horovod", {"auto", "ddl"}));
  s.option("--wdir,--wd", o.wdir,
           "Directory ranks start in on every host (default: this one, which must then "
           "exist on every host; mpirun: -wdir)",
           "DIR");
  s.seconds("--timeout", o.timeout, "Stop the whole job after this many seconds (exit 124)");
  s.seconds("--kill-grace", o.kill_grace,
            "Seconds a stopped job's ranks get between SIGTERM and SIGKILL (default 3)");
  s.seconds("--heartbeat-timeout", o.heartbeat_timeout,
            "ssh launcher: seconds without a heartbeat after which a host is lost, and "
            "its agent gives ddlrun up (default 10)");
  s.option("--tree-width,--fanout", o.tree_width,
           "ssh launcher: beyond K hosts, log in to K and let their agents start the rest, "
           "K under each (a launch tree; default 50; 0: always log in to every host)",
           "K")
      ->check(at_least(0));
}

/// Each backend's own options (launcher::BackendDescriptor::options), in a section of --help of
/// its own ("Launcher jsrun"), their values kept by name in o.backend_settings from their
/// defaults on.
void add_backend_options(CLI::App& app, Options& o) {
  for (const launcher::BackendDescriptor* b : backends()) {
    Section s(app, "Launcher " + std::string(b->name));
    for (const launcher::BackendOption& option : b->options) {
      std::string& value = o.backend_settings[std::string(option.name)];
      value = option.default_value;  // so that --help shows none
      CLI::Option* added = s.one_value(std::string(option.name), value, std::string(option.help),
                                       std::string(option.value_name));
      if (!option.choices.empty()) {
        // "--jsrun-mode" -> "jsrun mode", the name its refusal gives the value.
        std::string what(option.name.substr(2));
        std::replace(what.begin(), what.end(), '-', ' ');
        added->check(one_of(what, {option.choices.begin(), option.choices.end()}));
      }
    }
  }
}

void add_restart_options(CLI::App& app, Options& o) {
  Section s(app, "Restarts");
  s.option("--max-restarts", o.max_restarts,
           "Restart a failed job up to N times on the hosts that remain (default 0: never)", "N")
      ->check(at_least(0));
  s.count("--min-hosts", o.min_hosts,
          "Restart only while at least M hosts remain (default: every host of the job)")
      ->type_name("M");
  app.add_option_function<std::string>(
         "--nnodes", [&o](const std::string& value) { o.nnodes = parse_node_range(value); },
         "Hosts, as torchrun: N, or MIN:MAX (restart on at least MIN hosts, let lost hosts "
         "rejoin up to MAX)")
      ->type_name("N|MIN:MAX")
      ->check(node_range)
      ->group(s.name());
}

void add_per_node_options(CLI::App& app, Options& o) {
  Section s(app, "Per-node mode (one ddlrun on each node, as torchrun)");
  s.option("--node-rank", o.node_rank,
           "This node's rank, 0..N-1: start only this node's ranks (torchrun: --node_rank)", "K")
      ->check(at_least(0));
  s.one_value("--rdzv", o.rdzv,
              "Where the nodes meet: node 0's HOST:PORT (default port 29400; torchrun: "
              "--rdzv_endpoint)",
              "HOST:PORT");
  s.one_value("--master-addr", o.master_addr, "Node 0's host, as torchrun's --master_addr", "HOST");
  s.option("--master-port", o.master_port, "The rendezvous port, as torchrun's --master_port",
           "PORT")
      ->check(port_number);
  s.one_value("--rdzv-id", o.rdzv_id,
              "The job's rendezvous id: nodes of another job are refused (torchrun: --rdzv_id)",
              "ID");
  s.one_value("--rdzv-token-file", o.rdzv_token_file,
              "File holding the job's secret that every node presents (default: "
              "$DDL_JOB_TOKEN; none: unauthenticated)",
              "FILE");
  s.seconds("--rdzv-timeout", o.rdzv_timeout,
            "Seconds the nodes wait for each other at the rendezvous (default 300)");
}

void add_output_options(CLI::App& app, Options& o) {
  Section s(app, "Output");
  s.option("--output-dir", o.output_dir,
           "Write each rank's output to DIR/rank.N/stdout and stderr instead", "DIR");
  s.option("--tag-output", o.tag_output,
           "Label of each output line: auto ([3] on a terminal, else mpi), rank ([3]), "
           "mpi ([1,3]<stdout>:), none",
           "STYLE")
      ->check(one_of("style", {"auto", "rank", "mpi", "none"}));
  s.flag("--dry-run", o.dry_run, "Print the whole plan and start nothing");
  app.add_option_function<std::string>(
         "--output",
         [&o](const std::string& name) {
           o.output = name == "json"   ? OutputFormat::kJson
                      : name == "yaml" ? OutputFormat::kYaml
                      : name == "svg"  ? OutputFormat::kSvg
                                       : OutputFormat::kText;
         },
         "Format of the plan: text|yaml|json|svg (a picture; default text)")
      ->type_name("FORMAT")
      ->check(one_of("format", {"text", "yaml", "json", "svg"}))
      ->group(s.name());
  s.flag("-v,--verbose", o.verbosity, "More diagnostics on stderr; repeat for more (-vv, -vvv)");
  s.flag("-q,--quiet", o.quiet, "Print errors only");
}

/// The application with every option bound to `o`. The help text comes from here too: its
/// sections follow the order of their first option, the options within one their order here.
std::unique_ptr<CLI::App> make_app(Options& o) {
  auto app = std::make_unique<CLI::App>(
      "Run a data-parallel training program on every GPU of one or many hosts.\n"
      "The program is the first argument ddlrun does not recognise; it and its arguments\n"
      "are passed through untouched. See man ddlrun(1).",
      "ddlrun");
  app->formatter(std::make_shared<Formatter>());
  app->set_help_flag("-h,--help", "Print this help and exit");
  app->set_version_flag("--version", std::string("ddlrun ") + DDL_VERSION,
                        "Print the version and exit");
  app->get_formatter()->column_width(34);
  add_host_options(*app, o);
  add_communication_options(*app, o);
  add_hardware_options(*app, o);
  add_job_id_option(*app, o);
  add_launching_options(*app, o);
  add_backend_options(*app, o);
  add_restart_options(*app, o);
  add_per_node_options(*app, o);
  add_output_options(*app, o);
  return app;
}

/// How one argument before the program reads: an option taking a value, a flag, or unknown.
enum class ArgKind { kTakesValue, kFlag, kUnknown };

ArgKind classify(const CLI::App& app, const std::string& name) {
  const CLI::Option* opt = app.get_option_no_throw(name);
  if (opt == nullptr) return ArgKind::kUnknown;
  return opt->get_expected_max() == 0 ? ArgKind::kFlag : ArgKind::kTakesValue;
}

[[noreturn]] void unknown_option(const CLI::App& app, const std::string& arg) {
  std::vector<std::string> longs;
  std::vector<std::string_view> candidates;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames())
      longs.push_back("--" + l);
    for (const std::string& s : opt->get_snames())
      longs.push_back("-" + s);
  }
  for (const auto& [alias, _] : kAliases)
    longs.push_back(alias);
  for (const std::string& s : longs)
    candidates.push_back(s);
  const std::string name = arg.substr(0, arg.find('='));
  throw UsageError("unknown option '" + name + "'" + base::did_you_mean(name, candidates) +
                   "; see ddlrun --help (to run a program whose name starts with '-', put -- "
                   "before it)");
}

/// An IBM spelling ("-np=4", "-rf") rewritten to ours; any other argument as it is.
std::string rewrite_alias(const std::string& arg) {
  const size_t eq = arg.find('=');
  const auto alias = kAliases.find(std::string_view(arg).substr(0, eq));
  if (alias == kAliases.end()) return arg;
  return alias->second + (eq == std::string::npos ? "" : arg.substr(eq));
}

/// ddlrun's own arguments, IBM spellings rewritten, and the program with its arguments.
struct SplitArguments {
  std::vector<std::string> own;
  std::vector<std::string> program;
};

/// Splits `args` where the program starts: at the first argument that is neither an option
/// nor an option's value, or after "--". Throws UsageError for an unknown option or a missing
/// value.
SplitArguments split_arguments(const CLI::App& app, const std::vector<std::string>& args) {
  SplitArguments split;
  size_t i = 0;
  // Takes the value of `option` from the next argument.
  const auto take_value = [&](const std::string& option) {
    if (i + 1 >= args.size()) throw UsageError("option " + option + " needs a value");
    split.own.push_back(args[++i]);
  };
  for (; i < args.size(); ++i) {
    if (args[i] == "--") {
      ++i;
      break;
    }
    if (args[i].size() < 2 || args[i][0] != '-') break;
    const std::string arg = rewrite_alias(args[i]);
    split.own.push_back(arg);
    if (arg.rfind("--", 0) == 0) {
      const std::string long_name = arg.substr(0, arg.find('='));
      const ArgKind kind = classify(app, long_name);
      if (kind == ArgKind::kUnknown) unknown_option(app, arg);
      if (kind == ArgKind::kTakesValue && arg.find('=') == std::string::npos) take_value(long_name);
      continue;
    }
    // Short options: "-H host", "-Hhost", "-vv", "-n4".
    const ArgKind kind = classify(app, arg.substr(0, 2));
    if (kind == ArgKind::kUnknown) unknown_option(app, arg);
    if (kind == ArgKind::kTakesValue && arg.size() == 2) {
      take_value(arg);
    } else if (kind == ArgKind::kFlag) {
      for (size_t k = 2; k < arg.size(); ++k) {
        if (classify(app, std::string("-") + arg[k]) != ArgKind::kFlag) unknown_option(app, arg);
      }
    }
  }
  split.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return split;
}

/// Lets CLI11 parse ddlrun's own arguments into the options `app` is bound to. Returns the
/// text to print for --help and --version, else nothing. Throws UsageError for bad values.
std::optional<std::string> parse_own_arguments(CLI::App& app, const std::vector<std::string>& own) {
  try {
    std::vector<std::string> reversed(own.rbegin(), own.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return app.help();
  } catch (const CLI::CallForVersion&) {
    return std::string("ddlrun ") + DDL_VERSION + "\n";
  } catch (const CLI::ParseError& e) {
    // CLI11 says "--np: At Most 1 required but received 2" for an option given twice.
    const std::string what = e.what();
    const size_t at = what.find(": At Most 1 required but received");
    if (at != std::string::npos) {
      throw UsageError(what.substr(0, at) + " is given more than once; give it once");
    }
    throw UsageError(what);
  }
  return std::nullopt;
}

/// Refuses options that contradict each other or the program, each alone valid.
void check_combinations(const Options& o) {
  if (o.probe && !o.program.empty()) {
    throw UsageError("--probe prints this host's hardware and runs nothing; drop " +
                     o.program.front() + " or --probe");
  }
  if (o.probe && o.dry_run) throw UsageError("--probe and --dry-run contradict each other");
  if (o.probe_links && o.no_probe) {
    throw UsageError(
        "--probe-links measures between the hosts' NICs, which --no-probe leaves "
        "unknown; give one of them");
  }
  if (o.probe_links_port != 0 && !o.probe_links) {
    throw UsageError(
        "--probe-links-port sets the port of --probe-links' agents; add --probe-links");
  }
  if (o.no_probe && !o.host_xml.empty()) {
    throw UsageError("--no-probe ignores hardware, but --host-xml describes it; give one of them");
  }
  for (const std::string& x : o.host_xml) {
    const size_t eq = x.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == x.size()) {
      throw UsageError("--host-xml " + x + ": expected HOST=FILE (or '*=FILE' for every host)");
    }
  }
  if (o.program.empty() && !o.probe) {
    throw UsageError("no program to run; usage: ddlrun [options] [--] program [args...]");
  }
  if (o.quiet && o.verbosity > 0) throw UsageError("-q and -v contradict each other; give one");
  if (o.min_hosts && o.nnodes && *o.min_hosts != o.nnodes->min) {
    throw UsageError("--min-hosts " + std::to_string(*o.min_hosts) + " and --nnodes " +
                     std::to_string(o.nnodes->min) + ":" + std::to_string(o.nnodes->max) +
                     " disagree on the fewest hosts; give one of them");
  }
  struct stat st {};
  if (!o.output_dir.empty() && stat(o.output_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    throw UsageError("--output-dir " + o.output_dir +
                     ": exists and is not a directory; name a directory (ddlrun creates it "
                     "when missing)");
  }
}

}  // namespace

// How it works: the arguments are split where the program starts (IBM spellings rewritten on
// the way), so that CLI11 never sees the program's own options; CLI11 then parses ddlrun's part
// into the Options, and last come the checks that need several options at once.
ParsedCommandLine parse_command_line(const std::vector<std::string>& args) {
  ParsedCommandLine result;
  Options& o = result.options;
  auto app = make_app(o);
  SplitArguments split = split_arguments(*app, args);
  o.program = std::move(split.program);
  if (std::optional<std::string> text = parse_own_arguments(*app, split.own)) {
    result.exit_code = 0;
    result.text = std::move(*text);
    return result;
  }
  check_combinations(o);
  return result;
}

NodeRange parse_node_range(const std::string& value) {
  const size_t colon = value.find(':');
  const std::optional<int> min = parse_int(std::string_view(value).substr(0, colon));
  const std::optional<int> max =
      colon == std::string::npos ? min : parse_int(std::string_view(value).substr(colon + 1));
  if (!min || !max) {
    throw UsageError("'" + value + "' is not N or MIN:MAX (whole numbers of hosts, e.g. 3 or 2:4)");
  }
  if (*min < 1) {
    throw UsageError("'" + value + "': the number of hosts must be at least 1");
  }
  if (*min > *max) {
    throw UsageError("'" + value + "': MIN " + std::to_string(*min) + " is above MAX " +
                     std::to_string(*max) + "; give MIN:MAX with MIN <= MAX");
  }
  return NodeRange{*min, *max};
}

std::string help_text() {
  Options o;
  return make_app(o)->help();
}

}  // namespace ddl::ddlrun
