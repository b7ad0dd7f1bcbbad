#include "comm/collectives/collectives.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <ostream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "comm/collectives/dimension.h"
#include "tests/comm/link_pair.h"

namespace ddl::comm {
namespace {

using std::chrono::milliseconds;
using testing::Mesh;
using testing::message;
using testing::run_ranks;

constexpr DataType kTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                               DataType::kBFloat16, DataType::kInt32,   DataType::kInt64,
                               DataType::kUint8,    DataType::kInt8,    DataType::kInt16,
                               DataType::kUint16,   DataType::kBool};
constexpr ReduceOp kOps[] = {ReduceOp::kSum,  ReduceOp::kAvg,  ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProd, ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor};
constexpr size_t kCounts[] = {0, 1, 2, 3, 7, 64, 1000};

// --- inputs and the reference --------------------------------------------------------------
//
// Float inputs are chosen so that every partial sum and product is exact in every float type
// (quarters in [-2, 2], products of +-1, 2, 1/2): whatever order an algorithm reduces in, the
// exact result is the reference, and kAvg's one division rounds the same way here and there.
// Integer inputs are hashes over the whole range: sums and products wrap, which any order
// gives alike. bool inputs are 0 or any non-zero byte (true), a quarter of them false.

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double float_input(int r, size_t i, ReduceOp op) {
  static const double kFactors[] = {1, -1, 2, 0.5, -0.5, 1};
  switch (op) {
    case ReduceOp::kProd:
      return kFactors[(i * 5 + r * 3 + i / 7) % 6];
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return static_cast<double>(static_cast<int>(mix(i * 64 + r) % 101) - 50) * 0.5;
    default:
      return static_cast<double>(static_cast<int>((i * 7 + r * 13) % 17) - 8) * 0.25;
  }
}

/// v as type t holds it (wrapped to its width, signed types sign-extended).
int64_t wrap(DataType t, uint64_t v) {
  switch (t) {
    case DataType::kInt32:
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DataType::kInt8:
      return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DataType::kInt16:
      return static_cast<int16_t>(static_cast<uint16_t>(v));
    case DataType::kUint8:
    case DataType::kBool:
      return static_cast<int64_t>(v & 0xff);
    case DataType::kUint16:
      return static_cast<int64_t>(v & 0xffff);
    default:
      return static_cast<int64_t>(v);
  }
}

int64_t int_input(DataType t, int r, size_t i) {
  const uint64_t h = mix(i * 1000003 + r);
  if (t == DataType::kBool) return h % 4 == 0 ? 0 : static_cast<int64_t>((h >> 8) & 0xff) | 1;
  return wrap(t, h);
}

/// bool's reference: or (sum, max, bor), and (prod, min, band), xor (bxor), as 0 or 1 from two
/// ranks on.
int64_t bool_reference(int n, size_t i, ReduceOp op) {
  if (n == 1) return int_input(DataType::kBool, 0, i);  // nothing reduced: the input's byte
  bool acc = int_input(DataType::kBool, 0, i) != 0;
  for (int r = 1; r < n; ++r) {
    const bool v = int_input(DataType::kBool, r, i) != 0;
    if (op == ReduceOp::kSum || op == ReduceOp::kMax || op == ReduceOp::kBor) acc = acc || v;
    if (op == ReduceOp::kProd || op == ReduceOp::kMin || op == ReduceOp::kBand) acc = acc && v;
    if (op == ReduceOp::kBxor) acc = acc != v;
  }
  return acc ? 1 : 0;
}

/// An integer type's reference: op folded in uint64 (wrapping as the type does), then wrapped
/// to the type; avg divides that, truncating.
int64_t int_reference(DataType t, int n, size_t i, ReduceOp op) {
  uint64_t acc = static_cast<uint64_t>(int_input(t, 0, i));
  for (int r = 1; r < n; ++r) {
    const int64_t v = int_input(t, r, i);
    const auto u = static_cast<uint64_t>(v);
    if (op == ReduceOp::kSum || op == ReduceOp::kAvg) acc += u;
    if (op == ReduceOp::kProd) acc *= u;
    if (op == ReduceOp::kMin) acc = static_cast<uint64_t>(std::min<int64_t>(wrap(t, acc), v));
    if (op == ReduceOp::kMax) acc = static_cast<uint64_t>(std::max<int64_t>(wrap(t, acc), v));
    if (op == ReduceOp::kBand) acc &= u;
    if (op == ReduceOp::kBor) acc |= u;
    if (op == ReduceOp::kBxor) acc ^= u;
  }
  const int64_t result = wrap(t, acc);
  return op == ReduceOp::kAvg ? result / n : result;
}

// v rounded to nearest even with `digits` significant bits (v normal or zero).
double round_to(double v, int digits) {
  if (v == 0 || std::isinf(v)) return v;
  const int e = std::ilogb(v);
  return std::ldexp(std::nearbyint(std::ldexp(v, digits - 1 - e)), e - (digits - 1));
}

void encode_float(double v, DataType t, std::byte* out) {
  switch (t) {
    case DataType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      return;
    }
    case DataType::kFloat64:
      std::memcpy(out, &v, 8);
      return;
    case DataType::kFloat16: {
      const _Float16 h = static_cast<_Float16>(v);
      std::memcpy(out, &h, 2);
      return;
    }
    default: {
      const uint32_t x = std::bit_cast<uint32_t>(static_cast<float>(round_to(v, 8)));
      const uint16_t b = static_cast<uint16_t>(x >> 16);
      std::memcpy(out, &b, 2);
      return;
    }
  }
}

