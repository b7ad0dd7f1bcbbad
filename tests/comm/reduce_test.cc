#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "comm/collectives/collectives.h"

namespace ddl::comm {
namespace {

uint16_t bits(_Float16 h) {
  return std::bit_cast<uint16_t>(h);
}
_Float16 half(uint16_t b) {
  return std::bit_cast<_Float16>(b);
}
uint16_t bf16_bits(float f) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
}
float bf16(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

TEST(ReduceTest, TypeSizesAndNames) {
  EXPECT_EQ(type_size(DataType::kFloat32), 4u);
  EXPECT_EQ(type_size(DataType::kFloat64), 8u);
  EXPECT_EQ(type_size(DataType::kFloat16), 2u);
  EXPECT_EQ(type_size(DataType::kBFloat16), 2u);
  EXPECT_EQ(type_size(DataType::kInt32), 4u);
  EXPECT_EQ(type_size(DataType::kInt64), 8u);
  EXPECT_EQ(type_size(DataType::kUint8), 1u);
  EXPECT_EQ(type_size(DataType::kInt8), 1u);
  EXPECT_EQ(type_size(DataType::kInt16), 2u);
  EXPECT_EQ(type_size(DataType::kUint16), 2u);
  EXPECT_EQ(type_size(DataType::kBool), 1u);
  EXPECT_EQ(to_string(DataType::kBFloat16), "bfloat16");
  EXPECT_EQ(to_string(DataType::kUint8), "uint8");
  EXPECT_EQ(to_string(DataType::kInt8), "int8");
  EXPECT_EQ(to_string(DataType::kInt16), "int16");
  EXPECT_EQ(to_string(DataType::kUint16), "uint16");
  EXPECT_EQ(to_string(DataType::kBool), "bool");
  EXPECT_EQ(to_string(ReduceOp::kAvg), "avg");
  EXPECT_EQ(to_string(ReduceOp::kProd), "prod");
  EXPECT_EQ(to_string(ReduceOp::kBand), "band");
  EXPECT_EQ(to_string(ReduceOp::kBor), "bor");
  EXPECT_EQ(to_string(ReduceOp::kBxor), "bxor");
  EXPECT_EQ(kDataTypes, 11);
  EXPECT_EQ(kReduceOps, 8);
}

TEST(ReduceTest, RefusedPairsSayWhy) {
  EXPECT_EQ(reduction_error(DataType::kFloat32, ReduceOp::kBand),
            "reduce op band is bitwise: it takes integer and bool types, not float32");
  EXPECT_EQ(reduction_error(DataType::kBFloat16, ReduceOp::kBxor),
            "reduce op bxor is bitwise: it takes integer and bool types, not bfloat16");
  EXPECT_EQ(reduction_error(DataType::kBool, ReduceOp::kAvg),
            "reduce op avg does not take bool (on bool, sum and max are a logical or, prod and "
            "min a logical and)");
  int refused = 0;
  for (int t = 0; t < kDataTypes; ++t) {
    for (int op = 0; op < kReduceOps; ++op)
      refused += !reduction_error(static_cast<DataType>(t), static_cast<ReduceOp>(op)).empty();
  }
  EXPECT_EQ(refused, 4 * 3 + 1);  // the floats' bitwise ops, bool's avg
}

TEST(ReduceTest, PartitionGivesTheFirstChunksTheRemainder) {
  EXPECT_EQ(partition(10, 3), (std::vector<size_t>{0, 4, 7, 10}));
  EXPECT_EQ(partition(2, 4), (std::vector<size_t>{0, 1, 2, 2, 2}));
  EXPECT_EQ(partition(0, 2), (std::vector<size_t>{0, 0, 0}));
  EXPECT_EQ(partition(5, 1), (std::vector<size_t>{0, 5}));
  EXPECT_THROW(partition(5, 0), std::invalid_argument);
}

TEST(ReduceTest, Float32EveryOp) {
  std::vector<float> a{1, -2, 3.5f, 0}, b{2, 5, -1, -0.0f};
  auto run = [&](ReduceOp op) {
    auto d = a;
    reduce_into(d.data(), b.data(), d.size(), DataType::kFloat32, op);
    return d;
  };
  EXPECT_EQ(run(ReduceOp::kSum), (std::vector<float>{3, 3, 2.5f, 0}));
  EXPECT_EQ(run(ReduceOp::kAvg), (std::vector<float>{3, 3, 2.5f, 0}));  // avg sums
  EXPECT_EQ(run(ReduceOp::kProd), (std::vector<float>{2, -10, -3.5f, -0.0f}));
  EXPECT_EQ(run(ReduceOp::kMin), (std::vector<float>{1, -2, -1, 0}));
  EXPECT_EQ(run(ReduceOp::kMax), (std::vector<float>{2, 5, 3.5f, 0}));
}

TEST(ReduceTest, MinMaxPropagateNanAndKeepTheLeftOperandOnTies) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    std::vector<float> d{nan, 1, 0.0f, -0.0f};
    const std::vector<float> s{1, nan, -0.0f, 0.0f};
    reduce_into(d.data(), s.data(), d.size(), DataType::kFloat32, op);
    EXPECT_TRUE(std::isnan(d[0])) << to_string(op);
    EXPECT_TRUE(std::isnan(d[1])) << to_string(op);
    EXPECT_FALSE(std::signbit(d[2])) << to_string(op);
    EXPECT_TRUE(std::signbit(d[3])) << to_string(op);
  }
  std::vector<double> d{1, std::numeric_limits<double>::infinity()};
  const std::vector<double> s{std::numeric_limits<double>::quiet_NaN(), 5};
  reduce_into(d.data(), s.data(), 2, DataType::kFloat64, ReduceOp::kMax);
  EXPECT_TRUE(std::isnan(d[0]));
  EXPECT_EQ(d[1], std::numeric_limits<double>::infinity());
}

