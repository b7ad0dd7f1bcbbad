// Supervising a job: one loop over the backend's events.
//
// How it works: supervise() blocks SIGINT, SIGTERM and SIGHUP before the backend starts any
// thread (so every thread inherits the mask and none is interrupted), and a signal thread takes
// them with sigtimedwait() and queues them as events. A stdin thread forwards ddlrun's stdin to
// rank 0. The loop takes one event at a time, with a deadline that is the earliest of the job's
// timeout and the end of the kill grace:
//   output       -> the sink (and the rank's last lines, for the summary); taken only while
//                   the sink is ready(), so that a slow reader holds the ranks back, never
//                   this loop (other events pass output that waits). Once ddlrun got a
//                   signal or sent SIGKILL, output the sink cannot take is dropped instead.
//   sink failed  -> (stdout closed or full) the stop starts: 141 for EPIPE, else 1
//   exit         -> a failure (status != 0 or a signal) that comes first names the culprit
//                   and starts the stop: SIGTERM (and SIGCONT, so that a stopped process
//                   takes it) to every process, SIGKILL after the grace.
//                   When the failed rank's output blames a peer (blame.h), the note names that
//                   peer: a rank that left early, or the end of a chain of stalls (the note
//                   then waits up to kBlameWait for the other ranks' errors). For a stall,
//                   SIGTERM waits as long: the stalled peer is still running, and its own
//                   timeout, moments later, names the rank it waits for; killed first, it
//                   would end the chain as the culprit, a bystander.
//   host lost    -> the same, for every rank of that host that had not ended
//   signal       -> forwarded (with SIGCONT); the stop starts. A signal while stopping (a second
//   one, or the
//                   first after a failure) sends SIGKILL and ends the loop at once
//   SIGTSTP      -> SIGSTOP to every process, then to ddlrun itself; SIGCONT resumes them
//   timeout      -> the stop starts; exit status 124
//   SIGKILL sent -> at most `give_up` more for the processes to report their end
// The loop ends when every process the backend started has ended and their output is written
// (or dropped), or earlier as above: ddlrun never waits without a deadline for a host it
// cannot reach. Only the first cause of the stop counts for the exit status; ranks that die of
// our SIGTERM afterwards do not.

#include "launcher/supervise.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/text.h"
#include "launcher/blame.h"
#include "launcher/startup_signals.h"

namespace ddl::launcher {

namespace {

using Clock = std::chrono::steady_clock;
constexpr Clock::time_point kNever = Clock::time_point::max();
/// How long the note of a failure blamed on a stalled peer waits for the other ranks' errors,
/// which name the rank that stopped (and SIGTERM with it).
constexpr auto kBlameWait = std::chrono::milliseconds(1000);

/// "3 processes", "1 process".
std::string processes(size_t n) {
  return std::to_string(n) + (n == 1 ? " process" : " processes");
}

/// "the other 3 processes", "the other process".
std::string others(size_t n) {
  return n == 1 ? "the other process" : "the other " + std::to_string(n) + " processes";
}

using base::seconds_text;

/// "exited with status 1", "was killed by SIGKILL".
std::string describe(const ExitStatus& st) {
  return st.signal != 0 ? "was killed by " + signal_name(st.signal)
                        : "exited with status " + std::to_string(st.code);
}

/// The threads beside the loop. The signal thread takes the stop signals (blocked in every
/// thread) with sigtimedwait() and queues them as events; one that comes before the job has
/// started ends ddlrun there and then. The stdin thread forwards ddlrun's stdin to rank 0.
class SideThreads {
 public:
  SideThreads(Backend& backend, EventQueue& events, const SuperviseOptions& options)
      : backend_(backend), events_(events), options_(options) {}

  /// Blocks the stop signals in this thread before the backend starts any (so that every thread
  /// inherits the mask and none is interrupted), ignores SIGPIPE, and opens the pipe that wakes
  /// the stdin thread at the end.
  void prepare() {
    sigemptyset(&stop_signals_);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR2, SIGTSTP, SIGCONT})
      sigaddset(&stop_signals_, s);
    if (options_.handle_signals) {
      taken_.emplace();
      pthread_sigmask(SIG_BLOCK, &stop_signals_, &old_mask_);
    }
    signal(SIGPIPE, SIG_IGN);
    if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  }

