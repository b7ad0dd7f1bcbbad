#include <cstdint>
#include <limits>
#include <utility>

#include "comm/topology.h"

namespace ddl::comm {

// Default rings
//
// How it works: with dims d0 x d1 x ... (innermost first) and ranks laid out host-major, rank r
// has coordinates i_k = (r / s_k) % d_k, where the stride s_k = d0 * ... * d(k-1) (s_0 = 1).
// The ranks that differ only in coordinate k are base + i * s_k for i = 0..d_k-1, where base is
// a rank whose coordinate k is 0. So dimension k has one ring per such base, taken in ascending
// order of base, each listing base, base + s_k, ..., base + (d_k - 1) * s_k. For 4x3: dimension
// 0 rings are {0,1,2,3} {4,5,6,7} {8,9,10,11}; dimension 1 rings are {0,4,8} {1,5,9} {2,6,10}
// {3,7,11}.

std::vector<std::vector<Ring>> default_rings(const std::vector<int>& dims) {
  int64_t total = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] < 1) {
      throw TopologyError("default_rings: dimension " + std::to_string(k) + " is " +
                          std::to_string(dims[k]) + "; each must be at least 1");
    }
    total *= dims[k];
    if (total > std::numeric_limits<int>::max()) {
      throw TopologyError("default_rings: the dimensions multiply to more than 2147483647 ranks");
    }
  }
  std::vector<std::vector<Ring>> rings(dims.size());
  int stride = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int size = dims[k];
    rings[k].reserve(static_cast<size_t>(total / size));
    for (int base = 0; base < total; ++base) {
      if ((base / stride) % size != 0) continue;
      Ring ring(static_cast<size_t>(size));
      for (int i = 0; i < size; ++i)
        ring[i] = base + i * stride;
      rings[k].push_back(std::move(ring));
    }
    stride *= size;
  }
  return rings;
}

}  // namespace ddl::comm
