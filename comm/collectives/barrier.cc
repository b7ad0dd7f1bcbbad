// Dissemination barrier.
//
// How it works. In round k (distance d = 1, 2, 4, ... < n) member r sends one byte to
// r + d and waits for one byte from r - d (mod n), both in one exchange(). After round k a
// member has heard, directly or through the members it heard from, from the 2^(k+1) members
// before it; after ceil(log2 n) rounds from all of them, so no member leaves before the last
// one has entered. Messages are a single byte and carry nothing: a link is an ordered
// stream, so each round's byte cannot be confused with another round's or another
// collective's.

#include "comm/collectives/collectives.h"

namespace ddl::comm {

void barrier(const Group& g) {
  const int n = g.size();
  const int r = g.rank();
  for (int d = 1; d < n; d *= 2) {
    const std::byte out{1};
    std::byte in{0};
    transport::exchange(&g.link((r + d) % n), {&out, 1}, &g.link((r - d + n) % n), {&in, 1},
                        g.timeout());
  }
}

}  // namespace ddl::comm
