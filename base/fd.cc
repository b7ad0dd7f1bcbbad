#include "base/fd.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace ddl::base {

int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

Deadline::Clock::duration Deadline::left() const {
  return std::max(at_ - Clock::now(), Clock::duration::zero());
}

int Deadline::poll_ms(int cap_ms) const {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(at_ - Clock::now());
  return static_cast<int>(std::clamp<long long>(ms.count(), 0, cap_ms));
}

int AcceptRest::accept(int listen_fd, int flags) {
  const int fd = ::accept4(listen_fd, nullptr, nullptr, flags);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
    const int e = errno;
    until_ = Clock::now() + kRest;
    errno = e;
  }
  return fd;
}

short AcceptRest::events() const {
  return listening() ? POLLIN : 0;
}

int AcceptRest::poll_ms(int cap_ms) const {
  return listening() ? cap_ms : std::min(cap_ms, Deadline(until_).poll_ms(cap_ms));
}

}  // namespace ddl::base
