#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "comm/transport/link.h"

namespace ddl::comm::transport::shm {

/// One direction of a link: a single-producer single-consumer ring of bytes. `head` counts the
/// bytes ever written (stored by the producer), `tail` the bytes ever read (stored by the
/// consumer); each sits on a cache line of its own.
struct RingControl {
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
};

/// The start of a pair's shared segment; the two rings' bytes follow at kDataOffset.
/// Side 0 is the lower rank (which creates the segment), side 1 the higher.
struct Segment {
  std::atomic<uint64_t> magic{0};  ///< kReady once every other field is set
  uint64_t capacity = 0;           ///< bytes per ring, a power of two
  int32_t ranks[2] = {0, 0};
  int32_t pids[2] = {0, 0};
  std::atomic<uint32_t> attached{0};         ///< side 1 has mapped the segment
  std::atomic<uint32_t> closed[2] = {0, 0};  ///< side i has closed its link
  RingControl rings[2];                      ///< rings[i] carries side i's bytes to the other side
};

constexpr uint64_t kReady = 0x44444c53484d3031;  // "DDLSHM01"
constexpr size_t kDataOffset = 4096;
static_assert(sizeof(Segment) <= kDataOffset);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

/// Bytes of a segment whose rings hold `capacity` bytes each.
constexpr size_t segment_size(size_t capacity) {
  return kDataOffset + 2 * capacity;
}

/// A link over a mapped segment (see link.cc).
class ShmLink : public PeerLink {
 public:
  /// Takes over the mapping of `segment` (`segment_size(capacity)` bytes). `side` is this
  /// rank's; `name` the segment's name while it may still need to be unlinked (side 0).
  ShmLink(Segment* segment, int side, int peer, std::string peer_name, int peer_pid,
          std::string name);
  ~ShmLink() override;

  size_t send_some(const void* data, size_t n) override;
  size_t recv_some(void* data, size_t n) override;
  int poll_fd() const override { return -1; }
  /// Every byte written has been read, or the peer has closed its link or exited.
  bool delivered() override;

 private:
  /// Throws when the peer closed its link or its process has exited (checked every
  /// kCheckEvery while no byte moves; a receive and a send may check at once, on two threads).
  void check_peer(bool receiving);
  /// Whether the peer's process has exited.
  bool peer_exited() const;
  /// Moves up to `n` bytes into this side's ring (`sending`) or out of the peer's, as far as
  /// the ring has room or bytes, with `copy(ring_offset, data_offset, length)` called twice (the
  /// second for the part that wraps to the ring's start), then publishes the new count.
  template <typename Copy>
  size_t move(bool sending, size_t n, Copy copy);

  Segment* segment_;
  int side_;
  int peer_pid_;
  int pidfd_ = -1;  ///< the peer's process, when it is another one and pidfd_open works
  std::string name_;
  uint64_t mask_;
  std::byte* out_;                                         ///< the ring this side writes
  std::byte* in_;                                          ///< the ring this side reads
  std::chrono::steady_clock::time_point next_check_[2]{};  ///< by `receiving`
};

}  // namespace ddl::comm::transport::shm
