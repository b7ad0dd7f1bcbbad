#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/backend.h"

namespace ddl::launcher {

/// How rank output is labelled.
enum class TagStyle {
  kAuto,      ///< kTerminal when ddlrun's stdout is a terminal, else kOpenMpi
  kTerminal,  ///< "[3] line"
  kOpenMpi,   ///< "[1,3]<stdout>:line", as mpirun --tag-output
  kNone,      ///< the bytes as they are
};

/// Why the job's output can no longer be written.
struct OutputFailure {
  int status = 1;       ///< ddlrun's exit status for it
  std::string message;  ///< "standard output is closed (EPIPE)"
};

/// Where the job's output goes. The supervisor's thread calls every method; none blocks on a
/// slow reader: what cannot be written at once waits in a bounded queue, written by a thread of
/// the sink's own, and ready() says when that queue is full.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  /// Bytes that rank `rank` (-1: the launcher process) printed on `stream`: any part of its
  /// output, lines or not.
  virtual void output(int rank, Stream stream, std::string_view bytes) = 0;
  /// Rank `rank` has ended: an unfinished last line of its is written out.
  virtual void end(int rank) { (void)rank; }
  /// One of ddlrun's own messages ("ddlrun: rank 3 ... exited with status 1"), one line.
  virtual void note(std::string_view text) = 0;
  /// `wake` is called (on any thread) after ready() or written() said false, once that may
  /// have changed, and when output fails.
  virtual void on_change(std::function<void()> wake) { (void)wake; }
  /// False while output() would go past the sink's bound: take no more output until on_change.
  virtual bool ready() { return true; }
  /// True when everything given has been written (or can no longer be).
  virtual bool written() { return true; }
  /// Set once output can no longer be written (the reader is gone, the disk is full).
  virtual std::optional<OutputFailure> failure() { return std::nullopt; }
  /// Waits until written() or `deadline`; what is still unwritten then is abandoned.
  virtual void flush(std::chrono::steady_clock::time_point deadline) { (void)deadline; }
};

/// Output to ddlrun's stdout and stderr (fds 1 and 2). Tagged styles split it into lines (a
/// line over 64 KiB is cut, an unfinished last line ends with the rank) and write each line
/// whole, so lines of different ranks never mix; kNone passes bytes on unchanged, in whole lines
/// while they are under 64 KiB (longer ones in pieces; an unfinished last one when its rank
/// ends). Rank -1 (the launcher process) is never tagged and passes as read. At most
/// 1 MiB waits to be written (more for ddlrun's notes); a write error on stdout is a failure():
/// EPIPE gives status 141 (128 + SIGPIPE), others 1.
std::unique_ptr<OutputSink> make_terminal_sink(TagStyle style);

/// Output to DIR/rank.N/stdout and DIR/rank.N/stderr (created 0755, files 0644), bytes
/// unchanged; the launcher process's to DIR/launcher/. Notes still go to stderr. Throws
/// LaunchError naming the directory when it cannot be created or is not a directory; a file
/// that cannot be written is a failure() (status 1).
std::unique_ptr<OutputSink> make_directory_sink(const std::string& dir);

/// The last lines of each rank's output (both streams), for the summary of a failed rank.
class LastLines {
 public:
  /// Keeps `keep` lines a rank, each cut to 300 bytes and "...".
  explicit LastLines(int keep) : keep_(keep) {}
  void add(int rank, Stream stream, std::string_view bytes);
  /// Rank `rank`'s last lines, oldest first; an unfinished line counts as one.
  std::vector<std::string> of(int rank) const;

 private:
  struct Rank {
    std::deque<std::string> lines;
    std::string partial[2];  ///< by stream: the unfinished line, cut
  };
  int keep_;
  std::map<int, Rank> ranks_;
};

}  // namespace ddl::launcher