TEST(ReduceTest, IntegersWrap) {
  std::vector<int32_t> a{INT32_MAX, INT32_MIN, 7, -3}, b{1, -1, -9, 4};
  reduce_into(a.data(), b.data(), 4, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(a, (std::vector<int32_t>{INT32_MIN, INT32_MAX, -2, 1}));
  std::vector<int64_t> c{INT64_MAX, -5}, e{2, 3};
  reduce_into(c.data(), e.data(), 2, DataType::kInt64, ReduceOp::kProd);
  EXPECT_EQ(c, (std::vector<int64_t>{-2, -15}));
  std::vector<uint8_t> u{250, 3, 200}, v{10, 9, 100};
  reduce_into(u.data(), v.data(), 3, DataType::kUint8, ReduceOp::kSum);
  EXPECT_EQ(u, (std::vector<uint8_t>{4, 12, 44}));
  std::vector<int32_t> m{-5, 5}, n{3, -3};
  reduce_into(m.data(), n.data(), 2, DataType::kInt32, ReduceOp::kMin);
  EXPECT_EQ(m, (std::vector<int32_t>{-5, -3}));
}

TEST(ReduceTest, NarrowIntegersWrapAndCompareWithTheirSign) {
  std::vector<int8_t> a{127, -128, -5, 100}, b{1, -1, 3, 100};
  auto i8 = [&](ReduceOp op) {
    auto d = a;
    reduce_into(d.data(), b.data(), d.size(), DataType::kInt8, op);
    return d;
  };
  EXPECT_EQ(i8(ReduceOp::kSum), (std::vector<int8_t>{-128, 127, -2, -56}));
  EXPECT_EQ(i8(ReduceOp::kProd), (std::vector<int8_t>{127, -128, -15, 16}));
  EXPECT_EQ(i8(ReduceOp::kMin), (std::vector<int8_t>{1, -128, -5, 100}));
  EXPECT_EQ(i8(ReduceOp::kMax), (std::vector<int8_t>{127, -1, 3, 100}));
  std::vector<int16_t> c{32767, -300, 2}, e{1, 200, -20000};
  reduce_into(c.data(), e.data(), 3, DataType::kInt16, ReduceOp::kSum);
  EXPECT_EQ(c, (std::vector<int16_t>{-32768, -100, -19998}));
  std::vector<uint16_t> u{65535, 300, 7}, v{65535, 400, 65535};
  auto u16 = [&](ReduceOp op) {
    auto d = u;
    reduce_into(d.data(), v.data(), d.size(), DataType::kUint16, op);
    return d;
  };
  EXPECT_EQ(u16(ReduceOp::kProd), (std::vector<uint16_t>{1, 54464, 65529}));  // mod 65536
  EXPECT_EQ(u16(ReduceOp::kSum), (std::vector<uint16_t>{65534, 700, 6}));
  EXPECT_EQ(u16(ReduceOp::kMin), (std::vector<uint16_t>{65535, 300, 7}));
}

TEST(ReduceTest, BitwiseOpsOnIntegers) {
  std::vector<int32_t> a{0x0ff0, -1, 5}, b{0x00ff, 0x1234, -6};
  auto i32 = [&](ReduceOp op) {
    auto d = a;
    reduce_into(d.data(), b.data(), d.size(), DataType::kInt32, op);
    return d;
  };
  EXPECT_EQ(i32(ReduceOp::kBand), (std::vector<int32_t>{0x00f0, 0x1234, 0}));
  EXPECT_EQ(i32(ReduceOp::kBor), (std::vector<int32_t>{0x0fff, -1, -1}));
  EXPECT_EQ(i32(ReduceOp::kBxor), (std::vector<int32_t>{0x0f0f, ~0x1234, -1}));
  std::vector<int8_t> c{-128, 0x55}, e{-1, 0x0f};
  reduce_into(c.data(), e.data(), 2, DataType::kInt8, ReduceOp::kBxor);
  EXPECT_EQ(c, (std::vector<int8_t>{127, 0x5a}));
  std::vector<uint16_t> u{0xf00f, 0x1}, v{0x0ff0, 0x8000};
  reduce_into(u.data(), v.data(), 2, DataType::kUint16, ReduceOp::kBor);
  EXPECT_EQ(u, (std::vector<uint16_t>{0xffff, 0x8001}));
  std::vector<int64_t> w{INT64_MIN | 6}, x{INT64_MIN | 3};
  reduce_into(w.data(), x.data(), 1, DataType::kInt64, ReduceOp::kBand);
  EXPECT_EQ(w, (std::vector<int64_t>{INT64_MIN | 2}));
}

// Any non-zero byte is true; every result is 0 or 1.
TEST(ReduceTest, BoolIsLogical) {
  const std::vector<uint8_t> a{0, 0, 1, 2, 0x80, 0}, b{0, 1, 0, 1, 0x40, 0xff};
  auto run = [&](ReduceOp op) {
    auto d = a;
    reduce_into(d.data(), b.data(), d.size(), DataType::kBool, op);
    return d;
  };
  const std::vector<uint8_t> any{0, 1, 1, 1, 1, 1}, all{0, 0, 0, 1, 1, 0}, odd{0, 1, 1, 0, 0, 1};
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kBor})
    EXPECT_EQ(run(op), any) << to_string(op);
  for (ReduceOp op : {ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kBand})
    EXPECT_EQ(run(op), all) << to_string(op);
  EXPECT_EQ(run(ReduceOp::kBxor), odd);
}

