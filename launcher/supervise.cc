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
//                   and starts the stop: SIGTERM to every process, SIGKILL after the grace.
//                   When the failed rank's output blames a peer (blame.h), the note names that
//                   peer: a rank that left early, or the end of a chain of stalls (the note
//                   then waits up to kBlameWait for the other ranks' errors)
//   host lost    -> the same, for every rank of that host that had not ended
//   signal       -> forwarded; the stop starts. A signal while stopping (a second one, or the
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

#include "launcher/blame.h"

namespace ddl::launcher {

namespace {

using Clock = std::chrono::steady_clock;
/// How long the note of a failure blamed on a stalled peer waits for the other ranks' errors,
/// which name the rank that stopped.
constexpr auto kBlameWait = std::chrono::milliseconds(1000);

/// "the other 3 processes", "the other process".
std::string others(size_t n) {
  return n == 1 ? "the other process" : "the other " + std::to_string(n) + " processes";
}

std::string seconds(std::chrono::milliseconds ms) {
  const double s = static_cast<double>(ms.count()) / 1000.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

}  // namespace

std::string signal_name(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

int supervise(Backend& backend, const comm::Topology* topology, const SuperviseOptions& options,
              OutputSink& sink) {
  EventQueue events;
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR2, SIGTSTP, SIGCONT})
    sigaddset(&stop_signals, s);
  if (options.handle_signals) pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
  signal(SIGPIPE, SIG_IGN);

  std::atomic<bool> done{false};
  std::thread signal_thread;
  std::thread stdin_thread;
  // Wakes the stdin thread at the end (it polls this pipe beside stdin).
  int wake[2] = {-1, -1};
  if (pipe2(wake, O_CLOEXEC) != 0) wake[0] = wake[1] = -1;
  auto cleanup = [&] {
    done = true;
    // SIGUSR2 is in the signal thread's set only to end its wait now rather than at its next
    // timeout; it is never passed on.
    if (signal_thread.joinable()) {
      pthread_kill(signal_thread.native_handle(), SIGUSR2);
      signal_thread.join();
    }
    if (wake[1] >= 0) {
      [[maybe_unused]] ssize_t n = write(wake[1], "x", 1);
    }
    backend.close_stdin();  // wakes a write_stdin() that waits for room
    if (stdin_thread.joinable()) stdin_thread.join();
    for (int fd : wake)
      if (fd >= 0) close(fd);
    backend.finish();
    if (options.handle_signals) pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  };

  // The sink wakes the loop when it can take output again; never after supervise() returns.
  struct WakeTarget {
    std::mutex mutex;
    EventQueue* events;
  };
  auto wake_target = std::make_shared<WakeTarget>();
  wake_target->events = &events;
  sink.on_change([wake_target] {
    std::lock_guard lock(wake_target->mutex);
    if (wake_target->events != nullptr) wake_target->events->push(Event{});
  });
  const auto stop_waking = [&] {
    std::lock_guard lock(wake_target->mutex);
    wake_target->events = nullptr;
  };

