// Recursive-doubling allreduce, for small messages.
//
// How it works. With p = 2^k members, step j (mask = 1, 2, 4, ...) pairs member i with
// i ^ mask; the two exchange their whole buffers and both combine them, so after k steps
// everyone holds the full reduction: log2(p) latencies instead of the ring's 2 (n - 1).
//
// The result must have the same bits on every member, so both partners evaluate the same
// expression: op(lower, higher), the lower-indexed partner's data on the left. The lower one
// folds the received buffer into its own; the higher one folds its own into the received
// copy and keeps that. (Sum and product are commutative in IEEE arithmetic, but min/max of
// +0/-0 or of two NaNs are not, so the order is fixed for every op.)
//
// When n is not a power of two, let p be the largest power of two below n and e = n - p.
// First the 2e lowest members pair up: member 2i sends its buffer to 2i + 1, which computes
// op(x[2i], x[2i+1]) and takes part in the doubling as virtual member i; members from 2e on
// take part as virtual members i - e. Virtual order follows real order, so "lower virtual
// member" still means a fixed left operand. At the end each 2i + 1 sends the result back to
// 2i. Every element is reduced along one fixed tree, so all members agree bitwise. kAvg sums,
// then every member divides by n (the same operation on the same bits).
//
// One scratch buffer of the message's size is allocated per call.

#include <cstring>
#include <vector>

#include "comm/collectives/collectives.h"

namespace ddl::comm {

void recursive_doubling_allreduce(const Group& g, void* buf, size_t count, DataType type,
                                  ReduceOp op) {
  const int n = g.size();
  if (n == 1 || count == 0) return;
  const size_t bytes = count * type_size(type);
  auto* data = static_cast<std::byte*>(buf);
  std::vector<std::byte> scratch(bytes);
  const std::span<std::byte> in(scratch);
  const std::span<const std::byte> out(data, bytes);
  const auto timeout = g.timeout();

  int p = 1;
  while (p * 2 <= n)
    p *= 2;
  const int extra = n - p;
  const int r = g.rank();

  // Fold: member 2i hands its data to 2i + 1 and waits for the result.
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      transport::exchange(&g.link(r + 1), out, nullptr, {}, timeout);
      transport::exchange(nullptr, {}, &g.link(r + 1), {data, bytes}, timeout);
      if (op == ReduceOp::kAvg) divide(buf, count, type, n);
      return;
    }
    transport::exchange(nullptr, {}, &g.link(r - 1), in, timeout);
    reduce_into(scratch.data(), data, count, type, op);  // op(x[2i], x[2i+1])
    std::memcpy(data, scratch.data(), bytes);
  }

  const int virt = r < 2 * extra ? r / 2 : r - extra;
  auto real = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (int mask = 1; mask < p; mask *= 2) {
    const int partner = real(virt ^ mask);
    transport::Link& link = g.link(partner);
    transport::exchange(&link, out, &link, in, timeout);
    if (partner > r) {
      reduce_into(data, scratch.data(), count, type, op);
    } else {
      reduce_into(scratch.data(), data, count, type, op);
      std::memcpy(data, scratch.data(), bytes);
    }
  }

  if (r < 2 * extra) transport::exchange(&g.link(r - 1), out, nullptr, {}, timeout);
  if (op == ReduceOp::kAvg) divide(buf, count, type, n);
}

}  // namespace ddl::comm
