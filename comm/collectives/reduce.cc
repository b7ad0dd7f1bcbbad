// Element-wise reduction kernels: what every allreduce does to the bytes it receives.
//
// How it works. reduce_into(dst, src) computes dst[i] = op(dst[i], src[i]); the left operand
// is always the one already in place, so an algorithm that fixes which buffer is `dst` fixes
// the reduction order, and with it the bits of the result. Each (type, op) pair has its own
// plain loop over `count` elements with no calls and no aliasing (`__restrict`), which GCC and
// Clang auto-vectorise at -O2/-O3.
//
// reduce_of(dst, a, b) computes dst[i] = op(a[i], b[i]): the same bits as copying a into dst
// and then reduce_into(dst, b), in one pass (no copy of a first); dst may be exactly a (then it
// is reduce_into) or exactly b (a loop of dst[i] = op(a[i], dst[i])), and overlaps neither
// otherwise.
//
// Integers wrap: sums, products and bitwise ops of int8/int16/int32/int64 are computed in the
// unsigned type of the same width (defined behaviour, the same bits as two's complement), uint8
// and uint16 wrap modulo 2^8 and 2^16 (their products as unsigned int, never a signed int's
// overflow). bool is a byte, any non-zero value true: sum, max and bor are a logical or, prod,
// min and band a logical and, bxor a logical xor, and each writes 0 or 1. The bitwise ops on a
// floating type and avg on bool never get here (reduction_error() refuses them first).
//
// Floats: min and max propagate NaN (a NaN in either operand gives a NaN) and otherwise keep
// the left operand on ties, so max(+0, -0) is +0 and the result never depends on anything but
// the operands' order.
//
// Vectorised: this file is compiled at -O3 (comm/CMakeLists.txt; GCC 12 leaves these loops
// scalar at -O2), so the loops use SSE2 on any x86-64. With GCC on x86-64, reduce_into is also
// built a second time for AVX2 (target_clones): the dynamic loader picks the clone the CPU
// runs (an ifunc resolved once, at load), and every kernel below is always inlined into
// both, so the AVX2 clone's loops use 32-byte vectors. Element-wise operations give the same
// bits at any vector width (no reassociation, and the AVX2 clone has no FMA to contract with).
//
// float16 and bfloat16 are widened to float a block at a time (kBlock elements on the stack),
// reduced as float, and narrowed back with round-to-nearest-even. Widening is exact. Narrowing
// keeps infinities, turns overflow into infinity, rounds subnormals correctly, and turns any
// NaN into a quiet NaN of the same sign. float16's conversions use F16C (8 at a time) where the
// CPU has it (checked once): widening is exact either way, narrowing rounds to nearest even
// either way, and NaNs are first made the canonical quiet NaN of their sign, so that F16C's
// narrowing (which would keep a NaN's payload) gives float_to_half's bits.
//
// divide() is kAvg's last step, applied once to a fully reduced sum: floats divide by the
// divisor in their own precision (float16/bfloat16 through float, then rounded), integers
// (their wrapped sum) truncate toward zero.

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "base/check.h"
#include "base/table.h"
#include "comm/collectives/collectives.h"

namespace ddl::comm {
namespace {

constexpr size_t kBlock = 512;

// --- float16 / bfloat16 <-> float -------------------------------------------------------

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or NaN with its payload
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    bits = sign | std::bit_cast<uint32_t>(magnitude);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN: quiet
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (x < 0x38800000u) {
    // Result is subnormal or zero: adding 0.5f lines the half's subnormal bits up with the
    // float's low mantissa bits, and the float addition rounds them to nearest even.
    const float shifted = std::bit_cast<float>(x) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(shifted) - 0x3f000000u));
  }
  // Normal: rebias the exponent and round the 13 dropped bits to nearest even.
  const uint32_t odd = (x >> 13) & 1u;
  x += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
  return static_cast<uint16_t>(sign | (x >> 13));
}

