#include "hostfiles/input_error.h"

#include <gtest/gtest.h>

#include <array>
#include <string_view>

namespace ddl::hostfiles {
namespace {

TEST(PositionTest, StrShowsWhatIsKnown) {
  EXPECT_EQ((Position{"hosts.txt", 3, 7, "x"}.str()), "hosts.txt:3:7");
  EXPECT_EQ((Position{"hosts.txt", 3, 0, "x"}.str()), "hosts.txt:3");
  EXPECT_EQ((Position{"hosts.txt", 0, 0, {}}.str()), "hosts.txt");
  EXPECT_EQ((Position{"hosts.txt", 0, 5, {}}.str()), "hosts.txt");
}

TEST(InputErrorTest, ShowsLineAndCaretWithTildes) {
  const InputError e(Position{"hosts.txt", 3, 7, "node1 slot=4"},
                     "unknown key 'slot' (did you mean 'slots'?)", 4);
  EXPECT_STREQ(e.what(),
               "hosts.txt:3:7: unknown key 'slot' (did you mean 'slots'?)\n"
               "  node1 slot=4\n"
               "        ^~~~");
  EXPECT_EQ(e.message(), "unknown key 'slot' (did you mean 'slots'?)");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.where().column, 7);
}

TEST(InputErrorTest, KeepsTabsSoTheCaretLinesUp) {
  const InputError e(Position{"h", 1, 3, "\t\tx"}, "bad");
  EXPECT_STREQ(e.what(), "h:1:3: bad\n  \t\tx\n  \t\t^");
}

TEST(InputErrorTest, CaretMayPointPastTheEndOfTheLine) {
  const InputError e(Position{"-H", 1, 3, "a,"}, "empty host name");
  EXPECT_STREQ(e.what(), "-H:1:3: empty host name\n  a,\n    ^");
}

TEST(InputErrorTest, NoCaretWithoutLineTextOrColumn) {
  EXPECT_STREQ(InputError(Position{"hosts.txt", 0, 0, {}}, "no hosts").what(),
               "hosts.txt: no hosts");
  EXPECT_STREQ(InputError(Position{"hosts.txt", 2, 0, "a b"}, "bad").what(), "hosts.txt:2: bad");
}

TEST(InputErrorTest, IsARuntimeError) {
  try {
    throw InputError(Position{"x", 1, 1, "y"}, "boom");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "x:1:1: boom\n  y\n  ^");
  }
}

TEST(PrintableTest, EscapesControlCharactersCStyle) {
  EXPECT_EQ(printable("a\x1b[31mb\x07"
                      "c\x7f"),
            "a\\x1b[31mb\\x07c\\x7f");
  EXPECT_EQ(printable("line\n\tnext\r"), "line\n\tnext\\x0d");
  EXPECT_EQ(printable("line\n\tnext", /*keep_layout=*/false), "line\\x0a\\x09next");
  // UTF-8 letters pass; C1 controls written in UTF-8 (U+009B) do not.
  EXPECT_EQ(printable("n\xc3\xa9ud \xc2\x9b"), "n\xc3\xa9ud \\xc2\\x9b");
  // Bytes outside valid UTF-8 are escaped (a lone 0x9b is CSI to an 8-bit terminal).
  EXPECT_EQ(printable("\xc2\xa0\x9b"), "\xc2\xa0\\x9b");
  EXPECT_EQ(printable("a\xff\xfe"), "a\\xff\\xfe");
  EXPECT_EQ(printable("\xe2\x82\xac \xe2\x82 \xf0\x9f\x98\x80 \xed\xa0\x80"),
            "\xe2\x82\xac \\xe2\\x82 \xf0\x9f\x98\x80 \\xed\\xa0\\x80");
  EXPECT_EQ(printable(std::string_view("\0", 1)), "\\x00");
}

TEST(InputErrorTest, ControlBytesAreEscapedAndTheCaretStaysUnderTheirCharacter) {
  const InputError e(Position{"hosts.txt", 1, 6, "n\x1b[2J\x07x slots=1"}, "bad 'n\x1b[2J\x07x'",
                     2);
  EXPECT_STREQ(e.what(),
               "hosts.txt:1:6: bad 'n\\x1b[2J\\x07x'\n"
               "  n\\x1b[2J\\x07x slots=1\n"
               "          ^~~~~");
  EXPECT_EQ(e.message(), "bad 'n\x1b[2J\x07x'");
  EXPECT_EQ(e.where().line_text, "n\x1b[2J\x07x slots=1");
}

}  // namespace
}  // namespace ddl::hostfiles
