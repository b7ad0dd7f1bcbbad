#include "comm/mode.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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

// The pipeline's chunk grows with the longest ring: DDL_PIPELINE_BYTES up to rings of 3 (4
// steps), a quarter of it per step beyond; 0 stays 0 (not pipelined).
TEST(ModeTest, PipelineChunkGrowsWithTheLongestRing) {
  const size_t mib = size_t{1} << 20;
  const auto chunk = [](size_t base, std::vector<int> sizes) {
    return pipeline_chunk_bytes(base, sizes);
  };
  EXPECT_EQ(kPipelineBytes, mib);
  EXPECT_EQ(chunk(mib, {}), mib);
  EXPECT_EQ(chunk(mib, {1, 1}), mib);
  EXPECT_EQ(chunk(mib, {2, 2, 2}), mib);
  EXPECT_EQ(chunk(mib, {2, 3, 1, 1}), mib);
  EXPECT_EQ(chunk(mib, {2, 4, 1, 1}), 6 * mib / 4);   // 6 steps
  EXPECT_EQ(chunk(mib, {6, 2, 1, 1}), 10 * mib / 4);  // the innermost counts too
  EXPECT_EQ(chunk(mib, {2, 32, 1, 1}), 62 * mib / 4);
  EXPECT_EQ(chunk(mib, {6, 18, 256, 1}), 510 * mib / 4);           // Summit, --nodes 18
  EXPECT_EQ(chunk(mib, {6, 4608, 1, 1}), size_t{9214} * mib / 4);  // Summit in one ring
  EXPECT_EQ(chunk(0, {6, 4608, 1, 1}), 0u);
  EXPECT_EQ(chunk(4096, {2, 2, 2}), 4096u);  // communicator_test's small chunks stay
  EXPECT_EQ(chunk(4096, {64}), 126u * 1024);
  EXPECT_EQ(chunk(3, {64}), 126u);                   // a quarter of 3 bytes rounds up to 1 a step
  EXPECT_EQ(chunk(SIZE_MAX / 2, {1000}), SIZE_MAX);  // saturates, never wraps
}

TEST(ModeTest, PipelineChunkElements) {
  EXPECT_EQ(pipeline_chunk_elems(1000, 4, 0), 1000u);  // 0: one chunk
  EXPECT_EQ(pipeline_chunk_elems(0, 4, 1024), 1u);
  EXPECT_EQ(pipeline_chunk_elems(1000, 4, 1024), 256u);
  EXPECT_EQ(pipeline_chunk_elems(1000, 4, 2), 1u);
  EXPECT_EQ(pipeline_chunk_elems(1 << 20, 1, 1), 256u);  // at most 4096 chunks
  EXPECT_EQ(pipeline_chunk_elems(4097, 1, 1), 2u);
  EXPECT_EQ(pipeline_chunk_elems(size_t{64} << 20, 4, size_t{2303} << 20), size_t{2303} << 18);
}

}  // namespace
}  // namespace ddl::comm