inline float bf16_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  const uint32_t odd = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + odd) >> 16);  // overflow rounds to inf
}

// --- float16 a block at a time: F16C where the CPU has it ----------------------------------

#if defined(__x86_64__) && defined(__GNUC__)
#define DDL_F16C 1
__attribute__((target("avx,f16c"))) void widen_half_f16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i)
    out[i] = half_to_float(in[i]);
}

__attribute__((target("avx,f16c"))) void narrow_half_f16c(const float* in, uint16_t* out,
                                                          size_t n) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  const __m256 quiet = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 f = _mm256_loadu_ps(in + i);
    // A NaN becomes the quiet NaN of its sign with no payload: F16C gives sign | 0x7e00. The
    // lanes are picked with and/andnot/or on the all-ones or all-zeros mask (GCC 12 turned
    // _mm256_blendv_ps here into a branch per lane: narrowing ran at ~6 GB/s).
    const __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
    const __m256 canonical = _mm256_or_ps(_mm256_and_ps(f, sign), quiet);
    f = _mm256_or_ps(_mm256_andnot_ps(nan, f), _mm256_and_ps(nan, canonical));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i)
    out[i] = float_to_half(in[i]);
}
#endif

#ifdef DDL_F16C
/// Whether the CPU converts float16 (F16C, CPUID leaf 1 ECX) with AVX registers. Asked of
/// CPUID directly: clang 14's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) != 0 &&
         (c & bit_F16C) != 0;
}
#endif

std::atomic<bool> g_f16c{[] {
#ifdef DDL_F16C
  return cpu_has_f16c();
#else
  return false;
#endif
}()};

void widen_half(const uint16_t* in, float* out, size_t n) {
#ifdef DDL_F16C
  if (g_f16c.load(std::memory_order_relaxed)) return widen_half_f16c(in, out, n);
#endif
  for (size_t i = 0; i < n; ++i)
    out[i] = half_to_float(in[i]);
}

void narrow_half(const float* in, uint16_t* out, size_t n) {
#ifdef DDL_F16C
  if (g_f16c.load(std::memory_order_relaxed)) return narrow_half_f16c(in, out, n);
#endif
  for (size_t i = 0; i < n; ++i)
    out[i] = float_to_half(in[i]);
}

void widen_bf16(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = bf16_to_float(in[i]);
}

void narrow_bf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out[i] = float_to_bf16(in[i]);
}

// --- the operations ------------------------------------------------------------------------

template <typename T>
struct Sum {
  static T apply(T a, T b) { return static_cast<T>(a + b); }
};
// Integers narrower than int are promoted to int, where 65535 * 65535 would overflow: they
// multiply as unsigned int (the callers pass unsigned types for every integer).
template <typename T>
struct Prod {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(unsigned)) {
      return static_cast<T>(static_cast<unsigned>(a) * static_cast<unsigned>(b));
    } else {
      return a * b;
    }
  }
};
template <typename T>
inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}
// A NaN in a gives a, a NaN in b gives b, ties keep a.
template <typename T>
struct Min {
  static T apply(T a, T b) { return (!is_nan(a) && (b < a || is_nan(b))) ? b : a; }
};
template <typename T>
struct Max {
  static T apply(T a, T b) { return (!is_nan(a) && (b > a || is_nan(b))) ? b : a; }
};
template <typename T>
struct Band {
  static T apply(T a, T b) { return static_cast<T>(a & b); }
};
template <typename T>
struct Bor {
  static T apply(T a, T b) { return static_cast<T>(a | b); }
};
template <typename T>
struct Bxor {
  static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};
// bool: any non-zero byte is true; the result is 0 or 1.
template <typename T>
struct Or {
  static T apply(T a, T b) { return static_cast<T>((a | b) != 0); }
};
template <typename T>
struct And {
  static T apply(T a, T b) { return static_cast<T>((a != 0) & (b != 0)); }
};
template <typename T>
struct Xor {
  static T apply(T a, T b) { return static_cast<T>((a != 0) != (b != 0)); }
};

