// The multi-dimensional ring allreduce of the PowerAI DDL paper.
//
// How it works. The ranks form a grid, dims[0] the innermost dimension (the GPUs of one host,
// say) and dims.back() the outermost (the hosts). Each Group in `dims` is the ring of this
// rank's neighbours along one dimension. The allreduce runs in two sweeps over a shrinking
// region of the buffer:
//
//   1. Inward to outward: reduce-scatter the region among dims[0]; this rank now owns one
//      chunk of it (partition(region, size) at its index), summed over its dims[0] ring.
//      Reduce-scatter that chunk among dims[1], and so on. After the last dimension this
//      rank owns 1 / (n0 n1 ... nk) of the buffer, reduced over the whole grid.
//   2. kAvg divides that piece once by the product of the sizes.
//   3. Outward to inward: allgather among the outermost ring the region it scattered, then
//      among the next one in, ..., until dims[0]'s allgather restores the whole buffer.
//
// Every member of a dimension's ring must hold the same region when that ring runs; the
// communicator guarantees this by building the rings from a grid (members of one ring share
// their indices in every other dimension). The outer dimensions move only 1/n0, 1/(n0 n1), ...
// of the data, which is what makes the algorithm fast when the inner links are fast.
//
// Each element is reduced in one fixed order (ring order within dims[0], then those partial
// results in ring order along dims[1], ...), so every rank ends with the same bits. That
// order is not the flat ring's, so for floats the result equals ring_allreduce's
// mathematically but need not equal it bitwise; integer results (wrapping) and min/max are
// identical. With a single dimension the steps are exactly ring_allreduce's.

#include <vector>

#include "comm/collectives/collectives.h"

namespace ddl::comm {

void multi_ring_allreduce(std::span<const Group* const> dims, void* buf, size_t count,
                          DataType type, ReduceOp op) {
  const size_t size = type_size(type);
  auto* base = static_cast<std::byte*>(buf);
  const ReduceOp fold = op == ReduceOp::kAvg ? ReduceOp::kSum : op;

  // regions[d] = [begin, end) that dimension d's ring works on.
  std::vector<std::pair<size_t, size_t>> regions;
  regions.reserve(dims.size());
  size_t begin = 0;
  size_t end = count;
  int ranks = 1;
  for (const Group* g : dims) {
    regions.emplace_back(begin, end);
    ring_reduce_scatter(*g, base + begin * size, end - begin, type, fold);
    const auto offsets = partition(end - begin, g->size());
    end = begin + offsets[g->rank() + 1];
    begin += offsets[g->rank()];
    ranks *= g->size();
  }
  if (op == ReduceOp::kAvg) divide(base + begin * size, end - begin, type, ranks);
  for (size_t d = dims.size(); d-- > 0;) {
    const auto [b, e] = regions[d];
    ring_allgather(*dims[d], base + b * size, e - b, type);
  }
}

}  // namespace ddl::comm
