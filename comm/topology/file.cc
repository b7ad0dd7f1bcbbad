// The topology file: written atomically (a temporary file in the same directory, fsynced, renamed
// over the old one, the directory fsynced) and read through parse_topology.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/check.h"
#include "base/fd.h"
#include "comm/topology.h"
#include "comm/topology/internal.h"

namespace ddl::comm {

using topology::quote;

namespace {

using base::errno_text;

}  // namespace

namespace {

/// Throws TopologyError when `bytes` is more than a topology file may have.
void check_size(uint64_t bytes, const std::string& source) {
  if (bytes <= kMaxTopologyBytes) return;
  throw TopologyError(source + ": " + std::to_string(bytes) + " bytes, more than the " +
                      std::to_string(kMaxTopologyBytes) +
                      " a topology file may have (ddlrun writes a few hundred bytes a rank); "
                      "is this the topology file ddlrun wrote?");
}

}  // namespace

Topology parse_topology(std::string_view text, const std::string& source) {
  check_size(text.size(), source);
  if (std::optional<Topology> t = parse_topology_fast(text, source)) return std::move(*t);
  return parse_topology_generic(text, source);
}

void write_topology_file(const Topology& topology, const std::string& path) {
  try {
    validate(topology);
  } catch (const TopologyError& e) {
    throw TopologyError("refusing to write topology file " + quote(path) + ": " + e.what());
  }
  const std::string fail = "cannot write topology file " + quote(path) + ": ";

  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash ? slash : 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);

  // A name nobody else uses, in the same directory so that rename() replaces atomically.
  std::random_device random;
  std::string temp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, ".%08x%08x", random(), random());
    temp = (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "." + base + ".tmp" +
           suffix;
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && (errno != EEXIST || attempt == 100)) {
      throw TopologyError(fail + "cannot create a temporary file in " + quote(dir) + ": " +
                          errno_text(errno));
    }
  }

  const auto abandon = [&](const std::string& step, int error) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    throw TopologyError(fail + step + ": " + errno_text(error));
  };
  int write_error = 0;
  topology::write_topology_text(
      topology,
      [&](std::string_view text) {
        write_error = base::write_all(fd, text);
        return write_error == 0;
      },
      size_t{1} << 20);
  if (write_error != 0) abandon("write", write_error);
  if (::fsync(fd) != 0) abandon("fsync", errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) abandon("close", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) abandon("rename", errno);

  // Make the rename itself durable. Some file systems cannot fsync a directory (EINVAL).
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    throw TopologyError(fail + "cannot open directory " + quote(dir) + ": " + errno_text(errno));
  }
  if (::fsync(dir_fd) != 0 && errno != EINVAL) {
    const int error = errno;
    ::close(dir_fd);
    throw TopologyError(fail + "fsync of directory " + quote(dir) + ": " + errno_text(error));
  }
  ::close(dir_fd);
}

namespace {

/// What a file of mode `mode` is, in words, for one that is not a regular file.
std::string file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// Opens `path` for reading without blocking (a FIFO with no writer would block open() itself)
/// and refuses anything but a regular file by its type, before a byte is read: a FIFO could
/// block the read, /dev/zero never ends.
int open_regular(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw TopologyError("cannot read topology file " + quote(path) + ": " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    throw TopologyError("cannot read topology file " + quote(path) + ": " + errno_text(error));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw TopologyError("topology file " + quote(path) + " is " + file_kind(st.st_mode) +
                        ", not a regular file: give DDL_TOPOLOGY_FILE the file ddlrun wrote");
  }
  try {
    check_size(static_cast<uint64_t>(st.st_size), path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

}  // namespace

Topology read_topology_file(const std::string& path) {
  const int fd = open_regular(path);
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) text.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw TopologyError("cannot read topology file " + quote(path) + ": " + errno_text(error));
    }
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxTopologyBytes) break;  // grew while read: parse_topology refuses it
  }
  ::close(fd);
  return parse_topology(text, path);
}

}  // namespace ddl::comm