// Inlined into each clone of reduce_into, so that it is vectorised for that clone's target.
#define DDL_KERNEL [[gnu::always_inline]] inline

template <typename T, template <typename> class Op>
DDL_KERNEL void reduce_loop(T* __restrict dst, const T* __restrict src, size_t count) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = Op<T>::apply(dst[i], src[i]);
}

/// dst[i] = op(a[i], dst[i]): reduce_of with dst exactly b.
template <typename T, template <typename> class Op>
DDL_KERNEL void reduce_loop_left(T* __restrict dst, const T* __restrict a, size_t count) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = Op<T>::apply(a[i], dst[i]);
}

template <typename T, template <typename> class Op>
DDL_KERNEL void reduce_loop3(T* __restrict dst, const T* __restrict a, const T* __restrict b,
                             size_t count) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = Op<T>::apply(a[i], b[i]);
}

/// dst = op(a, b) when `a` is given, else dst = op(dst, b). dst may be exactly a or b.
template <typename T, template <typename> class Op>
DDL_KERNEL void reduce_with(void* dst, const void* a, const void* src, size_t count) {
  auto* d = static_cast<T*>(dst);
  const auto* l = static_cast<const T*>(a);
  const auto* s = static_cast<const T*>(src);
  if (l == d) l = nullptr;  // dst = op(dst, b)
  if (l == nullptr) return reduce_loop<T, Op>(d, s, count);
  if (s == d) return reduce_loop_left<T, Op>(d, l, count);
  reduce_loop3<T, Op>(d, l, s, count);
}

/// `op`'s loop for T. A floating T never gets a bitwise op (reduction_error() refuses it
/// before any data moves).
template <typename T>
DDL_KERNEL void reduce_typed(void* dst, const void* a, const void* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return reduce_with<T, Sum>(dst, a, src, count);
    case ReduceOp::kProd:
      return reduce_with<T, Prod>(dst, a, src, count);
    case ReduceOp::kMin:
      return reduce_with<T, Min>(dst, a, src, count);
    case ReduceOp::kMax:
      return reduce_with<T, Max>(dst, a, src, count);
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    if (op == ReduceOp::kBand) return reduce_with<T, Band>(dst, a, src, count);
    if (op == ReduceOp::kBor) return reduce_with<T, Bor>(dst, a, src, count);
    return reduce_with<T, Bxor>(dst, a, src, count);
  } else {
    DDL_FAIL("reduce: a bitwise op on a floating type got past reduction_error()");
  }
}

// bool, as bytes: or for sum, max and bor; and for prod, min and band; xor for bxor (avg is
// refused before any data moves).
DDL_KERNEL void reduce_bool(void* dst, const void* a, const void* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kBor:
      return reduce_with<uint8_t, Or>(dst, a, src, count);
    case ReduceOp::kProd:
    case ReduceOp::kMin:
    case ReduceOp::kBand:
      return reduce_with<uint8_t, And>(dst, a, src, count);
    case ReduceOp::kBxor:
      return reduce_with<uint8_t, Xor>(dst, a, src, count);
    case ReduceOp::kAvg:
      break;
  }
  DDL_FAIL("reduce: avg of bool got past reduction_error()");
}

/// float16 or bfloat16: 16 bits reduced through float, with their conversions.
template <void (*Widen)(const uint16_t*, float*, size_t),
          void (*Narrow)(const float*, uint16_t*, size_t)>
struct Narrow16 {
  static constexpr auto widen = Widen;
  static constexpr auto narrow = Narrow;
};
using Half = Narrow16<widen_half, narrow_half>;
using BFloat16 = Narrow16<widen_bf16, narrow_bf16>;
/// bool: a byte, any non-zero value true.
struct Bool {};

