// Restarting a failed job on the hosts that remain (--max-restarts, --min-hosts, --nnodes).
//
// How it works: run_with_restarts() runs the first plan as one attempt. An attempt ends as the
// supervisor decides (launcher/supervise.h): every surviving rank is stopped at the first
// failure, and its JobEnd says what failed (the rank and host its note blames) and which hosts
// were lost (agent gone, no heartbeat, processes that never reported their end). When the job
// failed by itself (not a --timeout, a signal to ddlrun or a closed stdout), restarts remain and
// enough hosts are left, the job is planned again with make_plan: the lost hosts are left out,
// the others are probed again (each probe is also the login its agent will run in, and the
// check that the host still answers: one that does not is left out too), and placement, mode,
// rings and topology follow from the smaller host list as for a first plan. With --nnodes
// MIN:MAX, hosts lost before the last failure are tried again while the job has fewer than MAX.
// The next attempt then starts with a job id of its own (DDL_JOB_ID "<id>-r<N>"), so that
// nothing an earlier attempt left behind (shared-memory segments, a rendezvous) can meet it, and
// with DDL_RESTART_COUNT and torchrun's TORCHELASTIC_* variables. The exit status is the last
// attempt's: 0 once one succeeds, else the status of the failure no restart followed.

#include "ddlrun/run/elastic.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <ostream>
#include <thread>

#include "base/text.h"
#include "comm/comm.h"
#include "ddlrun/run/launch.h"
#include "ddlrun/show/report.h"
#include "hostfiles/hostfiles.h"

namespace ddl::ddlrun {

namespace {

std::vector<std::string> host_names(const JobPlan& plan) {
  std::vector<std::string> names;
  for (const hostfiles::Host& h : plan.hosts.hosts())
    names.push_back(h.name);
  return names;
}

/// The hosts the job's first plan lists must fit the limits; throws UsageError.
void check_first_hosts(int hosts, const RestartLimits& limits) {
  if (limits.min_hosts && *limits.min_hosts > hosts) {
    throw UsageError("the job has " + std::to_string(hosts) + " hosts, fewer than the " +
                     std::to_string(*limits.min_hosts) +
                     " that --min-hosts or --nnodes ask for; add hosts or ask for fewer");
  }
  if (limits.max_hosts && *limits.max_hosts < hosts) {
    throw UsageError("the job has " + std::to_string(hosts) + " hosts, more than the " +
                     std::to_string(*limits.max_hosts) +
                     " that --nnodes allows; list fewer hosts or raise MAX");
  }
}

/// The restarts so far, for the summary, and what the next one needs to know.
struct History {
  std::vector<std::string> all_hosts;  ///< the first plan's
  std::vector<std::string> restarts;   ///< one line each
};

/// The note of a restart: why, and where the job starts again.
std::string restart_line(const launcher::JobEnd& end, const JobPlan& next,
                         const std::vector<std::string>& all_hosts) {
  const std::vector<std::string> hosts = host_names(next);
  std::vector<std::string> without;
  for (const std::string& h : all_hosts)
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) without.push_back(h);
  // "rank 2 (n1) exited with status 3" says the status itself; "n3: no heartbeat for 10 s" not.
  const std::string status = "status " + std::to_string(end.status);
  const bool said =
      end.reason.size() >= status.size() &&
      end.reason.compare(end.reason.size() - status.size(), status.size(), status) == 0;
  return end.reason + (said ? "" : " (" + status + ")") + "; " +
         std::to_string(next.placement.ranks) + (next.placement.ranks == 1 ? " rank" : " ranks") +
         " on " + std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts") +
         (without.empty() ? std::string() : " without " + base::join(without, ", "));
}

/// The plan of restart `restart` (1 for the first) after `end`, or nothing when the job cannot
/// start again (the note says why).
std::optional<JobPlan> plan_restart(const JobPlan& failed, const launcher::JobEnd& end, int restart,
                                    const RestartLimits& limits, JobRunner& runner,
                                    History& history) {
  const std::vector<std::string> hosts = host_names(failed);
  const int first = static_cast<int>(history.all_hosts.size());
  const auto lost = std::count_if(hosts.begin(), hosts.end(),
                                  [&](const std::string& h) { return end.lost_hosts.contains(h); });
  const auto stop = [&](const std::string& why) -> std::optional<JobPlan> {
    if (limits.max_restarts > 0) {
      runner.note("ddlrun: not restarting the job: " + why + "; it ends with status " +
                  std::to_string(end.status));
    }
    return std::nullopt;
  };
  std::string why =
      why_no_restart(restart - 1, static_cast<int>(hosts.size() - lost), first, limits);
  if (!why.empty()) return stop(why);
  Replan replan = next_replan(history.all_hosts, hosts, end.lost_hosts, limits);
  replan.drop_unreachable = true;
  replan.first_hosts = first;
  JobPlan next;
  try {
    next = runner.plan(replan);
  } catch (const std::exception& e) {
    return stop(std::string("cannot plan it again: ") + hostfiles::printable(e.what()));
  }
  for (const auto& [host, reason] : next.unreachable)
    runner.note("ddlrun: " + host + " does not answer (" + reason + "); left out");
  why = why_no_restart(restart - 1, static_cast<int>(next.hosts.size()), first, limits);
  if (!why.empty()) return stop(why);
  const std::string line = restart_line(end, next, history.all_hosts);
  runner.note("ddlrun: restart " + std::to_string(restart) + " of " +
              std::to_string(limits.max_restarts) + " after " + line);
  history.restarts.push_back(line);
  return next;
}

/// The summary of every restart, when there was one.
void summarise(const History& history, int status, JobRunner& runner) {
  for (const std::string& line : restart_summary(history.restarts, status))
    runner.note(line);
}

/// The end of restart `restart` that could not start because of the hosts of `e`: a failure
/// that loses them, as a failure of a running attempt would.
launcher::JobEnd start_failure(const launcher::LaunchError& e, int restart) {
  launcher::JobEnd end;
  end.status = e.status();
  end.failed = true;
  end.reason = "restart " + std::to_string(restart) +
               " could not start: " + hostfiles::printable(e.reason());
  end.lost_hosts.insert(e.hosts().begin(), e.hosts().end());
  end.host = e.hosts().front();
  return end;
}

std::chrono::milliseconds seconds_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

}  // namespace

