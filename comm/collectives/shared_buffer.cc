// Shared buffers (ddl_alloc) and the peers' mappings of them.
//
// How it works. shared_alloc() makes a memfd (anonymous shared memory: nothing in /dev/shm,
// gone with the last fd and mapping, so a crash leaves nothing behind), sizes it to a header
// page plus the data, reserves its pages (a full tmpfs is an error here, not a SIGBUS later),
// maps it, writes the header (magic, the allocation's number, the size) and returns the data
// after the header. A process-wide registry (ordered by address, under a mutex) lets a
// collective find the buffer a pointer lies in: SharedPin looks the range up and counts a use,
// which shared_free() refuses to free under. A peer process opens the owner's memfd as
// /proc/<pid>/fd/<fd> (allowed between processes of one user: the ptrace "read" check, which
// Yama does not restrict), maps all of it, and checks the header's number against the one the
// owner published, so that an fd number reused by a later allocation is never mistaken for
// the buffer. PeerMaps keeps the last kKeep mappings for the next calls: an allreduce loop
// over the same buffers maps each once.

#include "comm/collectives/shared_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include "comm/transport/os.h"

namespace ddl::comm {

namespace {

constexpr size_t kKeep = 32;  // peers' mappings kept between calls

struct SharedHead {
  uint64_t magic;
  uint64_t id;
  uint64_t bytes;
};

struct Entry {
  int fd;
  uint64_t id;
  size_t bytes;  ///< usable data bytes
  int pins;
};

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Entry> by_data;  ///< by the data's address
  uint64_t next_id = 1;
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: buffers may outlive static destructors
  return *r;
}

std::string size_text(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu bytes (%.1f MiB)", bytes,
                static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

/// The entry whose data holds [p, p + bytes), or nullptr (mutex held).
Entry* find(Registry& r, const void* p, size_t bytes, uintptr_t* data) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = r.by_data.upper_bound(at);
  if (it == r.by_data.begin()) return nullptr;
  --it;
  if (at - it->first > it->second.bytes || bytes > it->second.bytes - (at - it->first)) {
    return nullptr;
  }
  *data = it->first;
  return &it->second;
}

/// A memfd of `file_bytes` with its pages reserved, mapped; throws saying what failed.
std::byte* make_memfd(const char* name, size_t file_bytes, int* fd_out) {
  const int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error(std::string("ddl_alloc: memfd_create: ") + std::strerror(errno));
  }
  int err = 0;
  void* p = transport::map_reserved(fd, file_bytes, &err);
  if (p == nullptr) {
    close(fd);
    throw std::invalid_argument("ddl_alloc: reserving " + size_text(file_bytes) +
                                " of shared memory: " + std::strerror(err) +
                                " (free memory, or allocate less)");
  }
  *fd_out = fd;
  return static_cast<std::byte*>(p);
}

}  // namespace

void* shared_alloc(size_t bytes) {
  if (bytes == 0) throw std::invalid_argument("ddl_alloc: 0 bytes (ask for at least 1)");
  const size_t memory =
      static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (bytes > memory) {
    throw std::invalid_argument("ddl_alloc: " + size_text(bytes) + " is more than this host's " +
                                "memory, " + size_text(memory));
  }
  const size_t file_bytes = kSharedHeader + (bytes + 4095) / 4096 * 4096;
  int fd = -1;
  std::byte* base = make_memfd("ddl-buffer", file_bytes, &fd);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const uint64_t id = r.next_id++;
  *reinterpret_cast<SharedHead*>(base) = {kSharedMagic, id, file_bytes};
  std::byte* data = base + kSharedHeader;
  r.by_data[reinterpret_cast<uintptr_t>(data)] = {fd, id, bytes, 0};
  return data;
}

