#pragma once

// Helpers shared by the hostfiles parsers; not part of the public API. Errors are raised at a
// base position (a line or an argument) plus an offset into its text, so that a Position with
// a copy of the line is only built when something is wrong.

#include <climits>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/text.h"
#include "hostfiles/host_list.h"
#include "hostfiles/input_error.h"

namespace ddl::hostfiles::detail {

/// Most slots one host may have (and the most any count may be).
inline constexpr int kMaxSlots = 1 << 20;
/// Most names a host list may expand to.
inline constexpr size_t kMaxNames = 1'000'000;
/// Most characters all the names of one expansion may hold together.
inline constexpr size_t kMaxNameBytes = size_t{16} << 20;
/// Longest host name accepted (DNS allows 253).
inline constexpr size_t kMaxHostNameLength = 255;
/// Largest file read_input_file reads.
inline constexpr size_t kMaxFileBytes = size_t{64} << 20;

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}
inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool is_hex_digit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
/// Letters, digits, '-', '.' and '_': what a host name may hold.
inline bool is_host_char(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_';
}
inline char to_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

inline bool all_digits(std::string_view s) {
  for (char c : s) {
    if (!is_digit(c)) return false;
  }
  return !s.empty();
}

inline std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = to_lower(c);
  }
  return out;
}

/// True when `s` starts with `prefix`, ignoring ASCII case.
inline bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (to_lower(s[i]) != to_lower(prefix[i])) return false;
  }
  return true;
}

using base::trim;  // every ASCII white-space character, as the formats read it

/// An InputError length covering `n` characters (at least 1, at most INT_MAX).
inline int length_of(size_t n) {
  return n == 0 ? 1 : n > INT_MAX ? INT_MAX : static_cast<int>(n);
}

/// The 1-based column of a 0-based offset (at most INT_MAX).
inline int column_of(size_t offset) {
  return offset >= static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(offset) + 1;
}

/// `base` moved `offset` characters to the right; an unknown column (0) stays unknown.
inline Position shifted(const Position& base, size_t offset) {
  Position p = base;
  if (p.column > 0) {
    const size_t room = static_cast<size_t>(INT_MAX - p.column);
    p.column += static_cast<int>(offset < room ? offset : room);
  }
  return p;
}

/// Throws InputError at `offset` characters right of `base`, underlining `length` of them.
[[noreturn]] inline void fail(const Position& base, size_t offset, std::string message,
                              size_t length = 1) {
  throw InputError(shifted(base, offset), std::move(message), length_of(length));
}

/// A character as a message shows it: itself when printable ASCII, "\xNN" otherwise.
std::string escaped_char(char c);

/// A character for a message: 'x' when printable, '\xNN' otherwise.
inline std::string show_char(char c) {
  return "'" + escaped_char(c) + "'";
}

/// A whitespace-separated word and its offset in the text it came from.
struct Word {
  std::string_view text;
  size_t offset = 0;
};
std::vector<Word> split_words(std::string_view text);

/// Iterates over the lines of a text: '\n' ends a line and a trailing '\r' is dropped.
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : rest_(text) {}

  /// The next line; false after the last one. A text ending in '\n' ends with an empty line.
  bool next(std::string_view& line) {
    if (done_) return false;
    const size_t end = rest_.find('\n');
    if (end == std::string_view::npos) {
      line = rest_;
      done_ = true;
    } else {
      line = rest_.substr(0, end);
      rest_.remove_prefix(end + 1);
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (number_ < INT_MAX) ++number_;
    return true;
  }

  /// 1-based number of the line `next` returned last.
  int number() const { return number_; }

 private:
  std::string_view rest_;
  bool done_ = false;
  int number_ = 0;
};

/// Parses a whole number 0..kMaxSlots written at `offset` right of `base`. `label` names it in
/// errors ("slot count"): missing, not a number, negative, too large.
int parse_count(std::string_view token, std::string_view label, const Position& base,
                size_t offset);

/// parse_count for a slot count, which must also be at least 1.
int parse_slot_count(std::string_view token, const Position& base, size_t offset);

/// Throws the error for the invalid character name[index] of a host name written at `offset`.
[[noreturn]] void bad_host_char(std::string_view name, size_t index, const Position& base,
                                size_t offset);

/// Checks a single host name (no ranges): not empty, valid characters, not starting with '-',
/// not too long.
void check_host_name(std::string_view name, const Position& base, size_t offset);

/// expand_hostlist for `text` written at `offset` right of `base`.
std::vector<std::string> expand_names(std::string_view text, const Position& base, size_t offset);

/// One host entry of a -H list or a hostfile line: "node1", "node[1-4]:2", "[fe80::1]:4".
struct HostSpec {
  std::vector<std::string> names;
  std::optional<int> slots;  ///< from ":N"
};

/// Parses a host entry written at `offset` right of `base`.
HostSpec parse_host_spec(std::string_view spec, const Position& base, size_t offset);

/// The whole file at `path` (at most kMaxFileBytes); throws InputError at `where`, "cannot
/// read <what>: <reason>" (strerror; EFBIG when the file is too large), when it cannot be read.
std::string read_input_file(const std::string& path, const Position& where, std::string_view what);

}  // namespace ddl::hostfiles::detail
