// A shared-memory link: two single-producer single-consumer byte rings in one segment.
//
// How it works: send_some() reads the consumer's `tail` (acquire), copies as many bytes as fit
// into the free part of its ring (two memcpy()s when they wrap) and publishes them by storing
// `head` (release); recv_some() mirrors it (both are move(), one direction each). Each ring has one
// writer and one reader, so no lock is needed. The link cannot be polled: when a call moves
// nothing, exchange() spins and naps, and the link checks every kCheckEvery whether the peer has
// closed its link or whether its process has exited (a pidfd when the peer is another process, else
// kill(pid, 0)); bytes already in the ring are still delivered first. The lower rank unlinks the
// segment's name when it closes a link its peer never attached to.

#include "comm/transport/shm/link.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "comm/transport/os.h"

namespace ddl::comm::transport::shm {

namespace {

using transport::open_pidfd;

constexpr auto kCheckEvery = std::chrono::milliseconds(50);

}  // namespace

ShmLink::ShmLink(Segment* segment, int side, int peer, std::string peer_name, int peer_pid,
                 std::string name)
    : PeerLink(peer, std::move(peer_name)),
      segment_(segment),
      side_(side),
      peer_pid_(peer_pid),
      name_(std::move(name)),
      mask_(segment->capacity - 1) {
  auto* data = reinterpret_cast<std::byte*>(segment) + kDataOffset;
  out_ = data + side * segment->capacity;
  in_ = data + (1 - side) * segment->capacity;
  if (peer_pid_ != getpid()) pidfd_ = open_pidfd(peer_pid_);
}

ShmLink::~ShmLink() {
  segment_->closed[side_].store(1, std::memory_order_release);
  if (side_ == 0 && segment_->attached.load(std::memory_order_acquire) == 0) {
    shm_unlink(name_.c_str());
  }
  munmap(segment_, segment_size(segment_->capacity));
  if (pidfd_ >= 0) close(pidfd_);
}

void ShmLink::check_peer(bool receiving) {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_[receiving]) return;
  next_check_[receiving] = now + kCheckEvery;
  if (segment_->closed[1 - side_].load(std::memory_order_acquire) != 0) {
    // Bytes it wrote before closing are still for us.
    const RingControl& r = segment_->rings[1 - side_];
    if (!receiving ||
        r.head.load(std::memory_order_acquire) == r.tail.load(std::memory_order_relaxed)) {
      throw TransportError(peer_name_ + ": the peer closed the link");
    }
    return;
  }
  if (peer_exited()) throw TransportError(peer_name_ + ": the process has exited");
}

bool ShmLink::peer_exited() const {
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  return peer_pid_ != getpid() && kill(peer_pid_, 0) != 0 && errno == ESRCH;
}

bool ShmLink::delivered() {
  const RingControl& r = segment_->rings[side_];
  return r.head.load(std::memory_order_relaxed) == r.tail.load(std::memory_order_acquire) ||
         segment_->closed[1 - side_].load(std::memory_order_acquire) != 0 || peer_exited();
}

template <typename Copy>
size_t ShmLink::move(bool sending, size_t n, Copy copy) {
  RingControl& r = segment_->rings[sending ? side_ : 1 - side_];
  std::atomic<uint64_t>& mine = sending ? r.head : r.tail;  // the count this side advances
  const uint64_t at = mine.load(std::memory_order_relaxed);
  const uint64_t theirs = (sending ? r.tail : r.head).load(std::memory_order_acquire);
  const size_t ready = sending ? segment_->capacity - static_cast<size_t>(at - theirs)
                               : static_cast<size_t>(theirs - at);
  if (ready == 0) {
    check_peer(!sending);
    return 0;
  }
  const size_t k = std::min(n, ready);
  const size_t offset = static_cast<size_t>(at & mask_);
  const size_t first = std::min(k, segment_->capacity - offset);
  copy(offset, 0, first);
  copy(0, first, k - first);
  mine.store(at + k, std::memory_order_release);
  return k;
}

size_t ShmLink::send_some(const void* data, size_t n) {
  if (n == 0) return 0;
  if (segment_->closed[1 - side_].load(std::memory_order_acquire) != 0) {
    throw TransportError(peer_name_ + ": the peer closed the link");
  }
  const auto* from = static_cast<const std::byte*>(data);
  return move(true, n, [this, from](size_t ring_at, size_t data_at, size_t len) {
    std::memcpy(out_ + ring_at, from + data_at, len);
  });
}

size_t ShmLink::recv_some(void* data, size_t n) {
  if (n == 0) return 0;
  auto* to = static_cast<std::byte*>(data);
  return move(false, n, [this, to](size_t ring_at, size_t data_at, size_t len) {
    std::memcpy(to + data_at, in_ + ring_at, len);
  });
}

}  // namespace ddl::comm::transport::shm
