// The shared-memory transport, for ranks on one host.
//
// How it works: address() is the process id. For each pair the lower rank creates a segment
// named "/ddl-<job>-<its pid>-<lower rank>-<higher rank>" under /dev/shm (mode 0600), sized for
// two rings of DeviceOptions::shm_bytes (rounded up to a power of two), fills in the header
// and stores its magic last (release); its connect() returns at once. The higher rank's
// connect() retries shm_open() until the segment exists and its magic is set (or the
// deadline), maps it, marks it attached and unlinks the name at once, so that once both sides
// hold it nothing is left in /dev/shm, whatever happens to either process next. A name left
// over from a crashed process of the same job is replaced. Ranks must share the pid namespace
// (one host, one container). try_connect() creates as connect() does, or looks for the segment
// once (nothing when it is not there yet).

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <new>
#include <optional>

#include "comm/transport/link.h"
#include "comm/transport/os.h"
#include "comm/transport/shm/link.h"

namespace ddl::comm::transport {

namespace {

using shm::Segment;

constexpr size_t kMinCapacity = 4096;

class ShmDevice : public Device {
 public:
  explicit ShmDevice(const DeviceOptions& o)
      : rank_(o.rank),
        job_(safe_job(o.job_id)),
        capacity_(std::bit_ceil(std::max(o.shm_bytes, kMinCapacity))) {}

  std::string address() const override { return std::to_string(getpid()); }

  std::unique_ptr<Link> connect(int peer, const std::string& peer_name,
                                const std::string& peer_address,
                                std::chrono::milliseconds timeout) override {
    return link(peer, peer_name, peer_address, timeout);
  }

  std::unique_ptr<Link> try_connect(int peer, const std::string& peer_name,
                                    const std::string& peer_address,
                                    std::chrono::milliseconds) override {
    return link(peer, peer_name, peer_address, std::nullopt);
  }

 private:
  /// The link to `peer`: the segment made, or attached waiting at most `timeout` (none: not
  /// waiting, nullptr when the segment is not there yet).
  std::unique_ptr<Link> link(int peer, const std::string& peer_name,
                             const std::string& peer_address,
                             std::optional<std::chrono::milliseconds> timeout) {
    if (peer == rank_) throw TransportError(peer_name + ": a rank cannot connect to itself");
    int peer_pid = 0;
    const char* end = peer_address.data() + peer_address.size();
    if (std::from_chars(peer_address.data(), end, peer_pid).ptr != end || peer_pid <= 0) {
      throw TransportError(peer_name + ": '" + peer_address +
                           "' is not a shared-memory address (a process id)");
    }
    const int lo = std::min(rank_, peer);
    const int hi = std::max(rank_, peer);
    const int creator_pid = rank_ < peer ? getpid() : peer_pid;
    const std::string name = "/ddl-" + job_ + "-" + std::to_string(creator_pid) + "-" +
                             std::to_string(lo) + "-" + std::to_string(hi);
    Segment* s = rank_ < peer ? create(name, peer_name, peer_pid)
                 : timeout    ? attach(name, peer_name, *timeout)
                              : attach_once(name, peer_name);
    if (s == nullptr) return nullptr;
    return std::make_unique<shm::ShmLink>(s, rank_ < peer ? 0 : 1, peer, peer_name, peer_pid, name);
  }

  Segment* create(const std::string& name, const std::string& peer_name, int peer_pid) {
    const int fd = create_segment_file(name);
    if (fd < 0) fail(peer_name, "shm_open " + name, errno);
    const size_t size = shm::segment_size(capacity_);
    void* p = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(size)) == 0) {
      p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    const int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
      shm_unlink(name.c_str());
      fail(peer_name, "mapping " + name + " (" + std::to_string(size) + " bytes)", e);
    }
    auto* s = new (p) Segment;
    s->capacity = capacity_;
    s->ranks[0] = rank_;
    s->pids[0] = getpid();
    s->pids[1] = peer_pid;
    s->magic.store(shm::kReady, std::memory_order_release);
    return s;
  }

  Segment* attach(const std::string& name, const std::string& peer_name,
                  std::chrono::milliseconds timeout) {
    Segment* s = retry_until(timeout, std::chrono::microseconds(200),
                             [&] { return attach_once(name, peer_name); });
    if (s == nullptr) {
      throw TransportError(peer_name + ": no shared-memory segment from the peer within " +
                           seconds_text(timeout) + " (is it running on this host?)");
    }
    return s;
  }

  /// The segment `name` mapped and marked attached when its creator has finished it; nullptr
  /// before.
  Segment* attach_once(const std::string& name, const std::string& peer_name) {
    auto* s = static_cast<Segment*>(
        attach_segment_file(name, peer_name + ": ", shm::kDataOffset, [](const void* p, size_t n) {
          const auto* s = static_cast<const Segment*>(p);
          return s->magic.load(std::memory_order_acquire) == shm::kReady &&
                 shm::segment_size(s->capacity) == n;
        }));
    if (s == nullptr) return nullptr;
    s->ranks[1] = rank_;
    s->attached.store(1, std::memory_order_release);
    shm_unlink(name.c_str());
    return s;
  }

  [[noreturn]] void fail(const std::string& peer_name, const std::string& what, int error) {
    throw TransportError(peer_name + ": " + what + ": " + std::strerror(error));
  }

  int rank_;
  std::string job_;
  size_t capacity_;
};

}  // namespace

std::unique_ptr<Device> make_shm_device(const DeviceOptions& options) {
  return std::make_unique<ShmDevice>(options);
}

}  // namespace ddl::comm::transport
