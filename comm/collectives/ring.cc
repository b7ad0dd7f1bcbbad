// Ring allreduce, reduce-scatter and allgather.
//
// How it works. The n members of the group stand in ring order; member r sends only to
// r + 1 and receives only from r - 1 (mod n). The buffer is cut into n chunks by partition().
//
// Reduce-scatter takes n - 1 steps. In step s member r sends chunk (r - s - 1) mod n to its
// next and receives chunk (r - s - 2) mod n from its previous member, folding it into its own
// copy: reduce_into(own, received), i.e. own = op(own, received). The chunk it sends in step
// s + 1 is the one it has just folded, so chunk k starts as member k + 1's data, travels once
// around the ring gathering every member's contribution in ring order, and ends, complete,
// on member k after n - 1 hops. Each element is therefore reduced exactly once, in one fixed
// order (k+1, then k+2 on the left of it, ..., then k on the left of all): the bits of the
// result do not depend on timing. For kAvg the owner then divides its chunk by n.
//
// Allgather takes n - 1 more steps: in step s member r sends chunk (r - s) mod n (which it
// owns or has just received) and receives chunk (r - s - 1) mod n straight into its place.
// Chunks are copied, never recombined, so every member ends with the owners' bits.
//
// Every step is one transport::exchange(): the send to the next member and the receive from
// the previous one progress together, so the ring never deadlocks however small the kernel's
// buffers are. Reduce-scatter steps are cut into slices of kSliceBytes: a slice is received
// into a scratch buffer and folded in while the previous member is already pushing the next
// slice into the link, and the next member is folding the slice this one has just sent, so
// transfers and reductions overlap around the ring. The scratch buffer (one slice) belongs to
// the calling thread and is reused by every call. Traffic per member: 2 (n - 1) / n of the
// buffer sent and as much received, the bandwidth optimum.
//
// ring_allreduce is reduce-scatter followed by allgather; multi_dim_allreduce with one
// dimension does exactly the same.

#include <algorithm>
#include <vector>

#include "comm/collectives/collectives.h"

namespace ddl::comm {
namespace {

constexpr size_t kSliceBytes = 256 * 1024;

// One slice of scratch per thread, grown on first use and kept.
std::byte* scratch(size_t bytes) {
  thread_local std::vector<std::byte> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

int wrap(int i, int n) {
  return ((i % n) + n) % n;
}

/// What both phases start from: this member's place in the ring, the chunks of the buffer and
/// the links to the next and the previous member. Only for groups of two or more.
struct RingPlace {
  RingPlace(const Group& g, void* buf, size_t count, DataType type)
      : n(g.size()),
        r(g.rank()),
        size(type_size(type)),
        offsets(partition(count, n)),
        base(static_cast<std::byte*>(buf)),
        next(g.link(wrap(r + 1, n))),
        prev(g.link(wrap(r - 1, n))) {}

  const int n;
  const int r;
  const size_t size;
  const std::vector<size_t> offsets;
  std::byte* const base;
  transport::Link& next;
  transport::Link& prev;
};

}  // namespace

void ring_reduce_scatter(const Group& g, void* buf, size_t count, DataType type, ReduceOp op) {
  if (g.size() == 1) return;  // one member: its data is the reduction (and kAvg divides by 1)
  const RingPlace place(g, buf, count, type);
  const auto& [n, r, size, offsets, base, next, prev] = place;
  const size_t slice = std::max<size_t>(1, kSliceBytes / size);
  std::byte* tmp = scratch(std::min(slice, offsets[1]) * size);  // chunk 0 is the largest

  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = wrap(r - s - 1, n);
    const int recv_chunk = wrap(r - s - 2, n);
    const size_t send_at = offsets[send_chunk];
    const size_t send_len = offsets[send_chunk + 1] - send_at;
    const size_t recv_at = offsets[recv_chunk];
    const size_t recv_len = offsets[recv_chunk + 1] - recv_at;
    for (size_t done = 0; done < std::max(send_len, recv_len); done += slice) {
      const size_t sn = done < send_len ? std::min(slice, send_len - done) : 0;
      const size_t rn = done < recv_len ? std::min(slice, recv_len - done) : 0;
      transport::exchange(sn ? &next : nullptr, {base + (send_at + done) * size, sn * size},
                          rn ? &prev : nullptr, {tmp, rn * size}, g.timeout());
      reduce_into(base + (recv_at + done) * size, tmp, rn, type, op);
    }
  }
  if (op == ReduceOp::kAvg) {
    divide(base + offsets[r] * size, offsets[r + 1] - offsets[r], type, n);
  }
}

void ring_allgather(const Group& g, void* buf, size_t count, DataType type) {
  if (g.size() == 1) return;
  const RingPlace place(g, buf, count, type);
  const auto& [n, r, size, offsets, base, next, prev] = place;

  for (int s = 0; s < n - 1; ++s) {
    const int send_chunk = wrap(r - s, n);
    const int recv_chunk = wrap(r - s - 1, n);
    const size_t send_len = offsets[send_chunk + 1] - offsets[send_chunk];
    const size_t recv_len = offsets[recv_chunk + 1] - offsets[recv_chunk];
    if (send_len == 0 && recv_len == 0) continue;
    transport::exchange(send_len ? &next : nullptr,
                        {base + offsets[send_chunk] * size, send_len * size},
                        recv_len ? &prev : nullptr,
                        {base + offsets[recv_chunk] * size, recv_len * size}, g.timeout());
  }
}

void ring_allreduce(const Group& g, void* buf, size_t count, DataType type, ReduceOp op) {
  ring_reduce_scatter(g, buf, count, type, op);
  ring_allgather(g, buf, count, type);
}

}  // namespace ddl::comm
