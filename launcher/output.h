#pragma once

#include <memory>
#include <string>
#include <string_view>

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

}  // namespace ddl::launcher