template <typename T>
constexpr bool kNarrow = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// `f(T{})` with T the element type of `type` (Half, BFloat16 and Bool for the types C++ has
/// no arithmetic type for): the one switch over the data types.
template <typename F>
DDL_KERNEL decltype(auto) with_type(DataType type, F&& f) {
  switch (type) {
    case DataType::kFloat32:
      return f(float{});
    case DataType::kFloat64:
      return f(double{});
    case DataType::kFloat16:
      return f(Half{});
    case DataType::kBFloat16:
      return f(BFloat16{});
    case DataType::kInt32:
      return f(int32_t{});
    case DataType::kInt64:
      return f(int64_t{});
    case DataType::kUint8:
      return f(uint8_t{});
    case DataType::kInt8:
      return f(int8_t{});
    case DataType::kInt16:
      return f(int16_t{});
    case DataType::kUint16:
      return f(uint16_t{});
    case DataType::kBool:
      return f(Bool{});
  }
  DDL_FAIL("unknown data type " + std::to_string(static_cast<int>(type)));
}

// float16/bfloat16: a block at a time through float (both operands widened before dst's block
// is written, so dst may be exactly either).
template <typename N>
DDL_KERNEL void reduce_narrow(void* dst, const void* left, const void* src, size_t count,
                              ReduceOp op) {
  auto* d = static_cast<uint16_t*>(dst);
  const auto* l = left != nullptr ? static_cast<const uint16_t*>(left) : d;
  const auto* s = static_cast<const uint16_t*>(src);
  float a[kBlock];
  float b[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = std::min(kBlock, count - start);
    N::widen(l + start, a, n);
    N::widen(s + start, b, n);
    reduce_typed<float>(a, nullptr, b, n, op);
    N::narrow(a, d + start, n);
  }
}

/// The kernel for elements of T. Signed integers: sum, product and the bitwise ops are done in
/// the unsigned type of the same width (sums and products wrap: defined behaviour, the bits of
/// two's complement).
template <typename T>
DDL_KERNEL void reduce_as(void* dst, const void* a, const void* src, size_t count, ReduceOp op) {
  if constexpr (kNarrow<T>) {
    reduce_narrow<T>(dst, a, src, count, op);
  } else if constexpr (std::is_same_v<T, Bool>) {
    reduce_bool(dst, a, src, count, op);
  } else if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
    if (op == ReduceOp::kMin || op == ReduceOp::kMax)
      return reduce_typed<T>(dst, a, src, count, op);
    reduce_typed<std::make_unsigned_t<T>>(dst, a, src, count, op);
  } else {
    reduce_typed<T>(dst, a, src, count, op);
  }
}

// Integers divide as int (or int64): the divisor is never narrowed to T (256 ranks of uint8).
template <typename T>
void divide_typed(void* buf, size_t count, int divisor) {
  auto* p = static_cast<T*>(buf);
  if constexpr (std::is_integral_v<T>) {
    for (size_t i = 0; i < count; ++i)
      p[i] = static_cast<T>(p[i] / divisor);
  } else {
    const T by = static_cast<T>(divisor);
    for (size_t i = 0; i < count; ++i)
      p[i] = p[i] / by;
  }
}

template <typename N>
void divide_narrow(void* buf, size_t count, int divisor) {
  auto* p = static_cast<uint16_t*>(buf);
  const float by = static_cast<float>(divisor);
  float a[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = std::min(kBlock, count - start);
    N::widen(p + start, a, n);
    for (size_t i = 0; i < n; ++i)
      a[i] /= by;
    N::narrow(a, p + start, n);
  }
}

}  // namespace

