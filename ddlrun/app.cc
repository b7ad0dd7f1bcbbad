#include "ddlrun/app.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <ostream>

#include "base/check.h"
#include "comm/comm.h"
#include "ddlrun/backends.h"
#include "ddlrun/options.h"
#include "ddlrun/per_node/per_node.h"
#include "ddlrun/plan/plan.h"
#include "ddlrun/run/elastic.h"
#include "ddlrun/show/predict_report.h"
#include "ddlrun/show/report.h"
#include "hostfiles/hostfiles.h"
#include "launcher/launcher.h"
#include "mapper/mapper.h"

namespace ddl::ddlrun {

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

/// What ddlrun's agent does with the mapper: this host's --probe-links agent and its
/// inventory (launcher::AgentServices).
launcher::AgentServices agent_services() {
  return {mapper::run_link_agent,
          [] { return mapper::to_yaml(mapper::probe_hwloc(mapper::this_host_cached())); }};
}

/// The roles ddlrun plays on behalf of another ddlrun: agent of the ssh launcher (--agent,
/// --probe-agent), keeper (--keeper), and the wrapper of each rank under mpirun, srun, prterun
/// or jsrun (--rank-exec, whose exit status this returns). Nothing when `args` asks for none;
/// the other roles never return.
std::optional<int> run_helper_role(const std::vector<std::string>& args) {
  if (args.empty()) return std::nullopt;
  // --probe-agent: the same agent, named so in the commands of the hosts ddlrun probes.
  if (args.front() == "--agent" || args.front() == "--probe-agent") {
    launcher::run_agent(0, 1, agent_services());
  }
  if (args.front() == "--keeper") launcher::run_keeper(0);
  if (args.front() == "--rank-exec") {
    return launcher::rank_exec_main(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  return std::nullopt;
}

/// Runs what the options ask for: --probe, else the plan, printed for --dry-run or launched
/// (and launched again after a failure, --max-restarts).
int run_options(const Options& o, std::ostream& out, std::ostream& err, hostfiles::GetEnv getenv_fn,
                void* env_context, const RemoteProbe& remote) {
  auto log = make_logger(o, err);
  if (o.probe) {
    out << mapper::to_yaml(mapper::probe_hwloc(mapper::this_host_cached()));
    return kExitOk;
  }
  if (std::optional<PerNode> node = per_node_settings(o, getenv_fn, env_context)) {
    return run_per_node(o, *node, getenv_fn, env_context, out, err, *log);
  }
  // --timeout counts from here: the probe and the plan too (the guard, startup_signals.h,
  // ends ddlrun at the deadline until the job starts, and the runner gives the rest to it).
  const std::unique_ptr<JobRunner> runner =
      make_job_runner(o, err, *log, getenv_fn, env_context, remote);
  if (o.timeout && !o.dry_run) {
    launcher::startup_deadline(std::chrono::steady_clock::now() +
                                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(*o.timeout)),
                               *o.timeout);
  }
  JobPlan plan = make_plan(o, getenv_fn, env_context, remote);
  for (const std::string& w : plan.warnings)
    log->warn("{}", hostfiles::printable(w));
  log->info("{} ranks on {}; hosts from {}", plan.placement.ranks,
            hostfiles::printable(plan.placement.describe()), hostfiles::printable(plan.hosts_from));
  if (plan.placement.ranks > 1) {
    const auto [why, text] = prediction_verdict(plan);
    log->info("mode {}", hostfiles::printable(why + " " + text));
  }
  log->info("launcher {}: {}", chosen_backend(plan).name, plan.launcher.reason);
  if (const auto& links = plan.topology.links) {
    const size_t hosts = plan.topology.hosts.size();
    log->info("--probe-links: {} of {} host pairs measured in {:.2f} s{}, {} {}",
              links->pairs.size(), hosts * (hosts - 1) / 2, links->seconds,
              plan.links_cached ? " (the job's cache)" : "", links->racks.size(),
              links->racks.size() == 1 ? "rack" : "racks");
  }
  if (!o.topology_file.empty()) {
    comm::write_topology_file(plan.topology, o.topology_file);
    log->info("topology file written to {}", hostfiles::printable(o.topology_file));
  }
  if (o.dry_run) {
    write_plan(out, plan, o);
    return kExitOk;
  }
  launcher::startup_step("starting the job on its hosts");
  return run_with_restarts(std::move(plan), restart_limits(o), *runner);
}

template <typename... Errors>
bool is_one_of(const std::exception& e) {
  return ((dynamic_cast<const Errors*>(&e) != nullptr) || ...);
}

/// Prints `e` as "ddlrun: error: ..." and returns the exit status the man page gives it: the
/// launcher's own, 2 for the user's mistakes, 1 for what the hosts refused; anything else is
/// ddlrun's own fault and says so.
int report_error(const std::exception& e, std::ostream& err) {
  std::string what = e.what();
  int status = kExitFailure;
  if (const auto* launch_error = dynamic_cast<const launcher::LaunchError*>(&e)) {
    status = launch_error->status();
  } else if (is_one_of<UsageError, hostfiles::InputError, comm::ModeError, mapper::PlacementError,
                       launcher::ssh::TreeTooDeep>(e)) {
    status = kExitUsage;
  } else if (!is_one_of<mapper::ProbeError, comm::TopologyError, base::InternalError,
                        RendezvousError>(e)) {
    what = "internal error: " + what + " (please report this)";
  }
  err << "ddlrun: error: " << hostfiles::printable(what) << "\n";
  return status;
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
        hostfiles::GetEnv getenv_fn, void* env_context, const RemoteProbe& remote) {
  // Host names, paths and program names come from the user and from other hosts: what ddlrun
  // prints of them goes through hostfiles::printable, so that no control byte reaches the
  // terminal raw.
  raise_open_files_limit();
  if (std::optional<int> status = run_helper_role(args)) return *status;
  try {
    ParsedCommandLine parsed = parse_command_line(args);
    if (parsed.exit_code) {
      out << parsed.text;
      return *parsed.exit_code;
    }
    return run_options(parsed.options, out, err, getenv_fn, env_context, remote);
  } catch (const std::exception& e) {
    return report_error(e, err);
  }
}

}  // namespace ddl::ddlrun
