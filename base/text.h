#pragma once
// Text helpers shared by every parser: trimming and "did you mean" suggestions.

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ddl::base {

/// Blanks and tabs: what the one-line formats (CPU lists, modes) trim.
inline constexpr std::string_view kBlanks = " \t";
/// Every ASCII white-space character.
inline constexpr std::string_view kWhiteSpace = " \t\n\r\f\v";

/// `s` without leading and trailing characters from `space`.
std::string_view trim(std::string_view s, std::string_view space = kWhiteSpace);

enum class Case { kSensitive, kIgnored };

/// Levenshtein distance (insert, delete, substitute each cost 1).
size_t edit_distance(std::string_view a, std::string_view b, Case letter_case = Case::kSensitive);

/// The candidate closest to `word` (ignoring case) when it is a likely typo: fewer than 3 edits
/// and fewer edits than the longer of the two has letters. Ties keep the first candidate.
std::optional<std::string> closest_match(std::string_view word,
                                         std::span<const std::string_view> candidates);

/// " (did you mean 'x'?)" for closest_match(word, candidates), or "" when there is none.
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);

/// `words` with `separator` between them (none before the first that is not empty):
/// join({"a", "b"}, ", ") is "a, b".
template <typename Words>
std::string join(const Words& words, std::string_view separator) {
  std::string out;
  for (const auto& w : words)
    out += (out.empty() ? std::string() : std::string(separator)) + std::string(w);
  return out;
}

/// The whole of `text` as a decimal int (an optional '-', then digits, in range); nullopt
/// otherwise.
std::optional<int> parse_int(std::string_view text);

/// "30 s", "0.5 s", "2.25 s": a duration as error messages print it (%g seconds).
std::string seconds_text(std::chrono::milliseconds duration);

/// Whether two secrets (tokens, digests) are equal, in time that depends only on their lengths,
/// never on where they first differ.
bool same_secret(std::string_view a, std::string_view b);

/// What a message may quote of text that came from a stranger: at most `max` bytes of it,
/// every byte outside printable ASCII as \xNN, and " ... (N bytes)" when it was longer.
std::string excerpt(std::string_view text, size_t max = 64);

/// The length of the valid UTF-8 sequence that starts `s` (1 to 4; 1 for ASCII), or 0 when `s`
/// starts with a byte that is not one (a stray continuation, an overlong form, a surrogate, a
/// code point above U+10FFFF, a sequence cut short).
size_t utf8_sequence(std::string_view s);

/// `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD, so that
/// every JSON and YAML parser reads it (an argument $'\xff' in a plan).
std::string valid_utf8(std::string_view s);

}  // namespace ddl::base