TEST(ReduceTest, DivideTruncatesIntegersAndRoundsFloats) {
  std::vector<int32_t> i{7, -7, 9};
  divide(i.data(), 3, DataType::kInt32, 2);
  EXPECT_EQ(i, (std::vector<int32_t>{3, -3, 4}));
  std::vector<uint8_t> u{255, 1};
  divide(u.data(), 2, DataType::kUint8, 4);
  EXPECT_EQ(u, (std::vector<uint8_t>{63, 0}));
  std::vector<uint8_t> many{255};
  divide(many.data(), 1, DataType::kUint8, 256);  // 256 ranks: the divisor is not narrowed
  EXPECT_EQ(many, (std::vector<uint8_t>{0}));
  std::vector<int8_t> s8{-7, 127};
  divide(s8.data(), 2, DataType::kInt8, 200);
  EXPECT_EQ(s8, (std::vector<int8_t>{0, 0}));
  std::vector<int16_t> s16{-7, 32767};
  divide(s16.data(), 2, DataType::kInt16, 2);
  EXPECT_EQ(s16, (std::vector<int16_t>{-3, 16383}));
  std::vector<uint16_t> u16{65535};
  divide(u16.data(), 1, DataType::kUint16, 3);
  EXPECT_EQ(u16, (std::vector<uint16_t>{21845}));
  std::vector<float> f{1, 10};
  divide(f.data(), 2, DataType::kFloat32, 3);
  EXPECT_EQ(f, (std::vector<float>{1.0f / 3, 10.0f / 3}));
  std::vector<uint16_t> h{bits(1), bits(10)};
  divide(h.data(), 2, DataType::kFloat16, 3);
  EXPECT_EQ(h[0], bits(static_cast<_Float16>(1.0 / 3)));
  EXPECT_EQ(h[1], bits(static_cast<_Float16>(10.0 / 3)));
}

