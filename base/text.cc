#include "base/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <vector>

namespace ddl::base {

namespace {

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

}  // namespace

std::string_view trim(std::string_view s, std::string_view space) {
  const size_t first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  const size_t last = s.find_last_not_of(space);
  return s.substr(first, last - first + 1);
}

size_t edit_distance(std::string_view a, std::string_view b, Case letter_case) {
  const bool ignore = letter_case == Case::kIgnored;
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = ignore ? lower(a[i - 1]) == lower(b[j - 1]) : a[i - 1] == b[j - 1];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_match(std::string_view word,
                                         std::span<const std::string_view> candidates) {
  std::optional<std::string> best;
  size_t best_distance = 3;
  for (std::string_view c : candidates) {
    const size_t d = edit_distance(word, c, Case::kIgnored);
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

std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string seconds_text(std::chrono::milliseconds duration) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(duration.count()) / 1000.0);
  return buf;
}

bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

std::string excerpt(std::string_view text, size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u >= 0x20 && u < 0x7f && u != '\\') {
      out += static_cast<char>(u);
    } else {
      out += {'\\', 'x', kHex[u >> 4], kHex[u & 0xf]};
    }
  }
  if (text.size() > max) out += " ... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

size_t utf8_sequence(std::string_view s) {
  if (s.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  // The lead byte says the length; the second byte's range rules out overlong forms (E0, F0),
  // surrogates (ED) and code points above U+10FFFF (F4).
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    lo = c == 0xE0 ? 0xA0 : 0x80;
    hi = c == 0xED ? 0x9F : 0xBF;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    lo = c == 0xF0 ? 0x90 : 0x80;
    hi = c == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  return n;
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const size_t n = utf8_sequence(s);
    out += n == 0 ? std::string_view("\xEF\xBF\xBD") : s.substr(0, n);
    s.remove_prefix(n == 0 ? 1 : n);
  }
  return out;
}

}  // namespace ddl::base