void encode_int(int64_t v, DataType t, std::byte* out) {
  // Little-endian: the low type_size(t) bytes of v.
  const auto u = static_cast<uint64_t>(v);
  for (size_t b = 0; b < type_size(t); ++b)
    out[b] = static_cast<std::byte>((u >> (8 * b)) & 0xff);
}

std::vector<std::byte> input(int r, size_t count, DataType t, ReduceOp op) {
  const size_t size = type_size(t);
  std::vector<std::byte> buf(count * size);
  for (size_t i = 0; i < count; ++i) {
    if (is_floating(t)) {
      encode_float(float_input(r, i, op), t, &buf[i * size]);
    } else {
      encode_int(int_input(t, r, i), t, &buf[i * size]);
    }
  }
  return buf;
}

std::vector<std::byte> reference(int n, size_t count, DataType t, ReduceOp op) {
  const size_t size = type_size(t);
  std::vector<std::byte> out(count * size);
  for (size_t i = 0; i < count; ++i) {
    if (is_floating(t)) {
      double acc = float_input(0, i, op);
      for (int r = 1; r < n; ++r) {
        const double v = float_input(r, i, op);
        if (op == ReduceOp::kSum || op == ReduceOp::kAvg) acc += v;
        if (op == ReduceOp::kProd) acc *= v;
        if (op == ReduceOp::kMin) acc = std::min(acc, v);
        if (op == ReduceOp::kMax) acc = std::max(acc, v);
      }
      if (op == ReduceOp::kAvg) acc /= n;
      encode_float(acc, t, &out[i * size]);
      continue;
    }
    const int64_t result =
        t == DataType::kBool ? bool_reference(n, i, op) : int_reference(t, n, i, op);
    encode_int(result, t, &out[i * size]);
  }
  return out;
}

// --- running the algorithms ----------------------------------------------------------------

// kPipelined: multi_dim_allreduce over RingDimensions in chunks of kPipelineChunkBytes, so even
// short buffers flow through the pipeline's threads in many chunks.
enum class Algo { kRing, kRecursiveDoubling, kMultiRing, kPipelined };
constexpr size_t kPipelineChunkBytes = 40;

struct Case {
  Algo algo;
  std::vector<int> dims;  // multi-ring: innermost first; otherwise {ranks}
  int ranks() const { return std::accumulate(dims.begin(), dims.end(), 1, std::multiplies<>()); }
  std::string name() const {
    std::string s = algo == Algo::kRing                ? "ring_"
                    : algo == Algo::kRecursiveDoubling ? "rd_"
                    : algo == Algo::kPipelined         ? "pipelined_"
                                                       : "multiring_";
    for (size_t d = 0; d < dims.size(); ++d)
      s += (d ? "x" : "") + std::to_string(dims[d]);
    return s;
  }
};

// Rank r's ring along each dimension of a grid, rank = c0 + d0 (c1 + d1 (c2 + ...)).
std::vector<Group> grid_groups(Mesh& mesh, int r, const std::vector<int>& dims,
                               milliseconds timeout) {
  std::vector<Group> groups;
  int stride = 1;
  for (int d : dims) {
    const int c = (r / stride) % d;
    std::vector<int> members;
    for (int j = 0; j < d; ++j)
      members.push_back(r + (j - c) * stride);
    groups.push_back(mesh.group(r, members, timeout));
    stride *= d;
  }
  return groups;
}

