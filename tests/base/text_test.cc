#include "base/text.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

namespace ddl::base {
namespace {

TEST(Trim, RemovesOnlyTheGivenCharacters) {
  EXPECT_EQ(trim("  a b \t"), "a b");
  EXPECT_EQ(trim("\n a \r\n"), "a");
  EXPECT_EQ(trim("\n a \n", kBlanks), "\n a \n");
  EXPECT_EQ(trim(" \t a\t", kBlanks), "a");
  EXPECT_EQ(trim("   "), "");
  EXPECT_EQ(trim(""), "");
}

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("slot", "slots"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("Slots", "slots"), 1u);
  EXPECT_EQ(edit_distance("Slots", "slots", Case::kIgnored), 0u);
}

TEST(DidYouMean, SuggestsOnlyLikelyTypos) {
  constexpr std::array<std::string_view, 3> kWords = {"slots", "max_slots", "cpus"};
  EXPECT_EQ(did_you_mean("slot", kWords), " (did you mean 'slots'?)");
  EXPECT_EQ(did_you_mean("SLOTS", kWords), " (did you mean 'slots'?)");
  EXPECT_EQ(did_you_mean("gpus", kWords), " (did you mean 'cpus'?)");
  EXPECT_EQ(did_you_mean("bandwidth", kWords), "");
  // Two letters, both wrong: not a typo of a two-letter word.
  constexpr std::array<std::string_view, 1> kShort = {"np"};
  EXPECT_EQ(did_you_mean("xy", kShort), "");
  EXPECT_EQ(closest_match("max_slot", kWords), "max_slots");
}

constexpr std::array<std::string_view, 3> kKeys = {"slots", "max_slots", "max-slots"};

TEST(ClosestMatchTest, FindsTyposIgnoringCase) {
  EXPECT_EQ(closest_match("slot", kKeys), "slots");
  EXPECT_EQ(closest_match("SLOTS", kKeys), "slots");
  EXPECT_EQ(closest_match("max_slot", kKeys), "max_slots");
  EXPECT_EQ(closest_match("maxslots", kKeys), "max_slots");
}

TEST(ClosestMatchTest, IgnoresWordsThatAreTooFar) {
  EXPECT_EQ(closest_match("user", kKeys), std::nullopt);
  EXPECT_EQ(closest_match("b", std::array<std::string_view, 1>{"a"}), std::nullopt);
  EXPECT_EQ(closest_match("ab", std::array<std::string_view, 1>{"a"}), "a");
}

TEST(DidYouMeanTest, FormatsTheSuggestion) {
  EXPECT_EQ(did_you_mean("slot", kKeys), " (did you mean 'slots'?)");
  EXPECT_EQ(did_you_mean("cpus", kKeys), "");
}

TEST(SameSecret, ComparesByContentAndLength) {
  EXPECT_TRUE(same_secret("abc", "abc"));
  EXPECT_FALSE(same_secret("abc", "abd"));
  EXPECT_FALSE(same_secret("abc", "abcd"));
  EXPECT_FALSE(same_secret("", "a"));
  EXPECT_TRUE(same_secret("", ""));
}

TEST(ParseInt, TakesTheWholeTextOrNothing) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-7"), -7);
  EXPECT_EQ(parse_int(""), std::nullopt);
  EXPECT_EQ(parse_int("4x"), std::nullopt);
  EXPECT_EQ(parse_int(" 4"), std::nullopt);
  EXPECT_EQ(parse_int("+4"), std::nullopt);
  EXPECT_EQ(parse_int("99999999999"), std::nullopt);
}

TEST(Join, PutsTheSeparatorBetweenWords) {
  EXPECT_EQ(join(std::vector<std::string>{"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(join(std::array<std::string_view, 1>{"a"}, ","), "a");
  EXPECT_EQ(join(std::vector<std::string>{}, ","), "");
  EXPECT_EQ(join(std::vector<std::string>{"", "b"}, ","), "b");
}

TEST(SecondsText, WholeAndFractionalSeconds) {
  EXPECT_EQ(seconds_text(std::chrono::milliseconds(10'000)), "10 s");
  EXPECT_EQ(seconds_text(std::chrono::milliseconds(300)), "0.3 s");
  EXPECT_EQ(seconds_text(std::chrono::milliseconds(2500)), "2.5 s");
  EXPECT_EQ(seconds_text(std::chrono::milliseconds(300'000)), "300 s");
}

TEST(Text, AnExcerptIsShortAndPrintable) {
  EXPECT_EQ(excerpt("node1"), "node1");
  EXPECT_EQ(excerpt(std::string("a\nb\x00\xff\\", 6)), "a\\x0ab\\x00\\xff\\x5c");
  EXPECT_EQ(excerpt(std::string(20'000'000, 'x'), 4), "xxxx ... (20000000 bytes)");
}

TEST(ValidUtf8, KeepsUtf8AndReplacesEveryOtherByte) {
  EXPECT_EQ(valid_utf8("plain \xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80"),
            "plain \xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80");
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(valid_utf8("\xff"), fffd);
  EXPECT_EQ(valid_utf8("a\xc3"), "a" + fffd);                                   // cut short
  EXPECT_EQ(valid_utf8("\xc0\xaf"), fffd + fffd);                               // overlong '/'
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), fffd + fffd + fffd);                    // a surrogate
  EXPECT_EQ(valid_utf8("\xf4\x90\x80\x80x"), fffd + fffd + fffd + fffd + "x");  // > U+10FFFF
  EXPECT_EQ(utf8_sequence("\xe2\x9c\x93"), 3u);
  EXPECT_EQ(utf8_sequence(""), 0u);
}

}  // namespace
}  // namespace ddl::base