  /// Signals are taken from the start: one that comes while the backend is still starting the
  /// job (connecting to hosts can take long) ends ddlrun there and then; the kernel, the
  /// agents and the keeper (keeper.h) take care of what had started.
  void start_signals() {
    if (options_.handle_signals) signal_thread_ = std::thread([this] { take_signals(); });
  }

  /// From now on a signal is an event for the loop.
  void job_started() {
    started_ = true;
    retire_startup_signals();
  }

  /// Forwards stdin to rank 0, or closes rank 0's stdin when there is none to forward.
  void start_stdin() {
    bool forward = options_.stdin_fd >= 0;
    if (forward && isatty(options_.stdin_fd) && tcgetpgrp(options_.stdin_fd) != getpgrp()) {
      forward = false;  // in the background: reading the terminal would stop us
    }
    if (forward) {
      stdin_thread_ = std::thread([this] { forward_stdin(); });
    } else {
      backend_.close_stdin();
    }
  }

  /// Ends both threads, then the backend (finish()), and restores the signal mask.
  void stop() {
    done_ = true;
    // SIGUSR2 is in the signal thread's set only to end its wait now rather than at its next
    // timeout; it is never passed on.
    if (signal_thread_.joinable()) {
      pthread_kill(signal_thread_.native_handle(), SIGUSR2);
      signal_thread_.join();
    }
    if (wake_[1] >= 0) {
      [[maybe_unused]] ssize_t n = write(wake_[1], "x", 1);
    }
    backend_.close_stdin();  // wakes a write_stdin() that waits for room
    if (stdin_thread_.joinable()) stdin_thread_.join();
    for (int fd : wake_)
      if (fd >= 0) close(fd);
    backend_.finish();
    if (options_.handle_signals) pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    taken_.reset();
  }

 private:
  void take_signals() {
    const timespec slice{0, 100'000'000};
    while (!done_) {
      const int s = sigtimedwait(&stop_signals_, nullptr, &slice);
      if (s <= 0 || s == SIGUSR2) continue;
      if (!started_ && (s == SIGINT || s == SIGTERM || s == SIGHUP)) {
        const std::string note = startup_signal_note(s);
        [[maybe_unused]] const ssize_t n = write(2, note.data(), note.size());
        _exit(128 + s);
      }
      events_.push(Event{Event::Type::kSignal, -1, -1, Stream::kStdout, {}, {0, s}});
    }
  }