// The multi-dimensional allreduce over rings, unpipelined: a RingDimension per group, one chunk.
void multi_ring_allreduce(std::span<const Group* const> groups, void* buf, size_t count,
                          DataType type, ReduceOp op) {
  std::vector<RingDimension> rings;
  for (const Group* g : groups)
    rings.emplace_back(*g);
  std::vector<Dimension*> dims;
  for (RingDimension& ring : rings)
    dims.push_back(&ring);
  multi_dim_allreduce(dims, buf, count, type, op, 0);
}

void allreduce(Mesh& mesh, int r, const Case& c, void* buf, size_t count, DataType t, ReduceOp op,
               milliseconds timeout = std::chrono::seconds(10)) {
  switch (c.algo) {
    case Algo::kRing:
      return ring_allreduce(mesh.world(r, timeout), buf, count, t, op);
    case Algo::kRecursiveDoubling:
      return recursive_doubling_allreduce(mesh.world(r, timeout), buf, count, t, op);
    case Algo::kMultiRing: {
      const auto groups = grid_groups(mesh, r, c.dims, timeout);
      std::vector<const Group*> dims;
      for (const Group& g : groups)
        dims.push_back(&g);
      return multi_ring_allreduce(dims, buf, count, t, op);
    }
    case Algo::kPipelined: {
      const auto groups = grid_groups(mesh, r, c.dims, timeout);
      std::vector<RingDimension> rings(groups.begin(), groups.end());
      std::vector<Dimension*> dims;
      for (RingDimension& d : rings)
        dims.push_back(&d);
      // Large counts in chunks of 128 KiB (still several per buffer).
      return multi_dim_allreduce(dims, buf, count, t, op,
                                 count > 10'000 ? 128 * 1024 : kPipelineChunkBytes);
    }
  }
}

std::string describe(const Case& c, DataType t, ReduceOp op, size_t count) {
  return c.name() + " " + std::string(to_string(t)) + " " + std::string(to_string(op)) + " count " +
         std::to_string(count);
}

// Every rank's result equals the reference, bit for bit (so all ranks agree).
void expect_results(const Case& c, DataType t, ReduceOp op, size_t count,
                    const std::vector<std::vector<std::byte>>& results) {
  const auto want = reference(c.ranks(), count, t, op);
  const size_t size = type_size(t);
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r] == want) continue;
    size_t i = 0;
    while (i < count && std::memcmp(&results[r][i * size], &want[i * size], size) == 0)
      ++i;
    ADD_FAILURE() << describe(c, t, op, count) << ": rank " << r << " differs at element " << i;
    return;
  }
}

// --- the grid: algorithms x ranks x types x ops x counts -----------------------------------

/// The narrow integer types and bool, and the bitwise ops. The pipelined cases cut buffers into
/// 40-byte chunks, so their 1000 elements are slow; the pipeline never looks at the type or op,
/// and every other case runs these pairs at every count, so there they go up to 64 elements.
bool narrow_or_bitwise(DataType t, ReduceOp op) {
  return t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kUint16 ||
         t == DataType::kBool || op == ReduceOp::kBand || op == ReduceOp::kBor ||
         op == ReduceOp::kBxor;
}

class AllreduceGridTest : public ::testing::TestWithParam<Case> {};

