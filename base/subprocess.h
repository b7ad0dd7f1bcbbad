#pragma once
// Running a helper program to completion and keeping what it printed.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ddl::base {

struct CaptureOptions {
  /// The program's whole environment ("NAME=value" entries).
  std::vector<std::string> environ = {};
  /// Kill it (its whole process group when `own_group`) once this has passed.
  std::optional<std::chrono::milliseconds> timeout = {};
  /// Its stderr goes to `out` too, interleaved as written; `err` stays empty.
  bool merge_stderr = false;
  /// Start it in a process group of its own, so that a timeout kills what it started too.
  bool own_group = false;
};

struct Captured {
  /// errno of the pipe or spawn that failed; 0 when the program ran.
  int spawn_error = 0;
  /// Its exit code; -1 when it did not run or a signal ended it.
  int exit_status = -1;
  /// The signal that ended it (SIGKILL after a timeout); 0 when it exited.
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
};

/// Runs argv (argv[0] a path: no $PATH search) with stdin on /dev/null, reads its stdout and
/// stderr until both close (or the timeout passes), and reaps it.
Captured run_capture(const std::vector<std::string>& argv, const CaptureOptions& options);

}  // namespace ddl::base
