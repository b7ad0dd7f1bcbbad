// The node group's allreduce for large messages, reading the peers' buffers where they lie.
//
// How it works. Cross-memory attach (process_vm_readv) lets a process read another's memory
// in one copy, with the kernel's permission (same user, and ptrace allowed between them). When
// every member may read every other (probe_cma(): at construction each reads a word of every
// other's memory and publishes the verdict; the path is used only if all succeeded), an
// allreduce of at least cma_bytes takes one step with three waits instead of a sweep of
// steps through the slots:
//
//   1. each member publishes its send and recv addresses in its control line and `posted`;
//      after every member's `posted` the signatures are compared (as in node.cc);
//   2. member r reduces its slice (partition(count, n)) block by block: the block of every
//      member's input in rank order 0..n-1 (its own read in place, the others' read into a
//      buffer that stays in L2), reduce_into, kAvg divided once, written to its recv; then
//      `reduced`, and it waits for every member's: no one's input is needed any more;
//   3. it reads every other member's finished slice from that member's recv straight into its
//      own recv, publishes `done` and waits for every member's, so that no recv buffer is
//      handed back to its caller (and overwritten) while another member still reads it.
//
// Traffic per member for S bytes: S read for the reduction (the peers' (n-1)/n S through the
// kernel), S/n written, (n-1)/n S read and written for the gather: S (3 - 1/n), against
// S (5 - 3/n) through the slots; the reduction order is the slots' (rank order), so results
// are the same bits either way. A peer that exits mid-read is reported by name (ESRCH).
//
// Measured on this project's 2-core VM (bench/allreduce_compare.sh's local setting, 1 to 64
// MiB, 2 and 4 ranks), this path was 15-30% slower than the slots': the kernel pins the
// pages of every read and walks the guest's page tables, which costs more than the copies it
// saves. So it is off by default (cma_bytes 0; DDL_SHM_CMA_BYTES turns it on) for machines
// where it measures faster.

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "comm/collectives/node.h"
#include "comm/collectives/node_segment.h"
#include "comm/transport/link.h"

namespace ddl::comm {

namespace {
constexpr size_t kCmaBlockBytes = 256 * 1024;  // the reduction's blocks (acc and tmp), in L2
}

void NodeGroup::probe_cma() {
  if (segment_->cma_bytes == 0) return;  // off for every member (member 0's option)
  bool ok = true;
  for (int m = 0; ok && m < size(); ++m) {
    if (m == self_) continue;
    uint64_t word = 0;
    iovec local{&word, sizeof word};
    iovec remote{reinterpret_cast<void*>(node::control(segment_, m).probe_addr), sizeof word};
    ok = members_[m].pid == getpid() || (process_vm_readv(members_[m].pid, &local, 1, &remote, 1,
                                                          0) == static_cast<ssize_t>(sizeof word) &&
                                         word == node::kReady);
  }
  // Everyone's verdict, so that all take the same path.
  cma_ = agree(&node::Control::cma, ok);
  if (cma_) cma_tmp_.resize(2 * kCmaBlockBytes);
}

void NodeGroup::cma_read(int m, void* dst, uint64_t addr, size_t bytes) {
  if (members_[m].pid == getpid()) {  // a thread of this process (tests)
    std::memcpy(dst, reinterpret_cast<const void*>(addr), bytes);
    return;
  }
  auto* out = static_cast<std::byte*>(dst);
  for (size_t done = 0; done < bytes;) {
    iovec local{out + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(addr + done), bytes - done};
    const ssize_t got = process_vm_readv(members_[m].pid, &local, 1, &remote, 1, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == ESRCH) {
      throw transport::TransportError(members_[m].name + ": the process has exited");
    }
    throw transport::TransportError(members_[m].name + ": reading its buffer (process_vm_readv): " +
                                    (got < 0 ? std::strerror(errno) : "nothing read"));
  }
}

void NodeGroup::cma_allreduce(const void* send, void* recv, size_t count, DataType type,
                              ReduceOp op, const Signature* sig) {
  const size_t ts = type_size(type);
  const ReduceOp fold = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  // 1. The buffers, then everyone's.
  begin_step(sig);
  node::Control& mine = node::control(segment_, self_);
  mine.send_addr = reinterpret_cast<uintptr_t>(send);
  mine.recv_addr = reinterpret_cast<uintptr_t>(recv);
  publish(kPosted, step_);
  await_all(kPosted, sig);
  // 2. This member's slice, from every member in rank order, a block at a time: member 0's
  // block into acc, every later member's folded in (from its memory through tmp, or this
  // member's own in place); then acc to recv (which may be send: in place).
  const auto offsets = partition(count, size());
  const size_t block = std::max<size_t>(1, kCmaBlockBytes / ts);
  std::byte* acc = cma_tmp_.data();
  std::byte* tmp = cma_tmp_.data() + kCmaBlockBytes;
  for (size_t b = offsets[self_]; b < offsets[self_ + 1]; b += block) {
    const size_t c = std::min(block, offsets[self_ + 1] - b);
    for (int q = 0; q < size(); ++q) {
      std::byte* into = q == 0 ? acc : tmp;
      const std::byte* src = in + b * ts;
      if (q != self_) {
        cma_read(q, into, node::control(segment_, q).send_addr + b * ts, c * ts);
        src = into;
      } else if (q == 0) {
        std::memcpy(acc, src, c * ts);
      }
      if (q > 0) reduce_into(acc, src, c, type, fold);
    }
    if (op == ReduceOp::kAvg) divide(acc, c, type, size());
    std::memcpy(out + b * ts, acc, c * ts);
  }
  publish(kReduced, step_);
  await_all(kReduced, nullptr);
  // 3. The others' slices, straight from their recv into this one.
  for (int q = 0; q < size(); ++q) {
    if (q == self_ || offsets[q + 1] == offsets[q]) continue;
    cma_read(q, out + offsets[q] * ts, node::control(segment_, q).recv_addr + offsets[q] * ts,
             (offsets[q + 1] - offsets[q]) * ts);
  }
  publish(kDone, step_);
  await_all(kDone, nullptr);
}

}  // namespace ddl::comm