TEST_P(AllreduceGridTest, EveryTypeOpAndCountMatchesTheReferenceOnEveryRank) {
  const Case c = GetParam();
  const int n = c.ranks();
  Mesh mesh(n);
  struct Combo {
    DataType t;
    ReduceOp op;
    size_t count;
  };
  std::vector<Combo> combos;
  for (DataType t : kTypes) {
    for (ReduceOp op : kOps) {
      if (!reduction_error(t, op).empty()) continue;  // refused (ReduceTest.RefusedPairsSayWhy)
      for (size_t count : kCounts) {
        if (c.algo == Algo::kPipelined && count > 64 && narrow_or_bitwise(t, op)) continue;
        combos.push_back({t, op, count});
      }
    }
  }
  // results[k][r]: combo k on rank r. Every rank runs every combo in the same order.
  std::vector<std::vector<std::vector<std::byte>>> results(combos.size(),
                                                           std::vector<std::vector<std::byte>>(n));
  const auto errors = run_ranks(n, [&](int r) {
    for (size_t k = 0; k < combos.size(); ++k) {
      auto buf = input(r, combos[k].count, combos[k].t, combos[k].op);
      allreduce(mesh, r, c, buf.data(), combos[k].count, combos[k].t, combos[k].op,
                std::chrono::seconds(5));
      results[k][r] = std::move(buf);
    }
  });
  for (int r = 0; r < n; ++r)
    ASSERT_FALSE(errors[r]) << "rank " << r << ": " << message(errors[r]);
  for (size_t k = 0; k < combos.size(); ++k) {
    expect_results(c, combos[k].t, combos[k].op, combos[k].count, results[k]);
  }
}

std::vector<Case> grid_cases() {
  std::vector<Case> cases;
  for (int n = 1; n <= 9; ++n) {
    cases.push_back({Algo::kRing, {n}});
    cases.push_back({Algo::kRecursiveDoubling, {n}});
    cases.push_back({Algo::kMultiRing, {n}});
  }
  for (const auto& dims : std::vector<std::vector<int>>{
           {2, 2}, {2, 3}, {3, 2}, {1, 4}, {4, 1}, {2, 4}, {3, 3}, {2, 2, 2}, {1, 3, 3}}) {
    cases.push_back({Algo::kMultiRing, dims});
    cases.push_back({Algo::kPipelined, dims});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Collectives, AllreduceGridTest, ::testing::ValuesIn(grid_cases()),
                         [](const auto& info) { return info.param.name(); });

// A few million-element runs: many slices, chunks not divisible by the ranks.
TEST(CollectiveTest, LargeCountsMatchTheReference) {
  const size_t kBig = (1u << 20) + 3;
  struct Big {
    Case c;
    DataType t;
    ReduceOp op;
  };
  const Big bigs[] = {
      {{Algo::kRing, {4}}, DataType::kFloat32, ReduceOp::kSum},
      {{Algo::kRing, {7}}, DataType::kBFloat16, ReduceOp::kAvg},
      {{Algo::kRecursiveDoubling, {3}}, DataType::kInt32, ReduceOp::kSum},
      {{Algo::kMultiRing, {2, 3}}, DataType::kFloat16, ReduceOp::kMax},
      {{Algo::kMultiRing, {2, 2, 2}}, DataType::kFloat64, ReduceOp::kProd},
      {{Algo::kPipelined, {2, 3}}, DataType::kFloat32, ReduceOp::kAvg},
      {{Algo::kPipelined, {2, 2, 2}}, DataType::kInt64, ReduceOp::kSum},
  };
  for (const Big& b : bigs) {
    const int n = b.c.ranks();
    Mesh mesh(n);
    std::vector<std::vector<std::byte>> results(n);
    const auto errors = run_ranks(n, [&](int r) {
      results[r] = input(r, kBig, b.t, b.op);
      allreduce(mesh, r, b.c, results[r].data(), kBig, b.t, b.op);
    });
    for (int r = 0; r < n; ++r)
      ASSERT_FALSE(errors[r]) << message(errors[r]);
    expect_results(b.c, b.t, b.op, kBig, results);
  }
}

// Random floats (inexact sums): each algorithm agrees bitwise across ranks, and multi-ring
// equals the flat ring to rounding.
TEST(CollectiveTest, InexactFloatSumsAgreeAcrossRanksAndAlgorithms) {
  const size_t count = 100'003;
  const int n = 6;
  Mesh mesh(n);
  auto data = [](int r, size_t i) {
    return static_cast<float>(static_cast<double>(mix(i * 7 + r) % 2000001) / 1e6 - 1.0);
  };
  std::vector<std::vector<float>> ring(n), multi(n);
  const auto errors = run_ranks(n, [&](int r) {
    ring[r].resize(count);
    for (size_t i = 0; i < count; ++i)
      ring[r][i] = data(r, i);
    multi[r] = ring[r];
    allreduce(mesh, r, {Algo::kRing, {6}}, ring[r].data(), count, DataType::kFloat32,
              ReduceOp::kSum);
    allreduce(mesh, r, {Algo::kMultiRing, {3, 2}}, multi[r].data(), count, DataType::kFloat32,
              ReduceOp::kSum);
  });
  for (int r = 0; r < n; ++r)
    ASSERT_FALSE(errors[r]) << message(errors[r]);
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(0, std::memcmp(ring[r].data(), ring[0].data(), count * 4)) << "ring, rank " << r;
    EXPECT_EQ(0, std::memcmp(multi[r].data(), multi[0].data(), count * 4)) << "multi, rank " << r;
  }
  for (size_t i = 0; i < count; ++i) {
    double exact = 0;
    for (int r = 0; r < n; ++r)
      exact += data(r, i);
    ASSERT_NEAR(ring[0][i], exact, 1e-5) << i;
    ASSERT_NEAR(multi[0][i], exact, 1e-5) << i;
  }
}

