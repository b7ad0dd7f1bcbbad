#pragma once
// The shared segment of a node group (node.h): its layout, and making or mapping it.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/collectives/shared_buffer.h"
#include "comm/collectives/signature.h"

namespace ddl::comm::node {

/// What a member posts for one step, in one cache line: the counter its peers wait on, the
/// call's signature and, for an allreduce of at most kInlineBytes, the input itself, so that a
/// peer's wait, check and read of a tiny allreduce cost one line between the cores.
struct alignas(64) Post {
  std::atomic<uint64_t> posted{0};  ///< the last step of this parity whose input is posted
  Signature sig;                    ///< the call being made at that step
  std::byte data[16];               ///< a tiny allreduce's input (node.cc, small_allreduce)
};
static_assert(sizeof(Post) == 64, "a step's post is one cache line");
constexpr size_t kInlineBytes = sizeof(Post::data);

/// One member's control lines: what it has finished, written by it alone and read by the
/// others. Step counters only grow; a member's slots (and post[s % 2]) are free again for step
/// s once every member's `done` has reached s - 2.
struct alignas(128) Control {
  Post post[2];                       ///< step s posts in post[s % 2]
  std::atomic<uint64_t> reduced{0};   ///< its reduced piece of this step is in its slot
  std::atomic<uint64_t> done{0};      ///< it has read everything it needed of this step
  std::atomic<uint32_t> wake{0};      ///< bumped by a publish that finds sleepers: their futex word
  std::atomic<uint32_t> sleepers{0};  ///< members asleep on `wake` (the publisher wakes them)
  std::atomic<uint32_t> closed{0};    ///< it has left the group
  std::atomic<int32_t> pid{0};        ///< set when it has mapped the segment (0: not yet)
  std::atomic<uint32_t> cma{0};       ///< 1: it can read every member's memory (CMA), 2: not
  /// The step (low 32 bits) whose allreduce buffer is a shared one, described by `shared`
  /// (node_shared.cc); any other value: this call's is not.
  std::atomic<uint32_t> share{0};
  uint64_t probe_addr = 0;  ///< a word in its memory, for the others' CMA probe
  uint64_t send_addr = 0;   ///< the CMA path's buffers of this call (node_cma.cc)
  uint64_t recv_addr = 0;
  SharedRef shared;                   ///< this call's shared buffer, when `share` says so
  int32_t probe_fd = -1;              ///< a memfd of its, for the others' probe (node_shared.cc)
  std::atomic<uint32_t> share_ok{0};  ///< 1: it can map every member's shared buffers, 2: not
};

/// The head of the segment; `members` Controls follow at kControlOffset, then the slots at
/// data_offset(members): member m's slot k (0, 1) at (2 m + k) x slot_bytes.
struct Segment {
  std::atomic<uint64_t> magic{0};  ///< kReady once everything else is set
  uint32_t members = 0;
  uint32_t small_bytes = 0;  ///< allreduces up to this size take one step (node.cc)
  uint64_t cma_bytes = 0;    ///< allreduces from this size read peers' memory (0: never)
  uint64_t slot_bytes = 0;
  std::atomic<uint32_t> attached{0};  ///< members that have mapped it (the maker included)
};

constexpr uint64_t kReady = 0x44444c4e4f444533;  // "DDLNODE3"
constexpr size_t kControlOffset = 128;
static_assert(sizeof(Segment) <= kControlOffset);

constexpr size_t data_offset(size_t members) {
  return (kControlOffset + members * sizeof(Control) + 4095) / 4096 * 4096;
}
constexpr size_t segment_bytes(size_t members, size_t slot_bytes) {
  return data_offset(members) + 2 * members * slot_bytes;
}
inline Control& control(Segment* s, int member) {
  return reinterpret_cast<Control*>(reinterpret_cast<std::byte*>(s) + kControlOffset)[member];
}
inline std::byte* slot(Segment* s, int member, uint64_t step) {
  return reinterpret_cast<std::byte*>(s) + data_offset(s->members) +
         (2 * static_cast<size_t>(member) + step % 2) * s->slot_bytes;
}

/// Makes the segment `name` (/dev/shm, mode 0600, its pages reserved so that a full /dev/shm
/// is an error here rather than a SIGBUS later) and maps it. Throws transport::TransportError
/// saying what failed and how big the segment was.
Segment* create_segment(const std::string& name, uint32_t members, size_t slot_bytes,
                        uint32_t small_bytes, uint64_t cma_bytes);
/// Maps `name` once its maker has finished it, retrying until `timeout`. `maker` names member
/// 0 in the error.
Segment* attach_segment(const std::string& name, const std::string& maker,
                        std::chrono::milliseconds timeout);

}  // namespace ddl::comm::node
