#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddl::ddlrun {

/// Splits `text` into words as a POSIX shell would, without expanding anything: blanks separate
/// words; '...' keeps everything literally; "..." keeps everything but \" \\ \$ \` ; a backslash
/// outside quotes keeps the next character. Throws std::invalid_argument naming the unclosed
/// quote or trailing backslash.
std::vector<std::string> split_shell_words(std::string_view text);

/// `word` quoted for a POSIX shell when it needs it: "a b" -> 'a b', "it's" -> 'it'\''s'.
std::string quote_shell_word(std::string_view word);

/// The words quoted and joined with spaces, so that a shell gives back exactly `words`.
std::string quote_shell_words(const std::vector<std::string>& words);

}  // namespace ddl::ddlrun
