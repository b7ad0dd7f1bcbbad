// How a buffer is cut into one chunk per group member.
//
// How it works. `count` elements are cut into `parts` contiguous chunks whose sizes differ by
// at most one: every chunk gets count / parts elements and the first count % parts chunks one
// more. Every member computes the same offsets from the same (count, parts), so chunk i means
// the same elements everywhere: the ring's reduce-scatter leaves chunk i on member i, the
// allgather sends it back out, and multi_dim_allreduce cuts the chunk a rank owns in one
// dimension again for the next. Chunks may be empty (count < parts); the algorithms skip
// empty transfers on both sides, which agree because both sides compute the same chunk.
//
// A long ring is cut the same way into sub-rings (sub_ring_positions): its positions are read
// as mixed-radix numbers, and each digit is a dimension of its own.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "comm/collectives/collectives.h"

namespace ddl::comm {

std::vector<size_t> partition(size_t count, int parts) {
  if (parts < 1) {
    throw std::invalid_argument("partition: parts must be at least 1, not " +
                                std::to_string(parts));
  }
  const size_t n = static_cast<size_t>(parts);
  const size_t base = count / n;
  const size_t extra = count % n;
  std::vector<size_t> offsets(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    offsets[i + 1] = offsets[i] + base + (i < extra ? 1 : 0);
  return offsets;
}

std::vector<std::vector<int>> sub_ring_positions(int size, int position,
                                                 std::span<const int> factors) {
  int64_t product = 1;
  for (int f : factors) {
    if (f < 1) throw std::invalid_argument("sub_ring_positions: a factor is " + std::to_string(f));
    product *= f;
    if (product > size) break;
  }
  if (product != size || position < 0 || position >= size) {
    throw std::invalid_argument("sub_ring_positions: factors do not multiply to " +
                                std::to_string(size) + " or position " + std::to_string(position) +
                                " is outside");
  }
  std::vector<std::vector<int>> rings;
  int stride = 1;
  for (int f : factors) {
    const int digit = position / stride % f;
    std::vector<int> ring;
    for (int t = 0; t < f; ++t)
      ring.push_back(position + (t - digit) * stride);
    rings.push_back(std::move(ring));
    stride *= f;
  }
  return rings;
}

}  // namespace ddl::comm