// Every float16 pair from a spread of bit patterns, against the compiler's _Float16 (which
// rounds to nearest even).
TEST(ReduceTest, Float16MatchesTheCompilersArithmetic) {
  std::vector<uint16_t> patterns;
  for (uint32_t b = 0; b < 0x10000; b += 97)
    patterns.push_back(static_cast<uint16_t>(b));
  for (uint16_t b :
       {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x3c00, 0x3c01, 0xbc00}) {
    patterns.push_back(b);
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    std::vector<uint16_t> dst, src;
    for (uint16_t x : patterns) {
      for (size_t k = 0; k < patterns.size(); k += 7) {
        dst.push_back(x);
        src.push_back(patterns[k]);
      }
    }
    std::vector<uint16_t> got = dst;
    reduce_into(got.data(), src.data(), got.size(), DataType::kFloat16, op);
    for (size_t i = 0; i < got.size(); ++i) {
      const float a = static_cast<float>(half(dst[i]));
      const float b = static_cast<float>(half(src[i]));
      float want = 0;
      if (op == ReduceOp::kSum) want = a + b;
      if (op == ReduceOp::kProd) want = a * b;
      if (op == ReduceOp::kMin) want = (std::isnan(a) || (!(b < a) && !std::isnan(b))) ? a : b;
      if (op == ReduceOp::kMax) want = (std::isnan(a) || (!(b > a) && !std::isnan(b))) ? a : b;
      const _Float16 w = static_cast<_Float16>(want);
      if (std::isnan(static_cast<float>(w))) {
        ASSERT_TRUE(std::isnan(static_cast<float>(half(got[i]))))
            << to_string(op) << " " << dst[i] << " " << src[i];
      } else {
        ASSERT_EQ(got[i], bits(w)) << to_string(op) << " " << std::hex << dst[i] << " " << src[i];
      }
    }
  }
}

// F16C's conversions (where the CPU has them) give the scalar code's bits for every float16
// pair: all 65536 patterns against a spread, NaNs (signalling, quiet, with payloads) included,
// for every op, and kAvg's division.
TEST(ReduceTest, Float16ThroughF16CGivesTheScalarBits) {
  if (!uses_f16c()) GTEST_SKIP() << "this CPU has no F16C: only the scalar code runs";
  std::vector<uint16_t> dst, src;
  for (uint32_t x = 0; x < 0x10000; ++x) {
    for (uint16_t y : {0x0000, 0x8000, 0x0001, 0x83ff, 0x3c00, 0x7bff, 0xfbff, 0x7c00, 0x7c01,
                       0xfe01, 0x7e00, 0x1234, 0xc321, 0x0400}) {
      dst.push_back(static_cast<uint16_t>(x));
      src.push_back(y);
    }
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    std::vector<uint16_t> fast = dst, slow = dst;
    reduce_into(fast.data(), src.data(), fast.size(), DataType::kFloat16, op);
    set_f16c(false);
    reduce_into(slow.data(), src.data(), slow.size(), DataType::kFloat16, op);
    set_f16c(true);
    for (size_t i = 0; i < fast.size(); ++i)
      ASSERT_EQ(fast[i], slow[i]) << to_string(op) << std::hex << " " << dst[i] << " " << src[i];
  }
  std::vector<uint16_t> fast = dst, slow = dst;
  divide(fast.data(), fast.size(), DataType::kFloat16, 3);
  set_f16c(false);
  divide(slow.data(), slow.size(), DataType::kFloat16, 3);
  set_f16c(true);
  EXPECT_TRUE(fast == slow);
}

TEST(ReduceTest, Float16RoundsToNearestEvenAndOverflowsToInf) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: rounds to 1 (even).
  std::vector<uint16_t> d{bits(1), bits(1), bits(65504), bits(-65504), bits(0x1p-13)};
  const std::vector<uint16_t> s{bits(0x1p-11), bits(0x1.8p-11), bits(16), bits(-16), bits(0x1p-24)};
  reduce_into(d.data(), s.data(), d.size(), DataType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(d[0], bits(1));
  EXPECT_EQ(d[1], bits(1 + 0x1p-10));
  EXPECT_EQ(d[2], 0x7c00);  // 65520 rounds up to inf
  EXPECT_EQ(d[3], 0xfc00);
  EXPECT_EQ(d[4], bits(0x1p-13));  // 2^-13 + half an ulp: tie, to even
  // Subnormal results: 2^-24 / 2 and 3 * 2^-24 / 2 are ties, to 0 and to 2 * 2^-24.
  std::vector<uint16_t> sub{0x0001, 0x0003, 0x8003};
  divide(sub.data(), sub.size(), DataType::kFloat16, 2);
  EXPECT_EQ(sub, (std::vector<uint16_t>{0x0000, 0x0002, 0x8002}));
}

