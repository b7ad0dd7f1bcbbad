#include "hostfiles/input_error.h"

#include <algorithm>
#include <cctype>
#include <vector>

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

std::string format(const Position& where, const std::string& message, int length) {
  std::string text = where.str() + ": " + message;
  if (where.line_text.empty() || where.column <= 0) return text;
  text += "\n  " + where.line_text + "\n  ";
  // Keep tabs so the caret lines up under the same column however the terminal expands them.
  const size_t col = static_cast<size_t>(where.column - 1);
  for (size_t i = 0; i < col; ++i) {
    text += (i < where.line_text.size() && where.line_text[i] == '\t') ? '\t' : ' ';
  }
  text += '^';
  if (length > 1) text.append(static_cast<size_t>(length - 1), '~');
  return text;
}

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + cost});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

InputError::InputError(Position where, std::string message, int length)
    : std::runtime_error(format(where, message, length)),
      where_(std::move(where)),
      message_(std::move(message)) {}

std::optional<std::string> closest_match(std::string_view word,
                                         std::span<const std::string_view> candidates) {
  std::optional<std::string> best;
  size_t best_distance = 3;
  for (std::string_view c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance && d < std::max(word.size(), c.size())) {
      best_distance = d;
      best = std::string(c);
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  auto best = closest_match(word, candidates);
  return best ? " (did you mean '" + *best + "'?)" : "";
}

}  // namespace ddl::hostfiles
