#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddl::launcher {

// How a backend and the supervisor talk. A backend starts processes somewhere (here, on other
// hosts through their agents, or one mpirun/srun/prterun/jsrun process that starts the ranks)
// and reports what they do as Events on an EventQueue, from any thread. The supervisor
// (supervise.h) is the only consumer: it prints output, decides when the job has failed, and
// tells the backend to signal its processes. The core never includes a concrete backend's
// header; each backend folder exports one factory (see factory.h).

/// A failure to start the job: what() names the host or rank and the next step. Nothing the
/// backend started is left running when it is thrown.
class LaunchError : public std::runtime_error {
 public:
  /// `status` is ddlrun's exit status for this failure: 1 by default, 127 when the program
  /// was not found, 126 when it could not be executed.
  explicit LaunchError(const std::string& what, int status = 1)
      : std::runtime_error(what), status_(status) {}
  /// A failure of the hosts `hosts` (each unreachable, or its agent failed), with `reason`
  /// saying it on one line ("node2: no heartbeat").
  LaunchError(const std::string& what, int status, std::vector<std::string> hosts,
              std::string reason)
      : std::runtime_error(what),
        status_(status),
        hosts_(std::move(hosts)),
        reason_(std::move(reason)) {}
  int status() const { return status_; }
  /// The hosts that failed, when the job could not start because of them; empty otherwise.
  const std::vector<std::string>& hosts() const { return hosts_; }
  const std::string& reason() const { return reason_; }

 private:
  int status_;
  std::vector<std::string> hosts_;
  std::string reason_;
};

/// How a process ended: an exit status, or the signal that killed it.
struct ExitStatus {
  int code = 0;    ///< its exit status when signal == 0
  int signal = 0;  ///< the signal that ended it, 0 when it exited
  bool failed() const { return signal != 0 || code != 0; }
  /// The shell's convention: code, or 128 + signal.
  int shell_code() const { return signal != 0 ? 128 + signal : code; }
  bool operator==(const ExitStatus&) const = default;
};

enum class Stream { kStdout, kStderr };

/// Something that happened to the job.
struct Event {
  enum class Type {
    kOutput,       ///< `data` is bytes a process printed on `stream`: any part of its output, lines
                   ///< or not (a whole message of ddlrun's own ends with '\n')
    kExit,         ///< process `rank` ended with `status`
    kHostFailure,  ///< host `host` was lost (`data` says why): its unfinished ranks are gone
    kSignal,       ///< ddlrun received signal `status.signal` (the supervisor's own events)
    kWake,         ///< nothing; wakes the supervisor
  };
  Type type = Type::kWake;
  int rank = -1;  ///< the global rank; -1: the backend's single launcher process
  int host = -1;  ///< the host index (kHostFailure)
  Stream stream = Stream::kStdout;
  std::string data;
  ExitStatus status;
  /// kHostFailure: lost only because its tree parent in the ssh launcher's launch tree was
  /// (launcher/ssh/tree.h): not a lost host of its own, so a restart keeps it.
  bool with_parent = false;
};

/// A thread-safe queue of events: many producers, one consumer. Output is bounded by the
/// producers: a producer stops reading its source while output_full() and goes on when its
/// waker says room appeared. Other events are never held back by output: a
/// consumer that cannot take output now takes the others past it (pop(deadline, false)).
class EventQueue {
 public:
  /// Bytes of queued output (with each event's own size) at which output_full() says stop;
  /// producers go on below half.
  static constexpr size_t kOutputLimit = size_t{4} << 20;

