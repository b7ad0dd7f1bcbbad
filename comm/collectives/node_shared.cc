// The node group's allreduce on shared buffers (ddl_alloc): no copy through the slots.
//
// How it works. At construction every member makes a one-page memfd and each tries to map
// every other's through /proc/<pid>/fd (shared_buffer.cc); the verdicts are agreed (agree())
// so that all members know whether shared buffers can be used at all (maps_peers()). Then, in
// step 0 of every in-place allreduce sweep (node.cc), before `posted`, each member stores in
// its control line whether its buffer lies in a ddl_alloc buffer (the step number in `share`,
// the buffer's SharedRef in `shared`). A member whose buffer is shared copies nothing into its
// slot, in any step: after step 0's `posted` every member reads all the members' words (the
// same words everywhere, so the same verdict everywhere) and maps the shared ones (kept for
// the next calls), and then
//
//   - when every member's buffer is shared: the single pass. Member r reduces its slice
//     (partition(count, n)) block by block from every member's buffer in rank order 0..n-1
//     into a block in L1 (the order of the slots' path: the same bits) and writes the block
//     into every member's buffer, starting with r + 1, with streaming stores when the output
//     outgrows the cache (stream_bytes); then `done`, and it returns once every member's
//     `done` says that no one writes into its buffer any more. Member r reads and writes only
//     slice r of every buffer, so the members never touch the same bytes. Per member: S read,
//     S written, two waits in all: the single-pass limit bench/README derives;
//   - otherwise the sweep goes on through the slots, except that the pieces of a shared
//     member are read from its buffer where they lie (a mixed call is as exact as any, and
//     still skips the shared members' copies in). Reading a peer's buffer at step j never
//     meets that peer's writes: it writes its own slice and, at step j, gathers the pieces
//     of step j - 1.
//
// Element order and so the bits are those of the slots' path, whoever shares. A member whose
// buffer cannot be mapped after all (its process has too many files open) throws
// TransportError naming the owner.

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "comm/collectives/node.h"
#include "comm/collectives/node_copy.h"
#include "comm/collectives/node_segment.h"
#include "comm/collectives/node_sweep.h"
#include "comm/transport/link.h"

namespace ddl::comm {

namespace {
constexpr size_t kSharedBlockBytes = 16 * 1024;  // the single pass's block: scratch_, in L1
}

bool NodeGroup::agree(std::atomic<uint32_t> node::Control::*field, bool mine) {
  (node::control(segment_, self_).*field).store(mine ? 1 : 2);
  const auto since = std::chrono::steady_clock::now();
  bool all = true;
  for (int m = 0; m < size(); ++m) {
    uint32_t v;
    while ((v = (node::control(segment_, m).*field).load()) == 0) {
      if (exited(m) || std::chrono::steady_clock::now() - since >= options_.timeout) {
        const std::string who = members_[m].name;
        const bool gone = exited(m);
        release();
        throw transport::TransportError(
            who + ": " + (gone ? "the process has exited" : "did not join within the timeout") +
            " (before it joined this host's shared-memory group)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    all = all && v == 1;
  }
  return all;
}

void NodeGroup::probe_share() {
  node::Control& mine = node::control(segment_, self_);
  bool ok = true;
  for (int m = 0; ok && m < size(); ++m) {
    const node::Control& c = node::control(segment_, m);
    ok = m == self_ || members_[m].pid == getpid() ||
         (c.probe_fd >= 0 && can_map_peer(members_[m].pid, c.probe_fd, 0));
  }
  share_ok_ = agree(&node::Control::share_ok, ok);
  // Everyone has probed: the probe's memfd is no longer needed.
  if (mine.probe_fd >= 0) close(mine.probe_fd);
  mine.probe_fd = -1;
  direct_.assign(size(), nullptr);
}

bool NodeGroup::adopt_shared(const Sweep& s) {
  int shared = 0;
  for (int m = 0; m < size(); ++m) {
    const node::Control& c = node::control(segment_, m);
    direct_[m] = nullptr;
    if (c.share.load(std::memory_order_relaxed) != static_cast<uint32_t>(step_)) continue;
    ++shared;
    if (m == self_) {
      direct_[m] = s.out;
      continue;
    }
    try {
      direct_[m] = peer_maps_.data(c.shared, members_[m].name);
    } catch (const std::runtime_error& e) {
      throw transport::TransportError(e.what());
    }
  }
  direct_any_ = shared > 0;
  if (shared < size()) return false;
  single_pass(s);
  return true;
}

void NodeGroup::single_pass(const Sweep& s) {
  const size_t ts = s.ts();
  const size_t lo = s.in_off[self_] * ts, bytes = s.len[self_] * ts;
  std::byte* acc = scratch_.data();
  for (size_t b = 0; b < bytes; b += kSharedBlockBytes) {
    const size_t c = std::min(kSharedBlockBytes, bytes - b);
    // Into the accumulator: this member's own buffer is one of the sources.
    reduce_block([&](int q) -> const std::byte* { return direct_[q] + lo + b; }, nullptr, c / ts,
                 s.type, s.op, s.divisor);
    for (int k = 1; k <= size(); ++k) {
      const int q = (self_ + k) % size();
      node::copy_out(direct_[q] + lo + b, acc, c, s.stream);
    }
  }
  if (s.stream) node::stream_fence();
  publish(kDone, step_);
  await_all(kDone, nullptr);
  direct_any_ = false;
  ++single_passes_;
}

}  // namespace ddl::comm
