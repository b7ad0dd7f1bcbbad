#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "launcher/backend.h"
#include "launcher/job.h"

namespace ddl::launcher {

/// One process to start on this host.
struct SpawnSpec {
  std::vector<std::string> argv;  ///< argv[0] is looked up on the PATH of `env` when bare
  std::vector<std::string> env;   ///< the whole environment, "NAME=value" each
  comm::CpuSet cpus;              ///< bind to these PUs; empty: inherit ddlrun's
  bool pipe_stdin = false;        ///< a pipe (write_stdin); otherwise /dev/null
  std::string cwd;                ///< the directory it starts in; empty: this process's
};

/// Why processes cannot start in directory `dir` on this host, or "" when they can: "working
/// directory /data/run is missing (No such file or directory): create it there, or give --wdir
/// DIR naming a directory every host has". The text names neither the host nor the program.
std::string working_directory_problem(const std::string& dir);

/// The error of a pipe (or other descriptor) that cannot be created for errno `error`; for
/// EMFILE and ENFILE the text says the limit and what to do ("ulimit -n").
LaunchError pipe_error(int error);

/// The process environment as "NAME=value" strings, with `add` set (replacing same names).
std::vector<std::string> merge_environment(const std::vector<std::string>& base,
                                           const std::vector<EnvVar>& add);

/// This process's environment as "NAME=value" strings.
std::vector<std::string> current_environment();

/// The path execve should run for `program` with `env`'s PATH: `program` itself when it holds
/// a '/', else the first executable match on PATH. Throws LaunchError (status 127 when not
/// found, 126 when found but not executable) naming `where` (a host): "node1: cannot run
/// 'trian.py': not found on PATH (/usr/bin:/bin)".
std::string resolve_program(const std::string& program, const std::vector<std::string>& env,
                            std::string_view where);

/// Starts processes on this host and reports their output and exits as Events.
///
/// Each process gets its own process group (signals reach its children too), PR_SET_PDEATHSIG
/// (it is killed if the thread that started it dies, so a SIGKILLed ddlrun or agent leaves no
/// rank), default signal dispositions and an empty signal mask, its CPU set, and pipes for
/// stdout and stderr. One I/O thread polls every pipe and a pidfd per process: it sends what a
/// process prints as kOutput events (chunks of at most 64 KiB, bytes unchanged), and kExit
/// once a process has ended and its pipes are drained. Output is read only while the event
/// queue is not output_full(), so a process that prints faster than the consumer takes it
/// blocks on its pipe, as under a shell pipeline.
class ProcessSet {
 public:
  explicit ProcessSet(EventQueue& events);
  /// Kills (SIGKILL, whole group) whatever still runs and reaps it.
  ~ProcessSet();
  ProcessSet(const ProcessSet&) = delete;
  ProcessSet& operator=(const ProcessSet&) = delete;

  /// Starts `spec` as process `id` (a global rank, or -1); the I/O thread starts with the first.
  /// Throws LaunchError when it cannot be started (fork or exec failed), naming `where`.
  void start(int id, const SpawnSpec& spec, std::string_view where);
  /// Sends `signal` to the process group of every process not yet reaped.
  void signal(int signal);
  /// Bytes of stdin queued per process at which write_stdin() waits.
  static constexpr size_t kStdinLimit = size_t{1} << 20;
  /// Queues data for process `id`'s stdin, written as it reads. Waits while kStdinLimit bytes or
  /// more wait already, until the process reads, closes its stdin or ends, or close_stdin() or
  /// finish(). Returns false, dropping `data`, when there is no such stdin (any more).
  bool write_stdin(int id, std::string_view data);
  /// Closes process `id`'s stdin once what was queued is written.
  void close_stdin(int id);
  /// `gone(n)` is called on the I/O thread (nothing locked) whenever n bytes of queued stdin
  /// were written to a process or dropped with its pipe, and by finish() for what was still
  /// queued then.
  void on_stdin_gone(std::function<void(size_t)> gone);
  /// How many processes have not been reaped yet.
  int running() const;
  /// SIGKILLs what still runs, waits for the I/O thread. Idempotent.
  void finish();

 private:
  struct Proc;
  struct PollSet;
  void io_loop();
  bool watch(PollSet& set);
  size_t serve(const PollSet& set);
  void drain(int id, int& fd, Stream stream, size_t limit);
  size_t feed_stdin(Proc& p, short revents);
  void reap();
  void wake();

  EventQueue& events_;
  mutable std::mutex mutex_;
  std::map<int, std::unique_ptr<Proc>> procs_;
  std::condition_variable stdin_room_;
  std::function<void(size_t)> stdin_gone_;
  int waker_ = -1;
  std::string read_buf_;  ///< the I/O thread's
  int wake_read_ = -1;
  int wake_write_ = -1;
  bool stopping_ = false;
  std::thread io_;
};

}  // namespace ddl::launcher