// --- reduce-scatter, allgather, broadcast, barrier ------------------------------------------

TEST(CollectiveTest, ReduceScatterLeavesChunkIOnMemberI) {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : {0, 1, 5, 64, 1001, 300'007}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        Mesh mesh(n);
        std::vector<std::vector<std::byte>> results(n);
        const auto errors = run_ranks(n, [&](int r) {
          results[r] = input(r, count, DataType::kFloat32, op);
          ring_reduce_scatter(mesh.world(r), results[r].data(), count, DataType::kFloat32, op);
        });
        for (int r = 0; r < n; ++r)
          ASSERT_FALSE(errors[r]) << message(errors[r]);
        const auto want = reference(n, count, DataType::kFloat32, op);
        const auto offsets = partition(count, n);
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(std::equal(results[r].begin() + offsets[r] * 4,
                                 results[r].begin() + offsets[r + 1] * 4,
                                 want.begin() + offsets[r] * 4))
              << "n " << n << " count " << count << " rank " << r << " " << to_string(op);
        }
      }
    }
  }
}

TEST(CollectiveTest, AllgatherPutsEveryChunkInPlace) {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : {0, 1, 2, 9, 1000, 300'007}) {
      Mesh mesh(n);
      const auto offsets = partition(count, n);
      std::vector<std::vector<int64_t>> bufs(n);
      const auto errors = run_ranks(n, [&](int r) {
        bufs[r].assign(count, -1);
        for (size_t i = offsets[r]; i < offsets[r + 1]; ++i)
          bufs[r][i] = int_input(DataType::kInt64, r, i);
        ring_allgather(mesh.world(r), bufs[r].data(), count, DataType::kInt64);
      });
      for (int r = 0; r < n; ++r)
        ASSERT_FALSE(errors[r]) << message(errors[r]);
      for (int r = 0; r < n; ++r) {
        for (int owner = 0; owner < n; ++owner) {
          for (size_t i = offsets[owner]; i < offsets[owner + 1]; ++i) {
            ASSERT_EQ(bufs[r][i], int_input(DataType::kInt64, owner, i))
                << "n " << n << " count " << count << " rank " << r << " element " << i;
          }
        }
      }
    }
  }
}

TEST(CollectiveTest, BroadcastFromEveryRoot) {
  for (int n = 1; n <= 9; ++n) {
    Mesh mesh(n);  // one mesh for all roots and sizes: streams stay in step
    for (int root = 0; root < n; ++root) {
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{1000}, size_t{(600 << 10) + 7}}) {
        std::vector<std::vector<uint8_t>> bufs(n);
        const auto errors = run_ranks(n, [&](int r) {
          bufs[r].resize(bytes);
          for (size_t i = 0; i < bytes; ++i)
            bufs[r][i] = static_cast<uint8_t>(mix(i * 16 + r));
          ring_broadcast(mesh.world(r), bufs[r].data(), bytes, root);
        });
        for (int r = 0; r < n; ++r)
          ASSERT_FALSE(errors[r]) << message(errors[r]);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(bufs[r][i], static_cast<uint8_t>(mix(i * 16 + root)))
                << "n " << n << " root " << root << " bytes " << bytes << " rank " << r;
          }
        }
      }
    }
  }
}

// --- failures --------------------------------------------------------------------------------