namespace {

/// What libddl knows of each data type: its name and its size in bytes.
struct TypeInfo {
  std::string_view name;
  size_t size;
};

constexpr std::pair<DataType, TypeInfo> kTypes[] = {
    {DataType::kFloat32, {"float32", 4}}, {DataType::kFloat64, {"float64", 8}},
    {DataType::kFloat16, {"float16", 2}}, {DataType::kBFloat16, {"bfloat16", 2}},
    {DataType::kInt32, {"int32", 4}},     {DataType::kInt64, {"int64", 8}},
    {DataType::kUint8, {"uint8", 1}},     {DataType::kInt8, {"int8", 1}},
    {DataType::kInt16, {"int16", 2}},     {DataType::kUint16, {"uint16", 2}},
    {DataType::kBool, {"bool", 1}}};

constexpr std::pair<ReduceOp, std::string_view> kOpNames[] = {
    {ReduceOp::kSum, "sum"}, {ReduceOp::kAvg, "avg"},   {ReduceOp::kMin, "min"},
    {ReduceOp::kMax, "max"}, {ReduceOp::kProd, "prod"}, {ReduceOp::kBand, "band"},
    {ReduceOp::kBor, "bor"}, {ReduceOp::kBxor, "bxor"}};

bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
}

}  // namespace

size_t type_size(DataType type) {
  if (const std::optional<TypeInfo> info = base::lookup(kTypes, type)) return info->size;
  throw std::invalid_argument("unknown data type " + std::to_string(static_cast<int>(type)));
}

std::string_view to_string(DataType type) {
  const std::optional<TypeInfo> info = base::lookup(kTypes, type);
  return info ? info->name : "unknown";
}

std::string_view to_string(ReduceOp op) {
  return base::lookup(kOpNames, op).value_or("unknown");
}

bool is_floating(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16;
}

std::string reduction_error(DataType type, ReduceOp op) {
  if (is_bitwise(op) && is_floating(type)) {
    return "reduce op " + std::string(to_string(op)) + " is bitwise: it takes integer and bool " +
           "types, not " + std::string(to_string(type));
  }
  if (op == ReduceOp::kAvg && type == DataType::kBool) {
    return "reduce op avg does not take bool (on bool, sum and max are a logical or, prod and "
           "min a logical and)";
  }
  return "";
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DDL_REDUCE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DDL_REDUCE_CLONES
#endif

namespace {
/// dst = op(a, b), or dst = op(dst, b) when a is null: every type's kernel, for both clones.
DDL_KERNEL void reduce_any(void* dst, const void* a, const void* src, size_t count, DataType type,
                           ReduceOp op) {
  with_type(
      type, [&](auto t)
                __attribute__((always_inline)) { reduce_as<decltype(t)>(dst, a, src, count, op); });
}
}  // namespace

DDL_REDUCE_CLONES void reduce_into(void* dst, const void* src, size_t count, DataType type,
                                   ReduceOp op) {
  reduce_any(dst, nullptr, src, count, type, op);
}

DDL_REDUCE_CLONES void reduce_of(void* dst, const void* a, const void* b, size_t count,
                                 DataType type, ReduceOp op) {
  reduce_any(dst, a, b, count, type, op);
}

void divide(void* buf, size_t count, DataType type, int divisor) {
  if (divisor == 1) return;
  with_type(type, [&](auto t) {
    using T = decltype(t);
    if constexpr (kNarrow<T>) {
      divide_narrow<T>(buf, count, divisor);
    } else if constexpr (std::is_same_v<T, Bool>) {
      DDL_FAIL("divide: avg of bool got past reduction_error()");
    } else {
      divide_typed<T>(buf, count, divisor);
    }
  });
}

double element_value(const void* buf, size_t i, DataType type) {
  return with_type(type, [&](auto t) -> double {
    using T = decltype(t);
    if constexpr (kNarrow<T>) {
      float f = 0;
      T::widen(static_cast<const uint16_t*>(buf) + i, &f, 1);
      return f;
    } else if constexpr (std::is_same_v<T, Bool>) {
      return static_cast<const uint8_t*>(buf)[i];
    } else {
      return static_cast<double>(static_cast<const T*>(buf)[i]);
    }
  });
}

bool set_f16c(bool on) {
#ifdef DDL_F16C
  const bool had = g_f16c.load();
  g_f16c.store(on && cpu_has_f16c());
  return had;
#else
  (void)on;
  return false;
#endif
}

bool uses_f16c() {
  return g_f16c.load();
}

}  // namespace ddl::comm
