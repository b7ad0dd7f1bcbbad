#include "comm/transport/os.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/fd.h"
#include "comm/transport/link.h"

namespace ddl::comm::transport {

std::string safe_job(const std::string& job) {
  std::string out;
  for (char c : job.substr(0, 64))
    out.push_back(
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_');
  return out.empty() ? "job" : out;
}

std::string foreign_segment(int fd, const std::string& name) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return "fstat " + name + ": " + std::strerror(errno);
  if (st.st_uid == geteuid()) return "";
  return "the shared-memory segment " + name + " belongs to uid " + std::to_string(st.st_uid) +
         ", not to this rank's uid " + std::to_string(geteuid()) +
         ": another user of this host made a file of that name first; remove /dev/shm" + name +
         " (as that user or root), or give the job another DDL_JOB_ID";
}

int create_segment_file(const std::string& name) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {  // left by a crashed process with our pid
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  }
  return fd;
}

void* attach_segment_file(const std::string& name, const std::string& who, size_t min_bytes,
                          const SegmentReady& ready) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0 && errno == ENOENT) return nullptr;
  if (fd < 0) throw TransportError(who + "shm_open " + name + ": " + std::strerror(errno));
  const std::string foreign = foreign_segment(fd, name);
  struct stat st {};
  size_t bytes = 0;
  void* p = MAP_FAILED;
  if (foreign.empty() && fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= min_bytes) {
    bytes = static_cast<size_t>(st.st_size);
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (!foreign.empty()) throw TransportError(who + foreign);
  if (p == MAP_FAILED) return nullptr;
  if (ready(p, bytes)) return p;
  munmap(p, bytes);
  return nullptr;
}

int open_pidfd(int pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

void* map_reserved(int fd, size_t bytes, int* err) {
  *err = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (*err == 0) *err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (*err != 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p != MAP_FAILED) return p;
  *err = errno;
  return nullptr;
}

}  // namespace ddl::comm::transport