TEST(CollectiveTest, APeerThatFailsMidAllreduceIsNamedByTheOthers) {
  const int n = 4;
  const size_t count = 1 << 20;
  Mesh mesh(n);
  mesh.link(2, 3).fail_after(300'000);  // rank 2 dies after sending ~300 kB to rank 3
  const auto errors = run_ranks(n, [&](int r) {
    std::vector<float> buf(count, 1.0f);
    try {
      ring_allreduce(mesh.world(r, milliseconds(1500)), buf.data(), count, DataType::kFloat32,
                     ReduceOp::kSum);
    } catch (...) {
      if (r == 2) {
        for (int p = 0; p < n; ++p) {
          if (p != r) mesh.link(r, p).close();  // the process is gone: all its links close
        }
      }
      throw;
    }
  });
  EXPECT_EQ(message(errors[2]), "rank 3 (thread): injected failure");
  // Rank 3 receives from rank 2: it sees the end of the stream, in the transport's words.
  EXPECT_EQ(message(errors[3]), "rank 2 (thread): the connection was closed by the peer");
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r << " did not fail";
    EXPECT_THROW(std::rethrow_exception(errors[r]), transport::TransportError) << "rank " << r;
  }
}

// An absurdly small chunk (1 byte) on a large buffer: the pipeline cuts at most 4096 chunks,
// and the result is still the reference on every rank.
TEST(CollectiveTest, APipelineOfOneByteChunksIsBounded) {
  const int n = 4;
  const size_t count = 1 << 20;
  Mesh mesh(n);
  std::vector<std::vector<std::byte>> results(n);
  const auto errors = run_ranks(n, [&](int r) {
    results[r] = input(r, count, DataType::kInt32, ReduceOp::kSum);
    const auto groups = grid_groups(mesh, r, {2, 2}, std::chrono::seconds(20));
    std::vector<RingDimension> rings(groups.begin(), groups.end());
    std::vector<Dimension*> dims{&rings[0], &rings[1]};
    multi_dim_allreduce(dims, results[r].data(), count, DataType::kInt32, ReduceOp::kSum, 1);
  });
  for (int r = 0; r < n; ++r)
    ASSERT_FALSE(errors[r]) << message(errors[r]);
  expect_results({Algo::kPipelined, {2, 2}}, DataType::kInt32, ReduceOp::kSum, count, results);
}