  /// Queues `event`; never blocks.
  void push(Event event) {
    {
      std::lock_guard lock(mutex_);
      const bool output = event.type == Event::Type::kOutput;
      if (output) output_bytes_ += cost(event);
      (output ? output_ : others_).push_back({next_seq_++, std::move(event)});
    }
    ready_.notify_one();
  }
  /// The next event in the order they came, or nullopt when none came before `deadline`.
  /// Without `take_output`, output stays queued and only the other events come out.
  std::optional<Event> pop(std::chrono::steady_clock::time_point deadline,
                           bool take_output = true) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_until(lock, deadline,
                           [&] { return !others_.empty() || (take_output && !output_.empty()); })) {
      return std::nullopt;
    }
    const bool output = take_output && !output_.empty() &&
                        (others_.empty() || output_.front().seq < others_.front().seq);
    std::deque<Queued>& from = output ? output_ : others_;
    Event e = std::move(from.front().event);
    from.pop_front();
    if (output) {
      output_bytes_ -= cost(e);
      if (room_wanted_ && output_bytes_ < kOutputLimit / 2) {
        room_wanted_ = false;
        for (auto& [token, waker] : wakers_)
          waker();
      }
    }
    return e;
  }
  /// True while kOutputLimit bytes of output or more are queued: stop reading output.
  bool output_full() {
    std::lock_guard lock(mutex_);
    return full_locked();
  }
  /// Calls `waker` (on the consumer's thread, with the queue locked: it must only wake its
  /// producer, e.g. write to a pipe) each time room appears after output_full() said true.
  /// Returns the token that remove_waker() takes.
  int add_waker(std::function<void()> waker) {
    std::lock_guard lock(mutex_);
    wakers_.emplace_back(next_token_, std::move(waker));
    return next_token_++;
  }
  /// After this returns, the waker is never called again.
  void remove_waker(int token) {
    std::lock_guard lock(mutex_);
    std::erase_if(wakers_, [&](const auto& w) { return w.first == token; });
  }
  /// Whether output of process `rank` (any, when nullopt) is still queued.
  bool has_output(std::optional<int> rank = std::nullopt) {
    std::lock_guard lock(mutex_);
    if (!rank) return !output_.empty();
    return std::any_of(output_.begin(), output_.end(),
                       [&](const Queued& q) { return q.event.rank == *rank; });
  }

 private:
  struct Queued {
    uint64_t seq;
    Event event;
  };
  /// What an output event holds in memory, roughly.
  static size_t cost(const Event& e) { return e.data.size() + sizeof(Queued) + 32; }
  bool full_locked() {
    const bool full =
        output_bytes_ >= kOutputLimit || (room_wanted_ && output_bytes_ >= kOutputLimit / 2);
    room_wanted_ = room_wanted_ || full;
    return full;
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Queued> output_;
  std::deque<Queued> others_;
  uint64_t next_seq_ = 0;
  size_t output_bytes_ = 0;
  bool room_wanted_ = false;
  std::vector<std::pair<int, std::function<void()>>> wakers_;
  int next_token_ = 0;
};

/// One way of starting a job's processes.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "local", "ssh", "mpirun", ...: for messages.
  virtual std::string_view name() const = 0;
  /// Starts every process; from then on events go to `events`. Returns the global ranks whose
  /// kExit events the supervisor waits for ({-1} for a single launcher process such as mpirun).
  /// Throws LaunchError when the job cannot start, with nothing left running.
  virtual std::vector<int> start(EventQueue& events) = 0;
  /// Sends `signal` to every process still running (each rank's whole process group).
  virtual void signal(int signal) = 0;
  /// Data for rank 0's standard input (the launcher process's, for single-process backends).
  /// Blocks while a bounded amount of earlier data waits to be read (back-pressure on ddlrun's
  /// stdin), until close_stdin() or finish(); data for a stdin that is gone is dropped.
  virtual void write_stdin(std::string_view data) = 0;
  /// Closes rank 0's standard input (once what was written has gone); wakes a blocked
  /// write_stdin(), which then drops its data. Idempotent; any thread.
  virtual void close_stdin() = 0;
  /// Whether output of processes that have ended may still come: the ssh launcher's agents send
  /// their ranks' exits past output that waits for its host's window (protocol.h: M), and say
  /// done once all of it went. The supervisor waits for it as for queued output; the backend
  /// pushes an event (kWake) when it turns false.
  virtual bool output_may_follow() { return false; }
  /// Releases everything (threads, connections, temporary files) once every process has ended
  /// or been killed. Kills what is still running. Idempotent; the destructor calls it.
  virtual void finish() = 0;
};

}  // namespace ddl::launcher