  // Signals are taken from the start: one that comes while the backend is still starting the
  // job (connecting to hosts can take long) ends ddlrun there and then; the kernel, the
  // agents and the keeper (keeper.h) take care of what had started.
  std::atomic<bool> started{false};
  if (options.handle_signals) {
    signal_thread = std::thread([&] {
      const timespec slice{0, 100'000'000};
      while (!done) {
        const int s = sigtimedwait(&stop_signals, nullptr, &slice);
        if (s <= 0 || s == SIGUSR2) continue;
        if (!started && (s == SIGINT || s == SIGTERM || s == SIGHUP)) {
          const std::string note =
              "ddlrun: got " + signal_name(s) + " while starting the job; leaving now\n";
          [[maybe_unused]] const ssize_t n = write(2, note.data(), note.size());
          _exit(128 + s);
        }
        events.push(Event{Event::Type::kSignal, -1, -1, Stream::kStdout, {}, {0, s}});
      }
    });
  }
  std::vector<int> waiting;
  try {
    waiting = backend.start(events);
    started = true;
  } catch (...) {
    cleanup();
    stop_waking();
    throw;
  }
  bool forward_stdin = options.stdin_fd >= 0;
  if (forward_stdin && isatty(options.stdin_fd) && tcgetpgrp(options.stdin_fd) != getpgrp()) {
    forward_stdin = false;  // in the background: reading the terminal would stop us
  }
  if (forward_stdin) {
    stdin_thread = std::thread([&] {
      char buf[65536];
      while (!done) {
        pollfd p[2] = {{options.stdin_fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
        const int rc = poll(p, wake[0] >= 0 ? 2 : 1, 100);
        if (rc <= 0 || p[1].revents != 0) continue;
        const ssize_t n = read(options.stdin_fd, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        backend.write_stdin(std::string_view(buf, static_cast<size_t>(n)));
      }
      backend.close_stdin();
    });
  } else {
    backend.close_stdin();
  }

  std::set<int> running(waiting.begin(), waiting.end());
  const size_t total = running.size();
  LastLines tails(options.tail_lines);
  auto who = [&](int rank) {
    if (rank < 0) return std::string(backend.name());
    std::string s = "rank " + std::to_string(rank);
    if (topology != nullptr) {
      if (const comm::RankPlacement* r = topology->find_rank(rank)) {
        if (const comm::Host* h = topology->find_host(r->host)) s += " (" + h->name + ")";
      }
    }
    return s;
  };

  std::optional<int> exit_status;  // set by the first cause of the stop
  bool stopping = false;
  int interrupts = 0;
  constexpr Clock::time_point kNever = Clock::time_point::max();
  Clock::time_point kill_at = kNever;
  Clock::time_point give_up_at = kNever;
  bool leave = false;  // stop waiting for the processes still running
  const Clock::time_point timeout_at = options.timeout ? Clock::now() + *options.timeout : kNever;
  // nullopt: the exit status is decided later (a failure whose cause may be another rank).
  auto begin_stop = [&](std::optional<int> status) {
    if (!exit_status) exit_status = status;
    if (stopping) return;
    stopping = true;
    backend.signal(SIGTERM);
    kill_at = Clock::now() + options.kill_grace;
  };
  // Ctrl-Z: SIGSTOP to every process, then ddlrun stops itself (a moment later, so that the
  // ssh backend's threads send the signal first); SIGCONT (fg) resumes them.
  auto job_control = [&](int s) {
    if (s == SIGCONT) {
      backend.signal(SIGCONT);
      return;
    }
    backend.signal(SIGSTOP);
    if (!options.handle_signals) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(getpid(), SIGSTOP);
  };
  auto show_tail = [&](int rank) {
    const std::vector<std::string> lines = tails.of(rank);
    if (lines.empty()) return;
    sink.note("ddlrun: last lines of " + who(rank) + ":");
    for (const std::string& l : lines)
      sink.note("  " + l);
  };
  // Output the sink cannot take is dropped once this is set (the user is stopping the job).
  bool drop_output = false;
  bool output_failed = false;
  std::set<int> ended;  // ranks that exited while output of theirs was still queued
  // Stdout closed or full: the stop starts (this loop then ends without waiting to write).
  const auto check_output = [&] {
    if (output_failed) return;
    if (const std::optional<OutputFailure> f = sink.failure()) {
      output_failed = drop_output = true;
      sink.note("ddlrun: " + f->message +
                (running.empty() ? std::string()
                                 : "; stopping " + std::to_string(running.size()) + " processes"));
      begin_stop(f->status);
    }
  };

  // The first failure's note, naming whom its output blames.
  Blame blame;
  struct Failure {
    int rank;
    std::string how;       // "exited with status 1"
    std::string stopping;  // "; stopping the other 3 processes"
    int status;            // its exit status for ddlrun's
  };
  std::map<int, ExitStatus> ended_with;  // every process that ended, and how
  struct Lost {
    std::string note;  // "node1: the connection to its agent closed"
    int status;
  };
  std::map<int, Lost> lost_with;      // the ranks of lost hosts
  std::optional<Failure> unreported;  // a stall: its note waits until blame_at
  Clock::time_point blame_at = kNever;
  auto describe = [](const ExitStatus& st) {
    return st.signal != 0 ? "was killed by " + signal_name(st.signal)
                          : "exited with status " + std::to_string(st.code);
  };
  auto report = [&](const Failure& f) {
    const Culprit c = blame.culprit(f.rank);
    const int end = blame.end_of_chain(f.rank);
    const auto cause = ended_with.find(end);
    const auto host = lost_with.find(end);
    // The rank its error leads to was killed or crashed, or its host was lost: that is the
    // failure to report.
    const bool chain_ends_elsewhere = c.kind == Culprit::Kind::kNone && end != f.rank;
    const bool caused_by_end =
        chain_ends_elsewhere && cause != ended_with.end() && cause->second.failed();
    const bool caused_by_host = chain_ends_elsewhere && !caused_by_end && host != lost_with.end();
    if (c.kind == Culprit::Kind::kLeft) {
      sink.note("ddlrun: " + who(c.rank) +
                " exited (status 0) while the others were still running a collective; " +
                who(f.rank) + " " + f.how + " because of it" + f.stopping);
    } else if (c.kind == Culprit::Kind::kStalled) {
      sink.note("ddlrun: " + who(f.rank) + " " + f.how + " waiting for " + who(c.rank) +
                ", which made " + c.detail + f.stopping);
    } else if (caused_by_end) {
      sink.note("ddlrun: " + who(end) + " " + describe(cause->second) + f.stopping);
      if (!exit_status) exit_status = cause->second.shell_code();
    } else if (caused_by_host) {
      sink.note("ddlrun: " + host->second.note + f.stopping);
      if (!exit_status) exit_status = host->second.status;
    } else {
      sink.note("ddlrun: " + who(f.rank) + " " + f.how + f.stopping);
    }
    if (!exit_status) exit_status = f.status;
    if (!caused_by_host) show_tail(caused_by_end ? end : f.rank);
    unreported.reset();
    blame_at = kNever;
  };

  // libddl's errors reach the blame line by line (output comes in chunks); a line is cut at
  // 4 KiB, which no error of libddl's reaches.
  std::map<int, std::string> blame_partial;
  auto feed_blame = [&](int rank, std::string_view data) {
    constexpr size_t kMaxLine = 4096;
    std::string& partial = blame_partial[rank];
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      const std::string_view piece = data.substr(0, nl);
      partial.append(piece.substr(0, kMaxLine - std::min(partial.size(), kMaxLine)));
      if (nl == std::string_view::npos) return;
      blame.line(rank, partial);
      partial.clear();
      data.remove_prefix(nl + 1);
    }
  };

  while (!leave && (!running.empty() ||
                    (!drop_output && (events.has_output() || !ended.empty() || !sink.written())))) {
    if (unreported && (Clock::now() >= blame_at || running.empty())) report(*unreported);
    Clock::time_point deadline =
        std::min({Clock::now() + std::chrono::hours(24), kill_at, give_up_at, blame_at});
    if (!stopping) deadline = std::min(deadline, timeout_at);
    check_output();
    std::optional<Event> e = events.pop(deadline, drop_output || sink.ready());
    if (!e) {
      const Clock::time_point now = Clock::now();
      if (now >= kill_at) {
        if (!running.empty()) {
          sink.note("ddlrun: " + std::to_string(running.size()) + " of " + std::to_string(total) +
                    " processes still running " + seconds(options.kill_grace) +
                    " after SIGTERM; sending SIGKILL");
          backend.signal(SIGKILL);
        }
        kill_at = kNever;
        drop_output = true;  // nor does the stop wait longer for a reader
        give_up_at = now + options.give_up;
      } else if (now >= give_up_at) {
        sink.note("ddlrun: " + std::to_string(running.size()) + " of " + std::to_string(total) +
                  " processes did not report their end " + seconds(options.give_up) +
                  " after SIGKILL; leaving without them");
        leave = true;
      }
      if (!stopping && now >= timeout_at) {
        sink.note("ddlrun: the job timed out after " + seconds(*options.timeout) +
                  " (--timeout); stopping " + std::to_string(running.size()) + " processes");
        begin_stop(124);
      }
      continue;
    }
    switch (e->type) {
      case Event::Type::kOutput: {
        tails.add(e->rank, e->stream, e->data);
        feed_blame(e->rank, e->data);
        if (!drop_output || sink.ready()) sink.output(e->rank, e->stream, e->data);
        break;
      }
      case Event::Type::kExit: {
        if (running.erase(e->rank) == 0) break;
        if (events.has_output(e->rank)) {
          ended.insert(e->rank);
        } else {
          sink.end(e->rank);
        }
        if (!e->status.failed() && !running.empty()) blame.left_early(e->rank);
        ended_with[e->rank] = e->status;
        if (e->status.failed() && !stopping) {
          Failure f{e->rank, describe(e->status),
                    running.empty() ? std::string() : "; stopping " + others(running.size()),
                    e->status.shell_code()};
          if (blame.names_peer(e->rank)) {  // the cause may come with the others' errors
            begin_stop(std::nullopt);
            unreported = std::move(f);
            blame_at = Clock::now() + kBlameWait;
          } else {
            begin_stop(f.status);
            report(f);
          }
        }
        break;
      }
      case Event::Type::kHostFailure: {
        std::string host_name = "host " + std::to_string(e->host);
        std::vector<int> lost;
        for (int r : running) {
          const comm::RankPlacement* p = topology ? topology->find_rank(r) : nullptr;
          if (p != nullptr && p->host == e->host) lost.push_back(r);
        }
        if (topology != nullptr) {
          if (const comm::Host* h = topology->find_host(e->host)) host_name = h->name;
        }
        for (int r : lost) {
          running.erase(r);
          lost_with[r] = {host_name + ": " + e->data, e->status.code != 0 ? e->status.code : 1};
        }
        if (!stopping) {
          sink.note("ddlrun: " + host_name + ": " + e->data +
                    (running.empty() ? std::string() : "; stopping " + others(running.size())));
          begin_stop(e->status.code != 0 ? e->status.code : 1);
        }
        break;
      }
      case Event::Type::kSignal: {
        const int s = e->status.signal;
        if (s == SIGTSTP || s == SIGCONT) {  // job control, as mpirun does it
          job_control(s);
          break;
        }
        if (s == SIGINT) ++interrupts;
        if (stopping) {
          sink.note(std::string("ddlrun: ") +
                    (s == SIGINT && interrupts >= 2 ? "second interrupt"
                                                    : "got " + signal_name(s) + " while stopping") +
                    ": killing every process now");
          if (!exit_status) exit_status = 128 + s;
          backend.signal(SIGKILL);
          kill_at = kNever;
          drop_output = true;
          leave = true;
          break;
        }
        drop_output = true;
        if (!stopping) {
          sink.note("ddlrun: got " + signal_name(s) + "; passing it to " +
                    std::to_string(running.size()) + " processes" +
                    (s == SIGINT ? " (interrupt again to kill them at once)" : ""));
        }
        if (!exit_status) exit_status = 128 + s;
        backend.signal(s);
        if (!stopping) {
          stopping = true;
          kill_at = Clock::now() + options.kill_grace;
        }
        break;
      }
      case Event::Type::kWake:
        break;
    }
    for (auto it = ended.begin(); it != ended.end();) {
      if (events.has_output(*it)) {
        ++it;
      } else {
        sink.end(*it);
        it = ended.erase(it);
      }
    }
  }
  if (unreported) report(*unreported);
  // What a stalled reader has not taken a second after the stop is abandoned.
  for (int r : ended)
    sink.end(r);
  sink.flush(Clock::now() + std::chrono::seconds(1));
  check_output();  // a write that failed after the loop's last look
  sink.flush(Clock::now() + std::chrono::seconds(1));
  stop_waking();
  cleanup();
  return exit_status.value_or(0);
}

}  // namespace ddl::launcher
