#include "comm/mode.h"

#include <gtest/gtest.h>

namespace ddl::comm {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_mode(text);
  } catch (const ModeError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ModeTest, ParsesEveryLetterWithoutDimensions) {
  for (char c : std::string("rbnmcp")) {
    const Mode m = parse_mode(std::string(1, c));
    EXPECT_EQ(static_cast<char>(m.algorithm), c);
    EXPECT_TRUE(m.dims.empty());
    EXPECT_EQ(m.ranks(), 0);
    EXPECT_EQ(m.str(), std::string(1, c));
  }
}

TEST(ModeTest, ParsesSummitModeInnermostFirst) {
  const Mode m = parse_mode("p:6x18x1x1");
  EXPECT_EQ(m.algorithm, Algorithm::kExplore);
  EXPECT_EQ(m.dims, (std::vector<int>{6, 18, 1, 1}));
  EXPECT_EQ(m.ranks(), 108);
  EXPECT_EQ(m.str(), "p:6x18x1x1");
}

TEST(ModeTest, TrimsSurroundingWhitespace) {
  EXPECT_EQ(parse_mode("  r:4x2 \n"), (Mode{Algorithm::kRing, {4, 2}}));
}

TEST(ModeTest, ResolvedAddsOneRingWhenNoDimensions) {
  EXPECT_EQ(parse_mode("n").resolved(8), (Mode{Algorithm::kNccl, {8}}));
  EXPECT_EQ(parse_mode("n:4x2").resolved(8), (Mode{Algorithm::kNccl, {4, 2}}));
}

TEST(ModeTest, ErrorsNameTheStringAndTheFix) {
  EXPECT_EQ(error_of(""),
            "invalid mode '': it is empty; use a letter (r, b, n, m, c or p), e.g. 'p:6x2x1x1'");
  EXPECT_EQ(error_of("q:4"),
            "invalid mode 'q:4': unknown algorithm 'q'; use one of r (ring), b (enhanced NCCL), "
            "n (NCCL), m (MPI), c (RCS), p (pick the best)");
  EXPECT_EQ(error_of("p4x2"), "invalid mode 'p4x2': expected ':' after the letter, as in 'p:4x2'");
  EXPECT_EQ(error_of("p:"),
            "invalid mode 'p:': no dimensions after ':'; write them as '4x2', innermost first");
  EXPECT_EQ(error_of("p:4xx2"), "invalid mode 'p:4xx2': dimension 2 is empty");
  EXPECT_EQ(error_of("p:4x"), "invalid mode 'p:4x': dimension 2 is empty");
  EXPECT_EQ(error_of("p:4x0"),
            "invalid mode 'p:4x0': dimension 2 is 0; each dimension must be at least 1");
  EXPECT_EQ(error_of("p:4xa"), "invalid mode 'p:4xa': dimension 2 'a' is not a number");
  EXPECT_EQ(error_of("p:-4"), "invalid mode 'p:-4': dimension 1 '-4' is not a number");
  EXPECT_EQ(error_of("p:4 x2"), "invalid mode 'p:4 x2': dimension 1 '4 ' is not a number");
  EXPECT_EQ(error_of("p:99999999999"),
            "invalid mode 'p:99999999999': dimension 1 '99999999999' is too large");
  EXPECT_EQ(error_of("p:65536x65536"),
            "invalid mode 'p:65536x65536': the dimensions multiply to more than 2147483647 ranks");
  EXPECT_EQ(error_of("p:1x1x1x1x1x1x1x1x1"),
            "invalid mode 'p:1x1x1x1x1x1x1x1x1': more than 8 dimensions");
}

TEST(ModeTest, CheckFitsNamesBothCounts) {
  EXPECT_NO_THROW(check_mode_fits(parse_mode("p:6x2x1x1"), 12));
  EXPECT_NO_THROW(check_mode_fits(parse_mode("p"), 7));
  try {
    check_mode_fits(parse_mode("p:6x2x1x1"), 8, "2 hosts x 4");
    FAIL() << "no error";
  } catch (const ModeError& e) {
    EXPECT_STREQ(e.what(),
                 "mode 'p:6x2x1x1' describes 12 ranks (6 x 2 x 1 x 1), but the job has 8 "
                 "(2 hosts x 4); make the dimensions multiply to 8 or change the number of ranks");
  }
  try {
    check_mode_fits(parse_mode("r:4"), 3);
    FAIL() << "no error";
  } catch (const ModeError& e) {
    EXPECT_STREQ(e.what(),
                 "mode 'r:4' describes 4 ranks, but the job has 3; make the dimensions multiply "
                 "to 3 or change the number of ranks");
  }
}

TEST(ModeTest, ReadsIbmDdlOptions) {
  EXPECT_EQ(mode_from_ddl_options("-mode p:6x2x1x1 "), (Mode{Algorithm::kExplore, {6, 2, 1, 1}}));
  EXPECT_EQ(mode_from_ddl_options("-dbg_level 1 -mode r:4 -dump_iter 10"),
            (Mode{Algorithm::kRing, {4}}));
  EXPECT_EQ(mode_from_ddl_options(""), Mode{});
  EXPECT_THROW(mode_from_ddl_options("-mode"), ModeError);
  EXPECT_THROW(mode_from_ddl_options("-mode z"), ModeError);
}

}  // namespace
}  // namespace ddl::comm