void shared_free(void* p) {
  if (p == nullptr) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_data.find(reinterpret_cast<uintptr_t>(p));
  if (it == r.by_data.end()) {
    throw std::invalid_argument("ddl_free: " + pointer_text(p) +
                                " is not a buffer from ddl_alloc (or it was freed already)");
  }
  if (it->second.pins > 0) {
    throw std::invalid_argument("ddl_free: " + pointer_text(p) +
                                " is in use by a collective running now (free it after the "
                                "call returns)");
  }
  const size_t bytes = it->second.bytes;
  munmap(static_cast<std::byte*>(p) - kSharedHeader, kSharedHeader + (bytes + 4095) / 4096 * 4096);
  close(it->second.fd);
  r.by_data.erase(it);
}

SharedPin::SharedPin(const void* p, size_t bytes) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.by_data.empty()) return;
  uintptr_t data = 0;
  Entry* e = find(r, p, bytes, &data);
  if (e == nullptr) return;
  ++e->pins;
  ok_ = true;
  ref_.pid = static_cast<int32_t>(getpid());
  ref_.fd = e->fd;
  ref_.id = e->id;
  ref_.file_bytes = kSharedHeader + (e->bytes + 4095) / 4096 * 4096;
  ref_.offset = reinterpret_cast<uintptr_t>(p) - data;
  ref_.addr = reinterpret_cast<uintptr_t>(p);
}

SharedPin::~SharedPin() {
  if (!ok_) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  uintptr_t data = 0;
  if (Entry* e = find(r, reinterpret_cast<const void*>(ref_.addr), 0, &data)) --e->pins;
}

namespace {

/// Maps /proc/<pid>/fd/<fd> whole when it holds `file_bytes` with header `id`; nullptr and
/// the reason in `why` otherwise.
std::byte* map_peer(int pid, int fd, uint64_t id, size_t file_bytes, std::string* why) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int mine = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0) {
    *why = "opening " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  void* p = MAP_FAILED;
  if (fstat(mine, &st) == 0 && static_cast<size_t>(st.st_size) == file_bytes) {
    p = mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, mine, 0);
    if (p == MAP_FAILED) *why = "mapping " + path + ": " + std::strerror(errno);
  } else {
    *why = path + " is not the buffer (freed while in use?)";
  }
  close(mine);
  if (p == MAP_FAILED) return nullptr;
  const auto* head = static_cast<const SharedHead*>(p);
  if (head->magic != kSharedMagic || head->id != id) {
    munmap(p, file_bytes);
    *why = path + " is not the buffer (freed while in use?)";
    return nullptr;
  }
  return static_cast<std::byte*>(p);
}

}  // namespace

PeerMaps::~PeerMaps() {
  for (const Map& m : maps_)
    munmap(m.base, m.bytes);
}

std::byte* PeerMaps::data(const SharedRef& ref, const std::string& who) {
  if (ref.pid == getpid()) return reinterpret_cast<std::byte*>(ref.addr);
  for (const Map& m : maps_)
    if (m.pid == ref.pid && m.id == ref.id) return m.base + kSharedHeader + ref.offset;
  std::string why;
  std::byte* base = map_peer(ref.pid, ref.fd, ref.id, ref.file_bytes, &why);
  if (base == nullptr) throw std::runtime_error(who + ": its ddl_alloc buffer: " + why);
  if (maps_.size() == kKeep) {
    munmap(maps_.front().base, maps_.front().bytes);
    maps_.erase(maps_.begin());
  }
  maps_.push_back({ref.pid, ref.id, base, ref.file_bytes});
  return base + kSharedHeader + ref.offset;
}

bool can_map_peer(int pid, int fd, uint64_t id) {
  if (pid == getpid()) return true;
  std::string why;
  std::byte* p = map_peer(pid, fd, id, kSharedHeader, &why);
  if (p == nullptr) return false;
  munmap(p, kSharedHeader);
  return true;
}

int make_probe_fd() {
  int fd = -1;
  try {
    std::byte* base = make_memfd("ddl-probe", kSharedHeader, &fd);
    *reinterpret_cast<SharedHead*>(base) = {kSharedMagic, 0, kSharedHeader};
    munmap(base, kSharedHeader);
  } catch (const std::exception&) {
    return -1;
  }
  return fd;
}

}  // namespace ddl::comm