  // Polls the wake pipe beside stdin, so that stop() ends it.
  void forward_stdin() {
    char buf[65536];
    while (!done_) {
      pollfd p[2] = {{options_.stdin_fd, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      const int rc = poll(p, wake_[0] >= 0 ? 2 : 1, 100);
      if (rc <= 0 || p[1].revents != 0) continue;
      const ssize_t n = read(options_.stdin_fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;
      backend_.write_stdin(std::string_view(buf, static_cast<size_t>(n)));
    }
    backend_.close_stdin();
  }

  Backend& backend_;
  EventQueue& events_;
  const SuperviseOptions& options_;
  sigset_t stop_signals_;
  sigset_t old_mask_;
  std::optional<StopSignalsTaken> taken_;  ///< from prepare() to stop(): ours, not the guard's
  std::atomic<bool> done_{false};
  std::atomic<bool> started_{false};
  int wake_[2] = {-1, -1};
  std::thread signal_thread_;
  std::thread stdin_thread_;
};

/// Wakes the loop (an empty event) when the sink can take output again; never after stop().
class SinkWake {
 public:
  SinkWake(EventQueue& events, OutputSink& sink) : target_(std::make_shared<Target>()) {
    target_->events = &events;
    sink.on_change([target = target_] {
      std::lock_guard lock(target->mutex);
      if (target->events != nullptr) target->events->push(Event{});
    });
  }
  void stop() {
    std::lock_guard lock(target_->mutex);
    target_->events = nullptr;
  }

 private:
  struct Target {
    std::mutex mutex;
    EventQueue* events = nullptr;
  };
  std::shared_ptr<Target> target_;
};

/// A failed rank whose note is written (now, or once the others' errors came).
struct Failure {
  int rank;
  std::string how;       // "exited with status 1"
  std::string stopping;  // "; stopping the other 3 processes"
  int status;            // its exit status for ddlrun's
};

/// A rank of a lost host.
struct Lost {
  std::string note;  // "node1: the connection to its agent closed"
  int status;
};

/// The event loop (how it works above) and its state.
class Supervisor {
 public:
  Supervisor(Backend& backend, const comm::Topology* topology, const SuperviseOptions& options,
             OutputSink& sink, EventQueue& events, const std::vector<int>& waiting)
      : backend_(backend),
        topology_(topology),
        options_(options),
        sink_(sink),
        events_(events),
        running_(waiting.begin(), waiting.end()),
        total_(running_.size()),
        tails_(options.tail_lines),
        timeout_at_(options.timeout ? Clock::now() + *options.timeout : kNever) {}

  /// Takes events until the job has ended and its output is written (or dropped, or the loop
  /// leaves without the processes); returns ddlrun's exit status.
  int run() {
    while (!leave_ && waiting()) {
      if (unreported_ && (Clock::now() >= blame_at_ || running_.empty())) report_deferred();
      Clock::time_point deadline = std::min(
          {Clock::now() + std::chrono::hours(24), term_at_, kill_at_, give_up_at_, blame_at_});
      if (!stopping_) deadline = std::min(deadline, timeout_at_);
      check_output();
      std::optional<Event> e = events_.pop(deadline, drop_output_ || sink_.ready());
      if (!e) {
        on_deadline();
        continue;
      }
      handle(*e);
      end_drained_ranks();
    }
    finish_output();
    end_.status = exit_status_.value_or(0);
    end_.signal = signal_;
    end_.failed = failed_ && end_.status != 0 && signal_ == 0;
    return end_.status;
  }

  /// How the job ended; complete once run() returned.
  const JobEnd& end() const { return end_; }

 private:
  // Processes still run, or (unless output is dropped) output is still queued, unwritten or
  // on its way (Backend::output_may_follow).
  bool waiting() {
    return !running_.empty() ||
           (!drop_output_ && (events_.has_output() || !ended_.empty() || !sink_.written() ||
                              backend_.output_may_follow()));
  }

  void handle(const Event& e) {
    switch (e.type) {
      case Event::Type::kOutput:
        // Output after its rank's exit (the ssh launcher's exits pass output that waits for
        // its window): the rank ends in the sink again once this is out.
        if (ended_with_.contains(e.rank)) ended_.insert(e.rank);
        tails_.add(e.rank, e.stream, e.data);
        feed_blame(e.rank, e.data);
        if (!drop_output_ || sink_.ready()) sink_.output(e.rank, e.stream, e.data);
        break;
      case Event::Type::kExit:
        on_exit(e.rank, e.status);
        break;
      case Event::Type::kHostFailure:
        on_host_failure(e);
        break;
      case Event::Type::kSignal:
        on_signal(e.status.signal);
        break;
      case Event::Type::kWake:
        break;
    }
  }

  // --- the stop ---------------------------------------------------------------------------

  // status nullopt: the exit status is decided later (a failure whose cause may be another rank).
  // SIGTERM goes out after `term_delay` (a stall: see the top of the file).
  void begin_stop(std::optional<int> status, Clock::duration term_delay = {}) {
    if (!exit_status_) exit_status_ = status;
    if (stopping_) return;
    stopping_ = true;
    term_at_ = Clock::now() + term_delay;
    if (term_delay <= Clock::duration::zero()) send_term();
  }

  void send_term() {
    term_at_ = kNever;
    stop_signal_ = SIGTERM;
    signal_and_resume(SIGTERM);
    kill_at_ = Clock::now() + options_.kill_grace;
  }

  // A stop's signal, then SIGCONT (as Slurm's scancel and systemd do): a stopped process (kill
  // -STOP, a suspended job) takes the signal now instead of being killed after the grace.
  void signal_and_resume(int s) {
    backend_.signal(s);
    backend_.signal(SIGCONT);
  }

  // No event came before the deadline: the grace is over, or SIGKILL's wait, or the timeout.
  void on_deadline() {
    const Clock::time_point now = Clock::now();
    if (now >= term_at_) send_term();
    if (now >= kill_at_) {
      if (!running_.empty()) {
        sink_.note("ddlrun: " + std::to_string(running_.size()) + " of " + std::to_string(total_) +
                   " processes still running " + seconds_text(options_.kill_grace) + " after " +
                   signal_name(stop_signal_) + "; sending SIGKILL");
        backend_.signal(SIGKILL);
      }
      kill_at_ = kNever;
      drop_output_ = true;  // nor does the stop wait longer for a reader
      give_up_at_ = now + options_.give_up;
    } else if (now >= give_up_at_) {
      for (int r : running_)
        if (std::string h = host_of(r); !h.empty()) end_.lost_hosts.insert(h);
      sink_.note("ddlrun: " + std::to_string(running_.size()) + " of " + std::to_string(total_) +
                 " processes did not report their end " + seconds_text(options_.give_up) +
                 " after SIGKILL; leaving without them");
      leave_ = true;
    }
    if (!stopping_ && now >= timeout_at_) {
      sink_.note("ddlrun: the job timed out after " +
                 seconds_text(options_.timeout_given.value_or(*options_.timeout)) +
                 " (--timeout); stopping " + processes(running_.size()));
      begin_stop(124);
    }
  }

  void on_signal(int s) {
    if (s == SIGTSTP || s == SIGCONT) {  // job control, as mpirun does it
      job_control(s);
      return;
    }
    if (s == SIGINT) ++interrupts_;
    if (signal_ == 0) signal_ = s;
    if (stopping_) {
      kill_now(s);
      return;
    }
    drop_output_ = true;
    sink_.note("ddlrun: got " + signal_name(s) + "; passing it to " + processes(running_.size()) +
               (s == SIGINT ? " (interrupt again to kill them at once)" : ""));
    if (!exit_status_) exit_status_ = 128 + s;
    stop_signal_ = s;
    signal_and_resume(s);
    stopping_ = true;
    kill_at_ = Clock::now() + options_.kill_grace;
  }

  // A signal while stopping (a second one, or the first after a failure): SIGKILL, and the
  // loop ends at once.
  void kill_now(int s) {
    sink_.note(std::string("ddlrun: ") +
               (s == SIGINT && interrupts_ >= 2 ? "second interrupt"
                                                : "got " + signal_name(s) + " while stopping") +
               ": killing every process now");
    if (!exit_status_) exit_status_ = 128 + s;
    backend_.signal(SIGKILL);
    kill_at_ = kNever;
    drop_output_ = true;
    leave_ = true;
  }

  // Ctrl-Z: SIGSTOP to every process, then ddlrun stops itself (a moment later, so that the
  // ssh backend's threads send the signal first); SIGCONT (fg) resumes them.
  void job_control(int s) {
    if (s == SIGCONT) {
      backend_.signal(SIGCONT);
      return;
    }
    if (options_.on_stopped) {  // one node of a per-node job: it ends rather than pause alone
      options_.on_stopped();
      sink_.note("ddlrun: got SIGTSTP: a node of a per-node job cannot pause alone; stopping " +
                 processes(running_.size()));
      begin_stop(128 + SIGTSTP);
      return;
    }
    backend_.signal(SIGSTOP);
    if (!options_.handle_signals) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(getpid(), SIGSTOP);
  }

  // Stdout closed or full: the stop starts (this loop then ends without waiting to write).
  void check_output() {
    if (output_failed_) return;
    if (const std::optional<OutputFailure> f = sink_.failure()) {
      output_failed_ = drop_output_ = true;
      sink_.note("ddlrun: " + f->message +
                 (running_.empty() ? std::string() : "; stopping " + processes(running_.size())));
      begin_stop(f->status);
    }
  }

  // --- ends of processes and hosts --------------------------------------------------------

  void on_exit(int rank, const ExitStatus& status) {
    if (running_.erase(rank) == 0) return;
    if (events_.has_output(rank)) {
      ended_.insert(rank);
    } else {
      sink_.end(rank);
    }
    if (!status.failed() && !running_.empty()) blame_.left_early(rank);
    ended_with_[rank] = status;
    if (status.failed() && !stopping_) {
      // A failure that blames a peer is told once its note is (report_deferred).
      if (options_.on_first_failure && !blame_.names_peer(rank)) {
        options_.on_first_failure(rank, status);
      }
      first_failure(rank, status);
    }
  }

  // The failure that starts the stop; its note waits for the others' errors when the cause
  // may come with them.
  void first_failure(int rank, const ExitStatus& status) {
    Failure f{rank, describe(status),
              running_.empty() ? std::string() : "; stopping " + others(running_.size()),
              status.shell_code()};
    failed_ = true;
    if (blame_.names_peer(rank)) {
      begin_stop(std::nullopt, blame_.stalled(rank) ? kBlameWait : Clock::duration::zero());
      unreported_ = std::move(f);
      blame_at_ = Clock::now() + kBlameWait;
    } else {
      begin_stop(f.status);
      report(f);
    }
  }

  void on_host_failure(const Event& e) {
    std::string host_name = "host " + std::to_string(e.host);
    std::vector<int> lost;
    for (int r : running_) {
      const comm::RankPlacement* p = topology_ ? topology_->find_rank(r) : nullptr;
      if (p != nullptr && p->host == e.host) lost.push_back(r);
    }
    if (topology_ != nullptr) {
      if (const comm::Host* h = topology_->find_host(e.host)) host_name = h->name;
    }
    const int status = e.status.code != 0 ? e.status.code : 1;
    for (int r : lost) {
      running_.erase(r);
      lost_with_[r] = {host_name + ": " + e.data, status};
    }
    if (topology_ != nullptr && topology_->find_host(e.host) != nullptr && !e.with_parent) {
      end_.lost_hosts.insert(host_name);
    }
    if (!stopping_) {
      failed_ = true;
      end_.reason = host_name + ": " + e.data;
      end_.host = host_name;
      sink_.note("ddlrun: " + end_.reason +
                 (running_.empty() ? std::string() : "; stopping " + others(running_.size())));
      begin_stop(status);
    }
  }

  // Ranks that ended while output of theirs was queued end in the sink once it is out.
  void end_drained_ranks() {
    for (auto it = ended_.begin(); it != ended_.end();) {
      if (events_.has_output(*it)) {
        ++it;
      } else {
        sink_.end(*it);
        it = ended_.erase(it);
      }
    }
  }

  void finish_output() {
    if (unreported_) report_deferred();
    // What a stalled reader has not taken a second after the stop is abandoned.
    for (int r : ended_)
      sink_.end(r);
    sink_.flush(Clock::now() + std::chrono::seconds(1));
    check_output();  // a write that failed after the loop's last look
    sink_.flush(Clock::now() + std::chrono::seconds(1));
  }

  // --- the failure's note -----------------------------------------------------------------

  // The name of `rank`'s host; "" when unknown.
  std::string host_of(int rank) const {
    if (topology_ != nullptr) {
      if (const comm::RankPlacement* r = topology_->find_rank(rank)) {
        if (const comm::Host* h = topology_->find_host(r->host)) return h->name;
      }
    }
    return "";
  }

  // "rank 3 (node1)", or the backend's name for its launcher process.
  std::string who(int rank) const {
    if (rank < 0) return std::string(backend_.name());
    const std::string host = host_of(rank);
    return "rank " + std::to_string(rank) + (host.empty() ? "" : " (" + host + ")");
  }

  void show_tail(int rank) {
    const std::vector<std::string> lines = tails_.of(rank);
    if (lines.empty()) return;
    sink_.note("ddlrun: last lines of " + who(rank) + ":");
    for (const std::string& l : lines)
      sink_.note("  " + l);
  }

  // A failure whose note waited for the other ranks' errors: its note now, and then
  // on_first_failure with the status it gave the job.
  void report_deferred() {
    const Failure f = *unreported_;
    const auto [rank, status] = report(f);
    if (options_.on_first_failure) options_.on_first_failure(rank, status);
  }

  // The first failure's note, naming whom its output blames. Returns the rank it names as the
  // cause and how that one ended.
  std::pair<int, ExitStatus> report(const Failure& f) {
    const Culprit c = blame_.culprit(f.rank);
    const int end = blame_.end_of_chain(f.rank);
    const auto cause = ended_with_.find(end);
    const auto host = lost_with_.find(end);
    // The rank its error leads to was killed or crashed, or its host was lost: that is the
    // failure to report.
    const bool chain_ends_elsewhere = c.kind == Culprit::Kind::kNone && end != f.rank;
    const bool caused_by_end =
        chain_ends_elsewhere && cause != ended_with_.end() && cause->second.failed();
    const bool caused_by_host = chain_ends_elsewhere && !caused_by_end && host != lost_with_.end();
    int blamed = f.rank;
    std::string text;
    if (c.kind == Culprit::Kind::kLeft) {
      text = who(c.rank) + " exited (status 0) while the others were still running a collective; " +
             who(f.rank) + " " + f.how + " because of it";
      blamed = c.rank;
    } else if (c.kind == Culprit::Kind::kStalled) {
      text = who(f.rank) + " " + f.how + " waiting for " + who(c.rank) + ", which made " + c.detail;
      blamed = c.rank;
    } else if (caused_by_end) {
      text = who(end) + " " + describe(cause->second);
      blamed = end;
      if (!exit_status_) exit_status_ = cause->second.shell_code();
    } else if (caused_by_host) {
      text = host->second.note;
      blamed = end;
      if (!exit_status_) exit_status_ = host->second.status;
    } else {
      text = who(f.rank) + " " + f.how;
    }
    sink_.note("ddlrun: " + text + f.stopping);
    end_.reason = text;
    end_.rank = caused_by_host ? -1 : blamed;
    end_.host = host_of(blamed);
    if (!exit_status_) exit_status_ = f.status;
    if (!caused_by_host) show_tail(caused_by_end ? end : f.rank);
    unreported_.reset();
    blame_at_ = kNever;
    if (caused_by_end) return {end, cause->second};
    return {f.rank, ExitStatus{f.status, 0}};
  }

  // libddl's errors reach the blame line by line (output comes in chunks); a line is cut at
  // 4 KiB, which no error of libddl's reaches.
  void feed_blame(int rank, std::string_view data) {
    constexpr size_t kMaxLine = 4096;
    std::string& partial = blame_partial_[rank];
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      const std::string_view piece = data.substr(0, nl);
      partial.append(piece.substr(0, kMaxLine - std::min(partial.size(), kMaxLine)));
      if (nl == std::string_view::npos) return;
      blame_.line(rank, partial);
      partial.clear();
      data.remove_prefix(nl + 1);
    }
  }

  Backend& backend_;
  const comm::Topology* topology_;
  const SuperviseOptions& options_;
  OutputSink& sink_;
  EventQueue& events_;
  std::set<int> running_;
  const size_t total_;
  LastLines tails_;
  std::set<int> ended_;  // ranks that exited while output of theirs was still queued

  std::optional<int> exit_status_;  // set by the first cause of the stop
  bool stopping_ = false;
  int interrupts_ = 0;
  Clock::time_point term_at_ = kNever;  // a stop's SIGTERM, when it waits (a stall)
  Clock::time_point kill_at_ = kNever;
  Clock::time_point give_up_at_ = kNever;
  const Clock::time_point timeout_at_;
  bool leave_ = false;  // stop waiting for the processes still running
  // Output the sink cannot take is dropped once this is set (the user is stopping the job).
  bool drop_output_ = false;
  bool output_failed_ = false;

  Blame blame_;
  std::map<int, ExitStatus> ended_with_;  // every process that ended, and how
  std::map<int, Lost> lost_with_;         // the ranks of lost hosts
  std::optional<Failure> unreported_;     // a stall: its note waits until blame_at_
  Clock::time_point blame_at_ = kNever;
  std::map<int, std::string> blame_partial_;  // each rank's unfinished line

  bool failed_ = false;        // the stop began with a failure of the job's own
  int signal_ = 0;             // the first stop signal ddlrun got
  int stop_signal_ = SIGTERM;  // what the stop sent the processes (a forwarded SIGINT, say)
  JobEnd end_;
};

}  // namespace

std::string signal_name(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

int supervise(Backend& backend, const comm::Topology* topology, const SuperviseOptions& options,
              OutputSink& sink, JobEnd* end) {
  EventQueue events;
  SideThreads threads(backend, events, options);
  threads.prepare();
  SinkWake sink_wake(events, sink);
  threads.start_signals();
  std::vector<int> waiting;
  try {
    waiting = backend.start(events);
    threads.job_started();
  } catch (...) {
    threads.stop();
    sink_wake.stop();
    throw;
  }
  threads.start_stdin();
  Supervisor supervisor(backend, topology, options, sink, events, waiting);
  const int status = supervisor.run();
  sink_wake.stop();
  threads.stop();
  if (end != nullptr) *end = supervisor.end();
  return status;
}

}  // namespace ddl::launcher
