#include "ddlrun/app.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <cstdlib>
#include <ostream>

#include "comm/mode.h"
#include "ddlrun/launch.h"
#include "ddlrun/options.h"
#include "ddlrun/plan.h"
#include "ddlrun/report.h"
#include "hostfiles/input_error.h"
#include "launcher/backend.h"
#include "launcher/factory.h"
#include "launcher/keeper.h"
#include "launcher/rank_exec.h"
#include "mapper/placement.h"
#include "mapper/probe_hwloc.h"

namespace ddl::cli {

namespace {

/// Diagnostics go to `err` through spdlog: warnings by default, -v info, -vv debug, -vvv
/// trace, -q errors only.
std::shared_ptr<spdlog::logger> make_logger(const Options& o, std::ostream& err) {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(err, /*force_flush=*/true);
  auto logger = std::make_shared<spdlog::logger>("ddlrun", sink);
  logger->set_pattern("ddlrun: %l: %v");
  spdlog::level::level_enum level = spdlog::level::warn;
  if (o.quiet) level = spdlog::level::err;
  if (o.verbosity == 1) level = spdlog::level::info;
  if (o.verbosity == 2) level = spdlog::level::debug;
  if (o.verbosity >= 3) level = spdlog::level::trace;
  logger->set_level(level);
  return logger;
}

/// Raises the soft limit on open files to the hard one: ddlrun keeps a connection (and, with
/// the ssh launcher, a session) per host, and 1,024 would run out at a few hundred hosts, as
/// mpirun's daemons also raise it. Agents and rank wrappers start here too.
void raise_open_files_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

/// `ddlrun --probe-agent`, what the ssh probe runs when the ssh launcher will follow: this
/// host's inventory, a line "...", then the agent on the same channel (one login shell per
/// host for probe and launch; mapper::SshProbeOptions::keep_command).
[[noreturn]] void probe_then_agent(std::ostream& out, std::ostream& err) {
  try {
    std::string text = mapper::to_yaml(mapper::probe_hwloc(mapper::ProbeOptions{}));
    if (text.empty() || text.back() != '\n') text += '\n';
    out << text << "...\n" << std::flush;
  } catch (const std::exception& e) {
    err << "ddlrun: error: " << hostfiles::printable(e.what()) << "\n" << std::flush;
    std::exit(kExitFailure);
  }
  launcher::run_agent(0, 1);
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        hostfiles::GetEnv getenv_fn, void* env_context, const RemoteProbe& remote) {
  // Host names, paths and program names come from the user and from other hosts: what ddlrun
  // prints of them goes through hostfiles::printable, so that no control byte reaches the
  // terminal raw.
  auto error = [&](const std::string& what, int status) {
    err << "ddlrun: error: " << hostfiles::printable(what) << "\n";
    return status;
  };
  raise_open_files_limit();
  // The modes ddlrun runs in on behalf of another ddlrun: agent of the ssh launcher, and the
  // wrapper of each rank under mpirun/srun/prterun/jsrun.
  if (!args.empty() && args.front() == "--agent") launcher::run_agent(0, 1);
  if (!args.empty() && args.front() == "--probe-agent") probe_then_agent(out, err);
  if (!args.empty() && args.front() == "--keeper") launcher::run_keeper(0);
  if (!args.empty() && args.front() == "--rank-exec") {
    return launcher::rank_exec_main(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  try {
    ParsedCommandLine parsed = parse_command_line(args);
    if (parsed.exit_code) {
      out << parsed.text;
      return *parsed.exit_code;
    }
    const Options& o = parsed.options;
    auto log = make_logger(o, err);
    if (o.probe) {
      out << mapper::to_yaml(mapper::probe_hwloc(mapper::ProbeOptions{}));
      return kExitOk;
    }
    const JobPlan plan = make_plan(o, getenv_fn, env_context, remote);
    for (const std::string& w : plan.warnings)
      log->warn("{}", hostfiles::printable(w));
    log->info("{} ranks on {}; hosts from {}", plan.placement.ranks,
              hostfiles::printable(plan.placement.describe()),
              hostfiles::printable(plan.hosts_from));
    log->info("launcher {}: {}", launcher::to_string(plan.launcher.kind), plan.launcher.reason);
    if (!o.topology_file.empty()) {
      comm::write_topology_file(plan.topology, o.topology_file);
      log->info("topology file written to {}", hostfiles::printable(o.topology_file));
    }
    if (o.dry_run) {
      out << hostfiles::printable(render_plan(plan, o));
      return kExitOk;
    }
    return launch(plan, o, *log);
  } catch (const launcher::LaunchError& e) {
    return error(e.what(), e.status());
  } catch (const UsageError& e) {
    return error(e.what(), kExitUsage);
  } catch (const hostfiles::InputError& e) {
    return error(e.what(), kExitUsage);
  } catch (const comm::ModeError& e) {
    return error(e.what(), kExitUsage);
  } catch (const mapper::PlacementError& e) {
    return error(e.what(), kExitUsage);
  } catch (const mapper::ProbeError& e) {
    return error(e.what(), kExitFailure);
  } catch (const comm::TopologyError& e) {
    return error(e.what(), kExitFailure);
  } catch (const std::exception& e) {
    return error(std::string("internal error: ") + e.what() + " (please report this)",
                 kExitFailure);
  }
}

}  // namespace ddl::cli
