// Pipelined ring broadcast.
//
// How it works. The data flows from the root around the ring, root -> root + 1 -> ... ->
// root - 1, cut into slices of kSliceBytes. In round t the root sends slice t; every other
// member receives slice t from its previous member and, in the same exchange(), forwards
// slice t - 1 (received in the round before) to its next, except the last member (the one
// before the root), which only receives. So once the pipeline is full every link carries a
// slice in every round, and the broadcast takes (slices + n - 2) slice times rather than
// (n - 1) whole-buffer times. The bytes are copied, never changed, so every member ends with
// the root's bits.

#include <algorithm>

#include "comm/collectives/collectives.h"

namespace ddl::comm {
namespace {

constexpr size_t kSliceBytes = 256 * 1024;

}  // namespace

void ring_broadcast(const Group& g, void* buf, size_t bytes, int root) {
  const int n = g.size();
  if (n == 1 || bytes == 0) return;
  auto* data = static_cast<std::byte*>(buf);
  const int r = g.rank();
  const int distance = (r - root + n) % n;  // hops from the root
  transport::Link* next = distance == n - 1 ? nullptr : &g.link((r + 1) % n);
  transport::Link* prev = distance == 0 ? nullptr : &g.link((r - 1 + n) % n);
  const size_t slices = (bytes + kSliceBytes - 1) / kSliceBytes;
  auto slice = [&](size_t t) {
    const size_t at = t * kSliceBytes;
    return std::span<std::byte>(data + at, std::min(kSliceBytes, bytes - at));
  };

  // Round t: receive slice t (not the root), send the slice before it (the root: slice t).
  const size_t rounds = distance == 0 || !next ? slices : slices + 1;
  for (size_t t = 0; t < rounds; ++t) {
    std::span<const std::byte> send;
    std::span<std::byte> recv;
    if (next && distance == 0) send = slice(t);
    if (next && distance != 0 && t >= 1) send = slice(t - 1);
    if (prev && t < slices) recv = slice(t);
    transport::exchange(send.empty() ? nullptr : next, send, recv.empty() ? nullptr : prev, recv,
                        g.timeout());
  }
}

}  // namespace ddl::comm
