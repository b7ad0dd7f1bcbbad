#include "ddlrun/shell_words.h"

#include <stdexcept>

#include "launcher/launcher.h"

namespace ddl::ddlrun {

std::vector<std::string> split_shell_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (i + 1 == text.size()) {
        throw std::invalid_argument("'" + std::string(text) + "' ends with a lone backslash");
      }
      word += text[++i];
    } else if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) {
        throw std::invalid_argument("'" + std::string(text) +
                                    "' has an unclosed ' quote at column " + std::to_string(i + 1));
      }
      word.append(text.substr(i + 1, close - i - 1));
      i = close;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() &&
            std::string_view("\"\\$`").find(text[j + 1]) != std::string_view::npos) {
          ++j;
        }
        word += text[j];
      }
      if (j >= text.size()) {
        throw std::invalid_argument("'" + std::string(text) +
                                    "' has an unclosed \" quote at column " +
                                    std::to_string(i + 1));
      }
      i = j;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string quote_shell_word(std::string_view word) {
  return launcher::shell_join({std::string(word)});
}

std::string quote_shell_words(const std::vector<std::string>& words) {
  return launcher::shell_join(words);
}

}  // namespace ddl::ddlrun
