#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
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
  int status() const { return status_; }

 private:
  int status_;
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
    kOutput,       ///< `data` is one line a process printed on `stream`, without its '\n'
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
};

/// A thread-safe queue of events: many producers, one consumer.
class EventQueue {
 public:
  void push(Event event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }
  /// The next event, or nullopt when none came before `deadline`.
  std::optional<Event> pop(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_until(lock, deadline, [this] { return !events_.empty(); }))
      return std::nullopt;
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
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
  virtual void write_stdin(std::string_view data) = 0;
  /// Closes rank 0's standard input.
  virtual void close_stdin() = 0;
  /// Releases everything (threads, connections, temporary files) once every process has ended
  /// or been killed. Kills what is still running. Idempotent; the destructor calls it.
  virtual void finish() = 0;
};

}  // namespace ddl::launcher
