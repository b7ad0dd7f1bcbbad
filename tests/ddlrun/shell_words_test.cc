#include "ddlrun/shell_words.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace ddl::ddlrun {
namespace {

using Words = std::vector<std::string>;

TEST(ShellWordsTest, SplitsLikeAShell) {
  EXPECT_EQ(split_shell_words("  -mca btl ^openib  "), (Words{"-mca", "btl", "^openib"}));
  EXPECT_EQ(split_shell_words("--bind-to 'core numa' \"a b\""),
            (Words{"--bind-to", "core numa", "a b"}));
  EXPECT_EQ(split_shell_words(R"(a\ b "x\"y" 'it'\''s' "\$HOME" "\n")"),
            (Words{"a b", "x\"y", "it's", "$HOME", "\\n"}));
  EXPECT_EQ(split_shell_words("''"), (Words{""}));
  EXPECT_EQ(split_shell_words(""), Words{});
}

TEST(ShellWordsTest, UnclosedQuotesAreErrors) {
  try {
    split_shell_words("-x 'FOO");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "'-x 'FOO' has an unclosed ' quote at column 4");
  }
  EXPECT_THROW(split_shell_words("\"abc"), std::invalid_argument);
  EXPECT_THROW(split_shell_words("abc\\"), std::invalid_argument);
}

TEST(ShellWordsTest, QuotingRoundTrips) {
  const Words words = {"python", "train.py", "a b", "it's", "$HOME", "x;y", "", "--lr=0.1", "*"};
  EXPECT_EQ(quote_shell_words(words),
            "python train.py 'a b' 'it'\\''s' '$HOME' 'x;y' '' --lr=0.1 '*'");
  EXPECT_EQ(split_shell_words(quote_shell_words(words)), words);
}

}  // namespace
}  // namespace ddl::ddlrun