// A link of the outer dimension fails while the pipeline's threads are busy: every rank's call
// ends (no thread left waiting on another dimension), and the ranks at the failed link name
// each other.
TEST(CollectiveTest, APipelineWhoseOuterLinkFailsEndsOnEveryRank) {
  const int n = 4;  // 2 x 2: rank 1 and rank 3 are outer neighbours
  const size_t count = 1 << 18;
  Mesh mesh(n);
  mesh.link(1, 3).fail_after(20'000);
  const auto errors = run_ranks(n, [&](int r) {
    std::vector<float> buf(count, 1.0f);
    try {
      allreduce(mesh, r, {Algo::kPipelined, {2, 2}}, buf.data(), count, DataType::kFloat32,
                ReduceOp::kSum, milliseconds(1500));
    } catch (...) {
      for (int p = 0; p < n; ++p)
        if (p != r) mesh.link(r, p).close();  // the process is gone: all its links close
      throw;
    }
  });
  EXPECT_EQ(message(errors[1]), "rank 3 (thread): injected failure");
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(errors[r]) << "rank " << r << " did not fail";
}

TEST(CollectiveTest, TwoRanksNameEachOtherWhenOneFails) {
  for (Algo algo : {Algo::kRing, Algo::kRecursiveDoubling}) {
    Mesh mesh(2);
    mesh.link(1, 0).fail_after(1000);
    const auto errors = run_ranks(2, [&](int r) {
      std::vector<int32_t> buf(100'000, r);
      try {
        allreduce(mesh, r, {algo, {2}}, buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum,
                  milliseconds(1500));
      } catch (...) {
        if (r == 1) mesh.link(1, 0).close();
        throw;
      }
    });
    EXPECT_EQ(message(errors[1]), "rank 0 (thread): injected failure");
    EXPECT_EQ(message(errors[0]).rfind("rank 1 (thread): ", 0), 0u) << message(errors[0]);
  }
}

// Not run by default: build/tests/comm_test --gtest_also_run_disabled_tests
//   --gtest_filter='*Timing*'
TEST(CollectiveTest, DISABLED_Timing64MiBFloat32) {
  const size_t count = 16u << 20;  // 64 MiB of float32
  for (int n : {2, 4}) {
    Mesh mesh(n);
    std::vector<std::vector<float>> bufs(n, std::vector<float>(count, 1.0f));
    for (Case c : {Case{Algo::kRing, {n}}, Case{Algo::kMultiRing, {2, n / 2}},
                   Case{Algo::kRecursiveDoubling, {n}}}) {
      const auto start = std::chrono::steady_clock::now();
      const auto errors = run_ranks(n, [&](int r) {
        allreduce(mesh, r, c, bufs[r].data(), count, DataType::kFloat32, ReduceOp::kSum);
      });
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (int r = 0; r < n; ++r)
        ASSERT_FALSE(errors[r]) << message(errors[r]);
      std::printf("%s: 64 MiB float32 sum in %.3f s (%.2f GB/s algorithm bandwidth)\n",
                  c.name().c_str(), s, 64.0 * (1 << 20) / s / 1e9);
    }
  }
}

// --- over the real transports -----------------------------------------------------------
//
// The same algorithms over TCP (loopback) and shared-memory links between threads, each rank
// with its own Device, every pair connected.

struct Transport {
  std::string name;
  std::unique_ptr<transport::Device> (*make)(const transport::DeviceOptions&);
  std::string closed;  ///< what a receive says when the peer has closed its link
};

std::ostream& operator<<(std::ostream& os, const Transport& t) {
  return os << t.name;
}

class RealTransportTest : public ::testing::TestWithParam<Transport> {
 protected:
  void connect(int n) {
    static std::atomic<int> jobs{0};
    const std::string job =
        "collectives-test-" + std::to_string(getpid()) + "-" + std::to_string(jobs++);
    devices_.clear();
    links_.clear();
    links_.resize(n);
    for (auto& row : links_)
      row.resize(n);
    for (int r = 0; r < n; ++r) {
      transport::DeviceOptions o;
      o.rank = r;
      o.job_id = job;
      o.token = "secret";
      if (GetParam().name == "tcp") o.bind_address = "127.0.0.1";
      devices_.push_back(GetParam().make(o));
    }
    // Each rank connects to its peers in ascending order: every rank meets the pairs in one
    // global order, so no two wait on each other.
    const auto errors = run_ranks(n, [&](int r) {
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        links_[r][p] = devices_[r]->connect(p, "rank " + std::to_string(p) + " (test)",
                                            devices_[p]->address(), std::chrono::seconds(10));
      }
    });
    for (int r = 0; r < n; ++r)
      ASSERT_FALSE(errors[r]) << message(errors[r]);
  }

  Group group(int r, std::vector<int> members, milliseconds timeout = std::chrono::seconds(10)) {
    int self = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == r) self = static_cast<int>(i);
    }
    return Group(
        std::move(members), self,
        [this, r](int p) -> transport::Link& {
          if (fail_ && r == fail_rank_ && p == fail_peer_) return *fail_;
          return *links_[r][p];
        },
        timeout);
  }
  Group world(int r, milliseconds timeout = std::chrono::seconds(10)) {
    std::vector<int> all(links_.size());
    std::iota(all.begin(), all.end(), 0);
    return group(r, all, timeout);
  }

  std::vector<std::unique_ptr<transport::Device>> devices_;
  std::vector<std::vector<std::unique_ptr<transport::Link>>> links_;
  std::unique_ptr<testing::FailAfter> fail_;
  int fail_rank_ = -1;
  int fail_peer_ = -1;
};