std::vector<std::string> restart_summary(const std::vector<std::string>& restarts, int status) {
  if (restarts.empty()) return {};
  const size_t n = restarts.size();
  std::vector<std::string> lines = {"ddlrun: the job was restarted " + std::to_string(n) +
                                    (n == 1 ? " time" : " times") + " and ended with status " +
                                    std::to_string(status) + ":"};
  for (size_t i = 0; i < n; ++i)
    lines.push_back("  " + std::to_string(i + 1) + ". after " + restarts[i]);
  return lines;
}

RestartLimits restart_limits(const Options& o) {
  RestartLimits limits;
  limits.max_restarts = o.max_restarts;
  limits.min_hosts = o.min_hosts;
  if (o.nnodes) {
    limits.min_hosts = o.nnodes->min;
    limits.max_hosts = o.nnodes->max;
  }
  return limits;
}

Replan next_replan(const std::vector<std::string>& all_hosts, const std::vector<std::string>& hosts,
                   const std::set<std::string>& lost_now, const RestartLimits& limits) {
  Replan replan;
  int count = 0;
  for (const std::string& h : hosts)
    count += lost_now.contains(h) ? 0 : 1;
  for (const std::string& h : all_hosts) {
    const bool in_job = std::find(hosts.begin(), hosts.end(), h) != hosts.end();
    if (in_job && !lost_now.contains(h)) continue;
    if (!in_job && !lost_now.contains(h) && limits.max_hosts && count < *limits.max_hosts) {
      ++count;  // lost before the last failure: may rejoin
      continue;
    }
    replan.without.insert(h);
  }
  return replan;
}

std::string why_no_restart(int spent, int hosts, int first_hosts, const RestartLimits& limits) {
  if (spent >= limits.max_restarts) {
    return "no restart left (--max-restarts " + std::to_string(limits.max_restarts) + ")";
  }
  const int min = limits.min_hosts.value_or(first_hosts);
  if (hosts < min) {
    return "only " + std::to_string(hosts) + " of its " + std::to_string(first_hosts) +
           " hosts remain, fewer than the " + std::to_string(min) + " it needs (--min-hosts" +
           (limits.min_hosts ? ")" : "; default: all of them)");
  }
  return "";
}

