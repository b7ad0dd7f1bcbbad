#pragma once
// A node group's collective as a sweep of steps (node.cc), shared by node.cc and
// node_shared.cc.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/collectives/node.h"

namespace ddl::comm {

/// One collective as a sweep of steps (see the top of this file). Offsets and lengths are in
/// elements, per member.
struct NodeGroup::Sweep {
  const std::byte* in = nullptr;
  std::byte* out = nullptr;
  DataType type = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;  ///< already folded: kAvg reduces as kSum, then divides
  int divisor = 1;
  bool reduce = false;  ///< pieces are reduced by their slice's member
  bool gather = false;  ///< every member's (reduced) piece lands in every member's out
  bool stream = false;  ///< out is written with streaming stores (node_copy.h)
  int source = -1;      ///< broadcast: the only member with data
  /// An in-place allreduce whose members may share buffers (maps_peers()): this member's
  /// buffer when it is a shared one, else nullptr (node_shared.cc).
  bool share = false;
  const SharedRef* mine = nullptr;
  std::vector<size_t> in_off, out_off, len;
  size_t piece = 0;  ///< elements per member per step
  const Signature* sig = nullptr;

  size_t ts() const { return type_size(type); }
  size_t steps() const {
    size_t most = 0;
    for (size_t l : len)
      most = std::max(most, (l + piece - 1) / piece);
    return most;
  }
  /// Elements of member q's slice in step j.
  size_t count(int q, size_t j) const {
    const size_t at = j * piece;
    return at < len[q] ? std::min(piece, len[q] - at) : 0;
  }
  /// Member q's slice is chunk q of partition(count, n), at the same place in `in` and `out`.
  void by_slices(size_t count, int n) {
    const auto offsets = partition(count, n);
    for (int q = 0; q < n; ++q) {
      in_off.push_back(offsets[q]);
      len.push_back(offsets[q + 1] - offsets[q]);
    }
    out_off = in_off;
  }
  /// Where member q's piece lies in a slot, in bytes.
  size_t slot_at(int q) const { return source >= 0 ? 0 : q * piece * ts(); }
};

template <typename Src>
std::byte* NodeGroup::reduce_block(const Src& src, std::byte* last, size_t c, DataType type,
                                   ReduceOp op, int divisor) {
  // Rank order 0..n-1, each step op(left, next): the first two in one pass (reduce_of), the
  // rest into the accumulator in L1; the last into `last` when given (it overlaps no source,
  // or is exactly this member's own, which is read before or by that last pass), else the
  // accumulator.
  std::byte* acc = scratch_.data();
  std::byte* to = last != nullptr && size() == 2 ? last : acc;
  if (size() == 1) {
    if (to != src(0)) std::memcpy(to, src(0), c * type_size(type));
  } else {
    reduce_of(to, src(0), src(1), c, type, op);
  }
  for (int q = 2; q < size(); ++q) {
    if (q + 1 == size() && last != nullptr) {
      reduce_of(last, acc, src(q), c, type, op);
      to = last;
    } else {
      reduce_into(acc, src(q), c, type, op);
    }
  }
  if (divisor > 1) divide(to, c, type, divisor);
  if (last != nullptr && to != last) std::memcpy(last, to, c * type_size(type));
  return to;
}

}  // namespace ddl::comm