TEST_P(RealTransportTest, EveryCollectiveMatchesTheReference) {
  const int n = 4;
  connect(n);
  const size_t big = (1u << 20) + 3;
  std::vector<std::vector<std::byte>> ring(n), multi(n), rd(n);
  std::vector<std::vector<uint8_t>> bcast(n);
  const auto errors = run_ranks(n, [&](int r) {
    ring[r] = input(r, big, DataType::kFloat32, ReduceOp::kSum);
    ring_allreduce(world(r), ring[r].data(), big, DataType::kFloat32, ReduceOp::kSum);

    multi[r] = input(r, 1001, DataType::kBFloat16, ReduceOp::kAvg);
    const Group inner = group(r, {r & ~1, r | 1});
    const Group outer = group(r, {r & 1, (r & 1) + 2});
    const Group* dims[] = {&inner, &outer};
    multi_ring_allreduce(dims, multi[r].data(), 1001, DataType::kBFloat16, ReduceOp::kAvg);

    rd[r] = input(r, 77, DataType::kInt64, ReduceOp::kProd);
    recursive_doubling_allreduce(world(r), rd[r].data(), 77, DataType::kInt64, ReduceOp::kProd);

    bcast[r].assign((600 << 10) + 7, static_cast<uint8_t>(r));
    ring_broadcast(world(r), bcast[r].data(), bcast[r].size(), 2);
  });
  for (int r = 0; r < n; ++r)
    ASSERT_FALSE(errors[r]) << "rank " << r << ": " << message(errors[r]);
  expect_results({Algo::kRing, {4}}, DataType::kFloat32, ReduceOp::kSum, big, ring);
  expect_results({Algo::kMultiRing, {2, 2}}, DataType::kBFloat16, ReduceOp::kAvg, 1001, multi);
  expect_results({Algo::kRecursiveDoubling, {4}}, DataType::kInt64, ReduceOp::kProd, 77, rd);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(bcast[r], std::vector<uint8_t>(bcast[r].size(), 2)) << "rank " << r;
  }
}

TEST_P(RealTransportTest, RecursiveDoublingFoldsAnOddRankCount) {
  const int n = 3;
  connect(n);
  std::vector<double> avg(n);
  std::vector<std::vector<std::byte>> sums(n);
  const auto errors = run_ranks(n, [&](int r) {
    avg[r] = r;
    recursive_doubling_allreduce(world(r), &avg[r], 1, DataType::kFloat64, ReduceOp::kAvg);
    sums[r] = input(r, 1000, DataType::kFloat32, ReduceOp::kSum);
    recursive_doubling_allreduce(world(r), sums[r].data(), 1000, DataType::kFloat32,
                                 ReduceOp::kSum);
  });
  for (int r = 0; r < n; ++r)
    ASSERT_FALSE(errors[r]) << "rank " << r << ": " << message(errors[r]);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(avg[r], 1.0) << "rank " << r;
  expect_results({Algo::kRecursiveDoubling, {3}}, DataType::kFloat32, ReduceOp::kSum, 1000, sums);
}

TEST_P(RealTransportTest, APeerThatFailsMidAllreduceIsNamedByItsNeighbour) {
  const int n = 4;
  connect(n);
  fail_rank_ = 2;
  fail_peer_ = 3;
  fail_ = std::make_unique<testing::FailAfter>(*links_[2][3], 300'000);
  const auto errors = run_ranks(n, [&](int r) {
    std::vector<float> buf(1 << 20, 1.0f);
    try {
      ring_allreduce(world(r, milliseconds(1500)), buf.data(), buf.size(), DataType::kFloat32,
                     ReduceOp::kSum);
    } catch (...) {
      if (r == 2) {
        for (auto& link : links_[2])
          link.reset();  // its process is gone
      }
      throw;
    }
  });
  EXPECT_EQ(message(errors[2]), "rank 3 (test): injected failure");
  EXPECT_EQ(message(errors[3]), "rank 2 (test): " + GetParam().closed);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(errors[r]) << "rank " << r << " did not fail";
    EXPECT_THROW(std::rethrow_exception(errors[r]), transport::TransportError) << "rank " << r;
  }
}

// Not run by default: build/tests/comm_test --gtest_also_run_disabled_tests
//   --gtest_filter='*RealTransport*Timing*'
TEST_P(RealTransportTest, DISABLED_Timing64MiBFloat32) {
  const int n = 4;
  connect(n);
  const size_t count = 16u << 20;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(count, 1.0f));
  for (int round = 0; round < 2; ++round) {  // the first round also maps the buffers
    const auto start = std::chrono::steady_clock::now();
    const auto errors = run_ranks(n, [&](int r) {
      ring_allreduce(world(r), bufs[r].data(), count, DataType::kFloat32, ReduceOp::kSum);
    });
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int r = 0; r < n; ++r)
      ASSERT_FALSE(errors[r]) << message(errors[r]);
    std::printf("%s ring_4 round %d: 64 MiB float32 sum in %.3f s\n", GetParam().name.c_str(),
                round, s);
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, RealTransportTest,
                         ::testing::Values(Transport{"tcp", transport::make_tcp_device,
                                                     "the connection was closed by the peer"},
                                           Transport{"shm", transport::make_shm_device,
                                                     "the peer closed the link"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ddl::comm