void mark_attempt(JobPlan& plan, int restart, int max_restarts) {
  const std::string count = std::to_string(restart);
  plan.exports.insert(plan.exports.begin(),
                      {{"DDL_RESTART_COUNT", count},
                       {"TORCHELASTIC_RESTART_COUNT", count},
                       {"TORCHELASTIC_MAX_RESTARTS", std::to_string(max_restarts)}});
  if (restart == 0) return;
  plan.job_id += "-r" + count;
  plan.topology.job_id = plan.job_id;
}

std::chrono::milliseconds restart_pause(int restart) {
  if (restart <= 1) return std::chrono::milliseconds(0);
  const int doublings = std::min(restart - 2, 5);  // 0.25 s << 5 = 8 s
  return std::chrono::milliseconds(250 << doublings);
}

std::string between_attempts_note(int signal, double timeout, int restart, const std::string& why) {
  const std::string when =
      " while restart " + std::to_string(restart) + " was being prepared (after " + why + ")";
  if (signal > 0) return "ddlrun: got " + launcher::signal_name(signal) + when + "; leaving now";
  return "ddlrun: the job timed out after " + base::seconds_text(seconds_ms(timeout)) +
         " (--timeout)" + when + "; leaving now";
}

int run_with_restarts(JobPlan first, const RestartLimits& limits, JobRunner& runner) {
  History history{host_names(first), {}};
  check_first_hosts(static_cast<int>(history.all_hosts.size()), limits);
  JobPlan plan = std::move(first);
  for (int restart = 0;; ++restart) {
    launcher::JobEnd end;
    try {
      end = runner.run(plan, restart);
    } catch (const launcher::LaunchError& e) {
      if (restart == 0) throw;  // as without restarts
      if (e.hosts().empty()) {
        runner.note("ddlrun: error: restart " + std::to_string(restart) +
                    " cannot start: " + hostfiles::printable(e.what()));
        summarise(history, e.status(), runner);
        return e.status();
      }
      end = start_failure(e, restart);  // hosts lost while it started: one more failure
      runner.note("ddlrun: " + end.reason);
    }
    if (end.signal != 0 && limits.max_restarts > 0) {  // even one while a failure was stopped
      summarise(history, 128 + end.signal, runner);
      return 128 + end.signal;
    }
    std::optional<JobPlan> next;
    if (end.failed) {
      if (restart < limits.max_restarts) {
        runner.between_attempts(restart + 1, end.reason, history.restarts);
      }
      next = plan_restart(plan, end, restart + 1, limits, runner, history);
    }
    if (!next) {
      summarise(history, end.status, runner);
      return end.status;
    }
    plan = std::move(*next);
  }
}

namespace {

using Clock = std::chrono::steady_clock;

/// The stop signals: blocked in every thread from a restartable job's first attempt on, taken
/// by supervise() during an attempt and by a BetweenAttempts thread between two.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&set, s);
  return set;
}

/// Between two attempts (planning again, re-probing the hosts, the pause): a thread that takes
/// the stop signals with sigtimedwait() and watches the --timeout deadline; either ends ddlrun
/// there and then (the main thread may be waiting for a host's probe) with a note and the
/// summary of the restarts so far. Ends (joined) when the next attempt starts.
class BetweenAttempts {
 public:
  using Leave = std::function<void(int signal)>;  // 0: the deadline
  BetweenAttempts(std::optional<Clock::time_point> deadline, Leave leave)
      : deadline_(deadline), leave_(std::move(leave)), thread_([this] { watch(); }) {}
  ~BetweenAttempts() {
    done_ = true;
    thread_.join();
  }
  BetweenAttempts(const BetweenAttempts&) = delete;
  BetweenAttempts& operator=(const BetweenAttempts&) = delete;

 private:
  void watch() {
    const sigset_t set = stop_signals();
    while (!done_) {
      timespec slice{0, 50'000'000};
      if (deadline_) {
        const auto left = *deadline_ - Clock::now();
        if (left <= Clock::duration::zero()) leave_(0);
        if (left < std::chrono::milliseconds(50)) {
          slice.tv_nsec = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        }
      }
      const int s = sigtimedwait(&set, nullptr, &slice);
      if (s > 0) leave_(s);
    }
  }

