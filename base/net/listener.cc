// A listener's guard against strangers (how it works in listener.h).

#include "base/net/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace ddl::base::net {

namespace {

/// Binds and listens `fd`, then reads back its port; false with errno set when it cannot.
bool bind_and_listen(int fd, sockaddr_storage& a, socklen_t size, int backlog, int& port) {
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), size) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) != 0) {
    return false;
  }
  port = ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&a)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  return true;
}

/// `address` and `port` as a socket address of `family`; false when `address` is not one.
bool socket_address(int family, const std::string& address, int port, sockaddr_storage& a) {
  a = sockaddr_storage{};
  a.ss_family = static_cast<sa_family_t>(family);
  if (family == AF_INET6) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&a);
    a6->sin6_port = htons(static_cast<uint16_t>(port));
    return address.empty() || inet_pton(AF_INET6, address.c_str(), &a6->sin6_addr) == 1;
  }
  auto* a4 = reinterpret_cast<sockaddr_in*>(&a);
  a4->sin_port = htons(static_cast<uint16_t>(port));
  return address.empty() || inet_pton(AF_INET, address.c_str(), &a4->sin_addr) == 1;
}

}  // namespace

// How it works: "" is IPv6's any address with IPv4 mapped (IPV6_V6ONLY off), or IPv4's any
// address when the host has no IPv6; a numeric address is bound in its own family alone.
Listening listen_tcp(const std::string& address, int port, int backlog) {
  Listening out;
  bool numeric = address.empty();
  for (const int family : {AF_INET6, AF_INET}) {
    sockaddr_storage a{};
    if (!socket_address(family, address, port, a)) continue;
    numeric = true;
    const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    const int v6only = address.empty() ? 0 : 1;
    if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    const socklen_t size = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (bind_and_listen(fd, a, size, backlog, out.port)) {
      out.fd = fd;
      return out;
    }
    const int e = errno;
    close(fd);
    errno = e;
    if (!address.empty()) return out;  // a numeric address has its one family
  }
  out.bad_address = !numeric;
  return out;
}

GuardLimits server_limits(std::chrono::milliseconds hello_time) {
  GuardLimits limits;
  limits.hello_time = hello_time;
  return limits;
}

ListenerGuard::Clock::time_point ListenerGuard::room_at() const {
  if (waiting_.size() < limits_.max_waiting) return Clock::time_point{};
  return waiting_.front().since + limits_.grace;
}

std::vector<ListenerGuard::Id> ListenerGuard::arrive(Id id) {
  const Clock::time_point now = Clock::now();
  waiting_.push_back({id, now});
  std::vector<Id> close;
  while (waiting_.size() > limits_.max_waiting && waiting_.front().id != id &&
         waiting_.front().since + limits_.grace <= now) {
    close.push_back(waiting_.front().id);
    waiting_.pop_front();
    if (!crowded_told_) {
      crowded_told_ = true;
      tell(notices_.crowded);
    }
  }
  return close;
}

void ListenerGuard::settled(Id id) {
  const auto it =
      std::find_if(waiting_.begin(), waiting_.end(), [id](const Waiting& w) { return w.id == id; });
  if (it != waiting_.end()) waiting_.erase(it);
}

std::vector<ListenerGuard::Id> ListenerGuard::overdue() {
  const Clock::time_point now = Clock::now();
  std::vector<Id> late;
  while (!waiting_.empty() && waiting_.front().since + limits_.hello_time < now) {
    late.push_back(waiting_.front().id);
    waiting_.pop_front();
  }
  return late;
}

ListenerGuard::Clock::time_point ListenerGuard::next_due() const {
  if (waiting_.empty()) return Clock::now() + std::chrono::hours(1);
  return waiting_.front().since + limits_.hello_time;
}

void ListenerGuard::refused(const std::string& line) {
  if (++refusals_ <= limits_.max_reports) tell(line);
  if (refusals_ == limits_.max_reports + 1) tell(notices_.more_refused);
}

}  // namespace ddl::base::net
