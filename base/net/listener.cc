// Listening, socket chores and a listener's guard against strangers (listener.h).

#include "base/net/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/fd.h"

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

/// `a` as peer_address() writes it.
std::string address_text(const sockaddr_storage& a, bool with_port) {
  char host[INET6_ADDRSTRLEN] = "?";
  const bool v6 = a.ss_family == AF_INET6;
  const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&a);
  const auto* a4 = reinterpret_cast<const sockaddr_in*>(&a);
  if (v6) inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof host);
  if (a.ss_family == AF_INET) inet_ntop(AF_INET, &a4->sin_addr, host, sizeof host);
  std::string h = host;
  if (h.starts_with("::ffff:")) h = h.substr(7);  // IPv4, mapped
  if (!with_port || h == "?") return h;
  return h + ":" + std::to_string(ntohs(v6 ? a6->sin6_port : a4->sin_port));
}

}  // namespace

std::string peer_address(int fd, bool with_port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  return address_text(a, with_port);
}

std::string local_address(int fd, bool with_port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  return address_text(a, with_port);
}

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

std::string join_host_port(std::string_view host, unsigned port) {
  const bool v6 = host.find(':') != std::string_view::npos && !host.starts_with('[');
  return (v6 ? "[" + std::string(host) + "]" : std::string(host)) + ":" + std::to_string(port);
}

std::optional<std::pair<std::string, std::string>> split_host_port(std::string_view endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty()) return std::nullopt;
  return std::make_pair(std::string(host), std::string(endpoint.substr(colon + 1)));
}

Dialed dial(const std::string& host, const std::string& port,
            std::chrono::steady_clock::time_point deadline,
            const std::function<void(int fd)>& prepare, bool blocking) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  Dialed d;
  if (d.gai = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); d.gai != 0) return d;
  for (const addrinfo* a = found; a != nullptr && d.fd < 0; a = a->ai_next) {
    d.fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (d.fd < 0) {
      d.err = errno;
      continue;
    }
    if (prepare) prepare(d.fd);
    if (d.err = connect_before(d.fd, a->ai_addr, a->ai_addrlen, deadline); d.err != 0) {
      close(d.fd);
      d.fd = -1;
    }
  }
  freeaddrinfo(found);
  if (d.fd < 0) return d;
  const int one = 1;
  setsockopt(d.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (blocking) fcntl(d.fd, F_SETFL, fcntl(d.fd, F_GETFL) & ~O_NONBLOCK);
  return d;
}

int connect_before(int fd, const sockaddr* to, socklen_t length,
                   std::chrono::steady_clock::time_point deadline) {
  int err = 0;
  if (connect(fd, to, length) != 0) err = errno;
  if (err != EINPROGRESS) return err;
  pollfd p{fd, POLLOUT, 0};
  while (poll(&p, 1, Deadline(deadline).poll_ms()) <= 0 &&
         std::chrono::steady_clock::now() < deadline) {
  }
  if (p.revents == 0) return ETIMEDOUT;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

size_t read_upto(int fd, char* out, size_t n, std::chrono::steady_clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    const Deadline left(deadline);
    if (left.passed()) break;
    pollfd p{fd, POLLIN, 0};
    const int rc = poll(&p, 1, left.poll_ms());
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    const ssize_t k = recv(fd, out + got, n - got, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  return got;
}

void ListenerGuard::name(const std::string& name, int port, const std::string& crowding,
                         const std::string& refused) {
  const std::string at = " connecting to port " + std::to_string(port) + "?)";
  crowded_ = name + ": more than " + std::to_string(limits_.max_waiting) +
             " connections have not said hello; closing the oldest (is something other than " +
             crowding + at;
  more_refused_ =
      name + ": more refused connections are not shown (is something other than " + refused + at;
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
      tell(crowded_);
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
  if (refusals_ == limits_.max_reports + 1) tell(more_refused_);
}

}  // namespace ddl::base::net
