// Making and mapping a node group's segment (layout in node_segment.h).
//
// How it works: member 0 creates "/ddl-<job>-node-<its pid>-<its rank>" with O_EXCL (a name
// left by a crashed process with the same pid is replaced), sizes it, reserves its pages with
// posix_fallocate, fills in the head and stores the magic last (release). The others retry
// shm_open() until the name exists and its magic is set, with naps that grow to 10 ms, up to
// the timeout. The member whose attach completes the count unlinks the name (node.cc), so
// once everyone holds the mapping nothing is left in /dev/shm whatever happens next.

#include "comm/collectives/node_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "comm/transport/link.h"
#include "comm/transport/os.h"

namespace ddl::comm::node {

namespace {

using transport::seconds_text;

using transport::TransportError;

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

/// Whether the mapped segment is finished: its magic stored, its size its head's.
bool ready(const void* p, size_t bytes) {
  const auto* s = static_cast<const Segment*>(p);
  return s->magic.load(std::memory_order_acquire) == kReady &&
         segment_bytes(s->members, s->slot_bytes) == bytes;
}

}  // namespace

Segment* create_segment(const std::string& name, uint32_t members, size_t slot_bytes,
                        uint32_t small_bytes, uint64_t cma_bytes) {
  const int fd = transport::create_segment_file(name);
  if (fd < 0) {
    throw TransportError("shm_open " + name + ": " + std::strerror(errno) +
                         " (is /dev/shm mounted and writable?)");
  }
  const size_t size = segment_bytes(members, slot_bytes);
  int err = 0;
  void* p = transport::map_reserved(fd, size, &err);
  close(fd);
  if (p == nullptr) {
    shm_unlink(name.c_str());
    throw TransportError("making the shared-memory segment " + name + " (" + mib(size) +
                         "): " + std::strerror(err) +
                         "; free space in /dev/shm or lower DDL_SHM_CHUNK_BYTES");
  }
  auto* s = new (p) Segment;
  s->members = members;
  s->slot_bytes = slot_bytes;
  s->small_bytes = small_bytes;
  s->cma_bytes = cma_bytes;
  for (uint32_t m = 0; m < members; ++m)
    new (&control(s, static_cast<int>(m))) Control;
  s->magic.store(kReady, std::memory_order_release);
  return s;
}

Segment* attach_segment(const std::string& name, const std::string& maker,
                        std::chrono::milliseconds timeout) {
  Segment* s = transport::retry_until(timeout, std::chrono::microseconds(100), [&] {
    return static_cast<Segment*>(transport::attach_segment_file(name, "", data_offset(1), ready));
  });
  if (s == nullptr) {
    throw TransportError(maker + ": no shared-memory segment " + name + " within " +
                         seconds_text(timeout) + " (is it running on this host?)");
  }
  return s;
}

}  // namespace ddl::comm::node
