// What ssh/session.h offers besides libssh: the texts of its messages.

#include "ssh/session.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace ddl::ssh {

std::string descriptor_exhaustion(int err) {
  if (err == ENFILE) {
    return "the system's open files are exhausted (fs.file-max): close some, or raise it";
  }
  if (err != EMFILE) return "";
  rlimit limit{};
  const std::string n = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                            ? std::to_string(limit.rlim_cur)
                            : std::string("unknown");
  return "too many open files (limit " + n + "): raise ulimit -n";
}

std::string descriptors_exhausted_now() {
  const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return "";
  }
  return descriptor_exhaustion(errno);
}

bool write_some(Channel& channel, std::string& pending, bool* socket_full, std::size_t* wrote) {
  if (socket_full != nullptr) *socket_full = false;
  while (!pending.empty()) {
    if (!channel.flushed()) {
      if (socket_full != nullptr) *socket_full = true;
      return true;
    }
    const std::uint32_t window = channel.window();
    if (window == 0) return true;
    const int n = channel.write(
        std::string_view(pending).substr(0, std::min<size_t>(pending.size(), window)));
    if (n < 0) return false;
    if (n == 0) return true;
    pending.erase(0, static_cast<size_t>(n));
    if (wrote != nullptr) *wrote += static_cast<size_t>(n);
  }
  return true;
}

bool Outbox::write(Channel& channel) {
  std::size_t wrote = 0;
  const bool ok = write_some(channel, bytes_, &socket_full_, &wrote);
  const std::uint64_t moved = channel.moved();
  if (wrote > 0 || moved != moved_ || bytes_.empty()) last_progress_ = Clock::now();
  moved_ = moved;
  return ok;
}

bool Outbox::stalled(std::chrono::milliseconds deadline) const {
  return !bytes_.empty() && Clock::now() - last_progress_ > deadline;
}

}  // namespace ddl::ssh
