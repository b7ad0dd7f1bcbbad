#pragma once

#include <chrono>
#include <iosfwd>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ddlrun/options.h"
#include "ddlrun/plan/plan.h"
#include "launcher/launcher.h"

namespace spdlog {
class logger;
}

namespace ddl::ddlrun {

/// How often, and on how few or many hosts, a failed job is started again (--max-restarts,
/// --min-hosts, --nnodes MIN:MAX).
struct RestartLimits {
  int max_restarts = 0;
  std::optional<int> min_hosts;  ///< none: every host of the job's first plan
  std::optional<int> max_hosts;  ///< none: lost hosts never rejoin
};

/// The limits the options ask for.
RestartLimits restart_limits(const Options& options);

/// The side effects of running a job again and again: planning, running one attempt, telling
/// the user. The real one (make_job_runner) plans with make_plan and runs with launch(); tests
/// pass a fake that records what it was asked.
class JobRunner {
 public:
  virtual ~JobRunner() = default;
  /// A new plan of the job; throws what make_plan throws.
  virtual JobPlan plan(const Replan& replan) = 0;
  /// Runs attempt `restart` (0: the first) of `plan` until it ends; throws
  /// launcher::LaunchError when it cannot start.
  virtual launcher::JobEnd run(const JobPlan& plan, int restart) = 0;
  /// Tells the user `text` (a line of ddlrun's, on stderr).
  virtual void note(const std::string& text) = 0;
  /// Attempt `restart - 1` failed because of `why` and restart `restart` may follow: until the
  /// next run() (or the runner's end), a signal or --timeout ends ddlrun with a note and the
  /// summary of `restarts` (the restarts so far). The real runner watches; a fake need not.
  virtual void between_attempts(int restart, const std::string& why,
                                const std::vector<std::string>& restarts) {
    (void)restart, (void)why, (void)restarts;
  }
};

/// What the next attempt asks of the plan: every host lost so far is left out, except that,
/// while fewer than `limits.max_hosts` hosts remain, hosts lost before the last failure are
/// tried again (the probe leaves out those that still do not answer). `hosts` are those of the
/// attempt that failed, `all_hosts` the first plan's, in order.
Replan next_replan(const std::vector<std::string>& all_hosts, const std::vector<std::string>& hosts,
                   const std::set<std::string>& lost_now, const RestartLimits& limits);

/// Why a job that failed `spent` restarts ago cannot start again on `hosts` hosts ("" when it
/// can); `first_hosts`: the hosts of its first plan.
std::string why_no_restart(int spent, int hosts, int first_hosts, const RestartLimits& limits);

/// The lines that end a restarted job: "ddlrun: the job was restarted N times and ended with
/// status S:", then "  K. after " and each restart's reason; none when there was no restart.
std::vector<std::string> restart_summary(const std::vector<std::string>& restarts, int status);

/// Marks `plan` as attempt `restart` (0: the first) of a job restarted at most `max_restarts`
/// times: its ranks see DDL_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT and
/// TORCHELASTIC_MAX_RESTARTS, and a restart gets a job id of its own ("<id>-r<N>"), so that
/// nothing an earlier attempt left behind can meet it.
void mark_attempt(JobPlan& plan, int restart, int max_restarts);

/// Runs the job planned as `first` through `runner`, and while it fails by itself (a rank, a
/// host: launcher::JobEnd::failed) and `limits` allow, plans it again without the lost hosts
/// and starts it again. Prints each restart's reason and, when there was one, a summary of all.
/// Returns the exit status of the last attempt (a restart that cannot start ends the job with
/// the LaunchError's status; a signal to ddlrun, even one that came while a failed attempt was
/// being stopped, ends it with 128+N when restarts were asked for). Throws UsageError when the
/// first plan's hosts are fewer than the minimum or more than the maximum, and the first attempt's
/// LaunchError.
int run_with_restarts(JobPlan first, const RestartLimits& limits, JobRunner& runner);

/// The runner of a real job: plans with make_plan (through `remote` and the environment), runs
/// each attempt with launch() (its ranks see DDL_RESTART_COUNT, TORCHELASTIC_RESTART_COUNT and
/// TORCHELASTIC_MAX_RESTARTS, and a job id of their own), rewrites --topology-file and, at -v,
/// logs each new plan as --dry-run would print it; notes go to `err`. With restarts, the stop
/// signals stay blocked from the first attempt on, and between attempts a thread takes them
/// (and watches --timeout): ddlrun then leaves with a note and the restart summary. From the
/// second restart on, each waits restart_pause() first.
std::unique_ptr<JobRunner> make_job_runner(const Options& options, std::ostream& err,
                                           spdlog::logger& log, hostfiles::GetEnv getenv_fn,
                                           void* env_context, const RemoteProbe& remote);

/// How long restart `restart` (1 for the first) waits before it starts: none for the first,
/// then 0.25 s, doubling with each restart up to 8 s (a job that fails at once must not restart
/// dozens of times a second).
std::chrono::milliseconds restart_pause(int restart);

/// The note of a signal (`signal` > 0) or of --timeout (`signal` 0, after `timeout` seconds)
/// that ends ddlrun between attempts, while restart `restart` is prepared after `why`.
std::string between_attempts_note(int signal, double timeout, int restart, const std::string& why);

}  // namespace ddl::ddlrun
