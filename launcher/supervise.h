#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "comm/topology.h"
#include "launcher/backend.h"

namespace ddl::launcher {

/// How rank output is labelled.
enum class TagStyle {
  kAuto,      ///< kTerminal when ddlrun's stdout is a terminal, else kOpenMpi
  kTerminal,  ///< "[3] line"
  kOpenMpi,   ///< "[1,3]<stdout>:line", as mpirun --tag-output
  kNone,      ///< the line as it is
};

/// Where the job's output goes.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  /// One whole line of rank `rank` (-1: the launcher process), without its newline.
  virtual void line(int rank, Stream stream, std::string_view text) = 0;
  /// One of ddlrun's own messages ("ddlrun: rank 3 ... exited with status 1"), one line.
  virtual void note(std::string_view text) = 0;
};

/// Lines to ddlrun's stdout and stderr (fds 1 and 2), one write() per line so that lines of
/// different ranks never mix; tagged as `style` says (rank -1 is never tagged).
std::unique_ptr<OutputSink> make_terminal_sink(TagStyle style);

/// Lines to DIR/rank.N/stdout and DIR/rank.N/stderr (created 0755, files 0644), untagged; the
/// launcher process's to DIR/launcher/. Notes still go to stderr. Throws LaunchError naming the
/// directory when it cannot be created.
std::unique_ptr<OutputSink> make_directory_sink(const std::string& dir);

struct SuperviseOptions {
  /// After SIGTERM, how long ranks have before SIGKILL (--kill-grace).
  std::chrono::milliseconds kill_grace{3000};
  /// Ends the job after this long (--timeout): exit status 124.
  std::optional<std::chrono::milliseconds> timeout;
  /// Takes SIGINT, SIGTERM and SIGHUP (blocked in every thread, read by one) and forwards them;
  /// a second SIGINT kills at once. Off in unit tests that drive signals through events.
  bool handle_signals = true;
  /// Forwards this fd (ddlrun's stdin) to rank 0; -1: none.
  int stdin_fd = 0;
  /// Lines of a failed rank's output shown in the summary.
  int tail_lines = 5;
  /// How long after SIGKILL ddlrun still waits for processes to report their end before it
  /// leaves without them (a host that cannot be reached any more).
  std::chrono::milliseconds give_up{15000};
};

/// Runs the job: starts `backend`, prints output through `sink`, and ends the whole job when one
/// process fails (exit status other than 0, or a signal), when a host is lost, on --timeout, or
/// when ddlrun gets SIGINT/SIGTERM/SIGHUP: SIGTERM to every process, SIGKILL after kill_grace.
/// A signal that comes while the job is being stopped (a second one, or the first after a
/// failure) sends SIGKILL and returns at once; so does `give_up` after SIGKILL: no wait is
/// without a deadline.
/// `topology` names each rank's host in messages (may be null). Returns ddlrun's exit status:
/// 0 when every process exited 0, else the first failed process's (128+N for signal N), 124 on
/// timeout, 128+N when ddlrun was stopped by signal N, 1 when a host was lost. LaunchError from
/// backend.start() is not caught.
int supervise(Backend& backend, const comm::Topology* topology, const SuperviseOptions& options,
              OutputSink& sink);

/// "SIGKILL" for 9, "signal 70" when unknown.
std::string signal_name(int signal);

}  // namespace ddl::launcher
