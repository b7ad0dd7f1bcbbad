#pragma once
// Buffers in memory that a node group's peers can map (ddl_alloc): an allreduce on them reads
// and writes the peers' buffers directly instead of copying through the slots (see
// shared_buffer.cc for the allocation, node_shared.cc for the collective).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddl::comm {

/// Where a shared buffer's bytes lie, as another process finds them: the owner's memfd (open
/// as /proc/<pid>/fd/<fd>), which starts with a header page, the data at kSharedHeader.
struct SharedRef {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t id = 0;          ///< the allocation's number in its process (never reused)
  uint64_t file_bytes = 0;  ///< the memfd's size: header and data
  uint64_t offset = 0;      ///< of the call's buffer in the data
  uint64_t addr = 0;        ///< the call's buffer in the owner's memory (threads of one process)
};

constexpr size_t kSharedHeader = 4096;
constexpr uint64_t kSharedMagic = 0x44444c5348415231;  // "DDLSHAR1"

/// `bytes` of zeroed shared memory, page aligned. Throws std::invalid_argument for 0 bytes or
/// more than this host's memory, std::runtime_error when the kernel refuses (naming why).
void* shared_alloc(size_t bytes);
/// Frees a shared_alloc() buffer (nullptr: nothing). Throws std::invalid_argument for a
/// pointer shared_alloc() did not return (or already freed) and for a buffer a collective is
/// using now. Peers that mapped it keep their mapping until they drop it; its memory goes once
/// the last mapping does.
void shared_free(void* p);

/// Holds [p, p + bytes) against shared_free while a collective uses it; ok() only when the
/// range lies inside one shared buffer.
class SharedPin {
 public:
  SharedPin(const void* p, size_t bytes);
  ~SharedPin();
  SharedPin(const SharedPin&) = delete;
  SharedPin& operator=(const SharedPin&) = delete;
  bool ok() const { return ok_; }
  const SharedRef& ref() const { return ref_; }

 private:
  bool ok_ = false;
  SharedRef ref_;
};

/// Other processes' shared buffers, mapped on first use and kept (the most recent few) for
/// the next calls.
class PeerMaps {
 public:
  PeerMaps() = default;
  ~PeerMaps();
  PeerMaps(const PeerMaps&) = delete;
  PeerMaps& operator=(const PeerMaps&) = delete;
  /// The call's buffer of `ref` in this process; throws std::runtime_error naming `who` when
  /// it cannot be mapped, or when what the fd holds now is not the buffer `ref` names.
  std::byte* data(const SharedRef& ref, const std::string& who);

 private:
  struct Map {
    int32_t pid;
    uint64_t id;
    std::byte* base;
    size_t bytes;
  };
  std::vector<Map> maps_;  ///< oldest first
};

/// Whether this process can map a memfd of process `pid` open as `fd` whose header carries
/// `id` (the node group's probe at construction).
bool can_map_peer(int pid, int fd, uint64_t id);
/// A one-page memfd with a header (id 0) for the peers' probe; returns its fd (-1: none).
int make_probe_fd();

}  // namespace ddl::comm
