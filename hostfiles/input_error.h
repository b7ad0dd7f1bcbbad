#pragma once

#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddl::hostfiles {

/// A place in user input: a file name, an option ("-H") or an environment variable
/// ("$SLURM_TASKS_PER_NODE"), with a 1-based line and column (0 when unknown) and the text of
/// that line, so that an error can show it with a caret.
struct Position {
  std::string source;
  int line = 0;
  int column = 0;
  std::string line_text;

  /// "hosts.txt:3:7", "hosts.txt:3", or "hosts.txt" when line/column are unknown.
  std::string str() const;
};

/// A mistake in user input (a host list, hostfile, rankfile or batch-system variable). what() is
/// the complete, user-facing message:
///
///   hosts.txt:3:7: unknown key 'slot' (did you mean 'slots'?)
///     node1 slot=4
///           ^~~~
///
/// The first line is "<position>: <message>"; when the position has line text, the line follows,
/// indented by two spaces, with a caret under `column` and tildes for the rest of `length`.
/// what() shows control characters of the input as printable() writes them ("\x1b"), the caret
/// still under the character it points at; where() and message() keep the text as it was.
class InputError : public std::runtime_error {
 public:
  InputError(Position where, std::string message, int length = 1);

  const Position& where() const { return where_; }
  /// The message alone, without position or caret lines.
  const std::string& message() const { return message_; }

 private:
  Position where_;
  std::string message_;
};

/// `text` safe to print on a terminal: control characters (0x00-0x1f, 0x7f, and the C1
/// controls U+0080-U+009F written in UTF-8) and every byte that is not part of valid UTF-8
/// (0xff, a lone 0x9b that an 8-bit terminal takes for CSI) are written C-style as "\x1b", so
/// that a name read from a file cannot move the cursor, recolour or retitle the terminal, or
/// hide text. Newlines and tabs are kept when `keep_layout` is true; UTF-8 letters pass.
std::string printable(std::string_view text, bool keep_layout = true);

}  // namespace ddl::hostfiles