  const std::optional<Clock::time_point> deadline_;
  const Leave leave_;
  std::atomic<bool> done_{false};
  launcher::StopSignalsTaken taken_;  ///< before thread_: the guard leaves the signals to it
  std::thread thread_;
};

/// The real runner: make_plan, launch().
class LiveRunner : public JobRunner {
 public:
  LiveRunner(const Options& options, std::ostream& err, spdlog::logger& log,
             hostfiles::GetEnv getenv_fn, void* env_context, const RemoteProbe& remote)
      : options_(options),
        err_(err),
        log_(log),
        getenv_(getenv_fn),
        env_context_(env_context),
        remote_(remote),
        start_(Clock::now()) {}

  JobPlan plan(const Replan& replan) override {
    JobPlan plan = make_plan(options_, getenv_, env_context_, remote_, replan);
    for (const std::string& w : plan.warnings)
      log_.warn("{}", hostfiles::printable(w));
    return plan;
  }

  launcher::JobEnd run(const JobPlan& planned, int restart) override {
    JobPlan plan = planned;
    Options o = options_;
    mark_attempt(plan, restart, o.max_restarts);
    if (restart == 0 && o.max_restarts > 0) {
      const sigset_t set = stop_signals();
      pthread_sigmask(SIG_BLOCK, &set, nullptr);  // a signal between attempts waits for us
    }
    if (restart > 0) {
      pause(restart);
      if (!o.topology_file.empty()) comm::write_topology_file(plan.topology, o.topology_file);
      log_.info("restart {}: the new plan:\n{}", restart,
                hostfiles::printable(render_plan(plan, o)));
    }
    if (o.timeout) {  // from ddlrun's start: the probe and the plan count too
      o.timeout_given = o.timeout;
      o.timeout = remaining(*o.timeout);
    }
    guard_.reset();
    launcher::JobEnd end;
    launch(plan, o, log_, &end);
    return end;
  }

  void note(const std::string& text) override {
    std::lock_guard lock(err_mutex_);
    err_ << hostfiles::printable(text) << "\n";
  }

  void between_attempts(int restart, const std::string& why,
                        const std::vector<std::string>& restarts) override {
    std::optional<Clock::time_point> deadline;
    if (options_.timeout) {
      deadline = start_ + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(*options_.timeout));
    }
    guard_.reset();
    guard_ = std::make_unique<BetweenAttempts>(deadline, [=, this](int signal) {
      note(between_attempts_note(signal, options_.timeout.value_or(0), restart, why));
      const int status = signal > 0 ? 128 + signal : 124;
      for (const std::string& line : restart_summary(restarts, status))
        note(line);
      err_.flush();
      std::_Exit(status);
    });
  }

 private:
  /// The pause before restart `restart` (restart_pause), said when there is one.
  void pause(int restart) {
    const std::chrono::milliseconds wait = restart_pause(restart);
    if (wait.count() == 0) return;
    note("ddlrun: restart " + std::to_string(restart) + " starts in " + base::seconds_text(wait) +
         " (the pause doubles with each restart, up to 8 s)");
    std::this_thread::sleep_for(wait);
  }

  /// What is left of --timeout, which counts for all attempts together.
  double remaining(double timeout) const {
    const std::chrono::duration<double> spent = Clock::now() - start_;
    return std::max(timeout - spent.count(), 0.001);
  }

  const Options options_;
  std::ostream& err_;
  std::mutex err_mutex_;
  spdlog::logger& log_;
  hostfiles::GetEnv getenv_;
  void* env_context_;
  const RemoteProbe remote_;
  const Clock::time_point start_;
  std::unique_ptr<BetweenAttempts> guard_;
};

}  // namespace

std::unique_ptr<JobRunner> make_job_runner(const Options& options, std::ostream& err,
                                           spdlog::logger& log, hostfiles::GetEnv getenv_fn,
                                           void* env_context, const RemoteProbe& remote) {
  return std::make_unique<LiveRunner>(options, err, log, getenv_fn, env_context, remote);
}

}  // namespace ddl::ddlrun
