// The multi-dimensional allreduce on GPU buffers, over one NCCL communicator per dimension.
//
// How it works. With dims[0] the innermost ring (the GPUs of a host) and dims[k] the outermost
// (the hosts, or racks), and P = n0 n1 ... n(k-1) the product of the inner sizes:
//
//   1. ncclReduceScatter in place along dims[0]: this rank now owns 1/n0 of the region, summed
//      over its host. Then along dims[1] on that part, and so on up to dims[k-1]. Each step
//      moves only the part it owns, so after the inner steps this rank holds 1/P of the buffer.
//   2. ncclAllReduce of that part along dims[k]: the outermost (slowest) links carry 1/P of the
//      data, which is the point of the algorithm.
//   3. ncclAllGather in place along dims[k-1], ..., dims[0] restores the whole buffer.
//
// Reduce-scatter and allgather need parts of equal size, so the main region is the first
// count - count % P elements; the remaining (fewer than P) elements take one allreduce on the
// whole job's communicator. For floating-point kAvg every step averages: the grid is regular, so
// that is the average over the job (rounded once per step). Integer kAvg takes one allreduce on
// the whole job instead, since truncated averages of averages are not the truncated average.

#include <sstream>
#include <string>
#include <vector>

#include "comm/device/device.h"

namespace ddl::comm::device {

int visible_device(int gpu, const char* visible) {
  if (visible == nullptr || *visible == '\0') return gpu;
  std::vector<std::string> entries;
  std::istringstream in(visible);
  for (std::string e; std::getline(in, e, ',');)
    entries.push_back(e);
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i] == std::to_string(gpu)) return static_cast<int>(i);
  return entries.size() == 1 ? 0 : gpu;
}

void multi_dim_allreduce(std::span<Comm* const> dims, Comm& flat, const void* send, void* recv,
                         size_t count, DataType type, ReduceOp op) {
  if (count == 0) return;
  if (dims.empty() || (!is_floating(type) && op == ReduceOp::kAvg)) {
    flat.allreduce(send, recv, count, type, op);
    return;
  }
  const size_t elem = type_size(type);
  auto* out = static_cast<std::byte*>(recv);
  // The first step reads `send`; every later one works in place on `recv`.
  const auto* in = static_cast<const std::byte*>(send);
  size_t inner = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d)
    inner *= static_cast<size_t>(dims[d]->size());
  const size_t main = count - count % inner;

  if (main > 0) {
    // The part this rank owns after each step: [begin, begin + length).
    size_t begin = 0;
    size_t length = main;
    for (size_t d = 0; d + 1 < dims.size(); ++d) {
      const size_t part = length / static_cast<size_t>(dims[d]->size());
      const size_t mine = begin + static_cast<size_t>(dims[d]->rank()) * part;
      dims[d]->reduce_scatter(in + begin * elem, out + mine * elem, part, type, op);
      in = out;
      begin = mine;
      length = part;
    }
    dims.back()->allreduce(in + begin * elem, out + begin * elem, length, type, op);
    for (size_t d = dims.size() - 1; d-- > 0;) {
      const size_t part = length;
      length = part * static_cast<size_t>(dims[d]->size());
      const size_t mine = begin;
      begin -= static_cast<size_t>(dims[d]->rank()) * part;
      dims[d]->allgather(out + mine * elem, out + begin * elem, part, type);
    }
  }
  if (main < count) {
    flat.allreduce(static_cast<const std::byte*>(send) + main * elem, out + main * elem,
                   count - main, type, op);
  }
}

}  // namespace ddl::comm::device
