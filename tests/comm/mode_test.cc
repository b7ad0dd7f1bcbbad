#include "comm/mode.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "comm/collectives/collectives.h"

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

// A ring longer than max_ring runs as the fewest sub-rings of at most max_ring, the most even
// (least sum of sizes: fewest steps), largest first; a prime above max_ring alone.
TEST(ModeTest, LongRingsSplitIntoEvenSubRings) {
  EXPECT_EQ(kMaxRing, 16);
  using V = std::vector<int>;
  EXPECT_EQ(ring_factors(16, 16), V{16});
  EXPECT_EQ(ring_factors(1, 16), V{1});
  EXPECT_EQ(ring_factors(0, 16), V{0});
  EXPECT_EQ(ring_factors(4608, 0), V{4608});  // DDL_MAX_RING=0: never
  EXPECT_EQ(ring_factors(4608, 1), V{4608});
  EXPECT_EQ(ring_factors(4608, 16), (V{9, 8, 8, 8}));  // 58 steps, not 9,214
  EXPECT_EQ(ring_factors(256, 16), (V{16, 16}));
  EXPECT_EQ(ring_factors(18, 16), (V{6, 3}));   // sum 9, not 9 + 2
  EXPECT_EQ(ring_factors(32, 16), (V{8, 4}));   // predict_check's 32 hosts
  EXPECT_EQ(ring_factors(17, 16), V{17});       // a prime stays a ring
  EXPECT_EQ(ring_factors(34, 16), (V{17, 2}));  // the prime above 16 alone
  EXPECT_EQ(ring_factors(97 * 97 * 4, 16), (V{97, 97, 4}));
  EXPECT_EQ(ring_factors(12, 2), (V{3, 2, 2}));
  EXPECT_EQ(ring_factors(1 << 30, 16), (V{16, 16, 16, 16, 16, 16, 8, 8}));  // 2^(4+4+4+4+4+4+3+3)
  EXPECT_EQ(ring_factors(2147483647, 16), V{2147483647});                   // 2^31 - 1 is prime
  EXPECT_EQ(ring_factors(735134400, 16).size(), 8u);  // 1,344 divisors: still quick
}

// A member's sub-rings: its position in mixed radix, one digit a sub-ring.
TEST(ModeTest, SubRingPositionsMeetAsDimensions) {
  using VV = std::vector<std::vector<int>>;
  const std::vector<int> f32 = {3, 2};
  EXPECT_EQ(sub_ring_positions(6, 4, f32), (VV{{3, 4, 5}, {1, 4}}));
  EXPECT_EQ(sub_ring_positions(6, 0, f32), (VV{{0, 1, 2}, {0, 3}}));
  // Every member of a sub-ring computes the same sub-ring, and each member is in exactly one
  // sub-ring of each factor.
  const std::vector<int> f = {4, 3, 2};
  for (int p = 0; p < 24; ++p) {
    const VV mine = sub_ring_positions(24, p, f);
    ASSERT_EQ(mine.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      ASSERT_EQ(mine[k].size(), static_cast<size_t>(f[k]));
      for (int q : mine[k])
        EXPECT_EQ(sub_ring_positions(24, q, f)[k], mine[k]) << p << " and " << q;
    }
  }
  EXPECT_THROW(sub_ring_positions(6, 6, f32), std::invalid_argument);
  EXPECT_THROW(sub_ring_positions(7, 0, f32), std::invalid_argument);
  EXPECT_THROW(sub_ring_positions(6, 0, std::vector<int>{6, 0}), std::invalid_argument);
}

}  // namespace
}  // namespace ddl::comm