TEST(ReduceTest, BFloat16RoundsToNearestEvenKeepsNanAndInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint16_t> d{bf16_bits(1),   bf16_bits(1),   bf16_bits(3.3895314e38f),
                          bf16_bits(inf), bf16_bits(nan), bf16_bits(-2)};
  const std::vector<uint16_t> s{bf16_bits(0x1p-8), bf16_bits(0x1.8p-8), bf16_bits(3.3895314e38f),
                                bf16_bits(-inf),   bf16_bits(1),        bf16_bits(0.5)};
  reduce_into(d.data(), s.data(), d.size(), DataType::kBFloat16, ReduceOp::kSum);
  EXPECT_EQ(bf16(d[0]), 1.0f);            // tie to even
  EXPECT_EQ(bf16(d[1]), 1.0f + 0x1p-7f);  // above the tie: up
  EXPECT_EQ(bf16(d[2]), inf);             // overflow
  EXPECT_TRUE(std::isnan(bf16(d[3])));    // inf + -inf
  EXPECT_TRUE(std::isnan(bf16(d[4])));
  EXPECT_EQ(bf16(d[5]), -1.5f);
}

TEST(ReduceTest, LongBuffersUseEveryBlock) {
  const size_t n = 5000;  // several float16 blocks and a tail
  std::vector<uint16_t> d(n), s(n);
  for (size_t i = 0; i < n; ++i) {
    d[i] = bits(static_cast<_Float16>(i % 100));
    s[i] = bits(static_cast<_Float16>(i % 7));
  }
  reduce_into(d.data(), s.data(), n, DataType::kFloat16, ReduceOp::kSum);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(d[i], bits(static_cast<_Float16>(i % 100 + i % 7))) << i;
  }
}

/// Calls check(type, op, a, b) for every type and op, a and b n elements of bytes from a fixed
/// generator seeded with `seed` (NaNs, infinities, ties and wrapping integers among them).
template <class Check>
void for_every_type_and_op(size_t n, uint32_t seed, Check check) {
  for (int k = 0; k < kDataTypes; ++k) {
    const auto t = static_cast<DataType>(k);
    const size_t bytes = n * type_size(t);
    std::vector<uint8_t> a(bytes), b(bytes);
    uint32_t x = seed;
    for (size_t i = 0; i < bytes; ++i) {
      x = x * 1103515245u + 12345u;
      a[i] = static_cast<uint8_t>(x >> 16);
      b[i] = static_cast<uint8_t>(x >> 8);
    }
    for (int o = 0; o < kReduceOps; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      if (reduction_error(t, op).empty()) check(t, op, a, b);
    }
  }
}

TEST(ReduceTest, ReduceOfGivesTheBitsOfACopyThenReduceInto) {
  // Every type and op, with a length that leaves vector tails: reduce_of(dst, a, b) must equal
  // dst = a; reduce_into(dst, b) bit for bit, and leave a and b alone.
  const size_t n = 1037;
  for_every_type_and_op(
      n, 12345, [&](DataType t, ReduceOp op, std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
        std::vector<uint8_t> want = a, got(a.size(), 0xee);
        const std::vector<uint8_t> a0 = a, b0 = b;
        reduce_into(want.data(), b.data(), n, t, op);
        reduce_of(got.data(), a.data(), b.data(), n, t, op);
        EXPECT_EQ(got, want) << to_string(t) << " " << to_string(op);
        EXPECT_EQ(a, a0);
        EXPECT_EQ(b, b0);
      });
}

TEST(ReduceTest, ReduceOfMayWriteOverEitherOperand) {
  // In place: reduce_of(a, a, b) and reduce_of(b, a, b) must give the bits of a fresh
  // reduce_of(dst, a, b) for every type and op, with a length that leaves vector and float16
  // block tails.
  const size_t n = 1037;
  for_every_type_and_op(
      n, 777, [&](DataType t, ReduceOp op, std::vector<uint8_t>& a, std::vector<uint8_t>& b) {
        std::vector<uint8_t> want(a.size()), over_a = a, over_b = b;
        reduce_of(want.data(), a.data(), b.data(), n, t, op);
        reduce_of(over_a.data(), over_a.data(), b.data(), n, t, op);
        reduce_of(over_b.data(), a.data(), over_b.data(), n, t, op);
        EXPECT_EQ(over_a, want) << "dst = a, " << to_string(t) << " " << to_string(op);
        EXPECT_EQ(over_b, want) << "dst = b, " << to_string(t) << " " << to_string(op);
      });
}

}  // namespace
}  // namespace ddl::comm
