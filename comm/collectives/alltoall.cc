// Alltoall by pairwise exchange.
//
// How it works: in step s (1..n-1) member i sends its block for member (i+s) mod n and
// receives the block of member (i-s) mod n, both at once (exchange()), so every pair meets in
// exactly one step and no member waits on another in a cycle: n-1 steps of one block each
// way, the least data any algorithm moves. Blocks of any size, empty ones included (an empty
// side passes no link, so a pair that exchanges nothing is never connected).

#include <cstring>

#include "comm/collectives/collectives.h"

namespace ddl::comm {

void pairwise_alltoall(const Group& g, std::span<const std::span<const std::byte>> send,
                       std::span<const std::span<std::byte>> recv) {
  const int n = g.size(), me = g.rank();
  if (!send[me].empty()) std::memmove(recv[me].data(), send[me].data(), send[me].size());
  for (int s = 1; s < n; ++s) {
    const int to = (me + s) % n, from = (me - s + n) % n;
    transport::Link* out = send[to].empty() ? nullptr : &g.link(to);
    transport::Link* in = recv[from].empty() ? nullptr : &g.link(from);
    transport::exchange(out, send[to], in, recv[from], g.timeout());
  }
}

}  // namespace ddl::comm
