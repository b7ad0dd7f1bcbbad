#include "hostfiles/input_error.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "base/text.h"
#include "hostfiles/parse_util.h"

namespace ddl::hostfiles {

std::string Position::str() const {
  std::string s = source;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (column > 0) s += ":" + std::to_string(column);
  }
  return s;
}

namespace {

/// How many characters byte `i` of `text` takes once printable() wrote it: 4 for an escaped
/// control ("\x1b"), else 1.
size_t shown_width(std::string_view text, size_t i);

/// The line under an error: the caret below the character at `column` however printable()
/// widened what comes before it, tildes for the rest of `length`; tabs kept so that the caret
/// lines up however the terminal expands them.
std::string caret_line(std::string_view line, size_t column, int length) {
  std::string text;
  const size_t col = column - 1;
  for (size_t i = 0; i < col; ++i) {
    if (i < line.size() && line[i] == '\t') {
      text += '\t';
    } else {
      text.append(i < line.size() ? shown_width(line, i) : 1, ' ');
    }
  }
  size_t marks = 0;
  for (size_t i = col; i < col + static_cast<size_t>(length < 1 ? 1 : length); ++i)
    marks += i < line.size() ? shown_width(line, i) : 1;
  text += '^';
  if (marks > 1) text.append(marks - 1, '~');
  return text;
}

std::string format(const Position& where, const std::string& message, int length) {
  std::string text = printable(where.str() + ": " + message, /*keep_layout=*/false);
  if (where.line_text.empty() || where.column <= 0) return text;
  text += "\n  " + printable(where.line_text) + "\n  ";
  text += caret_line(where.line_text, static_cast<size_t>(where.column), length);
  return text;
}

/// True when byte `i` (0x80 or above) belongs to a valid UTF-8 sequence: one starting at it, or
/// at one of the three bytes before it and reaching it.
bool in_valid_utf8(std::string_view text, size_t i) {
  for (size_t back = 0; back < 4 && back <= i; ++back) {
    const size_t start = i - back;
    const auto c = static_cast<unsigned char>(text[start]);
    if (c >= 0x80 && c <= 0xbf && back < 3) continue;  // a continuation byte: look further back
    return start + base::utf8_sequence(text.substr(start)) > i;
  }
  return false;
}

/// True for byte `i` of `text` when it is a control character printable() escapes, or a byte
/// outside valid UTF-8; `layout` counts newlines and tabs as controls too.
bool is_control_at(std::string_view text, size_t i, bool layout) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c == '\n' || c == '\t') return layout;
  if (c < 0x20 || c == 0x7f) return true;
  // C1 controls in UTF-8: 0xc2 followed by 0x80-0x9f (both bytes are escaped).
  const auto at = [&](size_t k) {
    return k < text.size() ? static_cast<unsigned char>(text[k]) : 0;
  };
  if (c == 0xc2 && at(i + 1) >= 0x80 && at(i + 1) <= 0x9f) return true;
  if (c >= 0x80 && c <= 0x9f && i > 0 && at(i - 1) == 0xc2) return true;
  return c >= 0x80 && !in_valid_utf8(text, i);
}

size_t shown_width(std::string_view text, size_t i) {
  return is_control_at(text, i, false) ? 4 : 1;
}

}  // namespace

std::string printable(std::string_view text, bool keep_layout) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (is_control_at(text, i, !keep_layout)) {
      out += detail::escaped_char(text[i]);
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string detail::escaped_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string{'\\', 'x', kHex[u >> 4], kHex[u & 0xf]};
}

InputError::InputError(Position where, std::string message, int length)
    : std::runtime_error(format(where, message, length)),
      where_(std::move(where)),
      message_(std::move(message)) {}

}  // namespace ddl::hostfiles
